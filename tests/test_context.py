"""Context layouts and citations on a hand-built snapshot: every [n] maps to file, chunk id and span."""

from __future__ import annotations

import numpy as np
import pytest

from pathweaver.retrieval.context import Context, build_context, layout_for, sentences
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


def test_chunks_and_paths_have_their_own_caps() -> None:
    """``max_items`` caps the chunks, ``max_derived`` the paths (by default the paths take ``max_items`` too)."""
    snap = snapshot()
    paths = [PathHit([0, 3], [2], 0.3, "Jaws -set on-> Amity Island", [0]),
             PathHit([0, 1], [0], 0.8, "Jaws -directed by-> Steven Spielberg", [0])]
    result = RetrievalResult("pathrag", [ChunkHit(1, 0.9), ChunkHit(2, 0.5)], paths=paths)

    def kinds(ctx: Context) -> list[str]:
        return [i.text if i.kind == "path" else i.kind for i in ctx.items]

    assert kinds(build_context(snap, result, max_items=1)) == ["chunk", "Jaws -directed by-> Steven Spielberg"]
    assert kinds(build_context(snap, result, max_items=1, max_derived=2)) == [
        "chunk", "Jaws -set on-> Amity Island", "Jaws -directed by-> Steven Spielberg"]
    assert kinds(build_context(snap, result, max_items=2, max_derived=1)) == [
        "chunk", "chunk", "Jaws -directed by-> Steven Spielberg"]
    with pytest.raises(ValueError, match="max_derived"):
        build_context(snap, result, max_derived=0)


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


# -- truncation keeps the best items, then orders them as the paper says ------------------------------------
FACTS = [f"Fact {i} is about thing {i}." for i in range(6)]


def wide_snapshot() -> GraphSnapshot:
    """Six unconnected triples t0..t5 (no two chain, so pooling lines stay one triple each), one passage each."""
    names = [f"E{i}" for i in range(12)]
    snap = GraphSnapshot.from_arrays(
        entities=names,
        relations=[(2 * i, 2 * i + 1, f"r{i}") for i in range(6)],
        passages=FACTS,
        mentions=[(i, 2 * i, 1) for i in range(6)],
        relation_chunks=[(i, i) for i in range(6)],
    )
    snap.chunk_docs = [f"notes/f{i}.md" for i in range(6)]
    return snap


def _paths(scores: list[float]) -> list[PathHit]:
    return [PathHit([2 * i, 2 * i + 1], [i], s, f"path {i}", [i]) for i, s in enumerate(scores)]


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_pathrag_truncation_keeps_the_most_reliable_paths_best_last(order: str) -> None:
    scores = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    paths = _paths(scores)
    if order == "descending":
        paths = paths[::-1]
    result = RetrievalResult("pathrag", [], paths=paths)
    ctx = build_context(wide_snapshot(), result, max_items=3, question="q?")
    assert [i.text for i in ctx.items if i.kind == "path"] == ["path 3", "path 4", "path 5"]
    assert ctx.text.splitlines()[-1].endswith("path 5")  # the most reliable path sits last (Eq. 6)


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_pooling_truncation_keeps_the_highest_pooled_triples_best_last(order: str) -> None:
    scores = {r: 0.1 * (r + 1) for r in range(6)}  # t5 is the best triple
    triples = list(range(6)) if order == "ascending" else list(range(5, -1, -1))
    result = RetrievalResult("pooling", [], triples=triples, triple_scores=scores)
    ctx = build_context(wide_snapshot(), result, max_items=2)
    assert [i.text for i in ctx.items if i.kind == "triple"] == ["E8 -r4-> E9", "E10 -r5-> E11"]


def test_pooling_without_scores_keeps_the_tail_of_the_prompt_order() -> None:
    result = RetrievalResult("pooling", [], triples=[0, 1, 2, 3])  # prompt order: best last
    ctx = build_context(wide_snapshot(), result, max_items=2)
    assert [i.text for i in ctx.items if i.kind == "triple"] == ["E4 -r2-> E5", "E6 -r3-> E7"]


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_mcmi_truncation_keeps_the_highest_scored_chunks_best_first(order: str) -> None:
    hits = [ChunkHit(p, 0.1 * (p + 1)) for p in range(6)]  # passage 5 scores highest
    if order == "descending":
        hits = hits[::-1]
    sub = Subgraph(nodes=["E0", "E1"], edges=[("E0", "E1", 0.2)], text="E0 r0 E1")
    result = RetrievalResult("mcmi", hits, subgraph=sub, triples=[0])
    ctx = build_context(wide_snapshot(), result, max_items=3)
    assert [i.passage for i in ctx.items if i.kind == "chunk"] == [5, 4, 3]
    assert ctx.items[0].kind == "subgraph"


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_pathrag_truncation_keeps_the_best_supporting_chunks(order: str) -> None:
    hits = [ChunkHit(p, 0.1 * (p + 1)) for p in range(6)]
    if order == "descending":
        hits = hits[::-1]
    result = RetrievalResult("pathrag", hits, paths=_paths([0.5, 0.4]))
    ctx = build_context(wide_snapshot(), result, max_items=2, question="q?")
    assert [i.passage for i in ctx.items if i.kind == "chunk"] == [5, 4]
    assert [i.text for i in ctx.items if i.kind == "path"] == ["path 1", "path 0"]
