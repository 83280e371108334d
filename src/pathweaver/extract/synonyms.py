"""Synonym edges between entities whose name vectors are close: cos(u, v) > phi (AGRAG §III-B, Eq. 5).

The all-pairs search runs in square tiles of ``block`` rows, one tile per thread of ``retrieval.parallel`` at a
time, so memory stays at ``block``² floats per thread whatever the number of entities; every pair above phi is
found (no approximate top-k).
"""

from __future__ import annotations

import numpy as np

from pathweaver.retrieval.parallel import map_ordered


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


def _tile_pairs(
    a_ids: np.ndarray, a_vecs: np.ndarray, b_ids: np.ndarray, b_vecs: np.ndarray, phi: float
) -> list[tuple[int, int, float]]:
    sims = a_vecs @ b_vecs.T
    rows, cols = np.nonzero(sims > phi)
    out: list[tuple[int, int, float]] = []
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
        x, y = int(a_ids[r]), int(b_ids[c])
        if x != y:
            out.append((min(x, y), max(x, y), float(sims[r, c])))
    return out


def synonym_pairs(
    ids: np.ndarray, vecs: np.ndarray, phi: float = 0.9, block: int = 2048
) -> list[tuple[int, int, float]]:
    """All pairs (a_id, b_id, cos) with a_id < b_id and cos > phi (Eq. 5), sorted; ``vecs`` are unit vectors."""
    _check_args(phi, block)
    ids, vecs = _check(ids, vecs, "synonym_pairs")
    n = ids.shape[0]
    # upper triangle of tiles; pairs inside a diagonal tile are seen twice
    tiles = [(i, j) for i in range(0, n, block) for j in range(i, n, block)]
    found = _pairs_in_tiles(ids, vecs, ids, vecs, tiles, phi, block)
    return sorted((a, b, c) for (a, b), c in found.items())


def _pairs_in_tiles(a_ids: np.ndarray, a_vecs: np.ndarray, b_ids: np.ndarray, b_vecs: np.ndarray,
                    tiles: list[tuple[int, int]], phi: float, block: int) -> dict[tuple[int, int], float]:
    """The pairs above phi of the ``(a row, b row)`` tiles, the tiles spread over the thread pool (the products
    release the GIL)."""

    def one(tile: tuple[int, int]) -> list[tuple[int, int, float]]:
        i, j = tile
        return _tile_pairs(a_ids[i : i + block], a_vecs[i : i + block], b_ids[j : j + block], b_vecs[j : j + block],
                           phi)

    found: dict[tuple[int, int], float] = {}
    for pairs in map_ordered(one, tiles):
        for a, b, c in pairs:
            found[(a, b)] = c
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
    keep = ~np.isin(all_ids, new_ids)
    old_ids, old_vecs = all_ids[keep], all_vecs[keep]
    # new x new once (upper triangle of tiles), then new x old: half the work of new x (old + new).
    found = {(a, b): c for a, b, c in synonym_pairs(new_ids, new_vecs, phi, block)}
    tiles = [(i, j) for i in range(0, new_ids.shape[0], block) for j in range(0, old_ids.shape[0], block)]
    found.update(_pairs_in_tiles(new_ids, new_vecs, old_ids, old_vecs, tiles, phi, block))
    return sorted((a, b, c) for (a, b), c in found.items())
