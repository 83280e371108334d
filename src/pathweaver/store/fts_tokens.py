"""FTS5's own tokenizer outside a store: the terms ``chunks_fts`` would index, for a backend that has no FTS5.

The PostgreSQL backend keeps BM25 postings in tables of its own; to rank exactly as the SQLite store does, its
terms must be FTS5's (``porter unicode61`` over the chunk text and the document title). An in-memory SQLite
database with the same FTS5 table gives them: rows go in, its ``fts5vocab`` instance table lists each row's
tokens, the rows are deleted again.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

import sqlean as sqlite3

CHUNK_TOKENIZER = "porter unicode61"  # chunks_fts's (schema.SCHEMA_V1)
NAME_TOKENIZER = "unicode61"  # entities_fts's


class Fts5Tokenizer:
    """Terms of ``chunks_fts`` (or, with ``NAME_TOKENIZER``, ``entities_fts``) for texts, from a private in-memory
    FTS5 table (thread-safe)."""

    def __init__(self, tokenize: str = CHUNK_TOKENIZER) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, title, tokenize='{tokenize}')")
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        self._lock = threading.Lock()

    def postings(self, rows: Sequence[tuple[str, str]]) -> list[Counter[str]]:
        """For each ``(text, title)``, its terms with their occurrences over both columns (FTS5's row tokens)."""
        out: list[Counter[str]] = [Counter() for _ in rows]
        with self._lock:
            self._conn.executemany("INSERT INTO t(rowid, text, title) VALUES (?, ?, ?)",
                                   [(i, text, title) for i, (text, title) in enumerate(rows, start=1)])
            try:
                for doc, term, n in self._conn.execute("SELECT doc, term, count(*) FROM v GROUP BY doc, term"):
                    out[int(doc) - 1][str(term)] = int(n)
            finally:
                self._conn.execute("DELETE FROM t")
        return out

    def terms(self, phrases: Sequence[str]) -> list[str] | None:
        """FTS5's term for each phrase (one word each), in order; None when a phrase is not exactly one term
        (as ``bm25.query_terms``)."""
        if not phrases:
            return []
        with self._lock:
            self._conn.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", list(enumerate(phrases, start=1)))
            try:
                rows = self._conn.execute("SELECT doc, term FROM v ORDER BY doc, offset").fetchall()
            finally:
                self._conn.execute("DELETE FROM t")
        if [r[0] for r in rows] != list(range(1, len(phrases) + 1)):
            return None
        return [str(r[1]) for r in rows]

    def close(self) -> None:
        self._conn.close()
