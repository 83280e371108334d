"""BM25 from each query term's postings read from the store: what a store too large to hold all its postings
(``bm25.MAX_POSTINGS``) ranks with, the same scores as ``bm25.Bm25Index``.

A ``Bm25Lengths`` holds the rows' length norms at one store version (8 bytes a chunk: N and avgdl follow from
them); a query reads its terms' postings from ``chunk_terms`` by its primary key (``term_postings``; on
PostgreSQL ``pg.search.term_postings``), and ``bm25.rank`` adds them up. ``chunk_terms`` holds FTS5's own terms
(``store.fts_tokens``): FTS5's instance table serves one term too, but one row per occurrence, ~1.2 s a million,
where a term in every chunk of 100k has ~4M. A SQLite store keeps ``chunk_terms`` only once it holds more than
``MAX_POSTINGS`` tokens (``keep_postings``, at the end of an index run: filled from FTS5's index, then written with
the chunks by ``write_postings``): below that every posting is read into memory, and the table would cost a
personal store ~40% of its size and its index run a second tokenisation for nothing. Until it is kept a large
store's queries ask FTS5 (``read_ranking`` gives None).
Postings read are kept, the most recently asked first, up to ``CACHE_BYTES``: a common term, whose postings are
long and cost most to read, is asked by many questions, and a server's memory stays bounded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from pathweaver.store import bm25
from pathweaver.store.bm25 import Bm25Index, Postings, length_norms, rank, read_index, read_sizes, rows_of
from pathweaver.store.db import Connection
from pathweaver.store.fts_tokens import Fts5Tokenizer
from pathweaver.store.meta import meta_value, set_meta
from pathweaver.store.pg.dialect import is_pg

CACHE_BYTES = 64 << 20  # postings kept per store version (8 bytes a posting)
KEPT = "chunk_terms"  # meta key: "1" once a SQLite store keeps its postings in chunk_terms
# {term: (chunk ids, occurrences)} of the asked terms that some chunk holds, read at the index's version
ReadPostings = Callable[[list[str]], dict[str, tuple[np.ndarray, np.ndarray]]]
_NONE = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32))


class MismatchError(Exception):
    """A term's postings name a chunk the lengths do not hold: they were not read at one store version."""


class Bm25Lengths:
    """The rows' BM25 length norms at store ``version``; ``top`` ranks from the query terms' postings."""

    def __init__(self, version: int, ids: np.ndarray, norms: np.ndarray) -> None:
        self.version = version
        self.ids = ids  # (n_rows,) chunk ids, ascending
        self.norms = norms  # (n_rows,) k1 * (1 - b + b * D / avgdl): ``bm25.length_norms``
        self._kept: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def n_rows(self) -> int:
        return len(self.ids)

    def kept_bytes(self) -> int:
        """Bytes of the postings kept."""
        with self._lock:
            return self._bytes

    def top(self, terms: list[str], k: int, read: ReadPostings) -> list[tuple[int, float]]:
        """The ``k`` best rows matching any of ``terms`` (one per query phrase, in order) as ``(chunk id, score)``,
        highest first, ties by chunk id: ``bm25.rank`` of the terms' postings, those not kept read with one call of
        ``read`` (inside the caller's read transaction at ``version``). Raises ``MismatchError`` when the postings
        are not of this version's rows."""
        asked = list(dict.fromkeys(terms))
        with self._lock:
            kept = {t: self._kept[t] for t in asked if t in self._kept}
            for t in kept:
                self._kept.move_to_end(t)
        missing = [t for t in asked if t not in kept]
        if missing:
            got = read(missing)
            kept.update({t: self._keep(t, *got[t]) if t in got else _NONE for t in missing})
        return rank(self.ids, self.norms, [_as_postings(kept[t]) for t in terms], k)

    def _keep(self, term: str, docs: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = rows_of(self.ids, docs)
        if rows is None:
            raise MismatchError(f"postings of {term!r} name chunks not in the store version {self.version}")
        kept = (rows.astype(np.int32), np.asarray(counts).astype(np.float32))  # exact: counts are small integers
        size = kept[0].nbytes + kept[1].nbytes
        with self._lock:
            if term not in self._kept and size <= CACHE_BYTES:
                self._kept[term] = kept
                self._bytes += size
                while self._bytes > CACHE_BYTES:
                    _, (r, f) = self._kept.popitem(last=False)
                    self._bytes -= r.nbytes + f.nbytes
        return kept


def _as_postings(kept: tuple[np.ndarray, np.ndarray]) -> Postings | None:
    """Kept postings as ``bm25.rank`` takes them (it computes in float64 from any dtype, so no copy here), None
    for a term no row has."""
    rows, freqs = kept
    if not len(rows):
        return None
    return rows, freqs


Bm25Ranking = Bm25Index | Bm25Lengths


def read_ranking(conn: Connection, version: int) -> Bm25Ranking | None:
    """What a SQLite store's BM25 ranks with at ``version`` (inside the caller's read transaction): every posting
    in memory up to ``MAX_POSTINGS`` tokens, else the rows' lengths alone; None when FTS5's rows are not exactly
    the chunks (FTS5 answers then)."""
    sizes = read_sizes(conn)
    if sizes is None:
        return None
    ids, lengths = sizes
    if int(lengths.sum()) > bm25.MAX_POSTINGS:
        return Bm25Lengths(version, ids, length_norms(lengths)) if postings_kept(conn) else None
    return read_index(conn, version, sizes)


def postings_kept(conn: Connection) -> bool:
    """Whether a SQLite store keeps its postings in ``chunk_terms`` (module docstring; never set on PostgreSQL)."""
    return meta_value(conn, KEPT) == "1"


def wants_postings(conn: Connection) -> bool:
    """Whether a SQLite store has grown past ``MAX_POSTINGS`` tokens without keeping its postings yet (PostgreSQL
    always keeps its own)."""
    if is_pg(conn) or postings_kept(conn):
        return False
    sizes = read_sizes(conn)
    return sizes is not None and int(sizes[1].sum()) > bm25.MAX_POSTINGS


def keep_postings(conn: Connection) -> None:
    """Start keeping a SQLite store's postings if it ``wants_postings`` (inside the caller's write transaction):
    ``chunk_terms`` filled from FTS5's index, rows of deleted chunks left out, the rows ``write_postings`` would
    have made."""
    if not wants_postings(conn):
        return
    conn.execute("DELETE FROM chunk_terms")
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.pw_fill_vocab USING fts5vocab(main, chunks_fts, instance)")
    conn.execute("INSERT INTO chunk_terms(term, chunk_id, tf) SELECT term, doc, count(*) FROM temp.pw_fill_vocab "
                 "WHERE doc IN (SELECT id FROM chunks) GROUP BY term, doc")
    conn.execute("DROP TABLE temp.pw_fill_vocab")
    set_meta(conn, KEPT, "1")


def term_postings(conn: Connection, terms: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{term: (chunk ids ascending, occurrences)} of ``terms`` in a SQLite store's ``chunk_terms``: one range of
    its primary key each, read as two strings and parsed by numpy (no Python object per row)."""
    out = {}
    for term in terms:
        ids, tfs = conn.execute("SELECT group_concat(chunk_id, ' '), group_concat(tf, ' ') FROM chunk_terms "
                                "WHERE term = ?", (term,)).fetchone()
        if ids:
            out[term] = np.fromstring(ids, dtype=np.int64, sep=" "), np.fromstring(tfs, dtype=np.int64, sep=" ")
    return out


_tokenizer: list[Fts5Tokenizer] = []
_tokenizer_lock = threading.Lock()


def write_postings(conn: Connection, rows: Sequence[tuple[int, str, str]]) -> None:
    """``chunk_terms`` rows of each ``(chunk id, text, title)`` of a SQLite store, replacing any the chunk had
    (inside the caller's write transaction): FTS5's terms of both columns with their occurrences, as ``chunks_fts``
    indexes them; nothing while the store does not keep its postings (``keep_postings``), which PostgreSQL's never
    does: its dialect writes its own with the ``chunks_fts`` rows."""
    if not rows or not postings_kept(conn):
        return
    conn.executemany("DELETE FROM chunk_terms WHERE chunk_id = ?", [(cid,) for cid, _, _ in rows])
    with _tokenizer_lock:
        if not _tokenizer:
            _tokenizer.append(Fts5Tokenizer())  # one per process: thread-safe, made on first use
    counts = _tokenizer[0].postings([(text, title) for _, text, title in rows])
    # in key order: the B-tree is visited in its own order, not once per chunk across the whole vocabulary
    conn.executemany("INSERT INTO chunk_terms(term, chunk_id, tf) VALUES (?, ?, ?)",
                     sorted((term, cid, tf) for (cid, _, _), terms in zip(rows, counts, strict=True)
                            for term, tf in terms.items()))
