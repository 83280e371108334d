"""Dependency-aware reranking, PankRAG Eq. 4-5, on hand-worked values and on real embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from pathweaver.planner.rerank import (
    ALPHA,
    dependency_rerank,
    dependency_scores,
    normalise,
    question_type,
    rerank_texts,
)


def test_eq5_hand_values() -> None:
    relevance = np.array([2.0, 1.0, 0.0])  # min-max -> R = [1, 0.5, 0]
    cands = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    resolved = np.array([[0.0, 1.0]])  # M = [0, 0.8, 1]
    got = dependency_rerank(relevance, cands, resolved, alpha=0.6)
    # 0.6*R + 0.4*M = [0.6, 0.30 + 0.32, 0.4]
    assert got == pytest.approx([0.6, 0.62, 0.4])
    assert int(np.argmax(got)) == 1  # the candidate agreeing with the resolved answer moves to the top


def test_eq4_mean_over_resolved_and_clip() -> None:
    cands = np.array([[1.0, 0.0], [-1.0, 0.0]])
    resolved = np.array([[1.0, 0.0], [0.0, 1.0]])  # cosines: [1, 0] and [-1, 0]
    assert dependency_scores(cands, resolved) == pytest.approx([0.5, 0.0])  # mean 0.5; mean -0.5 clipped to 0


def test_no_resolved_keeps_relevance_order() -> None:
    got = dependency_rerank(np.array([3.0, 5.0]), np.eye(2), np.zeros((0, 2)), alpha=0.6)
    assert got == pytest.approx([0.0, 1.0])
    assert normalise(np.array([4.0, 4.0])) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="alpha"):
        dependency_rerank(np.array([1.0]), np.eye(1), np.eye(1), alpha=1.5)


def test_question_type_and_alpha() -> None:
    assert question_type("Who is the spouse of the director of Jaws?") == "specific"
    assert question_type("Why did the Curies' work change medicine?") == "abstract"
    assert ALPHA == {"specific": 0.6, "abstract": 0.75}


def test_rerank_with_real_embeddings() -> None:
    from pathweaver.models.embedder import get_embedder

    enc = get_embedder().encode
    chunks = [
        "Jaws is a 1975 thriller film.",
        "Steven Spielberg married the actress Kate Capshaw in 1991.",
        "Sharks are found in all oceans.",
    ]
    cands = enc(chunks)
    resolved = enc(["Steven Spielberg"])
    relevance = np.array([0.60, 0.58, 0.20])  # retrieval put the film chunk first
    got = dependency_rerank(relevance, cands, resolved, alpha=ALPHA["specific"])
    assert int(np.argmax(got)) == 1


def test_rerank_texts_for_the_tool() -> None:
    from pathweaver.models.embedder import get_embedder

    enc = get_embedder().encode
    cands = ["Kate Capshaw starred in a 1984 film.", "Steven Spielberg married Kate Capshaw in 1991."]
    out = rerank_texts("Who is the spouse of #1?", cands, ["Steven Spielberg"], enc)
    assert out[0].index == 1 and out[0].dependency > out[1].dependency
    assert out[0].score == pytest.approx(0.6 * 1.0 + 0.4 * out[0].dependency)  # R normalised: best = 1
    plain = rerank_texts("Who married Kate Capshaw?", cands, [], enc)
    assert plain[0].dependency == 0.0 and {r.index for r in plain} == {0, 1}
