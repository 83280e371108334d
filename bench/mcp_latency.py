"""MCP overhead and freshness: p50/p95 per tool over stdio vs the same call in-process, and write-to-searchable time.

    python bench/mcp_latency.py [--corpus demo] [--repeat 20] [--freshness 5]
    python bench/mcp_latency.py --store STORE --corpus FOLDER --question Q --search TEXT   # e.g. the 2wiki store

Without ``--store`` it copies the corpus to a temp folder, indexes it in-process (for the in-process timings), then
starts ``pathweaver serve --watch`` over stdio on a second store over the same folder. With ``--store`` both sides
use that already indexed store of ``--corpus`` in place (bench/peers.py's 2wiki store, say). Each tool is timed
through a real ClientSession. Freshness: a file with a unique phrase is written and ``search`` is polled until it
is found, once with the server idle and once while it indexes a burst of other new files (busy); at the end the
written files are deleted and ``search`` is polled until the last phrase is gone. Figures are printed only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from pathweaver.demo import OFFLINE_ENV, demo_corpus, server_command, wait_until_indexed  # noqa: E402

QUESTION = "Who warned Scrooge that three spirits would visit him?"
SEARCH = "Tiny Tim"
POLL_S = 0.05


def cases(question: str = QUESTION, text: str = SEARCH) -> list[tuple[str, dict[str, Any], Callable[[Any], Any]]]:
    """(tool, arguments, the same call on the service)."""
    return [
        ("search", {"query": text, "mode": "hybrid", "k": 5}, lambda s: s.search(text, "hybrid", 5)),
        ("retrieve_paths", {"question": question}, lambda s: s.retrieve_json(question, "pathrag", 5)),
        ("build_mcmi", {"question": question}, lambda s: s.retrieve_json(question, "mcmi", 5)),
        ("decompose_query", {"question": question}, lambda s: s.plan(question)),
        ("index_status", {}, lambda s: s.stats()),
    ]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def reported(result: Any) -> float | None:
    """The retrieval seconds a result reports about itself (retrieval tools), else None."""
    value = result.get("seconds") if isinstance(result, dict) else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def residuals(times: list[float], inner: list[float | None]) -> list[float]:
    """Per call, wall time minus the retrieval time the call reported (what the call added around the work)."""
    return [t - s for t, s in zip(times, inner, strict=True) if s is not None]


def in_process(notes: Path, store: Path, repeat: int, calls: list, index: bool = True) -> dict[str, Any]:
    from pathweaver.service import Pathweaver

    out: dict[str, Any] = {"inner": {}}
    with Pathweaver.open(store) as svc:
        if index:
            svc.index([notes])
        for name, _, fn in calls:
            fn(svc)  # warm caches (snapshot, model)
            times, inner = [], []
            for _ in range(repeat):
                t0 = time.perf_counter()
                result = fn(svc)
                times.append(time.perf_counter() - t0)
                inner.append(reported(result))
            out[name] = times
            out["inner"][name] = inner
    return out


async def over_stdio(notes: Path, store: Path, repeat: int, freshness: int, calls: list) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command, args = server_command(store, [notes])
    params = StdioServerParameters(command=command, args=args, env={**os.environ, **OFFLINE_ENV})
    out: dict[str, Any] = {"tools": {}}
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            t0 = time.perf_counter()
            await wait_until_indexed(session, lambda _: None)
            out["index_seconds"] = time.perf_counter() - t0
            out["ping"] = []
            for _ in range(repeat):  # the SDK's own round trip: no tool, no result to shape or check
                t0 = time.perf_counter()
                await session.send_ping()
                out["ping"].append(time.perf_counter() - t0)
            out["validation"], out["inner"] = {}, {}
            for name, arguments, _ in calls:
                await session.call_tool(name, arguments)
                times, checks, inner = [], [], []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    result = await session.call_tool(name, arguments)
                    times.append(time.perf_counter() - t0)
                    if result.is_error:
                        raise RuntimeError(f"{name}: {result.content}")
                    t0 = time.perf_counter()  # the Python client re-validates every result against the schema
                    await session.validate_tool_result(name, result)
                    checks.append(time.perf_counter() - t0)
                    inner.append(reported(result.structured_content))
                out["tools"][name] = times
                out["validation"][name] = checks
                out["inner"][name] = inner
            out["idle"] = [await time_to_searchable(session, notes, f"idle{i}", busy=0) for i in range(freshness)]
            out["busy"] = [await time_to_searchable(session, notes, f"busy{i}", busy=8) for i in range(freshness)]
            if freshness:
                out["gone"] = await time_to_gone(session, notes, f"zyxbusy{freshness - 1}quux")
    return out


async def time_to_gone(session: Any, notes: Path, phrase: str) -> float:
    """Seconds from deleting every file this bench wrote to ``search`` no longer finding ``phrase``."""
    t0 = time.perf_counter()
    for path in [*notes.glob("fresh-*.md"), *notes.glob("filler-*.md")]:
        path.unlink()
    while True:
        result = await session.call_tool("search", {"query": phrase, "mode": "bm25", "k": 3})
        if not any(phrase in h["text"] for h in (result.structured_content or {}).get("results", [])):
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > 120:
            raise TimeoutError(f"{phrase} still found 120 s after its file was deleted")
        await anyio.sleep(POLL_S)


async def time_to_searchable(session: Any, notes: Path, tag: str, busy: int) -> float:
    """Seconds from writing a file to ``search`` finding its phrase (``busy`` other files written just before)."""
    for i in range(busy):
        (notes / f"filler-{tag}-{i}.md").write_text(f"# Filler {i}\n\nFiller note {i} about Fezziwig's ball.\n")
    phrase = f"zyx{tag}quux"
    t0 = time.perf_counter()
    (notes / f"fresh-{tag}.md").write_text(f"# Fresh\n\nThe marker {phrase} is here.\n")
    while True:
        result = await session.call_tool("search", {"query": phrase, "mode": "bm25", "k": 3})
        hits = (result.structured_content or {}).get("results", [])
        if any(phrase in h["text"] for h in hits):
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > 120:
            raise TimeoutError(f"{phrase} not searchable after 120 s")
        await anyio.sleep(POLL_S)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="folder to index (with --store: the one it indexes)")
    parser.add_argument("--store", type=Path, default=None, help="an already indexed store of --corpus, used in place")
    parser.add_argument("--question", default=QUESTION, help="question for retrieve_paths, build_mcmi, decompose")
    parser.add_argument("--search", default=SEARCH, help="text for the search tool")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--freshness", type=int, default=5, help="samples of write-to-searchable, idle and busy")
    args = parser.parse_args()
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    calls = cases(args.question, args.search)
    if args.store:
        if args.corpus is None:
            parser.error("--store needs --corpus, the folder that store indexes")
        corpus = args.corpus
        local = in_process(corpus, args.store, args.repeat, calls, index=False)
        remote = anyio.run(over_stdio, corpus, args.store, args.repeat, args.freshness, calls)
    else:
        corpus = args.corpus or demo_corpus()
        with tempfile.TemporaryDirectory(prefix="pw-mcp-bench-") as tmp:
            notes = Path(tmp) / "notes"
            shutil.copytree(corpus, notes)
            local = in_process(notes, Path(tmp) / "store-local", args.repeat, calls)
            remote = anyio.run(over_stdio, notes, Path(tmp) / "store-mcp", args.repeat, args.freshness, calls)
    files = sum(1 for p in corpus.iterdir() if p.is_file())
    print(f"corpus {corpus} ({files} files); server ready after {remote['index_seconds']:.1f} s; "
          f"ping round trip p50 {pct(remote['ping'], 0.5) * 1e3:.1f} ms (the transport's floor)")
    print(f"{'tool':<16}{'in-proc p50':>12}{'p95':>9}{'stdio p50':>12}{'p95':>9}{'overhead p50':>14}"
          f"{'client check':>14}{'rest':>8}{'per call':>11}  (ms)")
    for name, times in remote["tools"].items():
        lp50, lp95 = pct(local[name], 0.5) * 1e3, pct(local[name], 0.95) * 1e3
        rp50, rp95 = pct(times, 0.5) * 1e3, pct(times, 0.95) * 1e3
        check = pct(remote["validation"][name], 0.5) * 1e3
        over = rp50 - lp50
        remote_res, local_res = residuals(times, remote["inner"][name]), residuals(local[name], local["inner"][name])
        same = (f"{(statistics.median(remote_res) - statistics.median(local_res)) * 1e3 - check:>11.1f}"
                if remote_res and local_res else f"{'-':>11}")
        print(f"{name:<16}{lp50:>12.1f}{lp95:>9.1f}{rp50:>12.1f}{rp95:>9.1f}{over:>14.1f}{check:>14.1f}"
              f"{over - check:>8.1f}{same}")
    print("client check: the Python client's jsonschema validation of each result (inside the stdio time); "
          "rest: transport, JSON and the server's own shaping; per call: the rest measured within each call, as wall "
          "time minus the retrieval seconds the result reports (server and in-process alike), so the retrieval's "
          "own run-to-run noise drops out")
    for label in ("idle", "busy"):
        values = remote.get(label) or []
        if values:
            print(
                f"write -> searchable ({label}): median {statistics.median(values):.2f} s, "
                f"max {max(values):.2f} s over {len(values)} files"
            )
    if "gone" in remote:
        print(f"delete -> gone from search: {remote['gone']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
