"""``decompose_query`` and ``answer`` with default settings, through a real MCP client (issue 24 goal: <= 5 s).

    python bench/default_latency.py [--repeat 5] [--json]

Copies the demo corpus to a temp folder, starts ``pathweaver serve --watch`` over stdio with no ``PATHWEAVER_*``
settings and a client that offers no sampling (so ``auto`` resolves to the extractive backend), waits for the
background index, then calls each tool on each question ``--repeat`` times. The first call of each tool is
reported apart (``first_s``): it pays for what the server builds once per store version.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from pathweaver.demo import DEFAULT_QUESTION, OFFLINE_ENV, demo_corpus, server_command, wait_until_indexed  # noqa: E402

QUESTIONS = (
    DEFAULT_QUESTION,
    "What was the name of Scrooge's clerk?",
    "Who was Scrooge's late partner?",
)
CALLS = (
    ("decompose_query", lambda q: {"question": q}),
    ("answer", lambda q: {"question": q}),
    ("answer --decompose", lambda q: {"question": q, "decompose": True}),
)


async def measure(repeat: int) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    with tempfile.TemporaryDirectory(prefix="pathweaver-latency-") as tmp:
        notes, store = Path(tmp) / "notes", Path(tmp) / "store"
        shutil.copytree(demo_corpus(), notes)
        command, args = server_command(store, [notes])
        env = {k: v for k, v in os.environ.items() if not k.startswith("PATHWEAVER_")}
        params = StdioServerParameters(command=command, args=args, env={**env, **OFFLINE_ENV})
        with open(Path(tmp) / "server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                status = await wait_until_indexed(session, lambda line: None)
                times: dict[str, list[float]] = {name: [] for name, _ in CALLS}
                backends: dict[str, set[str]] = {name: set() for name, _ in CALLS}
                for _ in range(repeat):
                    for question in QUESTIONS:
                        for name, arguments in CALLS:
                            tool = name.split()[0]
                            start = time.perf_counter()
                            result = await session.call_tool(tool, arguments(question))
                            times[name].append(time.perf_counter() - start)
                            if result.is_error:
                                raise RuntimeError(f"{name}: {result.content}")
                            data = result.structured_content or {}
                            backends[name].add(str(data.get("backend") or data.get("source")))
    return {
        "llm": status.get("llm"),
        "chunks": status["stats"]["chunks"],
        "calls": {
            name: {
                "first_s": round(values[0], 3),
                "median_s": round(statistics.median(values[1:] or values), 3),
                "max_s": round(max(values[1:] or values), 3),
                "n": len(values),
                "by": sorted(backends[name]),
            }
            for name, values in times.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    out = anyio.run(measure, args.repeat)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"backend: {out['llm']}; {out['chunks']} chunks")
    for name, row in out["calls"].items():
        print(f"{name:>20}: first {row['first_s']:.3f} s, median {row['median_s']:.3f} s, max {row['max_s']:.3f} s "
              f"(n={row['n']}, by {', '.join(row['by'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
