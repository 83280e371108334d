"""Markdown (CommonMark with Obsidian's wiki links and YAML front matter, Logseq's pages: ``ingest.logseq``) ->
``ParsedDocument``."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from pathweaver.ingest import logseq, properties
from pathweaver.ingest.html_tables import COPY_MARK, pipe_tables
from pathweaver.ingest.parsed import (
    FENCE_RE,
    SUPPORTED_SUFFIXES,
    ParsedDocument,
    _dedupe,
    decode_text,
    line_starts,
    local_link_target,
    stem_title,
)

_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FM_TITLE_RE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_FM_ALIASES_RE = re.compile(r"^alias(?:es)?:[ \t]*(.*?)[ \t]*\n((?:[ \t]*-[ \t]*.*(?:\n|$))*)", re.MULTILINE)
_ATX_RE = re.compile(r"^[ ]{0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT_RE = re.compile(r"^[ ]{0,3}(=+|-+)[ \t]*$")
_HR_RE = re.compile(r"^[ ]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_RE = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
_QUOTE_RE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_TABLE_RULE_RE = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_REF_DEF_RE = re.compile(r"^[ ]{0,3}\[[^\]]+\]:[ \t]*\S+.*$")
# ``\|`` separates target and display text inside a table cell, where a bare "|" would end the cell
_WIKI_RE = re.compile(r"!?\[\[([^\[\]|]+?)(?:\\?\|([^\[\]]*?))?\]\]")
# what may stand before a link at the start of a sentence, a list item or a table cell: nothing, or a sentence end
# a block id closing a paragraph, list item or table row ("... text ^abc-1"), or alone on the line after it
_BLOCK_ID_RE = re.compile(r"(?:^|[ \t])\^([A-Za-z0-9-]+)[ \t]*$")
EMBED_MARK = "\ue000"  # stands before an embed's name in a line until its offset in the text is known
_SENTENCE_START_RE = re.compile(r"(?:^|[.!?:|>\u2022-])[\s*_\"'(\[\u201c]*$")
_IMAGE_RE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK_RE = re.compile(r"\[([^\]]*)\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+[\"'(][^)]*)?\s*\)")
_REF_LINK_RE = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK_RE = re.compile(r"<(?:https?|ftp|mailto):[^>\s]*>")
_HTML_TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>|<!--.*?-->")
_CODE_RE = re.compile(r"`+([^`]*)`+")
_EMPH_RE = re.compile(r"(?<![\w*])(\*{1,3}|_{1,3})(?=\S)(.+?)(?<=\S)\1(?![\w*])")
_STRIKE_RE = re.compile(r"~~(.+?)~~")


def _wiki_target(raw: str, namespaces: bool = False) -> str:
    """The note a wiki link names: its file name (Obsidian's ``[[folder/Note]]`` is a path), or in a Logseq page
    (``namespaces``) the whole name (``[[A/B]]`` is the namespace page "A/B")."""
    target = raw.split("#", 1)[0].split("^", 1)[0].strip()
    if namespaces and "/" in target and PurePosixPath(target).suffix.lower() not in SUPPORTED_SUFFIXES:
        return target
    name = PurePosixPath(target).name if target else ""
    return PurePosixPath(name).stem if PurePosixPath(name).suffix.lower() in SUPPORTED_SUFFIXES else name


def mid_sentence(before: str) -> bool:
    """Whether a link after ``before`` (its line so far) stands inside a sentence, where English capitalises only
    names, rather than where every text starts with a capital (a line, list item, table cell or sentence)."""
    return not _SENTENCE_START_RE.search(before)


def _fragment(raw: str) -> str:
    """The part of an embed after the note name: '' (the whole note), "^id" (a block) or the last heading."""
    if "#" not in raw:
        return ""
    parts = [p.strip() for p in raw.split("#")[1:] if p.strip()]
    return parts[-1] if parts else ""


def _md_inline(line: str, links: list[str], texts: list[tuple[str, str, bool]] | None = None,
               embeds: list[tuple[str, str]] | None = None, in_logseq: bool = False) -> str:
    """Inline Markdown -> readable text; local link targets are appended to ``links``, (target, display text,
    ``mid_sentence``) of links with a display text of their own to ``texts``, (target, fragment) of embeds to
    ``embeds`` (their name then follows an ``EMBED_MARK``); ``in_logseq``: a Logseq page's (``ingest.logseq``)."""

    def wiki(m: re.Match[str]) -> str:
        target = _wiki_target(m.group(1), in_logseq)
        links.append(target)
        if m.group(0).startswith("!") and embeds is not None and target:
            embeds.append((target, _fragment(m.group(1))))
            return EMBED_MARK + target
        shown = (m.group(2) or "").strip()
        if shown and texts is not None and not m.group(0).startswith("!"):
            texts.append((target, shown, mid_sentence(m.string[: m.start()])))
        return shown or target

    def md_link(m: re.Match[str]) -> str:
        target = local_link_target(m.group(2))
        if target:
            links.append(target)
            if texts is not None and m.group(1).strip():
                texts.append((target, m.group(1).strip(), mid_sentence(m.string[: m.start()])))
        return m.group(1)

    if in_logseq and embeds is not None:
        line = logseq.inline(line, links, embeds, EMBED_MARK)
    line = _CODE_RE.sub(lambda m: m.group(1), line)
    line = _WIKI_RE.sub(wiki, line)
    line = _IMAGE_RE.sub(lambda m: m.group(1), line)
    line = _MD_LINK_RE.sub(md_link, line)
    line = _REF_LINK_RE.sub(lambda m: m.group(1), line)
    line = _AUTOLINK_RE.sub("", line)
    line = _HTML_TAG_RE.sub("", line)
    line = _STRIKE_RE.sub(lambda m: m.group(1), line)
    for _ in range(2):  # nested emphasis ("***a** b*")
        line = _EMPH_RE.sub(lambda m: m.group(2), line)
    return line


def _unquote(value: str) -> str:
    return value.strip().strip("\"'").strip()


def front_matter_aliases(front: str) -> list[str]:
    """``aliases:`` (or ``alias:``) of YAML front matter: an inline ``[a, b]`` list, a comma-separated line, or a
    block of ``- item`` lines."""
    m = _FM_ALIASES_RE.search(front if front.endswith("\n") else front + "\n")
    if not m:
        return []
    inline, block = m.group(1).strip(), m.group(2)
    items = [line.strip()[1:] for line in block.splitlines() if line.strip().startswith("-")]
    if inline:
        items += inline.strip("[]").split(",")
    return _dedupe([_unquote(i) for i in items])


def _hidden_lines(source: str, n: int, shown: set[int]) -> list[tuple[int, int]]:
    """Ranges of ``source`` that hold its first ``n`` lines but those in ``shown``, adjacent ones merged."""
    starts = line_starts(source, n)
    out: list[tuple[int, int]] = []
    for line in range(n):
        if line in shown:
            continue
        if out and out[-1][1] == starts[line]:
            out[-1] = (out[-1][0], starts[line + 1])
        else:
            out.append((starts[line], starts[line + 1]))
    return out


def parse_markdown(path: Path, data: bytes) -> ParsedDocument:
    text = decode_text(data)
    fm_title = ""
    aliases: list[str] = []
    fm_props: list[properties.Property] = []
    fm_lines = 0  # lines of the file the front matter takes
    fm = _FRONT_MATTER_RE.match(text)
    if fm:
        t = _FM_TITLE_RE.search(fm.group(1) or "")
        fm_title = _unquote(t.group(1)) if t else ""
        aliases = front_matter_aliases(fm.group(1) or "")
        fm_props = properties.front_matter(fm.group(1) or "")
        fm_lines = fm.group(0).count("\n")
        text = text[fm.end() :]
    # the properties of the front matter and Logseq's page properties that the app shows as text open the text,
    # without their markup; the lines of the others are hidden from citations (``ingest.properties``)
    pairs = logseq.page_property_lines(text)
    props, rest = logseq.split_page_properties(text)
    shown, shown_lines = properties.shown(fm_props + properties.page_properties(pairs, fm_lines))
    source, hidden = (data.decode("utf-8") if fm or props else None), []
    if source is not None:
        hidden = _hidden_lines(source, fm_lines + len(pairs), set(shown_lines))
    text = shown + rest
    in_logseq = logseq.looks_like_logseq(path, props, text)
    links: list[str] = []
    for value in props.values():  # a property's [[value]] links to its page, as Logseq shows it
        _md_inline(value, links, in_logseq=True)
    for prop in fm_props:  # and so does a front-matter property's (Obsidian's "[[Note]]" values)
        for value in prop.values:
            _md_inline(value, links)
    if "alias" in props:
        aliases = _dedupe(aliases + logseq.property_names(props["alias"]))
    ns_title = logseq.namespace_title(path)
    page_title = props.get("title", "").strip() or fm_title or ns_title
    if in_logseq and logseq.last_part_alias(page_title):  # a namespace is Logseq's: "A/B" elsewhere is one name
        aliases = _dedupe(aliases + [logseq.last_part_alias(page_title)])
    text = pipe_tables(text)  # an HTML table's rows keep their headers, as a pipe table's do
    out: list[str] = []
    offset = 0
    headings: list[tuple[int, str]] = []
    h1 = ""
    link_texts: list[tuple[str, str, bool]] = []
    levels: list[int] = []
    embeds: list[tuple[int, str, str]] = []
    pending: list[tuple[str, str]] = []  # embeds of the line being read, in order
    blocks: dict[str, tuple[int, int]] = {}
    copied: list[tuple[int, int]] = []  # text a table cell's colspan or rowspan repeats (``html_tables``)
    para_start: int | None = None  # where the paragraph (or list, table) being read began
    last_para: tuple[int, int] | None = None
    lines: list[tuple[int, bool, int, int]] = []  # (indent, bullet, start, end) of each line written: Logseq blocks
    ids: list[tuple[str, int]] = []  # (uuid, index in ``lines`` of the line after) of Logseq's "id::" properties
    fence: str | None = None
    prev: tuple[int, str] | None = (
        None  # (offset, text) of the previous plain paragraph line: setext candidate
    )

    def emit(s: str) -> int:
        nonlocal offset
        start = offset
        parts = s.split(EMBED_MARK)
        s = parts[0]
        for part, (target, fragment) in zip(parts[1:], pending, strict=False):
            embeds.append((start + len(s.replace(COPY_MARK, "")), target, fragment))
            s += part
        pending.clear()
        if COPY_MARK in s:
            pieces, at = s.split(COPY_MARK), start
            for k, piece in enumerate(pieces):
                if k % 2 and piece:
                    copied.append((at, at + len(piece)))
                at += len(piece)
            s = "".join(pieces)
        out.append(s)
        offset += len(s) + 1
        return start

    for raw in text.split("\n"):
        if fence is not None:
            if raw.strip().startswith(fence):
                fence = None
            else:
                at = emit(raw)
                lines.append((logseq.indent_of(raw), False, at, at + len(out[-1])))
            continue
        fm_open = FENCE_RE.match(raw.lstrip() if in_logseq else raw)  # Logseq indents a bullet's code fence
        if fm_open:
            fence = fm_open.group(1)[0] * len(fm_open.group(1))
            prev = None
            continue
        setext = _SETEXT_RE.match(raw)
        if setext and prev is not None:
            headings.append(prev)
            levels.append(1 if setext.group(1)[0] == "=" else 2)
            if setext.group(1)[0] == "=" and not h1:
                h1 = prev[1]
            prev = None
            para_start = None
            continue
        listed = bool(_LIST_RE.match(raw))
        bullet = in_logseq and listed  # Logseq writes a heading as a bullet: "- ## Usage"
        atx = _ATX_RE.match(_LIST_RE.sub("", raw).lstrip() if bullet else raw)
        if atx:
            heading = _md_inline(atx.group(2) or "", links, link_texts).strip()
            if heading:
                headings.append((emit(heading), heading))
                indent = logseq.indent_of(raw) if bullet else 0
                lines.append((indent, bullet, headings[-1][0], headings[-1][0] + len(heading)))
                levels.append(len(atx.group(1)))
                para_start = None
                if len(atx.group(1)) == 1 and not h1:
                    h1 = heading
            prev = None
            continue
        if _HR_RE.match(raw) or _TABLE_RULE_RE.match(raw) or _REF_DEF_RE.match(raw):
            prev = None
            continue
        if in_logseq and logseq.DIRECTIVE_RE.match(raw):  # "#+BEGIN_NOTE" frames a block; it is no text of it
            continue
        prop = logseq.block_property(raw) if in_logseq else None
        if prop is not None:  # a block's property is no text of it; its id names the block
            if prop[0] == "id" and prop[1]:
                ids.append((prop[1], len(lines)))
            else:
                _md_inline(prop[1], links, in_logseq=True)
            continue
        line = _QUOTE_RE.sub("", raw)
        line = _LIST_RE.sub("", line)
        block = _BLOCK_ID_RE.search(line)
        if block:
            line = line[: block.start()]
        line = _md_inline(line, links, link_texts, pending, in_logseq).strip().strip("|").strip()
        if not line:
            if block and last_para is not None:  # "^id" alone under a paragraph, list or table names it
                blocks.setdefault(block.group(1), last_para)
            if out and out[-1] != "":
                emit("")
            prev = None
            para_start = None
            continue
        start = emit(line)
        lines.append((logseq.indent_of(raw), listed, start, start + len(out[-1])))
        para_start = start if para_start is None else para_start
        last_para = (para_start, start + len(out[-1]))
        if block:
            blocks.setdefault(block.group(1), last_para)
        is_plain = not listed and not _QUOTE_RE.match(raw)
        prev = (start, line) if is_plain and len(line) < 200 else None
    body = "\n".join(out).rstrip()
    for uuid, span in logseq.block_spans(lines, ids).items():
        blocks.setdefault(uuid, span)
    # a Logseq page is named by its file (or title::), never by a "# Usage" heading in it
    title = page_title or (logseq.file_title(path) if in_logseq else h1 or stem_title(path))
    if not body.strip():
        # a stub note (front matter alone, common in a zettelkasten) is still found by the names it gives itself
        body = "\n".join(_dedupe([page_title or (title if in_logseq else ""), *aliases]))
        hidden = []  # those names are cited to where the file gives them
    return ParsedDocument(body, title, headings, _dedupe(links), aliases=aliases,
                          link_texts=list(dict.fromkeys(link_texts)), embeds=embeds, heading_levels=levels,
                          blocks=blocks, copied=copied, source=source, hidden=hidden)
