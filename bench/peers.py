"""Peers benchmark (issue 6): pathweaver's methods against chromadb, bm25s and their hybrid.

For each corpus (2wikimultihopqa, musique, hotpotqa) every system runs in its own subprocess, so its indexing wall
time and peak memory (``ru_maxrss``) are its own. All systems use the same all-MiniLM-L6-v2 embeddings, loaded
before the clock starts. Each system retrieves the top 8 passages per question; recall@5 and all-evidence@5 are
read from the first 5, all-evidence@8 from all 8. Ratios are against the chromadb peer. Published figures (from
the data folder's SPLITS.md) are printed in their own table: their corpora, models and question sets differ.

    python bench/peers.py [--datasets 2wikimultihopqa musique hotpotqa] [--split dev|test] [--limit-questions N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pathweaver.eval.datasets import PASSAGE_DATASETS, load_dataset, resolve_dir, split
from pathweaver.eval.ledger import Ledger
from pathweaver.eval.runner import latency_summary, prepare_corpus, ranked_titles, run_questions, score

K_MAX = 8
K_MAIN = 5
PEERS = ("chromadb", "bm25s", "chromadb+bm25s")
DEFAULT_METHODS = ("dense", "hybrid", "ppr", "pathrag", "mcmi", "pooling", "lego:sbe+sbr", "lego:sbe+osar",
                   "lego:sbe+isar", "lego:sae+sbr", "lego:sae+osar", "lego:sae+isar", "pank", "pank:mcmi")
HYBRID_POOL = 50  # candidates per side before the normalised-sum fusion
PUBLISHED = [  # SPLITS.md; different corpora, embedders, LLMs and question counts: never mixed with ours
    ("2wikimultihopqa", "fast-graphrag: VectorDB (text-embedding-3-small)", "all_evidence@8", 0.42),
    ("2wikimultihopqa", "fast-graphrag: LightRAG", "all_evidence@8", 0.45),
    ("2wikimultihopqa", "fast-graphrag: nano-GraphRAG", "all_evidence@8", 0.73),
    ("2wikimultihopqa", "fast-graphrag", "all_evidence@8", 0.93),
    ("hotpotqa", "fast-graphrag: VectorDB", "all_evidence@8", 0.78),
    ("hotpotqa", "fast-graphrag: LightRAG", "all_evidence@8", 0.55),
    ("hotpotqa", "fast-graphrag", "all_evidence@8", 0.84),
    ("2wikimultihopqa", "HippoRAG 2 (7B embedder + 70B LLM, 1000 q)", "recall@5", 0.904),
    ("2wikimultihopqa", "HippoRAG 2 paper: embedding only", "recall@5", 0.765),
    ("musique", "HippoRAG 2", "recall@5", 0.747),
    ("hotpotqa", "HippoRAG 2", "recall@5", 0.963),
]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _figures(rankings: list[list[str]], golds: list[list[str]], seconds: list[float]) -> dict[str, Any]:
    s5 = score([r[:K_MAIN] for r in rankings], golds, K_MAIN)
    s8 = score(rankings, golds, K_MAX)
    return {"recall_at_k": s5["recall_at_k"], "all_evidence_at_k": s5["all_evidence_at_k"], "mrr": s5["mrr"],
            "all_evidence_at_8": s8["all_evidence_at_8"], **latency_summary(seconds)}


# -- workers (one per subprocess) ----------------------------------------------------------------------------
def _worker_pathweaver(args: argparse.Namespace, passages: list, questions: list) -> dict[str, Any]:
    from pathweaver.service import Pathweaver

    base = Path(args.store_root) / "peers" / args.dataset_name
    store = base / "pathweaver"
    if store.exists() and not args.reuse_store:
        shutil.rmtree(store)
    titles = prepare_corpus(passages, base / "corpus")
    pw = Pathweaver.open(store)
    pw.embedder.model  # noqa: B018 - load the model before the clock starts, as for the peers
    start = time.perf_counter()
    report = pw.index([base / "corpus"], exact=True)
    index_seconds = time.perf_counter() - start
    out: dict[str, Any] = {"index_seconds": index_seconds, "stats": pw.stats(), "index": _plain(report), "methods": {}}
    golds = [q.gold_titles for q in questions]
    for method in args.methods.split(","):
        try:
            results, seconds = run_questions(pw, [q.text for q in questions], method, K_MAX, None)
        except Exception as exc:  # a method not built yet, or failing: report it, run the others
            out["methods"][method] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        snap = pw.snapshot()
        out["methods"][method] = _figures([ranked_titles(r, snap, titles) for r in results], golds, seconds)
    pw.close()
    out["peak_rss_mb"] = _peak_mb()
    return out


def _plain(report: Any) -> Any:
    return report.to_dict() if hasattr(report, "to_dict") else str(report)


def _minmax(scores: dict[int, float]) -> dict[int, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in scores.items()}


def _worker_peer(args: argparse.Namespace, passages: list, questions: list) -> dict[str, Any]:
    from pathweaver.models.embedder import get_embedder

    system = args.worker
    use_dense, use_bm25 = "chromadb" in system, "bm25s" in system
    try:
        if use_dense:
            import chromadb
        if use_bm25:
            import bm25s
    except ImportError as exc:
        return {"error": f"{exc.name} is not installed (pip install -e '.[bench]'); peer skipped"}
    texts = [f"{title}\n{text}" for title, text in passages]
    titles = [title for title, _ in passages]
    embedder = get_embedder()
    embedder.model  # noqa: B018 - loaded before the clock starts
    start = time.perf_counter()
    if use_dense:
        vecs = embedder.encode(texts)
        client = chromadb.EphemeralClient(settings=chromadb.Settings(anonymized_telemetry=False))
        col = client.create_collection("passages", metadata={"hnsw:space": "cosine"}, embedding_function=None)
        step = 4000
        for i in range(0, len(texts), step):
            col.add(ids=[str(j) for j in range(i, min(i + step, len(texts)))], embeddings=vecs[i : i + step].tolist())
    if use_bm25:
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    index_seconds = time.perf_counter() - start
    pool = HYBRID_POOL if (use_dense and use_bm25) else K_MAX
    rankings, seconds = [], []
    for q in questions:
        t0 = time.perf_counter()
        dense: dict[int, float] = {}
        sparse: dict[int, float] = {}
        if use_dense:
            res = col.query(query_embeddings=[embedder.encode_one(q.text).tolist()], n_results=min(pool, len(texts)))
            dense = {int(i): 1.0 - float(d) for i, d in zip(res["ids"][0], res["distances"][0], strict=True)}
        if use_bm25:
            docs, scs = retriever.retrieve(bm25s.tokenize([q.text], stopwords="en", return_ids=False, show_progress=False),
                                           k=min(pool, len(texts)), show_progress=False)
            sparse = {int(i): float(s) for i, s in zip(docs[0], scs[0], strict=True)}
        if use_dense and use_bm25:  # normalised sum / 2, a missing side counts 0
            nd, ns = _minmax(dense), _minmax(sparse)
            fused = {i: (nd.get(i, 0.0) + ns.get(i, 0.0)) / 2 for i in set(nd) | set(ns)}
        else:
            fused = dense or sparse
        order = sorted(fused, key=lambda i: (-fused[i], i))[:K_MAX]
        seconds.append(time.perf_counter() - t0)
        rankings.append([titles[i] for i in order])
    figures = _figures(rankings, [q.gold_titles for q in questions], seconds)
    return {"index_seconds": index_seconds, "peak_rss_mb": _peak_mb(), "methods": {system: figures}}


def run_worker(args: argparse.Namespace) -> None:
    ds = load_dataset(args.dataset_dir)
    args.dataset_name = ds.name
    questions = split(ds.questions, args.split)
    if args.limit_questions:
        questions = questions[: args.limit_questions]
    fn = _worker_pathweaver if args.worker == "pathweaver" else _worker_peer
    print(json.dumps(fn(args, ds.passages, questions), default=str))


# -- orchestration -------------------------------------------------------------------------------------------
def _spawn(system: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", system, "--dataset-dir", str(folder),
           "--split", args.split, "--store-root", args.store_root, "--methods", args.methods]
    if args.limit_questions:
        cmd += ["--limit-questions", str(args.limit_questions)]
    if args.reuse_store:
        cmd.append("--reuse-store")
    print(f"[{folder.name}] {system} ...", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}"}
    return json.loads(lines[-1])


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "–"


def _print_dataset(name: str, systems: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    base = (systems.get("chromadb") or {}).get("methods", {}).get("chromadb")
    base_sys = systems.get("chromadb") or {}
    rows = []
    print(f"\n## {name}  (ratios: against the chromadb peer)")
    head = ("system/method", "index s", "peak MB", "p50 ms", "p95 ms", "recall@5", "all-ev@5", "all-ev@8",
            "recall ratio", "p50 ratio", "index ratio", "mem ratio")
    print(" | ".join(head))
    for system, res in systems.items():
        if "error" in res:
            print(f"{system} | skipped: {res['error']}")
            continue
        for method, fig in res["methods"].items():
            label = method if system == "pathweaver" else f"peer:{method}"
            if "error" in fig:
                print(f"{label} | error: {fig['error']}")
                continue
            print(" | ".join([
                label, f"{res['index_seconds']:.1f}", f"{res['peak_rss_mb']:.0f}", f"{fig['p50_ms']:.1f}",
                f"{fig['p95_ms']:.1f}", f"{fig['recall_at_k']:.3f}", f"{fig['all_evidence_at_k']:.3f}",
                f"{fig['all_evidence_at_8']:.3f}", _ratio(fig["recall_at_k"], base and base["recall_at_k"]),
                _ratio(fig["p50_ms"], base and base["p50_ms"]),
                _ratio(res["index_seconds"], base_sys.get("index_seconds")),
                _ratio(res["peak_rss_mb"], base_sys.get("peak_rss_mb")),
            ]))
            rows.append({**fig, "method": label, "k": K_MAIN, "index_seconds": res["index_seconds"],
                         "peak_rss_mb": res["peak_rss_mb"], "system": system})
    lego = [r for r in rows if r["method"].startswith("lego:")]
    if lego:
        best = max(lego, key=lambda r: r["recall_at_k"])
        print(f"best lego: {best['method']} (recall@5 {best['recall_at_k']:.3f})")
    published = [p for p in PUBLISHED if p[0] == name]
    if published:
        print("published (other setups, NOT comparable run-for-run): " +
              "; ".join(f"{who} {metric} {val}" for _, who, metric, val in published))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=list(PASSAGE_DATASETS), help="names or folders")
    parser.add_argument("--data-root", default=os.environ.get("PATHWEAVER_DATA", "/work/shared/data"))
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS), help="comma-separated pathweaver methods")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated peers")
    parser.add_argument("--store-root", default=".pathweaver-bench")
    parser.add_argument("--reuse-store", action="store_true", help="do not re-index pathweaver from scratch")
    parser.add_argument("--no-ledger", action="store_true")
    parser.add_argument("--json", action="store_true", help="print all figures as JSON at the end")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--dataset-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args)
        return 0
    everything: dict[str, Any] = {}
    for name in args.datasets:
        folder = resolve_dir(name, args.data_root)
        systems = {"pathweaver": _spawn("pathweaver", folder, args)}
        for peer in [p for p in args.peers.split(",") if p]:
            systems[peer] = _spawn(peer, folder, args)
        ds = load_dataset(folder)
        dataset = ds.name
        rows = _print_dataset(dataset, systems)
        everything[dataset] = systems
        n = len(split(ds.questions, args.split)[: args.limit_questions or None])
        if rows and not args.no_ledger:
            Ledger.for_store(args.store_root).append([
                {**r, "dataset": dataset, "split": args.split, "n_questions": n, "source": "bench:peers"} for r in rows
            ])
    if args.json:
        print(json.dumps(everything, indent=2, default=str))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
