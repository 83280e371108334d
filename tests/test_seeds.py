"""Seeds: dense on real embeddings, hybrid normalisation (AGRAG Eq. 21) on hand values, entity/triple seeds."""

from __future__ import annotations

import numpy as np
import pytest

from pathweaver.config import ConfigError
from pathweaver.models.embedder import get_embedder
from pathweaver.retrieval.keywords import statistical_keywords
from pathweaver.retrieval.registry import run_method
from pathweaver.retrieval.seeds import (
    HybridParams,
    hybrid_chunk_scores,
    hybrid_retrieve,
    minmax,
    top_entities,
    top_indices,
    top_triples,
)
from pathweaver.retrieval.types import Query, RetrievalEnv
from pathweaver.store.snapshot import GraphSnapshot

PASSAGES = [
    "Marie Curie discovered polonium and radium with her husband Pierre.",
    "The Vistula is the longest river in Poland and flows through Warsaw.",
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose.",
    "The Eiffel Tower was completed in Paris in 1889 for the World's Fair.",
]


@pytest.fixture(scope="module")
def embed_env() -> tuple[RetrievalEnv, object]:
    emb = get_embedder()
    snap = GraphSnapshot.from_arrays(["warsaw"], [], passages=PASSAGES, chunk_vecs=emb.encode(PASSAGES))
    return RetrievalEnv(snap, lambda text, k: [], emb.encode), emb


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Which river runs through the Polish capital?", 1),
        ("Who found radioactive elements together with her spouse?", 0),
        ("How do plants make sugar from light?", 2),
        ("When was the famous iron tower in France finished?", 3),
    ],
)
def test_dense_returns_the_right_passage(
    embed_env: tuple[RetrievalEnv, object], question: str, expected: int
) -> None:
    env, emb = embed_env
    query = Query(question, emb.encode([question])[0])  # type: ignore[attr-defined]
    result = run_method(env, query, "dense", 2)
    assert result.chunks[0].passage == expected
    assert result.chunks[0].score > result.chunks[1].score
    assert result.chunks[0].score == pytest.approx(
        float(env.snapshot.chunk_vecs[expected] @ query.vec), abs=1e-6
    )


def test_top_indices_orders_best_first_with_index_ties() -> None:
    scores = np.array([0.1, 0.9, 0.5, 0.9, -1.0])
    assert top_indices(scores, 3).tolist() == [1, 3, 2]
    assert top_indices(scores, 10).tolist() == [1, 3, 2, 0, 4]
    assert top_indices(scores, 0).tolist() == []


def _hand_env(bm25: list[tuple[int, float]]) -> tuple[RetrievalEnv, Query]:
    # Four passages on 2-d unit vectors; the query is (1, 0), so dense cos = x-coordinate.
    vecs = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]], dtype=np.float32)
    snap = GraphSnapshot.from_arrays([], [], passages=["p0", "p1", "p2", "p3"], chunk_vecs=vecs)
    env = RetrievalEnv(
        snap, lambda text, k: bm25[:k], lambda texts: np.zeros((len(texts), 2), dtype=np.float32)
    )
    return env, Query("q", np.array([1.0, 0.0], dtype=np.float32))


def test_hybrid_normalises_then_averages() -> None:
    # dense over pool 3: p0 1.0, p1 0.8, p2 0.6 -> min-max: 1.0, 0.5, 0.0 (p3 = 0.0 is outside the pool)
    # bm25: p3 12, p2 7, p1 2 -> min-max: 1.0, 0.5, 0.0
    # HS = (dense + bm25) / 2 (AGRAG Eq. 21): p0 0.5, p1 0.25, p2 0.25, p3 0.5
    env, query = _hand_env([(3, 12.0), (2, 7.0), (1, 2.0)])
    scores = hybrid_chunk_scores(env, query, 3)
    assert scores == pytest.approx({0: 0.5, 1: 0.25, 2: 0.25, 3: 0.5})
    # top_k = 3, pool = max(3, 1 x 3) = 3: ties broken by dense cosine (p0 1.0 > p3 0.0; p1 0.8 > p2 0.6)
    result = hybrid_retrieve(env, query, 3, HybridParams(pool_min=3, pool_factor=1))
    assert [c.passage for c in result.chunks] == [0, 3, 1]
    # top_k = 4 widens the pool to 4: dense min-max becomes p0 1.0, p1 0.8, p2 0.6, p3 0.0, so
    # HS: p0 (1+0)/2 = 0.5, p1 (0.8+0)/2 = 0.4, p2 (0.6+0.5)/2 = 0.55, p3 (0+1)/2 = 0.5
    result = hybrid_retrieve(env, query, 4, HybridParams(pool_min=3, pool_factor=1))
    assert [c.passage for c in result.chunks] == [2, 0, 3, 1]
    assert [c.score for c in result.chunks] == pytest.approx([0.55, 0.5, 0.5, 0.4])


def test_hybrid_without_bm25_hits_is_dense_halved() -> None:
    env, query = _hand_env([])
    assert hybrid_chunk_scores(env, query, 2) == pytest.approx({0: 0.5, 1: 0.0})


def test_hybrid_params_are_validated() -> None:
    env, query = _hand_env([])
    with pytest.raises(ConfigError):
        run_method(env, query, "hybrid", 2, {"pool_min": 0})
    with pytest.raises(ConfigError):
        run_method(env, query, "hybrid", 2, {"nope": 1})


def test_minmax_constant_and_empty() -> None:
    assert minmax(np.array([2.0, 2.0])).tolist() == [1.0, 1.0]
    assert minmax(np.array([])).size == 0


def test_entity_and_triple_seeds() -> None:
    ents = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    rels = np.array([[0.0, 1.0], [0.8, 0.6]], dtype=np.float32)
    snap = GraphSnapshot.from_arrays(
        ["curie", "warsaw", "radium"],
        [(0, 1, "born in"), (0, 2, "discovered")],
        entity_vecs=ents,
        rel_vecs=rels,
    )
    q = np.array([0.8, 0.6], dtype=np.float32)
    # cos: curie 0.8, warsaw 0.6, radium 0.48 + 0.48 = 0.96
    assert [e for e, _ in top_entities(snap, q, 2)] == [2, 0]
    assert top_entities(snap, q, 2)[0][1] == pytest.approx(0.96)
    # triple cos: r0 0.6, r1 1.0
    assert [(r, round(c, 4)) for r, c in top_triples(snap, q, 5)] == [(1, 1.0), (0, 0.6)]


def test_statistical_keywords_match_vocabulary_then_nearest() -> None:
    ents = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]], dtype=np.float32)
    snap = GraphSnapshot.from_arrays(["marie curie", "curie", "warsaw", "radium"], [], entity_vecs=ents)
    q = np.array([0.0, 0.6, 0.8], dtype=np.float32)
    # n-gram matches: "marie curie" (2 words) before "curie"; then nearest by cos: warsaw 0.8 > radium 0.48
    assert statistical_keywords(snap, "Where did Marie Curie live?", q, n=3) == [
        "marie curie",
        "curie",
        "warsaw",
    ]
    assert statistical_keywords(snap, "nothing matches here", q, n=2) == ["warsaw", "curie"]


def test_the_query_vector_is_embedded_only_when_a_method_reads_it() -> None:
    env, given = _hand_env([(3, 12.0), (2, 7.0)])
    calls: list[str] = []

    def embed(text: str) -> np.ndarray:
        calls.append(text)
        return given.vec

    query = Query("q", embed=embed)
    assert [h.passage for h in run_method(env, query, "bm25", 2).chunks] == [3, 2]
    assert calls == []  # BM25 alone never pays for the model
    assert run_method(env, query, "dense", 1).chunks[0].passage == 0
    run_method(env, query, "hybrid", 1)
    assert calls == ["q"]  # embedded once, on first use
    with pytest.raises(ValueError, match="vector"):
        Query("q")
