"""In-memory BM25 postings: FTS5's own scores on a fresh store, and after deletions the scores of a fresh index of
the files that are left (FTS5's contentless-delete table keeps counting deleted rows in N and avgdl)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from pathweaver.service import Pathweaver
from pathweaver.store import bm25
from pathweaver.store.bm25 import query_terms

CORPUS = Path(__file__).parent / "corpus"
QUESTIONS = [
    "Where was the discoverer of polonium born?",
    "Who married Pierre Curie, and who did Marie marry?",  # married / marry: one stem, two phrases
    "Which river flows through Warsaw to the Baltic?",
    "the of and a in",  # stopwords only
    "zyzzyva quux",  # in no chunk
    "Röntgen's rays; radium (Ra) & 'polonium'!",
]


@pytest.fixture()
def store(tmp_path: Path) -> tuple[Path, Pathweaver]:
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    pw = Pathweaver.open(tmp_path / "store", overrides={"models": {"llm_backend": "none"}})
    pw.index([notes])
    yield notes, pw
    pw.close()


def by_place(pw: Pathweaver, hits: list[tuple[int, float]]) -> list[tuple[str, int, float]]:
    """Hits as (file name, chunk start, score): comparable across stores, whose chunk ids differ."""
    out = []
    for chunk_id, score in hits:
        card = pw.reader.chunk(chunk_id)
        assert card is not None
        out.append((Path(card["doc"]).name, card["span"][0], score))
    return out


def test_fresh_store_scores_equal_fts5(store: tuple[Path, Pathweaver]) -> None:
    _, pw = store
    index = pw.reader.bm25_index(pw.reader.db.version())
    assert index is not None and index.n_rows == pw.reader.stats()["chunks"]
    for question in QUESTIONS:
        for k in (1, 3, 50):
            assert pw.reader.bm25_chunks(question, k, index) == pw.reader.bm25_chunks(question, k), question
    assert pw.reader.bm25_chunks(QUESTIONS[0], 5, index)  # something to compare
    assert pw.reader.bm25_chunks("zyzzyva quux", 5, index) == []


def test_after_a_delete_the_scores_are_a_fresh_index_of_what_is_left(store: tuple[Path, Pathweaver],
                                                                      tmp_path: Path) -> None:
    notes, pw = store
    (notes / "radium.md").unlink()
    (notes / "warsaw.md").write_text((notes / "warsaw.md").read_text() + "\n\nWarsaw hosts a radium institute.\n")
    pw.index([notes])
    index = pw.reader.bm25_index(pw.reader.db.version())
    assert index is not None and index.n_rows == pw.reader.stats()["chunks"]
    fresh_notes = tmp_path / "fresh"
    shutil.copytree(notes, fresh_notes)
    with Pathweaver.open(tmp_path / "fresh-store", overrides={"models": {"llm_backend": "none"}}) as fresh:
        fresh.index([fresh_notes])
        fresh_index = fresh.reader.bm25_index(fresh.reader.db.version())
        assert fresh_index is not None
        for question in QUESTIONS:
            ours = by_place(pw, pw.reader.bm25_chunks(question, 50, index))
            assert ours == by_place(fresh, fresh.reader.bm25_chunks(question, 50, fresh_index)), question
            assert ours == by_place(fresh, fresh.reader.bm25_chunks(question, 50)), question  # FTS5, no deletes


def test_query_terms_are_fts5s_own(store: tuple[Path, Pathweaver]) -> None:
    _, pw = store
    conn = pw.reader.db.conn
    assert query_terms(conn, ["married", "marry", "röntgen", "rays"]) == ["marri", "marri", "rontgen", "rai"]
    assert query_terms(conn, ["two words"]) is None  # one phrase, two terms: FTS5 answers instead
    assert query_terms(conn, []) == []


def test_the_service_builds_the_postings_off_the_query_path(store: tuple[Path, Pathweaver]) -> None:
    notes, pw = store
    snap = pw.snapshot()
    index = pw.bm25_index(snap, wait=True)
    assert index is not None and index.version == snap.version
    assert pw.bm25_index(snap) is index  # built once per snapshot
    env = pw.env(snap)
    hits = env.bm25_chunks(QUESTIONS[0], 5)
    assert [snap.chunk_ids[p] for p, _ in hits] == [c for c, _ in pw.reader.bm25_chunks(QUESTIONS[0], 5)]
    (notes / "vistula.txt").unlink()
    pw.index([notes])  # the store moves past ``snap``: its postings could no longer be read
    assert pw.reader.bm25_index(snap.version) is None
    newer = pw.snapshot()
    assert newer.version > snap.version and pw.bm25_index(newer, wait=True).version == newer.version


def test_bm25_search_uses_the_postings_only_while_they_are_current(store: tuple[Path, Pathweaver]) -> None:
    notes, pw = store
    snap = pw.snapshot()
    pw.bm25_index(snap, wait=True)
    before = pw.search("polonium radium", mode="bm25", k=3)
    assert [h["chunk_id"] for h in before] == [c for c, _ in pw.reader.bm25_chunks("polonium radium", 3)]
    (notes / "zanzibar.md").write_text("# Zanzibar\n\nZanzibar clove merchants traded saffron.\n")
    pw.index([notes])  # committed; the snapshot and its postings are now one version behind
    found = pw.search("zanzibar saffron", mode="bm25", k=3)
    assert found and Path(found[0]["doc"]).name == "zanzibar.md"


def test_a_store_over_the_postings_cap_ranks_from_its_postings_table(store: tuple[Path, Pathweaver],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pathweaver.store import bm25
    from pathweaver.store.bm25_terms import Bm25Lengths

    notes, pw = store
    monkeypatch.setattr(bm25, "MAX_POSTINGS", 10)
    assert pw.reader.bm25_index(pw.reader.db.version()) is None  # past the cap, its postings not kept yet: FTS5's
    (notes / "zanzibar.md").write_text("# Zanzibar\n\nZanzibar clove merchants traded saffron.\n")
    pw.index([notes])  # the run that leaves it past the cap keeps them (``bm25_terms.keep_postings``)
    assert isinstance(pw.reader.bm25_index(pw.reader.db.version()), Bm25Lengths)
    snap = pw.snapshot()
    assert isinstance(pw.bm25_index(snap, wait=True), Bm25Lengths)
    hits = pw.env(snap).bm25_chunks(QUESTIONS[0], 5)
    assert [snap.chunk_ids[p] for p, _ in hits] == [c for c, _ in pw.reader.bm25_chunks(QUESTIONS[0], 5)]


def test_retrieval_after_a_delete_ranks_by_the_postings_from_the_first_query(store: tuple[Path, Pathweaver],
                                                                             tmp_path: Path) -> None:
    """A new service on a store that has seen a delete (as a new CLI process is) ranks its very first BM25 query
    by the postings' true totals: the same scores as every later query, and as the server."""
    notes, pw = store
    (notes / "radium.md").unlink()
    pw.index([notes])
    with Pathweaver.open(pw.settings.store_dir, overrides={"models": {"llm_backend": "none"}}) as fresh:
        snap = fresh.snapshot()
        first = fresh.env(snap).bm25_chunks(QUESTIONS[0], 5)
        index = fresh.reader.bm25_index(fresh.reader.db.version())
        expected = [(snap.chunk_index[c], s) for c, s in fresh.reader.bm25_chunks(QUESTIONS[0], 5, index)]
        assert first == expected and first == fresh.env(snap).bm25_chunks(QUESTIONS[0], 5)


def test_stopwords_do_not_rank_and_common_words_alone_find_nothing(store: tuple[Path, Pathweaver]) -> None:
    notes, pw = store
    index = pw.reader.bm25_index(pw.reader.db.version())
    for idx in (None, index):
        assert pw.reader.bm25_chunks("What is it that they were doing there, and how?", 5, idx) == []
        # the same hits, the same scores, with or without the question's stopwords
        plain = pw.reader.bm25_chunks("polonium discovered", 5, idx)
        assert plain and pw.reader.bm25_chunks("Who was it that discovered the polonium?", 5, idx) == plain
        assert pw.reader.bm25_chunks("Polonium's discovery", 5, idx) == pw.reader.bm25_chunks("polonium discovery",
                                                                                             5, idx)
    assert pw.search("how was it that they did this", mode="bm25") == []


def test_a_word_in_more_than_half_the_chunks_is_noise_only_beside_specific_hits(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for i, topic in enumerate(["apples", "pears", "plums"]):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\nA note about {topic} and fruit.\n")
    (notes / "other.md").write_text("# Other\n\nNothing of the kind, only bread.\n")
    pw = Pathweaver.open(tmp_path / "store", overrides={"models": {"llm_backend": "none"}})
    try:
        pw.index([notes])
        # in 3 of 4 chunks (FTS5's idf floor): still the notes that hold it when nothing more specific matches
        assert sorted(name for name, _, _ in by_place(pw, pw.reader.bm25_chunks("fruit", 5))) == [
            "n0.md", "n1.md", "n2.md"]
        hits = by_place(pw, pw.reader.bm25_chunks("fruit pears", 5))
        assert [name for name, _, _ in hits][:1] == ["n1.md"]
    finally:
        pw.close()


def test_rank_breaks_ties_by_id_at_the_kth_place_and_scores_any_dtype_alike() -> None:
    """Equal scores (copies of a note) across the k-th place go to the lower id, as a full sort by (-score, id)
    orders them; postings kept as int32 rows and float32 counts (``bm25_terms``) give the same bits."""
    ids = np.array([3, 8, 9, 14, 20, 31], dtype=np.int64)
    norms = bm25.length_norms(np.array([5, 7, 5, 5, 9, 5]))
    postings = [(np.array([0, 2, 3, 4, 5]), np.array([1.0, 2.0, 2.0, 1.0, 2.0])), None,
                (np.array([1, 4]), np.array([3.0, 1.0]))]
    scores = {}
    for (at, f) in postings[::2]:
        idf = max(math.log((6 - len(at) + 0.5) / (len(at) + 0.5)), bm25.IDF_FLOOR)
        for row, tf in zip(at.tolist(), f.tolist(), strict=True):
            scores[row] = scores.get(row, 0.0) + idf * ((tf * (bm25.K1 + 1.0)) / (tf + norms[row]))
    everything = sorted(scores, key=lambda r: (-scores[r], ids[r]))
    assert scores[2] == scores[3] == scores[5]  # a tie, which some k below cuts through
    narrow = [(p[0].astype(np.int32), p[1].astype(np.float32)) if p is not None else None for p in postings]
    for k in range(0, 8):
        want = [(int(ids[r]), scores[r]) for r in everything[:k]]
        assert bm25.rank(ids, norms, postings, k) == want
        assert bm25.rank(ids, norms, narrow, k) == want
