"""The shapes the extractive answerer works on: its parameters, cited passages and scored sentences."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pathweaver.retrieval.context import Context

WordDfFn = Callable[[list[str]], dict[str, int]]
@dataclass(frozen=True)
class ExtractiveParams:
    """Weights of the sentence and span scores; ours, tuned on the dev splits (docs/benchmarks.md)."""

    max_chunks: int = 5  # chunks searched, best first
    max_sentences: int = 4  # best sentences searched for a typed span
    embed_weight: float = 1.0  # cosine(question, sentence)
    overlap_weight: float = 1.0  # share of the question's idf weight the sentence holds
    rank_decay: float = 0.05  # score lost per chunk rank
    title_bonus: float = 0.0  # a sentence of a chunk whose title the question names (the passage about it)
    cue_bonus: float = 1.0  # times a span's cue score (introduced by "born in", "directed by", ...)
    chain: bool = True  # answer a nested question hop by hop over the same chunks (heuristic plan)
    span_sentence: bool = False  # answer "other" questions with the whole sentence rather than a span


@dataclass(frozen=True)
class Passage:
    text: str
    n: int  # citation number
    title: str = ""
    rank: int = 0


@dataclass(frozen=True)
class Sentence:
    text: str
    passage: Passage
    score: float


ChunksLike = Context | Sequence[Any]
# Chunks retrieved for one hop's rephrased question ("Where was Paul Thomas Anderson born?"), as a chain answer's
# later hops search them.
HopChunks = Callable[[str], ChunksLike]
