"""Render the ledger into ``docs/benchmarks.md`` tables and PNG plots.

Only the text between ``<!-- ledger:begin -->`` and ``<!-- ledger:end -->`` is replaced, so hand-written sections
of the page stay as they are. Plots need matplotlib (pip extra ``bench``); without it the tables are still written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pathweaver.config import ConfigError

BEGIN = "<!-- ledger:begin -->"
END = "<!-- ledger:end -->"
QUALITY_PNG = "quality_vs_latency.png"
SCALING_PNG = "latency_vs_graph_size.png"


def latest(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest row per (source, dataset, split, method, k); rows come oldest first from the ledger."""
    keep: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        keep[(row.get("source"), row.get("dataset"), row.get("split"), row.get("method"), row.get("k"))] = row
    return list(keep.values())


def _cell(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value).replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def quality_tables(rows: Sequence[dict[str, Any]]) -> str:
    """One table per (source, data set): quality and latency per method, newest run of each."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in latest(rows):
        if row.get("recall_at_k") is None and row.get("evidence_recall") is None:
            continue
        groups.setdefault((str(row.get("source")), str(row.get("dataset"))), []).append(row)
    parts = []
    header = ["method", "split", "k", "n", "recall@k", "all-evidence@k", "all-evidence@8", "MRR", "evidence recall",
              "p50 ms", "p95 ms", "index s", "peak MB", "commit", "time"]
    for (source, dataset), group in sorted(groups.items()):
        group.sort(key=lambda r: (str(r.get("split")), -(r.get("recall_at_k") or r.get("evidence_recall") or 0)))
        body = [[
            _cell(r.get("method")), _cell(r.get("split")), _cell(r.get("k")), _cell(r.get("n_questions")),
            _cell(r.get("recall_at_k")), _cell(r.get("all_evidence_at_k")), _cell(r.get("all_evidence_at_8")),
            _cell(r.get("mrr")), _cell(r.get("evidence_recall")), _cell(r.get("p50_ms"), 1),
            _cell(r.get("p95_ms"), 1), _cell(r.get("index_seconds"), 1), _cell(r.get("peak_rss_mb"), 0),
            _cell(str(r.get("commit") or "")[:8]), _cell(str(r.get("time") or "")[:10]),
        ] for r in group]
        parts.append(f"### {dataset} ({source})\n\n{_table(header, body)}")
    return "\n\n".join(parts) or "_no quality runs in the ledger yet_"


def scaling_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Latency rows that carry a graph size (``extra.n_edges``), from ``bench/latency.py``."""
    return [r for r in latest(rows) if (r.get("extra") or {}).get("n_edges") is not None and r.get("p50_ms") is not None]


def scaling_table(rows: Sequence[dict[str, Any]]) -> str:
    data = sorted(scaling_rows(rows), key=lambda r: (str(r["method"]), r["extra"]["n_edges"]))
    if not data:
        return "_no latency-at-size runs in the ledger yet_"
    body = [[_cell(r["method"]), _cell(r["dataset"]), _cell(r["extra"]["n_edges"]), _cell(r["p50_ms"], 1),
             _cell(r["p95_ms"], 1), _cell(str(r.get("commit") or "")[:8])] for r in data]
    return _table(["method", "graph", "edges", "p50 ms", "p95 ms", "commit"], body)


def markdown(rows: Sequence[dict[str, Any]], img_rel: str | None = None, plots: Sequence[str] = ()) -> str:
    """The generated block: quality tables, the latency-at-size table, and links to the plots."""
    parts = ["_Generated from the results ledger by `bench/report.py`; newest run per method. Do not edit by hand._",
             "## Retrieval quality and latency", quality_tables(rows), "## Latency vs graph size", scaling_table(rows)]
    if img_rel and plots:
        parts.append("## Plots")
        parts += [f"![{name}]({img_rel}/{name})" for name in plots]
    return "\n\n".join(parts)


def splice(document: str, block: str) -> str:
    """Replace the text between the markers (appending the markers at the end when absent)."""
    start, end = document.find(BEGIN), document.find(END)
    if (start < 0) != (end < 0) or (start >= 0 and end < start):
        raise ConfigError(f"the page has unbalanced {BEGIN} / {END} markers; fix them by hand")
    if start < 0:
        sep = "" if not document or document.endswith("\n\n") else ("\n" if document.endswith("\n") else "\n\n")
        return f"{document}{sep}{BEGIN}\n{block}\n{END}\n"
    return f"{document[: start + len(BEGIN)]}\n{block}\n{document[end:]}"


def plot_quality_latency(rows: Sequence[dict[str, Any]], out: Path) -> bool:
    """Scatter of recall@k against p50 latency per method, one colour per data set; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    data = [r for r in latest(rows) if r.get("recall_at_k") is not None and r.get("p50_ms")]
    if not data:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    for dataset in sorted({str(r["dataset"]) for r in data}):
        pts = [r for r in data if r["dataset"] == dataset]
        ax.scatter([r["p50_ms"] for r in pts], [r["recall_at_k"] for r in pts], label=dataset)
        for r in pts:
            ax.annotate(str(r["method"]), (r["p50_ms"], r["recall_at_k"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("query latency p50 (ms, log)")
    ax.set_ylabel("recall@k")
    ax.set_title("Retrieval quality vs latency")
    ax.legend()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def plot_latency_scaling(rows: Sequence[dict[str, Any]], out: Path) -> bool:
    """p50 latency against graph edges per method (log-log); False without matplotlib or data."""
    data = scaling_rows(rows)
    if not data:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    for method in sorted({str(r["method"]) for r in data}):
        pts = sorted((r["extra"]["n_edges"], r["p50_ms"]) for r in data if r["method"] == method)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=method)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("graph edges")
    ax.set_ylabel("query latency p50 (ms)")
    ax.set_title("Latency vs graph size")
    ax.legend(fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def render_report(rows: Sequence[dict[str, Any]], doc: Path, img_dir: Path) -> dict[str, Any]:
    """Write the plots into ``img_dir`` and the tables into ``doc`` between the markers."""
    plots = []
    if plot_quality_latency(rows, img_dir / QUALITY_PNG):
        plots.append(QUALITY_PNG)
    if plot_latency_scaling(rows, img_dir / SCALING_PNG):
        plots.append(SCALING_PNG)
    try:
        img_rel = Path(img_dir).resolve().relative_to(Path(doc).resolve().parent).as_posix()
    except ValueError:
        img_rel = Path(img_dir).resolve().as_posix()
    existing = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(splice(existing, markdown(rows, img_rel, plots)), encoding="utf-8")
    return {"doc": str(doc), "plots": [str(img_dir / p) for p in plots], "rows": len(rows)}
