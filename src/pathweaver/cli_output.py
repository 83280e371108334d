"""How the command line prints: one JSON object under ``--json``, else a short human form per result kind, and a
progress bar on an interactive terminal."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def emit(args: argparse.Namespace, data: Any, human: Callable[[Any], str]) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, ensure_ascii=False, default=str))
    else:
        print(human(data))


@contextmanager
def progress_bar(args: argparse.Namespace) -> Iterator[Callable[[int, int, str], None] | None]:
    """A tqdm bar on an interactive terminal; nothing under ``--json`` or when stderr is not a TTY."""
    if getattr(args, "json", False) or not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=0, unit="file", file=sys.stderr, leave=False)

    def update(done: int, total: int, message: str) -> None:
        bar.total = total
        bar.n = done
        bar.set_description(message[-40:])
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()


def fmt_report(data: dict[str, Any]) -> str:
    keys = ("added", "updated", "renamed", "deleted", "unchanged", "skipped")
    lines = [", ".join(f"{k} {data[k]}" for k in keys) + f" in {data['seconds']:.1f}s"]
    lines += [f"  skipped {s['path']!r}: {s['reason']}" for s in data.get("skipped_files", [])]
    return "\n".join(lines)


def fmt_chunks(data: dict[str, Any]) -> str:
    lines = []
    method = data.get("method")
    if isinstance(method, dict):
        differs = method.get("differs_from_paper")
        lines.append(f"{method.get('name')} (preset {method.get('preset')})" + (f"; differs from the paper: {differs}"
                                                                                 if differs else ""))
    if (data.get("info") or {}).get("short"):
        lines.append(data["info"]["short"])
    for path in data.get("paths", []):
        lines.append(f"path ({path['reliability']:.3f}): {path['text']}")
    if data.get("subgraph"):
        lines.append(f"subgraph: {data['subgraph'].get('stats', {})}")
    for i, c in enumerate(data.get("chunks", []), 1):
        snippet = " ".join(c["text"].split())[:160]
        lines.append(f"[{i}] {c['score']:.3f} {c['doc']} (chunk {c['chunk_id']}): {snippet}")
    lines.append(f"{data.get('seconds', 0.0) * 1000:.1f} ms")
    return "\n".join(lines)


def fmt_answer(data: dict[str, Any]) -> str:
    lines = [data.get("answer", ""), ""]
    for c in data.get("citations", []):
        span = c.get("span")
        where = f"chars {span[0]}-{span[1]}" if span else c.get("locator", "")
        lines.append(f"[{c['n']}] {c['doc']} chunk {c['chunk_id']} {where}")
    llm = data.get("llm") or {}
    backend = data.get("backend") or llm.get("backend")
    model = f" {llm['model']}" if backend != "extractive" and llm.get("model") else ""
    why = f" ({llm['reason']})" if llm.get("reason") and backend == llm.get("backend") else ""
    lines.append(f"\nbackend: {backend}{model}{why}; {data.get('seconds', 0.0):.2f}s")
    lines += [f"fallback: {f}" for f in llm.get("fallbacks", [])]
    return "\n".join(lines)
