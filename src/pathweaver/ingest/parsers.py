"""Format parsers: bytes of one file -> plain text, title, headings (with character offsets) and link targets.

The text is what the chunker splits, so every heading offset is an index into ``ParsedDocument.text``; citations
point into ``ParsedDocument.source``, the decoded file (``ingest.spans``). Markup noise (link URLs, emphasis markers, front matter, scripts) is removed; link text
and heading text are kept.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(
    {".md", ".markdown", ".txt", ".rst", ".html", ".htm", ".pdf", ".docx"}
)
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
# Suffixes a relative link may carry and still name a local document (no suffix is accepted too, as in Obsidian).
_LINKABLE_SUFFIXES = SUPPORTED_SUFFIXES | {""}


class ParseError(ValueError):
    """A file cannot be turned into text; the message is the readable reason ("invalid UTF-8 at byte 12")."""


@dataclass
class ParsedDocument:
    """Plain text of one document plus the structure its author wrote."""

    text: str
    title: str
    headings: list[tuple[int, str]] = field(default_factory=list)  # (char offset in text, heading text)
    links: list[str] = field(default_factory=list)  # link target names (not URLs)
    # The file decoded (line endings and a BOM kept): what citation spans index (``ingest.spans``); None for PDF
    # and DOCX, which give ``units`` instead: (offset in text, "page 3" or "paragraph 7") where each unit begins.
    source: str | None = None
    units: list[tuple[int, str]] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)  # other names of the document (Markdown front-matter aliases:)
    # (link target, display text) of Markdown links that show a text of their own: ``[[Target|text]]``, ``[text](t.md)``
    link_texts: list[tuple[str, str]] = field(default_factory=list)


def stem_title(path: Path) -> str:
    """Fallback title from the file name: stem with '_' and '-' turned into spaces."""
    return re.sub(r"\s+", " ", re.sub(r"[_\-]+", " ", path.stem)).strip() or path.name


def local_link_target(href: str) -> str | None:
    """Stem of the local file a relative link points to, or None for URLs, anchors and non-document files."""
    href = href.strip().strip("<>")
    if not href or href.startswith(("#", "/", "\\")):
        return None
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        return None
    name = PurePosixPath(unquote(parts.path)).name
    if not name or name in (".", ".."):
        return None
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in _LINKABLE_SUFFIXES:
        return None
    return PurePosixPath(name).stem if suffix else name


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def decode_text(data: bytes) -> str:
    """UTF-8 (BOM accepted) with newlines normalised to '\\n'; ParseError on invalid bytes."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(f"invalid UTF-8 at byte {exc.start}") from None
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")


class TextBuilder:
    """Accumulates output text while tracking offsets; collapses inline whitespace and blank lines."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.last = "\n"  # last character written ("\n" at the start: no leading whitespace)
        self.newlines = 2  # trailing newlines written so far (2 at the start: no leading blank lines)

    def _write(self, s: str) -> None:
        self.parts.append(s)
        self.length += len(s)
        self.last = s[-1]

    def inline(self, s: str, keep_whitespace: bool = False) -> None:
        """Append running text; whitespace runs become one space unless ``keep_whitespace`` (pre blocks)."""
        if not keep_whitespace:
            s = re.sub(r"\s+", " ", s)
            if self.last in " \n":
                s = s.lstrip(" ")
        if s:
            self._write(s)
            self.newlines = len(s) - len(s.rstrip("\n")) if s.strip("\n") else self.newlines + s.count("\n")

    def line_break(self, blank: bool = False) -> None:
        """End the current line (``blank``: leave an empty line too); never more than one blank line."""
        want = 2 if blank else 1
        while self.parts and self.last == " ":
            trimmed = self.parts[-1].rstrip(" ")
            self.length -= len(self.parts[-1]) - len(trimmed)
            if trimmed:
                self.parts[-1] = trimmed
            else:
                self.parts.pop()
            self.last = self.parts[-1][-1] if self.parts else "\n"
        while self.newlines < want:
            self._write("\n")
            self.newlines += 1

    def text(self) -> str:
        return "".join(self.parts).rstrip()


# ---------------------------------------------------------------- Markdown

_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FM_TITLE_RE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_FM_ALIASES_RE = re.compile(r"^alias(?:es)?:[ \t]*(.*?)[ \t]*\n((?:[ \t]*-[ \t]*.*(?:\n|$))*)", re.MULTILINE)
_ATX_RE = re.compile(r"^[ ]{0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT_RE = re.compile(r"^[ ]{0,3}(=+|-+)[ \t]*$")
_FENCE_RE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})")
_HR_RE = re.compile(r"^[ ]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_RE = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
_QUOTE_RE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_TABLE_RULE_RE = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_REF_DEF_RE = re.compile(r"^[ ]{0,3}\[[^\]]+\]:[ \t]*\S+.*$")
_WIKI_RE = re.compile(r"!?\[\[([^\[\]|]+?)(?:\|([^\[\]]*?))?\]\]")
_IMAGE_RE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK_RE = re.compile(r"\[([^\]]*)\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+[\"'(][^)]*)?\s*\)")
_REF_LINK_RE = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK_RE = re.compile(r"<(?:https?|ftp|mailto):[^>\s]*>")
_HTML_TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>|<!--.*?-->")
_CODE_RE = re.compile(r"`+([^`]*)`+")
_EMPH_RE = re.compile(r"(?<![\w*])(\*{1,3}|_{1,3})(?=\S)(.+?)(?<=\S)\1(?![\w*])")
_STRIKE_RE = re.compile(r"~~(.+?)~~")


def _wiki_target(raw: str) -> str:
    target = raw.split("#", 1)[0].split("^", 1)[0].strip()
    name = PurePosixPath(target).name if target else ""
    return PurePosixPath(name).stem if PurePosixPath(name).suffix.lower() in SUPPORTED_SUFFIXES else name


def _md_inline(line: str, links: list[str], texts: list[tuple[str, str]] | None = None) -> str:
    """Inline Markdown -> readable text; local link targets are appended to ``links``, (target, display text) of
    links with a display text of their own to ``texts``."""

    def wiki(m: re.Match[str]) -> str:
        target = _wiki_target(m.group(1))
        links.append(target)
        shown = (m.group(2) or "").strip()
        if shown and texts is not None and not m.group(0).startswith("!"):
            texts.append((target, shown))
        return shown or target

    def md_link(m: re.Match[str]) -> str:
        target = local_link_target(m.group(2))
        if target:
            links.append(target)
            if texts is not None and m.group(1).strip():
                texts.append((target, m.group(1).strip()))
        return m.group(1)

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


def _parse_markdown(path: Path, data: bytes) -> ParsedDocument:
    text = decode_text(data)
    fm_title = ""
    aliases: list[str] = []
    fm = _FRONT_MATTER_RE.match(text)
    if fm:
        t = _FM_TITLE_RE.search(fm.group(1) or "")
        fm_title = _unquote(t.group(1)) if t else ""
        aliases = front_matter_aliases(fm.group(1) or "")
        text = text[fm.end() :]
    out: list[str] = []
    offset = 0
    headings: list[tuple[int, str]] = []
    h1 = ""
    links: list[str] = []
    link_texts: list[tuple[str, str]] = []
    fence: str | None = None
    prev: tuple[int, str] | None = (
        None  # (offset, text) of the previous plain paragraph line: setext candidate
    )

    def emit(s: str) -> int:
        nonlocal offset
        start = offset
        out.append(s)
        offset += len(s) + 1
        return start

    for raw in text.split("\n"):
        if fence is not None:
            if raw.strip().startswith(fence):
                fence = None
            else:
                emit(raw)
            continue
        fm_open = _FENCE_RE.match(raw)
        if fm_open:
            fence = fm_open.group(1)[0] * len(fm_open.group(1))
            prev = None
            continue
        setext = _SETEXT_RE.match(raw)
        if setext and prev is not None:
            headings.append(prev)
            if setext.group(1)[0] == "=" and not h1:
                h1 = prev[1]
            prev = None
            continue
        atx = _ATX_RE.match(raw)
        if atx:
            heading = _md_inline(atx.group(2) or "", links, link_texts).strip()
            if heading:
                headings.append((emit(heading), heading))
                if len(atx.group(1)) == 1 and not h1:
                    h1 = heading
            prev = None
            continue
        if _HR_RE.match(raw) or _TABLE_RULE_RE.match(raw) or _REF_DEF_RE.match(raw):
            prev = None
            continue
        line = _QUOTE_RE.sub("", raw)
        line = _LIST_RE.sub("", line)
        line = _md_inline(line, links, link_texts).strip().strip("|").strip()
        if not line:
            if out and out[-1] != "":
                emit("")
            prev = None
            continue
        start = emit(line)
        is_plain = not _LIST_RE.match(raw) and not _QUOTE_RE.match(raw)
        prev = (start, line) if is_plain and len(line) < 200 else None
    body = "\n".join(out).rstrip()
    return ParsedDocument(body, fm_title or h1 or stem_title(path), headings, _dedupe(links), aliases=aliases,
                          link_texts=list(dict.fromkeys(link_texts)))


# ---------------------------------------------------------------- reStructuredText

_RST_ADORN_CHARS = "=-~^\"'`:+*#_.<>"
_RST_ROLE_RE = re.compile(r":(\w[\w.-]*):`([^`]*)`")
_RST_LINK_RE = re.compile(r"`([^`<]*?)\s*<([^>]+)>`_{1,2}")
_RST_INLINE_RE = re.compile(r"(\*\*|\*|``)(\S(?:.*?\S)?)\1")
_RST_REF_RE = re.compile(r"`([^`]+)`_{1,2}|(\w+)__?(?!\w)")


def _is_adornment(line: str) -> bool:
    s = line.rstrip()
    return len(s) >= 3 and s[0] in _RST_ADORN_CHARS and s == s[0] * len(s)


def _rst_inline(line: str, links: list[str]) -> str:
    def role(m: re.Match[str]) -> str:
        body = m.group(2)
        inner = re.match(r"(.*?)\s*<([^>]+)>$", body)
        label, target = (inner.group(1), inner.group(2)) if inner else (body, body)
        if m.group(1) == "doc":
            links.append(PurePosixPath(target.strip()).name)
        return label or target

    def link(m: re.Match[str]) -> str:
        target = local_link_target(m.group(2))
        if target:
            links.append(target)
        return m.group(1) or m.group(2)

    line = _RST_ROLE_RE.sub(role, line)
    line = _RST_LINK_RE.sub(link, line)
    line = _RST_INLINE_RE.sub(lambda m: m.group(2), line)
    return _RST_REF_RE.sub(lambda m: m.group(1) or m.group(2), line)


def _parse_rst(path: Path, data: bytes) -> ParsedDocument:
    lines = decode_text(data).split("\n")
    out: list[str] = []
    offset = 0
    headings: list[tuple[int, str]] = []
    links: list[str] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if _is_adornment(raw) and i + 2 < len(lines) and _is_adornment(lines[i + 2]) and lines[i + 1].strip():
            raw, nxt, i = lines[i + 1], lines[i + 2], i + 1  # over- and underlined title
        if (
            raw.strip()
            and not _is_adornment(raw)
            and _is_adornment(nxt)
            and len(nxt.rstrip()) >= len(raw.strip())
        ):
            heading = _rst_inline(raw.strip(), links)
            headings.append((offset, heading))
            out.append(heading)
            offset += len(heading) + 1
            i += 2
            continue
        if _is_adornment(raw) or raw.lstrip().startswith(".. "):
            i += 1
            continue
        line = _rst_inline(raw.strip(), links)
        if line or (out and out[-1]):
            out.append(line)
            offset += len(line) + 1
        i += 1
    title = headings[0][1] if headings else stem_title(path)
    return ParsedDocument("\n".join(out).rstrip(), title, headings, _dedupe(links))


# ---------------------------------------------------------------- plain text


def _parse_txt(path: Path, data: bytes) -> ParsedDocument:
    return ParsedDocument(decode_text(data).strip("\n").rstrip(), stem_title(path), [], [])


# ---------------------------------------------------------------- HTML

_BLOCK_TAG_NAMES = (
    "address article aside blockquote body caption dd details div dl dt fieldset figcaption figure footer form "
    "header hr li main nav ol p pre section summary table tbody td tfoot th thead tr ul br"
)
_BLOCK_TAGS = frozenset(_BLOCK_TAG_NAMES.split())
_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "head", "svg", "iframe", "object"})
_HEADING_TAGS = {f"h{n}": n for n in range(1, 7)}


def _parse_html(path: Path, data: bytes) -> ParsedDocument:
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
    return ParsedDocument(b.text(), title or h1 or stem_title(path), headings, _dedupe(links), source)


# ---------------------------------------------------------------- PDF


def _parse_pdf(path: Path, data: bytes) -> ParsedDocument:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ParseError("PDF is encrypted")
        page_texts = [(page.extract_text() or "").strip() for page in reader.pages]
        meta = reader.metadata
        title = str(meta.title).strip() if meta is not None and meta.title else ""
    except ParseError:
        raise
    except Exception as exc:
        raise ParseError(f"invalid PDF: {exc}") from None
    page_offsets: list[int] = []
    parts: list[str] = []
    units: list[tuple[int, str]] = []
    offset = 0
    for number, t in enumerate(page_texts, 1):
        page_offsets.append(offset)
        if t:
            units.append((offset, f"page {number}"))
            parts.append(t)
            offset += len(t) + 2
    text = "\n\n".join(parts)
    if not text.strip():
        raise ParseError("PDF has no extractable text")
    return ParsedDocument(text, title or stem_title(path), _pdf_outline(reader, page_offsets), [], units=units)


def _pdf_outline(reader: object, page_offsets: list[int]) -> list[tuple[int, str]]:
    """Bookmarks as headings at the start of their page's text (best effort: broken outlines give none)."""
    found: list[tuple[int, str]] = []

    def visit(items: list[object]) -> None:
        for item in items:
            if isinstance(item, list):
                visit(item)
                continue
            page = reader.get_destination_page_number(item)  # type: ignore[attr-defined]
            title = str(getattr(item, "title", "") or "").strip()
            if title and page is not None and 0 <= page < len(page_offsets):
                found.append((page_offsets[page], title))

    try:
        visit(list(reader.outline))  # type: ignore[attr-defined]
    except Exception:
        return []
    return sorted(found, key=lambda h: h[0])


# ---------------------------------------------------------------- DOCX

_DOCX_HEADING_RE = re.compile(r"^(?:heading|titre|überschrift)\s*(\d)$", re.IGNORECASE)


def _parse_docx(path: Path, data: bytes) -> ParsedDocument:
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:
        raise ParseError(f"invalid DOCX: {exc}") from None
    lines: list[str] = []
    headings: list[tuple[int, str]] = []
    units: list[tuple[int, str]] = []
    offset = 0
    styled_title = ""
    for number, block in enumerate(document.iter_inner_content(), 1):  # paragraphs and tables, empty ones too
        units.append((offset, f"paragraph {number}"))
        if isinstance(block, Table):
            rows = [" | ".join(c.text.strip() for c in row.cells) for row in block.rows]
            texts = [r for r in rows if r.strip(" |")]
        else:
            texts = [block.text.strip()]
            style = (block.style.name if block.style is not None else "") or ""
            if texts[0] and (style.lower() == "title" or _DOCX_HEADING_RE.match(style)):
                headings.append((offset, texts[0]))
                if style.lower() == "title" and not styled_title:
                    styled_title = texts[0]
        for t in texts:
            if t:
                lines.append(t)
                offset += len(t) + 2
    core_title = (document.core_properties.title or "").strip()
    return ParsedDocument("\n\n".join(lines), core_title or styled_title or stem_title(path), headings, [],
                          units=units)


_PARSERS: dict[str, Callable[[Path, bytes], ParsedDocument]] = {
    ".md": _parse_markdown,
    ".markdown": _parse_markdown,
    ".txt": _parse_txt,
    ".rst": _parse_rst,
    ".html": _parse_html,
    ".htm": _parse_html,
    ".pdf": _parse_pdf,
    ".docx": _parse_docx,
}


def parse_file(path: Path, data: bytes) -> ParsedDocument:
    """Parse ``data`` (the content of ``path``) by suffix; raises ParseError with a readable reason."""
    suffix = path.suffix.lower()
    parser = _PARSERS.get(suffix)
    if parser is None:
        raise ParseError(f"unsupported type {suffix or '(no suffix)'}")
    doc = parser(path, data)
    if not doc.text.strip():
        raise ParseError("empty document")
    if doc.source is None and not doc.units:  # Markdown, reStructuredText, plain text: UTF-8, checked by the parser
        doc.source = data.decode("utf-8")
    return doc
