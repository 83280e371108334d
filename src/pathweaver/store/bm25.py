"""BM25 over the chunks in memory, with exactly the scores of FTS5's ``bm25()`` on ``chunks_fts``.

FTS5 ranks an OR of the question's words by scoring every row that matches any of them, and a question's "the" or
"of" matches nearly every chunk, so its cost grows with the store. Here the
tokens FTS5 itself indexed (its ``fts5vocab`` instance table: porter-stemmed unicode61 terms of both columns) are
read once per store version into per-term postings, and a query adds up the postings of its terms, in numpy.

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
from dataclasses import dataclass

import numpy as np

from pathweaver.store.db import Connection

K1 = 1.2  # FTS5 bm25() constants (fts5_aux.c)
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's idf for a term in more than half the rows
MAX_POSTINGS = 20_000_000  # tokens; a larger store keeps asking FTS5, as reading its postings would take too long
_VOCAB = "temp.pw_chunks_vocab"
_TERMS = "temp.pw_chunks_terms"
_QUERY = "temp.pw_query"
_QUERY_VOCAB = "temp.pw_query_vocab"


@dataclass(frozen=True)
class Bm25Index:
    """Per-term postings of the chunks' FTS5 tokens at store version ``version``."""

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

    def top(self, terms: list[str], k: int) -> list[tuple[int, float]]:
        """The ``k`` best rows matching any of ``terms`` (one per query phrase, in order) as ``(chunk id,
        score)``, highest first; ties by chunk id. The scores are FTS5's ``-bm25()``."""
        scores = np.zeros(self.n_rows, dtype=np.float64)
        hit = np.zeros(self.n_rows, dtype=bool)
        n = self.n_rows
        for term in terms:
            j = self.terms.get(term)
            if j is None:
                continue  # no row has it: every row's occurrence count is 0, so it adds 0.0
            a, b = int(self.starts[j]), int(self.starts[j + 1])
            at, f = self.rows[a:b], self.freqs[a:b]
            n_hit = b - a
            idf = math.log((n - n_hit + 0.5) / (n_hit + 0.5))
            if idf <= 0.0:
                idf = IDF_FLOOR
            scores[at] += idf * ((f * (K1 + 1.0)) / (f + self.norms[at]))
            hit[at] = True
        found = np.flatnonzero(hit)
        if not len(found) or k < 1:
            return []
        order = np.lexsort((self.ids[found], -scores[found]))[:k]
        best = found[order]
        return list(zip(self.ids[best].tolist(), scores[best].tolist(), strict=True))


def read_index(conn: Connection, version: int) -> Bm25Index | None:
    """Read the postings of ``chunks_fts`` (inside the caller's read transaction, at store ``version``); None
    when FTS5's rows are not exactly the chunks, or hold more than ``MAX_POSTINGS`` tokens (FTS5 answers then).

    The instance table lists tokens in term order, so only its row ids are read (one string, parsed by numpy);
    which term each belongs to follows from the row vocabulary's per-term token counts, and the per-term row
    counts it also gives are checked against the postings."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB} USING fts5vocab(main, chunks_fts, instance)")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_TERMS} USING fts5vocab(main, chunks_fts, row)")
    ids = np.array([r[0] for r in conn.execute("SELECT id FROM chunks ORDER BY id")], dtype=np.int64)
    vocab = conn.execute(f"SELECT term, doc, cnt FROM {_TERMS}").fetchall()
    tokens = np.array([v[2] for v in vocab], dtype=np.int64)
    total = int(tokens.sum())
    if not len(ids) or not total:
        return Bm25Index(version, ids, {}, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                         np.zeros(0), np.full(len(ids), K1))
    if total > MAX_POSTINGS:
        return None
    text = conn.execute(f"SELECT group_concat(doc, ' ') FROM {_VOCAB}").fetchone()[0]
    docs = np.fromstring(text, dtype=np.int64, sep=" ")  # text mode: not the deprecated binary one
    if len(docs) != total:
        return None
    row_of = np.searchsorted(ids, docs)
    if (row_of >= len(ids)).any() or (ids[np.minimum(row_of, len(ids) - 1)] != docs).any():
        return None  # an FTS row that is no chunk (a deleted row still listed)
    term_of = np.repeat(np.arange(len(vocab), dtype=np.int64), tokens)
    lengths = np.bincount(row_of, minlength=len(ids)).astype(np.float64)  # D: tokens of both columns
    avgdl = float(total) / float(len(ids))
    pair, count = np.unique(term_of * len(ids) + row_of, return_counts=True)  # (term, row), sorted, counted
    pair_term, pair_row = pair // len(ids), pair % len(ids)
    starts = np.searchsorted(pair_term, np.arange(len(vocab) + 1))
    if not np.array_equal(np.diff(starts), np.array([v[1] for v in vocab], dtype=np.int64)):
        return None  # the instance table did not list the tokens in the row vocabulary's term order
    return Bm25Index(version=version, ids=ids, terms={v[0]: i for i, v in enumerate(vocab)}, starts=starts,
                     rows=pair_row, freqs=count.astype(np.float64), norms=K1 * (1 - B + B * lengths / avgdl))


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
