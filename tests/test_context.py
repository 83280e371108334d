"""Context layouts and citations on a hand-built snapshot: every [n] maps to file, chunk id and span."""

from __future__ import annotations

import numpy as np
import pytest

from pathweaver.retrieval.context import build_context, layout_for, sentences
from pathweaver.retrieval.types import ChunkHit, PathHit, RetrievalResult, Subgraph
from pathweaver.store.snapshot import GraphSnapshot

PASSAGES = [
    "Jaws is a 1975 film directed by Steven Spielberg. It is set on Amity Island.",
    "Steven Spielberg married Kate Capshaw in 1991.",
    "Sharks live in every ocean.",
]


def snapshot() -> GraphSnapshot:
    snap = GraphSnapshot.from_arrays(
        entities=["Jaws", "Steven Spielberg", "Kate Capshaw", "Amity Island"],
        relations=[(0, 1, "directed by"), (1, 2, "married to"), (0, 3, "set on")],
        passages=PASSAGES,
        mentions=[(0, 0, 1), (0, 1, 1), (0, 3, 1), (1, 1, 1), (1, 2, 1)],
        relation_chunks=[(0, 0), (1, 1), (2, 0)],
    )
    snap.chunk_docs = ["films/jaws.md", "people/spielberg.md", "nature/sharks.txt"]
    snap.chunk_titles = ["Jaws", "Spielberg", "Sharks"]
    snap.chunk_spans = np.array([[120, 196], [0, 46], [10, 37]], dtype=np.int64)
    return snap


def test_chunks_layout_and_citation_mapping() -> None:
    snap = snapshot()
    ctx = build_context(snap, RetrievalResult("dense", [ChunkHit(1, 0.9), ChunkHit(0, 0.4)]))
    assert [c["chunk_id"] for c in ctx.citations] == [2, 1]
    assert ctx.citations[0] == {
        "n": 1,
        "doc": "people/spielberg.md",
        "title": "Spielberg",
        "chunk_id": 2,
        "span": [0, 46],
    }
    assert ctx.citations[1]["span"] == [120, 196] and ctx.citations[1]["doc"] == "films/jaws.md"
    assert ctx.text.splitlines()[1] == "[1] Spielberg: Steven Spielberg married Kate Capshaw in 1991."
    assert ctx.items[1].n == 2 and ctx.items[1].span == (120, 196)


def test_pathrag_layout_question_first_best_path_last() -> None:
    snap = snapshot()
    paths = [
        PathHit(
            [0, 1, 2], [0, 1], 0.8, "Jaws -directed by-> Steven Spielberg -married to-> Kate Capshaw", [0, 1]
        ),
        PathHit([0, 3], [2], 0.3, "Jaws -set on-> Amity Island", [0]),
    ]
    result = RetrievalResult("pathrag", [ChunkHit(1, 0.9)], paths=paths)
    ctx = build_context(snap, result, question="Who is married to the director of Jaws?")
    assert layout_for("pathrag") == "pathrag"
    lines = ctx.text.splitlines()
    assert lines[0] == "Question: Who is married to the director of Jaws?"
    assert lines[-2] == "[2] Jaws -set on-> Amity Island"
    assert lines[-1] == "[2][1] Jaws -directed by-> Steven Spielberg -married to-> Kate Capshaw"  # best last
    path_items = [i for i in ctx.items if i.kind == "path"]
    assert [i.cites for i in path_items] == [[2], [2, 1]]
    assert {c["n"]: c["chunk_id"] for c in ctx.citations} == {1: 2, 2: 1}


def test_pooling_layout_merges_chained_triples() -> None:
    snap = snapshot()
    result = RetrievalResult("pooling", [], triples=[2, 0, 1])  # prompt order, best last
    ctx = build_context(snap, result)
    triples = [i.text for i in ctx.items if i.kind == "triple"]
    assert triples == [
        "Jaws -set on-> Amity Island",
        "Jaws -directed by-> Steven Spielberg -married to-> Kate Capshaw",
    ]
    assert ctx.items[-1].cites == [1, 2]  # chunks supporting 'directed by' (p0) and 'married to' (p1)
    assert [c["chunk_id"] for c in ctx.citations] == [1, 2]


def test_agrag_layout_subgraph_then_hybrid_chunks() -> None:
    snap = snapshot()
    sub = Subgraph(
        nodes=["Jaws", "Steven Spielberg", "Kate Capshaw"],
        edges=[("Jaws", "Steven Spielberg", 0.1)],
        text="Jaws directed by Steven Spielberg; Steven Spielberg married to Kate Capshaw",
    )
    result = RetrievalResult("mcmi", [ChunkHit(2, 0.5), ChunkHit(1, 0.3)], subgraph=sub, triples=[0, 1])
    ctx = build_context(snap, result)
    assert ctx.text.startswith("Reasoning subgraph:\n[1][2] Jaws directed by")
    assert "Hybrid-retrieved chunks:\n[3] Sharks: Sharks live in every ocean.\n[2] Spielberg:" in ctx.text
    assert [c["doc"] for c in ctx.citations] == ["films/jaws.md", "people/spielberg.md", "nature/sharks.txt"]


def test_bad_layout_and_sentences() -> None:
    with pytest.raises(ValueError, match="unknown context layout"):
        build_context(snapshot(), RetrievalResult("dense", []), layout="poem")
    text = PASSAGES[0]
    assert [text[a:b] for a, b in sentences(text)] == [
        "Jaws is a 1975 film directed by Steven Spielberg.",
        "It is set on Amity Island.",
    ]
