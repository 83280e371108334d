"""MCP overhead and freshness: p50/p95 per tool over stdio vs the same call in-process, and write-to-searchable time.

    python bench/mcp_latency.py [--corpus demo] [--repeat 20] [--freshness 5]
    python bench/mcp_latency.py --store STORE --corpus FOLDER --question Q --search TEXT   # e.g. the 2wiki store

Without ``--store`` it copies the corpus to a temp folder, indexes it in-process (for the in-process timings), then
starts ``pathweaver serve --watch`` over stdio on a second store over the same folder. With ``--store`` both sides
use that already indexed store of ``--corpus`` in place (bench/peers.py's 2wiki store, say). Each tool is timed
through a real ClientSession, then once more through ``RawClient``, a bare JSON-RPC client on a second server's
pipe: the difference is what the Python SDK's client adds (its models, its jsonschema check). Every call over the
wire is paired with the same call in-process just before it, and the overheads are medians of the paired
differences, so that a shared machine's slow and fast spells fall on both sides alike. Freshness: a file
with a unique phrase is written and ``search`` is polled until it is found, once with the server idle and once
while it indexes a burst of other new files (busy); at the end the written files are deleted and ``search`` is
polled until the last phrase is gone. Dense and graph freshness: after a file becomes searchable, a ``dense`` search
for its phrase is timed at once, and ``retrieve_paths`` on the new store version at once and 3 s later, each against
the call right after it. Figures are
printed only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from pathweaver.demo import OFFLINE_ENV, demo_corpus, indexed, server_command, wait_until_indexed  # noqa: E402

QUESTION = "Who warned Scrooge that three spirits would visit him?"
SEARCH = "Tiny Tim"
POLL_S = 0.05
# graph freshness: the first retrieve_paths on a new version, asked at once and this long after the change landed
GRAPH_DELAYS_S = (0.0, 3.0)


def cases(question: str = QUESTION, text: str = SEARCH) -> list[tuple[str, dict[str, Any], Callable[[Any], Any]]]:
    """(tool, arguments, the same call on the service)."""
    return [
        ("search", {"query": text, "mode": "hybrid", "k": 5}, lambda s: s.search(text, "hybrid", 5)),
        ("retrieve_paths", {"question": question}, lambda s: s.retrieve_json(question, "pathrag", 5)),
        ("build_mcmi", {"question": question}, lambda s: s.retrieve_json(question, "mcmi", 5, descriptions=False)),
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


@dataclass
class Sample:
    """One repetition: the call in-process, then at once the same call over the wire (seconds)."""

    local: float
    remote: float
    local_inner: float | None  # the retrieval seconds each result reports (retrieval tools only)
    remote_inner: float | None
    check: float = 0.0  # the SDK client's own jsonschema check of the result, timed apart


def local_call(svc: Any, fn: Callable[[Any], Any]) -> tuple[float, float | None]:
    t0 = time.perf_counter()
    result = fn(svc)
    return time.perf_counter() - t0, reported(result)


def overheads(samples: list[Sample]) -> dict[str, float | None]:
    """Medians in ms: each side's time; the paired difference (over the wire minus in-process, minus the SDK's
    check); and the same per call with each side's reported retrieval seconds taken off, so that the retrieval's
    own run-to-run noise drops out (None for tools that report no seconds)."""
    inner = [s for s in samples if s.local_inner is not None and s.remote_inner is not None]
    return {
        "local": pct([s.local for s in samples], 0.5) * 1e3,
        "local_p95": pct([s.local for s in samples], 0.95) * 1e3,
        "remote": pct([s.remote for s in samples], 0.5) * 1e3,
        "remote_p95": pct([s.remote for s in samples], 0.95) * 1e3,
        "check": pct([s.check for s in samples], 0.5) * 1e3,
        "overhead": statistics.median(s.remote - s.local - s.check for s in samples) * 1e3,
        "per_call": statistics.median(
            (s.remote - s.remote_inner) - (s.local - s.local_inner) - s.check for s in inner  # type: ignore[operator]
        ) * 1e3 if inner else None,
    }


async def over_stdio(svc: Any, notes: Path, store: Path, repeat: int, freshness: int, calls: list,
                     question: str = QUESTION) -> dict[str, Any]:
    """Each tool through the SDK's ClientSession, each repetition paired with the same call on ``svc``."""
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
            for name, arguments, fn in calls:
                fn(svc)  # warm caches (snapshot, model) on both sides
                await session.call_tool(name, arguments)
                samples = []
                for _ in range(repeat):
                    local, local_inner = local_call(svc, fn)
                    t0 = time.perf_counter()
                    result = await session.call_tool(name, arguments)
                    remote = time.perf_counter() - t0
                    if result.is_error:
                        raise RuntimeError(f"{name}: {result.content}")
                    t0 = time.perf_counter()  # the Python client re-validates every result against the schema
                    await session.validate_tool_result(name, result)
                    samples.append(Sample(local, remote, local_inner, reported(result.structured_content),
                                          time.perf_counter() - t0))
                out["tools"][name] = samples
            out["idle"] = [await time_to_searchable(session, notes, f"idle{i}", busy=0) for i in range(freshness)]
            out["busy"] = [await time_to_searchable(session, notes, f"busy{i}", busy=8) for i in range(freshness)]
            out["dense"] = [await dense_after_change(session, notes, f"dense{i}") for i in range(freshness)]
            for delay in GRAPH_DELAYS_S:
                out[f"graph{delay:g}"] = [await graph_after_change(session, notes, f"g{delay:g}x{i}", question, delay)
                                          for i in range(freshness)]
            if freshness:
                out["gone"] = await time_to_gone(session, notes, f"zyxbusy{freshness - 1}quux")
    return out


class RawClient:
    """A bare newline-delimited JSON-RPC client on the server's stdio: no SDK session, models or schema checks.

    It times what any client must pay (the pipe, the server, one ``json.loads``) apart from what the Python SDK's
    client adds on top. Notifications the server sends (progress, logs) are read and skipped."""

    def __init__(self, command: str, args: list[str]) -> None:
        self.proc = subprocess.Popen([command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env={**os.environ, **OFFLINE_ENV})
        self.last_id = 0

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.last_id += 1
        self._send({"id": self.last_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            reply = json.loads(line)
            if reply.get("id") == self.last_id and "method" not in reply:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
        raise RuntimeError(f"the server closed its stdout during {method}")

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{name}: {result.get('content')}")
        return result

    def __enter__(self) -> RawClient:
        from mcp.types import LATEST_PROTOCOL_VERSION

        self.request("initialize", {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                                    "clientInfo": {"name": "pathweaver-raw-bench", "version": "0"}})
        self._send({"method": "notifications/initialized"})
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def over_raw_stdio(svc: Any, notes: Path, store: Path, repeat: int, calls: list) -> dict[str, Any]:
    """Each tool through ``RawClient`` on a second ``pathweaver serve`` of the same store, each repetition paired
    with the same call on ``svc``."""
    command, args = server_command(store, [notes])
    out: dict[str, Any] = {"tools": {}}
    with RawClient(command, args) as client:
        deadline = time.monotonic() + 600
        while not indexed(client.call_tool("index_status", {})["structuredContent"]):
            if time.monotonic() > deadline:
                raise TimeoutError("the raw client's server did not finish indexing within 600 s")
            time.sleep(POLL_S)
        out["ping"] = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            client.request("ping", {})
            out["ping"].append(time.perf_counter() - t0)
        for name, arguments, fn in calls:
            fn(svc)
            client.call_tool(name, arguments)
            samples = []
            for _ in range(repeat):
                local, local_inner = local_call(svc, fn)
                t0 = time.perf_counter()
                result = client.call_tool(name, arguments)
                samples.append(Sample(local, time.perf_counter() - t0, local_inner,
                                      reported(result.get("structuredContent"))))
            out["tools"][name] = samples
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


async def graph_after_change(session: Any, notes: Path, tag: str, question: str, delay: float
                             ) -> tuple[float, float]:
    """Seconds of the first ``retrieve_paths`` on a new store version, asked ``delay`` s after a written file became
    searchable, and of the call right after it (everything per snapshot already built)."""
    await time_to_searchable(session, notes, tag, busy=0)
    await anyio.sleep(delay)
    return await _timed(session, "retrieve_paths", {"question": question}), \
        await _timed(session, "retrieve_paths", {"question": question})


async def dense_after_change(session: Any, notes: Path, tag: str) -> tuple[float, float]:
    """Seconds of a ``dense`` search for a written file's phrase, asked as soon as ``bm25`` finds it, and of the
    same search right after (the new file must come first both times)."""
    await time_to_searchable(session, notes, tag, busy=0)
    phrase = f"zyx{tag}quux"
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        result = await session.call_tool("search", {"query": f"The marker {phrase} is here.", "mode": "dense", "k": 10})
        times.append(time.perf_counter() - t0)
        if not any(phrase in h["text"] for h in (result.structured_content or {}).get("results", [])):
            raise RuntimeError(f"dense search did not find {phrase}")
    return times[0], times[1]


async def _timed(session: Any, tool: str, arguments: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool}: {result.content}")
    return time.perf_counter() - t0


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
    from pathweaver.service import Pathweaver

    with tempfile.TemporaryDirectory(prefix="pw-mcp-bench-") as tmp:
        if args.store:
            if args.corpus is None:
                parser.error("--store needs --corpus, the folder that store indexes")
            corpus = notes = args.corpus
            local_store = server_store = args.store
        else:
            corpus = args.corpus or demo_corpus()
            notes = Path(tmp) / "notes"
            shutil.copytree(corpus, notes)
            local_store, server_store = Path(tmp) / "store-local", Path(tmp) / "store-mcp"
        with Pathweaver.open(local_store) as svc:
            if not args.store:
                svc.index([notes])
            remote = anyio.run(over_stdio, svc, notes, server_store, args.repeat, args.freshness, calls,
                               args.question)
            raw = over_raw_stdio(svc, notes, server_store, args.repeat, calls)
    files = sum(1 for p in corpus.iterdir() if p.is_file())
    print(f"corpus {corpus} ({files} files); server ready after {remote['index_seconds']:.1f} s; ping round trip "
          f"p50 {pct(remote['ping'], 0.5) * 1e3:.1f} ms (SDK client), {pct(raw['ping'], 0.5) * 1e3:.1f} ms (raw)")
    print(f"{'':<16}{'--- SDK client, paired with in-process ---':^58}{'--- raw client, paired ---':^43}")
    print(f"{'tool':<16}{'in-proc p50':>12}{'p95':>8}{'SDK p50':>9}{'p95':>8}{'check':>7}{'overhead':>10}"
          f"{'per call':>9}{'in-proc':>9}{'raw p50':>9}{'p95':>8}{'overhead':>10}{'per call':>9}  (ms)")
    for name, samples in remote["tools"].items():
        sdk, bare = overheads(samples), overheads(raw["tools"][name])
        cell = lambda v: f"{v:.1f}" if v is not None else "-"  # noqa: E731
        print(f"{name:<16}{sdk['local']:>12.1f}{sdk['local_p95']:>8.1f}{sdk['remote']:>9.1f}{sdk['remote_p95']:>8.1f}"
              f"{sdk['check']:>7.1f}{sdk['overhead']:>10.1f}{cell(sdk['per_call']):>9}{bare['local']:>9.1f}"
              f"{bare['remote']:>9.1f}{bare['remote_p95']:>8.1f}{bare['overhead']:>10.1f}{cell(bare['per_call']):>9}")
    print("Each repetition times the call in-process, then at once over the wire, and the medians of the paired "
          "differences are shown. SDK: the mcp ClientSession; check: its jsonschema validation of each result, timed "
          "apart and taken off its overhead; raw: a bare JSON-RPC client on the pipe (RawClient); per call: the "
          "overhead with each side's reported retrieval seconds taken off, so the retrieval's own noise drops out")
    for label in ("idle", "busy"):
        values = remote.get(label) or []
        if values:
            print(
                f"write -> searchable ({label}): median {statistics.median(values):.2f} s, "
                f"max {max(values):.2f} s over {len(values)} files"
            )
    pairs = remote.get("dense") or []
    if pairs:
        print(f"dense search for a new file's phrase, asked as soon as bm25 finds it: median "
              f"{statistics.median(p[0] for p in pairs) * 1e3:.0f} ms (the search after it "
              f"{statistics.median(p[1] for p in pairs) * 1e3:.0f} ms) over {len(pairs)} files")
    for delay in GRAPH_DELAYS_S:
        pairs = remote.get(f"graph{delay:g}") or []
        if pairs:
            print(f"first retrieve_paths on a new version, asked {delay:g} s after the file was searchable: median "
                  f"{statistics.median(p[0] for p in pairs) * 1e3:.0f} ms (the call after it "
                  f"{statistics.median(p[1] for p in pairs) * 1e3:.0f} ms) over {len(pairs)} files")
    if "gone" in remote:
        print(f"delete -> gone from search: {remote['gone']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
