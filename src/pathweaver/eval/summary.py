"""Plain-text summaries of ``pathweaver eval`` results: every all-evidence and recall figure with its 95% interval,
overall and, on the notes benchmark, per question kind (``--json`` prints the full result instead)."""

from __future__ import annotations

import json
from typing import Any


def _ci(value: float, ci: list[float] | None) -> str:
    return f"{value:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{value:.3f}"


def _figures(d: dict[str, Any], k: int) -> str:
    return (f"all-evidence@{k} {_ci(d['all_evidence_at_k'], d.get('all_evidence_at_k_ci95'))}  "
            f"recall@{k} {_ci(d['recall_at_k'], d.get('recall_at_k_ci95'))}")


def format_retrieval(d: dict[str, Any]) -> str:
    """One line of figures overall, one per question kind where the result has them, then latency."""
    k = d["k"]
    how = d.get("intervals") or {}
    lines = [f"{d['dataset']} {d['split']}, method {d['method']}, top {k}: {d['n_questions']} questions",
             f"  overall   {_figures(d, k)}"]
    for kind, row in (d.get("by_kind") or {}).items():
        lines.append(f"  {kind:<9} {_figures(row, k)}  (n={row['n']})")
    lines.append(f"  95% intervals: all-evidence {how.get('all_evidence', '?')}, recall {how.get('recall', '?')}")
    lines.append(f"  p50 {d.get('p50_ms', 0.0):.0f} ms, p95 {d.get('p95_ms', 0.0):.0f} ms, "
                 f"back-fill share {d.get('backfill_share', 0.0):.2f}")
    return "\n".join(lines)


def _share(row: dict[str, Any] | None) -> str:
    if not row:
        return "-"
    lo, hi = row["ci95"]
    return f"{row['share']:.3f} [{lo:.2f}, {hi:.2f}] (n={row['n']})"


def format_answers(d: dict[str, Any]) -> str:
    """Key-fact coverage and "the notes don't say" overall and per kind (notes benchmark); JSON otherwise."""
    if "facts_covered" not in d:
        return json.dumps(d, indent=2, default=str)
    lines = [f"{d['dataset']} {d['split']}, {d['method']}, top {d['k']}: {d['n_questions']} questions",
             f"  key facts all in the answer (answerable): {_share(d['facts_covered'])}",
             f"  ... in an answer not saying \"don't say\":  {_share(d.get('facts_stated'))}",
             f"  says the notes don't say (unanswerable):  {_share(d['doesnt_say_unanswerable'])}",
             f"  says the notes don't say (answerable):    {_share(d['doesnt_say_answerable'])}"]
    for kind, row in d["by_kind"].items():
        label = "doesn't say" if "doesnt_say" in row else "key facts"
        lines.append(f"  {kind:<12} {label}: {_share(row.get('doesnt_say') or row.get('facts_covered'))}")
    lines.append(f"  95% intervals: {d.get('intervals', '?')}; p50 {d.get('p50_ms', 0.0):.0f} ms")
    return "\n".join(lines)
