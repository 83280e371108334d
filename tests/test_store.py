"""Store writes and reads on real SQLite files and a real PostgreSQL (the ``backend`` fixture): round trip, garbage
collection, stats contract, BM25, cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pathweaver.config import ConfigError, Settings
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models.embedder import get_embedder
from pathweaver.store import columns, vector_rows
from pathweaver.store import graph_writes as gw
from pathweaver.store import writes as w
from pathweaver.store.backend import open_database
from pathweaver.store.db import Database, EmbeddingMismatchError
from pathweaver.store.meta import set_meta
from pathweaver.store.reads import StoreReader
from pathweaver.store.records import fts_query
from pathweaver.store.snapshot import GraphSnapshot

DIM = 4


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture()
def db(backend):  # type: ignore[no-untyped-def]
    """A store on each backend (conftest ``backend``)."""
    d = open_database(backend("store"))
    d.ensure_embedding("test-model", DIM)
    yield d
    d.close()


@pytest.fixture()
def lite_db(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A SQLite store, for what only that backend has (vec0's chunk layout)."""
    d = Database(tmp_path / "store")
    d.ensure_embedding("test-model", DIM)
    yield d
    d.close()


def fill(db: Database) -> dict[str, int]:
    rows = [w.ChunkRow(0, 0, 27, 6, "Marie Curie lived in Paris.", "", {"marie curie": 1, "paris": 1}, 5),
            w.ChunkRow(1, 28, 50, 5, "Paris is in France.", "", {"paris": 1, "france": 1}, 4)]
    with db.write() as conn:
        doc = w.upsert_document(conn, "/n/a.md", title="A", content_hash="h", size=50)
        cids = w.insert_chunks(conn, doc, "A", rows, np.stack([unit(1, 0, 0, 0), unit(0, 1, 0, 0)]))
        # no recorded vector settings: names take their own cached vectors ("encoded", store.graphvecs)
        w.cache_put(conn, {"marie curie": unit(1, 1, 0, 0), "paris": unit(0, 0, 1, 0), "france": unit(0, 0, 1, 0.01),
                           "lived in": unit(0, 0, 0, 1)})
        ids = gw.ensure_entities(conn, {"marie curie": "ngram", "paris": "ngram", "france": "ngram"}, {})
        gw.insert_mentions(conn, [(ids["marie curie"], cids[0], 1, 0.5), (ids["paris"], cids[0], 1, 0.2),
                                 (ids["paris"], cids[1], 1, 0.2), (ids["france"], cids[1], 1, 0.3)])
        key = (ids["marie curie"], ids["paris"], "lived in")
        rows = [(key, "cooccur", "s")] * 2  # twice: one relation
        rid = gw.ensure_relations(conn, rows)[key]
        assert gw.ensure_relations(conn, rows[:1]) == {key: rid}  # already there: the same id, nothing new
        gw.insert_relation_sources(conn, [(rid, cids[0], 0, 27)])
        gw.insert_synonyms(conn, [(ids["france"], ids["paris"], 0.99)])
    return {"doc": doc, **ids}


def test_round_trip_snapshot(db: Database) -> None:
    fill(db)
    snap = StoreReader(db).snapshot()
    assert snap.entity_names == ["marie curie", "paris", "france"]
    assert snap.chunk_texts[1] == "Paris is in France." and snap.chunk_docs == ["/n/a.md", "/n/a.md"]
    assert snap.chunk_spans.tolist() == [[0, 27], [28, 50]]
    assert snap.triple_text(0) == "marie curie lived in paris"
    assert snap.rel_chunks.toarray().tolist() == [[1.0, 0.0]]
    assert snap.mentions.toarray().tolist() == [[1, 1, 0], [0, 1, 1]]
    assert (snap.syn_a.tolist(), snap.syn_b.tolist()) == ([1], [2])
    np.testing.assert_allclose(snap.chunk_vecs[1], unit(0, 1, 0, 0))
    np.testing.assert_allclose(snap.entity_vecs[0], unit(1, 1, 0, 0))
    # a relation's vector: its subject, label and object vectors summed and normalised (composed triples)
    triple = unit(1, 1, 0, 0) + unit(0, 0, 0, 1) + unit(0, 0, 1, 0)
    np.testing.assert_allclose(snap.rel_vecs[0], triple / np.linalg.norm(triple), rtol=1e-6)
    assert db.conn.execute("SELECT df FROM gram_df WHERE gram = 'paris'").fetchone()[0] == 2


def test_relation_lookup_by_table_scan_finds_the_same_ids(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh looks existing relations up in one scan; it must find what the one-by-one lookup finds."""
    ids = fill(db)
    key = (ids["marie curie"], ids["paris"], "lived in")
    new = (ids["paris"], ids["france"], "capital of")
    rows = [(key, "cooccur", ""), (new, "cooccur", "")]
    with db.write() as conn:
        one_by_one = gw.ensure_relations(conn, rows)
    monkeypatch.setattr(gw, "SCAN_RELATIONS_OVER", 0)
    with db.write() as conn:
        assert gw.ensure_relations(conn, rows) == one_by_one
        assert conn.execute("SELECT count(*) FROM relations").fetchone()[0] == 2


def test_delete_document_collects_garbage_everywhere(db: Database) -> None:
    ids = fill(db)
    with db.write() as conn:
        ents, rels = gw.chunk_dependents(conn, ids["doc"])
        assert w.delete_document(conn, ids["doc"]) == 2
        assert gw.collect_garbage(conn, ents, rels) == {"relations": 1, "entities": 3}
    # the full-text and vector rows: FTS5 and vec0 tables on SQLite, postings and pgvector rows on PostgreSQL
    text_rows = ["chunks_fts", "entities_fts"] if isinstance(db, Database) else ["chunk_terms", "chunk_lengths",
                                                                                  "entity_terms"]
    tables = ["documents", "chunks", *text_rows, "chunk_vec", "entities", "mentions", "relations",
              "relation_sources", "synonyms", "gram_df"]
    assert {t: db.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables} == dict.fromkeys(tables, 0)


def test_document_change_counts_chunks_and_collects_what_lost_its_support(db: Database) -> None:
    """The unit of work notes the document's graph rows before the change and collects them after it; a change
    that raises rolls back with its transaction and counts nothing."""
    from pathweaver.store.changes import document_change

    ids = fill(db)
    with pytest.raises(RuntimeError), db.write() as conn, document_change(conn, [ids["doc"]]) as change:
        change.count_chunks(w.delete_document(conn, ids["doc"]))
        raise RuntimeError("disk full")
    assert db.conn.execute("SELECT count(*) FROM entities").fetchone()[0] == 3 and db.get_meta("changed_chunks") is None
    with db.write() as conn, document_change(conn, [ids["doc"]]) as change:
        assert change.entity_ids == {ids["marie curie"], ids["paris"], ids["france"]} and len(change.relation_ids) == 1
        change.count_chunks(w.delete_document(conn, ids["doc"]))
    assert db.get_meta("changed_chunks") == "2"
    assert [db.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("entities", "relations")] == [0, 0]


def test_snapshot_is_cached_until_the_version_moves(db: Database) -> None:
    fill(db)
    reader = StoreReader(db)
    first = reader.snapshot()
    assert reader.snapshot() is first and StoreReader(db).snapshot() is first
    with db.write() as conn:
        set_meta(conn, "x", "1")
    assert reader.snapshot() is not first and reader.snapshot().version == db.version()


def test_stats_contract(db: Database) -> None:
    fill(db)
    with db.write() as conn:
        w.upsert_document(conn, "/n/bad.txt", status="skipped", reason="binary content")
    stats = StoreReader(db).stats()
    expected = {"documents": int, "chunks": int, "entities": int, "relations": int, "synonyms": int, "mentions": int,
                "version": int, "embedding_model": str, "embedding_dim": int, "skipped": list}
    for key, typ in expected.items():
        assert isinstance(stats[key], typ), key
    assert (stats["documents"], stats["chunks"], stats["entities"], stats["relations"]) == (1, 2, 3, 1)
    assert (stats["synonyms"], stats["mentions"], stats["embedding_dim"]) == (1, 4, DIM)
    assert stats["skipped"] == [{"path": "/n/bad.txt", "reason": "binary content"}]


def test_bm25_sanitises_queries(db: Database) -> None:
    fill(db)
    reader = StoreReader(db)
    for nasty in ['"Paris', "Paris) AND (France", "NOT NEAR(", "paris*:^", "AND OR NOT"]:
        reader.bm25_chunks(nasty, 5)  # must not raise
    assert reader.bm25_chunks("", 5) == [] and reader.bm25_chunks("?!", 5) == []
    hits = reader.bm25_chunks("France?", 5)
    assert [h[0] for h in hits] == [2] and hits[0][1] > 0
    assert fts_query('Paris "AND" x(y)') == '"paris" OR "and" OR "x" OR "y"'
    assert [e["name"] for e in reader.find_entities("Paris!", 5)] == ["paris"]


def test_entity_card_and_table_rows(db: Database) -> None:
    fill(db)
    reader = StoreReader(db)
    card = reader.entity("Marie Curie")
    assert card is not None and card["mentions"][0]["doc"] == "/n/a.md"
    rel = card["relations"][0]
    assert (rel["label"], rel["other"], rel["sources"][0]["span"]) == ("lived in", "paris", [0, 27])
    assert reader.entity("paris")["synonyms"] == [{"name": "france", "cos": pytest.approx(0.99)}]  # type: ignore[index]
    assert reader.entity("nobody") is None
    columns, rows = reader.table_rows("chunks")
    assert "grams" not in columns and len(rows) == 2
    with pytest.raises(ConfigError, match="cannot export"):
        reader.table_rows("meta")
    assert reader.neighbors("paris", 1, 10)["nodes"][0]["name"] == "paris"


def test_embedding_mismatch_names_the_fix(tmp_path: Path) -> None:
    class OtherModel:
        model_name = "some-other-model"
        dim = 384

    with Database(tmp_path / "s") as db:
        Indexer(db, Settings(store_dir=tmp_path / "s"), get_embedder())  # records the real model, dim 384
        with pytest.raises(EmbeddingMismatchError, match="rebuild"):
            Indexer(db, Settings(store_dir=tmp_path / "s"), OtherModel())  # type: ignore[arg-type]


@pytest.mark.parametrize("max_runs", [4096, 3])
def test_take_rows_copies_runs_like_a_fancy_index(max_runs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshot rebuilds copy reused vectors run by run (or by one take when runs are many): same rows, zeros
    where nothing is reused."""
    monkeypatch.setattr(vector_rows, "MAX_RUNS", max_runs)
    old = np.arange(40 * 3, dtype=np.float32).reshape(40, 3)
    pos = np.array([0, 1, 2, -1, -1, 5, 6, 30, 31, -1, 7, 8, 9, 39, 10], dtype=np.int64)
    expected = old[np.maximum(pos, 0)]
    expected[pos < 0] = 0.0
    assert np.array_equal(vector_rows._take_rows(old, pos), expected)
    assert vector_rows._take_rows(old, np.zeros(0, dtype=np.int64)).shape == (0, 3)
    assert np.array_equal(vector_rows._take_rows(old, np.full(4, -1)), np.zeros((4, 3), dtype=np.float32))


@pytest.mark.parametrize("odd_text", ["plain", "has \x1f a separator"])
def test_bulk_column_reads_equal_row_reads(odd_text: str) -> None:
    """Snapshot reads join each column in SQLite and parse it in numpy; rows come back sorted by the key columns
    whatever order SQLite scans them in, and a text holding the separator falls back to row-by-row reads."""
    import sqlean

    conn = sqlean.connect(":memory:")
    conn.execute("CREATE TABLE t (a INTEGER NOT NULL, b INTEGER NOT NULL, name TEXT NOT NULL, x REAL NOT NULL)")
    conn.execute("CREATE INDEX t_name ON t(name)")
    rows = [(5, 1, "e", 0.5), (1, 2, odd_text, 0.25), (3, 3, "", 0.123456789), (1, 1, "z", -1.0), (2, 9, "b b", 1e-9)]
    conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    cols = columns._read_columns(conn, "t", ["a", "b"], ("name",), ("x",), order=2)
    want = sorted(rows)
    assert cols.ints.tolist() == [[a, b] for a, b, _, _ in want]
    assert cols.texts == [[name for _, _, name, _ in want]]
    assert np.array_equal(cols.reals[0].astype(np.float32), np.array([x for *_, x in want], dtype=np.float32))
    empty = columns._read_columns(conn, "t WHERE a > 100", ["a"], ("name",))
    assert empty.ints.shape == (0, 1) and empty.texts == [[]]


def test_vec0_rows_from_chunk_storage_equal_a_scan(lite_db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold snapshot builds read vec0 tables from their chunk blobs: the same rows and vectors as scanning the
    table, across several chunks and with deleted rows; an unknown sqlite-vec version reads nothing that way."""
    from pathweaver.store import vecdump

    conn = lite_db.conn
    conn.execute("CREATE VIRTUAL TABLE probe USING vec0(embedding float[4])")
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((2500, 4)).astype(np.float32)
    conn.executemany("INSERT INTO probe(rowid, embedding) VALUES (?, ?)",
                     [(i + 1, v.tobytes()) for i, v in enumerate(vecs)])
    conn.execute("DELETE FROM probe WHERE rowid % 7 = 0")
    ids, got = vecdump.vec0_rows(conn, "probe", 4)
    scan = conn.execute("SELECT rowid, embedding FROM probe").fetchall()
    want = {r: np.frombuffer(b, dtype=np.float32) for r, b in scan}
    assert sorted(ids.tolist()) == sorted(want) and len(want) == 2500 - 2500 // 7
    assert all(np.array_equal(got[i], want[r]) for i, r in enumerate(ids.tolist()))
    monkeypatch.setattr(vecdump, "KNOWN_VERSIONS", ("v9.",))
    assert vecdump.vec0_rows(conn, "probe", 4) is None
    assert vecdump.vec0_rows(conn, "no_such_table", 4) is None


def test_with_synonyms_adds_edges_in_store_order_or_declines() -> None:
    snap = GraphSnapshot.from_arrays(["a", "b", "c", "d"], [(0, 1, "r")], synonyms=[(1, 3, 0.95)], version=4)
    # store ids are positions + 1 in from_arrays
    carried = snap.with_synonyms(5, [(3, 1, 0.91), (2, 3, 0.93)])
    assert carried is not None and carried.version == 5
    assert list(zip(carried.syn_a.tolist(), carried.syn_b.tolist(), strict=True)) == [(0, 2), (1, 2), (1, 3)]
    assert carried.syn_cos.tolist() == pytest.approx([0.91, 0.93, 0.95])
    assert carried.adjacency is not None and carried.adjacency[0, 2] and not snap.adjacency[0, 2]
    assert carried.entity_vecs is snap.entity_vecs and snap.version == 4
    from pathweaver.retrieval.graphs import node_space_graph, pair_relations

    index, graph = pair_relations(snap), node_space_graph(snap)
    again = snap.with_synonyms(6, [(1, 3, 0.92)])
    assert again is not None and pair_relations(again) is index  # does not depend on synonyms: handed on
    assert node_space_graph(again) is not graph and node_space_graph(again).adjacency[0, 2] > 0
    assert snap.with_synonyms(5, [(1, 9, 0.99)]) is None  # an entity the graph lacks
    assert snap.with_synonyms(5, [(4, 2, 0.99)]) is None  # an edge it already has


def test_recording_a_patch_does_not_wait_for_a_build() -> None:
    """The indexer records its patch right after a commit; a reader's snapshot build (1-2 s on a large store) in
    progress must not hold it up, and a later ``get`` carries the built snapshot forward by it."""
    import threading

    from pathweaver.store.cache import SnapshotCache

    cache = SnapshotCache()
    base = GraphSnapshot.from_arrays(["a", "b"], [(0, 1, "r")], version=1)
    release, started = threading.Event(), threading.Event()

    def slow_build(previous: object) -> GraphSnapshot:
        started.set()
        release.wait(30)
        return base

    reader = threading.Thread(target=lambda: cache.get(1, slow_build))
    reader.start()
    assert started.wait(30)
    done = threading.Event()
    writer = threading.Thread(target=lambda: (cache.patch(1, 2, lambda s: s.with_synonyms(2, [(1, 2, 0.95)])),
                                              done.set()))
    writer.start()
    assert done.wait(5), "patch waited for the build"
    release.set()
    reader.join()
    writer.join()
    carried = cache.get(2, lambda previous: pytest.fail("read the store instead of carrying forward"))
    assert carried.version == 2 and carried.syn_cos.tolist() == pytest.approx([0.95]) and cache.patched == 1


def test_bulk_column_reads_fall_back_when_sqlite_refuses_the_aggregate() -> None:
    """A joined column over SQLite's string length limit raises; the read goes row by row instead."""
    import sqlean

    conn = sqlean.connect(":memory:")
    conn.execute("CREATE TABLE t (a INTEGER NOT NULL, name TEXT NOT NULL)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(2, "b"), (1, "a")])

    class Refusing:
        def execute(self, sql: str, *args: object) -> object:
            if "group_concat" in sql:
                raise sqlean.DataError("string or blob too big")
            return conn.execute(sql, *args)

    cols = columns._read_columns(Refusing(), "t", ["a"], ("name",), order=1)  # type: ignore[arg-type]
    assert cols.ints.tolist() == [[1], [2]] and cols.texts == [["a", "b"]]


def test_new_stores_get_large_pages_and_old_ones_keep_theirs(tmp_path: Path) -> None:
    import sqlean

    from pathweaver.store.db import DB_FILE, PAGE_SIZE

    with Database(tmp_path / "new") as db:
        assert db.conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
    old = tmp_path / "old"
    old.mkdir()
    conn = sqlean.connect(str(old / DB_FILE))
    conn.execute("PRAGMA page_size=4096")
    conn.execute("CREATE TABLE t (x)")  # the page size is fixed from here on
    conn.close()
    with Database(old) as db:
        db.ensure_embedding("test-model", DIM)
        assert db.conn.execute("PRAGMA page_size").fetchone()[0] == 4096
        fill(db)
        assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_bulk_inserts_take_the_ids_sqlite_would_give(db: Database) -> None:
    """Entities and relations are inserted with explicit ids (one executemany): the same ids as one insert per
    row, and an AUTOINCREMENT entity id is never given again after its row was deleted."""
    ids = fill(db)
    top = max(ids["marie curie"], ids["paris"], ids["france"])
    with db.write() as conn:
        gw.delete_entities(conn, [top])
        got = gw.ensure_entities(conn, {"curie": "ngram", "radium": "title"}, {})
        assert list(got.values()) == [top + 1, top + 2]  # above the deleted one, in order
        if isinstance(db, Database):
            seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entities'").fetchone()[0]
            assert seq == top + 2
        rid = conn.execute("SELECT max(id) FROM relations").fetchone()[0]
        key = (got["curie"], got["radium"], "discovered")
        rows = [(key, "cooccur", "first"), ((got["radium"], got["curie"], "related to"), "cooccur", "second"),
                (key, "link", "again")]
        rel = gw.ensure_relations(conn, rows)
        assert list(rel.values()) == [rid + 1, rid + 2]
        assert conn.execute("SELECT kind, description FROM relations WHERE id = ?", (rel[key],)).fetchone() == (
            "cooccur", "first")  # a key given twice keeps its first row
