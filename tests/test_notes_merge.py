"""Results per note: chunks of one note never crowd others out of the top k; the best chunk stands for its note
and the JSON names the chunks merged into it, for every method, ``search`` and the tools' shared shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from pathweaver.extractive import extractive_answer
from pathweaver.retrieval.context import build_context
from pathweaver.retrieval.notes import first_per_key, merge_by_note
from pathweaver.retrieval.types import ChunkHit, RetrievalResult
from pathweaver.service import Pathweaver

LONG = " ".join(f"Harbour fact {i}: the harbour pilots of Kestrel Bay guide ships past the reef at dawn." for i in
                range(16))
# the pilot boat's colour sits in the note's last chunk, below chunks that match the question's other words better
PILOT_BOAT = ("# Pilot boat\n\n" + " ".join(
    f"The Kestrel Bay pilot boat, fact {i}: the pilot boat takes the Kestrel Bay pilots out to ships." for i in range(6))
    + "\n\nLast spring the crew repainted it bright orange, so that ships can see it in fog.\n")
OTHERS = {
    "pilot boat.md": PILOT_BOAT,
    "reef.md": "# Reef\n\nThe reef off Kestrel Bay wrecked ships before the harbour pilots came.\n",
    "lighthouse.md": "# Lighthouse\n\nThe lighthouse of Kestrel Bay warns ships of the reef at night.\n",
    "bakery.md": "# Bakery\n\nThe bakery sells rye bread on Saturdays.\n",
}


def test_merge_by_note_keeps_each_notes_best_chunk() -> None:
    docs = ["a", "a", "b", "a", "c"]
    hits = [ChunkHit(0, 0.9), ChunkHit(1, 0.8), ChunkHit(2, 0.7), ChunkHit(3, 0.6), ChunkHit(4, 0.5)]
    merged = merge_by_note(hits, docs, 2)
    assert [(h.passage, h.score, h.merged) for h in merged] == [(0, 0.9, [1, 3]), (2, 0.7, [])]
    assert first_per_key([3, 5, 4, 7], lambda n: n % 2, 5) == [(3, [5, 7]), (4, [])]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Pathweaver:
    root = tmp_path_factory.mktemp("merge")
    notes = root / "notes"
    notes.mkdir()
    (notes / "harbour.md").write_text(f"# Harbour pilots\n\n{LONG}\n", "utf-8")
    for name, text in OTHERS.items():
        (notes / name).write_text(text, "utf-8")
    for i, topic in enumerate(["tulips", "violins", "granite", "comets", "owls", "tea", "chess", "glaciers",
                               "looms", "saffron", "kites", "coral", "ferns", "anvils"]):
        (notes / f"topic{i}.md").write_text(f"# {topic.title()}\n\nA short note about {topic}.\n", "utf-8")
    (notes / "cartography.md").write_text('---\ntitle: "Nautical cartography"\ndate: 2024-01-01\n---\n', "utf-8")
    pw = Pathweaver.open(root / "store", overrides={"models": {"llm_backend": "none"},
                                                    "ingest": {"chunk_tokens": 48, "chunk_overlap": 0}})
    pw.index([notes])
    yield pw
    pw.close()


@pytest.mark.parametrize("method", ["dense", "bm25", "hybrid", "ppr", "pathrag", "mcmi"])
def test_every_method_returns_distinct_notes(service: Pathweaver, method: str) -> None:
    harbour_chunks = [c["chunk_id"] for c in service.reader.document_chunks(
        next(d["path"] for d in service.reader.documents() if d["path"].endswith("harbour.md")))]
    assert len(harbour_chunks) > 5  # enough to fill every slot alone
    out = service.retrieve_json("Who guides ships past the reef of Kestrel Bay?", method=method, top_k=3)
    docs = [Path(c["doc"]).name for c in out["chunks"]]
    assert len(docs) == len(set(docs)) == 3, docs
    harbour = next(c for c in out["chunks"] if c["doc"].endswith("harbour.md"))
    assert harbour["merged_chunks"] and set(harbour["merged_chunks"]) <= set(harbour_chunks)
    assert harbour["chunk_id"] not in harbour["merged_chunks"]
    assert all(c["merged_chunks"] == [] for c in out["chunks"] if not c["doc"].endswith(("harbour.md", "boat.md")))


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_search_returns_distinct_notes(service: Pathweaver, mode: str) -> None:
    hits = service.search("harbour pilots guide ships past the reef", mode=mode, k=3)
    docs = [Path(c["doc"]).name for c in hits]
    assert len(docs) == len(set(docs)) and "harbour.md" in docs
    assert next(c for c in hits if c["doc"].endswith("harbour.md"))["merged_chunks"]


def test_fewer_relevant_notes_than_k(service: Pathweaver) -> None:
    hits = service.search("Where is the lighthouse, and who sells bread?", mode="bm25", k=5)
    assert sorted(Path(c["doc"]).name for c in hits) == ["bakery.md", "lighthouse.md"]  # no other holds the words


def test_a_stub_note_is_found_by_its_title_and_cited_there(service: Pathweaver) -> None:
    """A note of front matter alone (a title to fill in later) is a note all the same: its title finds it, and the
    citation points at the title in the file."""
    result = service.retrieve("nautical cartography", method="hybrid", top_k=3)
    snap = service.snapshot()
    best = result.chunks[0].passage
    assert Path(snap.chunk_docs[best]).name == "cartography.md"
    hits = service.search("nautical cartography", k=1)
    start, end = hits[0]["span"]
    assert Path(hits[0]["doc"]).read_text("utf-8")[start:end] == "Nautical cartography"


def test_an_answer_without_a_model_reads_the_notes_other_retrieved_chunks(service: Pathweaver) -> None:
    snap = service.snapshot()
    boat = [p for p in range(snap.n_passages) if snap.chunk_docs[p].endswith("pilot boat.md")]
    assert len(boat) > 2
    # the note's first chunk stands for it, its last (the colour) was merged into it
    result = RetrievalResult(method="ppr", chunks=[ChunkHit(boat[0], 1.0, merged=[boat[-1]])])
    alone = build_context(snap, result, "chunks", max_items=1)
    assert [i.passage for i in alone.items] == [boat[0]]  # a model's prompt keeps the best chunk only
    context = build_context(snap, result, "chunks", max_items=1, merged=True)
    assert [(i.n, i.passage) for i in context.items] == [(1, boat[0]), (2, boat[-1])]
    env = service.env(snap)
    answer = extractive_answer("What colour was the pilot boat repainted?", context, env.encode,
                               word_df=env.word_df, n_docs=snap.n_passages)
    # the sentence is cited to the chunk that holds it, with that chunk's own span
    assert answer.supported and [ns for text, ns in answer.parts if "bright orange" in text] == [(2,)], answer
    assert context.items[1].span == tuple(int(x) for x in snap.chunk_spans[boat[-1]]) != context.items[0].span
