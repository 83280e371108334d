"""``python -m pathweaver.demo``: the whole job on the demo corpus, through a real MCP client.

It copies ``demo/`` (A Christmas Carol in five staves plus three linked notes) into a temporary folder, starts
``pathweaver serve --watch`` over stdio as a subprocess, waits for the background index, and then walks one
question through decompose_query (the plan) -> retrieve_paths and build_mcmi (the evidence, with citations) ->
answer (run on the plan). The demo's client offers no MCP sampling, so with default settings the answer is
extractive, and the demo says how to get generated ones.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_QUESTION = "Who warned Scrooge that three spirits would visit him, and what had he been to Scrooge?"
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OPENBLAS_NUM_THREADS": "1",
}
READY_TIMEOUT_S = 600.0
POLL_S = 0.5


def demo_corpus() -> Path:
    """The ``demo/`` folder at the repository root (the package lives in ``<repo>/src/pathweaver``)."""
    for base in (Path(__file__).resolve().parents[2], Path.cwd()):
        candidate = base / "demo"
        if candidate.is_dir() and any(candidate.glob("*.md")):
            return candidate
    raise FileNotFoundError("demo corpus not found: run from the repository root or pass --corpus DIR")


def server_command(store: Path, watch: list[Path]) -> tuple[str, list[str]]:
    """The command that starts ``pathweaver serve`` over stdio with this interpreter."""
    args = ["-m", "pathweaver.cli", "--store", str(store), "serve"]
    for folder in watch:
        args += ["--watch", str(folder)]
    return sys.executable, args


def _short(text: str, width: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _cite(c: dict[str, Any]) -> str:
    span = c.get("span") or ["?", "?"]
    return f"{Path(c['doc']).name}, chunk {c['chunk_id']}, chars {span[0]}-{span[1]}"


async def _call(
    session: Any, name: str, args: dict[str, Any], record: list[tuple[str, dict, dict]] | None = None
) -> dict[str, Any]:
    result = await session.call_tool(name, args)
    if result.is_error:
        text = " ".join(getattr(b, "text", "") for b in result.content)
        raise RuntimeError(f"{name} failed: {text}")
    data = dict(result.structured_content or {})
    if record is not None:
        record.append((name, args, data))
    return data


def _clip(value: Any, text_chars: int = 240, items: int = 4) -> Any:
    """Shorten long strings and lists so a transcript stays readable."""
    if isinstance(value, str):
        return value if len(value) <= text_chars else value[:text_chars] + f"… ({len(value)} chars)"
    if isinstance(value, list):
        head = [_clip(v, text_chars, items) for v in value[:items]]
        return head + ([f"… {len(value) - items} more"] if len(value) > items else [])
    if isinstance(value, dict):
        return {k: _clip(v, text_chars, items) for k, v in value.items()}
    return value


def write_transcript(path: Path, question: str, record: list[tuple[str, dict, dict]]) -> None:
    """The calls and (clipped) structured responses of a demo run, as Markdown."""
    import json

    lines = [f"Question: **{question}**", ""]
    for n, (name, args, data) in enumerate(record, 1):
        lines += [f"### {n}. `{name}`", "", "```json", json.dumps(args, ensure_ascii=False), "```", ""]
        lines += ["```json", json.dumps(_clip(data), ensure_ascii=False, indent=1), "```", ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def indexed(status: dict) -> bool:
    """Whether an ``index_status`` result says the background index has finished."""
    return bool(status["ready"] and not status["indexing"])


async def wait_until_indexed(session: Any, out: Callable[[str], None], timeout: float = READY_TIMEOUT_S) -> dict:
    """Poll ``index_status`` until the background index has finished; returns the last status."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        status = await _call(session, "index_status", {})
        if indexed(status):
            return status
        line = f"  indexing… {status['done']}/{status['total']} {Path(status['message'] or '.').name}"
        if line != last:
            out(line)
            last = line
        if time.monotonic() > deadline:
            raise TimeoutError(f"indexing did not finish within {timeout:.0f}s")
        import anyio

        await anyio.sleep(POLL_S)


async def run_demo(
    corpus: Path,
    question: str,
    workdir: Path,
    out: Callable[[str], None] = print,
    record: list[tuple[str, dict, dict]] | None = None,
) -> dict:
    """Copy ``corpus`` into ``workdir``, serve it over stdio and run the four steps; returns the answer."""
    from mcp.client.stdio import StdioServerParameters

    notes, store = workdir / "notes", workdir / "store"
    shutil.copytree(corpus, notes)
    command, args = server_command(store, [notes])
    params = StdioServerParameters(command=command, args=args, env={**os.environ, **OFFLINE_ENV})
    out(f"corpus: {len(list(notes.glob('*.md')))} notes copied to {notes}")
    out(f"server: {command} {' '.join(args)}")
    started = time.perf_counter()
    log_path = workdir / "server.log"
    with open(log_path, "w") as errlog:
        try:
            return await _steps(params, errlog, question, started, out, record)
        except Exception:
            errlog.flush()
            tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
            out("server log (last lines):\n" + "\n".join(tail))
            raise


GENERATED_HINT = (
    "For generated answers, give pathweaver a model: connect a client that offers MCP sampling (its own model "
    "writes the answer), or start Ollama or LM Studio (auto finds it on its usual port on 127.0.0.1), "
    "or set models.openai_base_url to another OpenAI-compatible server (vLLM, llama-server), "
    "or models.llm_model_path to a GGUF file for llama.cpp, in <store>/pathweaver.toml or with "
    "`pathweaver --set models.openai_base_url=http://127.0.0.1:11434/v1 serve ...`. `pathweaver doctor` shows "
    "which backend is used and why."
)


async def _timed_call(
    session: Any, name: str, args: dict[str, Any], record: list[tuple[str, dict, dict]] | None
) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    data = await _call(session, name, args, record)
    return data, time.perf_counter() - start


def _show_plan(plan: dict[str, Any], seconds: float, out: Callable[[str], None]) -> None:
    out(f"1. plan: decompose_query ({plan['source']}, {seconds:.2f}s)")
    for level_no, level in enumerate(plan["levels"]):
        for node in (n for n in plan["nodes"] if n["id"] in level):
            deps = ", ".join(node["depends_on"]) or "-"
            out(f"   L{level_no} #{node['id']} [after {deps}] {node['question']}")


def _show_evidence(paths: dict, mcmi: dict, seconds: tuple[float, float], out: Callable[[str], None]) -> None:
    out(f"2. evidence: retrieve_paths ({seconds[0]:.2f}s), {len(paths['paths'])} relational paths, most reliable "
        "last:")
    for p in paths["paths"][-3:]:
        cite = f" [{_cite(p['citations'][0])}]" if p["citations"] else ""
        out(f"   {p['reliability']:.3f} {_short(p['text'], 110)}{cite}")
    sub = mcmi.get("subgraph") or {}
    out(f"   build_mcmi ({seconds[1]:.2f}s): a reasoning subgraph of {len(sub.get('nodes', []))} nodes and "
        f"{len(sub.get('edges', []))} edges, and the best chunks:")
    for c in mcmi["chunks"][:3]:
        out(f"   {c['score']:.3f} [{_cite(c)}] {_short(c['text'], 90)}")


def _show_answer(result: dict[str, Any], seconds: float, out: Callable[[str], None]) -> None:
    llm = result.get("llm") or {}
    backend = result.get("backend") or llm.get("backend")
    model = f" {llm['model']}" if backend != "extractive" and llm.get("model") else ""
    out(f"3. answer ({seconds:.2f}s), written by: {backend}{model}")
    for node in (result.get("plan") or {}).get("nodes", [])[:-1]:
        if node.get("answer"):
            cite = node.get("citation") or {}
            where = f" [{Path(cite['doc']).name}]" if cite.get("doc") else ""
            out(f"   #{node['id']} {node['rephrased']} -> {node['answer']}{where}")
    out("")
    out("   " + result["answer"].strip())
    out("")
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", result["answer"])}
    for c in result["citations"]:
        if not cited or c.get("n") in cited:
            out(f"   [{c.get('n', '?')}] {_cite(c)}")


async def _steps(
    params: Any,
    errlog: Any,
    question: str,
    started: float,
    out: Callable[[str], None],
    record: list[tuple[str, dict, dict]] | None,
) -> dict:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        out(f"tools: {', '.join(t.name for t in tools.tools)}")
        status = await wait_until_indexed(session, out)
        stats = status["stats"]
        out(
            f"indexed in {time.perf_counter() - started:.1f}s: {stats.get('documents')} documents, "
            f"{stats.get('chunks')} chunks, {stats.get('entities')} entities, {stats.get('relations')} relations"
        )
        llm = status.get("llm") or {}
        out(f"answers by: {llm.get('backend')} ({llm.get('reason')})")
        out(f"\nquestion: {question}\n")

        plan, plan_s = await _timed_call(session, "decompose_query", {"question": question}, record)
        _show_plan(plan, plan_s, out)
        paths, paths_s = await _timed_call(session, "retrieve_paths", {"question": question}, record)
        mcmi, mcmi_s = await _timed_call(session, "build_mcmi", {"question": question}, record)
        _show_evidence(paths, mcmi, (paths_s, mcmi_s), out)
        args = {"question": question, "decompose": len(plan["nodes"]) > 1}
        result, answer_s = await _timed_call(session, "answer", args, record)
        _show_answer(result, answer_s, out)
        if result.get("backend") == "extractive":
            out("\n" + textwrap.fill(f"The answer is extractive: the cited chunks' own words, no language model. "
                                     f"{GENERATED_HINT}", width=110))
        out(f"\ndone in {time.perf_counter() - started:.1f}s")
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pathweaver.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="folder of notes (default: the repository's demo/)")
    parser.add_argument("--question", default=DEFAULT_QUESTION)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp folder)")
    parser.add_argument("--transcript", type=Path, help="also write the calls and responses here (Markdown)")
    args = parser.parse_args(argv)
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    import anyio

    corpus = args.corpus or demo_corpus()
    record: list[tuple[str, dict, dict]] = []
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        anyio.run(run_demo, corpus, args.question, args.keep, print, record)
    else:
        with tempfile.TemporaryDirectory(prefix="pathweaver-demo-") as tmp:
            anyio.run(run_demo, corpus, args.question, Path(tmp), print, record)
    if args.transcript:
        write_transcript(args.transcript, args.question, record)
        print(f"transcript: {args.transcript}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
