"""Nearest composed entities and relations without their tables (store/composed.py): the same rows and scores
as a search of the full tables, on a real indexed store."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from exact_search import assert_exact
from pathweaver.config import Settings
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models.embedder import get_embedder
from pathweaver.store import composed
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader

CORPUS = Path(__file__).parent / "corpus"
QUESTIONS = ["Where was Marie Curie born?", "Who won the Nobel Prize in physics?", "radioactivity research",
             "Which city is the capital?", "a question about nothing in these notes"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("composed")
    shutil.copytree(CORPUS, base / "notes")
    with Database(base / "store") as db:
        Indexer(db, Settings(store_dir=base / "store"), get_embedder()).index_paths([base / "notes"])
    return base / "store"


def _fresh_snapshot(path: Path):  # noqa: ANN202
    reader = StoreReader(Database(path))
    reader.cache.clear()
    return reader.snapshot()


@pytest.mark.parametrize("scan", [True, False])
def test_same_rows_and_scores_as_the_tables(store: Path, scan: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every k, every question: the composed search returns the rows and the score bits of an exact search of
    the full tables, and the rows it makes are the tables' rows, whether the word vectors come from a scan of
    the cache or from a lookup per word."""
    monkeypatch.setattr(composed, "SCAN_SHARE", 10**9 if scan else 0)
    snap = _fresh_snapshot(store)
    search = snap.composed.get()
    assert search is not None and snap.loaded("rel_vecs") is None
    embedder = get_embedder()
    for question in QUESTIONS:
        assert_exact(search, snap, embedder.encode_one(question))
    every_e, every_r = np.arange(snap.n_entities), np.arange(snap.n_relations)
    assert search.entity_rows(every_e).tobytes() == snap.entity_vecs.tobytes()
    assert search.relation_rows(every_r).tobytes() == snap.rel_vecs.tobytes()


def test_norms_are_stored_once_and_recomputed_when_missing_or_stale(store: Path) -> None:
    """The first search stores every norm for the store's vector settings; rows without a stored norm (written
    since) or norms of other settings are recomputed, with the same results."""
    _fresh_snapshot(store).composed.get()
    with Database(store) as db:
        counts = [db.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("entity_norms",
                                                                                       "relation_norms")]
        assert counts == [db.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("entities",
                                                                                               "relations")]
        assert db.get_meta("norm_settings") == db.get_meta("vector_settings")
        stored = db.conn.execute("SELECT id, norm FROM relation_norms ORDER BY id").fetchall()
    q = get_embedder().encode_one(QUESTIONS[0])
    want = _fresh_snapshot(store).composed.get().top_relations(q, 5)
    with Database(store) as db, db.write(bump_version=False) as conn:
        conn.execute("DELETE FROM relation_norms WHERE id % 2 = 0")
        conn.execute("UPDATE entity_norms SET norm = norm * 3")  # wrong values, under other settings:
        conn.execute("UPDATE meta SET value = 'other' WHERE key = 'norm_settings'")
    got = _fresh_snapshot(store).composed.get().top_relations(q, 5)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in want]
    with Database(store) as db:
        again = db.conn.execute("SELECT id, norm FROM relation_norms ORDER BY id").fetchall()
        assert db.get_meta("norm_settings") == db.get_meta("vector_settings")
    assert [r[0] for r in again] == [r[0] for r in stored]
    assert np.allclose([r[1] for r in again], [r[1] for r in stored], rtol=1e-6)


def test_norms_of_gone_rows_go_when_the_graph_changes(tmp_path: Path) -> None:
    """A note removed and another added: the stored norms are those of the graph's rows, none left behind."""
    shutil.copytree(CORPUS, tmp_path / "notes")
    settings = Settings(store_dir=tmp_path / "store")
    with Database(tmp_path / "store") as db:
        Indexer(db, settings, get_embedder()).index_paths([tmp_path / "notes"])
    _fresh_snapshot(tmp_path / "store").composed.get()
    gone = sorted((tmp_path / "notes").rglob("*.md"))[0]
    gone.unlink()
    (tmp_path / "notes" / "Added.md").write_text("# Ada Lovelace\n\nAda Lovelace worked with Charles Babbage.\n")
    with Database(tmp_path / "store") as db:
        Indexer(db, settings, get_embedder()).index_paths([tmp_path / "notes"])
    _fresh_snapshot(tmp_path / "store").composed.get()
    with Database(tmp_path / "store") as db:
        for norms, rows in (("entity_norms", "entities"), ("relation_norms", "relations")):
            have = {r[0] for r in db.conn.execute(f"SELECT id FROM {norms}")}
            assert have == {r[0] for r in db.conn.execute(f"SELECT id FROM {rows}")}, norms


def test_methods_give_the_same_results_without_the_tables(store: Path) -> None:
    """mcmi, pathrag and ppr read rows through ``vector_rows`` and the composed search: the same JSON as once
    the tables are made, and neither table made before that."""
    from pathweaver.service import Pathweaver

    pw = Pathweaver.open(store, overrides={"models": {"llm_backend": "none"}})
    try:
        pw.reader.cache.clear()
        def run() -> dict[tuple[str, str], dict[str, object]]:
            out = {}
            for m in ("ppr", "mcmi", "pathrag"):
                for q in QUESTIONS[:3]:
                    got = {k: v for k, v in pw.retrieve_json(q, m, 3).items() if k != "seconds"}
                    got["info"] = {k: v for k, v in got["info"].items() if not k.startswith("ms_")}  # timings
                    out[(m, q)] = got
            return out

        before = run()
        snap = pw.reader.cache.latest()
        assert snap is not None and snap.loaded("entity_vecs") is None and snap.loaded("rel_vecs") is None
        idx = np.array([[0, 2], [1, 1]])
        assert snap.vector_rows("rel_vecs", idx).shape == (2, 2, snap.vector_dim("rel_vecs"))
        snap.entity_vecs, snap.rel_vecs  # noqa: B018 (make both tables)
        assert snap.vector_rows("rel_vecs", idx).tobytes() == snap.rel_vecs[idx].tobytes()
        assert run() == before
    finally:
        pw.close()


@pytest.mark.parametrize("phrases", [
    ["marie curie", "", "nobel  prize in\tphysics", "marie", "x"],
    [],
    [""],
    ["a \x00 b", "\x00", "a\x00b c"],  # the separator as a word: split one phrase at a time
])
def test_phrases_split_together_as_apart(phrases: list[str]) -> None:
    """Splitting all phrases as one text gives the matrix and word numbering of splitting them one by one."""
    index = {"physics": 0}
    apart_index = dict(index)
    got = composed._phrase_words(phrases, index)
    want = composed._phrase_words_apart(phrases, apart_index)
    assert list(index) == list(apart_index) and index == apart_index
    assert got.shape == want.shape == (len(phrases), len(index))
    assert got.indptr.tolist() == want.indptr.tolist() and got.indices.tolist() == want.indices.tolist()
    assert got.toarray().tolist() == [[p.split().count(w) for w in index] for p in phrases]


def test_rows_read_words_over_the_shared_reader_which_closes_with_the_last_database(store: Path,
                                                                                     tmp_path: Path) -> None:
    """Rows made on demand read over the store file's shared reader, which every ``Database`` of that file holds:
    it stays open while one is open and closes with the last, so the writer's close checkpoints and removes the
    WAL. A cached snapshot outlives its ``Database``: a row made then opens a connection for that read alone, and
    the next writer's close still removes the WAL."""
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    db, other = Database(copy), Database(copy)
    assert db.shared is other.shared
    reader = StoreReader(db)
    reader.cache.clear()
    snap = reader.snapshot()
    search = snap.composed.get()
    assert search is not None and not db.shared.is_open
    first = search.entity_rows(np.arange(3))
    assert db.shared.is_open and (copy / "pathweaver.db-wal").exists()
    other.close()
    assert db.shared.is_open  # db still holds it
    db.close()
    db.close()  # a second close releases nothing more
    assert not db.shared.is_open and not (copy / "pathweaver.db-wal").exists()
    assert search.entity_rows(np.arange(3) + 3).shape == first.shape and not db.shared.is_open
    with Database(copy) as again:
        assert StoreReader(again).snapshot() is snap  # the cached snapshot serves again
    assert not (copy / "pathweaver.db-wal").exists()
