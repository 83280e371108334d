"""BM25 from each query term's postings read from the store (``store.bm25_terms``, what a store past
``bm25.MAX_POSTINGS`` tokens ranks with): the same top k and the same scores, bit for bit, as every posting in
memory (``bm25.Bm25Index``), on both backends, on a fresh store and after edits and deletes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from pathweaver.service import Pathweaver
from pathweaver.store import bm25, bm25_terms
from pathweaver.store.bm25 import Bm25Index
from pathweaver.store.bm25_terms import Bm25Lengths
from pathweaver.store.db import Database
from pathweaver.store.schema import MIGRATIONS, SCHEMA_CHUNK_TERMS, SCHEMA_VERSION

CORPUS = Path(__file__).parent / "corpus"
QUESTIONS = [
    "Where was the discoverer of polonium born?",
    "Who married Pierre Curie, and who did Marie marry?",  # married / marry: one stem, two phrases
    "Which river flows through Warsaw to the Baltic?",
    "zyzzyva quux",  # in no chunk
    "Röntgen's rays; radium (Ra) & 'polonium'!",
    "Curie Curie Warsaw Paris radium Nobel physics",
]
STOPWORDS_ONLY = "What is it that they were doing there, and how?"
BEFORE_POSTINGS = MIGRATIONS.index(SCHEMA_CHUNK_TERMS)  # the schema version before chunk_terms


def opened(store: Path | str) -> Pathweaver:
    return Pathweaver.open(store, overrides={"models": {"llm_backend": "none"}})


@pytest.fixture()
def store(tmp_path: Path, backend, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Pathweaver]:  # type: ignore[no-untyped-def]
    """The test corpus indexed as a store past the cap is: its postings kept in the store (``keep_postings``)."""
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    pw = opened(backend("store"))
    with monkeypatch.context() as m:
        m.setattr(bm25, "MAX_POSTINGS", 10)
        pw.index([notes])
    yield notes, pw
    pw.close()


def both(pw: Pathweaver, monkeypatch: pytest.MonkeyPatch) -> tuple[Bm25Index, Bm25Lengths]:
    """What the store ranks with at its version, all postings in memory and past the cap (lengths alone)."""
    version = pw.reader.db.version()
    full = pw.reader.bm25_index(version)
    with monkeypatch.context() as m:
        m.setattr(bm25, "MAX_POSTINGS", 10)
        per_term = pw.reader.bm25_index(version)
    assert isinstance(full, Bm25Index) and isinstance(per_term, Bm25Lengths)
    return full, per_term


def assert_same(pw: Pathweaver, full: Bm25Index, per_term: Bm25Lengths) -> None:
    assert np.array_equal(full.ids, per_term.ids) and np.array_equal(full.norms, per_term.norms)
    for question in QUESTIONS:
        for k in (1, 3, 50):
            ours = pw.reader.bm25_chunks(question, k, per_term)
            assert ours == pw.reader.bm25_chunks(question, k, full), question  # scores compared exactly
    assert pw.reader.bm25_chunks(QUESTIONS[0], 5, per_term)  # something to compare
    assert pw.reader.bm25_chunks("zyzzyva quux", 5, per_term) == []
    assert pw.reader.bm25_chunks(STOPWORDS_ONLY, 5, per_term) == []


def test_per_term_postings_rank_as_the_postings_in_memory(store: tuple[Path, Pathweaver],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _, pw = store
    full, per_term = both(pw, monkeypatch)
    assert_same(pw, full, per_term)


def test_after_edits_and_deletes_both_still_agree(store: tuple[Path, Pathweaver],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    notes, pw = store
    (notes / "radium.md").unlink()
    (notes / "warsaw.md").write_text((notes / "warsaw.md").read_text() + "\n\nWarsaw hosts a radium institute.\n")
    (notes / "zanzibar.md").write_text("# Zanzibar\n\nZanzibar clove merchants traded saffron and radium.\n")
    pw.index([notes])
    full, per_term = both(pw, monkeypatch)
    assert full.n_rows == pw.reader.stats()["chunks"]
    assert_same(pw, full, per_term)


def test_lengths_read_before_a_change_rank_at_the_current_version(store: tuple[Path, Pathweaver],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Postings can only be read as the store is now: lengths of an older version are read again, so the scores
    stay those of one version (the current one), never a mix."""
    notes, pw = store
    _, old = both(pw, monkeypatch)
    (notes / "polonium.md").write_text("# Polonium\n\nPolonium and radium, radium and polonium.\n")
    pw.index([notes])
    full, _ = both(pw, monkeypatch)
    assert old.version < full.version
    for question in QUESTIONS:
        assert pw.reader.bm25_chunks(question, 50, old) == pw.reader.bm25_chunks(question, 50, full), question


def test_a_small_cache_reads_again_and_ranks_alike(store: tuple[Path, Pathweaver],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _, pw = store
    full, per_term = both(pw, monkeypatch)
    monkeypatch.setattr(bm25_terms, "CACHE_BYTES", 64)  # a posting list or two at most
    for question in QUESTIONS * 2:
        assert pw.reader.bm25_chunks(question, 10, per_term) == pw.reader.bm25_chunks(question, 10, full), question
    assert per_term.kept_bytes() <= 64


def test_the_service_ranks_past_the_cap_from_the_store(store: tuple[Path, Pathweaver],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Retrieval and ``search`` past the cap: the hits the postings in memory give, and a file committed a moment
    ago is found."""
    notes, pw = store
    full, _ = both(pw, monkeypatch)
    monkeypatch.setattr(bm25, "MAX_POSTINGS", 10)
    snap = pw.snapshot()
    assert snap.version == full.version and isinstance(pw.bm25_index(snap, wait=True), Bm25Lengths)
    for question in QUESTIONS:
        expected = [(snap.chunk_index[c], s) for c, s in pw.reader.bm25_chunks(question, 5, full)]
        assert pw.env(snap).bm25_chunks(question, 5) == expected, question
    (notes / "zanzibar.md").write_text("# Zanzibar\n\nZanzibar clove merchants traded saffron.\n")
    pw.index([notes])
    found = pw.search("zanzibar saffron", mode="bm25", k=3)
    assert found and Path(found[0]["doc"]).name == "zanzibar.md"
    assert pw.search(STOPWORDS_ONLY, mode="bm25") == []


def test_a_store_keeps_its_postings_once_past_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small SQLite store keeps no postings table (its postings are read into memory); once an index run leaves
    it past the cap it fills ``chunk_terms`` from FTS5's index: the rows the write path makes, deleted chunks left
    out, and from then on written with the chunks. Before that, past the cap, FTS5 ranks."""
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    with opened(tmp_path / "grown") as pw:
        pw.index([notes])
        (notes / "radium.md").unlink()
        pw.index([notes])
        assert pw.reader.canonical_graph()["postings"] == set()
        full = pw.reader.bm25_index(pw.reader.db.version())
        monkeypatch.setattr(bm25, "MAX_POSTINGS", 10)
        assert pw.reader.bm25_index(pw.reader.db.version()) is None  # not kept yet: FTS5 answers
        # FTS5's own bm25() (its statistics count deleted rows until a merge): the same best chunk
        assert pw.reader.bm25_chunks(QUESTIONS[0], 1)[0][0] == pw.reader.bm25_chunks(QUESTIONS[0], 1, full)[0][0]
        (notes / "zanzibar.md").write_text("# Zanzibar\n\nZanzibar clove merchants traded saffron and radium.\n")
        pw.index([notes])
        grown = pw.reader.canonical_graph()["postings"]
        assert isinstance(pw.reader.bm25_index(pw.reader.db.version()), Bm25Lengths)
    with opened(tmp_path / "fresh") as pw:
        pw.index([notes])
        assert grown and pw.reader.canonical_graph()["postings"] == grown
        (notes / "warsaw.md").write_text((notes / "warsaw.md").read_text() + "\n\nWarsaw has a radium institute.\n")
        pw.index([notes])
        written = pw.reader.canonical_graph()["postings"]
        assert written != grown and any(term == "institut" for _, _, term, _ in written)


def test_a_store_made_before_gets_the_postings_table(tmp_path: Path) -> None:
    """The migration to schema 13 adds the (empty) ``chunk_terms`` table to an older SQLite store."""
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    with opened(tmp_path / "store") as pw:
        pw.index([notes])
    with Database(tmp_path / "store") as db, db.write() as conn:
        conn.execute("DROP TABLE chunk_terms")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(BEFORE_POSTINGS),))
    with opened(tmp_path / "store") as pw:
        assert pw.reader.stats()["schema_version"] == SCHEMA_VERSION
        assert pw.reader.canonical_graph()["postings"] == set()
