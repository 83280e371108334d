"""Top-k set selection over a ranked passage list: a document's passages share their slots (ours, issue 23).

A walk ranks each passage on its own, so the passages of one document, which link to each other through their
common title and share the question's reset mass, can take every slot (MuSiQue's six "Richard Feynman"
paragraphs before "Manhattan Project", the bridge's other end). Greedy selection in the spirit of MMR (Carbonell
and Goldstein, 1998) with a similarity of 1 between passages of one document and 0 otherwise, taken
multiplicatively so that it needs no score scale: a candidate's value is its score × ``decay`` ^ (passages of its
document already chosen). ``decay`` 1 is the plain ranking; 0 gives every document one slot before any gets a
second.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pathweaver.numeric.projection import top_indices
from pathweaver.store.snapshot import GraphSnapshot


def document_keys(snapshot: GraphSnapshot, passages: Sequence[int]) -> list[str]:
    """Which document each passage belongs to: its document's title (case-folded), else its document's path."""
    titles = snapshot.chunk_titles
    keys = []
    for p in passages:
        title = titles[p].strip().casefold() if p < len(titles) else ""
        keys.append(title or snapshot.chunk_docs[p])
    return keys


def select_passages(snapshot: GraphSnapshot, scores: np.ndarray, k: int, decay: float, pool: int) -> np.ndarray:
    """The ``k`` passages chosen greedily among the ``pool`` best by ``scores`` (at least ``k``), each step taking
    the best score × ``decay`` ^ (chosen passages of the same document); ties keep the ranking's order."""
    if k <= 0 or scores.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    ranked = top_indices(scores, max(k, pool))
    if decay >= 1.0:
        return ranked[:k]
    keys = document_keys(snapshot, ranked.tolist())
    value = scores[ranked].astype(np.float64)
    chosen: list[int] = []
    taken = np.zeros(ranked.shape[0], dtype=bool)
    for _ in range(min(k, ranked.shape[0])):
        best = int(np.argmax(np.where(taken, -np.inf, value)))
        chosen.append(int(ranked[best]))
        taken[best] = True
        same = np.array([key == keys[best] for key in keys])
        value[same] *= decay
    return np.asarray(chosen, dtype=np.int64)
