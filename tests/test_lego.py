"""LEGO-GraphRAG modules on hand-built graphs: SBE-PPR, SAE-EEMs, SBR, OSAR, ISAR beam search (appendix Alg. 1,
B.8 triple-level scoring and dynamic pruning), and every extractor x path combination through the registry."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pathweaver.config import ConfigError
from pathweaver.models.embedder import get_embedder
from pathweaver.retrieval.lego import LegoParams, path_chunks
from pathweaver.retrieval.lego_extract import (
    SYNONYM,
    EdgeLayers,
    ExtractedSubgraph,
    query_seeds,
    sae_eem,
    sbe_ppr,
)
from pathweaver.retrieval.lego_paths import (
    BeamStep,
    PathScorer,
    PruneRule,
    enumerate_paths,
    isar_paths,
    osar_paths,
    path_text,
    sbr_paths,
)
from pathweaver.retrieval.registry import make_params, run_method
from pathweaver.retrieval.types import PathHit, Query, RetrievalEnv
from pathweaver.store.snapshot import GraphSnapshot

Q = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)  # the query vector of the hand-built tests


def vec_with_cos(c: float) -> np.ndarray:
    """A unit vector whose cosine with ``Q`` is ``c``."""
    return np.array([c, np.sqrt(max(1.0 - c * c, 0.0)), 0.0, 0.0], dtype=np.float32)


def table_encoder(table: dict[str, float], calls: list[list[str]]) -> object:
    """An ``encode`` that maps known texts to vectors of chosen cosine and fails on anything else."""

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.stack([vec_with_cos(table[t]) for t in texts])

    return encode


def whole(snapshot: GraphSnapshot, scores: dict[int, float] | None = None) -> ExtractedSubgraph:
    """The whole hand-built graph as the extracted subgraph."""
    edges = [
        (int(s), int(d), r) for r, (s, d) in enumerate(zip(snapshot.rel_src, snapshot.rel_dst, strict=True))
    ]
    return ExtractedSubgraph(list(range(snapshot.n_entities)), edges, scores or {})


# ---------------------------------------------------------------- ISAR beam search (Algorithm 1)

# a -> b, a -> c, a -> d; b -> e, b -> g; c -> f; d -> e
BEAM_ENTITIES = ["a", "b", "c", "d", "e", "f", "g"]
BEAM_RELATIONS = [
    (0, 1, "to"),
    (0, 2, "to"),
    (0, 3, "to"),
    (1, 4, "to"),
    (2, 5, "to"),
    (3, 4, "to"),
    (1, 6, "to"),
]
# path-level EEM scores cos(path text, query), chosen by hand
BEAM_SCORES = {
    "a -to-> b": 0.9,
    "a -to-> c": 0.8,
    "a -to-> d": 0.3,
    "a -to-> b -to-> e": 0.5,
    "a -to-> b -to-> g": 0.7,
    "a -to-> c -to-> f": 0.95,
    "a -to-> d -to-> e": 0.99,  # the best 2-hop path, but its 1-hop prefix falls out of the beam
}


@pytest.fixture()
def beam_graph() -> GraphSnapshot:
    # triple-level scores (relation vectors), used only with triple_scoring
    rel_cos = [0.9, 0.8, 0.3, 0.6, 0.2, 0.99, 0.1]
    return GraphSnapshot.from_arrays(
        BEAM_ENTITIES, BEAM_RELATIONS, rel_vecs=np.stack([vec_with_cos(c) for c in rel_cos])
    )


def test_isar_beam_search_by_hand(beam_graph: GraphSnapshot) -> None:
    # beam_width B=2, max_hop L=2, start [a]:
    # hop 1 candidates: a-b .9, a-c .8, a-d .3  -> keep a-b (.9), a-c (.8); a-d is dropped
    # hop 2 candidates (from a-b and a-c only): a-b-e .5, a-b-g .7, a-c-f .95 -> keep a-c-f (.95), a-b-g (.7)
    # a-d-e (.99) is never generated. Result = all kept beams, best first: acf .95, ab .9, ac .8, abg .7
    calls: list[list[str]] = []
    scorer = PathScorer(beam_graph, table_encoder(BEAM_SCORES, calls), Q)  # type: ignore[arg-type]
    trace: list[BeamStep] = []
    hits = isar_paths(beam_graph, whole(beam_graph), [0], scorer, beam_width=2, max_hop=2, trace=trace)
    assert [(s.candidates, s.kept) for s in trace] == [
        (3, [([0, 1], pytest.approx(0.9)), ([0, 2], pytest.approx(0.8))]),
        (3, [([0, 2, 5], pytest.approx(0.95)), ([0, 1, 6], pytest.approx(0.7))]),
    ]
    assert [h.text for h in hits] == ["a -to-> c -to-> f", "a -to-> b", "a -to-> c", "a -to-> b -to-> g"]
    assert [h.reliability for h in hits] == pytest.approx([0.95, 0.9, 0.8, 0.7])
    assert hits[0].nodes == [0, 2, 5] and hits[0].relations == [1, 4]
    assert len(calls) == 2  # one batch per hop
    assert "a -to-> d -to-> e" not in sum(calls, [])


def test_isar_dynamic_pruning_drops_the_weak_branch(beam_graph: GraphSnapshot) -> None:
    # B.8 mean rule. hop 1: .9 .8 .3 -> normalised 1, .833, 0, mean .611 -> a-b and a-c pass (same as the beam)
    # hop 2: .5 .7 .95 -> normalised 0, .444, 1, mean .481 -> only a-c-f passes; a-b-g (kept without pruning)
    # is dropped although the beam has room for it
    scorer = PathScorer(beam_graph, table_encoder(BEAM_SCORES, []), Q)  # type: ignore[arg-type]
    trace: list[BeamStep] = []
    hits = isar_paths(beam_graph, whole(beam_graph), [0], scorer, 2, 2, prune=PruneRule("mean"), trace=trace)
    assert [[n for n, _ in s.kept] for s in trace] == [[[0, 1], [0, 2]], [[0, 2, 5]]]
    assert [h.text for h in hits] == ["a -to-> c -to-> f", "a -to-> b", "a -to-> c"]


def test_isar_triple_level_scoring_uses_only_the_new_triple(beam_graph: GraphSnapshot) -> None:
    # B.8: score only the newly added triple (relation vectors, no encoder call).
    # hop 1: r0 a-b .9, r1 a-c .8, r2 a-d .3 -> keep a-b, a-c
    # hop 2: r3 b-e .6, r6 b-g .1, r4 c-f .2 -> keep a-b-e (.6), a-c-f (.2)
    def no_encode(texts: list[str]) -> np.ndarray:
        raise AssertionError(f"encoder called with {texts}")

    scorer = PathScorer(beam_graph, no_encode, Q)
    trace: list[BeamStep] = []
    hits = isar_paths(beam_graph, whole(beam_graph), [0], scorer, 2, 2, triple_scoring=True, trace=trace)
    assert [[n for n, _ in s.kept] for s in trace] == [[[0, 1], [0, 2]], [[0, 1, 4], [0, 2, 5]]]
    assert [h.reliability for h in hits] == pytest.approx([0.9, 0.8, 0.6, 0.2])


def test_prune_rule_mean_and_percentile() -> None:
    scores = np.array([1.0, 2.0, 3.0, 10.0])  # normalised 0, 1/9, 2/9, 1: mean 1/3, median 1/6
    assert PruneRule("mean").keep(scores).tolist() == [False, False, False, True]
    assert PruneRule("percentile", 50.0).keep(scores).tolist() == [False, False, True, True]
    assert PruneRule("mean").keep(np.array([0.4, 0.4, 0.4])).tolist() == [True, True, True]  # flat: keep all
    with pytest.raises(ConfigError, match="prune_rule"):
        PruneRule("median")


# ---------------------------------------------------------------- SBR, OSAR


def test_sbr_finds_the_true_shortest_path() -> None:
    # a-b-c-d-e (4 hops) and a-x-e (2 hops, the second edge points from e to x)
    names = ["a", "b", "c", "d", "e", "x"]
    rels = [(0, 1, "r"), (1, 2, "r"), (2, 3, "r"), (3, 4, "r"), (0, 5, "l"), (4, 5, "m")]
    snap = GraphSnapshot.from_arrays(names, rels)
    sub = whole(snap, {0: 0.5, 4: 0.4, 2: 0.3, 1: 0.1, 3: 0.1, 5: 0.05})
    hits = sbr_paths(snap, sub, [0, 4], n_targets=1, top_n=10)
    # targets: the other seed, plus the best non-seed entity c (0.3); one path per pair, ranked by the end score
    assert [(h.nodes, h.relations) for h in hits] == [
        ([0, 5, 4], [4, 5]),
        ([0, 1, 2], [0, 1]),
        ([4, 3, 2], [3, 2]),
    ]
    assert hits[0].text == "a -l-> x <-m- e"
    assert hits[0].reliability == pytest.approx(0.4)


def test_enumerate_paths_is_breadth_first_and_simple(beam_graph: GraphSnapshot) -> None:
    paths = enumerate_paths(whole(beam_graph), [0], max_hop=3, limit=100)
    # 1 hop: a-b, a-c, a-d; 2 hops: a-b-e, a-b-g, a-c-f, a-d-e; 3 hops: a-b-e-d, a-d-e-b
    assert [n for n, _ in paths] == [
        [0, 1], [0, 2], [0, 3], [0, 1, 4], [0, 1, 6], [0, 2, 5], [0, 3, 4], [0, 1, 4, 3], [0, 3, 4, 1]
    ]  # fmt: skip
    assert len(enumerate_paths(whole(beam_graph), [0], max_hop=3, limit=4)) == 4


def test_osar_scores_all_candidates_in_one_shot(beam_graph: GraphSnapshot) -> None:
    calls: list[list[str]] = []
    scorer = PathScorer(beam_graph, table_encoder(BEAM_SCORES, calls), Q)  # type: ignore[arg-type]
    hits = osar_paths(beam_graph, whole(beam_graph), [0], scorer, max_hop=2, top_n=3, max_candidates=100)
    assert len(calls) == 1 and len(calls[0]) == 7
    # unlike the beam, the one-shot ranking sees a-d-e
    assert [h.text for h in hits] == ["a -to-> d -to-> e", "a -to-> c -to-> f", "a -to-> b"]


# ---------------------------------------------------------------- extraction


def test_sbe_keeps_the_top_max_ent_by_ppr() -> None:
    # path a-b-c-d plus a lone pair x-y; PPR from a with damping 0.85
    names = ["a", "b", "c", "d", "x", "y"]
    snap = GraphSnapshot.from_arrays(names, [(0, 1, "r"), (1, 2, "r"), (2, 3, "r"), (4, 5, "r")])
    # closed form: x = (1-d) (I - d M)^-1 r over the column-stochastic walk M
    m = np.zeros((6, 6))
    for u, v in [(0, 1), (1, 2), (2, 3), (4, 5)]:
        m[u, v] = m[v, u] = 1.0
    m /= np.where(m.sum(axis=0) > 0, m.sum(axis=0), 1.0)
    expected = 0.15 * np.linalg.solve(np.eye(6) - 0.85 * m, np.eye(6)[0])
    # by hand: x_a = .15 + .425 x_b, x_b = .85 (x_a + x_c / 2), ... -> b (.36) > a (.30) > c (.23) > d (.10)
    assert list(np.argsort(-expected)[:4]) == [1, 0, 2, 3]
    sub = sbe_ppr(snap, [0], max_ent=2, damping=0.85, tol=1e-12, max_iter=500)
    assert sub.entities == [1, 0]
    assert sub.edges == [(0, 1, 0)]  # only the edge among the kept entities
    assert sub.scores[1] == pytest.approx(expected[1], abs=1e-9)
    everything = sbe_ppr(snap, [0], max_ent=100, damping=0.85, tol=1e-12, max_iter=500)
    assert sorted(everything.entities) == [0, 1, 2, 3]  # x and y are unreachable: PPR mass 0, not kept


def test_sae_keeps_top_edges_plus_one_hop() -> None:
    # chain 0-1-2-3-4-5-6; the query is closest to relation r2 (2-3)
    names = [f"n{i}" for i in range(7)]
    rels = [(i, i + 1, "next") for i in range(6)]
    rel_cos = [0.1, 0.3, 0.9, 0.2, 0.05, 0.0]
    snap = GraphSnapshot.from_arrays(names, rels, rel_vecs=np.stack([vec_with_cos(c) for c in rel_cos]))
    sub = sae_eem(snap, Q, [], max_edge=1)
    # top edge r2 -> core {2, 3}; one hop adds r1 (1-2) and r3 (3-4)
    assert sub.entities == [1, 2, 3, 4]
    assert [r for _, _, r in sub.edges] == [1, 2, 3]
    assert sub.scores == pytest.approx({1: 0.3, 2: 0.9, 3: 0.9, 4: 0.2})
    assert sae_eem(snap, Q, [], max_edge=1, hops=2).entities == [0, 1, 2, 3, 4, 5]
    with_seed = sae_eem(snap, Q, [6], max_edge=1)  # the seed joins the core, with its neighbour 5
    assert with_seed.entities == [1, 2, 3, 4, 5, 6]
    assert [r for _, _, r in with_seed.edges] == [1, 2, 3, 5]


def test_synonym_edges_join_the_subgraph() -> None:
    snap = GraphSnapshot.from_arrays(["a", "b", "c"], [(0, 1, "r")], synonyms=[(1, 2, 0.95)])
    sub = sbe_ppr(snap, [0], max_ent=3, damping=0.85, tol=1e-10, max_iter=200)
    assert (1, 2, SYNONYM) in sub.edges
    assert path_text(snap, [0, 1, 2], [0, SYNONYM]) == "a -r-> b -synonym of-> c"
    no_syn = sbe_ppr(snap, [0], max_ent=3, damping=0.85, tol=1e-10, max_iter=200, layers=EdgeLayers(synonyms=False))
    assert 2 not in no_syn.entities


# ---------------------------------------------------------------- whole method on real embeddings

CURIE_ENTITIES = [
    "marie curie",
    "pierre curie",
    "polonium",
    "warsaw",
    "poland",
    "vistula",
    "paris",
    "sorbonne",
]
CURIE_RELATIONS = [
    (0, 2, "discovered"),
    (0, 3, "was born in"),
    (3, 4, "is the capital of"),
    (5, 3, "flows through"),
    (1, 0, "married"),
    (0, 7, "taught at"),
    (7, 6, "is located in"),
]
CURIE_PASSAGES = [
    "Marie Curie discovered polonium, named after her native Poland.",
    "Marie Curie was born in Warsaw, the capital of Poland.",
    "The Vistula flows through Warsaw.",
    "Pierre Curie married Marie Curie in 1895.",
    "Marie Curie taught at the Sorbonne in Paris.",
    "Bread is baked from flour, water and yeast.",
]
# relation -> supporting passage
CURIE_SUPPORT = [(0, 0), (1, 1), (2, 1), (3, 2), (4, 3), (5, 4), (6, 4)]


@pytest.fixture(scope="module")
def curie_env() -> RetrievalEnv:
    emb = get_embedder()
    triples = [f"{CURIE_ENTITIES[s]} {label} {CURIE_ENTITIES[d]}" for s, d, label in CURIE_RELATIONS]
    snap = GraphSnapshot.from_arrays(
        CURIE_ENTITIES,
        CURIE_RELATIONS,
        passages=CURIE_PASSAGES,
        relation_chunks=CURIE_SUPPORT,
        entity_vecs=emb.encode(CURIE_ENTITIES),
        rel_vecs=emb.encode(triples),
        chunk_vecs=emb.encode(CURIE_PASSAGES),
    )
    return RetrievalEnv(snap, lambda text, k: [], emb.encode)


def ask(env: RetrievalEnv, text: str, keywords: list[str] | None = None) -> Query:
    return Query(text, env.encode([text])[0], keywords or [])


def test_query_seeds_prefer_named_entities(curie_env: RetrievalEnv) -> None:
    snap = curie_env.snapshot
    # the agent keyword first, then the n-gram of the question; nothing else once the query names entities
    assert query_seeds(snap, ask(curie_env, "Where was Marie Curie born?", ["Warsaw"]), 3) == [3, 0]
    assert query_seeds(snap, ask(curie_env, "Where was Marie Curie born?", ["Warsaw"]), 1) == [3]
    # no entity named: the entities nearest by cosine
    seeds = query_seeds(snap, ask(curie_env, "the river of the Polish capital"), 2)
    cos = snap.entity_vecs @ ask(curie_env, "the river of the Polish capital").vec
    assert seeds == np.argsort(-cos)[:2].tolist()


def test_osar_with_the_real_embedder_finds_the_birthplace(curie_env: RetrievalEnv) -> None:
    query = ask(curie_env, "In which city was Marie Curie born?")
    result = run_method(curie_env, query, "lego:sbe+osar", 3)
    assert result.info["seeds"] == ["marie curie"]
    # all candidate paths from marie curie, scored in one shot: the born-in edge leads (alone or extended)
    assert result.paths[0].text.startswith("marie curie -was born in-> warsaw")
    assert "marie curie -was born in-> warsaw" in [h.text for h in result.paths[:2]]
    assert result.chunks[0].passage == 1  # the passage supporting the best path's triples


@pytest.mark.parametrize("extractor", ["sbe", "sae"])
@pytest.mark.parametrize("path_module", ["sbr", "osar", "isar"])
def test_every_combination_runs_through_the_registry(
    curie_env: RetrievalEnv, extractor: str, path_module: str
) -> None:
    query = ask(curie_env, "Which river flows through the city where Marie Curie was born?")
    result = run_method(curie_env, query, f"lego:{extractor}+{path_module}", 5)
    snap = curie_env.snapshot
    assert result.method == f"lego:{extractor}+{path_module}"
    assert result.paths and len(result.chunks) == 5
    assert len({c.passage for c in result.chunks}) == 5
    assert [h.reliability for h in result.paths] == sorted(
        (h.reliability for h in result.paths), reverse=True
    )
    for hit in result.paths:
        assert hit.text == path_text(snap, hit.nodes, hit.relations)
        for a, r, b in zip(hit.nodes, hit.relations, hit.nodes[1:], strict=False):
            assert {int(snap.rel_src[r]), int(snap.rel_dst[r])} == {a, b}
        assert hit.passages == sorted({p for r in hit.relations for p in snap.rel_chunks[r].indices.tolist()})
    assert result.triples and set(result.triples) <= {r for h in result.paths for r in h.relations}
    assert result.subgraph is not None
    stats = result.subgraph.stats
    assert (stats["extractor"], stats["path_module"]) == (extractor, path_module)
    assert stats["subgraph_entities"] == len(result.subgraph.nodes) and stats["subgraph_edges"] >= 1
    assert result.info["params"]["beam_width"] == 8 and result.info["params"]["max_hop"] == 4


def test_isar_options_through_the_registry(curie_env: RetrievalEnv) -> None:
    query = ask(curie_env, "Which river flows through the city where Marie Curie was born?")
    plain = run_method(curie_env, query, "lego:sae+isar", 3)
    pruned = run_method(curie_env, query, "lego:sae+isar", 3, {"dynamic_pruning": True})
    triple = run_method(curie_env, query, "lego:sae+isar", 3, {"triple_scoring": "true", "beam_width": 1})
    assert plain.paths and pruned.paths and triple.paths
    assert len(pruned.paths) <= len(plain.paths) <= 8 * 4
    assert all(
        len(h.relations) == i + 1 for i, h in enumerate(sorted(triple.paths, key=lambda h: len(h.nodes)))
    )


def test_path_chunks_rank_by_best_path_then_fill_with_dense(curie_env: RetrievalEnv) -> None:
    query = ask(curie_env, "bread flour yeast")
    paths = [PathHit([5, 3], [3], 0.2, ""), PathHit([0, 3, 4], [1, 2], 0.7, "")]
    chunks = path_chunks(curie_env, query, paths, 3)
    # passage 1 supports r1 and r2 (best path .7), passage 2 supports r3 (.2); the dense fill brings the bread text
    assert [(c.passage, c.score) for c in chunks[:2]] == [(1, 0.7), (2, 0.2)]
    assert chunks[2].passage == 5
    assert paths[1].passages == [1]


def test_bad_parameters_are_clear_errors(curie_env: RetrievalEnv) -> None:
    with pytest.raises(ConfigError, match="extractor"):
        LegoParams(extractor="steiner").validate()
    with pytest.raises(ConfigError, match="path module"):
        LegoParams(path_module="dfs").validate()
    with pytest.raises(ConfigError, match="beam_width"):
        make_params(LegoParams, {"beam_width": 0})
    with pytest.raises(ConfigError, match="unknown LEGO combination"):
        run_method(curie_env, ask(curie_env, "x"), "lego:sbe+dfs", 3)
    defaults = dataclasses.asdict(LegoParams())
    assert (defaults["max_ent"], defaults["max_edge"], defaults["top_k_paths"]) == (1000, 64, 32)


def test_empty_graph_returns_dense_chunks_only() -> None:
    emb = get_embedder()
    snap = GraphSnapshot.from_arrays(
        [],
        [],
        passages=CURIE_PASSAGES[:2],
        chunk_vecs=emb.encode(CURIE_PASSAGES[:2]),
        entity_vecs=np.zeros((0, 384)),
    )
    env = RetrievalEnv(snap, lambda text, k: [], emb.encode)
    result = run_method(env, ask(env, "Where was Marie Curie born?"), "lego:sbe+isar", 2)
    assert result.paths == [] and [c.passage for c in result.chunks] == [1, 0]


@pytest.mark.parametrize("method", ["lego:sbe+isar", "lego:sae+osar", "lego:sae+sbr"])
def test_lego_on_the_indexed_corpus(method: str, request: pytest.FixtureRequest) -> None:
    for module in ("pathweaver.store.reads", "pathweaver.ingest.pipeline"):
        pytest.importorskip(module, reason="the store reader / indexer is not built yet")
    pw = request.getfixturevalue("indexed")
    out = pw.retrieve_json("Where was Marie Curie born?", method, 5)  # type: ignore[attr-defined]
    assert out["paths"] and out["chunks"]
    assert all(p["text"].split()[0] for p in out["paths"])
    cited = {c["doc"] for p in out["paths"] for c in p["citations"]}
    assert cited and all(doc.endswith((".md", ".txt")) for doc in cited)
    assert out["subgraph"]["stats"]["subgraph_entities"] >= 2


def test_isar_expansion_cap_pre_cuts_by_triple_score(beam_graph: GraphSnapshot) -> None:
    # max_expansions=1: hop 1 has 3 extensions, cut to the best by triple score (r0 a-b, .9) before path scoring;
    # hop 2 has a-b-e (r3 .6) and a-b-g (r6 .1), cut to a-b-e, whose path score is .5
    scorer = PathScorer(beam_graph, table_encoder(BEAM_SCORES, []), Q)  # type: ignore[arg-type]
    hits = isar_paths(beam_graph, whole(beam_graph), [0], scorer, 2, 2, max_expansions=1)
    assert [(h.text, h.reliability) for h in hits] == [
        ("a -to-> b", pytest.approx(0.9)),
        ("a -to-> b -to-> e", 0.5),
    ]


def test_served_subgraph_puts_path_edges_first_and_is_capped(curie_env: RetrievalEnv) -> None:
    snap = curie_env.snapshot
    query = ask(curie_env, "Which river flows through the city where Marie Curie was born?")
    result = run_method(curie_env, query, "lego:sbe+sbr", 3, {"subgraph_max_edges": 2, "top_k_paths": 1})
    sub = result.subgraph
    assert sub is not None and len(sub.edges) == 2 and sub.stats["served_edges"] == 2
    assert sub.stats["subgraph_edges"] == 7  # the whole (connected) graph was extracted, 2 edges served
    rels = (result.paths[0].relations + [r for r in range(7) if r not in result.paths[0].relations])[:2]
    expected = [(snap.entity_names[snap.rel_src[r]], snap.entity_names[snap.rel_dst[r]], 1.0) for r in rels]
    if len(result.paths[0].relations) < 2:  # the second served edge is then the best by cos(query, triple)
        expected = expected[:1]
    assert sub.edges[: len(expected)] == expected


def test_lego_walks_the_names_of_the_indexed_corpus(request: pytest.FixtureRequest) -> None:
    pw = request.getfixturevalue("indexed")
    ask_ = "Which river flows through the city where Marie Curie was born?"
    # over the name edges alone (the default), ISAR's beam goes from Marie Curie's note through the city it names
    # to the river the city's note names: each hop reads the sentence that names the next entity
    out = pw.retrieve_json(ask_, "lego:sbe+isar", 3)  # type: ignore[attr-defined]
    hop = next(p for p in out["paths"] if p["nodes"] == ["marie curie", "warsaw", "vistula"])
    assert hop["relations"] == ["mentions", "mentions"] and "The Vistula river flows through Warsaw." in hop["text"]
    # each hop's mentioning passage, and (tail_passages) the page of the entity it reaches
    assert {c["doc"].rsplit("/", 1)[-1] for c in hop["citations"]} == {"marie-curie.md", "warsaw.md", "vistula.txt"}
    assert {"marie-curie.md", "warsaw.md"} <= {c["doc"].rsplit("/", 1)[-1] for c in out["chunks"]}
    # these notes link each other, so the list stands on hybrid's (floor.py); LEGO's own list needs no back-fill
    own = pw.retrieve_json(ask_, "lego:sbe+isar", 3, {"hybrid_floor": False})  # type: ignore[attr-defined]
    assert own["info"]["backfill_share"] == 0.0
