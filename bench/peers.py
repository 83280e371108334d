"""Peers benchmark (issue 6): pathweaver's methods against chromadb, bm25s and their hybrid.

For each corpus (2wikimultihopqa, musique, hotpotqa) every system runs in its own subprocess, so its indexing wall
time and peak memory (``ru_maxrss``) are its own. The systems index one after the other, alone on the machine.
Then they take turns at the questions, ``BURST`` at a time (each system and method in turn), so that a shared
machine's slow and fast spells fall on all of them alike rather than on whichever ran last. All systems use the
same all-MiniLM-L6-v2 embeddings, loaded before the clock starts. Each system retrieves the top 8 passages per question; recall@5 and all-evidence@5 are
read from the first 5, all-evidence@8 from all 8. Ratios are against the chromadb peer. Published figures (from
the data folder's SPLITS.md) are printed in their own table: their corpora, models and question sets differ.

    python bench/peers.py [--datasets 2wikimultihopqa musique hotpotqa] [--split dev|test] [--limit-questions N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
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
BURST = 10  # questions per turn when the systems take turns at the query phase
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
class _Skip(Exception):
    """A system that cannot run here (a peer library not installed)."""


class _PathweaverSystem:
    """pathweaver: indexes the corpus into a fresh store (or reuses it), then retrieves with any of its methods."""

    def __init__(self, args: argparse.Namespace, passages: list) -> None:
        from pathweaver.service import Pathweaver

        base = Path(args.store_root) / "peers" / args.dataset_name
        store = base / "pathweaver"
        if store.exists() and not args.reuse_store:
            shutil.rmtree(store)
        self.titles = prepare_corpus(passages, base / "corpus")
        self.pw = Pathweaver.open(store)
        self.pw.embedder.model  # noqa: B018 - load the model before the clock starts, as for the peers
        start = time.perf_counter()
        report = self.pw.index([base / "corpus"], exact=True)
        self.ready = {"index_seconds": time.perf_counter() - start, "stats": self.pw.stats(),
                      "index": _plain(report), "methods": args.methods.split(",")}

    def run(self, method: str, texts: list[str]) -> tuple[list[list[str]], list[float]]:
        results, seconds = run_questions(self.pw, texts, method, K_MAX, None)
        snap = self.pw.snapshot()
        return [ranked_titles(r, snap, self.titles) for r in results], seconds

    def close(self) -> None:
        self.pw.close()


def _plain(report: Any) -> Any:
    return report.to_dict() if hasattr(report, "to_dict") else str(report)


def _minmax(scores: dict[int, float]) -> dict[int, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in scores.items()}


class _PeerSystem:
    """chromadb (dense), bm25s (BM25) or both fused: embed and insert, then query with the same embedder."""

    def __init__(self, args: argparse.Namespace, passages: list) -> None:
        from pathweaver.models.embedder import get_embedder

        system = args.worker
        self.use_dense, self.use_bm25 = "chromadb" in system, "bm25s" in system
        try:
            if self.use_dense:
                import chromadb
            if self.use_bm25:
                import bm25s
        except ImportError as exc:
            raise _Skip(f"{exc.name} is not installed (pip install -e '.[bench]'); peer skipped") from exc
        texts = [f"{title}\n{text}" for title, text in passages]
        self.titles = [title for title, _ in passages]
        self.embedder = get_embedder()
        self.embedder.model  # noqa: B018 - loaded before the clock starts
        start = time.perf_counter()
        if self.use_dense:
            vecs = self.embedder.encode(texts)
            client = chromadb.EphemeralClient(settings=chromadb.Settings(anonymized_telemetry=False))
            self.col = client.create_collection("passages", metadata={"hnsw:space": "cosine"},
                                                embedding_function=None)
            step = 4000
            for i in range(0, len(texts), step):
                self.col.add(ids=[str(j) for j in range(i, min(i + step, len(texts)))],
                             embeddings=vecs[i : i + step].tolist())
        if self.use_bm25:
            self.bm25s = bm25s
            self.retriever = bm25s.BM25()
            self.retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        self.pool = min(HYBRID_POOL if (self.use_dense and self.use_bm25) else K_MAX, len(texts))
        self.ready = {"index_seconds": time.perf_counter() - start, "methods": [system]}

    def run(self, method: str, texts: list[str]) -> tuple[list[list[str]], list[float]]:
        rankings, seconds = [], []
        for text in texts:
            t0 = time.perf_counter()
            dense: dict[int, float] = {}
            sparse: dict[int, float] = {}
            if self.use_dense:
                res = self.col.query(query_embeddings=[self.embedder.encode_one(text).tolist()], n_results=self.pool)
                dense = {int(i): 1.0 - float(d) for i, d in zip(res["ids"][0], res["distances"][0], strict=True)}
            if self.use_bm25:
                query = self.bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)
                docs, scs = self.retriever.retrieve(query, k=self.pool, show_progress=False)
                sparse = {int(i): float(s) for i, s in zip(docs[0], scs[0], strict=True)}
            if self.use_dense and self.use_bm25:  # normalised sum / 2, a missing side counts 0
                nd, ns = _minmax(dense), _minmax(sparse)
                fused = {i: (nd.get(i, 0.0) + ns.get(i, 0.0)) / 2 for i in set(nd) | set(ns)}
            else:
                fused = dense or sparse
            order = sorted(fused, key=lambda i: (-fused[i], i))[:K_MAX]
            seconds.append(time.perf_counter() - t0)
            rankings.append([self.titles[i] for i in order])
        return rankings, seconds

    def close(self) -> None:
        """Nothing to release: the collection is in memory."""


def _questions(ds: Any, args: argparse.Namespace) -> list:
    """The questions every process works on: the split, cut to ``--limit-questions``."""
    return split(ds.questions, args.split)[: args.limit_questions or None]


def _say(message: dict[str, Any]) -> None:
    print(json.dumps(message, default=str), flush=True)


def run_worker(args: argparse.Namespace) -> None:
    """Index, say ``ready``, then answer one ``{"method", "start", "stop"}`` request per stdin line with the
    rankings and per-question seconds of those questions; at end of input, say the peak memory."""
    ds = load_dataset(args.dataset_dir)
    args.dataset_name = ds.name
    questions = _questions(ds, args)
    kind = _PathweaverSystem if args.worker == "pathweaver" else _PeerSystem
    try:
        system = kind(args, ds.passages)
    except _Skip as exc:
        _say({"error": str(exc)})
        return
    _say({"ready": True, **system.ready})
    for line in sys.stdin:
        request = json.loads(line)
        texts = [q.text for q in questions[request["start"] : request["stop"]]]
        try:
            rankings, seconds = system.run(request["method"], texts)
        except Exception as exc:  # a method not built yet, or failing: report it, run the others
            _say({"error": f"{type(exc).__name__}: {exc}"})
            continue
        _say({"rankings": rankings, "seconds": seconds})
    system.close()
    _say({"peak_rss_mb": _peak_mb()})


# -- orchestration -------------------------------------------------------------------------------------------
class _Worker:
    """One system's subprocess: started (and so indexing) on creation, then asked for bursts of questions."""

    def __init__(self, system: str, folder: Path, args: argparse.Namespace) -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", system, "--dataset-dir", str(folder),
               "--split", args.split, "--store-root", args.store_root, "--methods", args.methods]
        if args.limit_questions:
            cmd += ["--limit-questions", str(args.limit_questions)]
        if args.reuse_store:
            cmd.append("--reuse-store")
        print(f"[{folder.name}] {system} ...", file=sys.stderr, flush=True)
        # stderr to a file: a pipe left unread could fill and stall the worker (closed in ``finish``)
        self.errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors,
                                     text=True, env=os.environ.copy())

    def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        self.proc.wait()
        self.errors.seek(0)
        return {"error": f"exit {self.proc.returncode}: {self.errors.read().strip()[-600:]}"}

    def ask(self, method: str, start: int, stop: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):  # a dead worker: reply() reports its exit and stderr
            self.proc.stdin.write(json.dumps({"method": method, "start": start, "stop": stop}) + "\n")
            self.proc.stdin.flush()
        return self.reply()

    def finish(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        out = self.reply()
        self.proc.wait()
        self.errors.close()
        return out


def _run_dataset(folder: Path, peers: list[str], golds: list[list[str]], args: argparse.Namespace
                 ) -> dict[str, dict[str, Any]]:
    """Every system indexes in turn (alone on the machine); then the questions go in bursts of ``BURST``, each
    burst to every system and method in turn, so that all of them sample the shared machine's fast and slow spells
    alike; then each system's figures."""
    systems: dict[str, dict[str, Any]] = {}
    workers: dict[str, _Worker] = {}
    for system in ["pathweaver", *peers]:
        worker = _Worker(system, folder, args)
        ready = worker.reply()
        if "error" in ready:
            systems[system] = ready
            worker.finish()
            continue
        workers[system] = worker
        systems[system] = {k: v for k, v in ready.items() if k not in ("ready", "methods")}
        systems[system]["runs"] = {m: ([], []) for m in ready["methods"]}
        systems[system]["methods"] = {}
    for start in range(0, len(golds), BURST):
        stop = min(len(golds), start + BURST)
        for system, worker in workers.items():
            for method, (rankings, seconds) in systems[system]["runs"].items():
                if method in systems[system]["methods"]:
                    continue  # failed before
                out = worker.ask(method, start, stop)
                if "error" in out:
                    systems[system]["methods"][method] = {"error": out["error"]}
                    continue
                rankings += out["rankings"]
                seconds += out["seconds"]
    for system, worker in workers.items():
        systems[system]["peak_rss_mb"] = worker.finish().get("peak_rss_mb", 0.0)
        failed = systems[system]["methods"]
        systems[system]["methods"] = {  # in the order asked for
            method: failed.get(method) or (_figures(rankings, golds, seconds) if seconds else {"error": "no answers"})
            for method, (rankings, seconds) in systems[system].pop("runs").items()
        }
    return systems


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
        ds = load_dataset(folder)
        dataset = ds.name
        questions = _questions(ds, args)
        systems = _run_dataset(folder, [p for p in args.peers.split(",") if p], [q.gold_titles for q in questions],
                               args)
        rows = _print_dataset(dataset, systems)
        everything[dataset] = systems
        n = len(questions)
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
