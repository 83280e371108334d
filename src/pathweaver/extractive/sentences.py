"""Passages and their sentences, ranked by similarity to the question and idf-weighted word overlap."""

from __future__ import annotations

import math

import numpy as np

from pathweaver.extractive.questions import _WH, _WORD_RE
from pathweaver.extractive.types import ChunksLike, ExtractiveParams, Passage, Sentence, WordDfFn
from pathweaver.retrieval.context import Context, sentences
from pathweaver.retrieval.types import EncodeFn
from pathweaver.text import STOPWORDS


def passages_of(chunks: ChunksLike, max_chunks: int) -> list[Passage]:
    """Chunk texts with their citation numbers from a ``Context`` (its chunk items), or from a sequence of
    strings (cited 1, 2, ...), ``(text, n)``/``(text, n, title)`` tuples or objects with ``text`` and ``n``."""
    items = [i for i in chunks.items if i.kind == "chunk"] if isinstance(chunks, Context) else list(chunks)
    out: list[Passage] = []
    for rank, item in enumerate(items[:max_chunks]):
        if isinstance(item, str):
            out.append(Passage(item, rank + 1, "", rank))
        elif isinstance(item, tuple):
            out.append(Passage(str(item[0]), int(item[1]), str(item[2]) if len(item) > 2 else "", rank))
        else:
            out.append(Passage(str(item.text), int(getattr(item, "n", rank + 1)), str(getattr(item, "title", "")),
                               rank))
    return out


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; a line break also ends one (a title line stays apart)."""
    out = []
    for line in text.splitlines():
        for a, b in sentences(line):
            s = " ".join(line[a:b].split())
            if len(s) > 3:
                out.append(s)
    return out


def _tokens(text: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(text)]


def content_words(text: str) -> set[str]:
    return {w for w in _tokens(text) if w not in STOPWORDS and w not in _WH and len(w) > 1}


def _weights(words: set[str], word_df: WordDfFn | None, n_docs: int) -> dict[str, float]:
    if word_df is None or n_docs <= 0:
        return dict.fromkeys(words, 1.0)
    df = word_df(sorted(words))
    return {w: math.log(1.0 + (n_docs - min(df.get(w, 0), n_docs) + 0.5) / (df.get(w, 0) + 0.5)) for w in words}


def _title_named(passage: Passage, asked: set[str]) -> bool:
    """The question names the passage's title (or, without one, its short first line)."""
    for title in (passage.title, passage.text.split("\n", 1)[0]):
        words = [w for w in _tokens(title) if w not in STOPWORDS and not w.isdigit()]
        if 0 < len(words) <= 12 and all(w in asked for w in words):
            return True
    return False


def rank_sentences(
    question: str,
    passages: list[Passage],
    encode: EncodeFn | None,
    params: ExtractiveParams,
    word_df: WordDfFn | None = None,
    n_docs: int = 0,
) -> list[Sentence]:
    """Every sentence of ``passages``, best first: embed_weight * cosine + overlap_weight * the share of the
    question's idf weight it holds - rank_decay * chunk rank + title_bonus when the question names the chunk's
    title."""
    cands = [(s, p) for p in passages for s in split_sentences(p.text)]
    if not cands:
        return []
    asked = content_words(question)
    weight = _weights(asked, word_df, n_docs)
    total = sum(weight.values()) or 1.0
    overlap = np.array([sum(weight[w] for w in asked & content_words(s)) / total for s, _ in cands])
    sims = np.zeros(len(cands))
    if encode is not None and params.embed_weight:
        vecs = np.asarray(encode([s for s, _ in cands]))
        qv = np.asarray(encode([question]))[0]
        sims = vecs @ qv
    score = params.embed_weight * sims + params.overlap_weight * overlap
    score -= params.rank_decay * np.array([p.rank for _, p in cands])
    asked_all = set(_tokens(question))
    named = {p.n: _title_named(p, asked_all) for p in passages}
    score += params.title_bonus * np.array([named[p.n] for _, p in cands])
    order = np.argsort(-score, kind="stable")
    return [Sentence(cands[i][0], cands[i][1], float(score[i])) for i in order]
