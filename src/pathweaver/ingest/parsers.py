"""Format parsers: bytes of one file -> plain text, title, headings (with character offsets) and link targets.

The text is what the chunker splits, so every heading offset is an index into ``ParsedDocument.text``; citations
point into ``ParsedDocument.source``, the decoded file (``ingest.spans``). Markup noise (link URLs, emphasis markers, front matter, scripts) is removed; link text
and heading text are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pathweaver.ingest.format_html import parse_html
from pathweaver.ingest.format_markdown import parse_markdown
from pathweaver.ingest.format_office import parse_docx, parse_pdf
from pathweaver.ingest.format_text import parse_rst, parse_txt
from pathweaver.ingest.parsed import ParsedDocument, ParseError

# how the parsers read files; raise it when a change alters what they read from a file (a stub note now readable,
# Logseq's properties and namespace pages, front matter's properties), so that a store reads every file again on
# its next full scan: no note keeps an old parse (a chunk whose text did not change keeps its cached vector)
PARSE_RULES = 5

_PARSERS: dict[str, Callable[[Path, bytes], ParsedDocument]] = {
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".txt": parse_txt,
    ".rst": parse_rst,
    ".html": parse_html,
    ".htm": parse_html,
    ".pdf": parse_pdf,
    ".docx": parse_docx,
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
