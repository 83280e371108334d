"""pank's model calls: the sentence cap of the sub-answers' embedding fallback and the per-level batching, A/B on
a dev split.

    python bench/pank_variants.py --dataset musique --store-root /tmp/pwbench [--caps 0,8,5,3] [--no-batching]

It reuses the store ``bench/peers.py`` built (``<store-root>/peers/<dataset>/pathweaver``) and runs ``pank`` on
every dev question once per variant, the variants taking turns question by question (so a slow spell of this
shared machine falls on all of them). A variant is a value of ``execute.SUB_ANSWER_SENTENCES`` (0 = embed every
sentence; it applies when no sentence shares a word with the sub-question) with the level batching on;
``--no-batching`` adds the same caps with it off (each question embedded alone, as before ``Embedder.remember``).
Until issue 25 it also compared ``sub_answer=embedding`` (every sub-answer chosen by the model) with the lexical
choice that won (docs/design-notes.md). Prints all-evidence@5 and @8, recall@5 and p50 per variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from pathweaver.eval.datasets import load_dataset, resolve_dir, split  # noqa: E402
from pathweaver.eval.runner import TITLES_FILE, ranked_titles, run_questions, score  # noqa: E402
from pathweaver.planner import execute  # noqa: E402
from pathweaver.service import Pathweaver  # noqa: E402

K = 8
Variant = tuple[int, bool]  # (sentence cap, batching)


def variants_of(args: argparse.Namespace) -> list[Variant]:
    caps = [int(c) for c in args.caps.split(",") if c.strip()]
    out: list[Variant] = [(cap, True) for cap in caps]
    return out + ([(cap, False) for cap in caps] if args.no_batching else [])


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    ds = load_dataset(resolve_dir(args.dataset, args.data_root))
    questions = split(ds.questions, "dev")
    base = Path(args.store_root) / "peers" / ds.name
    titles = json.loads((base / TITLES_FILE).read_text(encoding="utf-8"))
    pw = Pathweaver.open(base / "pathweaver")
    snap = pw.snapshot()
    pw.retrieve("a warm-up question about nothing", method="pank", top_k=K)
    batched = pw.remember_queries
    variants = variants_of(args)
    out: dict[Variant, tuple[list[list[str]], list[float]]] = {v: ([], []) for v in variants}
    try:
        for i, q in enumerate(questions):
            for cap, batching in variants if i % 2 == 0 else variants[::-1]:
                execute.SUB_ANSWER_SENTENCES = cap
                pw.remember_queries = batched if batching else (lambda texts: None)  # type: ignore[method-assign]
                # run_questions clears the embedder's cache first: every variant pays for its question's embedding
                results, seconds = run_questions(pw, [q.text], "pank", K, None)
                out[(cap, batching)][0].append(ranked_titles(results[0], snap, titles))
                out[(cap, batching)][1].extend(seconds)
    finally:
        pw.close()
    golds = [q.gold_titles for q in questions]
    rows = []
    for (cap, batching), (rankings, seconds) in out.items():
        s5, s8 = score([r[:5] for r in rankings], golds, 5), score(rankings, golds, 8)
        rows.append({"dataset": ds.name, "sentences": cap, "batching": batching,
                     "questions": len(questions), "all_evidence_at_5": s5["all_evidence_at_k"],
                     "all_evidence_at_8": s8["all_evidence_at_k"], "recall_at_5": s5["recall_at_k"],
                     "p50_ms": 1000 * statistics.median(seconds)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="musique")
    parser.add_argument("--data-root", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--store-root", default="/tmp/pwbench")
    parser.add_argument("--caps", default="0,8,5,3", help="values of SUB_ANSWER_SENTENCES (0 = every sentence)")
    parser.add_argument("--no-batching", action="store_true", help="also run each cap without level batching")
    args = parser.parse_args()
    print(f"{'dataset':16s} {'sentences':>9s} {'batching':>8s} {'n':>3s} {'all-ev@5':>8s} "
          f"{'all-ev@8':>8s} {'recall@5':>8s} {'p50 ms':>7s}")
    for row in run(args):
        cap = row["sentences"] or "all"
        print(f"{row['dataset']:16s} {cap:>9} {'on' if row['batching'] else 'off':>8s} "
              f"{row['questions']:3d} {row['all_evidence_at_5']:8.3f} {row['all_evidence_at_8']:8.3f} "
              f"{row['recall_at_5']:8.3f} {row['p50_ms']:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
