"""The paper methods over the name layer (issue 23): PathRAG's paths of several lengths inside the pruned flow
(Eq. 2-4), MCMI's Eq. 11 personalisation, Path Pooling's name triples, worked out by hand on small graphs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.retrieval.graphs import node_space_graph
from pathweaver.retrieval.lego_extract import (
    STATISTICAL_ONLY,
    EdgeLayers,
    graph_seeds,
    name_code,
    sae_eem,
    sbe_ppr,
)
from pathweaver.retrieval.mcmi import MCMIParams, eq11_scores
from pathweaver.retrieval.namegraph import NameEdges, best_per_pair, name_edges, path_adjacency
from pathweaver.retrieval.pathrag import PathRAGParams, candidate_paths
from pathweaver.retrieval.pathrag_flow import flow_paths, propagate, reliability
from pathweaver.retrieval.pooling import PoolingParams, base_passage_scores, coarse_triples, item_passages
from pathweaver.retrieval.registry import get_method, make_params, run_method
from pathweaver.retrieval.types import NAME_EDGE, Query, RetrievalEnv, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot

A, B, C, D = range(4)


def _direct(env: RetrievalEnv, q: Query, method: str, top_k: int, params: dict[str, object]) -> RetrievalResult:
    """Run ``method`` with ``params`` as they are, past the registry's rule that a paper-only value (``targets =
    "retrieved"``, ``base_weight = 0``, ...) comes only with ``preset = "paper"``: the mechanism under test."""
    spec, fixed = get_method(method)
    return spec.fn(env, q, top_k, make_params(spec.params_cls, {**params, **fixed}))


def _triangle() -> GraphSnapshot:
    """a - b - c - a, plus c - d. Degrees: a 2, b 2, c 3, d 1."""
    return GraphSnapshot.from_arrays(["a", "b", "c", "d"], [(A, B, "x"), (B, C, "x"), (A, C, "x"), (C, D, "x")])


def test_flow_paths_of_several_lengths_by_hand() -> None:
    snap = _triangle()
    adj = snap.adjacency
    deg = np.diff(adj.indptr).astype(np.float64)
    row = propagate(adj, deg, [A], alpha=0.8, theta=0.0, max_hops=3).rows[0]
    # Eq. 2: S(b) = S(c) = 0.8·1/2 = 0.4 (level 1, each updated once); S(d) = 0.8·0.4/3 = 0.106667
    assert row.resources(4) == pytest.approx([1.0, 0.4, 0.4, 0.32 / 3])
    found = flow_paths(adj, row, {C, D}, max_hops=3, cap=10)
    assert sorted(found[C], key=len) == [[A, C], [A, B, C]]
    assert sorted(found[D], key=len) == [[A, C, D], [A, B, C, D]]
    # Eq. 4 on each: [a,c] (1 + 0.4)/1; [a,b,c] (1 + 0.4 + 0.4)/2; [a,c,d] (1 + 0.4 + 0.10667)/2;
    # [a,b,c,d] (1 + 0.4 + 0.4 + 0.10667)/3
    assert reliability([A, C], row) == pytest.approx(1.4)
    assert reliability([A, B, C], row) == pytest.approx(0.9)
    assert reliability([A, C, D], row) == pytest.approx((1.4 + 0.32 / 3) / 2)
    assert reliability([A, B, C, D], row) == pytest.approx((1.8 + 0.32 / 3) / 3)
    # max_hops 2 drops the 3-edge path
    assert sorted(flow_paths(adj, row, {D}, max_hops=2, cap=10)[D]) == [[A, C, D]]


def test_pruned_nodes_carry_no_path_and_hop_first_keeps_the_shortest() -> None:
    snap = _triangle()
    adj = snap.adjacency
    deg = np.diff(adj.indptr).astype(np.float64)
    # theta 0.15: b spreads (0.4/2 = 0.2), c does not (0.4/3 = 0.1333 < 0.15, Eq. 3), so d is never reached
    row = propagate(adj, deg, [A], alpha=0.8, theta=0.15, max_hops=3).rows[0]
    found = flow_paths(adj, row, {C, D}, max_hops=3, cap=10)
    assert sorted(found[C], key=len) == [[A, C], [A, B, C]] and D not in found
    # the pool keeps the best paths_per_pair per pair: with 2, the flow mode serves both a-c paths; hop-first
    # (the earlier behaviour) only the 1-edge one
    flow_pool = candidate_paths(snap, [A, C], PathRAGParams(alpha=0.8, theta=0.15, paths_per_pair=2))
    hop_pool = candidate_paths(snap, [A, C], PathRAGParams(alpha=0.8, theta=0.15, paths="hop-first"))
    assert sorted(len(p) for _, p in flow_pool) == [2, 3]
    assert [p for _, p in hop_pool] == [[A, C]] or [p for _, p in hop_pool] == [[C, A]]


PASSAGES = [
    "Inherent Vice is a film directed by Paul Thomas Anderson.",
    "Paul Thomas Anderson was born in Studio City, Los Angeles.",
    "Los Angeles is a city in California.",
]


def _names() -> GraphSnapshot:
    """Three documents and their title entities: "inherent vice" (p0) names "paul thomas anderson" (p1), whose
    passage names "los angeles" (p2). No statistical relation. One-hot vectors (dim 4)."""
    ents = ["inherent vice", "paul thomas anderson", "los angeles", "film"]
    passages = PASSAGES
    eye = np.eye(4, dtype=np.float32)
    snap = GraphSnapshot.from_arrays(
        ents, [], passages=passages, mentions=[(0, 0, 1), (0, 1, 1), (1, 1, 1), (1, 2, 1), (2, 2, 1), (0, 3, 1)],
        entity_vecs=eye, rel_vecs=np.zeros((0, 4), dtype=np.float32), chunk_vecs=eye[:3].copy(),
    )
    ties = sp.csr_matrix((np.ones(3, dtype=np.float32), ([0, 1, 2], [0, 1, 2])), shape=(3, 4))
    named = sp.csr_matrix((np.ones(2, dtype=np.float32), ([0, 1], [1, 2])), shape=(3, 4))
    return dataclasses.replace(snap, ties=ties, name_mentions=named)


def _env(snap: GraphSnapshot) -> RetrievalEnv:
    return RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 4), dtype=np.float32))


def test_name_edges_join_a_document_to_the_names_it_mentions() -> None:
    snap = _names()
    edges = name_edges(snap)
    assert list(zip(edges.src.tolist(), edges.dst.tolist(), edges.passage.tolist(), strict=True)) == [
        (0, 1, 0), (1, 2, 1)]
    assert edges.passages_between(1, 0) == [0]
    assert path_adjacency(snap, 0.0).toarray()[:3, :3].tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]


def test_pathrag_reaches_passages_through_names() -> None:
    snap = _names()
    q = Query("Where was the director of Inherent Vice born?", np.array([0, 0, 1, 0], dtype=np.float32))
    # retrieved nodes: the named "inherent vice", then the document of the top dense passage (p2: los angeles)
    result = _direct(_env(snap), q, "pathrag", 3, {"top_nodes": 2, "dense_nodes": 1, "targets": "retrieved"})
    # directed flow from a = inherent vice (alpha 0.7): S(pta) = 0.7·1/1, S(la) = 0.7·0.7/1 = 0.49 (pta's
    # document mentions one name); Eq. 4 (1 + 0.7 + 0.49)/2 = 1.095; la's document mentions nothing, no reverse
    assert [p.nodes for p in result.paths] == [[0, 1, 2]]
    assert result.paths[0].reliability == pytest.approx(1.095)
    with pytest.raises(ConfigError, match="preset=paper"):  # the paper's ends come only with its preset
        run_method(_env(snap), q, "pathrag", 3, {"targets": "retrieved"})
    # a name edge reads as the mention it is, with the sentence that names the other document
    assert "--[mentions: Inherent Vice is a film directed by Paul Thomas Anderson.]-->" in result.paths[0].text
    # passages: the two mentioning passages and the three documents on the path, ties by dense cosine
    assert [c.passage for c in result.chunks] == [2, 0, 1]
    assert result.backfill_share() == 0.0


def test_mcmi_personalisation_is_eq11() -> None:
    snap = _names()
    params = MCMIParams()
    scores = eq11_scores(snap, [0], params)
    # the fixed point of Eq. 10 with p = 1 on the terminal, solved directly: s = (1-d) (I - d·M')^{-1} p, where
    # M' sends each dangling node's mass back to p
    graph = node_space_graph(snap, "count", "count", params.name_links, params.statistical)
    m = graph.transition.toarray()
    p = np.zeros(m.shape[0])
    p[0] = 1.0
    m = m + np.outer(p, graph.dangling.astype(float))
    d = params.damping
    expected = (1 - d) * np.linalg.solve(np.eye(m.shape[0]) - d * m, p)
    assert scores == pytest.approx(expected, abs=1e-6)
    # nothing but the terminals personalises the walk: the query vector plays no part in it
    q = Query("Where was the director of Inherent Vice born?", np.array([0, 0, 1, 0], dtype=np.float32))
    result = run_method(_env(snap), q, "mcmi", 2, {"chunks": "subgraph"})
    assert result.info["named_entities"] == ["inherent vice"]
    assert [c.passage for c in result.chunks][:1] == [0] and result.backfill_share() == 0.0
    # by default the highest-influence passage still leads, and a hybrid chunk takes the next turn
    assert [c.passage for c in run_method(_env(snap), q, "mcmi", 2, {}).chunks][:1] == [0]


def test_pooling_name_triples_and_their_passages() -> None:
    snap = _names()
    q = Query("Where was the director of Inherent Vice born?", np.array([0.6, 0.8, 0, 0], dtype=np.float32))
    cos = PoolingParams(base="cos")
    tr = coarse_triples(_env(snap), q, cos, 10, [0], base_passage_scores(_env(snap), q, cos))
    # name triple m scored by cos(query, its passage): (iv, pta, p0) 0.6, (pta, la, p1) 0.8
    assert tr.items == [-2, -1] and tr.scores == pytest.approx([0.8, 0.6])
    assert tr.ends == [(1, 2), (0, 1)]
    assert item_passages(snap, -1, True) == [0, 1] and item_passages(snap, -2, False) == [1]
    result = _direct(_env(snap), q, "pooling", 3, {"query_entities": 0, "pooling": "mean", "base": "cos",
                                                    "base_weight": 0.0, "passages_from": "served"})
    # kernels from the named "inherent vice" alone: [t(iv,pta)] and [t(iv,pta), t(pta,la)]; §3.3 mean pooling (a = 10):
    # t(iv,pta) = max(0.6 + 0.06, 0.7 + 0.06) = 0.76; t(pta,la) = 0.7 + 0.6/100 = 0.706
    assert result.info["query_entities"][0] == "inherent vice"
    assert [c.passage for c in result.chunks] == [0, 1, 2]
    assert [c.score for c in result.chunks] == pytest.approx([0.76, 0.76, 0.706])
    assert result.backfill_share() == 0.0


def test_pathrag_named_targets_reach_unnamed_documents() -> None:
    snap = _names()
    q = Query("Where was the director of Inherent Vice born?", np.array([0, 0, 0, 1], dtype=np.float32))
    # one retrieved node (the named film), no dense documents: the paper's pairs would give no path at all
    assert _direct(_env(snap), q, "pathrag", 3, {"dense_nodes": 0, "top_nodes": 1, "targets": "retrieved"}
                   ).paths == []
    result = run_method(_env(snap), q, "pathrag", 3, {"dense_nodes": 0, "top_nodes": 1})
    # targets "named": every node the film's flow reached ends a path; iv -> pta (1 + 0.7)/1 = 1.7 is served
    # last (Eq. 6), iv -> pta -> la (1 + 0.7 + 0.49)/2 = 1.095 first (directed: pta's out-degree is 1)
    assert [p.nodes for p in result.paths] == [[0, 1, 2], [0, 1]]
    assert [p.reliability for p in result.paths] == pytest.approx([1.095, 1.7])
    assert [c.passage for c in result.chunks] == [0, 1, 2] and result.backfill_share() == 0.0


def test_name_layer_defaults_apply_only_where_documents_name_each_other(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathweaver.retrieval import pathrag
    from pathweaver.retrieval.graphs import documents_link

    linked = _names()  # three documents, two of which name another
    alone = dataclasses.replace(linked, chunk_docs=["one.md"] * 3)  # the same mentions inside one document
    assert documents_link(linked) and not documents_link(alone)
    q = Query("Where was the director of Inherent Vice born?", np.array([0, 0, 1, 0], dtype=np.float32),
              keywords=["a", "b", "c", "d"])
    # pathrag's N when top_nodes is None: one constant where documents name each other, the other elsewhere
    monkeypatch.setattr(pathrag, "TOP_NODES_LINKED", 1)
    monkeypatch.setattr(pathrag, "TOP_NODES_UNLINKED", 2)
    keyword_nodes = PathRAGParams(dense_nodes=0, name_nodes=False)
    assert len(pathrag.query_nodes(_env(linked), q, keyword_nodes)[0]) == 1
    assert len(pathrag.query_nodes(_env(alone), q, keyword_nodes)[0]) == 2
    assert len(pathrag.query_nodes(_env(alone), q, dataclasses.replace(keyword_nodes, top_nodes=3))[0]) == 3
    # mcmi's "auto" chunks: influence and hybrid taking turns over documents that name each other, AGRAG's hybrid
    # ones otherwise
    for snap, mode in ((linked, "turns"), (alone, "hybrid")):
        auto = run_method(_env(snap), q, "mcmi", 2, {})
        fixed = run_method(_env(snap), q, "mcmi", 2, {"chunks": mode})
        assert [c.passage for c in auto.chunks] == [c.passage for c in fixed.chunks]


def _two_dells() -> GraphSnapshot:
    """Two documents that share the title "dell" (p0, p1; MuSiQue has six such paragraphs) and one on "texas" (p2).
    One-hot vectors (dim 3); the question's vector points at p1."""
    passages = [
        "Dell sells personal computers.",
        "Dell ranks sixth by revenue in Texas.",
        "Texas is a state of the United States.",
    ]
    eye = np.eye(3, dtype=np.float32)
    snap = GraphSnapshot.from_arrays(
        ["dell", "texas"], [], passages=passages, mentions=[(0, 0, 1), (1, 0, 1), (1, 1, 1), (2, 1, 1)],
        entity_vecs=eye[:2].copy(), rel_vecs=np.zeros((0, 3), dtype=np.float32), chunk_vecs=eye.copy(),
    )
    ties = sp.csr_matrix((np.ones(3, dtype=np.float32), ([0, 1, 2], [0, 0, 1])), shape=(3, 2))
    named = sp.csr_matrix((np.ones(1, dtype=np.float32), ([1], [1])), shape=(3, 2))
    return dataclasses.replace(snap, ties=ties, name_mentions=named)


def test_a_title_of_several_passages_gives_its_weight_to_the_one_the_question_asks_about() -> None:
    from pathweaver.config import ConfigError
    from pathweaver.retrieval.ppr import PPRParams, personalization

    snap = _two_dells()
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 3), dtype=np.float32))
    q = Query("In which state does Dell rank sixth by revenue?", np.array([0, 1, 0], dtype=np.float32))
    only_names = {"top_triples": 0, "name_seeds": 0.0, "passage_weight": 0.0}
    split, info = personalization(env, q, PPRParams(**only_names))
    assert [snap.entity_names[e] for e in info.named] == ["dell"]
    # reset = 2 entities, then 3 passages; name_passages = 2 goes to the passages "dell" ties to
    assert split[2:].tolist() == pytest.approx([0.0, 2.0, 0.0])  # min-max of their cosines 0 and 1
    assert [h.passage for h in run_method(env, q, "ppr", 1, None).chunks] == [1]
    with pytest.raises(ConfigError):  # the even split lost on dev and is no setting
        run_method(env, q, "ppr", 1, {"name_split": "even"})


def test_pathrag_text_units_of_named_nodes_take_turns_with_path_passages() -> None:
    from pathweaver.retrieval.pathrag_passages import node_text_units, with_text_units
    from pathweaver.retrieval.types import ChunkHit

    snap = _names()
    dense = np.array([0.1, 0.2, 0.9], dtype=np.float32)
    # a node's text units are its own passages nearest the query, in node order, each passage once
    assert node_text_units(snap, [2, 0, 2], dense, 1) == [2, 0]
    paths = [ChunkHit(1, 1.7), ChunkHit(0, 0.97), ChunkHit(2, 0.5, backfill=True)]
    # a path passage first, then a unit, ...; a unit already served is skipped; back-fill comes after both
    assert [c.passage for c in with_text_units(paths, [2, 0], 3)] == [1, 2, 0]
    assert [c.backfill for c in with_text_units(paths, [2, 0], 3)] == [False, False, False]
    assert [c.passage for c in with_text_units(paths, [], 3)] == [1, 0, 2]
    q = Query("Where was the director of Inherent Vice born?", np.array([0, 0, 0, 1], dtype=np.float32))
    named = run_method(_env(snap), q, "pathrag", 3, {"dense_nodes": 0, "top_nodes": 1})
    alone = run_method(_env(snap), q, "pathrag", 3, {"dense_nodes": 0, "top_nodes": 1, "text_units": "none"})
    assert [c.passage for c in named.chunks][:1] == [c.passage for c in alone.chunks][:1]
    assert 0 in [c.passage for c in named.chunks]  # the named film's own passage
    with pytest.raises(Exception, match="text_units"):
        run_method(_env(snap), q, "pathrag", 3, {"text_units": "some"})


def test_mcmi_turns_take_influence_and_hybrid_chunks_in_turn() -> None:
    snap = _names()
    q = Query("Where was the director of Inherent Vice born?", np.array([0, 0, 1, 0], dtype=np.float32))
    influence = eq11_scores(snap, [0], MCMIParams())[snap.n_entities:]
    turns = run_method(_env(snap), q, "mcmi", 3, {})
    hybrid = run_method(_env(snap), q, "mcmi", 3, {"chunks": "hybrid"})
    walked = [int(p) for p in np.argsort(-influence, kind="stable") if influence[p] > 0]
    expected: list[int] = []
    for pair in zip(walked, [c.passage for c in hybrid.chunks], strict=False):
        expected += [p for p in pair if p not in expected]
    assert [c.passage for c in turns.chunks] == expected[:3]
    # a hybrid chunk is a back-fill unless the subgraph or the served influence passages reached it
    marks = {c.passage: c.backfill for c in hybrid.chunks}
    assert all(c.backfill == (c.passage not in walked[:3] and marks[c.passage]) for c in turns.chunks)


def test_pooling_scores_triples_by_the_ppr_base() -> None:
    from pathweaver.retrieval.ppr import PPRParams, ppr_scores

    snap = _names()
    q = Query("Where was the director of Inherent Vice born?", np.array([0.6, 0.8, 0, 0], dtype=np.float32))
    scores, _ = ppr_scores(_env(snap), q, PPRParams(proper_names=0.0))
    base = scores[snap.n_entities:] / scores[snap.n_entities:].max()
    tr = coarse_triples(_env(snap), q, PoolingParams(), 10, [0], base_passage_scores(_env(snap), q, PoolingParams()))
    edges = name_edges(snap)
    # a name triple's score is its mentioning passage's PPR score over the query's best passage
    assert tr.scores == pytest.approx([float(base[edges.passage[-1 - i]]) for i in tr.items])
    assert tr.scores == sorted(tr.scores, reverse=True)
    with pytest.raises(Exception, match="base"):
        run_method(_env(snap), q, "pooling", 3, {"base": "bm25"})


def test_pooling_name_triple_stands_for_the_named_documents_best_passage() -> None:
    # "los angeles" gets a second passage p3, nearer the query than its first (p2)
    snap = _names()
    eye = np.eye(4, dtype=np.float32)
    ties = sp.csr_matrix((np.ones(4, dtype=np.float32), ([0, 1, 2, 3], [0, 1, 2, 2])), shape=(4, 4))
    named = sp.csr_matrix((np.ones(2, dtype=np.float32), ([0, 1], [1, 2])), shape=(4, 4))
    snap = dataclasses.replace(
        GraphSnapshot.from_arrays(
            list(snap.entity_names), [], passages=["Inherent Vice is a film directed by Paul Thomas Anderson.",
                                                   "Paul Thomas Anderson was born in Studio City, Los Angeles.",
                                                   "Los Angeles is a city in California.", "Los Angeles has a port."],
            mentions=[(0, 0, 1), (0, 1, 1), (1, 1, 1), (1, 2, 1), (2, 2, 1), (3, 2, 1), (0, 3, 1)],
            entity_vecs=eye, rel_vecs=np.zeros((0, 4), dtype=np.float32), chunk_vecs=eye.copy()),
        ties=ties, name_mentions=named)
    q = Query("Where was the director of Inherent Vice born?", np.array([0.6, 0.7, 0.2, 0.3], dtype=np.float32))
    args = {"query_entities": 0, "base": "cos", "base_weight": 0.0, "passages_from": "served"}
    # (pta, mentions, la) stands for p1 and la's best passage by the base (cos 0.3 for p3 against 0.2 for p2);
    # mean pooling: t(iv,pta) = max(0.6 + 0.06, 0.65 + 0.06) = 0.71 (p0, p1), t(pta,la) = 0.65 + 0.006 (p1, p3)
    best = _direct(_env(snap), q, "pooling", 4, args)
    assert [c.passage for c in best.chunks[:3]] == [0, 1, 3]
    assert [c.score for c in best.chunks[:3]] == pytest.approx([0.71, 0.71, 0.656])
    assert best.chunks[3].passage == 2 and best.chunks[3].backfill


def _names_two_passages() -> GraphSnapshot:
    """``_names`` plus a second passage of Paul Thomas Anderson's document (p3) and an unlinked document,
    "boogie nights" (p4), that no passage names. One-hot vectors (dim 5)."""
    ents = ["inherent vice", "paul thomas anderson", "los angeles", "boogie nights"]
    passages = [
        "Inherent Vice is a film directed by Paul Thomas Anderson.",
        "Paul Thomas Anderson was born in Studio City, Los Angeles.",
        "Los Angeles is a city in California.",
        "Paul Thomas Anderson's early films were shot in the San Fernando Valley.",
        "Boogie Nights is a 1997 film.",
    ]
    eye = np.eye(5, dtype=np.float32)
    snap = GraphSnapshot.from_arrays(
        ents, [], passages=passages, mentions=[(0, 0, 1), (0, 1, 1), (1, 1, 1), (1, 2, 1), (2, 2, 1), (3, 1, 1),
                                               (4, 3, 1)],
        entity_vecs=eye[:4].copy(), rel_vecs=np.zeros((0, 5), dtype=np.float32), chunk_vecs=eye,
    )
    ties = sp.csr_matrix((np.ones(5, dtype=np.float32), ([0, 1, 2, 3, 4], [0, 1, 2, 1, 3])), shape=(5, 4))
    named = sp.csr_matrix((np.ones(2, dtype=np.float32), ([0, 1], [1, 2])), shape=(5, 4))
    return dataclasses.replace(snap, ties=ties, name_mentions=named)


def test_pathrag_document_nodes_bring_their_passage_nearest_the_query() -> None:
    from pathweaver.retrieval.pathrag import make_path_hit

    snap = _names_two_passages()
    # path inherent vice > pta > los angeles: its name-edge passages p0, p1, then each node's own passage(s)
    near_p1 = np.array([0.1, 0.5, 0.2, 0.3, 0.0], dtype=np.float32)
    near_p3 = np.array([0.1, 0.3, 0.2, 0.5, 0.0], dtype=np.float32)
    assert make_path_hit(snap, [0, 1, 2], 1.0, near_p1).passages == [0, 1, 2]
    assert make_path_hit(snap, [0, 1, 2], 1.0, near_p3).passages == [0, 1, 3, 2]
    assert make_path_hit(snap, [0, 1, 2], 1.0).passages == [0, 1, 3, 2]  # no query scores: every own passage
    with pytest.raises(Exception, match="node_passages"):
        run_method(_env(snap), Query("x", near_p1), "pathrag", 3, {"node_passages": "some"})


def test_pathrag_unnamed_question_serves_the_top_dense_document_as_its_text_unit() -> None:
    from pathweaver.retrieval.pathrag import PathRAGParams, query_nodes

    snap = _names_two_passages()
    q = Query("Where was he born?", np.array([0, 0, 0, 0, 1], dtype=np.float32))  # names nothing; dense: p4
    params = {"dense_nodes": 1, "top_nodes": 1}
    default = run_method(_env(snap), q, "pathrag", 2, params)
    named_only = run_method(_env(snap), q, "pathrag", 2, {**params, "unnamed": "none"})
    # no path (one unnamed node); the unit is p4, a chunk of the method's own, not a back-fill
    assert [(c.passage, c.backfill) for c in default.chunks][:1] == [(4, False)]
    assert all(c.backfill for c in named_only.chunks)
    # "anchor" (default): the dense document is also treated as named (its paths may end at any node its flow
    # reached)
    nodes, _, named = query_nodes(_env(snap), q, PathRAGParams(dense_nodes=1, top_nodes=1))
    assert named == {3}
    # a question that names a document keeps the named node's unit
    named = run_method(_env(snap), Query("Who directed Inherent Vice?", q.vec), "pathrag", 3, params)
    assert 0 in [c.passage for c in named.chunks] and 4 not in [c.passage for c in named.chunks if not c.backfill]


def test_pathrag_dense_documents_join_only_questions_that_name_fewer_than_two() -> None:
    from pathweaver.retrieval.pathrag import PathRAGParams, named_documents, query_nodes

    snap = _names_two_passages()
    env = _env(snap)
    vec = np.array([0, 0, 0, 0, 1], dtype=np.float32)  # dense top passage p4: "boogie nights", off every path
    two = Query("Did Paul Thomas Anderson direct Inherent Vice?", vec)
    one = Query("Who directed Inherent Vice?", vec)
    params = PathRAGParams(dense_nodes=1, top_nodes=4)
    nodes, _, named = query_nodes(env, two, params)
    assert named == {0, 1} and named_documents(snap, named) == 2 and 3 not in nodes
    assert 3 in query_nodes(env, one, params)[0]
    with pytest.raises(Exception, match="unnamed"):
        run_method(env, one, "pathrag", 3, {"unnamed": "dense"})
    with pytest.raises(ConfigError, match="unknown parameter 'dense_when'"):  # joining always lost on dev
        run_method(env, one, "pathrag", 3, {"dense_when": "always"})


def _hub() -> GraphSnapshot:
    """Two films whose documents both mention "united states" (a hub whose own document mentions nothing) and
    the first also its director. One document per entity, one-hot vectors (dim 4)."""
    ents = ["a film", "b film", "united states", "director"]
    passages = ["A Film is an American film by Director.", "B Film is an American film.",
                "The United States is a country.", "Director is a film maker."]
    eye = np.eye(4, dtype=np.float32)
    snap = GraphSnapshot.from_arrays(
        ents, [], passages=passages,
        mentions=[(0, 0, 1), (0, 2, 1), (0, 3, 1), (1, 1, 1), (1, 2, 1), (2, 2, 1), (3, 3, 1)],
        entity_vecs=eye, rel_vecs=np.zeros((0, 4), dtype=np.float32), chunk_vecs=eye.copy())
    ties = sp.csr_matrix((np.ones(4, dtype=np.float32), ([0, 1, 2, 3], [0, 1, 2, 3])), shape=(4, 4))
    named = sp.csr_matrix((np.ones(3, dtype=np.float32), ([0, 0, 1], [2, 3, 2])), shape=(4, 4))
    return dataclasses.replace(snap, ties=ties, name_mentions=named)


def test_pathrag_directed_flow_follows_what_a_document_mentions() -> None:
    snap = _hub()
    edges = name_edges(snap)
    assert edges.passages_from(0, 2) == [0] and edges.passages_from(2, 0) == [] and edges.passages_between(2, 0) == [0]
    # Eq. 2 as printed: out-degrees a 2, b 1, us 0; the hub's document mentions nothing, so it spreads nowhere
    directed = path_adjacency(snap, 0.0, directed=True)
    assert directed.toarray().tolist() == [[0, 0, 1, 1], [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    # the two films are joined only through the hub both mention, which the directed flow does not cross
    assert candidate_paths(snap, [0, 1], PathRAGParams(targets="retrieved")) == []
    # a named start's open ends follow its document's mentions: a -> us and a -> director, (1 + 0.7/2)/1 each
    pool = candidate_paths(snap, [0], PathRAGParams(), named=frozenset({0}))
    assert sorted(p for _, p in pool) == [[0, 2], [0, 3]]
    assert [r for r, _ in pool] == pytest.approx([1.35, 1.35])
    with pytest.raises(ConfigError, match="unknown parameter 'edges'"):  # undirected name edges lost on dev
        run_method(_env(snap), Query("x", np.eye(4, dtype=np.float32)[0]), "pathrag", 3, {"edges": "undirected"})


def test_pooling_refines_the_base_passage_score() -> None:
    snap = _names()
    q = Query("Where was the director of Inherent Vice born?", np.array([0.6, 0.8, 0, 0], dtype=np.float32))
    args = {"query_entities": 0, "pooling": "mean", "base": "cos"}
    # pooled as in test_pooling_name_triples_and_their_passages: p0 0.76, p1 0.76, p2 0.706; base cos 0.6, 0.8, 0.
    # Alone, the pooled score puts p2 ("los angeles", which the question's vector does not touch) at 0.706, lifted
    # by §3.3's mean from the triple beside it; base^0.5 · pooled^0.5 keeps the base's order and drops p2 to 0
    alone = _direct(_env(snap), q, "pooling", 3, {**args, "base_weight": 0.0})
    assert [c.passage for c in alone.chunks] == [0, 1, 2]
    assert alone.chunks[2].score == pytest.approx(0.706)
    refined = run_method(_env(snap), q, "pooling", 3, args)
    assert [c.passage for c in refined.chunks] == [1, 0, 2]
    assert [c.score for c in refined.chunks] == pytest.approx([(0.8 * 0.76) ** 0.5, (0.6 * 0.76) ** 0.5, 0.0])
    assert refined.backfill_share() == 0.0
    # base_weight 1 is the base's own score over the same passages
    assert [c.score for c in run_method(_env(snap), q, "pooling", 3, {**args, "base_weight": 1.0}).chunks] \
        == pytest.approx([0.8, 0.6, 0.0])


def test_pooling_named_documents_triples_join_the_coarse_set() -> None:
    # _names() plus two statistical triples: (inherent vice, is a, film) from p0, far from the query vector, and
    # (paul thomas anderson, born in, los angeles) from p1, nearest to it
    names = _names()
    eye = np.eye(4, dtype=np.float32)
    snap = dataclasses.replace(
        GraphSnapshot.from_arrays(
            list(names.entity_names), [(0, 3, "is a"), (1, 2, "born in")], passages=PASSAGES,
            relation_chunks=[(0, 0), (1, 1)],
            mentions=[(0, 0, 1), (0, 1, 1), (1, 1, 1), (1, 2, 1), (2, 2, 1), (0, 3, 1)],
            entity_vecs=eye, rel_vecs=eye[[3, 1]].copy(), chunk_vecs=eye[:3].copy()),
        ties=names.ties, name_mentions=names.name_mentions)
    q = Query("Where was the director of Inherent Vice born?", np.array([0.6, 0.8, 0, 0], dtype=np.float32))
    base = np.array([0.5, 1.0, 0.2])  # the base's passage scores, as base_passage_scores hands them over
    on = coarse_triples(_env(snap), q, PoolingParams(), 1, [0], base)
    off = coarse_triples(_env(snap), q, PoolingParams(named_passages=False), 1, [0], base)
    # the naive top 1 is "born in" (cos 0.8); "is a" (cos 0) comes from p0, the named document's only passage
    assert 1 in off.items and 0 not in off.items
    assert 0 in on.items and on.scores[on.items.index(0)] == pytest.approx(0.5)
    assert set(on.items) - set(off.items) == {0}
    with pytest.raises(ConfigError):
        run_method(_env(snap), q, "pooling", 3, {"named_passages": "yes"})


def _lego_query() -> Query:
    # cos(query, passage): p0 0.6, p1 0.8, p2 0 (one-hot passage vectors)
    return Query("Where was the director of Inherent Vice born?", np.array([0.6, 0.8, 0, 0], dtype=np.float32))


def test_lego_extraction_keeps_name_edges() -> None:
    snap = _names()
    passage_scores = np.array([0.6, 0.8, 0.0])
    iv_pta, pta_la = name_code(0), name_code(1)
    # SAE-EEMs: the top name triple by cos(query, its passage) is (pta, la) at 0.8; with the seed, no hop
    sub = sae_eem(snap, _lego_query().vec, [0], max_edge=1, hops=0, layers=EdgeLayers(), passage_scores=passage_scores)
    assert sub.edges == [(1, 2, pta_la)] and sub.entities == [0, 1, 2]
    assert sub.scores == {0: 0.0, 1: pytest.approx(0.8), 2: pytest.approx(0.8)}
    # B.7 (3): the one-hop neighbourhood of the core brings the seed's name edge
    hop = sae_eem(snap, _lego_query().vec, [0], max_edge=1, hops=1, layers=EdgeLayers(), passage_scores=passage_scores)
    assert hop.edges == [(0, 1, iv_pta), (1, 2, pta_la)] and hop.scores[0] == pytest.approx(0.6)
    # SBE-PPR walks the name edges from the seed; over the statistical edges alone (none here) it stays put
    walk = sbe_ppr(snap, [0], max_ent=10, damping=0.85, tol=1e-10, max_iter=200, layers=EdgeLayers())
    assert set(walk.entities) == {0, 1, 2} and sorted(walk.edges) == [(0, 1, iv_pta), (1, 2, pta_la)]
    alone = sbe_ppr(snap, [0], max_ent=10, damping=0.85, tol=1e-10, max_iter=200, layers=STATISTICAL_ONLY)
    assert alone.entities == [0] and alone.edges == []
    with pytest.raises(ConfigError, match="passage scores"):
        sae_eem(snap, _lego_query().vec, [0], max_edge=1, layers=EdgeLayers())


def test_lego_one_name_edge_per_pair_the_passage_nearest_the_query() -> None:
    # two passages of a's document (p3, p5) mention b, one of b's (p4) mentions a: one edge per pair, p5's
    keys = np.array([1 * 4 + 2] * 3, dtype=np.int64)
    edges = NameEdges(np.array([1, 1, 2]), np.array([2, 2, 1]), np.array([3, 5, 4]), keys, 4)
    scores = np.array([0, 0, 0, 0.2, 0.5, 0.9])
    assert best_per_pair(edges, np.array([0, 1, 2]), scores).tolist() == [1]
    assert best_per_pair(edges, np.array([2, 0]), scores).tolist() == [2]
    assert best_per_pair(edges, np.array([0, 1, 2]), None).tolist() == [0]


def test_lego_paths_over_names_and_their_passages() -> None:
    snap = _names()
    q = _lego_query()
    result = run_method(_env(snap), q, "lego:sbe+sbr", 3, {})
    assert result.info["seeds"][0] == "inherent vice" and result.info["name_edges"] == 2
    # SBR: a shortest path from the film to each other entity; a name edge stands for its mentioning passage and
    # (tail_passages) the named document's passage nearest the query
    assert [(p.nodes, p.relations, p.passages) for p in result.paths] == [
        ([0, 1], [NAME_EDGE], [0, 1]), ([0, 1, 2], [NAME_EDGE, NAME_EDGE], [0, 1, 2])]
    assert result.paths[1].text == (
        "inherent vice -mentions: Inherent Vice is a film directed by Paul Thomas Anderson.-> paul thomas anderson "
        "-mentions: Paul Thomas Anderson was born in Studio City, Los Angeles.-> los angeles")
    # p0 and p1 tie on the path to pta (its PPR mass) and are ordered by cos(query, passage): p1 0.8, p0 0.6
    assert [(c.passage, c.backfill) for c in result.chunks] == [(1, False), (0, False), (2, False)]
    assert result.chunks[0].score == result.chunks[1].score > result.chunks[2].score
    assert result.triples == [] and "los angeles" in result.subgraph.nodes
    # without tail passages each edge is its mentioning passage alone, and the third chunk is back-fill
    bare = run_method(_env(snap), q, "lego:sbe+sbr", 3, {"tail_passages": False})
    assert [p.passages for p in bare.paths] == [[0], [0, 1]]
    assert [(c.passage, c.backfill) for c in bare.chunks] == [(0, False), (1, False), (2, True)]
    # ISAR with triple-level scoring (B.8 (1)) scores a name triple by its passage, encoding nothing:
    # iv -> pta 0.6, then pta -> la 0.8; the 2-hop path leads and brings p0, p1, p2 at 0.8
    isar = run_method(_env(snap), q, "lego:sbe+isar", 3, {"triple_scoring": True})
    assert [(p.nodes, p.reliability) for p in isar.paths] == [([0, 1, 2], pytest.approx(0.8)),
                                                              ([0, 1], pytest.approx(0.6))]
    assert [(c.passage, c.score) for c in isar.chunks] == [(1, pytest.approx(0.8)), (0, pytest.approx(0.8)),
                                                            (2, pytest.approx(0.8))]
    # names off: the statistical graph (empty here) finds nothing, and every chunk is dense back-fill
    old = _direct(_env(snap), q, "lego:sbe+sbr", 3, {"names": False})
    assert old.paths == [] and old.backfill_share() == 1.0
    # a store without name edges walks its statistical edges whatever is asked
    assert EdgeLayers(statistical=False).on(_triangle()) == EdgeLayers(True, True, False)


def test_lego_graph_switches_are_validated() -> None:
    snap = _names()
    with pytest.raises(ConfigError, match="statistical"):
        run_method(_env(snap), _lego_query(), "lego:sae+sbr", 3, {"statistical": -1.0})
    with pytest.raises(ConfigError, match="the statistical edges, the name edges or both"):
        EdgeLayers(statistical=False, names=False).on(snap)
    names_only = run_method(_env(snap), _lego_query(), "lego:sae+sbr", 3, {"statistical": 0.0})
    assert names_only.backfill_share() < 1.0


def test_lego_fills_with_its_subgraph_before_dense() -> None:
    snap = _names()
    # SBR toward no target but the one seed finds no path; the extracted subgraph still holds both name edges
    params = {"sbr_targets": 0, "tail_passages": False}
    result = run_method(_env(snap), _lego_query(), "lego:sae+sbr", 3, params)
    assert result.paths == []
    # fill "subgraph": the edges' passages by cos(query, passage) (p1 0.8, p0 0.6), then dense back-fill (p2)
    assert [(c.passage, c.backfill) for c in result.chunks] == [(1, False), (0, False), (2, True)]
    assert [c.score for c in result.chunks[:2]] == pytest.approx([0.8, 0.6])
    dense = _direct(_env(snap), _lego_query(), "lego:sae+sbr", 3, {**params, "fill": "dense"})
    assert dense.backfill_share() == 1.0
    with pytest.raises(ConfigError, match="fill"):
        run_method(_env(snap), _lego_query(), "lego:sae+sbr", 3, {"fill": "hybrid"})


def test_lego_seeds_off_the_graph_are_joined_by_the_nearest_on_it() -> None:
    snap = _names()
    qvec = np.array([0, 0, 1, 0], dtype=np.float32)
    # "film" (3) names no document and no passage of a titled one names it: no name edge touches it
    assert graph_seeds(snap, qvec, [3], 1, EdgeLayers()) == [3, 2]
    assert graph_seeds(snap, qvec, [3, 0], 1, EdgeLayers()) == [3, 0]
    result = run_method(_env(snap), Query("What is a film?", qvec), "lego:sbe+sbr", 3, {"seed_entities": 1})
    assert result.info["seeds"] == ["film", "los angeles"] and result.paths
