"""GraphRAG-Bench (novel, medical): evidence recall per question type and method, plus MCST/MCMI sizes.

Each corpus document is indexed (chunked by pathweaver) into ``<store-root>/eval/graphrag-<subset>/store``; the
dev half of every question type is asked (``--split test`` for the other half). Evidence recall is the share of
a question's evidence sentences found in the retrieved chunks (rule: ``pathweaver.eval.metrics.EvidenceMatch``,
normalised substring or >= min_overlap of the sentence's content tokens). For ``mcmi`` the average MCST and MCMI
node/edge counts are printed beside AGRAG Table II.

    python bench/graphrag_bench.py [--subsets novel medical] [--methods hybrid,mcmi,...] [--limit-questions N]
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

from pathweaver.config import parse_param
from pathweaver.eval.datasets import BENCH_SUBSETS, load_graphrag_bench, split_by_type
from pathweaver.eval.ledger import Ledger
from pathweaver.eval.metrics import EvidenceMatch, evidence_recall
from pathweaver.eval.runner import latency_summary, open_store, run_questions

DEFAULT_METHODS = "dense,hybrid,ppr,pathrag,mcmi,pooling,lego:sbe+isar"
# AGRAG Table II: chunks, KG entities, KG relations, avg MCST nodes/edges, avg MCMI nodes/edges
AGRAG_TABLE_II = {
    "novel": {"chunks": 5140, "entities": 63887, "relations": 163169, "mcst_nodes": 8.7, "mcst_edges": 10.7,
              "mcmi_nodes": 19.7, "mcmi_edges": 35.9},
    "medical": {"chunks": 1030, "entities": 12426, "relations": 52054, "mcst_nodes": 8.9, "mcst_edges": 9.9,
                "mcmi_nodes": 23.7, "mcmi_edges": 59.5},
}
SIZE_KEYS = ("mcst_nodes", "mcst_edges", "mcmi_nodes", "mcmi_edges")


def _limit_per_type(questions: list, limit: int | None) -> list:
    if not limit:
        return questions
    seen: dict[str, int] = {}
    out = []
    for q in questions:
        if seen.get(q.question_type, 0) < limit:
            seen[q.question_type] = seen.get(q.question_type, 0) + 1
            out.append(q)
    return out


def run_subset(subset: str, args: argparse.Namespace, rule: EvidenceMatch) -> list[dict[str, Any]]:
    bench = load_graphrag_bench(args.data_dir, subset)
    questions = _limit_per_type(split_by_type(bench.questions, args.split), args.limit_questions)
    pw, _, report = open_store(Path(args.store_root), f"graphrag-{subset}", bench.documents)
    stats = pw.stats()
    print(f"\n## graphrag-bench {subset}: {len(questions)} {args.split} questions; store {stats}")
    types = sorted({q.question_type for q in questions})
    print("method | " + " | ".join(types) + " | all | p50 ms")
    rows = []
    for method in [m for m in args.methods.split(",") if m]:
        try:
            params = dict(parse_param(p) for p in args.param or []) or None
            results, seconds = run_questions(pw, [q.text for q in questions], method, args.top_k, params)
        except Exception as exc:
            print(f"{method} | error: {type(exc).__name__}: {exc}")
            continue
        snap = pw.snapshot()
        recalls = [evidence_recall(q.evidence, [snap.chunk_texts[h.passage] for h in r.chunks], rule)
                   for q, r in zip(questions, results, strict=True)]
        per_type = {t: statistics.fmean(x for q, x in zip(questions, recalls, strict=True) if q.question_type == t)
                    for t in types}
        lat = latency_summary(seconds)
        sizes = {}
        subs = [r.subgraph.stats for r in results if r.subgraph is not None]
        for key in SIZE_KEYS:
            vals = [float(s[key]) for s in subs if key in s]
            if vals:
                sizes[f"avg_{key}"] = statistics.fmean(vals)
        overall = statistics.fmean(recalls)
        print(f"{method} | " + " | ".join(f"{per_type[t]:.3f}" for t in types) + f" | {overall:.3f} | "
              f"{lat['p50_ms']:.1f}")
        if sizes:
            paper = AGRAG_TABLE_II[subset]
            print("   sizes (ours vs AGRAG Table II): " + ", ".join(
                f"{k[4:]} {v:.1f} vs {paper[k[4:]]}" for k, v in sizes.items()))
        rows.append({"dataset": f"graphrag-bench-{subset}", "split": args.split, "method": method, "k": args.top_k,
                     "n_questions": len(questions), "evidence_recall": overall, **lat,
                     "evidence_recall_by_type": per_type, "min_overlap": rule.min_overlap, **sizes,
                     "source": "bench:graphrag-bench"})
    paper = AGRAG_TABLE_II[subset]
    print(f"AGRAG Table II ({subset}): chunks {paper['chunks']}, entities {paper['entities']}, "
          f"relations {paper['relations']} (ours: {stats})")
    pw.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.environ.get("PATHWEAVER_DATA", "/work/shared/data")
    parser.add_argument("--data-dir", default=str(Path(root) / "graphrag-bench"))
    parser.add_argument("--subsets", nargs="+", choices=BENCH_SUBSETS, default=list(BENCH_SUBSETS))
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--limit-questions", type=int, default=None, help="at most N questions per type")
    parser.add_argument("--min-overlap", type=float, default=EvidenceMatch().min_overlap)
    parser.add_argument("--store-root", default=".pathweaver-bench")
    parser.add_argument("--no-ledger", action="store_true")
    parser.add_argument("--param", action="append", metavar="NAME=VALUE", help="method parameter (repeatable)")
    args = parser.parse_args(argv)
    rule = EvidenceMatch(min_overlap=args.min_overlap)
    rule.validate()
    rows = []
    for subset in args.subsets:
        rows += run_subset(subset, args, rule)
    if rows and not args.no_ledger:
        Ledger.for_store(args.store_root).append(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
