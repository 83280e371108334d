"""Heuristic plans against MuSiQue's gold ``question_decomposition``: node-count and dependency-structure agreement.

    python bench/plan_agreement.py [--split dev] [--data-root /work/shared/data] [--misses]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pathweaver.eval.datasets import load_dataset, resolve_dir, split  # noqa: E402
from pathweaver.eval.plans import agreement  # noqa: E402
from pathweaver.planner.heuristic import heuristic_decompose  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="dev", choices=("dev", "test", "all"))
    parser.add_argument("--data-root", default=os.environ.get("PATHWEAVER_DATA", "/work/shared/data"))
    parser.add_argument("--misses", action="store_true", help="print the questions whose structure differs")
    args = parser.parse_args(argv)
    questions = split(load_dataset(resolve_dir("musique", args.data_root)).questions, args.split)
    result = agreement(questions, heuristic_decompose)
    print(f"musique {args.split}: {result['n_questions']} questions, node count agreement "
          f"{result['node_count_agreement']:.2f}, structure agreement {result['structure_agreement']:.2f}")
    if args.misses:
        for row in result["rows"]:
            if not row["structure_agrees"]:
                print(f"  {row['index']:3d} gold {row['gold_nodes']} nodes, ours {row['nodes']}: {row['question']}")


if __name__ == "__main__":
    main()
