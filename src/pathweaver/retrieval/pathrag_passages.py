"""PathRAG's passages (ours: the paper serves paths as text): the passages of the retrieved paths by their best
path's reliability, and the retrieved nodes' own text units taking turns with them (``pathrag.py``)."""

from __future__ import annotations

import numpy as np

from pathweaver.numeric.projection import top_indices
from pathweaver.retrieval.namegraph import passages_of
from pathweaver.retrieval.types import ChunkHit, PathHit, take_turns
from pathweaver.store.snapshot import GraphSnapshot


def rank_chunks(snapshot: GraphSnapshot, paths: list[PathHit], dense: np.ndarray, top_k: int) -> list[ChunkHit]:
    """Passages of ``paths`` by best path reliability (ties: dense cosine), filled with dense hits (back-fill)."""
    best: dict[int, float] = {}
    for hit in paths:
        for p in hit.passages:
            best[p] = max(best.get(p, 0.0), hit.reliability)
    order = sorted(best, key=lambda p: (-best[p], -float(dense[p]) if dense.size else 0.0, p))
    chunks = [ChunkHit(p, best[p]) for p in order[:top_k]]
    if len(chunks) < top_k and dense.size:
        for p in top_indices(dense, top_k + len(chunks)).tolist():
            if p not in best:
                chunks.append(ChunkHit(p, 0.0, backfill=True))
            if len(chunks) >= top_k:
                break
    return chunks


def node_text_units(snapshot: GraphSnapshot, nodes: list[int], dense: np.ndarray, per_node: int) -> list[int]:
    """The text units of ``nodes`` in node order: each node's ``per_node`` own passages nearest the query."""
    out: list[int] = []
    for node in nodes:
        own = sorted(passages_of(snapshot, node), key=lambda p: (-float(dense[p]), p))
        out += [p for p in own[:per_node] if p not in out]
    return out


def with_text_units(chunks: list[ChunkHit], units: list[int], top_k: int) -> list[ChunkHit]:
    """Path passages and node text units taking turns (a path passage first), each passage once; back-filled
    chunks come last, after both."""
    found = [c for c in chunks if not c.backfill]
    return take_turns(found, [ChunkHit(p, 0.0) for p in units], top_k, then=[c for c in chunks if c.backfill])
