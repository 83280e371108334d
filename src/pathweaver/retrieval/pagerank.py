"""The PageRank solver behind ppr, mcmi's node influence and LEGO's PPR extractor (AGRAG Eq. 10, HippoRAG 2):
PPR = (1-d)·p + d·P·PPR, float32 steps down to ``COARSE_TOL`` then float64 to the tolerance, stopping early once
the caller's answer can no longer change (``RankingSettled``). ``ppr.py`` builds the graph and personalisation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pathweaver.numeric.parallel import SparseRows
from pathweaver.numeric.projection import top_candidates


class PPRError(ValueError):
    """Bad PPR input (shapes, an all-zero personalisation vector)."""


COARSE_TOL = 1e-6  # float32 steps until the residual is below this, then float64 steps down to tol (ours)
SCORE_RTOL = 1e-3  # RankingSettled: the error bound must be under this share of the best score
ROUNDING = 1e-12  # slack on the error bound for float64 rounding in a step (L1, scores summing to 1)
Settled = Callable[[np.ndarray, float], bool]  # (scores, L1 error bound) -> the caller's answer can no longer change


def personalized_pagerank(
    matrix: sp.spmatrix | np.ndarray | SparseRows,
    reset: np.ndarray,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 100,
    dangling: np.ndarray | None = None,
    coarse_tol: float = COARSE_TOL,
    settled: Settled | None = None,
) -> np.ndarray:
    """The fixed point of x = F(x) = (1-d)·r + d·(M·x + (dangling·x)·r)  (AGRAG Eq. 10).

    ``matrix`` is column-stochastic (n, n): column j holds the transition probabilities out of node j; a column
    that sums to 0 is a dangling node whose mass returns to the personalisation. It may come prepared as
    ``SparseRows`` (multi-threaded steps, nodes possibly renumbered; vectors in and out stay in node order); then
    ``dangling`` (a bool mask or node indices) is required, otherwise it is read from the column sums. ``reset`` (n,) is non-negative and normalised here to sum 1. The
    result sums to 1.

    Stopping rule (AGRAG §III-C: a change below ``tol``): each iterate x's residual |F(x) − x|₁ is the change one
    Eq. 10 step would make; when it is below ``tol``, F(x) is returned, or after ``max_iter`` steps. For any x,
    |F(x) − x*|₁ ≤ d/(1−d)·|F(x) − x|₁ (F contracts by d in L1), so the answer is as close to the fixed point x*
    as the plain iteration's under the same rule. ``settled(F(x), bound)`` may stop earlier: it is handed that
    bound and says whether what the caller reads from the scores can no longer change (``RankingSettled``).

    The F steps are combined by Chebyshev semi-iteration (ours), x_{k+1} = ω_{k+1}·(F(x_k) − x_{k−1}) + x_{k−1},
    which reaches Eq. 10's fixed point in fewer steps when M's eigenvalues are real (undirected graphs, as here);
    it falls back to Eq. 10's plain steps when the residual grows (``_Walk.run``).

    While the residual is above ``coarse_tol`` (> ``tol``; 0 = never), steps run in float32, which reads a third
    fewer bytes; they also stop when the residual no longer shrinks (float32's rounding floor), and the float64
    steps that follow restart from that vector, so the result obeys the float64 rule whatever the float32 phase
    did. See docs/design-notes.md ("PageRank") for the measurements.
    """
    n = matrix.shape[0]
    if tuple(matrix.shape) != (n, n) or reset.shape != (n,):
        raise PPRError(f"matrix must be square and match reset: {tuple(matrix.shape)} vs {reset.shape}")
    if not 0.0 <= damping < 1.0:
        raise PPRError(f"damping must be in [0, 1), got {damping}")
    total = float(reset.sum())
    if not np.all(reset >= 0) or total <= 0.0:
        raise PPRError("the personalisation vector must be non-negative with a positive sum")
    if isinstance(matrix, SparseRows):
        if dangling is None:
            raise PPRError("a pre-split matrix needs its dangling nodes")
        rows = matrix
    else:
        m = sp.csr_matrix(matrix, dtype=np.float64)
        if dangling is None:
            dangling = np.asarray(m.sum(axis=0)).ravel() <= 0.0
        rows = SparseRows(m)
    dead = np.flatnonzero(dangling) if dangling.dtype == np.bool_ else np.asarray(dangling, dtype=np.int64)
    walk = _Walk(damping, rows.inner_index(dead))
    r = rows.inner(reset.astype(np.float64) / total)  # the walk runs in the matrix's own node numbering
    if settled is not None and rows.order is not None and not (
            isinstance(settled, RankingSettled) and settled.offset >= rows.fixed_from):
        settled = _in_node_order(settled, rows)
    x, steps = r, 0
    if coarse_tol > tol:
        # the float32 phase may hand over early when ``settled`` looks likely to hold (twice its bound); only the
        # float64 steps' bound is trusted
        loose = None if settled is None else (lambda fx, bound: settled(fx, 2.0 * bound))
        x, steps, _ = walk.run(rows.single(), r.astype(np.float32), r.astype(np.float32), coarse_tol, max_iter,
                               loose)
        x = x.astype(np.float64)
    x, _, _ = walk.run(rows, r, x, tol, max(max_iter - steps, 1), settled)
    return rows.outer(x)


def _in_node_order(settled: Settled, rows: SparseRows) -> Settled:
    """``settled`` handed the scores in node order (one gather per call)."""
    return lambda scores, bound: settled(rows.outer(scores), bound)


@dataclass(frozen=True)
class _Walk:
    """Eq. 10 steps, Chebyshev-accelerated, in the dtype of the personalisation they are given."""

    damping: float
    dead: np.ndarray

    def run(self, rows: SparseRows, r: np.ndarray, x: np.ndarray, tol: float, max_iter: int,
            settled: Settled | None) -> tuple[np.ndarray, int, bool]:
        """Steps from ``x`` until the residual is below ``tol``, ``settled`` holds or ``max_iter`` steps:
        (F of the last iterate, steps taken, whether it stopped on the residual or ``settled``). In float32 they
        also stop when the residual no longer shrinks: rounding has a floor, and a ``tol`` under it would otherwise run to ``max_iter``. Chebyshev steps turn into plain ones
        when the residual grows: its error polynomial shrinks every eigenvalue of d·M inside an ellipse with foci
        ±d through 1, which holds all of them when M's are real (undirected graphs, as here) or when
        d ≤ 1/√2; a directed graph at a higher d may have some outside, and plain steps converge from anywhere."""
        d = self.damping
        base = (1.0 - d) * r
        coarse = r.dtype == np.float32
        factor = d / (1.0 - d)  # |F(x) - x*| <= d/(1-d) |F(x) - x|, in L1
        x, prev, fx, diff = x.copy(), None, np.empty_like(r), np.empty_like(r)
        omega, last, accelerate = 1.0, np.inf, True
        for steps in range(1, max_iter + 1):
            rows.dot(x, out=fx)
            if self.dead.size:
                fx += x[self.dead].sum() * r
            fx *= d
            fx += base
            np.subtract(fx, x, out=diff)
            residual = float(np.abs(diff, out=diff).sum())
            if residual < tol or (settled is not None and settled(fx, factor * residual * (1.0 + 1e-9) + ROUNDING)):
                return fx, steps, True
            if steps == max_iter or (coarse and residual >= last):
                break
            if accelerate and residual > last:  # outside Chebyshev's ellipse (a directed graph, d > 1/sqrt 2)
                accelerate = False
            last = residual
            if not accelerate:
                x, fx, prev = fx, x, None
            elif prev is None:  # a Chebyshev run starts with one plain step
                prev, x, fx = x, fx, np.empty_like(r)
                omega = 1.0 / (1.0 - d * d / 2.0)
            else:  # Chebyshev semi-iteration for a spectrum in [-d, d]; x_{k+1} = ω (F(x_k) - x_{k-1}) + x_{k-1}
                fx -= prev
                fx *= omega
                fx += prev
                prev, x, fx = x, fx, prev
                omega = 1.0 / (1.0 - d * d * omega / 4.0)
        return fx, steps, False


@dataclass(frozen=True)
class RankingSettled:
    """A ``settled`` test: the top ``k`` of ``scores[offset:]``, in order, are those of the fixed point.

    With |F(x) − x*|₁ ≤ bound, two scores can swap only if they differ by at most the bound (the sum of their two
    errors is at most the L1 error). So when each gap between consecutive scores among the best k + 1 (all of
    them, if there are no more) exceeds it, the fixed point has the same top k in the same order (ours: the caller
    reads only that much). The bound must also be under ``SCORE_RTOL`` of the best score, so that the scores the
    caller reports stay close to the fixed point's. It reads only ``scores[offset:]``, so a walk whose matrix
    keeps those nodes in place need not renumber the scores for it."""

    offset: int
    k: int

    def __call__(self, scores: np.ndarray, bound: float) -> bool:
        part = scores[self.offset:]
        n = part.shape[0]
        if self.k < 1 or n == 0 or bound > SCORE_RTOL * float(part.max()):
            return False
        m = min(self.k + 1, n)
        cand = top_candidates(part, m)  # asked at every step: a comparison pass instead of a partition
        best = np.sort(part[cand])[-m:] if cand is not None else np.sort(part[np.argpartition(part, n - m)[n - m:]])
        return m == 1 or bool(np.diff(best).min() > bound)
