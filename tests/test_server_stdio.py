"""End to end over stdio: a real ClientSession spawns ``python -m pathweaver.cli ... serve --watch DIR``.

One server for the module. It lists and calls every tool, checks structured outputs, follows a file written into
and deleted from the watched folder, answers through MCP sampling, and refuses paths outside the roots.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OPENBLAS_NUM_THREADS": "1",
}
NOTES = {
    "Ada Lovelace.md": "# Ada Lovelace\n\nAda Lovelace worked with [[Charles Babbage]] on the Analytical Engine. "
    "She wrote the first published algorithm for the Analytical Engine, to compute Bernoulli numbers.\n",
    "Charles Babbage.md": "# Charles Babbage\n\nCharles Babbage designed the Difference Engine and the "
    "[[Analytical Engine]] in London. Charles Babbage met Ada Lovelace in 1833.\n",
    "Analytical Engine.md": "# Analytical Engine\n\nThe Analytical Engine was a mechanical general-purpose computer "
    "designed by Charles Babbage. It read programs from punched cards, like the Jacquard loom.\n",
}
SAMPLED_PREFIX = "SAMPLED ANSWER:"
SLOW = "slowly"  # a question with this word makes the client's model take SLOW_S to reply
SLOW_S = 2.5
WAIT_S = 120.0


def write_notes(folder: Path, notes: dict[str, str] = NOTES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in notes.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def server_env(**extra: str) -> dict[str, str]:
    return {**os.environ, **OFFLINE_ENV, "PATHWEAVER_MODELS_LLM_BACKEND": "auto", **extra}


def serve_args(store: Path, watch: list[Path], *extra: str) -> list[str]:
    args = ["-m", "pathweaver.cli", "--store", str(store), "serve"]
    for folder in watch:
        args += ["--watch", str(folder)]
    return [*args, *extra]


async def sampling_callback(
    context: Any, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    """The client's 'LLM': echoes that it was asked, so the test can see the answer came through sampling. It is
    slow (``SLOW_S``) when the prompt has the word ``SLOW``, like a large model on a busy machine."""
    asked = params.messages[-1].content
    text = getattr(asked, "text", "")
    if SLOW in text:
        await anyio.sleep(SLOW_S)
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(
            type="text", text=f"{SAMPLED_PREFIX} Ada Lovelace [1] ({len(text)} chars asked)"
        ),
        model="test-sampler",
    )


class Client:
    """A live ClientSession driven from synchronous tests through a blocking portal."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.portal.call(fn, *args)

    def call(self, name: str, args: dict[str, Any] | None = None, **kw: Any) -> types.CallToolResult:
        return self.portal.call(lambda: self.session.call_tool(name, args or {}, **kw))

    def ok(self, name: str, args: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        result = self.call(name, args, **kw)
        assert not result.is_error, f"{name}: {error_text(result)}"
        assert result.structured_content is not None, f"{name} returned no structured content"
        return result.structured_content

    def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.3)

    def wait_indexed(self) -> dict[str, Any]:
        status: dict[str, Any] = {}

        def done() -> bool:
            status.update(self.ok("index_status"))
            return bool(status["ready"]) and not status["indexing"]

        self.wait_for(done, "the background index")
        return status

    def found(self, phrase: str) -> bool:
        hits = self.ok("search", {"query": phrase, "mode": "bm25", "k": 5})["results"]
        return any(phrase in h["text"] for h in hits)


def error_text(result: types.CallToolResult) -> str:
    return " ".join(getattr(b, "text", "") for b in result.content)


@contextlib.contextmanager
def mcp_client(
    session_cm: Callable[[], contextlib.AbstractAsyncContextManager[ClientSession]],
) -> Iterator[Client]:
    """Open ``session_cm`` on a portal thread and hand back a synchronous ``Client``."""
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(session_cm()) as session:
        yield Client(portal, session)


def stdio_session(
    store: Path, watch: list[Path], errlog: Any, sampling: bool = True
) -> Callable[[], contextlib.AbstractAsyncContextManager[ClientSession]]:
    params = StdioServerParameters(command=sys.executable, args=serve_args(store, watch), env=server_env())

    @contextlib.asynccontextmanager
    async def open_session() -> AsyncIterator[ClientSession]:
        async with stdio_client(params, errlog=errlog) as (read, write):
            callback = sampling_callback if sampling else None
            async with ClientSession(read, write, sampling_callback=callback) as session:
                await session.initialize()
                yield session

    return open_session


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("stdio")
    notes = write_notes(base / "notes")
    outside = base / "outside"
    outside.mkdir()
    with (
        open(base / "server.log", "w") as errlog,
        mcp_client(stdio_session(base / "store", [notes], errlog)) as c,
    ):
        c.wait_indexed()
        yield {"client": c, "notes": notes.resolve(), "outside": outside.resolve(), "base": base}


def test_tools_are_listed_with_schemas(env: dict[str, Any]) -> None:
    tools = {t.name: t for t in env["client"].run(env["client"].session.list_tools).tools}
    expected = {
        "decompose_query",
        "retrieve_paths",
        "build_mcmi",
        "rerank",
        "answer",
        "search",
        "get_entity",
        "neighbors",
        "index_status",
        "add_folder",
        "remove_folder",
        "reindex",
    }
    assert expected <= set(tools)
    for tool in tools.values():
        assert tool.output_schema is not None, tool.name
        assert tool.description and len(tool.description) > 40, tool.name
    for name in ("retrieve_paths", "build_mcmi"):  # published in full, though the server no longer re-validates
        assert {"method", "chunks", "paths", "subgraph", "triples"} <= set(tools[name].output_schema["properties"])
    assert "results" in tools["search"].output_schema["properties"]
    props = tools["retrieve_paths"].input_schema["properties"]
    assert props["top_nodes"].get("default") is None and props["top_paths"]["default"] == 15  # PathRAG N (by store), K
    assert props["alpha"]["default"] == 0.7
    assert tools["search"].input_schema["properties"]["mode"]["enum"] == ["dense", "bm25", "hybrid"]
    assert "lego:sbe+isar" in str(tools["answer"].input_schema["properties"]["method"])


def test_index_status_reports_store_and_folders(env: dict[str, Any]) -> None:
    status = env["client"].ok("index_status")
    assert status["stats"]["documents"] == 3
    assert status["stats"]["chunks"] >= 3 and status["stats"]["entities"] > 0
    assert status["watched"] == [str(env["notes"])]
    assert status["roots"] == [str(env["notes"])]
    assert status["state"] in ("watching", "indexing")
    assert status["llm"] == {"setting": "auto", "backend": "sampling", "reason": "the MCP client offers sampling"}
    assert status["store"] == str((env["base"] / "store").resolve())


def test_search_and_retrieval_tools(env: dict[str, Any]) -> None:
    c = env["client"]
    hits = c.ok("search", {"query": "Bernoulli numbers", "mode": "hybrid", "k": 3})["results"]
    assert hits and hits[0]["doc"].endswith("Ada Lovelace.md")
    assert {"doc", "chunk_id", "span", "score", "text"} <= set(hits[0])

    paths = c.ok("retrieve_paths", {"question": "How is Ada Lovelace related to the Analytical Engine?"})
    assert paths["method"]["name"] == "pathrag" and paths["method"]["preset"] == "default" and paths["chunks"]
    for p in paths["paths"]:
        assert len(p["nodes"]) == len(p["relations"]) + 1
    rel = [p["reliability"] for p in paths["paths"]]
    assert rel == sorted(rel)  # PathRAG prompt order: ascending reliability, best path last
    paper = c.ok("retrieve_paths", {"question": "How is Ada Lovelace related to the Analytical Engine?",
                                    "preset": "paper"})
    assert paper["method"]["preset"] == "paper" and paper["method"]["params"]["top_nodes"] == 40
    assert paper["method"]["params"]["targets"] == "retrieved" and paper["info"]["backfill_share"] == 0.0

    mcmi = c.ok(
        "build_mcmi", {"question": "Who designed the Analytical Engine?", "k_triples": 3, "k_chunks": 2}
    )
    assert mcmi["method"]["name"] == "mcmi" and len(mcmi["chunks"]) <= 2
    assert mcmi["subgraph"] is not None and mcmi["subgraph"]["text"]
    assert mcmi["triples"] and all("description" not in t for t in mcmi["triples"])  # the smaller default
    raw = c.call("build_mcmi", {"question": "Who designed the Analytical Engine?", "k_triples": 3, "k_chunks": 2,
                                "triple_descriptions": True})
    full = raw.structured_content
    assert full is not None and [t["id"] for t in full["triples"]] == [t["id"] for t in mcmi["triples"]]
    assert all(isinstance(t.get("description"), str) for t in full["triples"])  # a link relation's is ""
    assert json.loads(raw.content[0].text) == full  # text-only clients get the same result, as compact JSON


def test_plan_rerank_entity_neighbors(env: dict[str, Any]) -> None:
    c = env["client"]
    plan = c.ok(
        "decompose_query", {"question": "Who designed the machine that Ada Lovelace wrote an algorithm for?"}
    )
    assert plan["nodes"] and plan["order"]
    assert sorted(n for level in plan["levels"] for n in level) == sorted(n["id"] for n in plan["nodes"])

    ranked = c.ok(
        "rerank",
        {
            "question": "Who designed it?",
            "candidates": [
                "Charles Babbage designed the Analytical Engine.",
                "The Jacquard loom used cards.",
            ],
            "resolved": ["The Analytical Engine"],
            "alpha": 0.6,
        },
    )["results"]
    assert len(ranked) == 2 and ranked[0]["score"] >= ranked[1]["score"]
    for item in ranked:  # PankRAG Eq. 5: score = alpha * relevance + (1 - alpha) * dependency
        assert item["score"] == pytest.approx(0.6 * item["relevance"] + 0.4 * item["dependency"], abs=1e-6)

    card = c.ok("get_entity", {"name": "Ada Lovelace"})
    assert card["name"].lower() == "ada lovelace"
    near = c.ok("neighbors", {"entity": "Ada Lovelace", "hops": 1, "limit": 10})
    assert "babbage" in str(near).lower()


def test_a_request_line_over_64_kib(env: dict[str, Any]) -> None:
    """The server reads stdin on asyncio pipes (``server/pipes.py``), whose default line limit is 64 KiB."""
    filler = " ".join(["the loom read punched cards"] * 80)  # ~2.2 KB each, ~90 KB in all
    candidates = [f"{i}: {filler}" for i in range(40)] + ["Charles Babbage designed the Analytical Engine."]
    assert len(json.dumps(candidates)) > 80_000
    ranked = env["client"].ok("rerank", {"question": "Who designed the Analytical Engine?", "candidates": candidates,
                                         "resolved": [], "alpha": 0.6})["results"]
    assert len(ranked) == len(candidates)
    assert ranked[0]["index"] == len(candidates) - 1


def test_errors_are_readable(env: dict[str, Any]) -> None:
    c = env["client"]
    missing = c.call("get_entity", {"name": "Nobody At All Xyz"})
    assert missing.is_error and "no entity named" in error_text(missing)
    bad_mode = c.call("search", {"query": "x", "mode": "fuzzy"})
    assert bad_mode.is_error and "mode" in error_text(bad_mode)
    bad_type = c.call("neighbors", {"entity": "Ada Lovelace", "hops": "many"})
    assert bad_type.is_error and "hops" in error_text(bad_type)
    assert "Traceback" not in error_text(missing) + error_text(bad_mode) + error_text(bad_type)


def test_answer_uses_client_sampling(env: dict[str, Any]) -> None:
    out = env["client"].ok("answer", {"question": "Who wrote the first algorithm for the Analytical Engine?"})
    assert out["answer"].startswith(SAMPLED_PREFIX) and out["backend"] == "sampling"
    assert out["llm"]["backend"] == "sampling" and out["llm"]["model"] == "test-sampler"
    assert out["llm"]["reason"] == "the MCP client offers sampling"
    assert out["citations"] and {"doc", "chunk_id", "span"} <= set(out["citations"][0])
    assert out["supported"] is True


def test_answer_without_a_model_says_when_the_notes_dont_say(env: dict[str, Any]) -> None:
    """A client without sampling and no configured model: the answer tool's ``supported`` tells an answer from
    the notes from "The notes don't say.", through the tool's published output schema."""
    tools = {t.name: t for t in env["client"].run(env["client"].session.list_tools).tools}
    assert "supported" in tools["answer"].output_schema["properties"]
    with (
        open(env["base"] / "plain.log", "w") as errlog,
        mcp_client(stdio_session(env["base"] / "plain-store", [env["notes"]], errlog, sampling=False)) as c,
    ):
        c.wait_indexed()
        out = c.ok("answer", {"question": "Who wrote the first published algorithm for the Analytical Engine?"})
        assert out["backend"] == "extractive" and out["supported"] is True
        # the sentence says "She wrote ...": in a note about Ada Lovelace, she is Ada Lovelace
        assert out["answer"].startswith("Ada Lovelace ["), out["answer"]
        out = c.ok("answer", {"question": "Is the migration plan approved?"})
        assert out["backend"] == "extractive" and out["supported"] is False
        assert out["answer"].startswith("The notes don't say.") and "yes" not in out["answer"].lower()


def test_a_slow_model_sends_progress_notifications(env: dict[str, Any]) -> None:
    """While the client's model takes SLOW_S to reply, answer and decompose_query report progress every second;
    the sampled plan is no JSON, so decompose_query falls back to the heuristic plan after that one call."""
    c = env["client"]
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    question = f"Who {SLOW} wrote the first algorithm for the Analytical Engine?"
    out = c.ok("answer", {"question": question}, progress_callback=on_progress)
    assert out["backend"] == "sampling" and out["answer"].startswith(SAMPLED_PREFIX)
    assert len(progress) >= 1 and all("waiting for the sampling model" in (m or "") for _, _, m in progress)
    assert [p[0] for p in progress] == sorted({p[0] for p in progress})  # progress only grows

    progress.clear()
    plan = c.ok("decompose_query", {"question": f"Who {SLOW} met the designer of the Analytical Engine?"},
                progress_callback=on_progress)
    assert plan["source"] in ("heuristic", "single") and "invalid JSON" in plan["trace"]["fallback"]
    assert plan["trace"]["backend"] == "sampling" and len(progress) >= 1


def test_watcher_follows_new_and_deleted_files(env: dict[str, Any]) -> None:
    c, notes = env["client"], env["notes"]
    phrase = "quokka lighthouse"
    new = notes / "Quokka.md"
    new.write_text(f"# Quokka\n\nThe {phrase} stands on Rottnest Island.\n", encoding="utf-8")
    c.wait_for(lambda: c.found(phrase), "the new file to become searchable")
    new.unlink()
    c.wait_for(lambda: not c.found(phrase), "the deleted file to disappear")


def test_folder_tools_with_progress(env: dict[str, Any]) -> None:
    c, notes = env["client"], env["notes"]
    sub = write_notes(notes / "extra", {"Kelp.md": "# Kelp\n\nGiant kelp forests shelter sea otters.\n"})
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    added = c.ok("add_folder", {"path": "extra", "watch": True}, progress_callback=on_progress)
    assert added["folder"] == str(sub.resolve()) and added["watched"]
    assert progress and progress[-1][0] == progress[-1][1]  # last notification: done == total
    assert c.found("kelp forests")
    status = c.ok("index_status")
    assert str(sub.resolve()) in status["folders"]

    progress.clear()
    again = c.ok("reindex", {"path": str(sub)}, progress_callback=on_progress)
    assert again["report"]["unchanged"] >= 1 and again["report"]["added"] == 0

    removed = c.ok("remove_folder", {"path": str(sub)})
    assert removed["report"]["deleted"] >= 1
    assert not c.found("kelp forests")
    assert c.ok("index_status")["stats"]["documents"] >= 3


def test_paths_outside_roots_are_refused(env: dict[str, Any]) -> None:
    c, notes, outside = env["client"], env["notes"], env["outside"]
    (notes / "escape").symlink_to(outside, target_is_directory=True)
    try:
        cases = {
            "../outside": "'..' is not allowed",
            str(outside): "outside the allowed folders",
            "/etc": "outside the allowed folders",
            "escape": "symlink",
        }
        for path, message in cases.items():
            for tool in ("add_folder", "reindex", "remove_folder"):
                result = c.call(tool, {"path": path})
                assert result.is_error, (tool, path)
                assert message in error_text(result), (tool, path, error_text(result))
    finally:
        (notes / "escape").unlink()
