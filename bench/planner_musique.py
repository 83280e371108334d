"""Plan-then-retrieve vs single-shot retrieval on MuSiQue (PankRAG §2.2-2.3): recall@k and all-evidence@k.

Three variants over the same indexed corpus (``<store-root>/eval/musique/store``, re-used when unchanged):
- ``gold``: the data's own ``question_decomposition`` as the plan ("#1" placeholders filled with sub-answers);
- ``heuristic``: ``heuristic_decompose`` (no LLM);
- ``single``: one retrieval for the whole question.
Plan variants run ``execute_plan``: sub-answers come from the configured LLM (``--llm``, default none =
extractive), dependency-aware reranking applies to nodes with resolved dependencies, and the node rankings are
merged into one top-k list.

    python bench/planner_musique.py [--method hybrid] [--top-k 5] [--split dev] [--llm none]
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path
from typing import Any

from pathweaver.config import ModelSettings
from pathweaver.eval.datasets import Question, load_dataset, resolve_dir, split
from pathweaver.eval.runner import open_store, ranked_titles, score
from pathweaver.models.llm import LLMBackend, resolve_backend
from pathweaver.planner.decompose import Plan, validate_plan
from pathweaver.planner.execute import execute_plan
from pathweaver.planner.heuristic import heuristic_decompose
from pathweaver.retrieval.types import RetrievalResult

VARIANTS = ("gold", "heuristic", "single")


def gold_plan(question: Question) -> Plan:
    """MuSiQue ``question_decomposition`` -> plan: node i+1, depending on the "#k" it references."""
    nodes = []
    for i, step in enumerate(question.decomposition or []):
        refs = sorted({r for r in re.findall(r"#(\d+)", step["question"]) if int(r) <= i}, key=int)
        nodes.append({"id": str(i + 1), "question": step["question"], "depends_on": refs})
    return validate_plan(nodes) if nodes else validate_plan([{"id": "1", "question": question.text}])


def run_variant(
    pw: Any, variant: str, questions: list[Question], method: str, top_k: int, node_k: int, llm: LLMBackend
) -> tuple[list[RetrievalResult], float, list[int]]:
    """Results per question, mean seconds per question, and plan sizes."""
    snapshot = pw.snapshot()
    encode = pw.embedder.encode
    results, sizes = [], []
    start = time.perf_counter()
    for q in questions:
        if variant == "single":
            results.append(pw.retrieve(q.text, method=method, top_k=top_k))
            sizes.append(1)
            continue
        plan = gold_plan(q) if variant == "gold" else heuristic_decompose(q.text)
        trace = execute_plan(
            plan, lambda text: pw.retrieve(text, method=method, top_k=node_k), encode, llm, snapshot, top_k
        )
        results.append(RetrievalResult(method=f"plan:{variant}", chunks=trace.merged))
        sizes.append(len(plan.nodes))
    return results, (time.perf_counter() - start) / max(len(questions), 1), sizes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--method", default="hybrid", help="retrieval method used by every variant")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument(
        "--node-k", type=int, default=None, help="chunks retrieved per plan node (default top-k)"
    )
    parser.add_argument("--split", default="dev", choices=("dev", "test", "all"))
    parser.add_argument("--limit", type=int, default=None, help="first N questions of the split")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--llm", default="none", help="models.llm_backend for sub-answers (none = extractive)"
    )
    parser.add_argument("--data-root", default=os.environ.get("PATHWEAVER_DATA", "/work/shared/data"))
    parser.add_argument("--store-root", default=".pathweaver-bench")
    args = parser.parse_args(argv)

    dataset = load_dataset(resolve_dir("musique", args.data_root))
    questions = split(dataset.questions, args.split)[: args.limit]
    pw, titles, report = open_store(Path(args.store_root), dataset.name, dataset.passages,
                                    real_titles=dataset.real_titles)
    llm = resolve_backend(ModelSettings(llm_backend=args.llm))
    golds = [q.gold_titles for q in questions]
    print(
        f"musique {args.split}: {len(questions)} questions, method={args.method}, k={args.top_k}, llm={llm.name}"
    )
    print(f"{'variant':<10} {'recall@k':>9} {'all-ev@k':>9} {'mrr':>6} {'nodes':>6} {'s/q':>7}")
    for variant in [v for v in args.variants.split(",") if v]:
        if variant not in VARIANTS:
            raise SystemExit(f"unknown variant {variant!r}; use {', '.join(VARIANTS)}")
        results, secs, sizes = run_variant(
            pw, variant, questions, args.method, args.top_k, args.node_k or args.top_k, llm
        )
        rankings = [ranked_titles(r, pw.snapshot(), titles) for r in results]
        s = score(rankings, golds, args.top_k)
        print(
            f"{variant:<10} {s['recall_at_k']:>9.3f} {s['all_evidence_at_k']:>9.3f} {s['mrr']:>6.3f} "
            f"{sum(sizes) / len(sizes):>6.2f} {secs:>7.3f}"
        )
    pw.close()


if __name__ == "__main__":
    main()
