"""Records read from the store for people and tools: stats, documents and their chunks, entity cards, the graph
without store ids (for comparing stores), whole tables for export, and the full-text searches (BM25 over chunks,
entity names). ``reads.StoreReader`` adds the graph snapshot on top.

Every multi-statement read runs in one read transaction, so it sees one committed version even while the indexer
writes (WAL).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from pathweaver.config import ConfigError
from pathweaver.store.bm25 import Bm25Index, query_terms
from pathweaver.store.bm25_terms import Bm25Lengths, Bm25Ranking, MismatchError, read_ranking, term_postings
from pathweaver.store.columns import FILE_SPAN, cited_doc
from pathweaver.store.db import Connection, Database
from pathweaver.store.machine import this_machine
from pathweaver.store.machines import doc_path, machine_counts
from pathweaver.store.pg.dialect import is_pg
from pathweaver.store.schema import DESCRIPTION, SOURCE_SENTENCE
from pathweaver.store.snapshot import file_span_json
from pathweaver.text import POSSESSIVE_RE, is_stopword, normalize

EXPORT_TABLES = ("documents", "chunks", "entities", "relations", "mentions", "relation_sources", "synonyms")
# Every relation row with its description as read (``schema.DESCRIPTION``: stored, or its first source's sentence).
RELATION_ROWS = (f"(SELECT r.id AS id, r.src_id AS src_id, r.dst_id AS dst_id, r.label AS label, r.kind AS kind, "
                 f"{DESCRIPTION} AS description FROM relations r)")
_FTS_TOKEN_RE = re.compile(r"[^\W_]+", re.UNICODE)
# A written word with its apostrophe parts ("don't", "Scrooge's"): stopwords are listed in that form.
_WORD_RE = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
# A chunk whose BM25 score is below this matched only words in more than half the chunks (FTS5 scores such a word
# 1e-6 per occurrence): beside chunks that share something specific with the question it is noise, not a hit.
MIN_BM25_SCORE = 1e-3
# chunk id, score, cited path, title, start, end, locator, text, the note's path (``columns.cited_doc``)
Bm25Row = tuple[int, float, str, str, int, int, str, str, str]


def fts_words(text: str) -> list[str]:
    """The distinct lower-cased words of ``text``, in order: the phrases of ``fts_query``."""
    return list(dict.fromkeys(t.lower() for t in _FTS_TOKEN_RE.findall(text or "")))


def bm25_words(text: str) -> list[str]:
    """``fts_words`` of the question's content words: stopwords go, with the possessive "'s" of a name, so a word
    every note holds ("the", "how") cannot rank a chunk above one that shares the question's subject."""
    kept = [w for w in _WORD_RE.findall(POSSESSIVE_RE.sub("", (text or "").replace("\u2019", "'")))
            if not is_stopword(w.lower())]
    return fts_words(" ".join(kept))


def specific(hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The hits above ``MIN_BM25_SCORE``, or all of them when none is: in a small store every word is in half the
    chunks, and a note that holds the question's word is still a hit there."""
    strong = [(c, s) for c, s in hits if s >= MIN_BM25_SCORE]
    return strong or hits


def fts_query(text: str) -> str:
    """A safe FTS5 MATCH expression: every word quoted, joined by OR ('' when there are no words)."""
    return " OR ".join(f'"{t}"' for t in fts_words(text))


class RecordReader:
    """Record reads over one ``Database`` connection (use one reader per thread)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @staticmethod
    def _path() -> str:
        """The path of document row ``d`` as this machine reads it (``machines.doc_path``)."""
        return doc_path(this_machine().id)

    @staticmethod
    def _cited() -> str:
        return cited_doc(this_machine().id)

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        """One read transaction (a consistent view) unless the connection is already inside one; ``self.db``'s own
        reads inside it (``version()``) see the same view, being on the same connection."""
        conn = self.db.conn
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    # -- stats -----------------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """The ``stats --json`` contract: counts, version, embedding model and skipped files with reasons."""
        with self._read() as conn:
            def count(sql: str) -> int:
                return int(conn.execute(sql).fetchone()[0])

            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            skipped = [{"path": p, "reason": r} for p, r in conn.execute(
                f"SELECT {self._path()} AS p, d.reason FROM documents d WHERE d.status = 'skipped' ORDER BY p")]
            return {
                "documents": count("SELECT count(*) FROM documents WHERE status = 'indexed'"),
                "chunks": count("SELECT count(*) FROM chunks"),
                "entities": count("SELECT count(*) FROM entities"),
                "relations": count("SELECT count(*) FROM relations"),
                "synonyms": count("SELECT count(*) FROM synonyms"),
                "mentions": count("SELECT count(*) FROM mentions"),
                "version": int(meta.get("store_version", 0)),
                "embedding_model": meta.get("embedding_model"),
                "embedding_dim": int(meta["embedding_dim"]) if meta.get("embedding_dim") else None,
                "skipped": skipped,
                "store": str(self.db.path),
                "schema_version": int(meta.get("schema_version", 0)),
                "last_refresh": float(meta["last_refresh"]) if meta.get("last_refresh") else None,
                "refresh_pending": meta.get("refresh_pending", "0") == "1",
                "changed_chunks_since_refresh": int(meta.get("changed_chunks", 0)),
                # the machines whose documents the store holds (``store.machine``); ``this``: the reader's own
                "machines": [{"name": name, "documents": n, "this": mid == this_machine().id}
                             for mid, name, n in machine_counts(conn)],
            }

    # -- documents and chunks --------------------------------------------------------------------------------
    def documents(self) -> list[dict[str, Any]]:
        rows = self.db.conn.execute(
            f"SELECT {self._path()} AS p, d.title, d.size, d.mtime, d.status, d.reason, "
            "(SELECT count(*) FROM chunks c WHERE c.doc_id = d.id) FROM documents d ORDER BY p"
        ).fetchall()
        keys = ("path", "title", "size", "mtime", "status", "reason", "chunks")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def document_chunks(self, path: str) -> list[dict[str, Any]]:
        rows = self.db.conn.execute(
            f"SELECT c.id, c.ord, {FILE_SPAN}, c.heading, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
            f"WHERE {self._path()} = ? ORDER BY c.ord", (path,)
        ).fetchall()
        return [{"chunk_id": r[0], "ord": r[1], **file_span_json(r[2], r[3], r[4]), "heading": r[5], "text": r[6]}
                for r in rows]

    def chunk(self, chunk_id: int) -> dict[str, Any] | None:
        r = self.db.conn.execute(
            f"SELECT c.id, {self._cited()}, d.title, c.ord, {FILE_SPAN}, c.heading, c.text FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id WHERE c.id = ?", (int(chunk_id),)
        ).fetchone()
        if r is None:
            return None
        return {"chunk_id": r[0], "doc": r[1], "title": r[2], "ord": r[3], **file_span_json(r[4], r[5], r[6]),
                "heading": r[7], "text": r[8]}

    # -- entities --------------------------------------------------------------------------------------------
    def entity(self, name: str) -> dict[str, Any] | None:
        """Entity card: mentions (doc, chunk, count), relations with sources, synonyms; None if unknown."""
        with self._read() as conn:
            row = conn.execute("SELECT id, name, kind FROM entities WHERE name = ?", (normalize(name),)).fetchone()
            if row is None:
                return None
            eid = row[0]
            mentions = [{"doc": r[0], "chunk_id": r[1], "count": r[2], "score": r[3]} for r in conn.execute(
                f"SELECT {self._path()}, m.chunk_id, m.count, m.score FROM mentions m JOIN chunks c "
                "ON c.id = m.chunk_id "
                "JOIN documents d ON d.id = c.doc_id WHERE m.entity_id = ? ORDER BY m.count DESC, m.chunk_id",
                (eid,))]
            relations = []
            for rid, src, dst, label, desc, kind in conn.execute(
                f"SELECT r.id, s.name, t.name, r.label, {DESCRIPTION}, r.kind FROM relations r "
                "JOIN entities s ON s.id = r.src_id JOIN entities t ON t.id = r.dst_id "
                "WHERE r.src_id = ? OR r.dst_id = ? ORDER BY r.id", (eid, eid)
            ).fetchall():
                # cited by the supporting chunk's span in the file, which holds the sentence (``description``)
                sources = [{"doc": p, "chunk_id": c, **file_span_json(a, b, loc)} for p, c, a, b, loc in conn.execute(
                    f"SELECT {self._path()}, s.chunk_id, {FILE_SPAN} FROM relation_sources s JOIN chunks c ON "
                    "c.id = s.chunk_id JOIN documents d ON d.id = c.doc_id WHERE s.relation_id = ? ORDER BY s.chunk_id",
                    (rid,))]
                relations.append({
                    "id": rid, "src": src, "dst": dst, "label": label, "description": desc, "kind": kind,
                    "direction": "out" if src == row[1] else "in", "other": dst if src == row[1] else src,
                    "sources": sources,
                })
            synonyms = [{"name": n, "cos": float(c)} for n, c in conn.execute(
                "SELECT e.name, s.cos FROM synonyms s JOIN entities e ON e.id = CASE WHEN s.a_id = ? THEN s.b_id "
                "ELSE s.a_id END WHERE s.a_id = ? OR s.b_id = ? ORDER BY s.cos DESC", (eid, eid, eid))]
        return {"id": eid, "name": row[1], "kind": row[2], "mentions": mentions, "relations": relations,
                "synonyms": synonyms}

    def canonical_graph(self) -> dict[str, set[tuple[Any, ...]]]:
        """The graph without store ids: entity names, (src, dst, label) relations, (entity, chunk text, count)
        mentions and synonym name pairs, the chunks with their citations, their BM25 postings (path, ord, term,
        occurrences) and the embeds each document names;
        two stores of the same corpus compare equal on it."""
        with self._read() as conn:
            return {
                "chunks": set(conn.execute(
                    f"SELECT {self._path()}, c.ord, c.text, {self._cited()}, {FILE_SPAN} FROM chunks c "
                    "JOIN documents d ON d.id = c.doc_id").fetchall()),
                "embeds": set(conn.execute(
                    f"SELECT {self._path()}, e.target FROM embeds e JOIN documents d ON d.id = e.doc_id").fetchall()),
                "entities": set(conn.execute("SELECT name, kind FROM entities").fetchall()),
                "relations": set(conn.execute(
                    "SELECT s.name, t.name, r.label FROM relations r JOIN entities s ON s.id = r.src_id "
                    "JOIN entities t ON t.id = r.dst_id").fetchall()),
                "mentions": set(conn.execute(
                    "SELECT e.name, c.text, m.count FROM mentions m JOIN entities e ON e.id = m.entity_id "
                    "JOIN chunks c ON c.id = m.chunk_id").fetchall()),
                "postings": set(conn.execute(
                    f"SELECT {self._path()}, c.ord, t.term, t.tf FROM chunk_terms t JOIN chunks c ON c.id = t.chunk_id "
                    "JOIN documents d ON d.id = c.doc_id").fetchall()),
                **self.canonical_names(conn),
                "synonyms": set(conn.execute(
                    "SELECT min(a.name, b.name), max(a.name, b.name) FROM synonyms s JOIN entities a ON a.id = s.a_id "
                    "JOIN entities b ON b.id = s.b_id").fetchall()),
            }

    def canonical_names(self, conn: Connection | None = None) -> dict[str, set[tuple[Any, ...]]]:
        """The name layer without store ids: (document path, name, kind) and (name, chunk text, count)."""
        conn = conn or self.db.conn
        return {
            "doc_names": set(conn.execute(
                f"SELECT {self._path()}, n.name, n.kind FROM doc_names n JOIN documents d "
                "ON d.id = n.doc_id").fetchall()),
            "link_names": set(conn.execute(
                f"SELECT {self._path()}, n.target, n.name FROM link_names n JOIN documents d "
                "ON d.id = n.doc_id").fetchall()),
            "name_rows": set(conn.execute(
                f"SELECT {self._path()}, n.name, n.kind FROM name_rows n JOIN documents d "
                "ON d.id = n.doc_id").fetchall()),
            "name_mentions": set(conn.execute(
                "SELECT e.name, c.text, m.count FROM name_mentions m JOIN entities e ON e.id = m.entity_id "
                "JOIN chunks c ON c.id = m.chunk_id").fetchall()),
        }

    # -- export ----------------------------------------------------------------------------------------------
    def table_rows(self, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """All rows of a whitelisted table (``EXPORT_TABLES``), with column names; chunk grams are left out."""
        if table not in EXPORT_TABLES:
            raise ConfigError(f"cannot export table {table!r}; choose one of {', '.join(EXPORT_TABLES)}")
        sql = f"SELECT * FROM {table}"
        if table == "relation_sources":  # the sentence column as it was stored before schema 6
            sql = (f"SELECT s.relation_id, s.chunk_id, s.start, s.end, {SOURCE_SENTENCE} AS sentence "
                   "FROM relation_sources s JOIN chunks c ON c.id = s.chunk_id")
        elif table == "documents":  # paths as this machine reads them (``machines.doc_path``), no machine ids
            sql = (f"SELECT d.id, {self._path()} AS path, d.title, d.content_hash, d.mtime, d.size, d.status, "
                   "d.reason, d.indexed_at, d.headings, d.links FROM documents d")
        elif table == "relations":  # descriptions as read, in the column order of before schema 8
            sql = f"SELECT id, src_id, dst_id, label, kind, description FROM {RELATION_ROWS}"
        cur = self.db.conn.execute(sql)
        columns = [d[0] for d in cur.description]
        rows = cur.fetchall()
        drop = [i for i, c in enumerate(columns) if c == "grams"]
        if drop:
            columns = [c for i, c in enumerate(columns) if i not in drop]
            rows = [tuple(v for i, v in enumerate(r) if i not in drop) for r in rows]
        return columns, rows

    # -- search ----------------------------------------------------------------------------------------------
    def bm25_index(self, version: int) -> Bm25Ranking | None:
        """What BM25 over the chunks ranks with at store ``version`` (``store.bm25``: every posting in memory, or
        past ``bm25.MAX_POSTINGS`` tokens the chunks' lengths alone); None when the store is no longer at that
        version, or its FTS rows are not exactly its chunks."""
        with self._read() as conn:
            now = self.db.version()
            if now != version:
                return None
            if is_pg(conn):
                from pathweaver.store.pg.reads import bm25_index

                return bm25_index(conn, version)
            return read_ranking(conn, version)

    def bm25_chunks(self, text: str, k: int, index: Bm25Ranking | None = None) -> list[tuple[int, float]]:
        """Top ``k`` chunks by FTS5 BM25 of the question's content words (``bm25_words``) as (chunk id, score),
        higher is better; punctuation-safe; none for a question of stopwords alone. Chunks that match only words in
        more than half the chunks are dropped when others match more (``specific``). With ``index`` (read at some
        store version) the same ranking and scores as FTS5 had at that version: from memory, or from the query
        terms' postings read now (``Bm25Lengths``: at the store's current version, its lengths read again if the
        store has moved on)."""
        words = bm25_words(text)
        if not words or k < 1:
            return []
        pg = is_pg(self.db.conn)
        if index is None and pg:  # no FTS5 to ask: the postings, at this version
            index = self.bm25_index(self.db.version())
        if index is not None:
            if pg:
                from pathweaver.store.pg.reads import query_terms as pg_terms

                terms = pg_terms(self.db.conn, words)
            else:
                terms = query_terms(self.db.conn, words)
            if terms is not None:
                hits = index.top(terms, k) if isinstance(index, Bm25Index) else self._term_top(index, terms, k)
                if hits is not None:
                    return specific(hits)
        rows = self.db.conn.execute(
            "SELECT rowid, bm25(chunks_fts) AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?",
            (" OR ".join(f'"{t}"' for t in words), int(k)),
        ).fetchall()
        return specific([(int(r[0]), -float(r[1])) for r in rows])

    def _term_top(self, index: Bm25Lengths, terms: list[str], k: int) -> list[tuple[int, float]] | None:
        """``Bm25Lengths.top`` from the terms' postings read in one read transaction at ``index``'s version, or
        at the store's current one with its lengths read again; None when no lengths can be read (FTS5 answers)."""
        with self._read() as conn:
            now = self.db.version()
            current: Bm25Ranking | None = index if index.version == now else self.bm25_index(now)
            if isinstance(current, Bm25Index):
                return current.top(terms, k)
            if current is None:
                return None
            if is_pg(conn):
                from pathweaver.store.pg.reads import term_postings as pg_postings

                return current.top(terms, k, lambda asked: pg_postings(conn, asked))
            try:
                return current.top(terms, k, lambda asked: term_postings(conn, asked))
            except MismatchError:  # chunk_terms and FTS5's rows disagree: FTS5's own ranking
                return None

    def bm25_rows(self, text: str, k: int, index: Bm25Ranking | None = None) -> list[Bm25Row]:
        """``bm25_chunks`` with each chunk's document path, title, span and text, as ``(chunk id, score, path,
        title, start, end, locator, text)`` (``FILE_SPAN``), read straight from the tables in one transaction: what a file committed a
        moment ago holds is found without waiting for a snapshot rebuild. ``index`` is used only while the store
        is still at its version."""
        with self._read() as conn:
            now = self.db.version()
            hits = self.bm25_chunks(text, k, index if index is not None and index.version == now else None)
            if not hits:
                return []
            marks = ",".join("?" * len(hits))
            rows = {r[0]: r[1:] for r in conn.execute(
                f"SELECT c.id, {self._cited()}, d.title, {FILE_SPAN}, c.text, {self._path()} FROM chunks c "
                "JOIN documents d "
                f"ON d.id = c.doc_id WHERE c.id IN ({marks})", [cid for cid, _ in hits]).fetchall()}
        return [(cid, score, *rows[cid]) for cid, score in hits if cid in rows]

    def find_entities(self, text: str, k: int = 10) -> list[dict[str, Any]]:
        """Entities whose name matches words of ``text`` (FTS5 BM25), best first."""
        query = fts_query(text)
        if not query or k < 1:
            return []
        if is_pg(self.db.conn):
            from pathweaver.store.pg.reads import find_entities

            return [{"id": r[0], "name": r[1], "kind": r[2], "score": float(r[3])}
                    for r in find_entities(self.db.conn, query, int(k))]
        rows = self.db.conn.execute(
            "SELECT e.id, e.name, e.kind, -bm25(entities_fts) FROM entities_fts JOIN entities e ON e.id = "
            "entities_fts.rowid WHERE entities_fts MATCH ? ORDER BY bm25(entities_fts) LIMIT ?",
            (query, int(k)),
        ).fetchall()
        return [{"id": r[0], "name": r[1], "kind": r[2], "score": float(r[3])} for r in rows]
