"""The document and chunk writes of a PostgreSQL store (``store.writes`` in PostgreSQL's dialect), called inside
``PgDatabase.write()``: a chunk goes in with its BM25 postings and its vector; foreign keys remove both with it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from pathweaver.store.fts_tokens import Fts5Tokenizer
from pathweaver.store.pg.search import write_postings, write_vectors
from pathweaver.store.writes import ChunkRow, gram_counts


def upsert_document(conn: Any, path: str, *, title: str = "", content_hash: str = "", mtime: float = 0.0,
                    size: int = 0, status: str = "indexed", reason: str = "", indexed_at: float = 0.0,
                    headings: Sequence[tuple[int, str]] = (), links: Sequence[str] = ()) -> int:
    """Insert or update the row of ``path``; returns its id (kept across updates)."""
    row = conn.execute(
        "INSERT INTO documents(path, title, content_hash, mtime, size, status, reason, indexed_at, headings, links) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (path) DO UPDATE SET title = excluded.title, "
        "content_hash = excluded.content_hash, mtime = excluded.mtime, size = excluded.size, "
        "status = excluded.status, reason = excluded.reason, indexed_at = excluded.indexed_at, "
        "headings = excluded.headings, links = excluded.links RETURNING id",
        (path, title, content_hash, mtime, size, status, reason, indexed_at,
         json.dumps([list(h) for h in headings]), json.dumps(list(links))),
    ).fetchone()
    return int(row[0])


def insert_chunks(conn: Any, tokenizer: Fts5Tokenizer, doc_id: int, title: str, rows: Sequence[ChunkRow],
                  vecs: np.ndarray) -> list[int]:
    """Insert chunks with their postings, vectors and gram_df increments; returns the new chunk ids."""
    ids = [int(r[0]) for r in conn.execute(
        "SELECT nextval(pg_get_serial_sequence('chunks', 'id')) FROM generate_series(1, %s)", (len(rows),))]
    with conn.cursor() as cur, cur.copy('COPY chunks(id, doc_id, ord, start, "end", n_tokens, text, heading, grams, '
                                        "n_words, file_start, file_end, locator) FROM STDIN") as copy:
        for cid, row in zip(ids, rows, strict=True):
            copy.write_row((cid, doc_id, row.ord, row.start, row.end, row.n_tokens, row.text, row.heading,
                            json.dumps(dict(row.grams), ensure_ascii=False, sort_keys=True), row.n_words,
                            row.file_start, row.file_end, row.locator))
    write_postings(conn, tokenizer, [(cid, row.text, title) for cid, row in zip(ids, rows, strict=True)])
    write_vectors(conn, ids, vecs)
    counts = gram_counts(rows)
    if counts:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO gram_df(gram, df) VALUES (%s, %s) ON CONFLICT (gram) DO UPDATE "
                            "SET df = gram_df.df + excluded.df", sorted(counts.items()))
    return ids


def delete_document(conn: Any, doc_id: int) -> int:
    """Remove a document and its chunks (their postings and vectors follow by cascade) and take their grams out
    of gram_df; returns the number of chunks removed."""
    grams = conn.execute("SELECT grams FROM chunks WHERE doc_id = %s", (doc_id,)).fetchall()
    counts: dict[str, int] = {}
    for (text,) in grams:
        for gram in json.loads(text):
            counts[gram] = counts.get(gram, 0) + 1
    if counts:
        with conn.cursor() as cur:
            cur.executemany("UPDATE gram_df SET df = df - %s WHERE gram = %s", [(n, g) for g, n in sorted(counts.items())])
        conn.execute("DELETE FROM gram_df WHERE df <= 0")
    conn.execute("DELETE FROM documents WHERE id = %s", (doc_id,))
    return len(grams)
