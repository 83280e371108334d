"""A retrieval result as the JSON the CLI and the tools return (``results.RetrievalOut``), and plain JSON values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pathweaver.results import (
    ChunkOut,
    Citation,
    MethodOut,
    PathOut,
    RetrievalOut,
    SubgraphOut,
    TripleOut,
    dump,
)
from pathweaver.retrieval.registry import method_block
from pathweaver.retrieval.types import NAME_EDGE, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot


def shape_result(result: RetrievalResult, snap: GraphSnapshot, descriptions: bool = True) -> dict[str, Any]:
    """JSON-ready result of the shape ``results.RetrievalOut``: chunks with doc/title/chunk_id/score/text/span,
    paths with citations, subgraph, and triples with their source sentence as ``description`` (left out unless
    ``descriptions``)."""
    paths = [
        PathOut.model_construct(
            text=path.text,
            nodes=[snap.entity_names[n] for n in path.nodes],
            relations=[snap.rel_labels[r] if r >= 0 else "mentions" if r == NAME_EDGE else "synonym of"
                       for r in path.relations],
            relation_ids=[int(snap.rel_ids[r]) if r >= 0 else None for r in path.relations],
            reliability=float(path.reliability),
            citations=[Citation.model_construct(**snap.citation(p)) for p in path.passages],
        )
        for path in result.paths
    ]
    subgraph = None
    if result.subgraph is not None:
        made = result.subgraph.to_json()
        subgraph = SubgraphOut.model_construct(**{**made, "edges": [tuple(e) for e in made["edges"]]})
    triples = [
        TripleOut.model_construct(id=int(snap.rel_ids[r]), text=snap.triple_text(r),
                                  **({"description": snap.rel_descriptions[r]} if descriptions else {}))
        for r in result.triples
    ]
    info = {k: v for k, v in result.info.items() if k not in ("seconds", "params", "preset")}
    info["backfill_share"] = result.backfill_share()
    block = method_block(result.method, str(result.info.get("preset", "default")),
                         jsonable(result.info.get("params", {})))
    return dump(RetrievalOut.model_construct(
        method=MethodOut.model_construct(**block),
        chunks=[chunk_out(snap, hit.passage, hit.score, hit.merged) for hit in result.chunks],
        paths=paths,
        subgraph=subgraph,
        triples=triples,
        info=jsonable(info),
        seconds=float(result.info.get("seconds", 0.0)),
    ))


def chunk_out(snap: GraphSnapshot, passage: int, score: float, merged: list[int] | None = None) -> ChunkOut:
    """Passage ``passage`` of ``snap`` as a scored chunk with its citation and the chunk ids of the same note's
    passages ``merged`` into it."""
    return ChunkOut.model_construct(**snap.citation(passage), score=float(score), text=snap.chunk_texts[passage],
                                    merged_chunks=[int(snap.chunk_ids[p]) for p in merged or ()])


def jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays and tuples inside ``value`` to plain JSON types."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value
