"""Top-k set selection over a ranked passage list (ours, issue 23): a document's passages share their slots, and
a passage the chosen ones link to comes before one they do not.

A walk ranks each passage on its own. Multi-hop evidence is a set: every hop's passage must be among the k, and
the hops are joined by names (one passage mentions what the next is about, or both write the same person). Two
things fill the slots instead: the other passages of a chosen document, which link to each other through their
common title and share the question's reset mass (MuSiQue's six "Richard Feynman" paragraphs before "Manhattan
Project", the bridge's other end), and passages that resemble the question but join no chosen passage. Greedy
selection in the spirit of MMR (Carbonell and Goldstein, 1998), taken multiplicatively so that it needs no score
scale: a candidate's value is its score × ``decay`` ^ (passages of its document already chosen), × ``unlinked``
when no chosen passage links to it in the walk's own graph (a name link, or a proper name both write). Both
factors at 1 give the plain ranking.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pathweaver.retrieval.graphs import has_names, name_link_matrix, proper_mention_matrix
from pathweaver.store.snapshot import GraphSnapshot


def document_keys(snapshot: GraphSnapshot, passages: Sequence[int]) -> list[str]:
    """Which document each passage belongs to: its document's title (case-folded), else its document's path."""
    titles = snapshot.chunk_titles
    keys = []
    for p in passages:
        title = titles[p].strip().casefold() if p < len(titles) else ""
        keys.append(title or snapshot.chunk_docs[p])
    return keys


def passage_links(snapshot: GraphSnapshot, passages: np.ndarray, name_links: bool, proper_names: bool
                  ) -> np.ndarray:
    """(n, n) bool: which of ``passages`` the walk's graph joins directly or through one proper-name node: a name
    link (one mentions a name tied to the other's document) when ``name_links``, a proper name both write when
    ``proper_names``. A store without a name layer links none."""
    n = passages.shape[0]
    linked = np.zeros((n, n), dtype=bool)
    if n == 0 or not has_names(snapshot):
        return linked
    if name_links:
        linked |= name_link_matrix(snapshot)[passages][:, passages].toarray() > 0
    if proper_names:
        rows = proper_mention_matrix(snapshot)[passages]
        linked |= (rows @ rows.T).toarray() > 0
    np.fill_diagonal(linked, False)
    return linked


def select_passages(candidates: np.ndarray, scores: np.ndarray, k: int, keys: Sequence[str] | None = None,
                    decay: float = 1.0, links: np.ndarray | None = None, unlinked: float = 1.0) -> np.ndarray:
    """``k`` of the ``candidates`` (passage indices, best first, with their ``scores``), chosen greedily: each step
    takes the best score × ``decay`` ^ (chosen candidates with the same ``keys`` entry) × ``unlinked`` when
    ``links`` (candidates × candidates) joins it to no chosen candidate; ties keep the candidates' order."""
    n = min(candidates.shape[0], scores.shape[0])
    if (decay >= 1.0 or keys is None) and (unlinked >= 1.0 or links is None):
        return candidates[:max(min(k, n), 0)].astype(np.int64)
    base = scores[:n].astype(np.float64)
    same = np.zeros(n)  # chosen candidates of each candidate's document
    joined = np.zeros(n, dtype=bool)  # some chosen candidate links to it
    taken = np.zeros(n, dtype=bool)
    chosen: list[int] = []
    for _ in range(max(min(k, n), 0)):
        value = base * np.power(decay, same)
        if chosen and links is not None:
            value = np.where(joined, value, value * unlinked)
        best = int(np.argmax(np.where(taken, -np.inf, value)))
        chosen.append(int(candidates[best]))
        taken[best] = True
        if keys is not None:
            same += np.array([key == keys[best] for key in keys[:n]], dtype=np.float64)
        if links is not None:
            joined |= links[best, :n]
    return np.asarray(chosen, dtype=np.int64)
