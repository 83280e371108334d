"""Render docs/benchmarks.md (between the ledger markers) and docs/img/*.png from the results ledger.

    python bench/report.py [--store .pathweaver] [--ledger FILE] [--doc docs/benchmarks.md] [--img docs/img]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pathweaver.eval.ledger import Ledger
from pathweaver.eval.report import render_report
from pathweaver.locations import EVAL_STORE_ROOT, explicit_store

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="store whose ledger.duckdb to read (default: $PATHWEAVER_STORE or .pathweaver)")
    parser.add_argument("--ledger", help="ledger file (overrides --store and $PATHWEAVER_LEDGER)")
    parser.add_argument("--dataset", help="only runs on this data set")
    parser.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--img", default=str(ROOT / "docs" / "img"))
    args = parser.parse_args(argv)
    ledger = Ledger(Path(args.ledger)) if args.ledger else Ledger.for_store(explicit_store(args.store) or Path(EVAL_STORE_ROOT))
    rows = ledger.history(dataset=args.dataset)
    out = render_report(rows, Path(args.doc), Path(args.img))
    print(json.dumps({"ledger": str(ledger.path), **out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
