"""LLM keyword extraction (PathRAG node retrieval, LightRAG's low-/high-level keywords), with a statistical
fallback when no model answers."""

from __future__ import annotations

import numpy as np

from pathweaver.models.llm import LLMBackend, LLMError
from pathweaver.models.schemas import KEYWORDS_SCHEMA, MAX_KEYWORDS
from pathweaver.store.snapshot import GraphSnapshot

KEYWORDS_MAX_TOKENS = 200
KEYWORDS_PROMPT = """Give the keywords of the question as JSON.
"low_level_keywords": specific entities, names and details (at most {n});
"high_level_keywords": overarching concepts or themes (at most {n}).

Question: {question}"""


def _clean(words: list[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        w = " ".join(str(w).replace("_", " ").split())
        if w and w.lower() not in {o.lower() for o in out}:
            out.append(w)
    return out


def llm_keywords(
    question: str,
    llm: LLMBackend,
    snapshot: GraphSnapshot | None = None,
    qvec: np.ndarray | None = None,
    timeout: float = 60.0,
) -> tuple[list[str], list[str]]:
    """(low-level, high-level) keywords from the LLM; on ``LLMError`` the statistical keywords of the snapshot
    (entity names) are the low-level ones and there are no high-level ones."""
    messages = [{"role": "user", "content": KEYWORDS_PROMPT.format(n=MAX_KEYWORDS, question=question)}]
    try:
        result = llm.complete(
            messages, json_schema=KEYWORDS_SCHEMA, max_tokens=KEYWORDS_MAX_TOKENS, timeout=timeout
        )
        low, high = _clean(result.data["low_level_keywords"]), _clean(result.data["high_level_keywords"])
        if low or high:
            return low, high
    except LLMError:
        pass
    if snapshot is None:
        return [], []
    from pathweaver.retrieval.keywords import statistical_keywords

    return statistical_keywords(snapshot, question, qvec), []
