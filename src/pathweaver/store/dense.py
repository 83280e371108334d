"""A question's dense scores over a snapshot's passages, as the store answers them: exact over the snapshot's
in-memory chunk matrix (SQLite), or through pgvector's HNSW index (PostgreSQL), where the snapshot need not hold
the chunk vectors at all (``GraphSnapshot.chunk_vecs`` is made on first use there).

Both answer the same three questions, so retrieval never knows which one it asks: ``top(k)`` (the ``k`` nearest
passages, best first), ``at(passages)`` (the cosines of given passages) and ``full()`` (every passage's cosine,
which only the methods that score the whole passage set ask for).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pathweaver.errors import UserError
from pathweaver.numeric.parallel import matmul
from pathweaver.numeric.projection import top_stable
from pathweaver.store.snapshot import GraphSnapshot

EXACT = "exact"
HNSW = "hnsw"
# (query vector, k) -> [(chunk id, cosine)], best first; (query vector, chunk ids) -> {chunk id: cosine}
NearestFn = Callable[[np.ndarray, int], list[tuple[int, float]]]
CosinesFn = Callable[[np.ndarray, list[int]], dict[int, float]]


class SeedError(UserError, ValueError):
    """The snapshot lacks what a seed function needs (e.g. vectors were not loaded)."""


def check_vecs(vecs: np.ndarray, qvec: np.ndarray, what: str) -> None:
    """A clear error where a vector table's width is not the query vector's."""
    if vecs.ndim != 2 or (vecs.shape[0] and vecs.shape[1] != qvec.shape[-1]):
        raise SeedError(
            f"{what} vectors have shape {vecs.shape} but the query vector has dimension {qvec.shape[-1]}; "
            "load the snapshot with vectors from a store indexed with the same embedding model"
        )


class DenseScores:
    """Exact cosines of one query with every passage of ``snapshot`` (unit rows, so a dot product), computed on
    first use: the scores retrieval has always ranked by."""

    via = EXACT

    def __init__(self, snapshot: GraphSnapshot, qvec: np.ndarray) -> None:
        self.snapshot = snapshot
        self.qvec = qvec
        self._full: np.ndarray | None = None

    def full(self) -> np.ndarray:
        """Cosine of the query with every passage, shape (P,)."""
        if self._full is None:
            if self.snapshot.n_passages == 0:
                self._full = np.zeros(0, dtype=np.float32)
            else:
                vecs = self.snapshot.chunk_vecs
                check_vecs(vecs, self.qvec, "chunk")
                self._full = matmul(vecs, self.qvec)
        return self._full

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(passage indices, cosines) of the ``k`` nearest passages, best first; equal cosines (copies of a
        note) by passage order, also at the k-th place, as ``IndexedScores`` ranks them."""
        full = self.full()
        idx = top_stable(full, k)
        return idx, full[idx]

    def at(self, passages: np.ndarray) -> np.ndarray:
        """The cosines of ``passages`` (indices), in their order."""
        return self.full()[np.asarray(passages, dtype=np.int64)]


class IndexedScores(DenseScores):
    """Cosines from the store's vector index: ``top`` asks the index (approximate: HNSW), ``at`` asks the store
    for the given rows' exact cosines, each answer kept for the query's later asks; ``full`` falls back to the
    snapshot's matrix. Chunks the index returns that the snapshot lacks (written after it) are skipped."""

    via = HNSW

    def __init__(self, snapshot: GraphSnapshot, qvec: np.ndarray, nearest: NearestFn, cosines: CosinesFn) -> None:
        super().__init__(snapshot, qvec)
        self._nearest = nearest
        self._cosines = cosines
        self._known: dict[int, float] = {}  # passage index -> cosine
        self._tops: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # k -> top(k)

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        if k < 1 or self.snapshot.n_passages == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if k not in self._tops:
            index = self.snapshot.chunk_index
            ask = k + 1  # one past k, so that a tie at the k-th place shows; more while the last one still ties
            while True:
                found = self._nearest(self.qvec, ask)
                hits = [(index[cid], cos) for cid, cos in found if cid in index]
                if len(found) < ask or len(hits) <= k or hits[-1][1] < hits[k - 1][1]:
                    break
                ask *= 2
            self._known.update(hits)
            # the index returns equal distances in its own order; the exact product's is passage order
            hits = sorted(hits, key=lambda h: (-h[1], h[0]))[:k]
            self._tops[k] = (np.array([p for p, _ in hits], dtype=np.int64),
                             np.array([c for _, c in hits], dtype=np.float32))
        return self._tops[k]

    def at(self, passages: np.ndarray) -> np.ndarray:
        rows = np.asarray(passages, dtype=np.int64).reshape(-1)
        if self._full is not None:
            return self._full[rows]
        missing = sorted({int(p) for p in rows.tolist()} - self._known.keys())
        if missing:
            ids = self.snapshot.chunk_ids
            found = self._cosines(self.qvec, [int(ids[p]) for p in missing])
            self._known.update({p: found.get(int(ids[p]), 0.0) for p in missing})
        return np.array([self._known[int(p)] for p in rows.tolist()], dtype=np.float32)
