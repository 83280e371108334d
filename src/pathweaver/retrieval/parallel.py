"""Row-split matrix products on a small shared thread pool.

Scoring a query against 10^5 stored vectors, and each sparse PageRank step, is one memory-bound loop on one core.
numpy's BLAS (kept to one thread, see ``cli.py``) and scipy's sparse kernels release the GIL, so cutting the rows
into one block per thread runs them side by side: on the 2-core machine of docs/benchmarks.md, 220k×384 float32
scores take 16 ms instead of 27, and a 1M-entry sparse step 1.1 ms instead of 2.0. Every output row is the same
dot product as in ``matrix @ x``; only which thread computes it changes.

The pool is created on first use (no import-time threads) and sized by ``set_threads`` (``[compute] threads``;
0 = one per core). Matrices with fewer than ``MIN_ROWS_PER_THREAD`` rows per thread are not split.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError

T = TypeVar("T")
R = TypeVar("R")

MIN_ROWS_PER_THREAD = 16_384  # below this a block is too small to repay handing it to a thread

_lock = threading.Lock()
_threads = 0  # 0 = one per core
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def set_threads(n: int) -> None:
    """Use ``n`` threads for query-time products (0 = one per core, 1 = no threads)."""
    global _threads
    if n < 0:
        raise ConfigError(f"models.query_threads must be >= 0 (0 = one per core), got {n}")
    with _lock:
        _threads = int(n)


def threads() -> int:
    """The number of threads a product may use now."""
    return _threads or max(1, os.cpu_count() or 1)


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < n:
            old = _pool
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="pathweaver-rows")
            _pool_size = n
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def row_ranges(n_rows: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``(start, stop)`` row ranges covering ``0..n_rows`` (sizes differ by at most one)."""
    parts = max(1, min(parts, n_rows)) if n_rows else 1
    bounds = np.linspace(0, n_rows, parts + 1).astype(np.int64).tolist()
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _parts_for(n_rows: int) -> int:
    return max(1, min(threads(), n_rows // MIN_ROWS_PER_THREAD))


def _run_blocks(job: Callable[[int], None], parts: int) -> None:
    """``job(i)`` for every block: block 0 in the calling thread, the others on the pool, all finished on return."""
    futures = [_executor(parts - 1).submit(job, i) for i in range(1, parts)]
    try:
        job(0)
    finally:
        for future in futures:
            future.result()


def map_ordered(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(x) for x in items]`` with the calls spread over the pool (for work that releases the GIL, such as
    the tiles of an all-pairs product); results keep the order of ``items``."""
    parts = min(threads(), len(items))
    if parts <= 1:
        return [fn(x) for x in items]
    return list(_executor(parts).map(fn, items))


def matmul(matrix: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``matrix @ x`` for a dense ``(n, d)`` matrix and ``x`` of shape ``(d,)`` or ``(d, k)``, rows in parallel.

    ``x`` is cast to the matrix's dtype first (a float64 ``x`` would otherwise up-cast the whole matrix)."""
    x = x.astype(matrix.dtype, copy=False)
    parts = _parts_for(matrix.shape[0])
    if parts == 1:
        return matrix @ x
    out = np.empty((matrix.shape[0], *x.shape[1:]), dtype=np.result_type(matrix.dtype, x.dtype))

    spans = row_ranges(matrix.shape[0], parts)

    def block(i: int) -> None:
        a, b = spans[i]
        np.matmul(matrix[a:b], x, out=out[a:b])

    _run_blocks(block, parts)
    return out


class SparseRows:
    """A CSR matrix cut once into row blocks, so that ``dot`` runs the blocks in parallel."""

    def __init__(self, matrix: sp.spmatrix, parts: int | None = None) -> None:
        csr = sp.csr_matrix(matrix)
        self.shape: tuple[int, int] = (int(csr.shape[0]), int(csr.shape[1]))
        self.dtype = csr.dtype
        n = self.shape[0]
        self.spans = row_ranges(n, parts if parts is not None else _parts_for(n))
        self.blocks = [csr] if len(self.spans) == 1 else [csr[a:b] for a, b in self.spans]
        self._single: SparseRows | None = None

    def single(self) -> SparseRows:
        """The same rows with float32 values, cut the same way (built on first use, then kept): a step reads a
        third fewer bytes."""
        if self._single is None:
            merged = sp.vstack(self.blocks, format="csr").astype(np.float32)
            self._single = SparseRows(merged, parts=len(self.spans))
        return self._single

    def dot(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``matrix @ x`` for a vector ``x``, written into ``out`` when given."""
        if out is None:
            out = np.empty(self.shape[0], dtype=np.result_type(self.dtype, x.dtype))
        if len(self.blocks) == 1:
            out[:] = self.blocks[0] @ x
            return out

        def block(i: int) -> None:
            a, b = self.spans[i]
            out[a:b] = self.blocks[i] @ x

        _run_blocks(block, len(self.blocks))
        return out
