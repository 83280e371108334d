"""The shapes the extractive answerer works on: its parameters, cited passages and scored sentences."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pathweaver.retrieval.context import Context

WordDfFn = Callable[[list[str]], dict[str, int]]
@dataclass(frozen=True)
class ExtractiveParams:
    """Weights of the sentence and span scores and the bar the evidence must clear; ours, tuned on the dev splits
    (the notes set's dev split for the bar and the answer's length; docs/benchmarks.md)."""

    max_chunks: int = 5  # chunks searched, best first
    list_notes: int = 10  # notes a "which notes ...?" answer reads (and ``ask`` retrieves for it) to list them
    max_sentences: int = 4  # best sentences searched for a typed span
    embed_max: int = 24  # sentences embedded per question, the best by word overlap and chunk rank (latency)
    embed_weight: float = 1.0  # cosine(question, sentence)
    overlap_weight: float = 1.0  # share of the question's idf weight the sentence holds
    rank_decay: float = 0.05  # score lost per chunk rank
    title_bonus: float = 0.0  # a sentence of a chunk whose title the question names (the passage about it)
    stated_cue: float = 0.5  # a span's cue score from which its sentence states it (not only its best sentence)
    cue_bonus: float = 1.0  # times a span's cue score (the question's own words just before it: "born in")
    chain: bool = True  # answer a nested question hop by hop over the same chunks (heuristic plan)
    min_sim: float = 0.35  # the best sentence's cosine with the question below this: the notes don't say
    min_coverage: float = 0.55  # share of the question's idf weight (by stem) the evidence must hold
    close_sim: float = 0.6  # a sentence this similar to the question (a paraphrase) lowers the coverage bar ...
    close_coverage: float = 0.45  # ... to this share
    answer_sentences: int = 3  # most sentences (list items, table rows) an open question's answer quotes
    sentence_margin: float = 0.4  # a further sentence of the best one's chunk joins when it scores within this
    other_margin: float = 0.1  # a sentence of another chunk joins when it scores within this of the best
    intro_units: int = 3  # units after a chosen line that ends with a colon (the list or command it introduces)


@dataclass(frozen=True)
class Passage:
    text: str
    n: int  # citation number
    title: str = ""
    rank: int = 0
    names: tuple[str, ...] = ()  # the names its note gives itself (title, aliases): a question may name it by any


@dataclass(frozen=True)
class Sentence:
    text: str
    passage: Passage
    score: float
    sim: float = 0.0  # cosine with the question (0 without an embedder)
    index: int = 0  # position among its passage's sentences
    heading: bool = False  # a paragraph of one line without a full stop: a title or heading


@dataclass(frozen=True)
class Answer:
    """An extractive answer: ``parts`` are (text, citation numbers) in answer order; ``supported`` is False when
    the evidence does not decide (then the text says that the notes don't say and quotes the closest evidence)."""

    parts: tuple[tuple[str, tuple[int, ...]], ...]
    supported: bool

    @property
    def text(self) -> str:
        """The answer without citation marks."""
        return " ".join(t for t, _ in self.parts)

    @property
    def cites(self) -> list[int]:
        return list(dict.fromkeys(n for _, ns in self.parts for n in ns))

    @property
    def marked(self) -> str:
        """The answer with each part's ``[n]`` marks after it."""
        return " ".join(f"{t} {''.join(f'[{n}]' for n in ns)}".strip() for t, ns in self.parts)


ChunksLike = Context | Sequence[Any]
# Chunks retrieved for one hop's rephrased question ("Where was Paul Thomas Anderson born?"), as a chain answer's
# later hops search them.
HopChunks = Callable[[str], ChunksLike]
