"""BM25 postings and pgvector rows of a PostgreSQL store: written with the chunks, read back for ranking.

BM25 ranks as on SQLite because both read the same numbers into the same ``store.bm25.rank``: the terms are
FTS5's own (``store.fts_tokens``), ``chunk_terms`` holds each term's occurrences in a chunk's text and title (what
FTS5's instance table lists), ``chunk_lengths`` each chunk's token count (D), and N and avgdl are counted from
them. Up to ``bm25.MAX_POSTINGS`` tokens every posting is read into a ``Bm25Index``; past it only the lengths
(``bm25_terms.Bm25Lengths``), and a query reads its terms' postings (``term_postings``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from psycopg import sql as pgsql

from pathweaver.config import HNSW_EF_SEARCH
from pathweaver.store import bm25
from pathweaver.store.bm25 import Bm25Index, length_norms
from pathweaver.store.bm25_terms import Bm25Lengths, Bm25Ranking
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


# binary COPY rows of (BIGINT, INTEGER): field count, then each field's length and value (big-endian)
ID_INT_ROW = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("value_len", ">i4"), ("value", ">i4")])
COPY_HEADER = 19  # binary COPY's signature (11 bytes), flags and header-extension length (4 + 4)
COPY_BLOCK = 1 << 22  # bytes parsed at a time: the rows never pass through Python objects one by one


def copy_rows(conn: Any, sql: str | pgsql.Composable, row: np.dtype) -> Iterator[np.ndarray]:
    """The rows of ``sql`` as blocks of ``row`` records (fixed-width rows, no NULL), by binary COPY: the bytes go
    straight into numpy, where ``fetchall`` makes a Python tuple and objects per row (at 100k chunks the BM25
    postings were 8M tuples, most of a server's memory)."""
    buf = bytearray()
    skip = -1
    query = pgsql.SQL("COPY ({}) TO STDOUT (FORMAT BINARY)").format(pgsql.SQL(sql) if isinstance(sql, str) else sql)
    with conn.cursor() as cur, cur.copy(query) as copy:
        for data in copy:
            buf += data
            if skip < 0:
                if len(buf) < COPY_HEADER:
                    continue
                skip = COPY_HEADER + int.from_bytes(buf[15:19], "big")
            if len(buf) - skip >= COPY_BLOCK:
                yield _parsed(buf, skip, row)
                skip = 0
    if skip >= 0:
        yield _parsed(buf, skip, row)  # the 2-byte trailer is left over


def _parsed(buf: bytearray, skip: int, row: np.dtype) -> np.ndarray:
    """The whole ``row`` records of ``buf`` after ``skip`` bytes, removed from it."""
    n = (len(buf) - skip) // row.itemsize
    out = np.frombuffer(bytes(buf[skip : skip + n * row.itemsize]), dtype=row)
    del buf[: skip + n * row.itemsize]
    if n and (out["fields"] != (len(row.names) - 1) // 2).any():  # a length and a value per field
        raise ValueError("binary COPY rows are not of the expected shape")
    return out


def _id_values(conn: Any, sql: str | pgsql.Composable) -> tuple[np.ndarray, np.ndarray]:
    """(ids int64, values int64) of ``sql``'s (BIGINT, INTEGER) rows, by binary COPY."""
    blocks = list(copy_rows(conn, sql, ID_INT_ROW))
    ids = np.concatenate([b["id"] for b in blocks]).astype(np.int64) if blocks else np.zeros(0, np.int64)
    values = np.concatenate([b["value"] for b in blocks]).astype(np.int64) if blocks else np.zeros(0, np.int64)
    return ids, values


def read_index(conn: Any, version: int) -> Bm25Ranking | None:
    """What BM25 ranks with at store ``version`` (inside one read transaction): every posting as a ``Bm25Index``
    up to ``bm25.MAX_POSTINGS`` tokens, else the chunks' lengths (``Bm25Lengths``); None when the postings do not
    add up to their vocabulary (not one view of the store)."""
    ids, lengths = _id_values(conn, "SELECT chunk_id, length FROM chunk_lengths ORDER BY chunk_id")
    if not len(ids):
        return Bm25Index(version, ids, {}, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                         np.zeros(0), np.zeros(0))
    if int(lengths.sum()) > bm25.MAX_POSTINGS:
        return Bm25Lengths(version, ids, length_norms(lengths))
    vocab = conn.execute("SELECT term, count(*) FROM chunk_terms GROUP BY term ORDER BY term").fetchall()
    terms = {term: i for i, (term, _) in enumerate(vocab)}
    starts = np.concatenate([[0], np.cumsum(np.array([c for _, c in vocab], dtype=np.int64))])
    del vocab
    blocks = [(np.searchsorted(ids, b["id"].astype(np.int64)), b["value"].astype(np.float64)) for b in
              copy_rows(conn, "SELECT chunk_id, tf FROM chunk_terms ORDER BY term, chunk_id", ID_INT_ROW)]
    rows = np.concatenate([r for r, _ in blocks]) if blocks else np.zeros(0, dtype=np.int64)
    freqs = np.concatenate([f for _, f in blocks]) if blocks else np.zeros(0)
    if rows.shape[0] != starts[-1]:
        return None
    return Bm25Index(version=version, ids=ids, terms=terms, starts=starts, rows=rows, freqs=freqs,
                     norms=length_norms(lengths))


# binary COPY rows of (BIGINT, INTEGER, INTEGER): a posting's chunk id, occurrences and its term's place in the asked list
POSTING_ROW = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("tf_len", ">i4"), ("tf", ">i4"),
                        ("at_len", ">i4"), ("at", ">i4")])


def term_postings(conn: Any, terms: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{term: (chunk ids, occurrences)} of ``terms`` that some chunk holds, from ``chunk_terms`` by its primary key,
    in one binary COPY (which takes no parameters: the terms go in as quoted literals). Unordered: the database
    sorts nothing, and a row's score adds its terms in the query's order whatever the order of the rows."""
    if not terms:
        return {}
    listed = pgsql.SQL("ARRAY[{}]::text[]").format(pgsql.SQL(", ").join(pgsql.Literal(t) for t in terms))
    query = pgsql.SQL("SELECT chunk_id, tf, array_position({a}, term::text) FROM chunk_terms WHERE term = ANY({a})"
                      ).format(a=listed)
    blocks = list(copy_rows(conn, query, POSTING_ROW))
    if not blocks:
        return {}
    rows = np.concatenate(blocks)
    rows = rows[np.argsort(rows["at"], kind="stable")]
    bounds = np.searchsorted(rows["at"].astype(np.int64), np.arange(1, len(terms) + 2))
    return {term: (rows["id"][a:b].astype(np.int64), rows["tf"][a:b].astype(np.int64))
            for term, a, b in zip(terms, bounds[:-1], bounds[1:], strict=True) if b > a}


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
    """(chunk ids ascending, vectors (n, dim) float32) of every chunk vector, by binary COPY (pgvector's binary
    form: dimensions, an unused int16, then big-endian float4s)."""
    row = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("vec_len", ">i4"),
                    ("vec", [("dim", ">i2"), ("unused", ">i2"), ("values", ">f4", (dim,))])])
    blocks = [(b["id"].astype(np.int64), b["vec"]["values"].astype(np.float32)) for b in
              copy_rows(conn, "SELECT id, embedding FROM chunk_vec ORDER BY id", row)]
    if not blocks or not sum(len(i) for i, _ in blocks):
        return np.zeros(0, dtype=np.int64), np.zeros((0, dim), dtype=np.float32)
    return np.concatenate([i for i, _ in blocks]), np.concatenate([v for _, v in blocks])


# the k nearest chunks by cosine distance: pgvector answers this ORDER BY ... LIMIT from the HNSW index
DENSE_SQL = ("SELECT id, 1 - (embedding <=> %(v)s::vector) FROM chunk_vec ORDER BY embedding <=> %(v)s::vector "
             "LIMIT %(k)s")


def dense_top(conn: Any, vec: np.ndarray, k: int, ef_search: int = HNSW_EF_SEARCH) -> list[tuple[int, float]]:
    """The ``k`` chunks nearest ``vec`` by cosine through the HNSW index, as (chunk id, cosine similarity), best
    first (``ef_search`` candidates, at least ``k``)."""
    with conn.transaction():
        hnsw_settings(conn, k, ef_search)
        rows = conn.execute(DENSE_SQL, {"v": vector_text(vec), "k": int(k)}).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


MAX_EF_SEARCH = 1000  # pgvector's bound on hnsw.ef_search


def hnsw_settings(conn: Any, k: int, ef_search: int) -> None:
    """Inside the caller's transaction: ``ef_search`` candidates (at least ``k``; past pgvector's bound its
    iterative scan goes on in order), and the index even on a table small enough that the planner would rather
    sort every row, so a store answers alike at every size."""
    # hnsw.iterative_scan only where needed: a pgvector before 0.8 has no such setting
    scan = ", set_config('hnsw.iterative_scan', 'strict_order', true)" if k > MAX_EF_SEARCH else ""
    conn.execute(f"SELECT set_config('hnsw.ef_search', %s, true), set_config('enable_seqscan', 'off', true){scan}",
                 (str(min(max(int(ef_search), int(k)), MAX_EF_SEARCH)),))


def chunk_cosines(conn: Any, vec: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
    """{chunk id: cosine similarity with ``vec``} of those ``ids`` that have a vector."""
    if not ids:
        return {}
    rows = conn.execute("SELECT id, 1 - (embedding <=> %(v)s::vector) FROM chunk_vec WHERE id = ANY(%(ids)s)",
                        {"v": vector_text(vec), "ids": [int(i) for i in ids]}).fetchall()
    return {int(r[0]): float(r[1]) for r in rows}
