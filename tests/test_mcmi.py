"""AGRAG MCMI: Eq. 14 costs, Eq. 15 ratio, the greedy growth rule (Eq. 17) by hand, Mehlhorn vs the optimum,
and the whole method on a small graph embedded with the real model."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable

import networkx as nx
import numpy as np
import pytest

from mcmi_twins import (
    cost_score_ratio,
    exact_steiner_cost,
    greedy_expand,
    mehlhorn_tree,
    tree_cost,
    weighted_graph,
)
from pathweaver.config import ConfigError
from pathweaver.models.embedder import get_embedder
from pathweaver.retrieval.costgraph import KIND_CONTAINS, KIND_PSEUDO, KIND_RELATION
from pathweaver.retrieval.mcmi import MCMIParams
from pathweaver.retrieval.mcmi_graph import PSEUDO, edge_cost
from pathweaver.retrieval.registry import run_method
from pathweaver.retrieval.steiner import mehlhorn_edges
from pathweaver.retrieval.types import Query, RetrievalEnv, Subgraph
from pathweaver.store.snapshot import GraphSnapshot


def test_edge_cost_eq14() -> None:
    # c = (1 - cos) / 2
    assert edge_cost(1.0) == 0.0
    assert edge_cost(0.2) == pytest.approx(0.4)
    assert edge_cost(-1.0) == 1.0


def _toy(extra_bd: bool = False) -> tuple[nx.Graph, nx.Graph, dict[str, float]]:
    """Tree A-B (cost 0.2). Outside: C-B 0.1, D-A 0.25, E-C 0.4, F-D 0.5 (and optionally B-D 0.3).
    Scores s: A 0.4, B 0.1, C 0.5, D 0.5, E 0.2, F 0.5."""
    s = {"A": 0.4, "B": 0.1, "C": 0.5, "D": 0.5, "E": 0.2, "F": 0.5}
    g = nx.Graph()
    edges = [("A", "B", 0.2), ("C", "B", 0.1), ("D", "A", 0.25), ("E", "C", 0.4), ("F", "D", 0.5)]
    if extra_bd:
        edges.append(("B", "D", 0.3))
    for u, v, c in edges:
        g.add_edge(u, v, cost=c, kind=KIND_RELATION)
    tree = g.edge_subgraph([("A", "B")]).copy()
    return g, tree, s


def test_ratio_eq15_by_hand() -> None:
    g, tree, s = _toy()
    # r(tree) = 0.2 / (0.4 + 0.1) = 0.4
    assert cost_score_ratio(tree, s) == pytest.approx(0.4)
    # whole graph: 0.4 + 0.1/0.6 + 0.25/0.9 + 0.4/0.7 + 0.5/1.0
    assert cost_score_ratio(g, s) == pytest.approx(0.4 + 0.1 / 0.6 + 0.25 / 0.9 + 0.4 / 0.7 + 0.5)
    # a zero-score pair gives an infinite term; skipped kinds do not count
    g.add_edge("A", "Z", cost=10.0, kind=KIND_PSEUDO)
    assert cost_score_ratio(g.edge_subgraph([("A", "Z")]), {"A": 0.0}) == float("inf")
    assert cost_score_ratio(g.edge_subgraph([("A", "Z")]), s, skip_kinds=[KIND_PSEUDO]) == 0.0


def test_greedy_adds_while_ratio_below_r_and_stops() -> None:
    g, tree, s = _toy()
    out = greedy_expand(g, tree, s, max_added=10, cycle_edges=False)
    # r = 0.4. Neighbour ratios c/s_v: C = 0.1/0.5 = 0.2, D = 0.25/0.5 = 0.5.
    # C: 0.2 < 0.4 -> joins; r = 0.4 + 0.1/(0.1+0.5) = 0.566667.
    # D: 0.5 < 0.566667 -> joins (it would not have against the first r = 0.4); r += 0.25/(0.4+0.5) -> 0.844444.
    # E (via C): 0.4/0.2 = 2.0 and F (via D): 0.5/0.5 = 1.0, both >= 0.844444 -> stop.
    assert out.added == ["C", "D"]
    assert out.mcst_ratio == pytest.approx(0.4)
    assert out.ratio == pytest.approx(0.4 + 0.1 / 0.6 + 0.25 / 0.9)
    assert out.ratio == pytest.approx(0.844444, abs=1e-6)
    assert set(out.graph.nodes) == {"A", "B", "C", "D"} and "E" not in out.graph and "F" not in out.graph
    assert out.ratio == pytest.approx(cost_score_ratio(out.graph, s))


def test_greedy_cycle_edges_and_cap() -> None:
    g, tree, s = _toy(extra_bd=True)
    out = greedy_expand(g, tree, s, max_added=10, cycle_edges=True)
    # C joins as before (r = 0.566667). D's cheapest edge is A-D (0.25/0.5 = 0.5 < B-D 0.3/0.5 = 0.6); it joins
    # with both its edges into the subgraph: r += 0.25/0.9 + 0.3/(0.1+0.5) = 0.277778 + 0.5 -> 1.344444.
    # Now F: 1.0 < 1.344444 -> joins, r += 0.5/1.0 -> 1.844444. E: 2.0 >= 1.844444 -> stop.
    assert out.added == ["C", "D", "F"]
    assert out.ratio == pytest.approx(0.4 + 0.1 / 0.6 + 0.25 / 0.9 + 0.5 + 0.5)
    assert out.graph.has_edge("B", "D") and len(nx.cycle_basis(out.graph)) == 1  # A-B-D cycle
    capped = greedy_expand(g, tree, s, max_added=1)
    assert capped.added == ["C"]


def test_greedy_never_adds_zero_score_nodes() -> None:
    g, tree, s = _toy()
    s = {**s, "C": 0.0}
    out = greedy_expand(g, tree, s, max_added=10, cycle_edges=False)
    assert "C" not in out.graph


def test_mehlhorn_within_twice_the_brute_forced_optimum() -> None:
    rng = random.Random(7)
    for seed in range(5):
        g = nx.gnm_random_graph(11, 24, seed=seed)
        while not nx.is_connected(g):
            u, v = rng.sample(range(11), 2)
            g.add_edge(u, v)
        for u, v in g.edges:
            g[u][v]["cost"] = round(rng.uniform(0.05, 1.0), 3)
        terminals = rng.sample(range(11), 4)
        tree = mehlhorn_tree(g, terminals)
        opt = exact_steiner_cost(g, terminals)
        assert set(terminals) <= set(tree.nodes) and nx.is_tree(tree)
        assert opt - 1e-9 <= tree_cost(tree) <= 2 * opt + 1e-9  # AGRAG Theorem 2


def test_exact_steiner_by_hand_and_forest() -> None:
    # star with centre x (edges 1.0 to a, b, c) vs the path a-b-c (edges 1.6): through the Steiner node x the
    # tree costs 3 x 1.0 = 3.0 < 2 x 1.6 = 3.2, so the optimum is 3.0
    g = nx.Graph()
    for t in "abc":
        g.add_edge("x", t, cost=1.0)
    g.add_edge("a", "b", cost=1.6)
    g.add_edge("b", "c", cost=1.6)
    assert exact_steiner_cost(g, ["a", "b", "c"]) == pytest.approx(3.0)
    g.add_node("lonely")
    forest = mehlhorn_tree(g, ["a", "b", "lonely"])
    assert {"a", "b", "lonely"} <= set(forest.nodes) and nx.number_connected_components(forest) == 2


@pytest.fixture(scope="module")
def curie_env() -> tuple[RetrievalEnv, Callable[[str], Query]]:
    """A small Curie graph, every vector from the real embedder. BM25 is a word-overlap stand-in (no store)."""
    emb = get_embedder()
    ents = ["marie curie", "pierre curie", "warsaw", "radium", "sorbonne", "paris", "vistula"]
    rels = [
        (0, 2, "was born in"),
        (0, 1, "married"),
        (0, 3, "discovered"),
        (1, 4, "taught at"),
        (4, 5, "is located in"),
        (2, 6, "lies on"),
    ]
    passages = [
        "Marie Curie was born in Warsaw. She married Pierre Curie.",
        "Marie Curie discovered radium together with Pierre Curie.",
        "Pierre Curie taught at the Sorbonne, which is located in Paris.",
        "Warsaw lies on the Vistula river.",
    ]
    mentions = [(0, 0, 1), (0, 2, 1), (0, 1, 1), (1, 0, 1), (1, 3, 1), (1, 1, 1), (2, 1, 1), (2, 4, 1)]
    mentions += [(2, 5, 1), (3, 2, 1), (3, 6, 1)]
    rel_chunks = [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3)]
    triple_texts = [f"{ents[s]} {label} {ents[d]}" for s, d, label in rels]
    snap = GraphSnapshot.from_arrays(
        ents,
        rels,
        passages=passages,
        mentions=mentions,
        relation_chunks=rel_chunks,
        entity_vecs=emb.encode(ents),
        rel_vecs=emb.encode(triple_texts),
        chunk_vecs=emb.encode(passages),
    )

    def bm25(text: str, k: int) -> list[tuple[int, float]]:
        words = set(text.lower().replace("?", "").split())
        hits = [(p, float(len(words & set(t.lower().rstrip(".").split())))) for p, t in enumerate(passages)]
        return sorted([h for h in hits if h[1] > 0], key=lambda h: -h[1])[:k]

    env = RetrievalEnv(snap, bm25, emb.encode)
    return env, lambda text: Query(text, emb.encode([text])[0])


def test_weighted_graph_costs(curie_env: tuple) -> None:
    env, make_query = curie_env
    snap = env.snapshot
    q = make_query("Where was Marie Curie born?")
    nodes = list(range(snap.n_entities + snap.n_passages))
    g = weighted_graph(snap, nodes, q.vec, np.ones(len(nodes)), connector_cost=10.0)
    born = float(snap.rel_vecs[0] @ q.vec)
    assert g[0][2]["cost"] == pytest.approx((1 - born) / 2, abs=1e-6)  # Eq. 14 on the triple vector
    p0 = snap.n_entities
    assert g[p0][0]["kind"] == KIND_CONTAINS
    assert g[p0][0]["cost"] == pytest.approx((1 - float(snap.chunk_vecs[0] @ q.vec)) / 2, abs=1e-6)
    assert g[PSEUDO][p0]["cost"] == 10.0 and g.degree(PSEUDO) == snap.n_passages


def test_mcmi_end_to_end_via_registry(curie_env: tuple) -> None:
    env, make_query = curie_env
    snap = env.snapshot
    q = make_query("Where was Marie Curie born?")
    result = run_method(env, q, "mcmi", 5, {"k_triples": 3, "chunks": "hybrid"})
    sub = result.subgraph
    assert result.method == "mcmi" and sub is not None
    mapped = result.info["mapped_triples"]
    assert len(mapped) == 3 and mapped[0] == 0  # "marie curie was born in warsaw" is the nearest triple
    # every terminal (entity of a mapped triple) is in the subgraph, and the mapped triples are served
    for r in mapped:
        assert (
            snap.entity_names[snap.rel_src[r]] in sub.nodes
            and snap.entity_names[snap.rel_dst[r]] in sub.nodes
        )
    assert set(mapped) <= set(result.triples)
    st = sub.stats
    assert st["mcmi_nodes"] >= st["mcst_nodes"] and st["mcmi_edges"] >= st["mcst_edges"]
    assert st["ratio"] >= st["mcst_ratio"] > 0
    assert "(marie curie, was born in, warsaw)" in sub.text and sub.text.startswith("Nodes: ")
    assert len(result.chunks) == 4  # top_k 5 but only 4 passages; hybrid ranks the birth passage first
    assert result.chunks[0].passage == 0
    assert all(v >= 0 for v in sub.node_scores.values())


def test_mcmi_params_validated(curie_env: tuple) -> None:
    env, make_query = curie_env
    q = make_query("radium")
    with pytest.raises(ConfigError):
        run_method(env, q, "mcmi", 5, {"k_triples": 0})
    with pytest.raises(ConfigError):
        run_method(env, q, "mcmi", 5, {"damping": 1.0})
    assert MCMIParams().k_triples == 5 and MCMIParams().connector_cost == 10.0


def test_mehlhorn_edges_forest_zero_costs_and_pruned_leaves() -> None:
    # two components: 0-1-2 (with a dangling non-terminal 3 off 1) and 4-5; one zero-cost edge must still count
    head = np.array([0, 1, 1, 4])
    tail = np.array([1, 2, 3, 5])
    cost = np.array([0.0, 0.5, 0.1, 0.2])
    chosen = mehlhorn_edges(6, head, tail, cost, [0, 2, 4, 5])
    assert sorted(chosen) == [0, 1, 3]  # the leaf edge 1-3 is pruned; the forest spans both components
    assert mehlhorn_edges(6, head, tail, cost, [0]) == []  # a single terminal needs no edge
    assert mehlhorn_edges(6, head, tail, cost, [0, 4]) == []  # no bridge between two components


def test_edge_positions_either_order_and_non_edges_refused() -> None:
    from pathweaver.retrieval.costgraph import edge_positions

    head, tail = np.array([0, 1, 3]), np.array([1, 2, 1])
    assert edge_positions(4, head, tail, np.array([[2, 1], [1, 3], [0, 1]])).tolist() == [1, 2, 0]
    with pytest.raises(ValueError, match="not an edge"):
        edge_positions(4, head, tail, np.array([[0, 2]]))


def test_subgraph_json_is_asdict_without_the_deep_copy() -> None:
    sub = Subgraph(["a", "b"], [("a", "b", np.float32(0.5)), ("b", "a", 2.0)], "Nodes: a; b",
                   {"mcmi_nodes": 2, "ratio": 0.25}, {"a": 0.75, "b": np.float64(0.125)})
    out = sub.to_json()
    assert json.dumps(out) == json.dumps(dataclasses.asdict(sub), default=float)
    assert all(type(c) is float for _, _, c in out["edges"]) and type(out["node_scores"]["b"]) is float
    out["nodes"].append("c")
    out["stats"]["ratio"] = 9.0
    assert sub.nodes == ["a", "b"] and sub.stats["ratio"] == 0.25, "the subgraph itself is left as it was"
