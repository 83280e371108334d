"""The PostgreSQL backend against a real PostgreSQL with pgvector that the tests start (``pg_server``): opening
and its checks, the schema, write transactions and their notifications, BM25 that ranks as the SQLite store
ranks, and pgvector rows. Skips with the reason when the ``postgres`` extra is not installed."""

from __future__ import annotations

import select
from pathlib import Path

import numpy as np
import pytest

from pathweaver.store.bm25 import query_terms
from pathweaver.store.bm25_terms import KEPT
from pathweaver.store.db import Database, StoreError
from pathweaver.store.fts_tokens import Fts5Tokenizer
from pathweaver.store.meta import set_meta
from pathweaver.store.records import RecordReader, fts_words
from pathweaver.store.writes import ChunkRow, delete_document, insert_chunks, upsert_document

psycopg = pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")

from pathweaver.store.pg import search as pgsearch  # noqa: E402
from pathweaver.store.pg.database import CHANNEL, PgDatabase  # noqa: E402
from pathweaver.store.pg.schema import SCHEMA  # noqa: E402

CORPUS = Path(__file__).parent / "corpus"
DIM = 8
QUERIES = ("Who discovered polonium?", "the river that flows through Warsaw", "Nobel Prize in Physics",
           "Marie Curie's husband", "a question about nothing here", "the of and")


def _schema_exists(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (SCHEMA,)).fetchone() is not None


def _notes() -> list[tuple[str, str, list[ChunkRow]]]:
    """(path, title, chunks) of the corpus notes, one chunk per paragraph."""
    out = []
    for path in sorted(CORPUS.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        rows, at = [], 0
        for i, para in enumerate(p for p in text.split("\n\n") if p.strip()):
            start = text.index(para, at)
            at = start + len(para)
            rows.append(ChunkRow(ord=i, start=start, end=at, n_tokens=len(para.split()), text=para, heading="",
                                 grams={w: 1 for w in fts_words(para)[:3]}, n_words=len(para.split())))
        out.append((str(path.relative_to(CORPUS)), path.stem, rows))
    return out


def _vecs(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# -- opening and its checks ------------------------------------------------------------------------------------
def test_open_creates_schema_with_pgvector_and_reopens(pg_url: str) -> None:
    with PgDatabase(pg_url) as db:
        assert db.version() == 0
        db.ensure_embedding("model-a", DIM)
        assert db.get_meta("embedding_dim") == str(DIM)
        assert db.conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert db.conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_vec_hnsw'").fetchone()[0] \
            .startswith("CREATE INDEX chunk_vec_hnsw")
    with PgDatabase(pg_url, readonly=True) as db:
        assert db.get_meta("embedding_model") == "model-a"
        with pytest.raises(StoreError, match="dim 8"):
            PgDatabase(pg_url).ensure_embedding("model-b", 16)


def test_readonly_open_of_an_empty_database_says_index_first(pg_url: str) -> None:
    with pytest.raises(StoreError, match="no pathweaver store"):
        PgDatabase(pg_url, readonly=True)
    assert not _schema_exists(pg_url)


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot reach PostgreSQL"):
        PgDatabase(f"postgresql://postgres@/postgres?host={tmp_path}")


def test_wrong_credentials_and_missing_database_are_clear_errors(pg_url: str) -> None:
    bad_role = pg_url.replace("postgresql://postgres:", "postgresql://nobody:secret", 1)
    with pytest.raises(StoreError, match="refused the credentials") as err:
        PgDatabase(bad_role)
    assert "secret" not in str(err.value)
    head, _, query = pg_url.partition("?")
    with pytest.raises(StoreError, match="does not exist"):
        PgDatabase(head.rsplit("/", 1)[0] + "/no_such_db?" + query)


def test_a_role_that_may_not_create_pgvector_is_refused_before_anything_is_written(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS limited")
        conn.execute("CREATE ROLE limited LOGIN")
    limited = pg_url.replace("postgresql://postgres:", "postgresql://limited:", 1)
    try:
        with pytest.raises(StoreError, match="CREATE EXTENSION vector"):
            PgDatabase(limited)
        assert not _schema_exists(pg_url)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP ROLE limited")


@pytest.mark.parametrize(("version", "word"), [("0", "older"), ("99", "newer")])
def test_another_schema_version_is_refused_before_anything_is_written(pg_url: str, version: str, word: str) -> None:
    with PgDatabase(pg_url) as db:
        db.conn.execute("UPDATE meta SET value = %s WHERE key = 'pg_schema_version'", (version,))
    with pytest.raises(StoreError, match=word):
        PgDatabase(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'store_version'").fetchone()[0] == "0"


def test_a_foreign_schema_of_the_same_name_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {SCHEMA}")
        conn.execute(f"CREATE TABLE {SCHEMA}.documents (x int)")
    with pytest.raises(StoreError, match="did not make"):
        PgDatabase(pg_url)


# -- writes ----------------------------------------------------------------------------------------------------
def test_write_bumps_the_version_notifies_and_rolls_back_on_error(pg_url: str) -> None:
    with PgDatabase(pg_url) as db, psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        with db.write() as conn:
            upsert_document(conn, "a.md", title="A")
        assert db.version() == 1
        select.select([listener.fileno()], [], [], 5)
        assert [n.payload for n in listener.notifies(timeout=2, stop_after=1)] == ["1"]
        with pytest.raises(RuntimeError), db.write() as conn:
            upsert_document(conn, "b.md", title="B")
            raise RuntimeError("boom")
        assert db.version() == 1
        assert [r[0] for r in db.conn.execute("SELECT path FROM documents")] == ["a.md"]


def test_deleting_a_document_takes_its_postings_vectors_and_grams(pg_url: str) -> None:
    with PgDatabase(pg_url) as db:
        db.ensure_embedding("m", DIM)
        path, title, rows = _notes()[0]
        with db.write() as conn:
            doc = upsert_document(conn, path, title=title)
            insert_chunks(conn, doc, title, rows, _vecs(len(rows), 1))
        counts = [db.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("chunk_terms", "chunk_lengths", "chunk_vec", "gram_df")]
        assert min(counts) > 0
        with db.write() as conn:
            assert delete_document(conn, doc) == len(rows)
        for t in ("chunks", "chunk_terms", "chunk_lengths", "chunk_vec", "gram_df"):
            assert db.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0, t
        assert db.integrity_ok()


# -- the same ranking as SQLite --------------------------------------------------------------------------------
def test_bm25_ranks_exactly_as_the_sqlite_store(pg_url: str, tmp_path: Path) -> None:
    notes = _notes()
    assert notes, "tests/corpus is empty"
    tok = Fts5Tokenizer()
    with Database(tmp_path / "store") as lite, PgDatabase(pg_url) as pg:
        lite.ensure_embedding("m", DIM)
        pg.ensure_embedding("m", DIM)
        with lite.write() as conn:  # as a store past the in-memory postings does (``bm25_terms.keep_postings``)
            set_meta(conn, KEPT, "1")
        for n, (path, title, rows) in enumerate(notes):
            vecs = _vecs(len(rows), n)
            with lite.write() as conn:
                insert_chunks(conn, upsert_document(conn, path, title=title), title, rows, vecs)
            with pg.write() as conn:
                insert_chunks(conn, upsert_document(conn, path, title=title), title, rows, vecs)
        lite_index = RecordReader(lite).bm25_index(lite.version())
        with pg.conn.transaction():
            pg_index = pgsearch.read_index(pg.conn, pg.version())
        assert lite_index is not None
        assert pg_index.n_rows == lite_index.n_rows
        postings = "SELECT term, chunk_id, tf FROM chunk_terms"  # the per-term path's rows: written alike on both
        assert set(lite.conn.execute(postings).fetchall()) == set(pg.conn.execute(postings).fetchall())
        found = 0
        for question in QUERIES:
            words = fts_words(question)
            terms = query_terms(lite.conn, words)
            assert tok.terms(words) == terms
            assert pg_index.top(terms, 10) == lite_index.top(terms, 10), question
            found += bool(lite_index.top(terms, 10))
        assert found >= 4


def test_vectors_round_trip_and_hnsw_finds_the_nearest(pg_url: str) -> None:
    with PgDatabase(pg_url) as db:
        db.ensure_embedding("m", DIM)
        path, title, rows = _notes()[0]
        rows = rows * 8
        rows = [ChunkRow(ord=i, start=r.start, end=r.end, n_tokens=r.n_tokens, text=r.text, heading="", grams={},
                         n_words=r.n_words) for i, r in enumerate(rows)]
        vecs = _vecs(len(rows), 7)
        with db.write() as conn:
            ids = insert_chunks(conn, upsert_document(conn, path, title=title), title, rows, vecs)
        got_ids, got = pgsearch.read_vectors(db.conn, DIM)
        assert got_ids.tolist() == ids
        assert np.array_equal(got, vecs)
        query = _vecs(1, 99)[0]
        cos = vecs @ query
        best = [ids[i] for i in np.argsort(-cos)[:5]]
        hits = pgsearch.dense_top(db.conn, query, 5, ef_search=len(ids))
        assert [h[0] for h in hits] == best
        assert np.allclose([h[1] for h in hits], np.sort(cos)[::-1][:5], atol=1e-5)


# -- migrate ---------------------------------------------------------------------------------------------------
def test_migrate_copies_an_indexed_store_and_ranks_alike(indexed: object, pg_url: str) -> None:
    from pathweaver.store.pg.migrate import TABLES, migrate

    store_dir = indexed.settings.store_dir  # type: ignore[attr-defined]
    counts = migrate(store_dir, pg_url)
    with Database(store_dir, readonly=True) as lite, PgDatabase(pg_url, readonly=True) as pg:
        for table, columns in TABLES:
            names = ", ".join(f'"{c}"' for c in columns)
            want = lite.conn.execute(f"SELECT {names} FROM {table} ORDER BY {names}").fetchall()
            got = pg.conn.execute(f"SELECT {names} FROM {table} ORDER BY {names}").fetchall()
            assert counts[table] == len(want)
            assert [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in got] == \
                [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in want], table
        assert counts["chunks"] > 0 and counts["entities"] > 0 and counts["chunk_vec"] == counts["chunks"]
        lite_index = RecordReader(lite).bm25_index(lite.version())
        with pg.conn.transaction():
            pg_index = pgsearch.read_index(pg.conn, pg.version())
        for question in QUERIES:
            terms = query_terms(lite.conn, fts_words(question))
            assert pg_index.top(terms, 10) == lite_index.top(terms, 10), question
        dim = int(lite.get_meta("embedding_dim"))
        ids, vecs = pgsearch.read_vectors(pg.conn, dim)
        want_ids = [r[0] for r in lite.conn.execute("SELECT rowid FROM chunk_vec ORDER BY rowid")]
        assert ids.tolist() == want_ids
        for cid, vec in zip(ids[:5].tolist(), vecs[:5], strict=True):
            blob = lite.conn.execute("SELECT embedding FROM chunk_vec WHERE rowid = ?", (cid,)).fetchone()[0]
            assert vec.tobytes() == bytes(blob)
        for key in ("vector_settings", "store_version"):
            if key == "store_version":
                assert pg.version() == 1 + int(pg.get_meta("embedding_model") is not None)
            else:
                assert pg.get_meta(key) == lite.get_meta(key)
        assert pg.conn.execute("SELECT count(*) FROM entity_terms").fetchone()[0] > 0
    with PgDatabase(pg_url) as pg, pytest.raises(StoreError, match="already holds documents"):
        migrate(store_dir, pg_url)


def test_migrate_of_a_missing_store_writes_nothing(tmp_path: Path, pg_url: str) -> None:
    from pathweaver.store.pg.migrate import migrate

    with pytest.raises(StoreError, match="no store"):
        migrate(tmp_path / "none", pg_url)
    assert not _schema_exists(pg_url)


def test_migrate_command_reports_rows_and_refuses_a_directory_target(
        indexed: object, pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from pathweaver.cli import main

    store_dir = str(indexed.settings.store_dir)  # type: ignore[attr-defined]
    assert main(["migrate", store_dir, str(tmp_path / "dir")]) != 0
    assert "must be a postgresql:// URL" in capsys.readouterr().err
    assert main(["migrate", store_dir, pg_url, "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert counts["chunks"] > 0 and counts["chunk_vec"] == counts["chunks"]
    assert main(["migrate", store_dir, pg_url]) != 0
    assert "already holds documents" in capsys.readouterr().err


def test_doctor_opens_a_postgres_store_read_only_and_reports_it(pg_url: str, tmp_path: Path) -> None:
    from pathweaver.config import load_settings
    from pathweaver.doctor import _store

    report = _store(load_settings(pg_url, environ={}), "")
    assert report["backend"] == "postgresql" and "no pathweaver store" in report["error"]
    assert not _schema_exists(pg_url)
    with PgDatabase(pg_url) as db:
        db.ensure_embedding("model-a", DIM)
    report = _store(load_settings(pg_url, environ={}), "")
    assert report["exists"] and report["embedding_model"] == "model-a"
    assert report["pgvector"].count(".") == 2  # "0.8.5"


def test_eval_on_postgres_gives_the_figures_of_sqlite(pg_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``eval --store postgresql://...`` indexes the data set into the database (its corpus and ledger in the URL's
    settings directory) and scores every method as eval on a SQLite store does."""
    import json

    from pathweaver.cli import main
    from pathweaver.config import url_store_dir
    from test_eval import _tiny_hotpot

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("PATHWEAVER_STORE", raising=False)
    data = tmp_path / "hotpot"
    _tiny_hotpot(data)
    keys = ("n_questions", "recall_at_k", "all_evidence_at_k", "mrr", "chunks_per_question")
    for method in ("hybrid", "ppr"):  # dense + BM25, and the graph
        got = {}
        for store in (pg_url, str(tmp_path / "lite")):
            assert main(["--store", store, "--set", "models.llm_backend=none", "eval", str(data), "--split", "all",
                         "--method", method, "--top-k", "2", "--json", "--no-ledger"]) == 0
            out = json.loads(capsys.readouterr().out)
            got[store] = {k: out[k] for k in keys}
        assert got[pg_url] == got[str(tmp_path / "lite")], method
    assert (url_store_dir(pg_url) / "eval" / "hotpotqa" / "corpus" / "000004.md").is_file()
