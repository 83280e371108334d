"""Dependency-aware reranking (PankRAG §2.3.1, Eq. 4-5).

Combined score = α·R_i + β·M_i with α + β = 1 (Eq. 5), where R_i is the candidate's retrieval score and M_i its
cosine similarity with the resolved dependency answers (Eq. 4). Reading choices, since the paper leaves them open:
- R_i is min-max normalised to [0, 1] over the candidates: §3.4 says α + β = 1 is there "to ensure the normalized
  score range", which only holds when both terms live in [0, 1];
- with several resolved answers, M_i is the mean of the per-answer cosines (Eq. 4 writes one similarity per
  chunk over the set {sub_i}); negative cosines are clipped to 0 so M_i is in [0, 1] as well.
α defaults per question type (§3.4): 0.6 for specific, 0.75 for abstract questions.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from pathweaver.results import RerankItem

ALPHA = {"specific": 0.6, "abstract": 0.75}  # PankRAG §3.4 / Fig. 3-4

_ABSTRACT = re.compile(
    r"\b(why|how does|how do|how can|how has|how have|explain|describe|discuss|overview|summar\w*|themes?|"
    r"impact|significance|role of|compare|relationship between|implications?|trends?|what are the main)\b",
    re.I,
)


def question_type(question: str) -> str:
    """``abstract`` for conceptual questions (why/how/explain/themes/impact, PankRAG's ACQ), else ``specific``
    (factoid multi-hop, SCQ)."""
    return "abstract" if _ABSTRACT.search(question) else "specific"


def normalise(scores: np.ndarray) -> np.ndarray:
    """Min-max to [0, 1]; all-equal scores become 1."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    if hi - lo <= 1e-12:
        return np.ones_like(scores)
    return (scores - lo) / (hi - lo)


def dependency_scores(cand_vecs: np.ndarray, resolved_vecs: np.ndarray) -> np.ndarray:
    """M_i (Eq. 4): mean cosine of each candidate with the resolved answers, clipped at 0. Vectors are unit rows."""
    cos = np.asarray(cand_vecs, dtype=np.float64) @ np.asarray(resolved_vecs, dtype=np.float64).T
    return np.clip(cos.mean(axis=1), 0.0, 1.0)


def dependency_rerank(
    relevance: np.ndarray, cand_vecs: np.ndarray, resolved_vecs: np.ndarray, alpha: float
) -> np.ndarray:
    """Eq. 5: α·R_i + (1−α)·M_i per candidate. With no resolved answers the (normalised) relevance is returned
    unchanged: the paper reranks only when dependencies exist."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    relevance = np.asarray(relevance, dtype=np.float64)
    if relevance.ndim != 1 or len(cand_vecs) != len(relevance):
        raise ValueError(f"{len(relevance)} relevance scores for {len(cand_vecs)} candidate vectors")
    r = normalise(relevance)
    if resolved_vecs is None or len(resolved_vecs) == 0 or len(relevance) == 0:
        return r
    return alpha * r + (1.0 - alpha) * dependency_scores(cand_vecs, resolved_vecs)


def rerank_texts(
    question: str,
    candidates: list[str],
    resolved: list[str],
    encode: Callable[[list[str]], np.ndarray],
    alpha: float | None = None,
) -> list[RerankItem]:
    """Rerank free-text candidates (the ``rerank`` tool): R_i = cos(question, candidate), M_i against the
    resolved answers; α by question type unless given. Best first, each with its original ``index``."""
    if not candidates:
        return []
    a = ALPHA[question_type(question)] if alpha is None else alpha
    vecs = np.asarray(encode([question, *candidates]))
    relevance = vecs[1:] @ vecs[0]
    resolved = [r for r in resolved if r.strip()]
    res_vecs = np.asarray(encode(resolved)) if resolved else np.zeros((0, vecs.shape[1]))
    dep = dependency_scores(vecs[1:], res_vecs) if resolved else np.zeros(len(candidates))
    scores = dependency_rerank(relevance, vecs[1:], res_vecs, a)
    norm_rel = normalise(relevance)
    order = np.argsort(-scores, kind="stable")
    return [
        RerankItem.model_construct(
            index=int(i),
            text=candidates[i],
            score=float(scores[i]),
            relevance=float(norm_rel[i]),  # R_i as used in Eq. 5 (min-max normalised)
            dependency=float(dep[i]),
        )
        for i in order
    ]
