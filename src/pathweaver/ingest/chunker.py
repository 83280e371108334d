"""Token windows over a document's text (AGRAG §III-B Eq. 1, Split(T, l_t, l_o); §IV-A4: l_t = 256, l_o = 32).

Windows are counted in tokens of the embedding model's tokenizer, whose character offsets give each chunk an exact
span of the document text. A window of ``chunk_tokens`` tokens is cut early at a natural boundary when one lies
in its last ``boundary_zone`` share (default 20 %): the latest paragraph break is preferred, then the latest
sentence end, then the latest line break; with none, the window is cut at exactly ``chunk_tokens`` tokens. The
next window starts ``overlap`` tokens before the cut, so consecutive chunks share ``overlap`` tokens and the chunks
together cover every token of the text.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass

from pathweaver.config import ConfigError

_PARAGRAPH_RE = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = frozenset(".!?")


@dataclass(frozen=True)
class Chunk:
    """One window: ``text == document_text[start:end]``; ``heading`` is the nearest heading at or before start."""

    ord: int
    start: int
    end: int
    text: str
    n_tokens: int
    heading: str


def _validate(text: str, spans: list[tuple[int, int]], chunk_tokens: int, overlap: int, zone: float) -> None:
    if chunk_tokens < 1:
        raise ConfigError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    if not 0 <= overlap < chunk_tokens:
        raise ConfigError(f"overlap must be >= 0 and < chunk_tokens ({chunk_tokens}), got {overlap}")
    if not 0.0 <= zone < 1.0:
        raise ConfigError(f"boundary_zone must be in [0, 1), got {zone}")
    prev = 0
    for s, e in spans:
        if not (prev <= s <= e <= len(text)):
            raise ConfigError(
                f"token spans must be ordered character offsets inside the text; bad span ({s}, {e})"
            )
        prev = s


def _boundary_rank(text: str, spans: list[tuple[int, int]], k: int) -> int:
    """How good a cut after token k is: 3 paragraph break, 2 sentence end, 1 line break, 0 none."""
    gap = text[spans[k][1] : spans[k + 1][0]]
    if _PARAGRAPH_RE.search(gap):
        return 3
    last = text[spans[k][1] - 1] if spans[k][1] > spans[k][0] else ""
    if last in _SENTENCE_END and gap[:1].isspace():
        return 2
    return 1 if "\n" in gap else 0


def _cut(text: str, spans: list[tuple[int, int]], first: int, limit: int, zone_start: int) -> int:
    """Index one past the last token of the window [first, limit)."""
    if limit >= len(spans):
        return len(spans)
    best, best_rank = limit, 0
    for k in range(limit - 1, max(first, zone_start) - 1, -1):  # latest boundary of the highest rank
        rank = _boundary_rank(text, spans, k)
        if rank > best_rank:
            best, best_rank = k + 1, rank
            if rank == 3:
                break
    return best


def chunk_text(
    text: str,
    token_spans: list[tuple[int, int]],
    chunk_tokens: int = 256,
    overlap: int = 32,
    headings: list[tuple[int, str]] | None = None,
    boundary_zone: float = 0.2,
) -> list[Chunk]:
    """Split ``text`` into overlapping token windows; see the module docstring for the rules."""
    _validate(text, token_spans, chunk_tokens, overlap, boundary_zone)
    spans = [(s, e) for s, e in token_spans if e > s and text[s:e].strip()]
    heads = sorted(headings or [], key=lambda h: h[0])
    head_offsets = [h[0] for h in heads]
    chunks: list[Chunk] = []
    first = 0
    while first < len(spans):
        limit = first + chunk_tokens
        zone_start = first + max(1, math.ceil(chunk_tokens * (1.0 - boundary_zone)))
        stop = _cut(text, spans, first, limit, zone_start)
        start, end = spans[first][0], spans[stop - 1][1]
        h = bisect.bisect_right(head_offsets, start) - 1
        chunks.append(
            Chunk(len(chunks), start, end, text[start:end], stop - first, heads[h][1] if h >= 0 else "")
        )
        if stop >= len(spans):
            break
        first = max(stop - overlap, first + 1)
    return chunks
