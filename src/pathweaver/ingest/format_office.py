"""PDF (pypdf: page text and outline) and DOCX (python-docx: paragraphs, tables, heading styles) ->
``ParsedDocument``; citations name a page or paragraph (``units``), not a span."""

from __future__ import annotations

import io
import re
from pathlib import Path

from pathweaver.ingest.parsed import (
    ParsedDocument,
    ParseError,
    stem_title,
)
from pathweaver.ingest.zip_limits import check_zip


def parse_pdf(path: Path, data: bytes) -> ParsedDocument:
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


def parse_docx(path: Path, data: bytes) -> ParsedDocument:
    import docx
    from docx.table import Table

    check_zip(data, "DOCX")
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
