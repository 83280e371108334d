"""A note's properties as the reader sees them: YAML front matter (Obsidian's Properties) and Logseq's page
properties (``key:: value`` lines, ``ingest.logseq``) follow one rule.

- A property is text when it says something about the note: a summary, a description, tags, a category, a type.
  Keys that name the note (``title``; the parser reads it and ``aliases`` as names) or steer the app or a
  publishing tool (Logseq's hidden built-ins, ``cssclasses``, ``publish``, ``permalink``, ``status`` ...) are not.
- Of a shown key, a value is text unless it is a date, a number, a boolean, a URL, a file or image path or a
  ``{{macro}}``; links and tags are written as their names (``[[Page]]`` -> "Page", ``#tag`` -> "tag").
- Each shown property is a "key: value" paragraph (list items joined by ", ") at the top of the note, where both
  apps show them; its citation span points into its own line(s) of the file, and the lines of every property not
  shown are hidden from citations (``ParsedDocument.hidden``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# names of the note, Logseq's built-ins it keeps off the page, and switches of Obsidian and of static-site tools
_HIDDEN = frozenset({
    "title", "id", "collapsed", "filters", "public", "icon", "exclude-from-graph-view", "heading",
    "cssclass", "cssclasses", "publish", "permalink", "slug", "layout", "template", "draft", "status", "lang",
    "redirect_from", "cover", "image", "banner", "logo", "thumbnail",
})
_KEY_RE = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
_NOT_TEXT_RE = re.compile(
    r"(?:true|false|yes|no|on|off|null|~)"  # booleans and nothing
    r"|[-+]?\d+(?:\.\d+)?"  # numbers
    r"|\d{4}-\d\d-\d\d(?:[ T]\d\d?:\d\d(?::\d\d)?\S*)?"  # dates, with a time
    r"|(?:[A-Za-z][\w+.-]*://|www\.|mailto:)\S*"  # URLs
    r"|\.{0,2}/\S*|\S+\.(?:png|jpe?g|gif|svg|webp|avif|bmp|pdf|mp[34]|webm|mov)"  # paths, images and media
    r"|\{\{.*\}\}",  # a Logseq macro ({{docs-base-url Page}})
    re.IGNORECASE,
)
LINK_RE = re.compile(r"\[\[([^\[\]]+)\]\]")  # a page link in a property value, Obsidian's or Logseq's
_NESTED_RE = re.compile(r"^[ \t]+[A-Za-z_][\w.-]*[ \t]*:(?:[ \t]|$)")  # a nested mapping's key: no text of ours
_HTML_TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>")


@dataclass
class Property:
    """One property: its key, its values (one, or a list's items) and the lines (from 0) of the file it spans."""

    key: str
    values: list[str]
    lines: list[int]


def _unquote(value: str) -> str:
    return value.strip().strip("\"'").strip()


def _inline(value: str) -> list[str]:
    """The values of a front-matter key's own line: '' or a block scalar mark (its lines follow), ``[a, b]``, one."""
    value = value.strip()
    if not value or value in (">", "|", ">-", "|-", ">+", "|+"):
        return []
    if value.startswith("[") and value.endswith("]") and not value.startswith("[["):
        return [_unquote(v) for v in value[1:-1].split(",")]
    return [_unquote(value)]


def front_matter(front: str, first_line: int = 1) -> list[Property]:
    """The top-level keys of YAML front matter (``front``, the text between the fences, which begins on line
    ``first_line`` of the file) with their values: on the key's line, as ``- item`` lines, or folded lines."""
    out: list[Property] = []
    for i, line in enumerate(front.split("\n")):
        m = _KEY_RE.match(line)
        if m:
            out.append(Property(m.group(1), _inline(m.group(2) or ""), [first_line + i]))
        elif out and line.strip() and line[0] in " \t-" and not _NESTED_RE.match(line):
            item, prop = line.strip(), out[-1]
            if item == "-" or item.startswith("- "):
                prop.values.append(_unquote(item[1:]))
            elif prop.values:  # a plain or block scalar's next line folds into it
                prop.values[-1] = f"{prop.values[-1]} {item}"
            else:
                prop.values.append(_unquote(item))
            prop.lines.append(first_line + i)
    return out


def page_properties(pairs: Iterable[tuple[str, str]], first_line: int) -> list[Property]:
    """Logseq's page properties, (key, value) of each line from line ``first_line`` of the file on; a key written
    twice keeps its first line, as ``logseq.split_page_properties`` does."""
    out: dict[str, Property] = {}
    for i, (key, value) in enumerate(pairs):
        out.setdefault(key, Property(key, [value], [first_line + i]))
    return list(out.values())


def _text(value: str) -> str:
    """A value as the app shows it: links and tags as their names, no HTML tags."""
    return _HTML_TAG_RE.sub("", LINK_RE.sub(r"\1", value)).replace("#", "").strip()


def shown(props: Iterable[Property]) -> tuple[str, list[int]]:
    """(the "key: value" paragraphs of the properties that are text, each followed by a blank line; '' when none,
    the file lines they span)."""
    text, lines = "", []
    for prop in props:
        if prop.key.lower() in _HIDDEN or prop.key.lower().startswith("logseq."):
            continue
        values = [_text(v) for v in prop.values if v.strip() and not _NOT_TEXT_RE.fullmatch(v.strip())]
        values = [v for v in values if v]
        if values:
            text += f"{prop.key}: {', '.join(values)}\n\n"  # a paragraph each: none reads on into the next
            lines += prop.lines
    return text, lines
