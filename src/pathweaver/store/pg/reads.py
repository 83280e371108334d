"""The reads of a PostgreSQL store that SQLite answers from FTS5 and vec0: BM25 postings of chunks and entity names,
FTS-style term matches, and the chunk vectors of the in-memory snapshot (``store.pg.dialect`` connections)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from pathweaver.store.bm25 import K1, B, Bm25Index
from pathweaver.store.bm25_terms import Bm25Ranking
from pathweaver.store.pg.search import read_index, read_vectors
from pathweaver.store.pg.search import term_postings as _term_postings


def bm25_index(conn: Any, version: int) -> Bm25Ranking | None:
    """What the chunks' BM25 ranks with, as SQLite's rows give it (``search.read_index``)."""
    return read_index(conn.raw, version)


def term_postings(conn: Any, terms: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{term: (chunk ids ascending, occurrences)} of the query's terms (``search.term_postings``)."""
    return _term_postings(conn.raw, terms)


def query_terms(conn: Any, phrases: list[str]) -> list[str] | None:
    """FTS5's porter terms of ``phrases`` (``bm25.query_terms``)."""
    return conn.chunk_tokens().terms(phrases)


def _quoted(query: str) -> list[str]:
    """The words of an FTS5 expression of quoted words joined by OR (``records.fts_query``)."""
    return [w.replace('""', '"') for w in re.findall(r'"((?:[^"]|"")*)"', query)]


def fts_chunk_ids(conn: Any, query: str) -> set[int]:
    """Chunks holding any term of ``query`` (an OR of quoted words), as FTS5's MATCH finds them."""
    terms = sorted({t for w in _quoted(query) for t in (conn.chunk_tokens().terms([w]) or [])})
    if not terms:
        return set()
    rows = conn.raw.execute("SELECT DISTINCT chunk_id FROM chunk_terms WHERE term = ANY(%s)", (terms,)).fetchall()
    return {int(r[0]) for r in rows}


def find_entities(conn: Any, query: str, k: int) -> list[tuple[int, str, str, float]]:
    """Entities whose name holds a term of ``query`` by FTS5's BM25 over ``entities_fts`` (one column, unicode61),
    best first, ties by id: (id, name, kind, score)."""
    terms = [t for w in _quoted(query) for t in (conn.name_tokens().terms([w]) or [])]
    if not terms:
        return []
    rows = conn.raw.execute("SELECT entity_id, sum(tf) FROM entity_terms GROUP BY entity_id ORDER BY entity_id"
                            ).fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    if not len(ids):
        return []
    length = np.array([r[1] for r in rows], dtype=np.float64)
    postings = conn.raw.execute("SELECT term, entity_id, tf FROM entity_terms WHERE term = ANY(%s) "
                                "ORDER BY term, entity_id", (sorted(set(terms)),)).fetchall()
    names: dict[str, int] = {}
    term_of = np.array([names.setdefault(p[0], len(names)) for p in postings], dtype=np.int64)
    index = Bm25Index(version=0, ids=ids, terms=names, starts=np.searchsorted(term_of, np.arange(len(names) + 1)),
                      rows=np.searchsorted(ids, np.array([p[1] for p in postings], dtype=np.int64)),
                      freqs=np.array([p[2] for p in postings], dtype=np.float64),
                      norms=K1 * (1 - B + B * length / (float(length.sum()) / len(ids))))
    hits = index.top(terms, k)
    if not hits:
        return []
    found = {r[0]: r for r in conn.raw.execute("SELECT id, name, kind FROM entities WHERE id = ANY(%s)",
                                               ([h[0] for h in hits],)).fetchall()}
    return [(eid, found[eid][1], found[eid][2], score) for eid, score in hits if eid in found]


def vectors(conn: Any, ids: np.ndarray, dim: int) -> np.ndarray:
    """The chunk vectors of the ascending ``ids`` (zeros where a chunk has none)."""
    got_ids, got = read_vectors(conn.raw, dim)
    out = np.zeros((len(ids), dim), dtype=np.float32)
    if not len(got_ids):
        return out
    if got_ids.shape == ids.shape and np.array_equal(got_ids, ids):
        return got
    pos = np.searchsorted(ids, got_ids)
    ok = (pos < len(ids)) & (ids[np.minimum(pos, len(ids) - 1)] == got_ids)
    out[pos[ok]] = got[ok]
    return out
