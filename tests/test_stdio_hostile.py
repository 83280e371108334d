"""Hostile JSON-RPC on stdio, through a raw pipe client: deep nesting, batches, fractional ids, unknown prompts and
oversized tool calls each get a JSON-RPC answer and the server keeps serving; an HTML note's citation span points at
its body text, not at its title or style sheet."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from test_server_stdio import serve_args, server_env, write_notes
from test_stdio_malformed import RawClient

INDEX_WAIT_S = 600.0  # a bound, not a timing: the first index of four notes can wait minutes on a loaded machine
HTML = (
    "<!DOCTYPE html><html><head><title>Radium glows in the dark</title>"
    "<style>body { font-family: serif } .radium { color: green } /* glows dark */</style>"
    "<script>var radium = 'glows in the dark';</script></head>\n<body>\n"
    "<p>Radium glows in the dark because Marie Curie's salts give off light.</p></body></html>"
)


def call_tool(c: RawClient, rid: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    got = c.request({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                     "params": {"name": name, "arguments": arguments}})
    assert got["id"] == rid and "result" in got, got
    return got["result"]


def error_text(result: dict[str, Any]) -> str:
    return " ".join(block.get("text", "") for block in result.get("content", []))


def test_hostile_json_rpc_is_answered_and_the_server_keeps_serving(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "notes")
    (notes / "radium.html").write_text(HTML, encoding="utf-8")
    errlog = tmp_path / "server.log"
    with open(errlog, "wb") as err:
        proc = subprocess.Popen([sys.executable, *serve_args(tmp_path / "store", [notes])], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, env=server_env())
        try:
            c = RawClient(proc)
            init = c.request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}})
            assert "result" in init, init
            c.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            rid = 100

            def alive() -> None:
                nonlocal rid
                rid += 1
                assert c.request({"jsonrpc": "2.0", "id": rid, "method": "ping"}) == {
                    "jsonrpc": "2.0", "id": rid, "result": {}}, errlog.read_text()[-3000:]

            # deep nesting: once a RecursionError that ended the server (exit 1)
            for deep in (b"[" * 1_000, b"[" * 100_000, b'{"a": ' * 100_000, b"[" * 1_000 + b"]" * 1_000):
                c.send(deep)
                got = c.reply()
                assert got["id"] is None and got["error"]["code"] in (-32700, -32600), got
                alive()
            nested = "[" * 5_000 + "]" * 5_000  # valid JSON, too deep to take, under a readable id
            c.send(f'{{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {{"x": {nested}}}}}'.encode())
            got = c.reply()
            assert got["id"] == 7 and got["error"]["code"] in (-32700, -32600), got
            alive()

            # a batch: MCP 2025-06-18 removed them; each request in it is answered with Invalid Request
            c.send(json.dumps([{"jsonrpc": "2.0", "id": 10, "method": "ping"},
                               {"jsonrpc": "2.0", "method": "notifications/initialized"},
                               {"jsonrpc": "2.0", "id": "eleven", "method": "tools/list"}]).encode())
            got = c.reply()
            assert isinstance(got, list) and [e["id"] for e in got] == [10, "eleven"], got
            assert all(e["error"]["code"] == -32600 and "batch" in e["error"]["message"] for e in got), got
            c.send(b"[]")
            got = c.reply()
            assert got["id"] is None and got["error"]["code"] == -32600, got
            # a fractional id is answered under that id, saying what is wrong with it
            c.send(b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}')  # the SDK took it for a notification
            got = c.reply()
            assert got["id"] == 1.5 and got["error"]["code"] == -32600 and "id must be" in got["error"]["message"]
            for bad in (b"true", b"null", b"[7]"):
                c.send(b'{"jsonrpc": "2.0", "id": ' + bad + b', "method": "ping"}')
                got = c.reply()
                assert got["id"] is None and got["error"]["code"] == -32600, got
            alive()

            # an unknown prompt, or one without its argument: invalid params, not code 0
            for params, words in [({"name": "no_such_prompt"}, ["no_such_prompt", "answer_with_citations"]),
                                  ({"name": "answer_with_citations", "arguments": {}}, ["question"])]:
                got = c.request({"jsonrpc": "2.0", "id": 20, "method": "prompts/get", "params": params})
                assert got["id"] == 20 and got["error"]["code"] == -32602, got
                assert all(w in got["error"]["message"] for w in words), got
            got = c.request({"jsonrpc": "2.0", "id": 21, "method": "prompts/get",
                             "params": {"name": "graph_research", "arguments": {"question": "Who?"}}})
            assert "Who?" in json.dumps(got["result"]), got

            # calls that once ran for minutes are refused at once, naming the setting
            many = [f"candidate passage {i}" for i in range(2_000)]
            result = call_tool(c, 30, "rerank", {"question": "Who built it?", "candidates": many, "resolved": []})
            assert result["isError"] and "max_rerank_candidates" in error_text(result), result
            result = call_tool(c, 31, "rerank", {"question": "Who built it?", "candidates": ["a"], "resolved": many})
            assert result["isError"] and "max_rerank_candidates" in error_text(result), result
            result = call_tool(c, 32, "retrieve_paths", {"question": "Who built it?",
                                                         "keywords": [f"k{i}" for i in range(20_000)]})
            assert result["isError"] and "max_keywords" in error_text(result), result
            ranked = call_tool(c, 33, "rerank", {"question": "Who designed the engine?", "resolved": [],
                                                 "candidates": ["Charles Babbage designed it.", "A loom."]})
            assert not ranked.get("isError") and len(ranked["structuredContent"]["results"]) == 2, ranked

            # the HTML note's citation span lies in its body, not in <title>, <style> or <script>
            deadline = time.monotonic() + INDEX_WAIT_S
            while True:
                status = call_tool(c, 40, "index_status", {})["structuredContent"]
                if status["ready"] and not status["indexing"]:
                    break
                assert time.monotonic() < deadline, status
                time.sleep(0.5)
            hits = call_tool(c, 41, "search", {"query": "Radium glows in the dark", "mode": "bm25"})
            cited = [h for h in hits["structuredContent"]["results"] if h["doc"].endswith("radium.html")]
            assert cited, hits
            start, end = cited[0]["span"]
            raw = HTML
            assert raw.index("<body>") < start < end <= raw.index("</body>"), raw[start:end]
            assert raw[start:end].startswith("Radium glows in the dark because"), raw[start:end]
            alive()
            assert proc.poll() is None
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=60)
    assert proc.returncode == 0, errlog.read_text()[-3000:]
