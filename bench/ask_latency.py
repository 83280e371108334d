"""Latency of ``ask`` per LLM backend on the demo corpus (issue 4): p50/p95 seconds and tokens per answer.

    python bench/ask_latency.py [--backends none,llamacpp] [--methods hybrid,pathrag,mcmi] [--repeat 3]
                                [--decompose] [--store DIR]

The demo corpus is indexed once into a temp store (or ``--store DIR``, re-used when unchanged). Each backend
answers the same questions with each method; ``openai`` needs ``models.openai_base_url`` (a running endpoint) and
``sampling`` an MCP client, so they are measured only when configured (``--backends openai`` with
``PATHWEAVER_MODELS__OPENAI_BASE_URL`` set, or through ``bench/mcp_latency.py`` for sampling).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from pathweaver.demo import demo_corpus
from pathweaver.models.llm import resolve_backend
from pathweaver.service import Pathweaver

QUESTIONS = (
    "Who warned Scrooge that three spirits would visit him?",
    "What was Jacob Marley to Scrooge?",
    "Who is the youngest son of Bob Cratchit?",
)


def run(store: Path, backends: list[str], methods: list[str], repeat: int, decompose: bool) -> list[dict[str, Any]]:
    """Answer every question ``repeat`` times per (backend, method); one row of figures per pair."""
    rows = []
    with Pathweaver.open(store) as pw:
        report = pw.index([demo_corpus()])
        print(f"store {store}: {pw.stats()['chunks']} chunks (index {report.seconds:.1f} s)")
        for backend in backends:
            llm = resolve_backend(dataclasses.replace(pw.settings.models, llm_backend=backend))
            for method in methods:
                seconds, tokens, fallbacks = [], [], 0
                pw.ask(QUESTIONS[0], method=method, llm=llm, decompose=decompose)  # model load outside timing
                for _ in range(repeat):
                    for q in QUESTIONS:
                        start = time.perf_counter()
                        out = pw.ask(q, method=method, llm=llm, decompose=decompose)
                        seconds.append(time.perf_counter() - start)
                        usage = out.get("llm", {})
                        tokens.append(int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0)))
                        fallbacks += bool(usage.get("fallbacks"))
                row = {"backend": backend, "model": getattr(llm, "model", ""), "method": method,
                       "p50_s": statistics.median(seconds), "p95_s": float(np.percentile(seconds, 95)),
                       "tokens_median": statistics.median(tokens), "answers": len(seconds),
                       "with_fallback": fallbacks}
                print(f"  {backend:9s} {method:8s} p50 {row['p50_s']:7.2f} s  p95 {row['p95_s']:7.2f} s  "
                      f"tokens {row['tokens_median']:6.0f}  fallbacks {fallbacks}/{len(seconds)}")
                rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="none,llamacpp")
    parser.add_argument("--methods", default="hybrid,pathrag,mcmi")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--decompose", action="store_true", help="plan with decompose_query first")
    parser.add_argument("--store", type=Path, default=None)
    args = parser.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    methods = [m for m in args.methods.split(",") if m]
    if args.store:
        run(args.store, backends, methods, args.repeat, args.decompose)
        return 0
    with tempfile.TemporaryDirectory(prefix="pw-ask-") as tmp:
        run(Path(tmp) / "store", backends, methods, args.repeat, args.decompose)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
