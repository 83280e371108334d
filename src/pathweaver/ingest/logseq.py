"""Logseq pages: what the Markdown parser (``format_markdown``) reads differently in a page Logseq wrote.

- Page properties: ``key:: value`` lines at the very top of a page (its first block) name it (``title::``,
  ``alias::``); which of them stay its text, and how, is the rule YAML front matter follows too
  (``ingest.properties``); the same line inside a note's body is text (an Obsidian Dataview inline field).
- Namespace pages: the file ``A___B.md`` (or ``A%2FB.md``) is the page "A/B", which ``[[A/B]]`` links to.
- Block properties: a ``key:: value`` line under a bullet (or a bullet of them) leaves the text; ``id:: <uuid>``
  names the bullet's block (with its children) for ``{{embed ((uuid))}}``.
- ``{{embed [[Page]]}}`` and ``{{embed ((uuid))}}`` are embeds (``ingest.embeds``); a bare ``((uuid))`` block
  reference leaves the text: a uuid is no word anyone searches for, and the embed machinery adds chunks after the
  note's own, it cannot put the block's words inside the sentence that refers to it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote

from pathweaver.ingest.properties import LINK_RE

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_PAGE_PROP_RE = re.compile(r"^([A-Za-z][\w.-]*)::(?:[ \t]+(.*?))?[ \t]*$")
# under a bullet, or a bullet of properties alone ("- type:: [[Command]]"); only ever looked for in a Logseq page
_BLOCK_PROP_RE = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?([A-Za-z][\w.-]*)::(?:[ \t]+(.*?))?[ \t]*$")
# a bullet whose next line is an indented property: how Logseq writes a block's properties, and no other app does
_BULLET_PROPERTY_RE = re.compile(r"^[ \t]*[-*+][ \t](?![\w.-]+::).*\n[ \t]+[A-Za-z][\w.-]*::(?:[ \t]|$)", re.MULTILINE)
_BLOCK_ID_RE = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?id::[ \t]*(" + UUID + r")[ \t]*$", re.MULTILINE)
_EMBED_RE = re.compile(r"\{\{\{?embed[ \t]+(?:\[\[([^\[\]]+)\]\]|\(\((" + UUID + r")\)\))[ \t]*\}\}\}?")
_BLOCK_REF_RE = re.compile(r"\(\((" + UUID + r")\)\)")
_CODE_SPAN_RE = re.compile(r"(`+)[^`]*?\1")
_NAMESPACE_RE = re.compile(r"___|%2F", re.IGNORECASE)
# an org-mode block's frame line, which Logseq reads in Markdown too ("#+BEGIN_NOTE", "- #+END_QUERY")
DIRECTIVE_RE = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?#\+(?:BEGIN|END)_[A-Za-z]+\b.*$")


def uuid_key(uuid: str) -> str:
    """The embed target name of a block embed ``{{embed ((uuid))}}``: what ``embeds.NoteIndex`` resolves."""
    return f"(({uuid.lower()}))"


def block_uuid(name: str) -> str | None:
    """The uuid of a ``uuid_key`` name, None for a page name."""
    m = re.fullmatch(r"\(\((" + UUID + r")\)\)", name.strip())
    return m.group(1).lower() if m else None


def page_property_lines(text: str) -> list[tuple[str, str]]:
    """(key, value) of each ``key:: value`` line that opens ``text`` (keys in lower case)."""
    out: list[tuple[str, str]] = []
    for line in text.split("\n"):
        m = _PAGE_PROP_RE.match(line)
        if not m:
            break
        out.append((m.group(1).lower(), (m.group(2) or "").strip()))
    return out


def split_page_properties(text: str) -> tuple[dict[str, str], str]:
    """({key: value} of the ``key:: value`` lines that open ``text``, the text after them); ({}, text) without."""
    pairs = page_property_lines(text)
    if not pairs:
        return {}, text
    props: dict[str, str] = {}
    for key, value in pairs:
        props.setdefault(key, value)  # a key written twice keeps its first value
    return props, "\n".join(text.split("\n")[len(pairs):])


def property_names(value: str) -> list[str]:
    """The page names of a property value: ``[[A]], [[B]]``, ``A, B`` or ``#tag``."""
    names = [m.strip() for m in LINK_RE.findall(value)]
    rest = LINK_RE.sub(",", value)
    names += [p.strip().lstrip("#").strip() for p in rest.split(",")]
    return [n for n in dict.fromkeys(names) if n]


def namespace_title(path: Path) -> str:
    """"A/B" for a namespace page ``A___B.md`` or ``A%2FB.md`` (Logseq's file names), '' for any other file."""
    if not _NAMESPACE_RE.search(path.stem):
        return ""
    return unquote(path.stem.replace("___", "/")).strip()


def page_key_name(path: Path) -> str:
    """The page name Logseq gives the file (``A___B.md`` -> "A/B", ``Why%3F.md`` -> "Why?"), or its stem."""
    return namespace_title(path) or (unquote(path.stem) if "%" in path.stem else path.stem)


def file_title(path: Path) -> str:
    """The title of a Logseq page without ``title::``: its page name, '_' and '-' read as spaces as
    ``parsed.stem_title`` reads them (a namespace page's name is kept whole, so ``[[A/B]]`` finds it)."""
    return namespace_title(path) or re.sub(r"\s+", " ", re.sub(r"[_\-]+", " ", page_key_name(path))).strip() \
        or path.name


def last_part_alias(title: str) -> str:
    """The last part of a namespace title when it is a name of two words or more ("Whiteboard/Element locking" ->
    "Element locking"); one word ("Whiteboard/Dashboard" -> "Dashboard") is too generic to stand for the page."""
    if "/" not in title:
        return ""
    last = title.rsplit("/", 1)[1].strip()
    return last if len(last.split()) >= 2 else ""


def outliner(text: str) -> bool:
    """Whether every line of ``text`` is a ``- `` bullet or indented under one (the whole page one outline, as
    Logseq writes every page; a note that opens with a heading or a paragraph is no outline)."""
    lines = [line for line in text.split("\n") if line.strip()]
    return bool(lines) and lines[0].startswith("- ") and all(
        line.startswith(("- ", " ", "\t")) or line == "-" for line in lines)


def looks_like_logseq(path: Path, props: dict[str, str], text: str) -> bool:
    """Whether a page was written by Logseq: page properties, a namespace file name, a block's property line
    under its bullet, a ``((uuid))`` block reference, an ``{{embed}}``, or a page that is one outline."""
    return (bool(props) or bool(namespace_title(path)) or bool(_BULLET_PROPERTY_RE.search(text))
            or bool(_BLOCK_REF_RE.search(text)) or bool(_EMBED_RE.search(text)) or outliner(text))


def block_ids(data: bytes) -> list[str]:
    """The uuids Logseq's ``id::`` block properties give in a note's bytes (lower case)."""
    if b"id::" not in data:
        return []
    return [u.lower() for u in _BLOCK_ID_RE.findall(data.decode("utf-8", "replace"))]


def block_property(raw: str) -> tuple[str, str] | None:
    """(key, value) of an indented block property line, None for any other line."""
    m = _BLOCK_PROP_RE.match(raw)
    return (m.group(1).lower(), (m.group(2) or "").strip()) if m else None


def inline(line: str, links: list[str], pending: list[tuple[str, str]], mark: str) -> str:
    """``line`` with its embed macros turned into ``mark`` + the page name shown (their (target, fragment) added
    to ``pending``, a page's name to ``links``) and its ``((uuid))`` block references dropped; code spans stay."""

    def embed(m: re.Match[str]) -> str:
        if m.group(1):
            page = m.group(1).strip()
            links.append(page)
            pending.append((page, ""))
            return mark + page
        pending.append((uuid_key(m.group(2)), "^" + m.group(2).lower()))
        return mark

    if "{{" not in line and "((" not in line:
        return line
    out: list[str] = []
    at = 0
    for code in [*_CODE_SPAN_RE.finditer(line), None]:
        end = code.start() if code else len(line)
        part = _EMBED_RE.sub(embed, line[at:end])
        out.append(_BLOCK_REF_RE.sub("", part))
        if code:
            out.append(code.group(0))
            at = code.end()
    return "".join(out)


def indent_of(raw: str) -> int:
    """The width of a line's leading whitespace, a tab as four columns."""
    expanded = raw.expandtabs(4)
    return len(expanded) - len(expanded.lstrip(" "))


def block_spans(lines: Sequence[tuple[int, bool, int, int]],
                ids: Sequence[tuple[str, int]]) -> dict[str, tuple[int, int]]:
    """{uuid: span in the text} of each ``id::`` (uuid, index of the next line in ``lines``): the nearest bullet
    before it with every line indented deeper after it (its children), as Logseq embeds a block. ``lines``:
    (indent, is a bullet, start, end) of each line written to the text."""
    out: dict[str, tuple[int, int]] = {}
    for uuid, k in ids:
        j = next((i for i in range(min(k, len(lines)) - 1, -1, -1) if lines[i][1]), k - 1)
        if j < 0:
            continue
        last = j
        while last + 1 < len(lines) and lines[last + 1][0] > lines[j][0]:
            last += 1
        out.setdefault(uuid.lower(), (lines[j][2], lines[last][3]))
    return out
