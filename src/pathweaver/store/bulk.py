"""Bulk-write helpers the store's write modules share: batches of bound parameters, FTS rows over ``json_each``, and
the ids the next inserted rows will get."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from pathweaver.store.db import Connection

CHUNK_BATCH = 500  # bound parameters per IN (...) statement
JSON_ROWS = 100_000  # texts per json_each statement


def in_batches(items: Sequence[object], size: int = CHUNK_BATCH) -> Iterable[Sequence[object]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def insert_texts(conn: Connection, table: str, column: str, first: int, texts: Sequence[str]) -> None:
    """FTS rows ``(first + k, texts[k])`` in one statement per block over ``json_each``: no Python per row, and the
    GIL is free while SQLite works (a refresh writes its rows while another thread pairs synonyms). Rows with
    several columns stay with ``executemany``: reading each column back out of a JSON row costs more than
    binding it."""
    if hasattr(conn, "insert_entity_names") and table == "entities_fts":  # PostgreSQL: postings (store.pg.dialect)
        conn.insert_entity_names(first, texts)
        return
    for lo in range(0, len(texts), JSON_ROWS):
        conn.execute(f"INSERT INTO {table}(rowid, {column}) SELECT ?1 + key, value FROM json_each(?2)",
                     (first + lo, json.dumps(list(texts[lo : lo + JSON_ROWS]), ensure_ascii=False)))


def next_ids(conn: Connection, table: str, n: int) -> range:
    """The ``n`` ids SQLite would give the next rows of ``table`` (above every id in it and, for an
    AUTOINCREMENT table, every id it ever gave), so that rows can be inserted in bulk with explicit ids."""
    if hasattr(conn, "reserve_ids"):  # PostgreSQL: the identity sequence moves past them (store.pg.dialect)
        return conn.reserve_ids(table, n)
    top = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
    seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    start = max(int(top), int(seq[0]) if seq else 0) + 1
    return range(start, start + n)
