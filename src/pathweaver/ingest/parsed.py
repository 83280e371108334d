"""What every format parser makes (``ParsedDocument``) and shares: the supported suffixes, the decoding of text
files, titles from file names, local link targets and ``TextBuilder``; ``parsers.parse_file`` picks the parser.

The text is what the chunker splits, so every heading offset is an index into ``ParsedDocument.text``; citations
point into ``ParsedDocument.source``, the decoded file (``ingest.spans``). Markup noise (link URLs, emphasis markers, front matter, scripts) is removed; link text
and heading text are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(
    {".md", ".markdown", ".txt", ".rst", ".html", ".htm", ".pdf", ".docx"}
)
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
# Suffixes a relative link may carry and still name a local document (no suffix is accepted too, as in Obsidian).
_LINKABLE_SUFFIXES = SUPPORTED_SUFFIXES | {""}

# a fenced code block opens (and closes) with three or more backticks or tildes, indented at most three spaces
FENCE_RE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})")

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
    # Ranges of ``source`` that hold no document text (HTML tags, head, title, scripts, styles, comments): citation
    # spans never point into them, even where a word of the text also appears there.
    hidden: list[tuple[int, int]] = field(default_factory=list)
    units: list[tuple[int, str]] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)  # other names of the document (Markdown front-matter aliases:)
    # (link target, display text, written mid-sentence) of Markdown links that show a text of their own:
    # ``[[Target|text]]``, ``[text](t.md)``
    link_texts: list[tuple[str, str, bool]] = field(default_factory=list)
    # Obsidian embeds ``![[Note]]``, ``![[Note#Heading]]``, ``![[Note#^block]]``: (offset in text, target name,
    # fragment: '' for the whole note, the heading, or "^" + the block id); ``ingest.embeds`` expands them
    embeds: list[tuple[int, str, str]] = field(default_factory=list)
    heading_levels: list[int] = field(default_factory=list)  # the level of each of ``headings`` (1 to 6)
    blocks: dict[str, tuple[int, int]] = field(default_factory=dict)  # block id -> its paragraph's span in text
    # Ranges of ``text`` that repeat text written once in the file (an HTML table cell's colspan or rowspan):
    # citation spans match no word inside them.
    copied: list[tuple[int, int]] = field(default_factory=list)


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


_EOL_RE = re.compile(r"\r\n|\r|\n")  # the line ends ``decode_text`` reads as one "\n" each


def line_starts(source: str, n: int) -> list[int]:
    """The offsets in ``source`` (the decoded file, its line endings kept) where its lines 0 to ``n`` begin (past
    its end: ``len(source)``)."""
    out, at = [0], 0
    for _ in range(n):
        m = _EOL_RE.search(source, at)
        at = len(source) if m is None else m.end()
        out.append(at)
    return out


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
