"""The reads the indexer makes of the store's documents, chunks and statistics, by name (the SQL stays here)."""

from __future__ import annotations

import json

from pathweaver.store.db import Connection

# the tables whose sizes the indexer reports or checks; a name outside this set is a programming error
COUNTED_TABLES = frozenset({"chunks", "entities", "relations", "mentions", "synonyms", "name_mentions"})
StoredChunk = tuple[int, int, int, str, list[str], int]  # id, start, end, text, grams, n_words (not writes.ChunkRow)


def row_count(conn: Connection, table: str) -> int:
    """How many rows ``table`` (one of ``COUNTED_TABLES``) holds."""
    if table not in COUNTED_TABLES:
        raise ValueError(f"not a counted table: {table!r}")
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def known_documents(conn: Connection, machine_id: str) -> list[tuple[int, str, str, float, int, str, str]]:
    """Every document row of machine ``machine_id`` (``store.machine``): (id, path, content_hash, mtime, size,
    status, reason). Another machine's files are not this one's to scan, stat or delete."""
    return conn.execute("SELECT id, path, content_hash, mtime, size, status, reason FROM documents WHERE machine = ?",
                        (machine_id,)).fetchall()


def embedders_of(conn: Connection, targets: list[str], machine_id: str) -> list[str]:
    """The paths of machine ``machine_id``'s indexed documents that embed any of ``targets`` (``writes.set_embeds``
    keys)."""
    if not targets:
        return []
    marks = ",".join("?" * len(targets))
    return [r[0] for r in conn.execute(
        f"SELECT DISTINCT d.path FROM embeds e JOIN documents d ON d.id = e.doc_id WHERE e.target IN ({marks}) "
        "AND d.machine = ? ORDER BY d.path", [*targets, machine_id])]


def document_chunk_grams(conn: Connection, doc_id: int) -> list[list[str]]:
    """The n-grams of each of a document's chunks."""
    return [json.loads(g) for (g,) in conn.execute("SELECT grams FROM chunks WHERE doc_id = ?", (doc_id,))]


def document_structure(conn: Connection, doc_id: int) -> tuple[str, list[list[object]], list[str]] | None:
    """A document's stored title, headings and links, None when it has no row."""
    row = conn.execute("SELECT title, headings, links FROM documents WHERE id = ?", (doc_id,)).fetchone()
    return None if row is None else (row[0], json.loads(row[1]), json.loads(row[2]))


def document_chunk_ids(conn: Connection, doc_id: int) -> list[int]:
    """The ids of a document's chunks."""
    return [r[0] for r in conn.execute("SELECT id FROM chunks WHERE doc_id = ?", (doc_id,))]


def stored_chunks(conn: Connection, doc_id: int | None = None) -> list[tuple[int, StoredChunk]]:
    """(document id, chunk row) of every chunk, or of one document's, in chunk id order."""
    sql = "SELECT doc_id, id, start, end, text, grams, n_words FROM chunks"
    rows = conn.execute(f"{sql} ORDER BY id").fetchall() if doc_id is None else \
        conn.execute(f"{sql} WHERE doc_id = ? ORDER BY id", (doc_id,)).fetchall()
    return [(r[0], (r[1], r[2], r[3], r[4], json.loads(r[5]), r[6])) for r in rows]


def all_gram_df(conn: Connection) -> dict[str, int]:
    """Every gram's document frequency."""
    return dict(conn.execute("SELECT gram, df FROM gram_df").fetchall())


def indexed_structures(conn: Connection) -> list[tuple[int, str, str, str]]:
    """(id, title, headings JSON, links JSON) of every indexed document, by path (then machine)."""
    return conn.execute("SELECT id, title, headings, links FROM documents WHERE status = 'indexed' "
                        "ORDER BY path, machine").fetchall()


def max_entity_id(conn: Connection) -> int | None:
    """The largest entity id, None for a store without entities."""
    top = conn.execute("SELECT max(id) FROM entities").fetchone()[0]
    return None if top is None else int(top)


