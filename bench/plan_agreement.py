"""Heuristic plans against MuSiQue's gold ``question_decomposition``: node-count, dependency-structure and exact-shape
agreement, each with its Wilson 95% interval. This is a measurement, not a unit test: report it, tune on dev only.

    python bench/plan_agreement.py [--split dev] [--data-root ../shared/data] [--misses]

The data root defaults to ``$PATHWEAVER_DATA``, else ``../shared/data`` beside the repository.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pathweaver.eval.datasets import load_dataset, resolve_dir, split  # noqa: E402
from pathweaver.eval.intervals import wilson  # noqa: E402
from pathweaver.eval.plans import agreement  # noqa: E402
from pathweaver.planner.heuristic import heuristic_decompose  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="dev", choices=("dev", "test", "all"))
    repo_data = Path(__file__).resolve().parents[2] / "shared" / "data"
    parser.add_argument("--data-root", default=os.environ.get("PATHWEAVER_DATA") or str(repo_data))
    parser.add_argument("--misses", action="store_true", help="print the questions whose structure differs")
    args = parser.parse_args(argv)
    questions = split(load_dataset(resolve_dir("musique", args.data_root)).questions, args.split)
    result = agreement(questions, heuristic_decompose)
    n = result["n_questions"]
    print(f"musique {args.split}: {n} questions (95% Wilson intervals)")
    for key in ("node_count_agreement", "structure_agreement", "shape_agreement"):
        lo, hi = wilson(round(result[key] * n), n)
        print(f"  {key.replace('_', ' ')}: {result[key]:.2f} [{lo:.2f}, {hi:.2f}]")
    if args.misses:
        for row in result["rows"]:
            if not row["structure_agrees"]:
                print(f"  {row['index']:3d} gold {row['gold_nodes']} nodes, ours {row['nodes']}: {row['question']}")


if __name__ == "__main__":
    main()
