"""Chunk spans in the file as stored on disk: parsed-text offsets mapped to offsets in the decoded file.

Parsers drop markup (link targets, emphasis, tags, front matter) and fold whitespace, so a chunk's offsets in the
parsed text do not index the file. Its words do appear in the file, in order: each parsed word is matched to its
earliest occurrence after the previous match (never later than where it truly is), and, going backwards, to its
latest occurrence before the next match (never earlier). A chunk's file span runs from the forward match of its
first word to the end of the backward match of its last one, so ``source[start:end]`` holds every word of the chunk
in order; the punctuation the chunk has before its first word or after its last ("(", the final ".") is taken in
where the file has it right there. A word the file does not spell out (an HTML entity such as ``&eacute;``) is passed
over.

PDF and DOCX have no character offsets a reader can use: their chunks get a page or paragraph locator instead.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

_WORD_RE = re.compile(r"\w+")


def _forward(words: list[re.Match[str]], source: str) -> list[int]:
    """Start in ``source`` of each parsed word's earliest match after the previous one (-1: not in the file)."""
    out: list[int] = []
    cursor = 0
    absent: set[str] = set()  # not found after some cursor, so after no later one either
    for m in words:
        word = m.group()
        at = -1 if word in absent else source.find(word, cursor)
        if at < 0:
            absent.add(word)
        else:
            cursor = at + len(word)
        out.append(at)
    return out


def _backward(words: list[re.Match[str]], source: str) -> list[int]:
    """End in ``source`` of each parsed word's latest match before the next one (-1: not in the file)."""
    out = [-1] * len(words)
    cursor = len(source)
    absent: set[str] = set()
    for i in range(len(words) - 1, -1, -1):
        word = words[i].group()
        at = -1 if word in absent else source.rfind(word, 0, cursor)
        if at < 0:
            absent.add(word)
        else:
            cursor = at
            out[i] = at + len(word)
    return out


def blanked(source: str, hidden: Sequence[tuple[int, int]]) -> str:
    """``source`` with each ``hidden`` range turned to spaces: the same length, so its offsets still index the
    file, but no word of the text can be matched inside markup."""
    if not hidden:
        return source
    parts: list[str] = []
    at = 0
    for start, end in sorted(hidden):
        start = max(start, at)
        if end <= start:
            continue
        parts += [source[at:start], " " * (end - start)]
        at = end
    parts.append(source[at:])
    return "".join(parts)


def _inside(at: int, ranges: Sequence[tuple[int, int]]) -> bool:
    """Whether offset ``at`` lies in one of ``ranges`` (sorted, not overlapping)."""
    k = bisect.bisect_right(ranges, (at, float("inf"))) - 1
    return k >= 0 and ranges[k][0] <= at < ranges[k][1]


def file_spans(text: str, source: str, spans: Sequence[tuple[int, int]],
               hidden: Sequence[tuple[int, int]] = (),
               copied: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """For each ``(start, end)`` of ``text`` (the parsed document), the span in ``source`` (the decoded file) that
    holds its words, matched outside the ``hidden`` ranges (markup); words inside the ``copied`` ranges of ``text``
    (repeated there, written once in the file) are passed over. A span without words the file spells out is empty,
    at the file offset of the text before it."""
    source = blanked(source, hidden)
    words = list(_WORD_RE.finditer(text))
    starts = [m.start() for m in words]
    # a copy matched in the file would pull the cursor to a later (or, backwards, earlier) spelling of its word
    kept = [i for i, m in enumerate(words) if not _inside(m.start(), copied)]
    fwd, bwd = [-1] * len(words), [-1] * len(words)
    for i, f, b in zip(kept, _forward([words[i] for i in kept], source),
                       _backward([words[i] for i in kept], source), strict=True):
        fwd[i], bwd[i] = f, b
    out: list[tuple[int, int]] = []
    for start, end in spans:
        lo = bisect.bisect_left(starts, start)
        hi = bisect.bisect_left(starts, end)  # words [lo, hi) begin inside the span
        first = next((fwd[i] for i in range(lo, hi) if fwd[i] >= 0), -1)
        last = next((bwd[i] for i in range(hi - 1, lo - 1, -1) if bwd[i] >= 0), -1)
        if first < 0 or last < first:
            before = next((fwd[i] for i in range(lo - 1, -1, -1) if fwd[i] >= 0), 0)
            out.append((before, before))
            continue
        lead = text[start:words[lo].start()]
        tail = text[words[hi - 1].end():end]
        if lead and source[max(0, first - len(lead)):first] == lead:
            first -= len(lead)
        if tail and source.startswith(tail, last):
            last += len(tail)
        out.append((first, last))
    return out


def locator(marks: Sequence[tuple[int, str]], start: int, end: int) -> str:
    """The unit label(s) of ``marks`` ((text offset where a unit begins, "page 3") in order) that the text span
    ``[start, end)`` covers: "page 3", or "page 3 to page 4"."""
    if not marks:
        return ""
    offsets = [m[0] for m in marks]
    first = marks[max(0, bisect.bisect_right(offsets, start) - 1)][1]
    last = marks[max(0, bisect.bisect_right(offsets, max(start, end - 1)) - 1)][1]
    return first if first == last else f"{first} to {last}"
