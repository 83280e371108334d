"""BM25 over the chunks, with exactly the scores of FTS5's ``bm25()`` on ``chunks_fts``, from postings in memory or
read per query term.

FTS5 ranks an OR of the question's words by scoring every row that matches any of them, and a question's "the" or
"of" matches nearly every chunk, so its cost grows with the store. Here ``rank`` adds up the postings of the
query's terms in numpy, fed by one of two sources with the same numbers:
- ``Bm25Index``: every posting, read once per store version (the tokens FTS5 itself indexed, from its
  ``fts5vocab`` instance table: porter-stemmed unicode61 terms of both columns): the fastest queries, while the
  store holds at most ``MAX_POSTINGS`` tokens;
- ``Bm25Lengths`` (``store.bm25_terms``): only the rows' lengths in memory (8 bytes a chunk), each query term's
  postings read from the store's ``chunk_terms`` table when asked (the latest ones kept), for a larger store,
  whose full postings would take too long to read and too much memory to hold.

The arithmetic is FTS5's, term for term and in the same order (``fts5Bm25Function`` in SQLite's
``fts5_aux.c``): for each phrase i of the query, in order,
    score += idf_i * ((f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl)))
with k1 = 1.2, b = 0.75, f_i the phrase's occurrences in the row (both columns, weight 1), D the row's tokens,
avgdl the mean over rows, and idf_i = ln((N - n_i + 0.5) / (n_i + 0.5)), or 1e-6 when that is not positive.
N and avgdl are counted from the rows as they are. FTS5's contentless-delete table keeps counting deleted rows in
both, so after deletes FTS5 drifts and these scores are those of a fresh index of the same chunks.
Every query phrase is one quoted word (``records.fts_query``); a word FTS5 would split into several tokens makes
``query_terms`` answer None, and the caller asks FTS5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pathweaver.numeric.projection import top_stable
from pathweaver.store.db import Connection

K1 = 1.2  # FTS5 bm25() constants (fts5_aux.c)
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's idf for a term in more than half the rows
# tokens (~40k chunks of 120 words); a larger store reads each query term's postings from the store instead of all
# of them into memory: at 100k chunks as fast a query, half the read after a change and ~100 MB less (postings39)
MAX_POSTINGS = 5_000_000
_VOCAB = "temp.pw_chunks_vocab"
_TERMS = "temp.pw_chunks_terms"
_QUERY = "temp.pw_query"
_QUERY_VOCAB = "temp.pw_query_vocab"
# one query term's postings: row positions (ascending) and the term's occurrences in each row
Postings = tuple[np.ndarray, np.ndarray]


def rank(ids: np.ndarray, norms: np.ndarray, postings: Sequence[Postings | None], k: int) -> list[tuple[int, float]]:
    """The ``k`` best rows matching any query phrase as ``(id, score)``, highest first, ties by id; ``postings``
    holds each phrase's postings in the query's order (None for a term no row has; rows of any integer type,
    occurrences of any float type holding integers). The scores are FTS5's
    ``-bm25()`` over the rows ``ids`` with length norms ``norms`` (``length_norms``)."""
    n = len(ids)
    scores = np.zeros(n, dtype=np.float64)
    for p in postings:
        if p is None:
            continue  # no row has it: every row's occurrence count is 0, so it adds 0.0
        at, f = p
        n_hit = len(at)
        idf = math.log((n - n_hit + 0.5) / (n_hit + 0.5))
        if idf <= 0.0:
            idf = IDF_FLOOR
        at = at.astype(np.intp, copy=False)  # once, not once per fancy index below
        # float64 arithmetic whatever ``f``'s float type: its small integers convert exactly, so the same bits
        scores[at] += idf * (np.multiply(f, K1 + 1.0, dtype=np.float64) / np.add(f, norms[at], dtype=np.float64))
    if k < 1:
        return []
    # ids ascend with the row, so ``top_stable``'s ties by lower position are ties by id, also at the k-th place;
    # it sorts only the rows at or above the k-th score, where a sort of every matching row grew as N log N
    best = top_stable(scores, k)
    best = best[scores[best] > 0.0]  # a row that matches scores above 0 (idf >= IDF_FLOOR, f >= 1): 0 is no match
    return list(zip(ids[best].tolist(), scores[best].tolist(), strict=True))


def length_norms(lengths: np.ndarray) -> np.ndarray:
    """k1 * (1 - b + b * D / avgdl) of rows of ``lengths`` tokens (integers), avgdl their mean."""
    total = int(np.asarray(lengths, dtype=np.int64).sum())
    avgdl = float(total) / float(len(lengths)) if len(lengths) and total else 1.0  # no token: no term scores
    return K1 * (1 - B + B * np.asarray(lengths, dtype=np.float64) / avgdl)


@dataclass(frozen=True)
class Bm25Index:
    """Per-term postings of the chunks' FTS5 tokens at store version ``version``, all in memory."""

    version: int
    ids: np.ndarray  # (n_rows,) chunk ids (FTS rowids), ascending
    terms: dict[str, int]  # term -> posting list
    starts: np.ndarray  # (n_terms + 1,) posting list bounds into ``rows`` and ``freqs``
    rows: np.ndarray  # row positions (into ``ids``), ascending within a term
    freqs: np.ndarray  # float64 occurrences of the term in the row
    norms: np.ndarray  # (n_rows,) k1 * (1 - b + b * D / avgdl)

    @property
    def n_rows(self) -> int:
        return len(self.ids)

    def postings(self, term: str) -> Postings | None:
        j = self.terms.get(term)
        if j is None:
            return None
        a, b = int(self.starts[j]), int(self.starts[j + 1])
        return self.rows[a:b], self.freqs[a:b]

    def top(self, terms: list[str], k: int) -> list[tuple[int, float]]:
        """The ``k`` best rows matching any of ``terms`` (one per query phrase, in order) as ``(chunk id,
        score)``, highest first; ties by chunk id (``rank``)."""
        return rank(self.ids, self.norms, [self.postings(t) for t in terms], k)


def read_index(conn: Connection, version: int,
               sizes: tuple[np.ndarray, np.ndarray] | None = None) -> Bm25Index | None:
    """Read the postings of ``chunks_fts`` (inside the caller's read transaction, at store ``version``; ``sizes``:
    ``read_sizes``, if read already); None when FTS5's rows are not exactly the chunks.

    The instance table lists tokens in term order, so only its row ids are read (one string, parsed by numpy);
    which term each belongs to follows from the row vocabulary's per-term token counts, and the per-term row
    counts it also gives are checked against the postings, the rows' token counts against FTS5's sizes."""
    sizes = sizes if sizes is not None else read_sizes(conn)
    if sizes is None:
        return None
    ids, lengths = sizes
    total = int(lengths.sum())
    if not len(ids) or not total:
        return Bm25Index(version, ids, {}, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                         np.zeros(0), length_norms(lengths))
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB} USING fts5vocab(main, chunks_fts, instance)")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_TERMS} USING fts5vocab(main, chunks_fts, row)")
    vocab = conn.execute(f"SELECT term, doc, cnt FROM {_TERMS}").fetchall()
    tokens = np.array([v[2] for v in vocab], dtype=np.int64)
    text = conn.execute(f"SELECT group_concat(doc, ' ') FROM {_VOCAB}").fetchone()[0]
    docs = np.fromstring(text or "", dtype=np.int64, sep=" ")  # text mode: not the deprecated binary one
    if len(docs) != total or int(tokens.sum()) != total:
        return None
    row_of = rows_of(ids, docs)
    if row_of is None:
        return None  # an FTS row that is no chunk (a deleted row still listed)
    if not np.array_equal(np.bincount(row_of, minlength=len(ids)), lengths):
        return None  # FTS5's sizes are not the tokens it indexed
    term_of = np.repeat(np.arange(len(vocab), dtype=np.int64), tokens)
    pair, count = np.unique(term_of * len(ids) + row_of, return_counts=True)  # (term, row), sorted, counted
    pair_term, pair_row = pair // len(ids), pair % len(ids)
    starts = np.searchsorted(pair_term, np.arange(len(vocab) + 1))
    if not np.array_equal(np.diff(starts), np.array([v[1] for v in vocab], dtype=np.int64)):
        return None  # the instance table did not list the tokens in the row vocabulary's term order
    return Bm25Index(version=version, ids=ids, terms={v[0]: i for i, v in enumerate(vocab)}, starts=starts,
                     rows=pair_row, freqs=count.astype(np.float64), norms=length_norms(lengths))


def rows_of(ids: np.ndarray, docs: np.ndarray) -> np.ndarray | None:
    """The positions in ``ids`` (ascending) of ``docs``; None when one is not there."""
    if not len(ids):
        return None if len(docs) else np.zeros(0, dtype=np.int64)
    row_of = np.searchsorted(ids, docs)
    if (row_of >= len(ids)).any() or (ids[np.minimum(row_of, len(ids) - 1)] != docs).any():
        return None
    return row_of


COLUMNS = 2  # chunks_fts's columns (text, title): one size each in a docsize record


def read_sizes(conn: Connection) -> tuple[np.ndarray, np.ndarray] | None:
    """(chunk ids ascending, their tokens in ``chunks_fts``: D) from FTS5's per-row sizes (its ``docsize`` table:
    a record of one varint per column, as ``xColumnSize`` reads it for ``bm25()``); None when FTS5's rows are not
    exactly the chunks. Read as three strings, parsed in numpy: no Python object per row."""
    ids = np.array([r[0] for r in conn.execute("SELECT id FROM chunks ORDER BY id")], dtype=np.int64)
    fts_ids, widths, blob = conn.execute(
        "SELECT group_concat(id, ' '), group_concat(length(sz), ' '), group_concat(hex(sz), '') "
        "FROM (SELECT id, sz FROM chunks_fts_docsize ORDER BY id)").fetchone()
    rows = np.fromstring(fts_ids or "", dtype=np.int64, sep=" ")
    if not np.array_equal(rows, ids):
        return None  # a chunk without its FTS row, or the reverse
    if not len(ids):
        return ids, np.zeros(0, dtype=np.int64)
    sizes = _varints(np.frombuffer(bytes.fromhex(blob), dtype=np.uint8))
    width = np.fromstring(widths, dtype=np.int64, sep=" ")
    if sizes is None or len(sizes[0]) != COLUMNS * len(ids) or (width < COLUMNS).any():
        return None
    values, ends = sizes
    if not np.array_equal(np.searchsorted(ends, np.cumsum(width) - 1) + 1, COLUMNS * np.arange(1, len(ids) + 1)):
        return None  # a record whose varints do not end with it
    return ids, values.reshape(-1, COLUMNS).sum(axis=1)


def _varints(b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, byte position of each one's last byte) of the SQLite varints (big-endian groups of 7 bits, high
    bit set on all but the last) back to back in ``b``; None past 4 bytes (a column of 2^28 tokens)."""
    last = np.flatnonzero((b & 0x80) == 0)
    if not len(last) or last[-1] != len(b) - 1:
        return None
    first = np.concatenate([[0], last[:-1] + 1])
    if (last - first >= 4).any():
        return None
    which = np.repeat(np.arange(len(last)), last - first + 1)  # the varint each byte belongs to
    shift = 7 * (last[which] - np.arange(len(b)))
    values = np.bincount(which, weights=((b & 0x7F).astype(np.int64) << shift).astype(np.float64),
                         minlength=len(last))
    return values.astype(np.int64), last


def query_terms(conn: Connection, phrases: list[str]) -> list[str] | None:
    """FTS5's terms for ``phrases`` (one word each), through a temporary FTS5 table with ``chunks_fts``'s
    tokenizer; None when a phrase is not exactly one term."""
    if not phrases:
        return []
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_QUERY} USING fts5(t, tokenize='porter unicode61')")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_QUERY_VOCAB} USING fts5vocab(temp, pw_query, instance)")
    conn.executemany(f"INSERT INTO {_QUERY}(rowid, t) VALUES (?, ?)", list(enumerate(phrases, start=1)))
    try:
        rows = conn.execute(f"SELECT doc, term FROM {_QUERY_VOCAB} ORDER BY doc, offset").fetchall()
    finally:
        conn.execute(f"DELETE FROM {_QUERY}")
    if [r[0] for r in rows] != list(range(1, len(phrases) + 1)):
        return None
    return [r[1] for r in rows]

