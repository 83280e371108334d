"""PathRAG: flow-based pruning (Eq. 2-3), reliability (Eq. 4), ascending order (Eq. 6), on hand-built graphs."""

from __future__ import annotations

import numpy as np
import pytest

from pathweaver.config import ConfigError
from pathweaver.retrieval.graphs import entity_degrees, pair_relations
from pathweaver.retrieval.pathrag import PathRAGParams, candidate_paths, retrieve_nodes
from pathweaver.retrieval.pathrag_flow import propagate, reliability
from pathweaver.retrieval.registry import run_method
from pathweaver.retrieval.types import Query, RetrievalEnv
from pathweaver.store.snapshot import GraphSnapshot

A, B, C, D, E = range(5)


def _chain() -> GraphSnapshot:
    """a - b - c - d, plus b - e. Relation r_i is supported by passage p_i; p4 supports nothing.
    Degrees: a 1, b 3, c 2, d 1, e 1. Entity and chunk vectors are one-hot (dim 5)."""
    return GraphSnapshot.from_arrays(
        ["a", "b", "c", "d", "e"],
        [(A, B, "a-b"), (B, C, "b-c"), (C, D, "c-d"), (B, E, "b-e")],
        passages=["p0", "p1", "p2", "p3", "p4"],
        relation_chunks=[(0, 0), (1, 1), (2, 2), (3, 3)],
        entity_vecs=np.eye(5, dtype=np.float32),
        rel_vecs=np.eye(4, 5, dtype=np.float32),
        chunk_vecs=np.eye(5, dtype=np.float32),
    )


def _env(snap: GraphSnapshot) -> RetrievalEnv:
    return RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 5), dtype=np.float32))


def test_resources_follow_eq2_with_decay() -> None:
    snap = _chain()
    flow = propagate(snap.adjacency, entity_degrees(snap), [A], alpha=0.8, theta=0.05, max_hops=3)
    # S(a) = 1; S(b) = 0.8·1/1 = 0.8; S(c) = S(e) = 0.8·0.8/3 = 0.21333;
    # c spreads (0.21333/2 = 0.10667 >= 0.05): S(d) = 0.8·0.21333/2 = 0.085333
    assert flow.rows[0].resources(5) == pytest.approx([1.0, 0.8, 0.64 / 3, 0.256 / 3, 0.64 / 3])
    assert flow.rows[0].levels(5).tolist() == [0, 1, 2, 3, 2]


def test_pruning_threshold_stops_the_flow() -> None:
    snap = _chain()
    # theta = 0.11: c has S/|N| = 0.10667 < 0.11 (Eq. 3), so c does not spread and d is never reached;
    # e (0.21333/1 >= 0.11) would spread but has no unvisited neighbour.
    flow = propagate(snap.adjacency, entity_degrees(snap), [A], alpha=0.8, theta=0.11, max_hops=3)
    assert flow.rows[0].levels(5).tolist() == [0, 1, 2, -1, 2]
    assert flow.rows[0].resources(5)[D] == 0.0
    assert not flow.rows[0].spread[flow.rows[0].find(np.array([C]))[0]]
    # max_hops = 2 also stops before d, even with theta = 0
    flow = propagate(snap.adjacency, entity_degrees(snap), [A], alpha=0.8, theta=0.0, max_hops=2)
    assert flow.rows[0].levels(5)[D] == -1


def test_each_node_is_updated_once() -> None:
    # a - b, a - c, b - c, b - d, c - d. Degrees a 2, b 3, c 3, d 2. alpha = 0.5, theta = 0.
    snap = GraphSnapshot.from_arrays(
        ["a", "b", "c", "d"], [(0, 1, "x"), (0, 2, "x"), (1, 2, "x"), (1, 3, "x"), (2, 3, "x")]
    )
    flow = propagate(snap.adjacency, entity_degrees(snap), [0], alpha=0.5, theta=0.0, max_hops=3)
    # S(b) = S(c) = 0.5·1/2 = 0.25 and they do not feed each other (both set at level 1); a keeps 1 (no back-flow);
    # S(d) = 0.5·0.25/3 + 0.5·0.25/3 = 0.083333 (Eq. 2 sums over its level-1 in-neighbours)
    assert flow.rows[0].resources(4) == pytest.approx([1.0, 0.25, 0.25, 0.25 / 3])


def test_reliability_of_a_three_edge_path() -> None:
    snap = _chain()
    flow = propagate(snap.adjacency, entity_degrees(snap), [A], alpha=0.8, theta=0.05, max_hops=3)
    # Eq. 4: (S(a) + S(b) + S(c) + S(d)) / 3 = (1 + 0.8 + 0.21333 + 0.085333) / 3 = 0.699556
    assert reliability([A, B, C, D], flow.rows[0]) == pytest.approx((1 + 0.8 + 0.64 / 3 + 0.256 / 3) / 3)
    # From d the same path scores (1 + 0.8 + 0.32 + 0.085333) / 3 = 0.735111 (d has one neighbour, b has three);
    # the pool keeps the more reliable direction once.
    pool = candidate_paths(snap, [A, D], PathRAGParams(alpha=0.8, theta=0.05))
    assert len(pool) == 1
    rel, path = pool[0]
    assert path == [D, C, B, A]
    assert rel == pytest.approx((1 + 0.8 + 0.32 + 0.256 / 3) / 3)


def test_node_retrieval_takes_turns_over_keywords() -> None:
    snap = _chain()
    kw = np.array([[1.0, 0.9, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0, 0.5]], dtype=np.float32)
    # keyword 1 ranks a, b, ...; keyword 2 ranks d, e, ...; turns: a, d, b, e
    assert retrieve_nodes(snap, kw, 4) == [A, D, B, E]


def test_pathrag_orders_paths_ascending_and_ranks_chunks() -> None:
    snap = _chain()
    # Retrieved nodes a, c, d (one-hot keyword vectors). alpha 0.8, theta 0.05, best path per ordered pair:
    #  from a: a→c [a,b,c] (1 + 0.8 + 0.21333)/2 = 1.006667; a→d 0.699556
    #  from c (S: b 0.4, d 0.4, a 0.106667): c→a [c,b,a] (1 + 0.4 + 0.106667)/2 = 0.753333; c→d (1 + 0.4)/1 = 1.4
    #  from d (S: c 0.8, b 0.32, a 0.085333): d→c (1 + 0.8)/1 = 1.8; d→a 0.735111
    # Pool per node pair (best direction): {c,d} 1.8 [d,c]; {a,c} 1.006667 [a,b,c]; {a,d} 0.735111 [d,c,b,a]
    q = Query("q", np.array([0.0, 0.6, 0.0, 0.0, 0.8], dtype=np.float32), keywords=["A", "c", "D"])
    result = run_method(
        _env(snap), q, "pathrag", 5, {"alpha": 0.8, "theta": 0.05, "top_paths": 2, "top_nodes": 3}
    )
    assert [p.nodes for p in result.paths] == [[A, B, C], [D, C]]  # ascending: the best path is last (Eq. 6)
    assert [p.reliability for p in result.paths] == pytest.approx([(1 + 0.8 + 0.64 / 3) / 2, 1.8])
    assert result.paths[0].relations == [0, 1] and result.paths[0].passages == [0, 1]
    assert result.paths[1].text == "d --[c-d]--> c"
    assert result.triples == [0, 1, 2]
    # chunks: p2 (1.8), then p1 and p0 (1.006667; p1 first by dense cos 0.6 > 0), then dense fill: p4 (0.8), p3
    assert [c.passage for c in result.chunks] == [2, 1, 0, 4, 3]
    assert [c.backfill for c in result.chunks] == [False, False, False, True, True]
    assert result.backfill_share() == pytest.approx(0.4)
    all_paths = run_method(_env(snap), q, "pathrag", 3, {"alpha": 0.8, "theta": 0.05, "top_nodes": 3})
    rels = [p.reliability for p in all_paths.paths]
    assert rels == sorted(rels) and len(rels) == 3
    assert all_paths.paths[0].nodes == [D, C, B, A]


def test_pathrag_without_keywords_uses_statistical_ones() -> None:
    snap = _chain()
    q = Query("how is b linked to d?", np.array([0.0, 0.6, 0.0, 0.8, 0.0], dtype=np.float32))
    result = run_method(_env(snap), q, "pathrag", 2, {"top_nodes": 2})
    # one-letter grams are no candidates, so the keywords are the entities nearest the query: d 0.8, b 0.6
    assert result.info["keywords"][:2] == ["d", "b"]
    # default alpha 0.7. From d: S(c) = 0.7, S(b) = 0.7·0.7/2 = 0.245 -> (1 + 0.7 + 0.245)/2 = 0.9725, which beats
    # from b: S(c) = 0.7/3 = 0.23333, S(d) = 0.7·0.23333/2 = 0.081667 -> (1 + 0.23333 + 0.081667)/2 = 0.6575
    assert [p.nodes for p in result.paths] == [[D, C, B]]
    assert result.paths[0].reliability == pytest.approx(0.9725)


def test_registry_overrides_and_unknown_parameter() -> None:
    snap = _chain()
    q = Query("q", np.ones(5, dtype=np.float32) / np.sqrt(5), keywords=["a", "d"])
    result = run_method(_env(snap), q, "pathrag", 5, {"alpha": 0.8})
    assert result.method == "pathrag" and result.info["params"]["alpha"] == 0.8
    with pytest.raises(ConfigError):
        run_method(_env(snap), q, "pathrag", 5, {"beta": 0.8})
    with pytest.raises(ConfigError):
        run_method(_env(snap), q, "pathrag", 5, {"alpha": 1.5})


def test_pair_relations_lists_every_relation_of_a_pair_in_index_order() -> None:
    rng = np.random.default_rng(3)
    pairs = [(int(a), int(b)) for a, b in rng.integers(0, 12, size=(300, 2))]
    snap = GraphSnapshot.from_arrays([f"e{i}" for i in range(12)], [(a, b, f"r{r}") for r, (a, b) in enumerate(pairs)])
    index = pair_relations(snap)
    for u in range(12):
        for v in range(12):
            expected = [r for r, (a, b) in enumerate(pairs) if {a, b} == {u, v}]
            assert index.between(u, v) == expected
