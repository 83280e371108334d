"""extract/forked.py: parts of a pure pass run in forked children, and the result never depends on them."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import pytest

from pathweaver.extract import forked

pytestmark = pytest.mark.skipif(not forked.can_fork(), reason="children are forked on Linux only")
PARENT = os.getpid()


def pids(items: Sequence[int]) -> list[tuple[int, int]]:
    return [(i, os.getpid()) for i in items]


def test_parts_run_in_children_and_come_back_in_order() -> None:
    out = forked.fork_map(pids, list(range(10)), processes=3, min_per_process=3)
    assert [i for i, _ in out] == list(range(10))
    by_part = [pid for _, pid in out]
    assert by_part[:3] == [PARENT] * 3 and len(set(by_part)) == 3  # three parts, three processes


def test_short_lists_and_one_process_stay_here() -> None:
    assert {pid for _, pid in forked.fork_map(pids, list(range(5)), processes=4, min_per_process=3)} == {PARENT}
    assert {pid for _, pid in forked.fork_map(pids, list(range(50)), processes=1, min_per_process=3)} == {PARENT}


def failing_in_children(items: Sequence[int]) -> list[int]:
    if os.getpid() != PARENT:
        raise RuntimeError("child fails")
    return [i * i for i in items]


def dying_in_children(items: Sequence[int]) -> list[int]:
    if os.getpid() != PARENT:
        os._exit(3)
    return [i * i for i in items]


def hanging_in_children(items: Sequence[int]) -> list[int]:
    if os.getpid() != PARENT:
        time.sleep(600)
    return [i * i for i in items]


@pytest.mark.parametrize("fn", [failing_in_children, dying_in_children, hanging_in_children])
def test_a_child_that_fails_dies_or_hangs_has_its_part_run_here(fn) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    assert forked.fork_map(fn, list(range(12)), processes=3, min_per_process=2, min_wait_s=1.0) == \
        [i * i for i in range(12)]
    assert time.monotonic() - started < 30  # a hanging child is given up on, and killed


def test_what_this_process_had_buffered_is_written_once() -> None:
    """A child must not flush the parent's buffered output a second time (an MCP server speaks on stdout):
    multiprocessing flushes the standard streams before it forks, and a child ends in ``os._exit``."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys\nfrom pathweaver.extract.forked import fork_map\n"
            "sys.stdout.write('half a message'); sys.stderr.write('half a line')\n"
            "fork_map(lambda xs: list(xs), list(range(8)), processes=4, min_per_process=2)\n"
            "sys.stdout.write(' and the rest'); sys.stderr.write(' and the rest')\n")
    src = str(Path(__file__).resolve().parents[1] / "src")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": src}, capture_output=True,
                         text=True, check=True)
    assert out.stdout == "half a message and the rest"
    assert out.stderr == "half a line and the rest"
