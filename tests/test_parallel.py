"""Row-split products: the same numbers as a plain product for every thread count, and PageRank on split rows."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.numeric import parallel
from pathweaver.numeric.parallel import MIN_ROWS_PER_THREAD, SparseRows, degree_order, matmul, row_ranges
from pathweaver.retrieval.pagerank import PPRError, personalized_pagerank

ROWS = 3 * MIN_ROWS_PER_THREAD + 7  # enough rows for three blocks


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    yield
    parallel.set_threads(0)


def test_row_ranges_cover_every_row_once() -> None:
    for n, parts in [(10, 3), (7, 7), (5, 9), (0, 2), (100_003, 4)]:
        spans = row_ranges(n, parts)
        covered = [i for a, b in spans for i in range(a, b)]
        assert covered == list(range(n))
        sizes = [b - a for a, b in spans]
        assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_dense_products_match_numpy(threads: int) -> None:
    parallel.set_threads(threads)
    rng = np.random.default_rng(0)
    m = rng.standard_normal((ROWS, 24)).astype(np.float32)
    v = rng.standard_normal(24)  # float64: cast to the matrix's dtype, not the matrix up-cast
    out = matmul(m, v)
    assert out.dtype == np.float32 and out.shape == (ROWS,)
    np.testing.assert_allclose(out, m @ v.astype(np.float32), rtol=1e-5, atol=1e-5)
    k = rng.standard_normal((24, 5)).astype(np.float32)
    np.testing.assert_allclose(matmul(m, k), m @ k, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("engine", ["blocks", "torch", None])
def test_sparse_rows_match_scipy(threads: int, engine: str | None) -> None:
    parallel.set_threads(threads)
    rng = np.random.default_rng(1)
    nnz = 5 * ROWS
    m = sp.csr_matrix((rng.random(nnz), (rng.integers(0, ROWS, nnz), rng.integers(0, ROWS, nnz))), shape=(ROWS, ROWS))
    rows = SparseRows(m, engine=engine)
    default = "torch" if threads > 1 and "torch" in sys.modules else "blocks"
    assert rows.engine == engine or (engine is None and rows.engine == default)
    split = rows.engine == "blocks"
    assert len(rows.blocks) == (min(threads, ROWS // MIN_ROWS_PER_THREAD) if split else 1)
    x = rng.random(ROWS)
    np.testing.assert_allclose(rows.dot(x), m @ x, rtol=1e-12)
    out = np.empty(ROWS)
    assert rows.dot(x, out=out) is out
    single = rows.single()  # float32 values, the same engine and split
    assert single.dtype == np.float32 and single.engine == rows.engine and len(single.blocks) == len(rows.blocks)
    np.testing.assert_allclose(single.dot(x.astype(np.float32)), m @ x, rtol=1e-5)
    with pytest.raises(ConfigError):
        SparseRows(m, engine="gpu")


def test_the_default_engine_follows_whether_torch_is_loaded() -> None:
    """A process that has not imported torch walks on our pool and does not import it; one that has uses torch."""
    code = ("import sys; import numpy as np, scipy.sparse as sp; from pathweaver.numeric import parallel; "
            "parallel.set_threads(2); m = sp.random(5000, 5000, density=0.001, format='csr', random_state=1); "
            "a = parallel.SparseRows(m); a.dot(np.ones(5000)); print(a.engine, 'torch' in sys.modules); "
            "import torch; print(parallel.SparseRows(m).engine)")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["blocks", "False", "torch"]


def test_pagerank_on_split_rows_equals_unsplit() -> None:
    parallel.set_threads(3)
    rng = np.random.default_rng(2)
    n, nnz = ROWS, 4 * ROWS
    adj = sp.csr_matrix((np.ones(nnz), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n))
    adj = adj + adj.T
    degree = np.asarray(adj.sum(axis=0)).ravel()
    inv = np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)
    transition = (adj @ sp.diags(inv)).tocsr()
    reset = np.zeros(n)
    reset[rng.integers(0, n, 5)] = 1.0
    plain = personalized_pagerank(transition, reset, 0.5, 1e-10, 200)
    split = personalized_pagerank(SparseRows(transition), reset, 0.5, 1e-10, 200, dangling=degree <= 0)
    np.testing.assert_allclose(split, plain, rtol=1e-9, atol=1e-15)
    assert split.sum() == pytest.approx(1.0)
    with pytest.raises(PPRError, match="dangling"):
        personalized_pagerank(SparseRows(transition), reset)


def test_bad_thread_count_is_refused() -> None:
    with pytest.raises(ValueError, match="threads"):
        parallel.set_threads(-1)


def test_store_setting_sizes_the_pool(tmp_path: Path) -> None:
    from pathweaver.config import ConfigError
    from pathweaver.service import Pathweaver

    pw = Pathweaver.open(tmp_path / "store", overrides={"models": {"query_threads": 1}})
    try:
        assert parallel.threads() == 1
    finally:
        pw.close()
    with pytest.raises(ConfigError, match="query_threads"):
        Pathweaver.open(tmp_path / "store", overrides={"models": {"query_threads": -2}})


def test_single_precision_twin_keeps_the_cut() -> None:
    parallel.set_threads(2)
    rng = np.random.default_rng(3)
    nnz = 5 * ROWS
    m = sp.csr_matrix((rng.random(nnz), (rng.integers(0, ROWS, nnz), rng.integers(0, ROWS, nnz))), shape=(ROWS, ROWS))
    rows = SparseRows(m)
    twin = rows.single()
    assert twin is rows.single()  # built once
    assert twin.spans == rows.spans and all(b.dtype == np.float32 for b in twin.blocks)
    x = rng.random(ROWS).astype(np.float32)
    np.testing.assert_allclose(twin.dot(x), m @ x.astype(np.float64), rtol=1e-5)


def test_renumbered_rows_take_and_give_vectors_in_their_own_order() -> None:
    rng = np.random.default_rng(3)
    n = 2000
    m = sp.random(n, n, density=0.003, format="csr", random_state=4)
    m = (m + m.T).tocsr()
    order = degree_order(m, 1500)
    counts = np.diff(m.indptr)
    assert (np.diff(counts[order[:1500]]) <= 0).all() and order[1500:].tolist() == list(range(1500, n))
    for engine in ("torch", "blocks"):
        rows = SparseRows(m, engine=engine, order=order)
        x = rng.random(n)
        np.testing.assert_allclose(rows.outer(rows.dot(rows.inner(x))), m @ x, rtol=1e-12)
        assert rows.outer(rows.inner(x)).tolist() == x.tolist()
        assert rows.inner_index(np.array([order[7]])).tolist() == [7]
        single = rows.single()
        np.testing.assert_allclose(single.outer(single.dot(single.inner(x).astype(np.float32))), m @ x, rtol=1e-5)
    with pytest.raises(ValueError):
        SparseRows(m, order=np.zeros(n, dtype=np.int64))


def test_map_ordered_keeps_to_one_worker_until_asked(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``wide_after``: one worker takes items until the event is set, then the others join; results keep their
    order, a call whose items run out returns without the event, and an error reaches the caller."""
    import threading
    import time

    monkeypatch.setattr(parallel, "_threads", 2)
    event, seen, lock = threading.Event(), [], threading.Lock()

    def job(x: int) -> int:
        with lock:
            seen.append(threading.current_thread().name)
        if x == 5:
            event.set()
        time.sleep(0.01)
        return x * x

    assert parallel.map_ordered(job, list(range(40)), wide_after=event) == [x * x for x in range(40)]
    assert len(set(seen[:6])) == 1 and len(set(seen)) == 2  # one thread until item 5 set the event, then two
    never = threading.Event()
    start = time.perf_counter()
    assert parallel.map_ordered(lambda x: x + 1, [1, 2, 3], wide_after=never) == [2, 3, 4]
    assert time.perf_counter() - start < 1.0

    def failing(x: int) -> int:
        if x == 3:
            raise ValueError("bad item")
        return x

    with pytest.raises(ValueError, match="bad item"):
        parallel.map_ordered(failing, list(range(10)), wide_after=never)
