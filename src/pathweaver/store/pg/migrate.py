"""``pathweaver migrate SQLITE_STORE postgresql://...``: copy a SQLite store into an empty PostgreSQL store.

Every table is copied row for row with its ids (so the graph, the caches and the recorded settings carry over and
nothing is re-embedded or re-extracted); what FTS5 and vec0 held is rebuilt in PostgreSQL's form: BM25 postings
from the chunk texts and titles (``store.fts_tokens``, FTS5's own terms), entity-name postings, and pgvector rows
from the chunk vectors. One transaction: a failed or killed migration leaves the target empty.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pathweaver.store.db import Database, StoreError
from pathweaver.store.fts_tokens import NAME_TOKENIZER, Fts5Tokenizer
from pathweaver.store.pg.database import PgDatabase
from pathweaver.store.pg.search import hnsw_after_load, write_postings, write_vectors
from pathweaver.store.schema import SCHEMA_VERSION
from pathweaver.store.vecdump import vec0_rows

BATCH = 5_000  # rows per postings batch
# Table -> columns copied as they are, parents first (foreign keys).
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("machines", ("id", "name", "first_seen")),
    ("documents", ("id", "path", "title", "content_hash", "mtime", "size", "status", "reason", "indexed_at",
                   "headings", "links", "machine")),
    ("chunks", ("id", "doc_id", "ord", "start", "end", "n_tokens", "text", "heading", "grams", "n_words",
                "file_start", "file_end", "locator", "cite_doc")),
    ("gram_df", ("gram", "df")),
    ("entities", ("id", "name", "kind")),
    ("mentions", ("entity_id", "chunk_id", "count", "score")),
    ("relations", ("id", "src_id", "dst_id", "label", "kind", "description")),
    ("relation_sources", ("relation_id", "chunk_id", "start", "end")),
    ("synonyms", ("a_id", "b_id", "cos")),
    ("embed_cache", ("text_hash", "vector")),
    ("ner_cache", ("text_hash", "spans")),
    ("folders", ("path", "state", "changed_at", "machine")),
    ("doc_names", ("doc_id", "name", "kind")),
    ("name_mentions", ("entity_id", "chunk_id", "count")),
    ("link_names", ("doc_id", "target", "name")),
    ("embeds", ("doc_id", "target")),
    ("entity_norms", ("id", "norm")),
    ("relation_norms", ("id", "norm")),
)
IDENTITY_TABLES = ("documents", "chunks", "entities", "relations")
OWN_META = ("schema_version", "store_version", "pg_schema_version", "embedding_model", "embedding_dim")
Progress = Callable[[str, int], None]


def migrate(store_dir: Path, url: str, progress: Progress | None = None) -> dict[str, int]:
    """Copy the SQLite store in ``store_dir`` into the empty PostgreSQL store at ``url``; returns rows per table."""
    with Database(Path(store_dir), readonly=True) as lite:
        version = int(lite.get_meta("schema_version") or 0)
        if version != SCHEMA_VERSION:
            raise StoreError(f"{lite.path} has schema version {version}, not this pathweaver's ({SCHEMA_VERSION}); "
                             f"open it once with this pathweaver (`pathweaver --store {store_dir} stats`) first")
        with PgDatabase(url) as pg:
            if pg.conn.execute("SELECT EXISTS (SELECT 1 FROM documents)").fetchone()[0]:
                raise StoreError(f"{pg.path} already holds documents; migrate into an empty database")
            model, dim = lite.get_meta("embedding_model"), lite.get_meta("embedding_dim")
            if model is not None:
                pg.ensure_embedding(model, int(dim or 0))
            with pg.write() as conn, hnsw_after_load(conn):
                counts = _copy(lite.conn, conn, progress)
                if model is not None:
                    counts["chunk_vec"] = _copy_vectors(lite.conn, conn, int(dim or 0))
            return counts


def _copy(lite: Any, conn: Any, progress: Progress | None) -> dict[str, int]:
    counts: dict[str, int] = {}
    with conn.cursor() as cur:
        for table, columns in TABLES:
            names = ", ".join(f'"{c}"' for c in columns)
            n = 0
            with cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in lite.execute(f"SELECT {names} FROM {table}"):
                    copy.write_row(row)
                    n += 1
            counts[table] = n
            if progress:
                progress(table, n)
        keep = [(k, v) for k, v in lite.execute("SELECT key, value FROM meta") if k not in OWN_META]
        cur.executemany("INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                        "SET value = excluded.value", keep)
        for table in IDENTITY_TABLES:
            top = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
            if table == "entities":  # AUTOINCREMENT: an id once given is never given again
                seq = lite.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entities'").fetchone()
                top = max(int(top), int(seq[0]) if seq else 0)
            conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), %s, %s)", (max(int(top), 1), top > 0))
    counts["chunk_terms"] = _postings(lite, conn, Fts5Tokenizer(), "SELECT c.id, c.text, d.title FROM chunks c "
                                      "JOIN documents d ON d.id = c.doc_id ORDER BY c.id", write_postings)
    counts["entity_terms"] = _postings(lite, conn, Fts5Tokenizer(NAME_TOKENIZER),
                                       "SELECT id, name, '' FROM entities ORDER BY id", _entity_postings)
    return counts


def _postings(lite: Any, conn: Any, tokenizer: Fts5Tokenizer, sql: str, write: Callable[..., None]) -> int:
    n = 0
    cursor = lite.execute(sql)
    while rows := cursor.fetchmany(BATCH):
        write(conn, tokenizer, [(int(i), str(a), str(b)) for i, a, b in rows])
        n += len(rows)
    tokenizer.close()
    return n


def _entity_postings(conn: Any, tokenizer: Fts5Tokenizer, rows: list[tuple[int, str, str]]) -> None:
    counts = tokenizer.postings([(name, "") for _, name, _ in rows])
    with conn.cursor() as cur, cur.copy("COPY entity_terms(term, entity_id, tf) FROM STDIN") as copy:
        for (eid, _, _), terms in zip(rows, counts, strict=True):
            for term, tf in terms.items():
                copy.write_row((term, eid, tf))


def _copy_vectors(lite: Any, conn: Any, dim: int) -> int:
    dumped = vec0_rows(lite, "chunk_vec", dim)
    if dumped is None:
        rows = lite.execute("SELECT rowid, embedding FROM chunk_vec ORDER BY rowid").fetchall()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        vecs = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32).reshape(len(rows), dim)
    else:
        ids, vecs = dumped
    write_vectors(conn, ids.tolist(), vecs)
    return len(ids)
