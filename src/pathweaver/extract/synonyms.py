"""Synonym edges between entities whose name vectors are close: cos(u, v) > phi (AGRAG §III-B, Eq. 5).

The all-pairs search runs in square tiles of ``block`` rows, so memory stays at ``block``² per tile whatever the
number of entities; every pair above phi is found (no approximate top-k). From ``projection.MIN_ROWS`` entities
on, tiles are scored in a fitted projection of ``DIM`` dimensions plus the Cauchy–Schwarz bound of the rest
(``numeric/projection.py``): only pairs whose bound passes phi are scored in full. The bound is the dot product
of two projected rows (each carries its residual norm as a last coordinate), so a tile is one product and one
threshold scan.

Where the CPU multiplies bfloat16 natively (``BF16``, ``models/precision.py``), projected tiles are multiplied in
bfloat16, which is faster than float32 there, and compared against phi lowered by the rounding bound of bfloat16
(``BF16_SLACK``); the pairs that pass go through the float32 bound and then the exact product, the same two tests
as the float32 tiles, so the edges are the same. Tiles run on our thread pool, each worker's torch ops on one
OpenMP thread (``models/openmp.py``), one worker's product beside another's threshold scan; where that setting
is not available, bfloat16 tiles run one after the other on torch's threads in the caller's thread. Every pair's
cos is the dot product of its two rows, so the edges do not depend on the tiling, the projection, the precision
of the bound or the order entities arrived in.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from pathweaver.models import openmp
from pathweaver.models.precision import native_bf16
from pathweaver.numeric.parallel import POOL_PREFIX, map_ordered
from pathweaver.numeric.projection import MARGIN, MIN_ROWS, Projection, fit_basis

# Projected dimension of the tiles (queries use projection.DIM = 128): phi is a fixed, high threshold, so a coarser
# bound still passes few pairs, and 96 made the whole search fastest (docs/design-notes.md).
DIM = 96
PROBE_ROWS = 512  # rows of the probe tile that checks the bfloat16 bound before it is used
BF16 = True  # multiply projected tiles in bfloat16 where the CPU does so natively (see the module docstring)
# bfloat16 keeps 8 significant bits: a float32 rounds to it within u = 2^-8 of itself, relatively. Both factors
# rounded, products summed in float32 (97 terms: < 1e-5 here) and the sum rounded back to bfloat16 put the tile's
# value within (3u + 4u²)·|a|·|b| of the float32 rows' dot product; the float32 rows' own rounding is MARGIN.
_U = 2.0**-8
BF16_SLACK = 3 * _U + 4 * _U * _U + 1e-5


@dataclass(frozen=True)
class _Side:
    """One side of the tiles: ids, full vectors, and the rows tiles are scored with: the full vectors, or the
    projected rows of ``Projection`` (a product of two sides is then the bound), and those rows in bfloat16 (a
    torch tensor) when tiles are multiplied in bfloat16."""

    ids: np.ndarray
    vecs: np.ndarray
    scored: np.ndarray
    half: Any = None
    norm: float = 0.0  # the largest norm of a scored row, when ``half`` is set (the rounding bound scales with it)


def _sides(*parts: tuple[np.ndarray, np.ndarray]) -> list[_Side]:
    """Sides on one common projection when the first (the new entities) has enough rows to repay projecting
    them all, else scored on the full vectors (a watcher batch pairs a few hundred entities with the rest)."""
    if parts[0][1].shape[0] < MIN_ROWS:
        return [_Side(ids, vecs, vecs) for ids, vecs in parts]
    basis = fit_basis(parts[0][1], DIM)  # the basis only decides which pairs are rescored, never the result
    sides = [_Side(ids, vecs, Projection.of(vecs, basis).rows) for ids, vecs in parts]
    if not (BF16 and native_bf16()):  # elsewhere torch converts: slower than float32
        return sides
    import torch

    halves = [_Side(s.ids, s.vecs, s.scored, torch.from_numpy(s.scored).bfloat16(), _max_norm(s.scored))
              for s in sides]
    return halves if all(_keeps_bounds(halves[0], s) for s in halves) else sides  # the other side may be empty


def _keeps_bounds(a: _Side, b: _Side) -> bool:
    """Whether a probe tile's bfloat16 values lie within ``BF16_SLACK`` of the float32 products, as the slack
    assumes of this torch build (products summed in float32)."""
    n, m = min(PROBE_ROWS, a.scored.shape[0]), min(PROBE_ROWS, b.scored.shape[0])
    exact = a.scored[:n] @ b.scored[:m].T
    half = (a.half[:n] @ b.half[:m].T).float().numpy()
    return bool((np.abs(half - exact) <= BF16_SLACK * a.norm * b.norm).all())


def _max_norm(rows: np.ndarray) -> float:
    return float(np.sqrt(np.einsum("ij,ij->i", rows, rows).max())) if rows.shape[0] else 0.0


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


def _bf16_floor_bits(x: float) -> int:
    """The int16 bit pattern of the largest bfloat16 at most ``x`` (> 0): for non-negative bfloat16 values the
    bit patterns, read as int16, order as the values do, and negative ones read as negative int16."""
    import torch

    bits = int(torch.tensor([x], dtype=torch.float32).bfloat16().view(torch.int16).item())
    value = float(torch.tensor([bits], dtype=torch.int16).view(torch.bfloat16).float().item())
    return bits - 1 if value > x else bits


def _half_bits(a: _Side, b: _Side, phi: float) -> int | None:
    """The int16 pattern a bfloat16 bound between ``a`` and ``b`` must reach to possibly pass phi in float32, or
    None when the bfloat16 test cannot be used (no bfloat16 rows, or phi near or below 0)."""
    if a.half is None or b.half is None:
        return None
    floor = phi - MARGIN - BF16_SLACK * a.norm * b.norm
    return _bf16_floor_bits(floor) if floor > 0 else None


def _half_hits(a: _Side, b: _Side, i: int, j: int, block: int, bits: int) -> np.ndarray:
    """Flat indices into the ``(i, j)`` tile of the pairs whose bfloat16 bound reaches ``bits`` (a superset of
    those whose float32 bound passes). The product runs on torch's threads; numpy compares the int16 view, which
    was quicker than a comparison in torch or a nonzero eight flags at a time."""
    import torch

    tile = a.half[i : i + block] @ b.half[j : j + block].T
    return np.flatnonzero(tile.view(torch.int16).numpy().ravel() >= bits)


Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]  # (lower ids, higher ids, cos), one pair per position


def _tile_pairs(a: _Side, b: _Side, i: int, j: int, block: int, phi: float, bits: int | None) -> Pairs:
    """Pairs above phi between rows ``i:i+block`` of ``a`` and ``j:j+block`` of ``b`` (``bits``: the bfloat16
    test, ``_half_bits``)."""
    if bits is not None and threading.current_thread().name.startswith(POOL_PREFIX):
        openmp.single_thread()  # a worker of ours: its products on one OpenMP thread
    width = min(block, b.scored.shape[0] - j)
    if bits is None:
        bound = a.scored[i : i + block] @ b.scored[j : j + block].T
        hits = np.flatnonzero(bound.ravel() > phi - MARGIN)  # faster than a 2-d nonzero when few pass
    else:
        hits = _half_hits(a, b, i, j, block, bits)
        if hits.size:  # the float32 bound of the few that passed the bfloat16 one
            rows, cols = np.divmod(hits, width)
            hits = hits[np.einsum("ij,ij->i", a.scored[rows + i], b.scored[cols + j]) > phi - MARGIN]
    rows, cols = np.divmod(hits, width)
    rows, cols = rows + i, cols + j
    cos = np.einsum("ij,ij->i", a.vecs[rows], b.vecs[cols])
    x, y = a.ids[rows], b.ids[cols]
    keep = (x != y) & (cos > phi)
    x, y = x[keep], y[keep]
    return np.minimum(x, y), np.maximum(x, y), cos[keep]


def _sorted_unique(parts: list[Pairs]) -> list[tuple[int, int, float]]:
    """The pairs of all tiles, each once (a diagonal tile sees a pair from both sides, with the same cos: the
    products of its two rows in either order), sorted."""
    if not parts:
        return []
    x, y, cos = (np.concatenate([p[k] for p in parts]) for k in range(3))
    order = np.lexsort((y, x))
    x, y, cos = x[order], y[order], cos[order]
    first = np.ones(x.shape[0], dtype=bool)
    first[1:] = (x[1:] != x[:-1]) | (y[1:] != y[:-1])
    return list(zip(x[first].tolist(), y[first].tolist(), cos[first].astype(np.float64).tolist(), strict=True))


def synonym_pairs(
    ids: np.ndarray, vecs: np.ndarray, phi: float = 0.9, block: int = 2048
) -> list[tuple[int, int, float]]:
    """All pairs (a_id, b_id, cos) with a_id < b_id and cos > phi (Eq. 5), sorted; ``vecs`` are unit vectors."""
    _check_args(phi, block)
    ids, vecs = _check(ids, vecs, "synonym_pairs")
    (side,) = _sides((ids, vecs))
    return _sorted_unique(_pairs_in_tiles(side, side, _triangle(ids.shape[0], block), phi, block))


def _triangle(n: int, block: int) -> list[tuple[int, int]]:
    """The upper triangle of tiles of an ``n`` × ``n`` product (pairs inside a diagonal tile are seen twice)."""
    return [(i, j) for i in range(0, n, block) for j in range(i, n, block)]


def on_our_pool() -> bool:
    """Whether the tiles of a large search run on our thread pool (so that a caller's own thread can share the
    cores with them): float32 tiles always do, bfloat16 ones where each worker can keep to one OpenMP thread."""
    return not (BF16 and native_bf16()) or openmp.available()


def _pairs_in_tiles(a: _Side, b: _Side, tiles: list[tuple[int, int]], phi: float, block: int,
                    wide_after: threading.Event | None = None) -> list[Pairs]:
    """The pairs above phi of the ``(a row, b row)`` tiles, on our thread pool (``map_ordered``; numpy's products
    and torch's release the GIL), or, for bfloat16 tiles where ``on_our_pool`` is False, one after the other on
    the caller's thread with torch's threads (two tiles at once on two OpenMP teams would put four threads on
    the cores)."""
    bits = _half_bits(a, b, phi)

    def one(t: tuple[int, int]) -> Pairs:
        return _tile_pairs(a, b, t[0], t[1], block, phi, bits)

    serial = bits is not None and not openmp.available()
    return [one(t) for t in tiles] if serial else map_ordered(one, tiles, wide_after)


def synonym_pairs_for(
    new_ids: np.ndarray,
    new_vecs: np.ndarray,
    all_ids: np.ndarray,
    all_vecs: np.ndarray,
    phi: float = 0.9,
    block: int = 2048,
    wide_after: threading.Event | None = None,
) -> list[tuple[int, int, float]]:
    """Pairs above phi that involve at least one of ``new_ids`` (incremental indexing), sorted.

    ``all_ids`` may or may not already contain the new ids; new vectors win for ids present in both. With
    ``wide_after``, the search keeps to one worker until the event is set (``parallel.map_ordered``).
    """
    _check_args(phi, block)
    new_ids, new_vecs = _check(new_ids, new_vecs, "synonym_pairs_for (new)")
    all_ids, all_vecs = _check(all_ids, all_vecs, "synonym_pairs_for (all)")
    if new_vecs.shape[0] and all_vecs.shape[0] and new_vecs.shape[1] != all_vecs.shape[1]:
        raise ValueError(f"vector dimensions differ: {new_vecs.shape[1]} vs {all_vecs.shape[1]}")
    # new x new once (upper triangle of tiles), then new x the others: a refresh, where every entity is new,
    # scores n²/2 products, not n²/2 + n² of which the second part only found pairs already seen
    old_ids, old_vecs = _others(all_ids, all_vecs, new_ids)
    new, old = _sides((new_ids, new_vecs), (old_ids, old_vecs))
    n_new, n_old = new_ids.shape[0], old_ids.shape[0]
    found = _pairs_in_tiles(new, new, _triangle(n_new, block), phi, block, wide_after)
    found += _pairs_in_tiles(new, old, [(i, j) for i in range(0, n_new, block) for j in range(0, n_old, block)],
                             phi, block, wide_after)
    return _sorted_unique(found)


def _others(ids: np.ndarray, vecs: np.ndarray, leave_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``ids``/``vecs`` whose id is not in ``leave_out``: a view when they are one run of rows (the new
    entities have the highest ids, so the others come first), else a copy."""
    keep = np.flatnonzero(~np.isin(ids, leave_out))
    if keep.size and keep[-1] - keep[0] + 1 == keep.size:
        return ids[keep[0] : keep[-1] + 1], vecs[keep[0] : keep[-1] + 1]
    return ids[keep], vecs[keep]
