"""One cold CLI ``retrieve`` (a new process: imports, model load, snapshot read, the query) and a warm server's
memory, on an indexed store; the store's size on disk.

    python bench/cold_retrieve.py --store .pathweaver/eval/2wikimultihopqa/store [--methods dense,ppr] [--repeat 3]

Each cold run is ``python -m pathweaver.cli --store STORE retrieve QUESTION --method M`` in a fresh process; wall
time and the child's peak RSS (``getrusage``'s ru_maxrss of that child alone, through ``os.wait4``) are printed per
method as medians. The warm figure starts ``pathweaver serve`` on the store, calls search, retrieve_paths,
build_mcmi and answer through a real MCP client, ``1 + --warm-calls`` rounds, and reads the server's peak RSS
(VmHWM) from /proc. Figures are printed only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

SRC = Path(__file__).resolve().parents[1] / "src"
QUESTION = "Where was the director of film Inherent Vice born?"


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(SRC), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                OPENBLAS_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")


def cold_run(store: Path, method: str, question: str) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one CLI retrieve in a new process."""
    cmd = [sys.executable, "-m", "pathweaver.cli", "--store", str(store), "retrieve", question, "--method", method,
           "--json"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with status {status}")
    return took, usage.ru_maxrss / 1024.0


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


WARM_TOOLS = (("search", {"mode": "hybrid"}), ("retrieve_paths", {}), ("build_mcmi", {}), ("answer", {}))


async def warm_server(store: Path, question: str, calls: int) -> float:
    """Peak RSS (MB) of a stdio server after rounds of search, retrieve_paths, build_mcmi and answer (ppr)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "pathweaver.cli", "--store", str(store),
                                                                 "serve"], env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for _ in range(1 + calls):
            for tool, extra in WARM_TOOLS:
                key = "query" if tool == "search" else "question"
                res = await session.call_tool(tool, {key: question, **extra})
                if res.is_error:
                    raise SystemExit(f"{tool}: {res.content}")
        pids = subprocess.run(["pgrep", "-f", "--", f"--store {store} serve"], capture_output=True, text=True).stdout
        return max((_peak_rss_mb(int(p)) for p in pids.split()), default=float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="an indexed store folder")
    parser.add_argument("--methods", default="dense,ppr")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warm-calls", type=int, default=5)
    args = parser.parse_args()
    methods = args.methods.split(",")
    size = sum(f.stat().st_size for f in args.store.iterdir() if f.is_file()) / 2**20
    print(f"store {args.store}: {size:.0f} MB on disk")
    for method in methods:
        runs = [cold_run(args.store, method, args.question) for _ in range(args.repeat)]
        print(f"cold retrieve --method {method}: median {statistics.median(r[0] for r in runs):.2f} s, "
              f"peak RSS median {statistics.median(r[1] for r in runs):.0f} MB over {args.repeat} runs")
    rss = anyio.run(warm_server, args.store, args.question, args.warm_calls)
    print(f"warm server after {1 + args.warm_calls} rounds of {', '.join(t for t, _ in WARM_TOOLS)}: "
          f"peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
