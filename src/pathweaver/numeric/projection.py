"""Exact inner-product search over stored vectors with a low-dimensional prefilter.

For an orthonormal basis P (d × m) of the rows' leading directions, a row v and a query q split as
v·q = (Pᵀv)·(Pᵀq) + v_r·q_r with residuals v_r = v − PPᵀv, and |v_r·q_r| ≤ |v_r||q_r| (Cauchy–Schwarz). So
``(Pᵀv)·(Pᵀq) + |v_r||q_r|`` bounds v·q from above, and a row whose bound is below a score that k rows already
reach cannot be among the top k. Scoring m = 128 of 384 dimensions, then exactly the few rows whose bound passes,
returns the same rows as the full product (the exact scores decide; the basis only decides which rows are looked
at) at about a third of the memory traffic, as few rows pass the bound. Each row is kept as its projection with its residual norm appended,
[Pᵀv, |v_r|], so the bound is one dot product of two such rows: a query's ([Pᵀq, |q_r|]), or another row's, as in
the all-pairs synonym search (AGRAG Eq. 5), where a tile of bounds is then one matrix product.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pathweaver.numeric.parallel import matmul

MIN_ROWS = 20_000  # below this a plain product is as fast as the projected one
# m, the projected dimension. Fewer dimensions read fewer bytes but loosen the bound, and a question whose best
# score is low then rescores many rows; 128 keeps the slow tail short (docs/design-notes.md).
# Synonym tiles have a fixed, high threshold and use fewer (synonyms.DIM).
DIM = 128
SAMPLE = 20_000  # rows the basis is fitted on
FIRST = 64  # at least this many rows (and 2k) are rescored before the bound sets the k-th score to reach
LOOSE = 4  # when more than 1/LOOSE of the rows pass the bound, the plain product is used instead
SELECT_SAMPLE = 4096  # bounds sampled to pick a threshold for the first rows to rescore
OVERSAMPLE = 4  # the threshold aims at this many times FIRST rows
# from this many scores on, the top k are read from the rows over a sampled threshold (``top_candidates``): a full
# argpartition costs ~1.5 ms at 10^5 rows and ~4 ms at 3·10^5, ppr asks for it at every walk step (scale39)
FAST_TOP_MIN = 32_768
HALF_SLACK = 1.6e-3  # float16 bound rows: the rounding slack per unit of |row|·|q| (3 · 2^-11 = 1.46e-3, plus sums)
MARGIN = 1e-4  # slack for float32 rounding in the projected scores and the residual norms


@dataclass(frozen=True)
class Projection:
    """Rows projected on a fitted orthonormal basis, with the norms of what the projection leaves out."""

    basis: np.ndarray  # (d, m) float32, orthonormal columns
    rows: np.ndarray  # (n, m + 1) float32, or float16 for query-side scans: [Pᵀv, |v - P Pᵀ v|] per row
    max_norm: float = 1.0  # the largest row norm (|[Pᵀv, |v_r|]| = |v|), for the float16 rounding slack

    @classmethod
    def fit(cls, vecs: np.ndarray, dim: int = DIM, sample: int = SAMPLE, seed: int = 0, half: bool = False
            ) -> Projection:
        """Every row of ``vecs`` projected on the ``dim`` leading directions of (a seeded sample of) them;
        ``half`` keeps the rows in float16 (see ``bounds``)."""
        return cls.of(vecs, fit_basis(vecs, dim, sample, seed), half)

    @classmethod
    def of(cls, vecs: np.ndarray, basis: np.ndarray, half: bool = False) -> Projection:
        """``vecs`` projected on ``basis`` (orthonormal columns)."""
        rows = augmented(vecs, basis)
        max_norm = float(np.sqrt(np.einsum("ij,ij->i", rows, rows).max())) if rows.shape[0] else 0.0
        full = cls(basis, rows, max_norm)
        if half and rows.shape[0]:
            small = cls(basis, rows.astype(np.float16), max_norm)
            if small.keeps_bounds(full, np.asarray(vecs, dtype=np.float32)[0]):
                return small
        return full

    def keeps_bounds(self, full: Projection, probe: np.ndarray) -> bool:
        """Whether this float16 copy's bounds for ``probe`` are at least ``full``'s scores (a check at fit time
        that this torch build sums float16 products in float32, as the slack assumes)."""
        exact = matmul(full.rows, augmented(probe[None, :], full.basis)[0])
        return bool((self.bounds(probe) >= exact).all())

    def bounds(self, q: np.ndarray) -> np.ndarray:
        """Upper bounds of every row's dot product with ``q`` (shape (n,)).

        float16 rows are scored by torch (its float16 matrix-vector product accumulates in float32), which reads
        half the bytes. The bound then carries the rounding of both sides and of the result: each factor is within
        2^-11 of itself, relatively, so the product's error is at most (2u + u²)·|row|·|q| plus u·|result| with
        u = 2^-11 (``HALF_SLACK`` covers 3u plus the float32 sums)."""
        qa = augmented(q[None, :], self.basis)[0]
        if self.rows.dtype != np.float16:
            return matmul(self.rows, qa) + np.float32(MARGIN)
        return half_mv(self.rows, qa) + np.float32(MARGIN + HALF_SLACK * self.max_norm * float(np.linalg.norm(qa)))


def half_mv(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``rows @ q`` for float16 ``rows`` by torch, whose CPU kernel sums the float16 products in float32, as float32:
    half the bytes of a float32 product and no float32 copy of the rows (numpy's float16 conversion is ~10x slower
    than the product). ``q`` is rounded to float16 and so is the result: callers' bounds carry both roundings."""
    import torch  # the embedder's dependency; imported here so that the module stays light

    return torch.mv(torch.from_numpy(rows), torch.from_numpy(q.astype(np.float16))).float().numpy()


def half_mv_holds(rows: np.ndarray, slack: float) -> bool:
    """Whether ``half_mv`` scores float16 ``rows`` within ``slack`` of their float32 product for a seeded unit probe:
    a check that this torch build sums float16 products in float32."""
    if not rows.shape[0]:
        return False
    probe = np.random.default_rng(0).standard_normal(rows.shape[1]).astype(np.float32)
    probe /= np.linalg.norm(probe)
    return bool((np.abs(half_mv(rows, probe) - rows.astype(np.float32) @ probe) <= slack).all())


def augmented(vecs: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``[Pᵀv, |v - P Pᵀ v|]`` for each row v of ``vecs`` (n, d): two such rows' dot product bounds theirs."""
    vecs = np.asarray(vecs, dtype=np.float32)
    out = np.empty((vecs.shape[0], basis.shape[1] + 1), dtype=np.float32)
    proj = out[:, :-1]
    proj[:] = matmul(vecs, basis)
    sq = np.einsum("ij,ij->i", vecs, vecs) - np.einsum("ij,ij->i", proj, proj)
    out[:, -1] = np.sqrt(np.maximum(sq, 0.0))
    return out


def top_candidates(scores: np.ndarray, m: int) -> np.ndarray | None:
    """Ascending indices of a few rows that hold the ``m`` highest ``scores``, or None (too few rows, or no
    usable threshold): every row at or above the m-th highest of a strided sample of ``SELECT_SAMPLE`` rows. The
    m sampled rows reach it, so the m-th highest score overall does too, and so does every row above that. One
    comparison pass, where ``argpartition`` moves the whole array several times."""
    n = scores.shape[0]
    if n < FAST_TOP_MIN or m < 1 or not np.isfinite(scores.sum()):  # NaN: the partitions' own order decides
        return None
    sample = scores[:: max(1, n // SELECT_SAMPLE)]
    if sample.shape[0] < m:
        return None
    threshold = np.partition(sample, sample.shape[0] - m)[sample.shape[0] - m]
    cand = np.flatnonzero(scores >= threshold)
    # too many (many rows tied at the threshold, such as BM25's zeros): a partition of them all costs no less
    return cand if m <= cand.shape[0] <= scores.shape[0] // LOOSE else None


def kth_highest(scores: np.ndarray, k: int) -> float:
    """The ``k``-th highest of ``scores`` (1 <= k <= n), as ``np.partition`` gives it, read among
    ``top_candidates`` where it can."""
    cand = top_candidates(scores, k)
    part = scores if cand is None else scores[cand]
    return np.partition(part, part.shape[0] - k)[part.shape[0] - k]


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest ``scores``, best first (ties by lower index), via ``argpartition``; from
    ``FAST_TOP_MIN`` rows on, among ``top_candidates`` when the k-th and (k+1)-th scores differ (the top k are then
    one set, the one the partition picks; a tie there leaves the choice to the partition, as before)."""
    n = scores.shape[0]
    k = min(max(k, 0), n)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    cand = top_candidates(scores, k + 1) if k < n else None
    if cand is not None:
        values = scores[cand]
        order = np.lexsort((cand, -values))
        if values[order[k - 1]] != values[order[k]]:
            return cand[order[:k]].astype(np.int64)
    part = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    return part[np.lexsort((part, -scores[part]))].astype(np.int64)


def top_stable(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest ``scores``, best first, ties by lower index also at the k-th place (where
    ``top_indices``' partition picks any of the tied rows, as its array's layout has it): the same rows from
    any candidate set that holds them."""
    n = scores.shape[0]
    k = min(max(k, 0), n)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    kth = kth_highest(scores, k)
    cand = np.flatnonzero(scores >= kth)
    return cand[np.lexsort((cand, -scores[cand]))[:k]].astype(np.int64)


GEMV_ROWS = 4  # OpenBLAS's float32 matrix-vector kernel takes rows four at a time, and a lone row or the last
# n % 4 rows go through other kernels whose sums round differently (measured: up to 1 ulp)
TIE_SLACK = 1e-5  # far above the ulp by which two kernels' scores of one row differ


def row_scores(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``rows @ q`` with every row's score as the four-row kernel gives it, whatever the number of rows and the
    row's place (zero rows pad the matrix to a multiple of four): the same bits for a row in any candidate set and
    for an inner row of the full product, so every search path reports the same score."""
    n = rows.shape[0]
    pad = -n % GEMV_ROWS
    if pad:
        rows = np.concatenate([rows, np.zeros((pad, rows.shape[1]), dtype=rows.dtype)])
    return (rows @ q.astype(rows.dtype, copy=False))[:n]


def top_rescored(rows: np.ndarray, scores: np.ndarray, vecs: np.ndarray, q: np.ndarray, k: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` of ``rows`` (ascending) by ``row_scores``, given ``scores`` that may differ from those by
    an ulp: every row within ``TIE_SLACK`` of the k-th is rescored."""
    top = top_indices(scores, k)
    keep = np.flatnonzero(scores >= scores[top[-1]] - TIE_SLACK)
    exact = row_scores(vecs[rows[keep]], q)
    pick = top_stable(exact, k)
    return rows[keep][pick], exact[pick]


def exact_top_k(vecs: np.ndarray, projection: Projection | None, q: np.ndarray, k: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Indices and scores (``row_scores``) of the ``k`` rows of ``vecs`` with the highest dot product with ``q``,
    best first (ties by lower index, ``top_stable``): the full product without ``projection``, else the bound-pruned search."""
    n = vecs.shape[0]
    k = min(max(k, 0), n)
    if k == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=vecs.dtype)
    q = q.astype(vecs.dtype, copy=False)
    n_first = max(FIRST, 2 * k)
    if projection is None or 4 * n_first > n:  # a large share of the rows: the plain product is cheaper
        return top_rescored(np.arange(n), matmul(vecs, q), vecs, q, k)
    bound = projection.bounds(q)
    first = _high_bounds(bound, n_first)
    exact = vecs[first] @ q
    kth = np.partition(exact, exact.shape[0] - k)[exact.shape[0] - k]  # the k-th best exact score among them
    passed = np.flatnonzero(bound >= kth)
    if LOOSE * passed.shape[0] > n:  # a loose bound (rows without a low-rank structure, such as random vectors):
        # the full product reads less than a gather (a copy) of most rows would
        return top_rescored(np.arange(n), matmul(vecs, q), vecs, q, k)
    cand = np.union1d(first, passed).astype(np.int64)  # sorted: ties go to the lower row
    scores = row_scores(vecs[cand], q)
    pick = top_stable(scores, k)
    return cand[pick], scores[pick]


def _high_bounds(bound: np.ndarray, n_first: int) -> np.ndarray:
    """At least ``n_first`` rows with high bounds, to rescore first. Any such set is correct: the k-th best exact
    score among them is at most the k-th best overall, so every row of the true top k still passes the bound
    filter. Rows over a threshold read from a strided sample (``SELECT_SAMPLE`` of them, aiming at
    ``OVERSAMPLE`` × ``n_first``) cost a comparison pass; a full ``argpartition``, which costs more, is the
    fallback when too few pass."""
    n = bound.shape[0]
    sample = bound[:: max(1, n // SELECT_SAMPLE)]
    rank = min(sample.shape[0], max(1, int(OVERSAMPLE * n_first * sample.shape[0] / n)))
    threshold = np.partition(sample, sample.shape[0] - rank)[sample.shape[0] - rank]
    first = np.flatnonzero(bound >= threshold)
    if first.shape[0] >= n_first:
        return first
    return np.argpartition(bound, n - n_first)[n - n_first :]  # the n_first highest bounds (no negated copy)


def fit_basis(vecs: np.ndarray, dim: int = DIM, sample: int = SAMPLE, seed: int = 0) -> np.ndarray:
    """An orthonormal (d, ``dim``) basis of the leading directions of (a seeded sample of) the rows of ``vecs``:
    eigenvectors of the uncentred second moment, since the scores are dot products."""
    vecs = np.asarray(vecs, dtype=np.float32)
    n, d = vecs.shape
    rows = vecs if n <= sample else vecs[np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))]
    # float32 product (a third of the float64 one's time; the basis only decides which rows are rescored), the
    # small eigenproblem in float64
    moment = (rows.T @ rows).astype(np.float64)
    _, eigvecs = np.linalg.eigh(moment)
    return np.ascontiguousarray(eigvecs[:, ::-1][:, : max(1, min(dim, d))], dtype=np.float32)
