"""Seed retrieval: dense, BM25 and hybrid chunk ranking, plus query → entity / triple seeds for the graph methods.

- dense: cosine as the store answers it (``store.dense``: exact over ``snapshot.chunk_vecs``, unit rows, so a dot
  product, or pgvector's HNSW index on PostgreSQL);
- bm25: FTS5 BM25 through ``env.bm25_chunks``;
- hybrid: AGRAG Eq. 20-21, HS(q,t) = (MS(q,t) + BM25(q,t)) / 2. BM25 is unbounded, so both scores are min-max
  normalised over the candidate pool first (our choice; the paper leaves the scales unstated).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pathweaver.config import ConfigError
from pathweaver.numeric.projection import MIN_ROWS as PROJECT_MIN_ROWS
from pathweaver.numeric.projection import Projection, exact_top_k
from pathweaver.numeric.projection import top_indices as top_indices  # the graph methods import it from here
from pathweaver.retrieval.graphs import cached
from pathweaver.retrieval.types import ChunkHit, Query, RetrievalEnv, RetrievalResult
from pathweaver.store.dense import DenseScores, check_vecs
from pathweaver.store.dense import SeedError as SeedError  # raised by the seed functions and pathrag
from pathweaver.store.snapshot import GraphSnapshot

if TYPE_CHECKING:
    from pathweaver.store.composed import ComposedSearch


def dense_scores(snapshot: GraphSnapshot, qvec: np.ndarray) -> np.ndarray:
    """Cosine of the query with every passage, shape (P,)."""
    return DenseScores(snapshot, qvec).full()


def dense_view(env: RetrievalEnv, query: Query) -> DenseScores:
    """The question's dense scores as the store answers them (``store.dense``: its vector index where it has one,
    else exact over the snapshot's matrix), once per question and snapshot."""
    key = ("dense-scores", env.snapshot.version, id(env.snapshot))
    view = query.memo.get(key)
    if view is None:
        view = env.dense(query.vec) if env.dense is not None else DenseScores(env.snapshot, query.vec)
        query.memo[key] = view
    return view


def nearest(snapshot: GraphSnapshot, vecs: np.ndarray, what: str, qvec: np.ndarray, k: int
            ) -> list[tuple[int, float]]:
    """The ``k`` rows of ``vecs`` (a snapshot vector table) nearest to ``qvec`` by cosine, best first. Large
    tables are searched through a projection fitted once per snapshot (``numeric/projection.py``): the same
    rows as the full product, at about a third of the memory traffic."""
    check_vecs(vecs, qvec, what)
    projection = cached(snapshot, ("projection", what), lambda: Projection.fit(vecs, half=True), synonym_free=True) \
        if vecs.shape[0] >= PROJECT_MIN_ROWS else None
    rows, scores = exact_top_k(vecs, projection, qvec, k)
    return list(zip(rows.tolist(), scores.astype(float).tolist(), strict=True))


def _composed(snapshot: GraphSnapshot, qvec: np.ndarray) -> ComposedSearch | None:
    """The snapshot's search over composed vectors (``store.composed``), when it has one for ``qvec``'s width:
    the same rows and scores as ``nearest`` over the tables, without making them."""
    search = snapshot.composed.get() if snapshot.composed is not None else None
    return search if search is not None and search.words.shape[1] == qvec.shape[-1] else None


def _pairs(rows: np.ndarray, scores: np.ndarray) -> list[tuple[int, float]]:
    return list(zip(rows.tolist(), scores.astype(float).tolist(), strict=True))


def top_entities(snapshot: GraphSnapshot, qvec: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The ``n`` entities nearest to ``qvec`` by cosine: [(entity index, cos)], best first."""
    if snapshot.n_entities == 0 or n <= 0:
        return []
    search = _composed(snapshot, qvec)
    if search is not None:
        return _pairs(*search.top_entities(qvec, n))
    return nearest(snapshot, snapshot.entity_vecs, "entity", qvec, n)


def top_triples(snapshot: GraphSnapshot, qvec: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` relations whose triple text is nearest to ``qvec`` (AGRAG §III-C query → top-k triples):
    [(relation index, cos)], best first."""
    if snapshot.n_relations == 0 or k <= 0:
        return []
    search = _composed(snapshot, qvec)
    if search is not None:
        return _pairs(*search.top_relations(qvec, k))
    return nearest(snapshot, snapshot.rel_vecs, "relation", qvec, k)


def minmax(values: np.ndarray) -> np.ndarray:
    """Min-max normalise to [0, 1]; a constant non-empty array maps to all ones."""
    if values.size == 0:
        return values.astype(np.float64)
    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= 0.0:
        return np.ones_like(values, dtype=np.float64)
    return (values.astype(np.float64) - lo) / (hi - lo)


def hybrid_chunk_scores(env: RetrievalEnv, query: Query, pool: int) -> dict[int, float]:
    """AGRAG Eq. 21 over a candidate pool: the top ``pool`` passages by dense and by BM25, each score min-max
    normalised over its own list (a passage missing from a list scores 0 there), HS = (dense + bm25) / 2."""
    if pool < 1:
        raise ConfigError(f"hybrid pool must be at least 1, got {pool}")
    key = ("hybrid-scores", env.snapshot.version, id(env.snapshot), pool)
    if key not in query.memo:  # a graph method's seeds and hybrid's floor (``floor.py``) ask for the same pool
        query.memo[key] = _hybrid_scores(env, query, pool)
    return dict(query.memo[key])


def _hybrid_scores(env: RetrievalEnv, query: Query, pool: int) -> dict[int, float]:
    dense_top, dense_cos = dense_view(env, query).top(pool)
    bm25 = env.bm25_chunks(query.text, pool)
    combined: dict[int, float] = {}
    for p, s in zip(dense_top.tolist(), minmax(dense_cos).tolist(), strict=True):
        combined[p] = combined.get(p, 0.0) + s / 2.0
    if bm25:
        bm_idx = [p for p, _ in bm25]
        for p, s in zip(
            bm_idx, minmax(np.array([s for _, s in bm25], dtype=np.float64)).tolist(), strict=True
        ):
            combined[p] = combined.get(p, 0.0) + s / 2.0
    return combined


def top_hits(scores: dict[int, float], top_k: int, tie: DenseScores | None = None) -> list[ChunkHit]:
    """The ``top_k`` passages of ``scores``, best first; ties by ``tie``'s cosine (higher first), then passage
    index."""
    counts = Counter(scores.values())
    tied = [p for p, s in scores.items() if counts[s] > 1] if tie is not None else []  # only ties read a cosine
    cos = dict(zip(tied, tie.at(np.array(tied, dtype=np.int64)).tolist(), strict=True)) if tie is not None and tied \
        else {}

    def key(item: tuple[int, float]) -> tuple[float, float, int]:
        p, s = item
        return (-s, -cos.get(p, 0.0), p)

    return [ChunkHit(p, float(s)) for p, s in sorted(scores.items(), key=key)[:top_k]]


@dataclass
class DenseParams:
    """Dense retrieval has no paper parameters; top_k comes from the caller."""


@dataclass
class Bm25Params:
    """BM25 retrieval has no paper parameters (FTS5's bm25 with its defaults k1=1.2, b=0.75)."""


@dataclass
class HybridParams:
    """AGRAG Eq. 20-21 hybrid retrieval."""

    pool_min: int = 50  # candidates taken from each of dense and BM25 at least (ours; not in the paper)
    pool_factor: int = 4  # ... or pool_factor × top_k when that is larger

    def validate(self) -> None:
        if self.pool_min < 1 or self.pool_factor < 1:
            raise ConfigError(
                f"hybrid pool_min and pool_factor must be >= 1, got {self.pool_min}, {self.pool_factor}"
            )

    def pool(self, top_k: int) -> int:
        return max(self.pool_min, self.pool_factor * top_k)


def dense_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: DenseParams) -> RetrievalResult:
    """Top ``top_k`` passages by cosine with the query."""
    view = dense_view(env, query)
    idx, scores = view.top(top_k)
    return RetrievalResult("dense", [ChunkHit(int(p), float(s)) for p, s in zip(idx.tolist(), scores.tolist(),
                                                                                  strict=True)],
                           info={"dense_index": view.via})


def bm25_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: Bm25Params) -> RetrievalResult:
    """Top ``top_k`` passages by FTS5 BM25."""
    return RetrievalResult(
        "bm25", [ChunkHit(int(p), float(s)) for p, s in env.bm25_chunks(query.text, top_k)]
    )


def hybrid_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: HybridParams) -> RetrievalResult:
    """AGRAG Eq. 20: top ``k_r`` = ``top_k`` passages by the hybrid score HS (Eq. 21); ties by dense cosine."""
    view = dense_view(env, query)
    scores = hybrid_chunk_scores(env, query, params.pool(top_k))
    return RetrievalResult("hybrid", top_hits(scores, top_k, view),
                           info={"pool": params.pool(top_k), "dense_index": view.via})
