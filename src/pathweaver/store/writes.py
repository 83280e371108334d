"""Every INSERT/UPDATE/DELETE of the store's documents, chunks, caches, folders and meta, as small functions
called inside ``Database.write()``; the derived graph's writes are ``store.graph_writes``.

FTS5 and vec0 virtual tables do not follow foreign keys, so every function that removes a chunk also removes its
FTS and vector rows (rowid = owning row id), and first stores as text the descriptions that its removal would
change (``graph_writes.store_descriptions_of``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pathweaver.store.bm25_terms import write_postings
from pathweaver.store.bulk import in_batches
from pathweaver.store.db import Connection
from pathweaver.store.graph_writes import store_descriptions_of
from pathweaver.store.machine import this_machine


@dataclass(frozen=True)
class ChunkRow:
    """One chunk to insert; ``grams`` are candidate n-gram counts, ``n_words`` is |t| (AGRAG Eq. 2); ``start``/``end``
    index the parsed text, ``file_start``/``file_end`` the decoded file (None: see ``locator``)."""

    ord: int
    start: int
    end: int
    n_tokens: int
    text: str
    heading: str
    grams: Mapping[str, int]
    n_words: int
    file_start: int | None = None
    file_end: int | None = None
    locator: str = ""
    cite_doc: str | None = None  # the embedded file this chunk's text comes from (``ingest.embeds``), else None


def text_hash(text: str, space: str = "") -> str:
    """Key of ``embed_cache``: sha1 of the UTF-8 text, or of ``space``, a 0x1f byte and the text for vectors made
    another way than float32 model passes (``space`` = "bfloat16": a bfloat16 word vector never serves as a chunk's)."""
    return hashlib.sha1((f"{space}\x1f{text}" if space else text).encode("utf-8")).hexdigest()


def _blob(vec: np.ndarray) -> bytes:
    return np.ascontiguousarray(vec, dtype=np.float32).tobytes()






# -- embed cache ---------------------------------------------------------------------------------------------
def _cached_by_text(conn: Connection, table: str, column: str, texts: Iterable[str], space: str) -> dict[str, Any]:
    """``column`` of the rows of a cache ``table`` keyed by ``text_hash(text, space)``, for the texts that have one."""
    by_hash = {text_hash(t, space): t for t in texts}
    out: dict[str, Any] = {}
    keys = list(by_hash)
    for part in in_batches(keys):
        marks = ",".join("?" * len(part))
        for h, value in conn.execute(f"SELECT text_hash, {column} FROM {table} WHERE text_hash IN ({marks})", part):
            out[by_hash[h]] = value
    return out


def cache_get(conn: Connection, texts: Iterable[str], space: str = "") -> dict[str, np.ndarray]:
    """Cached vectors for those of ``texts`` that have one (in key space ``space``, see ``text_hash``)."""
    blobs = _cached_by_text(conn, "embed_cache", "vector", texts, space)
    return {t: np.frombuffer(blob, dtype=np.float32) for t, blob in blobs.items()}


def cache_put(conn: Connection, vectors: Mapping[str, np.ndarray], space: str = "") -> None:
    """Cache vectors by text (in key space ``space``), in key order: the rows then go to the table's B-tree in
    its own order instead of at random."""
    conn.executemany(
        "INSERT OR IGNORE INTO embed_cache(text_hash, vector) VALUES (?, ?)",
        sorted((text_hash(t, space), _blob(v)) for t, v in vectors.items()),
    )


def ner_cache_get(conn: Connection, texts: Iterable[str], space: str) -> dict[str, list[tuple[str, str]]]:
    """Cached entity spans [(label, text)] for those of ``texts`` that have them (``space`` = "ner:<model>")."""
    found = _cached_by_text(conn, "ner_cache", "spans", texts, space)
    return {t: [(label, text) for label, text in json.loads(spans)] for t, spans in found.items()}


def ner_cache_put(conn: Connection, spans: Mapping[str, Sequence[tuple[str, str]]], space: str) -> None:
    """Cache entity spans by text, in key order (as ``cache_put``)."""
    conn.executemany(
        "INSERT OR IGNORE INTO ner_cache(text_hash, spans) VALUES (?, ?)",
        sorted((text_hash(t, space), json.dumps([list(x) for x in v], ensure_ascii=False)) for t, v in spans.items()),
    )


@contextlib.contextmanager
def savepoint(conn: Connection) -> Iterator[None]:
    """A transaction nested in the open one: when the block raises, what it wrote is undone and the rest stays."""
    conn.execute("SAVEPOINT pathweaver_one")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO pathweaver_one")
        conn.execute("RELEASE pathweaver_one")
        raise
    conn.execute("RELEASE pathweaver_one")


# -- folders -------------------------------------------------------------------------------------------------
def set_folder(conn: Connection, machine_id: str, path: str, state: str | None, now: float) -> None:
    """Record machine ``machine_id``'s folder ``path`` as 'watched', 'indexed' or 'removed'; None forgets it."""
    if state is None:
        conn.execute("DELETE FROM folders WHERE machine = ? AND path = ?", (machine_id, path))
        return
    conn.execute("INSERT INTO folders(machine, path, state, changed_at) VALUES (?, ?, ?, ?) ON CONFLICT(machine, path) "
                 "DO UPDATE SET state = excluded.state, changed_at = excluded.changed_at",
                 (machine_id, path, state, now))


def readmit_folder(conn: Connection, machine_id: str, path: str) -> None:
    """Forget every 'removed' folder of machine ``machine_id`` at or under ``path`` (it is being added again)."""
    conn.execute("DELETE FROM folders WHERE machine = ? AND state = 'removed' AND (path = ? OR "
                 "substr(path, 1, length(?) + 1) = ?)", (machine_id, path, path, path.rstrip("/") + "/"))


# -- documents -----------------------------------------------------------------------------------------------
def upsert_document(
    conn: Connection,
    path: str,
    *,
    machine_id: str | None = None,
    title: str = "",
    content_hash: str = "",
    mtime: float = 0.0,
    size: int = 0,
    status: str = "indexed",
    reason: str = "",
    indexed_at: float = 0.0,
    headings: Sequence[tuple[int, str]] = (),
    links: Sequence[str] = (),
) -> int:
    """Insert or update the row of machine ``machine_id``'s file ``path`` (None: this machine's,
    ``store.machine``); returns its id (kept across updates)."""
    machine_id = this_machine().id if machine_id is None else machine_id
    conn.execute(
        "INSERT INTO documents(machine, path, title, content_hash, mtime, size, status, reason, indexed_at, headings, "
        "links) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(machine, path) DO UPDATE SET title = excluded.title, "
        "content_hash = excluded.content_hash, mtime = excluded.mtime, size = excluded.size, "
        "status = excluded.status, reason = excluded.reason, indexed_at = excluded.indexed_at, "
        "headings = excluded.headings, links = excluded.links",
        (machine_id, path, title, content_hash, mtime, size, status, reason, indexed_at,
         json.dumps([list(h) for h in headings]), json.dumps(list(links))),
    )
    return int(conn.execute("SELECT id FROM documents WHERE machine = ? AND path = ?", (machine_id, path)).fetchone()[0])


def update_document_stat(conn: Connection, doc_id: int, mtime: float, size: int) -> None:
    conn.execute("UPDATE documents SET mtime = ?, size = ? WHERE id = ?", (mtime, size, doc_id))


def rename_document(conn: Connection, doc_id: int, new_path: str, mtime: float, size: int, title: str,
                    headings: Sequence[tuple[int, str]], links: Sequence[str]) -> None:
    """Move a document row to ``new_path`` in place: chunk ids, chunk vectors and mentions stay."""
    conn.execute(
        "UPDATE documents SET path = ?, mtime = ?, size = ?, title = ?, headings = ?, links = ? WHERE id = ?",
        (new_path, mtime, size, title, json.dumps([list(h) for h in headings]), json.dumps(list(links)), doc_id),
    )
    rows = conn.execute("SELECT id, text FROM chunks WHERE doc_id = ?", (doc_id,)).fetchall()
    conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", [(cid,) for cid, _ in rows])
    conn.executemany(
        "INSERT INTO chunks_fts(rowid, text, title) VALUES (?, ?, ?)", [(cid, text, title) for cid, text in rows]
    )
    write_postings(conn, [(cid, text, title) for cid, text in rows])


def delete_document(conn: Connection, doc_id: int) -> int:
    """Remove a document, its chunks and everything hanging off them; returns the number of chunks removed."""
    n = delete_document_chunks(conn, doc_id)
    conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
    return n


def set_embeds(conn: Connection, doc_id: int, targets: Sequence[str]) -> None:
    """The names document ``doc_id`` embeds (``ingest.embeds.embed_key``), replacing what it embedded before."""
    conn.execute("DELETE FROM embeds WHERE doc_id = ?", (doc_id,))
    conn.executemany("INSERT OR IGNORE INTO embeds(doc_id, target) VALUES (?, ?)", [(doc_id, t) for t in targets])


# -- chunks --------------------------------------------------------------------------------------------------
def insert_chunks(conn: Connection, doc_id: int, title: str, rows: Sequence[ChunkRow], vecs: np.ndarray,
                  count_grams: bool = True) -> list[int]:
    """Insert chunks with their FTS row, BM25 postings, vector row and (unless ``count_grams`` is False: the caller adds a whole
    batch's with ``add_gram_df``) gram_df increments; returns the new chunk ids."""
    ids: list[int] = []
    for row, vec in zip(rows, vecs, strict=True):
        cur = conn.execute(
            "INSERT INTO chunks(doc_id, ord, start, end, n_tokens, text, heading, grams, n_words, file_start, file_end, "
            "locator, cite_doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (doc_id, row.ord, row.start, row.end, row.n_tokens, row.text, row.heading,
             json.dumps(dict(row.grams), ensure_ascii=False, sort_keys=True), row.n_words, row.file_start,
             row.file_end, row.locator, row.cite_doc),
        )
        cid = int(cur.lastrowid)
        ids.append(cid)
        conn.execute("INSERT INTO chunks_fts(rowid, text, title) VALUES (?, ?, ?)", (cid, row.text, title))
        conn.execute("INSERT INTO chunk_vec(rowid, embedding) VALUES (?, ?)", (cid, _blob(vec)))
    write_postings(conn, [(cid, row.text, title) for cid, row in zip(ids, rows, strict=True)])
    if count_grams:
        add_gram_df(conn, gram_counts(rows))
    return ids


def gram_counts(rows: Iterable[ChunkRow]) -> Counter[str]:
    """In how many of ``rows`` each gram occurs (their gram_df increments)."""
    counts: Counter[str] = Counter()
    for row in rows:
        counts.update(row.grams.keys())
    return counts


def add_gram_df(conn: Connection, counts: Mapping[str, int]) -> None:
    """Add ``counts`` to gram_df, in key order: one upsert per gram, not per chunk and gram, and the B-tree
    visited in its own order."""
    conn.executemany("INSERT INTO gram_df(gram, df) VALUES (?, ?) ON CONFLICT(gram) DO UPDATE SET df = df + excluded.df",
                     sorted(counts.items()))


def delete_document_chunks(conn: Connection, doc_id: int) -> int:
    """Remove a document's chunks (mentions and relation sources cascade), their FTS/vector rows and their df."""
    rows = conn.execute("SELECT id, grams FROM chunks WHERE doc_id = ?", (doc_id,)).fetchall()
    store_descriptions_of(conn, [cid for cid, _ in rows])
    for cid, grams_json in rows:
        grams = [(g,) for g in json.loads(grams_json)]
        conn.executemany("UPDATE gram_df SET df = df - 1 WHERE gram = ?", grams)
        conn.executemany("DELETE FROM gram_df WHERE gram = ? AND df <= 0", grams)
        conn.execute("DELETE FROM chunks_fts WHERE rowid = ?", (cid,))
        conn.execute("DELETE FROM chunk_vec WHERE rowid = ?", (cid,))
    conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
    return len(rows)
