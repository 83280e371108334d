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
_TAG = r"""(?:"[^"]*"|'[^']*'|[^'">])*>"""  # the rest of a tag: quoted attribute values may hold ">"
# What a reader never sees as text, in the order it must be tried: comments, the elements whose content is not
# body text (the parser skips them; ``title`` is read as the title only), then any other tag or declaration.
_MARKUP_RE = re.compile(
    r"<!--.*?(?:-->|\Z)"
    rf"|<(head|title|{'|'.join(sorted(_SKIP_TAGS - {'head'}))})\b{_TAG}.*?(?:</\1\s*>|(?=<body\b)|\Z)"
    rf"|<[/!?]?[A-Za-z]{_TAG}",
    re.IGNORECASE | re.DOTALL,
)


def markup_ranges(source: str) -> list[tuple[int, int]]:
    """The ranges of decoded HTML that hold markup rather than text: tags, comments, and the head, title, script,
    style and other skipped elements whole (a citation span starting in ``<title>`` would quote the style sheet)."""
    return [m.span() for m in _MARKUP_RE.finditer(source)]


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
