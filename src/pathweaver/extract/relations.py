"""Relation candidates from sentence co-occurrence of extracted entities (the no-LLM stand-in for AGRAG Eq. 4).

Two entities mentioned in one sentence are related; the words between the two mentions become the label when
they are a short, non-stopword-only phrase ("directed", "is the capital of"), else the label is "related to".
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from pathweaver.extract.entities import WordSpan, word_spans
from pathweaver.text import STOPWORDS, normalize

DEFAULT_LABEL = "related to"
# Words before a "." that do not end a sentence (compared casefolded, without the final dot).
_ABBREVIATIONS = (
    "mr mrs ms dr prof sr jr st mt vs etc e.g i.e cf al fig figs no nos vol pp ed eds inc ltd co corp dept est "
    "approx ca gen col lt sgt capt rev hon jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k"
)
ABBREVIATIONS: frozenset[str] = frozenset(_ABBREVIATIONS.split())
_TERMINATOR_RE = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s)")
_LINE_BREAK_RE = re.compile(r"\n")
_WORD_BEFORE_RE = re.compile(r"([\w.]+)\.$")
_NEXT_CHAR_RE = re.compile(r"\s*(\S)")


def _is_abbreviation(text: str, dot_end: int) -> bool:
    """True if the '.' ending at ``dot_end`` closes an abbreviation or a single-letter initial ("J.")."""
    m = _WORD_BEFORE_RE.search(text, max(0, dot_end - 12), dot_end)
    if not m:
        return False
    token = m.group(1).casefold()
    return token in ABBREVIATIONS or (len(token) == 1 and token.isalpha())


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans (start, end), trimmed of whitespace.

    A sentence ends at ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by whitespace, unless the
    next word starts in lower case or the dot closes a known abbreviation or an initial. Every line break also
    ends a sentence: parsed documents put headings, list items and paragraphs on their own lines.
    """
    cuts: set[int] = {0, len(text)}
    cuts.update(m.end() for m in _LINE_BREAK_RE.finditer(text))
    for m in _TERMINATOR_RE.finditer(text):
        end = m.end()
        nxt = _NEXT_CHAR_RE.match(text, end)
        if nxt is None:
            continue
        if nxt.group(1).islower():
            continue
        raw = m.group()
        if raw.rstrip("\"'\u201d\u2019)]") == "." and _is_abbreviation(text, m.start() + 1):
            continue
        cuts.add(end)
    spans: list[tuple[int, int]] = []
    ordered = sorted(cuts)
    for a, b in zip(ordered, ordered[1:], strict=False):
        seg = text[a:b]
        stripped = seg.strip()
        if stripped:
            start = a + (len(seg) - len(seg.lstrip()))
            spans.append((start, start + len(stripped)))
    return spans


@dataclass(frozen=True)
class RelationCandidate:
    """One co-occurrence relation; ``start``/``end`` is the supporting sentence's span in the input text."""

    src: str
    dst: str
    label: str
    sentence: str
    start: int
    end: int


@dataclass(frozen=True)
class _Mention:
    name: str
    first: int  # index of the first word (within the sentence's word list)
    last: int  # index one past the last word


# A name already in the form ``normalize`` and ``word_spans`` give (casefolded words of ``entities.WORD_RE`` with
# plain apostrophes, joined by single spaces): every n-gram entity. For these the two are the identity and a split.
_CANONICAL_RE = re.compile(r"[^\W_]+(?:['\-][^\W_]+)*(?: [^\W_]+(?:['\-][^\W_]+)*)*")
_POSSESSIVE_RE = re.compile(r"'s\b")


@lru_cache(maxsize=1 << 18)
def _name_key(entity: str) -> tuple[str, tuple[str, ...]]:
    """An entity's normalised name and its words (a name is matched in every chunk that mentions it)."""
    if _CANONICAL_RE.fullmatch(entity) and entity.casefold() == entity and not _POSSESSIVE_RE.search(entity):
        return entity, tuple(entity.split(" "))
    name = normalize(entity)
    return name, tuple(ws.word for ws in word_spans(name))


def _entity_index(entities: Collection[str]) -> dict[str, list[tuple[tuple[str, ...], str]]]:
    """First word -> [(word tuple, normalised name)], longest first, so matching prefers longer names."""
    index: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    seen: set[tuple[str, ...]] = set()
    for name, key in sorted({_name_key(e) for e in entities}):
        if not key or key in seen:
            continue
        seen.add(key)
        index.setdefault(key[0], []).append((key, name))
    for options in index.values():
        options.sort(key=lambda kn: (-len(kn[0]), kn[1]))
    return index


def _mentions(ws: list[WordSpan], index: dict[str, list[tuple[tuple[str, ...], str]]]) -> list[_Mention]:
    """Leftmost-longest, non-overlapping entity matches on word boundaries (multi-word names only across spaces)."""
    found: list[_Mention] = []
    i = 0
    while i < len(ws):
        match: _Mention | None = None
        for key, name in index.get(ws[i].word, ()):
            n = len(key)
            if (
                i + n <= len(ws)
                and all(ws[i + k].word == key[k] for k in range(n))
                and all(ws[i + k].joined for k in range(1, n))
            ):
                match = _Mention(name, i, i + n)
                break
        if match:
            found.append(match)
            i = match.last
        else:
            i += 1
    return found


def _label(ws: list[WordSpan], a: _Mention, b: _Mention, adjacent: bool, label_max_words: int) -> str:
    """Words between two adjacent mentions, or the default label (another mention in between, too long, ...)."""
    if not adjacent:
        return DEFAULT_LABEL
    between = [w.word for w in ws[a.last : b.first]]
    if 1 <= len(between) <= label_max_words and not all(w in STOPWORDS for w in between):
        return " ".join(between)
    return DEFAULT_LABEL


def cooccurrence_relations(
    text: str,
    entities: Collection[str],
    label_max_words: int = 4,
    max_pairs_per_sentence: int = 30,
) -> list[RelationCandidate]:
    """One candidate per pair of distinct entities mentioned in the same sentence (src = the earlier mention).

    When a pair co-occurs several times in one sentence the nearest two mentions are used; at most
    ``max_pairs_per_sentence`` pairs are kept per sentence, nearest first. Output is in sentence order, then by
    mention position, so it is deterministic.
    """
    if label_max_words < 0 or max_pairs_per_sentence < 1:
        raise ValueError(
            f"need label_max_words >= 0 and max_pairs_per_sentence >= 1, got {label_max_words}, "
            f"{max_pairs_per_sentence}"
        )
    index = _entity_index(entities)
    if not index:
        return []
    out: list[RelationCandidate] = []
    for start, end in split_sentences(text):
        sentence = text[start:end]
        ws = word_spans(sentence)
        mentions = _mentions(ws, index)
        if len({m.name for m in mentions}) < 2:
            continue
        pairs: list[tuple[int, int, int]] = []  # (word distance, index of a, index of b)
        for i, a in enumerate(mentions):
            for j in range(i + 1, len(mentions)):
                if a.name != mentions[j].name:
                    pairs.append((mentions[j].first - a.last, i, j))
        pairs.sort()
        chosen: dict[frozenset[str], tuple[int, int]] = {}
        for _, i, j in pairs:
            key = frozenset((mentions[i].name, mentions[j].name))
            if key not in chosen:
                chosen[key] = (i, j)
                if len(chosen) >= max_pairs_per_sentence:
                    break
        for i, j in sorted(chosen.values()):
            a, b = mentions[i], mentions[j]
            label = _label(ws, a, b, j == i + 1, label_max_words)
            out.append(RelationCandidate(a.name, b.name, label, sentence, start, end))
    return out
