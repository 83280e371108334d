"""The projected search returns exactly what the full product returns: top-k rows and synonym pairs."""

from __future__ import annotations

import numpy as np
import pytest

from pathweaver.extract import synonyms
from pathweaver.numeric.projection import (
    FAST_TOP_MIN,
    LOOSE,
    Projection,
    exact_top_k,
    kth_highest,
    row_scores,
    top_candidates,
    top_indices,
    top_stable,
)


def unit_rows(rng: np.random.Generator, n: int, d: int = 64, rank: int = 12) -> np.ndarray:
    """Rows with a few dominant directions, as sentence embeddings have, plus noise."""
    base = rng.standard_normal((rank, d)) * np.linspace(3.0, 0.5, rank)[:, None]
    vecs = rng.standard_normal((n, rank)) @ base + 0.4 * rng.standard_normal((n, d))
    vecs = vecs.astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(3))
def test_exact_top_k_matches_the_full_product(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vecs = unit_rows(rng, 5000)
    projection = Projection.fit(vecs, dim=16, sample=1000, seed=seed)
    assert np.allclose(projection.basis.T @ projection.basis, np.eye(16), atol=1e-5)
    for q in unit_rows(rng, 20):
        for k in (1, 5, 40, 100, 700):  # k beyond FIRST rows, and a k where the plain product is used
            want = np.argsort(-(vecs @ q), kind="stable")[:k]
            rows, scores = exact_top_k(vecs, projection, q, k)
            assert rows.tolist() == want.tolist()
            assert np.allclose(scores, vecs[want] @ q, atol=1e-6)
    rows, _ = exact_top_k(vecs, None, vecs[7], 1)
    assert rows.tolist() == [7]
    assert exact_top_k(vecs, projection, vecs[0], 0)[0].size == 0


def test_bound_is_an_upper_bound() -> None:
    rng = np.random.default_rng(5)
    vecs = unit_rows(rng, 2000)
    projection = Projection.fit(vecs, dim=8)
    for q in unit_rows(rng, 10):
        assert (projection.bounds(q) >= vecs @ q).all()


def test_projected_synonym_pairs_equal_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    vecs = unit_rows(rng, 3000)
    vecs[1500:1530] = vecs[:30] + 0.05 * rng.standard_normal((30, vecs.shape[1])).astype(np.float32)  # near twins
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = np.arange(3000) * 3 + 1
    sims = vecs @ vecs.T
    a, b = np.nonzero(np.triu(sims > 0.9, k=1))
    want = {(int(ids[i]), int(ids[j])) for i, j in zip(a, b, strict=True)}
    plain = synonyms.synonym_pairs(ids, vecs, 0.9, block=512)
    monkeypatch.setattr(synonyms, "MIN_ROWS", 0)  # force the projected tiles on this small set
    projected = synonyms.synonym_pairs(ids, vecs, 0.9, block=512)
    assert {(x, y) for x, y, _ in projected} == want == {(x, y) for x, y, _ in plain}
    assert len(want) >= 30
    assert projected == plain  # the same cos values: each is its two rows' dot product
    new = ids[:200]
    incremental = synonyms.synonym_pairs_for(new, vecs[:200], ids, vecs, 0.9, block=512)
    assert incremental == [p for p in projected if p[0] in set(new.tolist()) or p[1] in set(new.tolist())]


def twins(rng: np.random.Generator, n: int, n_twins: int, noise: float = 0.05) -> np.ndarray:
    """Unit rows with ``n_twins`` noisy copies of the first rows at the middle of the table."""
    vecs = unit_rows(rng, n)
    at = n // 2
    vecs[at : at + n_twins] = vecs[:n_twins] + noise * rng.standard_normal((n_twins, vecs.shape[1])).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def brute_pairs(ids: np.ndarray, vecs: np.ndarray, phi: float) -> set[tuple[int, int]]:
    """Every pair whose cos, as the search defines it (the two rows' einsum product: a BLAS product can differ in
    the last bit, 0.75000006 against 0.75), is above phi."""
    a, b = np.nonzero(np.triu(vecs @ vecs.T > phi - 1e-5, k=1))
    keep = np.einsum("ij,ij->i", vecs[a], vecs[b]) > phi
    return {(int(min(ids[i], ids[j])), int(max(ids[i], ids[j]))) for i, j in zip(a[keep], b[keep], strict=True)}


@pytest.mark.parametrize("phi", [0.9, 0.75, 0.005])  # 0.005: too low for the bfloat16 test, float32 tiles instead
def test_bfloat16_tiles_find_exactly_the_float32_pairs(phi: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """bfloat16 bound tiles (where the CPU has them) pass a superset to the same float32 tests: the same pairs with
    the same cos values as float32 tiles and as brute force, for refresh-like and watcher-like new sets."""
    rng = np.random.default_rng(13)
    vecs = twins(rng, 2500, 40)
    ids = np.arange(2500) * 5 + 3
    want = brute_pairs(ids, vecs, phi)
    monkeypatch.setattr(synonyms, "MIN_ROWS", 0)  # project (and, natively, bfloat16) this small set
    runs = {}
    for half in (True, False):
        monkeypatch.setattr(synonyms, "BF16", half)
        runs[half] = synonyms.synonym_pairs(ids, vecs, phi, block=700)
        for new in (np.arange(2000, 2500), np.arange(0, 300), np.arange(0, 2500, 7)):  # suffix, prefix, scattered
            got = synonyms.synonym_pairs_for(ids[new], vecs[new], ids, vecs, phi, block=700)
            ours = set(ids[new].tolist())
            assert got == [p for p in runs[half] if p[0] in ours or p[1] in ours]
    assert {(a, b) for a, b, _ in runs[True]} == want and runs[True] == runs[False]
    if phi == 0.9:
        assert len(want) >= 40


def test_a_refresh_scores_each_pair_of_tiles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """When every entity is new (a refresh), the search scores the upper triangle of tiles and nothing more (it
    used to score the whole square again and throw that part away: 1.5 n² instead of n²/2)."""
    rng = np.random.default_rng(2)
    vecs = twins(rng, 1000, 10)
    ids = np.arange(1000)
    scored: list[tuple[int, int]] = []
    real = synonyms._tile_pairs

    def counting(a, b, i, j, block, phi, bits):  # type: ignore[no-untyped-def]
        scored.append((i, j))
        return real(a, b, i, j, block, phi, bits)

    monkeypatch.setattr(synonyms, "_tile_pairs", counting)
    got = synonyms.synonym_pairs_for(ids, vecs, ids, vecs, 0.9, block=250)
    assert sorted(scored) == [(i, j) for i in range(0, 1000, 250) for j in range(i, 1000, 250)]  # 10 of 16 tiles
    assert {(a, b) for a, b, _ in got} == brute_pairs(ids, vecs, 0.9)


def test_bfloat16_tiles_are_not_used_when_the_probe_finds_a_larger_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch build whose bfloat16 products stray beyond the slack falls back to float32 tiles."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    vecs = twins(rng, 1200, 20)
    ids = np.arange(1200)
    monkeypatch.setattr(synonyms, "MIN_ROWS", 0)
    monkeypatch.setattr(synonyms, "native_bf16", lambda: True)
    (side,) = synonyms._sides((ids, vecs))
    assert side.half is not None and synonyms._keeps_bounds(side, side)
    monkeypatch.setattr(synonyms, "BF16_SLACK", 1e-9)  # no build keeps bfloat16 products that close
    (side,) = synonyms._sides((ids, vecs))
    assert side.half is None
    assert {(a, b) for a, b, _ in synonyms.synonym_pairs(ids, vecs, 0.9, block=500)} == brute_pairs(ids, vecs, 0.9)


@pytest.mark.parametrize("x", [1e-3, 0.3, 0.5, 0.8882, 0.9, 0.99, 1.7])
def test_bf16_floor_bits_read_the_largest_bfloat16_not_above(x: float) -> None:
    torch = pytest.importorskip("torch")
    bits = synonyms._bf16_floor_bits(x)

    def value(b: int) -> float:
        return float(torch.tensor([b], dtype=torch.int16).view(torch.bfloat16).float().item())

    assert value(bits) <= x < value(bits + 1)


@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_float16_bound_rows_still_bound_and_find_the_same_rows(scale: float) -> None:
    rng = np.random.default_rng(5)
    vecs = unit_rows(rng, 30_000, d=96, rank=20) * np.float32(scale)
    half = Projection.fit(vecs, dim=24, half=True)
    assert half.rows.dtype == np.float16 and half.max_norm == pytest.approx(scale, rel=1e-5)
    full = Projection.fit(vecs, dim=24)
    for q in unit_rows(rng, 20, d=96, rank=20):
        exact = vecs @ q
        assert (half.bounds(q) >= exact).all()
        for k in (1, 8):
            want = np.lexsort((np.arange(len(exact)), -exact))[:k]
            assert exact_top_k(vecs, half, q, k)[0].tolist() == want.tolist()
            assert exact_top_k(vecs, full, q, k)[0].tolist() == want.tolist()


def test_a_loose_bound_falls_back_to_the_full_product() -> None:
    # full-rank random rows: 16 of 96 dimensions bound almost nothing, so nearly every row passes the bound and
    # the search takes the plain product instead of gathering them
    rng = np.random.default_rng(9)
    vecs = rng.standard_normal((6000, 96)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    projection = Projection.fit(vecs, dim=16, half=True)
    for q in rng.standard_normal((5, 96)).astype(np.float32):
        q /= np.linalg.norm(q)
        exact = vecs @ q
        assert (projection.bounds(q) >= np.sort(exact)[-3]).mean() * LOOSE > 1  # loose, as intended
        want = np.lexsort((np.arange(len(exact)), -exact))[:3]
        rows, scores = exact_top_k(vecs, projection, q, 3)
        assert rows.tolist() == want.tolist()
        np.testing.assert_allclose(scores, exact[want], rtol=1e-5)


def test_a_rows_score_has_the_same_bits_in_any_candidate_set() -> None:
    """``row_scores`` gives each row the score of the four-row kernel whatever the matrix's size and the row's
    place (a lone row and the last n % 4 rows take other kernels in OpenBLAS), so the projected search, the
    full product and a search of composed rows (store/composed.py) report the same bits; ties at the k-th place
    go to the lower row whichever candidates the search held."""
    rng = np.random.default_rng(5)
    vecs = unit_rows(rng, 3001, d=384)
    q = unit_rows(rng, 1, d=384)[0]
    full = row_scores(vecs, q)
    for n in (1, 2, 3, 5, 7, 64, 101):
        for _ in range(5):
            idx = np.sort(rng.choice(vecs.shape[0], n, replace=False))
            assert row_scores(vecs[idx], q).tobytes() == full[idx].tobytes()
    twins = np.concatenate([vecs[:50], vecs[10:11], vecs[50:]])  # row 50 ties row 10
    want = int(np.argsort(-row_scores(twins, q), kind="stable").tolist().index(10))
    for k in range(1, 60):
        rows, _ = exact_top_k(twins, None, q, k)
        if k == want + 1:  # the tie at the k-th place
            assert rows[-1] == 10
    assert top_stable(np.array([1.0, 3.0, 3.0, 2.0]), 1).tolist() == [1]
    assert top_stable(np.array([3.0, 1.0, 3.0, 3.0]), 2).tolist() == [0, 2]


def _scores(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    """Score vectors a top-k is read from: plain, rounded (ties), skewed (a walk's), mostly zero, sorted, NaN."""
    if kind == "plain":
        return rng.random(n)
    if kind == "ties":
        return np.round(rng.random(n), 3)
    if kind == "skewed":
        return rng.random(n) ** 40
    if kind == "sparse":
        out = np.zeros(n)
        out[rng.integers(0, n, 30)] = rng.random(30)
        return out
    if kind == "sorted":
        return np.sort(rng.random(n)).astype(np.float32)
    out = rng.random(n)
    out[rng.integers(0, n, 3)] = np.nan
    return out


@pytest.mark.parametrize("kind", ["plain", "ties", "skewed", "sparse", "sorted", "nan"])
def test_the_sampled_top_k_is_the_partitions(kind: str) -> None:
    rng = np.random.default_rng(len(kind))
    for n in (FAST_TOP_MIN, 3 * FAST_TOP_MIN + 7):
        scores = _scores(rng, kind, n)
        for k in (1, 5, 20, 21, 300):
            part = np.argpartition(-scores, k - 1)[:k]
            assert top_indices(scores, k).tolist() == part[np.lexsort((part, -scores[part]))].tolist()
            want = np.partition(scores, n - k)[n - k]
            assert kth_highest(scores, k) == want or (np.isnan(want) and np.isnan(kth_highest(scores, k)))
            cand = top_candidates(scores, k)
            if kind == "nan":
                assert cand is None  # NaN: the partitions' own order decides
            elif cand is not None:  # None where most rows tie at the threshold (the zeros of "sparse")
                assert set(np.flatnonzero(scores > want)) <= set(cand.tolist())
            assert cand is not None or kind in ("nan", "sparse")
    small = rng.random(FAST_TOP_MIN - 1)
    assert top_candidates(small, 5) is None
    assert top_stable(small, 3).tolist() == np.argsort(-small, kind="stable")[:3].tolist()


def test_the_sampled_threshold_reads_few_rows() -> None:
    scores = np.random.default_rng(3).random(300_000)
    cand = top_candidates(scores, 21)
    assert cand is not None and 21 <= cand.shape[0] < 5_000
