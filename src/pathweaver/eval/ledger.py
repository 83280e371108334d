"""The results ledger: every eval and bench run appended as one row of a DuckDB table.

The file is ``<store>/ledger.duckdb`` unless ``$PATHWEAVER_LEDGER`` names another. Each row records the git commit,
so ``history`` compares runs across commits. Known metrics and latencies get their own columns; anything else a
run reports goes to the ``extra`` JSON column.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from pathweaver.config import ConfigError

LEDGER_ENV = "PATHWEAVER_LEDGER"
LEDGER_FILE = "ledger.duckdb"
TABLE = "runs"

# column -> DuckDB type; order is the table's column order
COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "commit": "VARCHAR",
    "time": "TIMESTAMP",
    "source": "VARCHAR",
    "dataset": "VARCHAR",
    "split": "VARCHAR",
    "method": "VARCHAR",
    "params": "VARCHAR",
    "k": "INTEGER",
    "n_questions": "INTEGER",
    "recall_at_k": "DOUBLE",
    "all_evidence_at_k": "DOUBLE",
    "all_evidence_at_8": "DOUBLE",
    "mrr": "DOUBLE",
    "evidence_recall": "DOUBLE",
    "p50_ms": "DOUBLE",
    "p95_ms": "DOUBLE",
    "seconds_per_query": "DOUBLE",
    "index_seconds": "DOUBLE",
    "peak_rss_mb": "DOUBLE",
    "extra": "VARCHAR",
    "exact_match": "DOUBLE",
    "f1": "DOUBLE",
    "answer_support": "DOUBLE",
}
ADDED = ("exact_match", "f1", "answer_support")  # columns later than the first table; older files gain them
REQUIRED = ("dataset", "method")


def git_commit(cwd: Path | None = None) -> str:
    """``git rev-parse HEAD`` of the source tree (or ``cwd``), with ``+dirty`` when tracked files under ``src/``
    or ``bench/`` differ from it (the figures then come from code no commit holds), or ``"unknown"``."""
    where = cwd or Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10,
                                 check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if not head:
        return "unknown"
    top = git("rev-parse", "--show-toplevel")
    changed = git("status", "--porcelain", "--untracked-files=no", "--", f"{top}/src", f"{top}/bench") if top else ""
    return f"{head}+dirty" if changed else head


def ledger_path(store_dir: Path | str) -> Path:
    """``$PATHWEAVER_LEDGER`` if set, else ``<store>/ledger.duckdb``."""
    env = os.environ.get(LEDGER_ENV)
    return Path(env).expanduser() if env else Path(store_dir) / LEDGER_FILE


class Ledger:
    """Append-only table of runs in one DuckDB file (a connection per call, so runs never hold it open)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    @classmethod
    def for_store(cls, store_dir: Path | str) -> Ledger:
        return cls(ledger_path(store_dir))

    def _connect(self) -> duckdb.DuckDBPyConnection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = duckdb.connect(str(self.path))
        cols = ", ".join(f'"{name}" {kind}' for name, kind in COLUMNS.items())
        conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ({cols})")
        for name in ADDED:
            conn.execute(f'ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS "{name}" {COLUMNS[name]}')
        return conn

    def _row(self, data: dict[str, Any], commit: str, now: datetime) -> list[Any]:
        missing = [key for key in REQUIRED if not data.get(key)]
        if missing:
            raise ConfigError(f"ledger row needs {', '.join(missing)}: {sorted(data)}")
        row = {
            "run_id": data.get("run_id") or uuid.uuid4().hex[:12],
            "commit": data.get("commit") or commit,
            "time": data.get("time") or now,
            "source": data.get("source") or "eval",
            "params": json.dumps(data.get("params") or {}, sort_keys=True, default=str),
        }
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key in row:
                continue
            if key in COLUMNS:
                row[key] = value
            else:
                extra[key] = value
        row["extra"] = json.dumps(extra, sort_keys=True, default=str)
        return [row.get(name) for name in COLUMNS]

    def append(self, rows: list[dict[str, Any]]) -> list[str]:
        """Append runs; returns their run ids. ``commit`` defaults to the current git HEAD, ``time`` to now."""
        if not rows:
            return []
        commit = git_commit()
        now = datetime.now(UTC).replace(tzinfo=None)
        values = [self._row(r, commit, now) for r in rows]
        conn = self._connect()
        try:
            marks = ", ".join("?" for _ in COLUMNS)
            names = ", ".join(f'"{name}"' for name in COLUMNS)
            conn.executemany(f"INSERT INTO {TABLE} ({names}) VALUES ({marks})", values)
        finally:
            conn.close()
        return [v[0] for v in values]

    def history(self, dataset: str | None = None, source: str | None = None) -> list[dict[str, Any]]:
        """All runs, oldest first, optionally of one data set and/or source; params/extra decoded."""
        if not self.path.exists():
            return []
        where, args = [], []
        if dataset:
            where.append("dataset = ?")
            args.append(dataset)
        if source:
            where.append("source = ?")
            args.append(source)
        sql = f"SELECT * FROM {TABLE}" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY time, rowid"
        conn = self._connect()
        try:
            cur = conn.execute(sql, args)
            names = [d[0] for d in cur.description]
            out = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        finally:
            conn.close()
        for row in out:
            row["params"] = json.loads(row["params"] or "{}")
            row["extra"] = json.loads(row["extra"] or "{}")
            row["time"] = row["time"].isoformat(timespec="seconds") if row["time"] else None
        return out

    def format_history(self, rows: list[dict[str, Any]]) -> str:
        return format_history(rows)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_history(rows: list[dict[str, Any]]) -> str:
    """A fixed-width table of runs (commit, data set, split, method, k, quality, latency) to compare commits."""
    if not rows:
        return "no runs in the ledger yet"
    header = ["time", "commit", "source", "dataset", "split", "method", "k", "n", "recall@k", "all_ev@k", "mrr",
              "em", "f1", "support", "p50_ms", "p95_ms"]
    table = [header]
    for r in rows:
        table.append([
            str(r.get("time") or "-"), str(r.get("commit") or "-")[:8], str(r.get("source") or "-"),
            str(r.get("dataset")), str(r.get("split") or "-"), str(r.get("method")), _fmt(r.get("k")),
            _fmt(r.get("n_questions")), _fmt(r.get("recall_at_k")), _fmt(r.get("all_evidence_at_k")),
            _fmt(r.get("mrr")), _fmt(r.get("exact_match")), _fmt(r.get("f1")), _fmt(r.get("answer_support")),
            _fmt(r.get("p50_ms"), 1), _fmt(r.get("p95_ms"), 1),
        ])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
