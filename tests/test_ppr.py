"""PPR: hand values, a dense reference solve of AGRAG Eq. 10, the HippoRAG 2 personalisation, the node-space graph."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.numeric.parallel import SparseRows, degree_order
from pathweaver.retrieval import pagerank
from pathweaver.retrieval.graphs import node_space_graph
from pathweaver.retrieval.pagerank import PPRError, personalized_pagerank
from pathweaver.retrieval.ppr import PPRParams, personalization, ppr_scores
from pathweaver.retrieval.registry import run_method
from pathweaver.retrieval.types import Query, RetrievalEnv
from pathweaver.store.snapshot import GraphSnapshot


def test_two_node_hand_value() -> None:
    # a - b, r = (1, 0), d = 0.5: x_a = 0.5 + 0.5 x_b, x_b = 0.5 x_a  ->  x_a = 2/3, x_b = 1/3
    m = sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    x = personalized_pagerank(m, np.array([3.0, 0.0]), damping=0.5, tol=1e-12, max_iter=200)
    assert x == pytest.approx([2 / 3, 1 / 3], abs=1e-9)


def test_dangling_mass_returns_to_reset() -> None:
    # a -> b only (b dangling). r = (0.5, 0.5), d = 0.5:
    # x_a = 0.25 + 0.5 (0.5 x_b) ; x_b = 0.25 + 0.5 (x_a + 0.5 x_b)  ->  x_a = 0.4, x_b = 0.6
    m = sp.csr_matrix(np.array([[0.0, 0.0], [1.0, 0.0]]))
    x = personalized_pagerank(m, np.array([1.0, 1.0]), damping=0.5, tol=1e-12, max_iter=200)
    assert x == pytest.approx([0.4, 0.6], abs=1e-9)
    assert x.sum() == pytest.approx(1.0)


def test_bad_inputs_raise() -> None:
    m = sp.identity(2, format="csr")
    with pytest.raises(PPRError):
        personalized_pagerank(m, np.zeros(2))
    with pytest.raises(PPRError):
        personalized_pagerank(m, np.ones(3))
    with pytest.raises(PPRError):
        personalized_pagerank(m, np.ones(2), damping=1.0)


@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_float32_steps_first_reach_the_float64_fixed_point(damping: float) -> None:
    rng = np.random.default_rng(4)
    n, nnz = 3000, 12000
    adj = sp.csr_matrix((rng.random(nnz), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n))
    adj = adj + adj.T
    outgoing = np.ones(n)
    outgoing[:40] = 0.0
    adj = (adj @ sp.diags(outgoing)).tocsr()  # 40 dangling nodes: their mass returns to the reset
    degree = np.asarray(adj.sum(axis=0)).ravel()
    transition = (adj @ sp.diags(np.divide(1.0, degree, out=np.zeros(n), where=degree > 0))).tocsr()
    reset = np.zeros(n)
    reset[rng.integers(0, n, 6)] = rng.random(6) + 0.5
    reset[rng.integers(0, n, 300)] += 0.01
    exact = personalized_pagerank(transition, reset, damping, 1e-13, 1000, coarse_tol=0.0)
    mixed = personalized_pagerank(transition, reset, damping, 1e-10, 1000)  # float32 down to 1e-6, then float64
    assert np.abs(mixed - exact).sum() < 1e-9
    assert mixed.dtype == np.float64 and mixed.sum() == pytest.approx(1.0)
    assert np.array_equal(np.argsort(-mixed)[:50], np.argsort(-exact)[:50])
    # a coarse_tol under float32's rounding floor: the float32 steps stop when the residual stops shrinking, and
    # float64 finishes, instead of float32 running to max_iter
    floor, steps = _counted_runs(lambda: personalized_pagerank(transition, reset, damping, 1e-10, 1000,
                                                               coarse_tol=1e-10 + 1e-20))
    assert np.abs(floor - exact).sum() < 1e-9
    assert [d for d, _ in steps] == ["float32", "float64"] and steps[0][1] < 200, steps


def _counted_runs(call: Any) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """``call()``'s result and the (dtype, steps) of each phase of the walk it ran."""
    steps: list[tuple[str, int]] = []
    real = pagerank._Walk.run

    def counted(self: Any, *args: Any) -> tuple[np.ndarray, int, bool]:
        x, n_steps, done = real(self, *args)
        steps.append((x.dtype.name, n_steps))
        return x, n_steps, done

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pagerank._Walk, "run", counted)
        result = call()
    return result, steps


def _random_transition(seed: int, n: int, nnz: int, symmetric: bool) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    adj = sp.csr_matrix((rng.random(nnz), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n))
    if symmetric:
        adj = adj + adj.T
    degree = np.asarray(adj.sum(axis=0)).ravel()
    return (adj @ sp.diags(np.divide(1.0, degree, out=np.zeros(n), where=degree > 0))).tocsr()


def _power_iteration(transition: sp.csr_matrix, reset: np.ndarray, damping: float, tol: float,
                     max_iter: int) -> tuple[np.ndarray, int]:
    """AGRAG Eq. 10 as written, x <- F(x), in float64 under the same residual rule: (F of the last x, steps)."""
    r = reset / reset.sum()
    dangling = np.asarray(transition.sum(axis=0)).ravel() <= 0.0
    x = r
    for steps in range(1, max_iter + 1):
        fx = (1 - damping) * r + damping * (transition @ x + x[dangling].sum() * r)
        if np.abs(fx - x).sum() < tol:
            return fx, steps
        x = fx
    return x, max_iter


@pytest.mark.parametrize(("damping", "symmetric"), [(0.5, True), (0.85, True), (0.5, False), (0.85, False)])
def test_chebyshev_reaches_the_power_iterations_fixed_point_in_fewer_steps(damping: float, symmetric: bool) -> None:
    # a directed graph (complex eigenvalues, dangling nodes) too: Chebyshev still converges, under the same rule
    transition = _random_transition(7, 4000, 16000, symmetric)
    reset = np.random.default_rng(8).random(4000) ** 8
    exact, _ = _power_iteration(transition, reset, damping, 1e-14, 2000)
    tol = 1e-8
    x, steps = _counted_runs(lambda: personalized_pagerank(transition, reset, damping, tol, 500))
    # the stopping rule's guarantee: within d/(1-d) * tol of the fixed point, in L1
    assert np.abs(x - exact).sum() <= damping / (1 - damping) * tol + 1e-12
    assert x.sum() == pytest.approx(1.0)
    chebyshev = sum(n for _, n in steps)
    power = _power_iteration(transition, reset, damping, tol, 500)[1]
    if symmetric:
        assert chebyshev < power, (chebyshev, power)
    else:
        assert chebyshev <= 1.5 * power, (chebyshev, power)


def test_ranking_settled_stops_when_the_top_k_order_is_certain() -> None:
    scores = np.array([9.0, 9.0, 0.4000, 0.1, 0.3998, 0.3996])  # passages from index 2; gaps of 2e-4 lead
    top2 = pagerank.RankingSettled(2, 2)
    assert top2(scores, 1.9e-4)  # both gaps among the best three exceed the bound
    assert not top2(scores, 2.1e-4)  # a gap under the bound: the fixed point could order them otherwise
    every = pagerank.RankingSettled(2, 10)  # more than there are: the whole order must be certain
    assert every(scores, 1.9e-4) and not every(scores, 2.1e-4)
    two = np.array([0.4, 0.1])
    assert pagerank.RankingSettled(0, 1)(two, 3e-4)
    assert not pagerank.RankingSettled(0, 1)(two, 5e-4)  # over SCORE_RTOL of the best score: scores too rough
    assert pagerank.RankingSettled(0, 3)(np.array([0.5]), 1e-5)  # one passage: its rank is certain


def test_ranking_settled_on_many_passages_reads_the_partitions_gaps() -> None:
    rng = np.random.default_rng(4)
    scores = rng.random(100_000) ** 30  # a walk's skew; past FAST_TOP_MIN the top k + 1 come from a sampled threshold
    for k in (1, 10, 20):
        best = np.sort(np.partition(scores[7:], scores.shape[0] - 7 - k - 1)[-(k + 1):])
        gap = float(np.diff(best).min())
        settled = pagerank.RankingSettled(7, k)
        assert settled(scores, 0.99 * gap) and not settled(scores, 1.01 * gap)


def test_settled_ranking_equals_the_full_walks_ranking() -> None:
    transition = _random_transition(11, 6000, 30000, True)
    rng = np.random.default_rng(12)
    offset, k = 1000, 8  # rank nodes 1000.. as the "passages"
    for trial in range(5):
        reset = rng.random(6000) ** 6
        full, full_steps = _counted_runs(lambda r=reset: personalized_pagerank(transition, r, 0.5, 1e-13, 500))
        early, early_steps = _counted_runs(lambda r=reset: personalized_pagerank(
            transition, r, 0.5, 1e-13, 500, settled=pagerank.RankingSettled(offset, k)))
        top = np.argsort(-full[offset:], kind="stable")[:k]
        assert list(np.argsort(-early[offset:], kind="stable")[:k]) == list(top), trial
        assert sum(n for _, n in early_steps) < sum(n for _, n in full_steps)
        assert np.abs(early - full).sum() < pagerank.SCORE_RTOL * full[offset:].max()


def _snapshot() -> GraphSnapshot:
    """Four entities on a chain e0-e1-e2-e3 (two relations e0-e1), synonym e1~e3 (cos 0.9), two passages:
    p0 mentions e0 (1x), e1 (2x); p1 mentions e1, e2, e3. Node space: e0..e3 = 0..3, p0 = 4, p1 = 5."""
    rel_vecs = np.array(
        [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32
    )
    ent_vecs = np.eye(4, 3, dtype=np.float32)
    chunk_vecs = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    return GraphSnapshot.from_arrays(
        ["e0", "e1", "e2", "e3"],
        [(0, 1, "r"), (1, 0, "r'"), (1, 2, "r"), (2, 3, "r")],
        passages=["p0", "p1"],
        mentions=[(0, 0, 1), (0, 1, 2), (1, 1, 1), (1, 2, 1), (1, 3, 1)],
        synonyms=[(1, 3, 0.9)],
        entity_vecs=ent_vecs,
        rel_vecs=rel_vecs,
        chunk_vecs=chunk_vecs,
    )


def _hand_weights() -> np.ndarray:
    w = np.zeros((6, 6))
    for a, b, v in [
        (0, 1, 2.0),
        (1, 2, 1.0),
        (2, 3, 1.0),
        (1, 3, 0.9),
        (4, 0, 1),
        (4, 1, 2),  # p0 mentions e1 twice (contains_weight = count)
        (5, 1, 1),
        (5, 2, 1),
        (5, 3, 1),
    ]:
        w[a, b] = w[b, a] = v
    return w


def test_node_space_graph_weights_and_cache() -> None:
    snap = _snapshot()
    graph = node_space_graph(snap)
    assert graph.adjacency.toarray() == pytest.approx(_hand_weights())
    assert np.asarray(graph.transition.sum(axis=0)).ravel() == pytest.approx(np.ones(6))
    assert node_space_graph(snap) is graph  # built once per snapshot
    ones = node_space_graph(snap, "one", "one").adjacency.toarray()
    assert ones[0, 1] == 1.0 and ones[4, 1] == 1.0


def test_personalisation_hippo_style() -> None:
    snap = _snapshot()
    q = Query("q", np.array([1.0, 0.0, 0.0], dtype=np.float32))
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 3)))
    hippo = {"passage_weight": 0.05, "dense_pool": 0, "hybrid_pool": 0}  # HippoRAG 2's (the default: issues 23, 37)
    reset, info = personalization(env, q, PPRParams(top_triples=3, name_seeds=0.0, **hippo))
    # top triples by cos: r0 1.0, r1 1.0, r2 0.6. Entity weights: e0 = 1 + 1 = 2, e1 = 1 + 1 + 0.6 = 2.6,
    # e2 = 0.6; divided by passage counts (e0: 1, e1: 2, e2: 1): e0 2.0, e1 1.3, e2 0.6.
    # Passages: dense cos p0 1.0, p1 0.0 -> min-max 1, 0 -> x 0.05.
    assert [r for r, _ in info.triples] == [0, 1, 2]
    assert reset == pytest.approx([2.0, 1.3, 0.6, 0.0, 0.05, 0.0])


def test_a_question_that_names_no_document_seeds_the_hybrid_top_passages() -> None:
    snap = _snapshot()
    q = Query("which words find it", np.array([1.0, 0.0, 0.0], dtype=np.float32))
    env = RetrievalEnv(snap, lambda t, k: [(1, 5.0)], lambda texts: np.zeros((len(texts), 3)))
    plain = {"top_triples": 0, "name_seeds": 0.0, "passage_weight": 1.0}
    dense, _ = personalization(env, q, PPRParams(hybrid_pool=0, **plain))
    hybrid, _ = personalization(env, q, PPRParams(hybrid_pool=2, **plain))
    assert dense[4:] == pytest.approx([1.0, 0.0])  # dense cos p0 1.0, p1 0.0, min-max
    # AGRAG Eq. 21: p0 (dense 1, no BM25 hit) and p1 (dense 0, the only BM25 hit) both score 0.5, min-max -> 1
    assert hybrid[4:] == pytest.approx([1.0, 1.0])


def test_name_seeds_link_the_entities_a_query_names() -> None:
    snap = _snapshot()
    names = snap.entity_names
    q = Query(f"what links {names[3]} and {names[2]}?", np.array([1.0, 0.0, 0.0], dtype=np.float32))
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 3)))
    off, _ = personalization(env, q, PPRParams(top_triples=0, name_seeds=0.0))
    on, info = personalization(env, q, PPRParams(top_triples=0, name_seeds=3.0))
    # only the named entities gain weight: 3.0 each, divided by their passage counts (e2: 1, e3: 1)
    assert off[:4] == pytest.approx([0.0, 0.0, 0.0, 0.0])
    assert on[:4] == pytest.approx([0.0, 0.0, 3.0, 3.0])
    assert set(info.entity_weights) == {2, 3}
    with pytest.raises(ConfigError):
        run_method(env, q, "ppr", 2, {"name_seeds": -1.0})


def test_ppr_scores_match_dense_reference_solve() -> None:
    snap = _snapshot()
    q = Query("q", np.array([1.0, 0.0, 0.0], dtype=np.float32))
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 3)))
    hippo = {"passage_weight": 0.05, "dense_pool": 0, "hybrid_pool": 0}  # HippoRAG 2's (the default: issues 23, 37)
    params = PPRParams(top_triples=3, tol=1e-12, max_iter=500, **hippo)
    scores, _ = ppr_scores(env, q, params)
    # Reference (AGRAG Eq. 10 at its fixed point): (I - d P) x = (1 - d) r, P = W D^-1 from the hand weights.
    w = _hand_weights()
    p = w / w.sum(axis=0, keepdims=True)
    r = np.array([2.0, 1.3, 0.6, 0.0, 0.05, 0.0])
    r /= r.sum()
    expected = np.linalg.solve(np.eye(6) - 0.5 * p, 0.5 * r)
    assert scores == pytest.approx(expected, abs=1e-7)  # float32 cosines in the reset
    result = run_method(env, q, "ppr", 2, {"top_triples": 3, **hippo})
    # passage scores are x[4], x[5]; p0 touches the two heaviest seeds so it ranks first
    assert [c.passage for c in result.chunks] == [0, 1]
    assert result.chunks[0].score == pytest.approx(expected[4], abs=1e-6)


def test_ppr_params_validated() -> None:
    snap = _snapshot()
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 3)))
    q = Query("q", np.array([1.0, 0.0, 0.0], dtype=np.float32))
    with pytest.raises(ConfigError):
        run_method(env, q, "ppr", 2, {"damping": 1.5})
    with pytest.raises(ConfigError):
        run_method(env, q, "ppr", 2, {"relation_weight": "heavy"})
    with pytest.raises(ConfigError):
        run_method(env, q, "ppr", 2, {"alpha": 0.5})
    with pytest.raises(ConfigError):
        run_method(env, q, "ppr", 2, {"coarse_tol": -1.0})


def test_a_cached_structure_is_built_once_when_threads_meet() -> None:
    """Two threads asking for the same per-snapshot structure at once: one builds, the other waits for it."""
    import threading
    import time

    from pathweaver.retrieval.graphs import cached

    snap = GraphSnapshot.from_arrays(["a", "b"], [(0, 1, "r")])
    calls: list[int] = []

    def build() -> object:
        calls.append(1)
        time.sleep(0.2)
        return object()

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(cached(snap, ("slow",), build))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 3 and got[0] is got[1] is got[2]


def test_a_renumbered_matrix_walks_to_the_same_scores_in_node_order() -> None:
    transition = _random_transition(13, 5000, 25000, True)
    degree = np.asarray(transition.sum(axis=0)).ravel()
    reset = np.random.default_rng(14).random(5000) ** 6
    plain = SparseRows(transition)
    ordered = SparseRows(transition, order=degree_order(transition, 4000))  # nodes 4000.. stay in place
    assert ordered.fixed_from <= 4000 and ordered.order is not None
    want = personalized_pagerank(plain, reset, 0.5, 1e-12, 500, degree <= 0)
    got = personalized_pagerank(ordered, reset, 0.5, 1e-12, 500, degree <= 0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-14)
    seen: list[np.ndarray] = []

    def record(scores: np.ndarray, bound: float) -> bool:  # any other test gets the scores in node order
        seen.append(scores)
        return False

    personalized_pagerank(ordered, reset, 0.5, 1e-12, 500, degree <= 0, settled=record)
    np.testing.assert_allclose(seen[-1], want, rtol=1e-6, atol=1e-12)
    for offset in (4000, 10):  # the ranking test reads the fixed tail as it is, or the renumbered scores
        early = personalized_pagerank(ordered, reset, 0.5, 1e-12, 500, degree <= 0,
                                      settled=pagerank.RankingSettled(offset, 5))
        assert list(np.argsort(-early[offset:])[:5]) == list(np.argsort(-want[offset:])[:5])
