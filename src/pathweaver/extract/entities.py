"""Statistical entity extraction: TF-IDF-style n-gram scoring with no LLM (AGRAG §III-B, Eq. 2-3).

Candidates are word n-grams (n = 1..b) that never cross a sentence boundary or punctuation. A candidate is dropped
when it starts or ends with a stopword (which also drops stopword-only grams), is numeric-only, or is a single
character. Stopwords *inside* a gram are kept, so "bank of america" is a candidate while "the director" and
"director of" are not. Possessive "'s" is removed from words ("Nolan's film" -> "nolan film"), the same way in
``normalize`` and ``words``, so names from every source meet in one form.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import NamedTuple

from pathweaver.text import POSSESSIVE_RE, STOPWORDS

# A word: letters/digits, with internal apostrophes or hyphens ("don't", "state-of-the-art").
WORD_RE = re.compile(r"[^\W_]+(?:['\u2019\-][^\W_]+)*")
# Inside a sentence, words are joined into one n-gram run only across plain spaces/tabs.
_JOIN_CHARS = frozenset(" \t\u00a0")


class WordSpan(NamedTuple):
    """One word token: character span in the source text, normalised form, and whether it continues the run of
    the previous word (only spaces between them)."""

    start: int
    end: int
    word: str
    joined: bool


def norm_word(raw: str) -> str:
    word = raw.casefold()
    if "'" in word or "\u2019" in word:  # most words have no apostrophe: skip the regex
        return POSSESSIVE_RE.sub("", word.replace("\u2019", "'"))
    return word


def joins(gap: str) -> bool:
    return gap == " " or all(c in _JOIN_CHARS for c in gap)



def word_spans(text: str) -> list[WordSpan]:
    """All word tokens of ``text`` with their spans; ``joined`` is False after punctuation or a line break."""
    out: list[WordSpan] = []
    prev_end = -1
    for m in WORD_RE.finditer(text):
        start, end = m.span()
        joined = prev_end >= 0 and joins(text[prev_end:start])
        word = norm_word(m.group())
        if word:
            out.append(WordSpan(start, end, word, joined))
        prev_end = end
    return out


def words(text: str) -> list[str]:
    """Normalised word tokens of ``text``; ``len(words(t))`` is |t| in AGRAG Eq. 2."""
    return [w.word for w in word_spans(text)]


def _runs(spans: list[WordSpan]) -> list[list[str]]:
    """Maximal runs of words separated only by spaces (sentence, clause and line boundaries split runs)."""
    runs: list[list[str]] = []
    for ws in spans:
        if ws.joined and runs:
            runs[-1].append(ws.word)
        else:
            runs.append([ws.word])
    return runs


def candidate_grams(text: str, ngram_max: int = 3) -> Counter[str]:
    """Counts of candidate n-grams (n = 1..``ngram_max``, b in AGRAG §III-B) in ``text``, normalised."""
    return grams_of(word_spans(text), ngram_max)


def grams_of(spans: list[WordSpan], ngram_max: int = 3) -> Counter[str]:
    """``candidate_grams`` of a text whose ``word_spans`` are ``spans``. A gram is dropped when its first or last
    word is a stopword, when all its words are digits, or when it is one single-character word; the rules read each
    word's stopword and digit flags, computed once per run."""
    if ngram_max < 1:
        raise ValueError(f"ngram_max must be >= 1, got {ngram_max}")
    counts: Counter[str] = Counter()
    for run in _runs(spans):
        stop = [w in STOPWORDS for w in run]
        digit = [w.isdigit() for w in run]
        for n in range(1, ngram_max + 1):
            for i in range(len(run) - n + 1):
                last = i + n - 1
                if stop[i] or stop[last] or all(digit[i : last + 1]) or (n == 1 and len(run[i]) < 2):
                    continue
                counts[" ".join(run[i : last + 1])] += 1
    return counts


def er_score(count: int, n_words: int, n_chunks: int, df: int) -> float:
    """AGRAG Eq. 2: ER(v,t) = count(v,t) / (|t| · log(|T_c|+1)) · log((|T_c|+1) / (df(v)+1)).

    ``n_words`` = |t| (words in the chunk), ``n_chunks`` = |T_c| (chunks in the corpus), ``df`` = number of chunks
    containing v. The log base cancels out of the ratio; natural logs are used.
    """
    if count < 0 or n_words < 1 or n_chunks < 1 or not 0 <= df <= n_chunks:
        raise ValueError(
            f"invalid ER inputs: count={count}, n_words={n_words}, n_chunks={n_chunks}, df={df} "
            "(need count >= 0, n_words >= 1, n_chunks >= 1, 0 <= df <= n_chunks)"
        )
    return count / (n_words * math.log(n_chunks + 1)) * math.log((n_chunks + 1) / (df + 1))


def select_entities(
    grams: Counter[str] | Mapping[str, int],
    n_words: int,
    n_chunks: int,
    df: Mapping[str, int],
    tau: float,
    limit: int = 40,
) -> dict[str, float]:
    """Entities of one chunk: grams with ER > tau (AGRAG Eq. 3), the ``limit`` best, ties broken by name.

    ``df`` may lag behind the corpus (incremental indexing): a missing gram counts as df = 1 (this chunk) and df is
    clipped to [1, n_chunks]. A short gram nested in a longer chosen one with the same count is kept as well: it
    may stand alone in other chunks, and dropping it would make one chunk's entities depend on its neighbours.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if n_words < 1 or n_chunks < 1:
        return {}
    scored: list[tuple[float, str]] = []
    # er_score's arithmetic, in its order (the same bits), without its checks per gram: the counts are >= 0 and
    # d is clipped to [1, n_chunks]
    denom, top = n_words * math.log(n_chunks + 1), n_chunks + 1
    for gram, count in grams.items():
        d = min(max(1, int(df.get(gram, 1))), n_chunks)
        score = int(count) / denom * math.log(top / (d + 1))
        if score > tau:
            scored.append((score, gram))
    scored.sort(key=lambda sg: (-sg[0], sg[1]))
    return {gram: score for score, gram in scored[:limit]}
