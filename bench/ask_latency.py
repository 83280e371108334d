"""Latency of ``ask`` per LLM backend on the demo corpus (issue 4), or warm ``ask`` without a model on a notes
benchmark (issue 37): p50/p95 seconds and tokens per answer.

    python bench/ask_latency.py [--backends none,llamacpp] [--methods hybrid,pathrag,mcmi] [--repeat 3]
                                [--decompose] [--store DIR]
    python bench/ask_latency.py --notes datasets/notes [--split dev] [--methods ppr] [--store DIR] [--profile F]
                                [--corpora a,b] [--limit N]

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


def run_notes(folder: Path, split_name: str, store: Path, methods: list[str], repeat: int,
              profile: Path | None, corpora: list[str] | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Warm ``ask`` with no model over every question of a notes benchmark split: each corpus's store is opened
    and indexed once (``eval.notes_runner.open_notes_store``) and answers one question untimed (model load),
    then every question is timed, ``repeat`` times. With ``profile``, cProfile's stats of the timed asks go to
    that file (``python -m pstats``). ``corpora`` and ``limit`` keep only those corpora and the first ``limit``
    questions of each."""
    import cProfile

    from pathweaver.eval.notes import load_notes, notes_split
    from pathweaver.eval.notes_runner import open_notes_store

    data = load_notes(folder)
    questions = notes_split(data.questions, split_name)
    llm = None
    rows = []
    prof = cProfile.Profile() if profile else None
    for method in methods:
        seconds: list[float] = []
        for corpus, source in data.corpora.items():
            asked = [q for q in questions if q.corpus == corpus][:limit]
            if not asked or (corpora and corpus not in corpora):
                continue
            pw, _, _ = open_notes_store(store, corpus, source, {"models": {"llm_backend": "none"}})
            try:
                llm = llm or resolve_backend(dataclasses.replace(pw.settings.models, llm_backend="none"))
                pw.ask(asked[0].text, method=method, llm=llm)  # models and the snapshot load outside timing
                for _ in range(repeat):
                    for q in asked:
                        if prof:
                            prof.enable()
                        start = time.perf_counter()
                        pw.ask(q.text, method=method, llm=llm)
                        seconds.append(time.perf_counter() - start)
                        if prof:
                            prof.disable()
            finally:
                pw.close()
        row = {"method": method, "split": split_name, "answers": len(seconds), "p50_s": statistics.median(seconds),
               "p95_s": float(np.percentile(seconds, 95)), "max_s": max(seconds)}
        print(f"  notes {split_name} {method:8s} p50 {row['p50_s']:6.2f} s  p95 {row['p95_s']:6.2f} s  "
              f"max {row['max_s']:6.2f} s  ({len(seconds)} answers)")
        rows.append(row)
    if prof and profile:
        prof.dump_stats(str(profile))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="none,llamacpp")
    parser.add_argument("--methods", default=None, help="default hybrid,pathrag,mcmi; with --notes, ppr")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--decompose", action="store_true", help="plan with decompose_query first")
    parser.add_argument("--store", type=Path, default=None)
    parser.add_argument("--notes", type=Path, default=None, help="a notes benchmark folder: warm ask, no model")
    parser.add_argument("--split", default="dev", help="with --notes: the split whose questions are asked")
    parser.add_argument("--profile", type=Path, default=None, help="with --notes: cProfile stats to this file")
    parser.add_argument("--corpora", default=None, help="with --notes: only these corpora (comma-separated)")
    parser.add_argument("--limit", type=int, default=None, help="with --notes: the first N questions per corpus")
    args = parser.parse_args(argv)
    if args.notes:
        methods = [m for m in (args.methods or "ppr").split(",") if m]
        corpora = args.corpora.split(",") if args.corpora else None
        if args.store:
            run_notes(args.notes, args.split, args.store, methods, args.repeat, args.profile, corpora, args.limit)
            return 0
        with tempfile.TemporaryDirectory(prefix="pw-ask-notes-") as tmp:
            run_notes(args.notes, args.split, Path(tmp), methods, args.repeat, args.profile, corpora, args.limit)
        return 0
    backends = [b for b in args.backends.split(",") if b]
    methods = [m for m in (args.methods or "hybrid,pathrag,mcmi").split(",") if m]
    if args.store:
        run(args.store, backends, methods, args.repeat, args.decompose)
        return 0
    with tempfile.TemporaryDirectory(prefix="pw-ask-") as tmp:
        run(Path(tmp) / "store", backends, methods, args.repeat, args.decompose)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
