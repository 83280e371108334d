"""A pure, CPU-bound pass over a list, cut into parts that run side by side: one here, the rest in forked children.

The spaCy pass holds the GIL, so threads do not run it side by side (docs/benchmarks.md, "Indexing"); forked children
do, and they share the loaded pipeline with this process instead of loading it again. Only Linux forks here (macOS
and Windows children would have to re-import and re-load). The children's output is a convenience, never a
dependency: a part whose child fails, dies or hangs is run here, so the result is always ``fn(items)``.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_AUTO_PROCESSES = 4  # ``processes = 0``: one per core, at most this many
MIN_WAIT_S = 30.0  # a child may take at least this long from the start before its part is run here instead
WAIT_FACTOR = 4.0  # ... or this many times as long as this process's own part took, whichever is longer


def can_fork() -> bool:
    """Whether parts may run in forked children on this platform."""
    return sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods()


def process_count(processes: int) -> int:
    """The number of processes ``processes`` asks for (0 = one per core, up to ``MAX_AUTO_PROCESSES``)."""
    if processes > 0:
        return processes
    return max(1, min(MAX_AUTO_PROCESSES, os.cpu_count() or 1))


def fork_map(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], processes: int, min_per_process: int,
             min_wait_s: float = MIN_WAIT_S) -> list[R]:
    """``fn(items)``, computed as ``fn`` over up to ``processes`` contiguous parts of at least ``min_per_process``
    items each, the first here and the others in forked children; ``fn`` must be pure and return one output per
    item, in order."""
    n = min(process_count(processes), len(items) // max(1, min_per_process)) if can_fork() else 1
    if n <= 1:
        return fn(items)
    cuts = [round(i * len(items) / n) for i in range(n + 1)]
    parts = [items[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    ctx = mp.get_context("fork")
    children: list[tuple[Any, Connection, Sequence[T]]] = []
    gc.freeze()  # the children's collector then leaves the shared heap alone instead of copying its pages
    try:
        for part in parts[1:]:
            recv, send = ctx.Pipe(duplex=False)
            child = ctx.Process(target=_run_child, args=(fn, part, send), daemon=True)
            child.start()
            send.close()
            children.append((child, recv, part))
    finally:
        gc.unfreeze()
    started = time.monotonic()
    out = list(fn(parts[0]))
    deadline = started + max(min_wait_s, WAIT_FACTOR * (time.monotonic() - started))
    for child, recv, part in children:
        got = _receive(recv, deadline - time.monotonic())
        if got is None or len(got) != len(part):
            child.kill()
            got = fn(part)
        child.join()
        recv.close()
        out.extend(got)
    return out


def _receive(conn: Connection, timeout: float) -> list[Any] | None:
    """The child's output, or None when it failed, died or did not answer within ``timeout`` seconds."""
    try:
        if not conn.poll(max(0.0, timeout)):
            return None
        ok, value = conn.recv()
    except (EOFError, OSError):
        return None
    return value if ok else None


def _run_child(fn: Callable[[Sequence[T]], list[R]], part: Sequence[T], send: Connection) -> None:
    try:
        result: tuple[bool, list[R] | None] = (True, list(fn(part)))
    except BaseException:  # the parent runs this part itself; a traceback here would only be noise
        result = (False, None)
    try:
        send.send(result)
    finally:
        send.close()
