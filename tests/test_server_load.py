"""Load: 20 concurrent tool calls over one stdio session while the watcher indexes new files; all succeed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from test_server_stdio import Client, error_text, mcp_client, stdio_session, write_notes

N_CALLS = 20
N_NEW_FILES = 6


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, Path]]:
    base = tmp_path_factory.mktemp("load")
    notes = write_notes(base / "notes")
    with open(base / "server.log", "w") as errlog, mcp_client(stdio_session(base / "store", [notes], errlog)) as c:
        c.wait_indexed()
        yield c, notes


def calls() -> list[tuple[str, dict[str, Any]]]:
    kinds: list[tuple[str, dict[str, Any]]] = [
        ("search", {"query": "Analytical Engine", "mode": "hybrid", "k": 3}),
        ("search", {"query": "Bernoulli", "mode": "bm25", "k": 3}),
        ("retrieve_paths", {"question": "How is Ada Lovelace related to Charles Babbage?"}),
        ("build_mcmi", {"question": "Who designed the Analytical Engine?"}),
        ("index_status", {}),
        ("neighbors", {"entity": "Charles Babbage"}),
        ("decompose_query", {"question": "Who designed the engine Ada Lovelace programmed?"}),
    ]
    return [kinds[i % len(kinds)] for i in range(N_CALLS)]


def test_concurrent_calls_while_indexing(client: tuple[Client, Path]) -> None:
    c, notes = client
    for i in range(N_NEW_FILES):  # the watcher picks these up while the calls run
        (notes / f"Load note {i}.md").write_text(
            f"# Load note {i}\n\nLoad note {i} mentions Charles Babbage and the Difference Engine {i} times.\n",
            encoding="utf-8",
        )
    results: list[types.CallToolResult | None] = [None] * N_CALLS

    async def one(i: int, name: str, args: dict[str, Any]) -> None:
        results[i] = await c.session.call_tool(name, args)

    async def burst() -> None:
        async with anyio.create_task_group() as tg:
            for i, (name, args) in enumerate(calls()):
                tg.start_soon(one, i, name, args)

    c.run(burst)
    failures = [(name, error_text(r)) for (name, _), r in zip(calls(), results, strict=True) if r is None or r.is_error]
    assert not failures, failures
    assert all(r is not None and r.structured_content is not None for r in results)
    assert not any("locked" in str(r.structured_content).lower() for r in results if r is not None)
    c.wait_for(lambda: c.ok("index_status")["stats"]["documents"] == 3 + N_NEW_FILES, "the new files")
    status = c.ok("index_status")
    assert status["last_error"] is None, status["last_error"]
