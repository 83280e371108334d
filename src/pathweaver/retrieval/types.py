"""Shared types of the retrieval layer: the query, the environment a method runs in, and its result.

Every retrieval method is a function ``fn(env: RetrievalEnv, query: Query, top_k: int, params) -> RetrievalResult``
where ``params`` is the method's own parameter dataclass (pathweaver's defaults; ``presets.py`` has the
papers'). Indices in these types are positions in the ``GraphSnapshot`` arrays (entity index, passage index, relation index), not store ids; store ids
are added when results are shaped for output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pathweaver.store.dense import DenseScores
from pathweaver.store.snapshot import GraphSnapshot

# (query text, k) -> [(passage index, BM25 score, higher is better)], best first. Backed by FTS5 in the store.
Bm25Fn = Callable[[str, int], list[tuple[int, float]]]
# texts -> (n, dim) unit vectors
EncodeFn = Callable[[list[str]], np.ndarray]
# Document frequencies (chunks containing them) of normalised words, as the store counts them; unknown ones left out.
WordDf = Callable[[list[str]], Mapping[str, int]]


class Query:
    """A question with its unit embedding. ``keywords`` are optional agent- or LLM-supplied keywords (PathRAG).

    Give ``vec``, or ``embed`` to compute it on first use: a method that never reads the vector (``bm25``) then
    never pays for the model."""

    def __init__(self, text: str, vec: np.ndarray | None = None, keywords: list[str] | None = None,
                 embed: Callable[[str], np.ndarray] | None = None) -> None:
        if vec is None and embed is None:
            raise ValueError("a Query needs its vector or a function that embeds its text")
        self.text = text
        self.keywords = list(keywords or [])
        self._vec = vec
        self._embed = embed
        # what a method computed from this question alone, kept for its reruns on the same question (the per-note
        # widening of ``notes.per_note`` runs a method again at 3x and 9x k): LEGO's embedded path texts
        self.memo: dict[str, Any] = {}

    @property
    def vec(self) -> np.ndarray:
        if self._vec is None:
            assert self._embed is not None
            self._vec = self._embed(self.text)
        return self._vec

    def __repr__(self) -> str:
        return f"Query(text={self.text!r}, keywords={self.keywords!r}, embedded={self._vec is not None})"


@dataclass
class RetrievalEnv:
    """What a method may use: the cached snapshot, BM25 over chunks, the embedder and, when a store backs it, the
    document frequencies of words."""

    snapshot: GraphSnapshot
    bm25_chunks: Bm25Fn
    encode: EncodeFn
    word_df: WordDf | None = None
    # the entity names spaCy finds in a question, normalised as the indexer names them; None where the store's
    # ``extract.entities`` has no ``ner`` (issue 23: "NER on the question")
    question_ner: Callable[[str], Sequence[str]] | None = None
    # a question vector -> its dense scores as the store answers them (``store.dense``: its vector index where it
    # has one); None: exact over ``snapshot.chunk_vecs``
    dense: Callable[[np.ndarray], DenseScores] | None = None


@dataclass
class ChunkHit:
    """A retrieved passage. ``passage`` is the snapshot passage index."""

    passage: int
    score: float
    backfill: bool = False  # filled in from dense or hybrid ranking, not reached by the method's graph (issue 23)
    merged: list[int] = field(default_factory=list)  # passages of the same note merged into this one (``notes``)


def take_turns(first: list[ChunkHit], second: list[ChunkHit], top_k: int,
               then: Sequence[ChunkHit] = ()) -> list[ChunkHit]:
    """At most ``top_k`` hits: those of the two lists taking turns (``first``'s first), then ``then``'s, each
    passage once."""
    turns = [hit for i in range(max(len(first), len(second))) for hit in first[i : i + 1] + second[i : i + 1]]
    out: list[ChunkHit] = []
    seen: set[int] = set()
    for hit in [*turns, *then]:
        if hit.passage not in seen and len(out) < top_k:
            seen.add(hit.passage)
            out.append(hit)
    return out


SYNONYM_EDGE = -1  # ``PathHit.relations``: a synonym edge (AGRAG Eq. 5)
NAME_EDGE = -2  # ``PathHit.relations``: a name edge, a's document mentions b (retrieval/namegraph.py)


@dataclass
class PathHit:
    """A relational path. ``nodes`` are entity indices; ``relations[i]`` joins nodes i and i+1 (a relation index,
    ``SYNONYM_EDGE`` or ``NAME_EDGE``)."""

    nodes: list[int]
    relations: list[int]
    reliability: float
    text: str
    passages: list[int] = field(default_factory=list)  # supporting passage indices


@dataclass
class Subgraph:
    """A retrieved subgraph (MCMI, LEGO extraction). Edge tuples are (u, v, cost) over a node space described by
    ``node_labels`` (entity names, passage titles, or the pseudo node)."""

    nodes: list[str]
    edges: list[tuple[str, str, float]]
    text: str
    stats: dict[str, Any] = field(default_factory=dict)  # e.g. mcst_nodes, mcst_edges, mcmi_nodes, ratio r(G)
    node_scores: dict[str, float] = field(default_factory=dict)  # e.g. PPR influence, for drawing

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON-ready containers, copied one level deep, since ``dataclasses.asdict`` deep-copies
        every value and is slow on a large subgraph."""
        return {
            "nodes": list(self.nodes),
            "edges": [[u, v, float(c)] for u, v, c in self.edges],
            "text": self.text,
            "stats": dict(self.stats),
            "node_scores": {k: float(v) for k, v in self.node_scores.items()},
        }


@dataclass
class RetrievalResult:
    """Chunks ranked best first, plus the method's paths or subgraph when it has them."""

    method: str
    chunks: list[ChunkHit]
    paths: list[PathHit] = field(default_factory=list)
    subgraph: Subgraph | None = None
    triples: list[int] = field(default_factory=list)  # relation indices, in prompt order where it matters
    info: dict[str, Any] = field(default_factory=dict)  # parameters used, timings, sizes
    triple_scores: dict[int, float] = field(default_factory=dict)  # relation index -> score, where a method has one

    def backfill_share(self) -> float:
        """The share of the returned chunks that came from a back-fill (``ChunkHit.backfill``); 0.0 for none."""
        return sum(c.backfill for c in self.chunks) / len(self.chunks) if self.chunks else 0.0
