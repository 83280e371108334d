"""Row-split matrix products on a small shared thread pool, and sparse products on torch's.

Scoring a query against 10^5 stored vectors, and each sparse PageRank step, is one memory-bound loop on one core.
numpy's BLAS (kept to one thread, see ``cli``) and scipy's sparse kernels release the GIL, so cutting the rows
into one block per thread runs them side by side (docs/benchmarks.md). Every output row is the same
dot product as in ``matrix @ x``; only which thread computes it changes.

The pool is created on first use (no import-time threads) and sized by ``set_threads`` (``[models]
query_threads``; 0 = one per core). Matrices with fewer than ``MIN_ROWS_PER_THREAD`` rows per thread are not
split. PageRank's sparse steps run on torch's pool instead (``SparseRows``), unless threads are off.
"""

from __future__ import annotations

import copy
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError

T = TypeVar("T")
R = TypeVar("R")

SPARSE_ENGINES = ("torch", "blocks")
POOL_PREFIX = "pathweaver-rows"  # the names of our pool's threads
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
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix=POOL_PREFIX)
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


def map_ordered(fn: Callable[[T], R], items: Sequence[T], wide_after: threading.Event | None = None) -> list[R]:
    """``[fn(x) for x in items]`` with the calls spread over the pool (for work that releases the GIL, such as
    the tiles of an all-pairs product); results keep the order of ``items``.

    With ``wide_after``, one worker takes items until the event is set and the others join then: the caller has
    another thread of its own on a core until then (a refresh writing its rows), and three busy threads on two
    cores would slow that one thread down more than the second worker gains."""
    parts = min(threads(), len(items))
    if parts <= 1:
        return [fn(x) for x in items]
    if wide_after is None:
        return list(_executor(parts).map(fn, items))
    out: list[Any] = [None] * len(items)
    taken = iter(range(len(items)))
    lock, stop = threading.Lock(), threading.Event()  # stop: every item taken, or one failed

    def work(first: bool) -> None:
        if not first:
            while not (wide_after.wait(0.05) or stop.is_set()):
                pass
        while not stop.is_set():
            with lock:
                i = next(taken, None)
            if i is None:
                stop.set()
                return
            try:
                out[i] = fn(items[i])
            except BaseException:
                stop.set()
                raise

    futures = [_executor(parts).submit(work, k == 0) for k in range(parts)]
    for future in futures:
        future.result()
    return out


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
    """A CSR matrix for repeated matrix-vector products (PageRank steps), on torch's thread pool or cut into row
    blocks for ours.

    ``engine`` "torch" (the default whenever more than one thread is allowed and torch is loaded) runs each
    product as one ``torch.mv`` on a CSR tensor that shares this matrix's arrays. torch's OpenMP workers spin for
    a while after each parallel region, so right after a question's embedding by the model they are awake, and
    they take the product at once, where our pool's threads would compete with them for the cores
    (docs/design-notes.md, "PageRank"). "blocks" is the row split on our pool (``threads`` blocks, one when
    threads are off); the default in a process that has not loaded torch (its questions embedded by the numpy
    encoder, ``models.query_encoder``), which then never pays torch's import (~1 s and ~170 MB) for a walk. The
    engines' sums agree to rounding, not bit for bit (torch's kernel sums a row in another order).
    """

    def __init__(self, matrix: sp.spmatrix, parts: int | None = None, engine: str | None = None,
                 order: np.ndarray | None = None) -> None:
        csr = sp.csr_matrix(matrix)
        n = int(csr.shape[0])
        self.shape: tuple[int, int] = (n, int(csr.shape[1]))
        self.dtype = csr.dtype
        self.engine = engine or ("torch" if threads() > 1 and "torch" in sys.modules else "blocks")
        if self.engine not in SPARSE_ENGINES:
            raise ConfigError(f"sparse engine must be one of {SPARSE_ENGINES}, got {self.engine!r}")
        # ``order``: a symmetric renumbering of the nodes, inner position i holding node order[i]; products then
        # take and give vectors in that inner order (``inner``/``outer`` convert)
        self.order: np.ndarray | None = None
        self.rank: np.ndarray | None = None  # node j sits at inner position rank[j]
        self.fixed_from = 0  # nodes from here on keep their own positions
        if order is not None:
            order = np.asarray(order, dtype=np.int64)
            if order.shape != (n,) or self.shape != (n, n) or not np.array_equal(np.sort(order), np.arange(n)):
                raise ValueError("order must be a permutation of a square matrix's nodes")
            moved = np.flatnonzero(order != np.arange(n))
            self.fixed_from = int(moved[-1]) + 1 if moved.size else 0
            if moved.size:
                self.order, self.rank = order, np.argsort(order)
                csr = csr[order][:, order].tocsr()
        self._set_matrix(csr, 1 if self.engine == "torch" else parts)
        self._single: SparseRows | None = None

    def _set_matrix(self, csr: sp.csr_matrix, parts: int | None) -> None:
        self.spans = row_ranges(self.shape[0], parts if parts is not None else _parts_for(self.shape[0]))
        self.blocks = [csr] if len(self.spans) == 1 else [csr[a:b] for a, b in self.spans]
        self._tensor = _torch_csr(csr) if self.engine == "torch" else None

    def inner(self, x: np.ndarray) -> np.ndarray:
        """A vector in node order, renumbered for the products."""
        return x if self.order is None else x[self.order]

    def outer(self, x: np.ndarray) -> np.ndarray:
        """A product's vector back in node order."""
        return x if self.rank is None else x[self.rank]

    def inner_index(self, nodes: np.ndarray) -> np.ndarray:
        """Where ``nodes`` sit in the products' numbering."""
        return nodes if self.rank is None else self.rank[nodes]

    def single(self) -> SparseRows:
        """The same rows with float32 values, on the same engine, numbering and cut (built on first use, then
        kept): a step reads a third fewer bytes."""
        if self._single is None:
            twin = copy.copy(self)
            twin.dtype = np.dtype(np.float32)
            twin._set_matrix(sp.vstack(self.blocks, format="csr").astype(np.float32), len(self.spans))
            twin._single = twin
            self._single = twin
        return self._single

    def dot(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``matrix @ x`` for a vector ``x``, written into ``out`` when given."""
        if out is None:
            out = np.empty(self.shape[0], dtype=np.result_type(self.dtype, x.dtype))
        if self._tensor is not None and x.dtype == self.dtype:
            import torch

            out[:] = torch.mv(self._tensor, torch.from_numpy(np.ascontiguousarray(x))).numpy()
            return out
        if len(self.blocks) == 1:
            out[:] = self.blocks[0] @ x
            return out

        def block(i: int) -> None:
            a, b = self.spans[i]
            out[a:b] = self.blocks[i] @ x

        _run_blocks(block, len(self.blocks))
        return out


def degree_order(matrix: sp.spmatrix, fixed_from: int | None = None) -> np.ndarray:
    """Nodes ``0..fixed_from-1`` by falling number of entries in their row (stable), then the rest as they are.

    Products over a graph gather x at the columns of every row; with the busiest nodes first, their entries of x
    share a few cache lines (an order that beat reverse Cuthill-McKee: docs/design-notes.md, "PageRank")."""
    csr = sp.csr_matrix(matrix)
    n = int(csr.shape[0])
    head = n if fixed_from is None else max(0, min(int(fixed_from), n))
    counts = np.diff(csr.indptr)[:head]
    return np.concatenate([np.argsort(-counts, kind="stable"), np.arange(head, n)]).astype(np.int64)


def _torch_csr(csr: sp.csr_matrix) -> Any:
    """A torch CSR tensor over ``csr``'s own index and value arrays (no copy)."""
    import torch  # the embedder's dependency; imported here so that this module stays light

    with warnings.catch_warnings():  # "sparse CSR support is in beta": mv on CSR is all we use of it
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(torch.from_numpy(csr.indptr), torch.from_numpy(csr.indices),
                                       torch.from_numpy(csr.data), size=csr.shape, check_invariants=False)
