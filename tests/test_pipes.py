"""``server/pipes.py``: stdio on asyncio pipes, in a child process whose stdin and stdout are real pipes.

The child echoes each line it reads through the pipe sink, upper-cased. While it serves, a ``print`` and a raw
write to fd 1 must land on stderr, not in the protocol stream; afterwards fds 0 and 1 are back, blocking.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

CHILD = textwrap.dedent(
    """
    import os, sys, anyio
    from pathweaver.server.pipes import pipe_stdio, usable

    async def main():
        assert usable(), "pipes not detected"
        async with pipe_stdio() as pipes:
            assert pipes is not None
            lines, sink = pipes
            print("stray print", flush=True)
            os.write(1, b"stray fd write\\n")
            async for line in lines:
                await sink.write(f"{len(line)} {line[:20].upper().strip()}\\n")
                await sink.flush()
        print("restored", os.get_blocking(0), os.get_blocking(1), flush=True)

    assert not usable(), "no event loop: not usable"
    anyio.run(main)
    """
)


def run_child(stdin: bytes, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    return subprocess.run([sys.executable, str(script)], input=stdin, capture_output=True, timeout=60)


def test_lines_round_trip_and_stray_output_goes_to_stderr(tmp_path: Path) -> None:
    big = json.dumps({"pad": "x" * 300_000})  # far above asyncio's default 64 KiB line limit
    done = run_child(f"hello\n{big}\nlast line\n".encode(), tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode().splitlines()
    assert out[:3] == ["6 HELLO", f"{len(big) + 1} {big[:20].upper()}", "10 LAST LINE"]
    assert out[3:] == ["restored True True"], "fds 0 and 1 restored, in blocking mode"
    err = done.stderr.decode()
    assert "stray print" in err and "stray fd write" in err
    assert "stray" not in done.stdout.decode()


def test_lines_longer_than_the_buffer_and_an_unterminated_last_line(tmp_path: Path) -> None:
    from pathweaver.server.pipes import BUFFER

    done = run_child(b"a" * (3 * BUFFER + 10) + b"\nafter\nno newline", tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = done.stdout.decode().splitlines()
    assert out == [f"{3 * BUFFER + 11} {'A' * 20}", "6 AFTER", "10 NO NEWLINE", "restored True True"]


def test_a_regular_file_on_stdin_keeps_the_sdk_transport(tmp_path: Path) -> None:
    """Not a pipe (a file, a terminal): ``pipe_stdio`` yields None and touches no descriptor."""
    script = tmp_path / "child_file.py"
    script.write_text(textwrap.dedent(
        """
        import anyio
        from pathweaver.server.pipes import pipe_stdio

        async def main():
            async with pipe_stdio() as pipes:
                print("none" if pipes is None else "pipes", flush=True)

        anyio.run(main)
        """), encoding="utf-8")
    requests = tmp_path / "requests.jsonl"
    requests.write_text("{}\n", encoding="utf-8")
    with requests.open("rb") as stdin:
        done = subprocess.run([sys.executable, str(script)], stdin=stdin, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["none"]


def test_a_client_that_stops_reading_ends_the_lines_instead_of_a_broken_pipe(tmp_path: Path) -> None:
    script = tmp_path / "child_lost.py"
    script.write_text(textwrap.dedent(
        """
        import sys, anyio
        from pathweaver.server.pipes import pipe_stdio

        async def main():
            async with pipe_stdio() as (lines, sink):
                async for line in lines:
                    await sink.write(line)
                    await sink.flush()
            print("lines ended cleanly", file=sys.stderr, flush=True)

        anyio.run(main)
        """), encoding="utf-8")
    child = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    child.stdin.write(b"first\n")
    child.stdin.flush()
    assert child.stdout.readline() == b"first\n"
    child.stdout.close()  # the client stops reading
    with contextlib.suppress(BrokenPipeError):  # the child may already be gone
        for _ in range(50):
            child.stdin.write(b"more\n")
            child.stdin.flush()
            time.sleep(0.02)
    assert child.wait(timeout=30) == 0
    err = child.stderr.read().decode()
    assert "closed its end of stdout" in err and "lines ended cleanly" in err
    assert "Traceback" not in err
