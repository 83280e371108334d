"""Path Pooling: kernels (Dijkstra vs BFS), pooled scores worked out by hand, rerank and reselect orders."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pathweaver.config import ConfigError
from pathweaver.retrieval.pooling import PoolingParams, pooling_retrieve, query_entity_seeds
from pathweaver.retrieval.pooling_kernels import bfs_kernels, dijkstra_kernels, pool_scores, recency_order
from pathweaver.retrieval.registry import make_params, run_method
from pathweaver.retrieval.types import Query, RetrievalEnv, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot

# chain Q(0) -t0- A(1) -t1- B(2), and t2 between C(3) and D(4), unreachable from Q
CHAIN = [(0, 1), (1, 2), (3, 4)]
CHAIN_SCORES = [0.8, 0.4, 0.5]
# triangle Q(0) -t0- A(1) -t1- B(2) -t2- Q(0)
TRIANGLE = [(0, 1), (1, 2), (0, 2)]
TRIANGLE_SCORES = [0.9, 0.9, 0.2]
# passages ranked by their served triples' pooled scores alone (the paper's ranking, which only its preset sets
# through the registry; these tests check the mechanism, so ``_pooled`` runs the method directly)
POOLED_ALONE = {"base_weight": 0.0, "passages_from": "served"}


def _pooled(env: RetrievalEnv, q: Query, top_k: int, params: dict[str, object]) -> RetrievalResult:
    return pooling_retrieve(env, q, top_k, make_params(PoolingParams, params))


def test_dijkstra_kernels_and_mean_pooling_by_hand() -> None:
    kernels = dijkstra_kernels(CHAIN, CHAIN_SCORES, [0])
    # lengths 1 - s: t0 0.2, t1 0.6. Kernels: Q->A [t0], Q->B [t0, t1]; t2 is on none.
    assert [k.triples for k in kernels] == [[0], [0, 1]]
    assert kernels[1].nodes == [0, 1, 2]
    pooled, bases = pool_scores(kernels, CHAIN_SCORES, position_a=10.0, pooling="mean")
    # [t0]: mean 0.8, min 0.8 -> t0 = 0.8 + 0.8/10 = 0.88
    # [t0, t1]: mean 0.6, min 0.4 -> t0 = 0.6 + 0.4/10 = 0.64, t1 = 0.6 + 0.4/100 = 0.604
    # t0 = max(0.88, 0.64) = 0.88; t2 single-hop: 0.5 + 0.5/10 = 0.55
    assert pooled == pytest.approx([0.88, 0.604, 0.55])
    assert bases == pytest.approx([0.8, 0.6])


def test_max_pooling_by_hand() -> None:
    kernels = dijkstra_kernels(CHAIN, CHAIN_SCORES, [0])
    pooled, bases = pool_scores(kernels, CHAIN_SCORES, position_a=10.0, pooling="max")
    # [t0]: base 0.8 -> t0 0.88; [t0, t1]: base max = 0.8, min 0.4 -> t0 0.84, t1 0.8 + 0.004 = 0.804
    assert pooled == pytest.approx([0.88, 0.804, 0.55])
    assert bases == pytest.approx([0.8, 0.8])


def test_position_constant_changes_the_bonus() -> None:
    kernels = dijkstra_kernels(CHAIN, CHAIN_SCORES, [0])
    pooled, _ = pool_scores(kernels, CHAIN_SCORES, position_a=2.0)
    # a = 2: t0 = 0.8 + 0.8/2 = 1.2; t1 = 0.6 + 0.4/4 = 0.7; t2 = 0.5 + 0.5/2 = 0.75
    assert pooled == pytest.approx([1.2, 0.7, 0.75])


def test_bfs_and_dijkstra_differ_on_a_triangle() -> None:
    # Dijkstra from Q: A by t0 (0.1), B by t0+t1 (0.2 < 0.8 direct), so t2 lies on no kernel.
    dij = dijkstra_kernels(TRIANGLE, TRIANGLE_SCORES, [0])
    assert [k.triples for k in dij] == [[0], [0, 1]]
    pooled_d, _ = pool_scores(dij, TRIANGLE_SCORES, 10.0)
    # t0 = 0.9 + 0.09 = 0.99; t1 = 0.9 + 0.9/100 = 0.909; t2 single-hop = 0.2 + 0.02 = 0.22
    assert pooled_d == pytest.approx([0.99, 0.909, 0.22])
    # BFS (simple paths, <= 4 triples): [t0], [t2], [t0, t1], [t2, t1]
    bfs = bfs_kernels(TRIANGLE, [0], max_len=4, max_paths=100)
    assert [k.triples for k in bfs] == [[0], [2], [0, 1], [2, 1]]
    pooled_b, _ = pool_scores(bfs, TRIANGLE_SCORES, 10.0)
    # [t2, t1]: mean 0.55, min 0.2 -> t2 = 0.55 + 0.02 = 0.57 (beats [t2] alone: 0.22); t1 = max(0.909, 0.552)
    assert pooled_b == pytest.approx([0.99, 0.909, 0.57])
    assert len(bfs_kernels(TRIANGLE, [0], max_len=1, max_paths=100)) == 2
    assert len(bfs_kernels(TRIANGLE, [0], max_len=4, max_paths=3)) == 3


def test_recency_order_puts_the_best_last() -> None:
    # pooled 0.88, 0.604, 0.55 -> ascending: t2, t1, t0 (raw scores would give t1, t2, t0)
    assert recency_order([0.88, 0.604, 0.55], range(3)) == [2, 1, 0]
    assert recency_order([0.5, 0.5, 0.1], range(3)) == [2, 1, 0]  # tie: the better coarse rank goes last


def _snapshot(extra_chunks: tuple[tuple[int, int], ...] = ()) -> GraphSnapshot:
    """The CHAIN graph with vectors chosen so cos(q, triple) = 0.8, 0.4, 0.5 for q = e_x; passages p0..p2 support
    t0..t2, p3 supports nothing (or what ``extra_chunks`` says) but is the densest match."""

    def unit(c: float) -> list[float]:
        return [c, math.sqrt(1 - c * c), 0.0]

    names = ["queen", "alpha", "beta", "gamma", "delta"]
    ent = np.array([[1, 0, 0]] + [[0, 0, 1]] * 4, dtype=np.float32)
    rel = np.array([unit(s) for s in CHAIN_SCORES], dtype=np.float32)
    chunks = np.array([[0, 1, 0], [0, 1, 0], [0, 1, 0], [1, 0, 0]], dtype=np.float32)
    return GraphSnapshot.from_arrays(
        names,
        [(0, 1, "r0"), (1, 2, "r1"), (3, 4, "r2")],
        passages=["p0", "p1", "p2", "p3"],
        relation_chunks=[(0, 0), (1, 1), (2, 2), *extra_chunks],
        entity_vecs=ent,
        rel_vecs=rel,
        chunk_vecs=chunks,
    )


def _env() -> tuple[RetrievalEnv, Query]:
    snap = _snapshot()
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 3), dtype=np.float32))
    return env, Query("zzz", np.array([1.0, 0.0, 0.0], dtype=np.float32), keywords=["Queen"])


def test_query_entities_from_keywords_then_vectors() -> None:
    env, q = _env()
    assert query_entity_seeds(env.snapshot, q, [0, 1, 2, 3, 4], 1) == [0]
    no_kw = Query("zzz", q.vec)
    assert query_entity_seeds(env.snapshot, no_kw, [1, 2, 0], 1) == [0]  # nearest by cosine
    assert query_entity_seeds(env.snapshot, q, [1, 2], 1) == [1]  # "queen" is not in this triple graph


def test_rerank_mode_end_to_end() -> None:
    env, q = _env()
    result = _pooled(env, q, 4, {"mode": "rerank", "top_triples": 3, "query_entities": 1,
                                                 "pooling": "mean", "base": "cos", **POOLED_ALONE})
    assert result.triples == [2, 1, 0]  # pooled 0.55 < 0.604 < 0.88, best last
    assert result.info["pooled"] == pytest.approx({0: 0.88, 1: 0.604, 2: 0.55}, abs=1e-5)
    # supporting passages by pooled score, then the dense fill (p3)
    assert [c.passage for c in result.chunks] == [0, 1, 2, 3]
    assert result.chunks[0].score == pytest.approx(0.88, abs=1e-5)
    assert [p.relations for p in result.paths] == [[0], [0, 1]]  # kernels by base score: 0.8, 0.6
    assert result.paths[1].text == "queen -r0-> alpha -r1-> beta" and result.paths[1].passages == [0, 1]


def test_reselect_mode_keeps_the_pooled_top_k() -> None:
    env, q = _env()
    result = _pooled(
        env, q, 3, {"mode": "reselect", "coarse_m": 3, "top_triples": 2, "query_entities": 1, **POOLED_ALONE}
    )
    # raw top-2 would be t0 (0.8), t2 (0.5); pooled top-2 is t0 (0.88), t1 (0.604)
    assert result.triples == [1, 0]
    # the pooled ranking goes on past the served triples (t2's p2) before any dense back-fill (fill = "coarse")
    assert [c.passage for c in result.chunks] == [0, 1, 2]
    assert not any(c.backfill for c in result.chunks)
    served = _pooled(env, q, 3, {"mode": "reselect", "coarse_m": 3, "top_triples": 2,
                                               "query_entities": 1, "fill": "served", **POOLED_ALONE})
    assert [(c.passage, c.backfill) for c in served.chunks] == [(0, False), (1, False), (3, True)]


def test_a_relation_stands_for_the_passage_that_scored_it() -> None:
    # t0 comes from p0 and p3; with the naive base the passage scores are cos(q, passage): p0 0, p3 1
    snap = _snapshot(((0, 3),))
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 3), dtype=np.float32))
    q = Query("zzz", np.array([1.0, 0.0, 0.0], dtype=np.float32), keywords=["Queen"])
    args = {"mode": "reselect", "coarse_m": 3, "top_triples": 1, "query_entities": 1, "base": "cos", **POOLED_ALONE}
    # "best": the served t0 stands for p3 alone; the pooled ranking then brings t1's p1 and t2's p2
    best = _pooled(env, q, 3, args)
    assert best.triples == [0] and [c.passage for c in best.chunks] == [3, 1, 2]
    assert best.chunks[0].score == pytest.approx(0.88, abs=1e-5) and best.backfill_share() == 0.0


def test_pooling_params_validated() -> None:
    env, q = _env()
    for bad in ({"mode": "shuffle"}, {"kernel": "random_walk"}, {"position_a": 0}, {"pooling": "sum"},
                {"base": "bm25"}, {"base_proper_names": 0.2}, {"triple_passages": "all"}, {"fill": "dense"},
                {"base_weight": 1.5}, {"base_weight": -0.1}, {"passages_from": "dense"}):
        with pytest.raises(ConfigError):
            run_method(env, q, "pooling", 3, bad)
    with pytest.raises(ConfigError):
        pool_scores([], [0.1], 10.0, pooling="median")
    assert PoolingParams().kernel == "dijkstra" and PoolingParams().max_path_len == 4
