"""BM25 postings and pgvector rows of a PostgreSQL store: written with the chunks, read back for ranking.

BM25 ranks as on SQLite because both read the same numbers into the same ``store.bm25.Bm25Index``: the terms are
FTS5's own (``store.fts_tokens``), ``chunk_terms`` holds each term's occurrences in a chunk's text and title (what
FTS5's instance table lists), ``chunk_lengths`` each chunk's token count (D), and N and avgdl are counted from
them, so ``Bm25Index.top`` adds up the same floats in the same order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from pathweaver.store.bm25 import K1 as _K1
from pathweaver.store.bm25 import B as _B
from pathweaver.store.bm25 import Bm25Index
from pathweaver.store.fts_tokens import Fts5Tokenizer
from pathweaver.store.pg.schema import HNSW_INDEX

BUILD_MEMORY = "1GB"  # maintenance_work_mem of one HNSW build: pgvector builds in memory while the graph fits


def write_postings(conn: Any, tokenizer: Fts5Tokenizer, rows: Sequence[tuple[int, str, str]]) -> None:
    """Postings and length of each ``(chunk id, text, title)`` (inside the caller's write transaction)."""
    counts = tokenizer.postings([(text, title) for _, text, title in rows])
    with conn.cursor() as cur:
        with cur.copy("COPY chunk_terms(term, chunk_id, tf) FROM STDIN") as copy:
            for (cid, _, _), terms in zip(rows, counts, strict=True):
                for term, tf in terms.items():
                    copy.write_row((term, cid, tf))
        with cur.copy("COPY chunk_lengths(chunk_id, length) FROM STDIN") as copy:
            for (cid, _, _), terms in zip(rows, counts, strict=True):
                copy.write_row((cid, sum(terms.values())))


def read_index(conn: Any, version: int) -> Bm25Index:
    """The postings of every chunk as a ``Bm25Index`` at store ``version`` (inside one read transaction)."""
    lengths = conn.execute("SELECT chunk_id, length FROM chunk_lengths ORDER BY chunk_id").fetchall()
    ids = np.array([r[0] for r in lengths], dtype=np.int64)
    if not len(ids):
        return Bm25Index(version, ids, {}, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                         np.zeros(0), np.zeros(0))
    length = np.array([r[1] for r in lengths], dtype=np.float64)
    postings = conn.execute("SELECT term, chunk_id, tf FROM chunk_terms ORDER BY term, chunk_id").fetchall()
    terms: dict[str, int] = {}
    term_of = np.empty(len(postings), dtype=np.int64)
    for i, (term, _, _) in enumerate(postings):
        term_of[i] = terms.setdefault(term, len(terms))
    rows = np.searchsorted(ids, np.array([p[1] for p in postings], dtype=np.int64))
    freqs = np.array([p[2] for p in postings], dtype=np.float64)
    starts = np.searchsorted(term_of, np.arange(len(terms) + 1))
    avgdl = float(length.sum()) / float(len(ids))
    if avgdl == 0.0:
        avgdl = 1.0  # chunks without a token: no term can score them
    return Bm25Index(version=version, ids=ids, terms=terms, starts=starts, rows=rows, freqs=freqs,
                     norms=_K1 * (1 - _B + _B * length / avgdl))


def vector_text(vec: np.ndarray) -> str:
    """pgvector's text form of ``vec``; ``repr`` of a float32 round-trips it exactly."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vec, dtype=np.float32)) + "]"


def write_vectors(conn: Any, ids: Sequence[int], vecs: np.ndarray) -> None:
    """Chunk vectors (inside the caller's write transaction)."""
    with conn.cursor() as cur, cur.copy("COPY chunk_vec(id, embedding) FROM STDIN") as copy:
        for cid, vec in zip(ids, vecs, strict=True):
            copy.write_row((int(cid), vector_text(vec)))


@contextlib.contextmanager
def hnsw_after_load(conn: Any) -> Iterator[None]:
    """Inside the caller's write transaction: drop the HNSW index, let the block load, build the index again over
    all rows (a bulk load or migration; an index maintained row by row costs ~15x more)."""
    conn.execute("DROP INDEX IF EXISTS chunk_vec_hnsw")
    yield
    conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (BUILD_MEMORY,))
    conn.execute(HNSW_INDEX)


def read_vectors(conn: Any, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(chunk ids ascending, vectors (n, dim) float32) of every chunk vector, for the in-memory snapshot."""
    rows = conn.execute("SELECT id, embedding::text FROM chunk_vec ORDER BY id").fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    if not rows:
        return ids, np.zeros((0, dim), dtype=np.float32)
    text = ",".join(r[1][1:-1] for r in rows)
    return ids, np.fromstring(text, dtype=np.float32, sep=",").reshape(len(rows), dim)


def dense_top(conn: Any, vec: np.ndarray, k: int, ef_search: int = 100) -> list[tuple[int, float]]:
    """The ``k`` chunks nearest ``vec`` by cosine through the HNSW index, as (chunk id, cosine similarity)."""
    with conn.transaction():
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(max(int(ef_search), int(k))),))
        rows = conn.execute("SELECT id, 1 - (embedding <=> %(v)s::vector) FROM chunk_vec "
                            "ORDER BY embedding <=> %(v)s::vector LIMIT %(k)s",
                            {"v": vector_text(vec), "k": int(k)}).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]
