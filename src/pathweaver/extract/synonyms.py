"""Synonym edges between entities whose name vectors are close: cos(u, v) > phi (AGRAG §III-B, Eq. 5).

The all-pairs search runs in square tiles of ``block`` rows, one tile per thread of ``retrieval.parallel`` at a
time, so memory stays at ``block``² floats per thread whatever the number of entities; every pair above phi is
found (no approximate top-k). From ``projection.MIN_ROWS`` entities on, tiles are scored in a fitted projection of
``DIM`` dimensions plus the Cauchy–Schwarz bound of the rest (``retrieval/projection.py``): only pairs
whose bound passes phi are scored in full. The bound is the dot product of two projected rows (each carries its
residual norm as a last coordinate), so a tile is one product and one threshold scan. Every pair's cos is the
dot product of its two rows, so the edges do not depend on the tiling, the projection or the order entities
arrived in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pathweaver.retrieval.parallel import map_ordered
from pathweaver.retrieval.projection import MARGIN, MIN_ROWS, Projection, fit_basis

# Projected dimension of the tiles (queries use projection.DIM = 128). phi is a fixed, high threshold, so a coarser
# bound still passes few pairs: on the 145k entities of the 2wiki store a 2048² tile at phi = 0.9 passes 204 pairs
# at 128 dimensions, 548 at 96 and 2,864 at 64. The whole all-pairs search took 23.4-24.4 s at 96 against
# 25.4-26.7 s at 128, alternating in one process (64: no better than 96).
DIM = 96


@dataclass(frozen=True)
class _Side:
    """One side of the tiles: ids, full vectors, and the rows tiles are scored with: the full vectors, or the
    projected rows of ``Projection`` (a product of two sides is then the bound)."""

    ids: np.ndarray
    vecs: np.ndarray
    scored: np.ndarray


def _sides(*parts: tuple[np.ndarray, np.ndarray]) -> list[_Side]:
    """Sides on one common projection when the first (the new entities) has enough rows to repay projecting
    them all, else scored on the full vectors (a watcher batch pairs a few hundred entities with the rest)."""
    if parts[0][1].shape[0] < MIN_ROWS:
        return [_Side(ids, vecs, vecs) for ids, vecs in parts]
    basis = fit_basis(parts[0][1], DIM)  # the basis only decides which pairs are rescored, never the result
    out = []
    for ids, vecs in parts:
        out.append(_Side(ids, vecs, Projection.of(vecs, basis).rows))
    return out


def _check(ids: np.ndarray, vecs: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    vecs = np.asarray(vecs, dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape[0] != ids.shape[0]:
        raise ValueError(
            f"{what}: need ids of shape (n,) and vecs of shape (n, dim), got {ids.shape} and {vecs.shape}"
        )
    if np.unique(ids).shape[0] != ids.shape[0]:
        raise ValueError(f"{what}: ids must be unique")
    return ids, vecs


def _check_args(phi: float, block: int) -> None:
    if not -1.0 <= phi < 1.0:
        raise ValueError(f"phi must be in [-1, 1), got {phi}")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")


def _tile_pairs(a: _Side, b: _Side, i: int, j: int, block: int, phi: float, skip_b: np.ndarray | None = None
                ) -> list[tuple[int, int, float]]:
    """Pairs above phi between rows ``i:i+block`` of ``a`` and ``j:j+block`` of ``b`` (but none of the rows of
    ``b`` where ``skip_b`` is set)."""
    bound = a.scored[i : i + block] @ b.scored[j : j + block].T
    hits = np.flatnonzero(bound.ravel() > phi - MARGIN)  # faster than a 2-d nonzero when few pass
    if not hits.size:
        return []
    rows, cols = np.divmod(hits, bound.shape[1])
    rows, cols = rows + i, cols + j
    if skip_b is not None:
        keep = ~skip_b[cols]
        rows, cols = rows[keep], cols[keep]
    cos = np.einsum("ij,ij->i", a.vecs[rows], b.vecs[cols])
    out: list[tuple[int, int, float]] = []
    for r, c, v in zip(rows.tolist(), cols.tolist(), cos.tolist(), strict=True):
        x, y = int(a.ids[r]), int(b.ids[c])
        if x != y and v > phi:
            out.append((min(x, y), max(x, y), float(v)))
    return out


def synonym_pairs(
    ids: np.ndarray, vecs: np.ndarray, phi: float = 0.9, block: int = 2048
) -> list[tuple[int, int, float]]:
    """All pairs (a_id, b_id, cos) with a_id < b_id and cos > phi (Eq. 5), sorted; ``vecs`` are unit vectors."""
    _check_args(phi, block)
    ids, vecs = _check(ids, vecs, "synonym_pairs")
    (side,) = _sides((ids, vecs))
    n = ids.shape[0]
    # upper triangle of tiles; pairs inside a diagonal tile are seen twice
    tiles = [(i, j) for i in range(0, n, block) for j in range(i, n, block)]
    found = _pairs_in_tiles(side, side, tiles, phi, block)
    return sorted((a, b, c) for (a, b), c in found.items())


def _pairs_in_tiles(a: _Side, b: _Side, tiles: list[tuple[int, int]], phi: float, block: int,
                    skip_b: np.ndarray | None = None) -> dict[tuple[int, int], float]:
    """The pairs above phi of the ``(a row, b row)`` tiles, the tiles spread over the thread pool (the products
    release the GIL); rows of ``b`` where ``skip_b`` is set take no part."""
    found: dict[tuple[int, int], float] = {}
    for pairs in map_ordered(lambda t: _tile_pairs(a, b, t[0], t[1], block, phi, skip_b), tiles):
        for x, y, c in pairs:
            found[(x, y)] = c
    return found


def synonym_pairs_for(
    new_ids: np.ndarray,
    new_vecs: np.ndarray,
    all_ids: np.ndarray,
    all_vecs: np.ndarray,
    phi: float = 0.9,
    block: int = 2048,
) -> list[tuple[int, int, float]]:
    """Pairs above phi that involve at least one of ``new_ids`` (incremental indexing), sorted.

    ``all_ids`` may or may not already contain the new ids; new vectors win for ids present in both.
    """
    _check_args(phi, block)
    new_ids, new_vecs = _check(new_ids, new_vecs, "synonym_pairs_for (new)")
    all_ids, all_vecs = _check(all_ids, all_vecs, "synonym_pairs_for (all)")
    if new_vecs.shape[0] and all_vecs.shape[0] and new_vecs.shape[1] != all_vecs.shape[1]:
        raise ValueError(f"vector dimensions differ: {new_vecs.shape[1]} vs {all_vecs.shape[1]}")
    # new x new once (upper triangle of tiles), then new x all, skipping the new among all: no copy of the other
    # rows (a watcher batch pairs a few dozen entities with 145k, whose 220 MB of vectors it used to copy)
    is_new = np.isin(all_ids, new_ids)
    new, every = _sides((new_ids, new_vecs), (all_ids, all_vecs))
    n_new, n_all = new_ids.shape[0], all_ids.shape[0]
    tiles = [(i, j) for i in range(0, n_new, block) for j in range(i, n_new, block)]
    found = _pairs_in_tiles(new, new, tiles, phi, block)
    found.update(_pairs_in_tiles(new, every, [(i, j) for i in range(0, n_new, block) for j in range(0, n_all, block)],
                                 phi, block, skip_b=is_new))
    return sorted((a, b, c) for (a, b), c in found.items())
