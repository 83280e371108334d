"""Query latency per retrieval method: on the indexed 2wiki store, and on synthetic graphs up to ~1M edges.

Real store: the 2wikimultihopqa passages indexed into ``<store-root>/eval/2wikimultihopqa/store`` (re-used when
unchanged) or ``--store DIR``, timed over the dev questions with the question embedding excluded, after one
untimed query per method (a method's first query builds its graph, projections and float32 matrix). Synthetic:
``GraphSnapshot.from_arrays`` with random relations, mentions and unit vectors; BM25 returns nothing there (no
text index), so ``hybrid`` degenerates to dense on those graphs.

    python bench/latency.py [--methods dense,hybrid,ppr,...] [--sizes 10000,100000,1000000] [--skip-store]
"""

from __future__ import annotations

import argparse
import os
import time
import zlib
from pathlib import Path

import numpy as np

from pathweaver.eval.datasets import load_dataset, resolve_dir, split
from pathweaver.eval.ledger import Ledger
from pathweaver.eval.runner import latency_summary, open_store
from pathweaver.retrieval.registry import run_method
from pathweaver.retrieval.types import Query, RetrievalEnv
from pathweaver.store.snapshot import GraphSnapshot

DEFAULT_METHODS = "dense,hybrid,ppr,pathrag,mcmi,pooling,lego:sbe+isar,lego:sae+osar"
EDGES_PER_ENTITY = 5  # synthetic graph: E = edges / 5 entities
ENTITIES_PER_PASSAGE = 10  # and P = E / 10 passages, each mentioning 8 entities
MENTIONS_PER_PASSAGE = 8


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def synthetic_snapshot(n_edges: int, dim: int, seed: int = 0) -> GraphSnapshot:
    """A random graph with ``n_edges`` relations, E = n_edges/5 entities and P = E/10 passages."""
    rng = np.random.default_rng(seed)
    n_ent = max(10, n_edges // EDGES_PER_ENTITY)
    n_pas = max(2, n_ent // ENTITIES_PER_PASSAGE)
    src = rng.integers(0, n_ent, n_edges)
    dst = (src + rng.integers(1, n_ent, n_edges)) % n_ent
    relations = [(int(a), int(b), f"r{i % 50}") for i, (a, b) in enumerate(zip(src, dst, strict=True))]
    pas = np.repeat(np.arange(n_pas), MENTIONS_PER_PASSAGE)
    ents = rng.integers(0, n_ent, len(pas))
    mentions = list({(int(p), int(e)): 1 for p, e in zip(pas, ents, strict=True)}.keys())
    support = rng.integers(0, n_pas, n_edges)
    return GraphSnapshot.from_arrays(
        entities=[f"entity {i}" for i in range(n_ent)],
        relations=relations,
        passages=[f"passage {i}" for i in range(n_pas)],
        mentions=[(p, e, 1) for p, e in mentions],
        relation_chunks=[(i, int(p)) for i, p in enumerate(support)],
        entity_vecs=_unit(rng, n_ent, dim),
        rel_vecs=_unit(rng, n_edges, dim),
        chunk_vecs=_unit(rng, n_pas, dim),
    )


def _encoder(dim: int):
    def encode(texts: list[str]) -> np.ndarray:
        rows = [_unit(np.random.default_rng(zlib.crc32(t.encode())), 1, dim)[0] for t in texts]
        return np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)

    return encode


def bench_synthetic(methods: list[str], sizes: list[int], dim: int, queries: int) -> list[dict]:
    rows = []
    for n_edges in sizes:
        start = time.perf_counter()
        snap = synthetic_snapshot(n_edges, dim)
        build = time.perf_counter() - start
        env = RetrievalEnv(snapshot=snap, bm25_chunks=lambda text, k: [], encode=_encoder(dim))
        print(f"\nsynthetic graph: {snap.n_entities} entities, {snap.n_relations} edges, {snap.n_passages} passages "
              f"(built in {build:.1f} s)")
        for method in methods:
            seconds = []
            try:
                warm = Query(text="warm up", vec=_encoder(dim)(["warm up"])[0], keywords=["entity 0"])
                run_method(env, warm, method, 5)  # untimed, as on the store: one-time builds
                for i in range(queries):
                    text = f"synthetic question {i}"
                    query = Query(text=text, vec=_encoder(dim)([text])[0], keywords=[f"entity {i}"])
                    t0 = time.perf_counter()
                    run_method(env, query, method, 5)
                    seconds.append(time.perf_counter() - t0)
            except Exception as exc:
                print(f"  {method:16s} error: {type(exc).__name__}: {exc}")
                continue
            lat = latency_summary(seconds)
            print(f"  {method:16s} p50 {lat['p50_ms']:9.1f} ms  p95 {lat['p95_ms']:9.1f} ms")
            rows.append({"dataset": "synthetic", "method": method, "k": 5, "n_questions": queries, **lat,
                         "n_edges": n_edges, "n_entities": snap.n_entities, "n_passages": snap.n_passages,
                         "snapshot_build_seconds": build, "source": "bench:latency"})
    return rows


def bench_store(methods: list[str], folder: Path, store_root: Path, limit: int | None,
                store: Path | None = None) -> list[dict]:
    """Time each method over the dev questions, excluding the question's embedding (computed first, as
    ``Query``); the per-query store-version check (``env()``) is inside the timing, as in the server."""
    ds = load_dataset(folder)
    questions = split(ds.questions, "dev")[: limit or None]
    if store is not None:  # an already indexed store of this corpus (e.g. bench/peers.py's)
        from pathweaver.service import Pathweaver

        pw = Pathweaver.open(store)
    else:
        pw, _, _ = open_store(store_root, ds.name, ds.passages, real_titles=ds.real_titles)
    stats = pw.stats()
    print(f"{ds.name} store: {stats}")
    queries = [pw.query(q.text) for q in questions]
    pw.snapshot()
    rows = []
    for method in methods:
        seconds = []
        try:
            if queries:  # untimed: the first query of a method builds its graph, projections and float32 twin
                run_method(pw.env(), queries[0], method, 5, pw.method_params(method, None))
            for query in queries:
                t0 = time.perf_counter()
                run_method(pw.env(), query, method, 5, pw.method_params(method, None))
                seconds.append(time.perf_counter() - t0)
        except Exception as exc:
            print(f"  {method:16s} error: {type(exc).__name__}: {exc}")
            continue
        lat = latency_summary(seconds)
        print(f"  {method:16s} p50 {lat['p50_ms']:9.1f} ms  p95 {lat['p95_ms']:9.1f} ms  (query embedding excluded)")
        rows.append({"dataset": ds.name, "split": "dev", "method": method, "k": 5, "n_questions": len(questions),
                     **lat, "n_edges": stats.get("relations"), "source": "bench:latency"})
    pw.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="synthetic graph sizes in edges")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=20, help="queries per method on synthetic graphs")
    parser.add_argument("--limit-questions", type=int, default=None, help="2wiki dev questions to time")
    parser.add_argument("--dataset", default="2wikimultihopqa")
    parser.add_argument("--data-root", default=os.environ.get("PATHWEAVER_DATA", "/work/shared/data"))
    parser.add_argument("--store-root", default=".pathweaver-bench")
    parser.add_argument("--store", type=Path, default=None, help="an already indexed store of the data set")
    parser.add_argument("--skip-store", action="store_true", help="only the synthetic graphs")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--no-ledger", action="store_true")
    args = parser.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    rows = []
    if not args.skip_store:
        rows += bench_store(methods, resolve_dir(args.dataset, args.data_root), Path(args.store_root),
                            args.limit_questions, args.store)
    if not args.skip_synthetic:
        sizes = [int(s) for s in args.sizes.split(",") if s]
        rows += bench_synthetic(methods, sizes, args.dim, args.queries)
    if rows and not args.no_ledger:
        Ledger.for_store(args.store_root).append(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
