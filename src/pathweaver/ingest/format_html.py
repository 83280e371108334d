"""HTML -> ``ParsedDocument`` (BeautifulSoup): block text, headings and links; scripts and styles dropped."""

from __future__ import annotations

import re
from pathlib import Path

from pathweaver.ingest.parsed import (
    ParsedDocument,
    ParseError,
    TextBuilder,
    _dedupe,
    local_link_target,
    stem_title,
)

_BLOCK_TAG_NAMES = (
    "address article aside blockquote body caption dd details div dl dt fieldset figcaption figure footer form "
    "header hr li main nav ol p pre section summary table tbody td tfoot th thead tr ul br"
)
_BLOCK_TAGS = frozenset(_BLOCK_TAG_NAMES.split())
_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "head", "svg", "iframe", "object"})
_HEADING_TAGS = {f"h{n}": n for n in range(1, 7)}
_OPEN_RE = re.compile(r"<(!--|[/!?]?[A-Za-z][A-Za-z0-9:-]*)")  # where a comment, tag or declaration begins
_TAG_END_RE = re.compile(r"""[>"']""")
# Elements whose content is not body text (the parser skips them; ``title`` is read as the title only).
_WHOLE = _SKIP_TAGS | {"title"}


def _tag_end(source: str, at: int) -> int:
    """The offset just past the ``>`` that closes the tag whose name ends at ``at`` (a quoted attribute value may
    hold ">"), or the end of ``source`` when none does."""
    while (m := _TAG_END_RE.search(source, at)) is not None:
        if m.group() == ">":
            return m.end()
        close = source.find(m.group(), m.end())
        if close < 0:
            break
        at = close + 1
    return len(source)


def markup_ranges(source: str) -> list[tuple[int, int]]:
    """The ranges of decoded HTML that hold markup rather than text: tags, comments, and the head, title, script,
    style and other skipped elements whole (a citation span starting in ``<title>`` would quote the style sheet).
    One pass forward with ``find``: linear in the file, whatever it holds (a regex over unclosed tags is not)."""
    lower = source.lower()
    out: list[tuple[int, int]] = []
    at = 0
    while (m := _OPEN_RE.search(source, at)) is not None:
        token = m.group(1).lower()
        if token == "!--":
            close = lower.find("-->", m.end())
            end = len(source) if close < 0 else close + 3
        else:
            end = _tag_end(source, m.end())
            if token in _WHOLE:
                close = lower.find(f"</{token}", end)
                body = lower.find("<body", end) if token == "head" else -1
                if body >= 0 and (close < 0 or body < close):
                    end = body  # no </head> before <body>: the head ends where the body begins
                else:
                    end = len(source) if close < 0 else _tag_end(source, close + 2)
        out.append((m.start(), end))
        at = end
    return out


def parse_html(path: Path, data: bytes) -> ParsedDocument:
    from bs4 import BeautifulSoup
    from bs4.element import Comment, Declaration, Doctype, NavigableString, ProcessingInstruction, Tag

    try:
        soup = BeautifulSoup(data, "html.parser")
    except Exception as exc:  # html.parser is lenient; this covers undecodable or pathological input
        raise ParseError(f"malformed HTML: {exc}") from None
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag else ""
    b = TextBuilder()
    headings: list[tuple[int, str]] = []
    links: list[str] = []
    h1 = ""

    def walk(node: Tag, pre: bool) -> None:
        nonlocal h1
        for child in node.children:
            if isinstance(child, (Comment, Declaration, Doctype, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                b.inline(str(child), keep_whitespace=pre)
                continue
            if not isinstance(child, Tag) or child.name in _SKIP_TAGS:
                continue
            name = child.name.lower()
            if name in _HEADING_TAGS:
                heading = re.sub(r"\s+", " ", child.get_text(" ")).strip()
                if heading:
                    b.line_break(blank=True)
                    headings.append((b.length, heading))
                    b.inline(heading)
                    b.line_break(blank=True)
                    if _HEADING_TAGS[name] == 1 and not h1:
                        h1 = heading
                continue
            if name == "a" and child.get("href"):
                target = local_link_target(str(child.get("href")))
                if target:
                    links.append(target)
            block = name in _BLOCK_TAGS
            if block:
                b.line_break(blank=name in ("p", "pre", "blockquote", "table", "section", "article"))
            walk(child, pre or name == "pre")
            if block:
                b.line_break(blank=name in ("p", "pre", "blockquote", "table", "section", "article"))

    walk(soup, False)
    source = data.decode(soup.original_encoding or "utf-8", errors="replace")
    return ParsedDocument(b.text(), title or h1 or stem_title(path), headings, _dedupe(links), source,
                          hidden=markup_ranges(source))
