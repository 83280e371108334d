"""Malformed JSON-RPC on stdio, through a raw pipe client: ``pathweaver serve`` answers each line it cannot take
with the JSON-RPC error the spec asks for, under the request's id (or logs a line when no id can be read), and
keeps serving."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from test_server_stdio import serve_args, server_env, write_notes

REPLY_S = 60.0


class RawClient:
    """The server's stdin and stdout as plain pipes: lines in, JSON lines out, read on a thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = REPLY_S) -> dict[str, Any]:
        return json.loads(self.lines.get(timeout=timeout))

    def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(msg).encode())
        return self.reply()


def test_malformed_lines_get_json_rpc_errors_with_their_id(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "notes")
    errlog = tmp_path / "server.log"
    with open(errlog, "wb") as err:
        proc = subprocess.Popen([sys.executable, *serve_args(tmp_path / "store", [notes])], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, env=server_env(COLUMNS="1000"))  # log lines unwrapped
        try:
            c = RawClient(proc)
            init = c.request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}})
            assert init["id"] == 0 and "result" in init
            c.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            cases = [
                (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "a string"}', 1, -32600),
                (b'{"jsonrpc": "1.0", "id": "two", "method": "ping"}', "two", -32600),
                (b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"q": "\\ud800"}}', 3, -32700),
                (b'{"jsonrpc": "2.0", "id": 4, "method": "ping"', 4, -32700),  # cut short: not JSON
                (b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"q": "caf\xe9"}}', 5, None),  # bad UTF-8
            ]
            for raw, want_id, code in cases:
                c.send(raw)
                got = c.reply()
                assert got["id"] == want_id, (raw, got)
                if code is None:  # undecodable bytes are replaced, as the SDK reads them: a valid ping
                    assert got.get("result") == {}, got
                else:
                    assert got["error"]["code"] == code and got["error"]["message"], got
            c.send(b"this is not json and has no id")  # JSON-RPC 2.0 §5.1: answered under "id": null
            got = c.reply()
            assert got["id"] is None and got["error"]["code"] == -32700, got
            c.send(b"[1, 2, 3]")  # a batch (§6) of three invalid requests: three errors, as the spec's example
            got = c.reply()
            assert [(e["id"], e["error"]["code"]) for e in got] == [(None, -32600)] * 3, got  # type: ignore[index]
            assert c.request({"jsonrpc": "2.0", "id": 6, "method": "ping"}) == {"jsonrpc": "2.0", "id": 6, "result": {}}
            assert c.lines.empty()
            listed = c.request({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
            assert "index_status" in {t["name"] for t in listed["result"]["tools"]}
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=60)
    log = errlog.read_text(errors="replace")
    assert log.count("malformed JSON-RPC message on stdin") == 1, log  # the line with no id is logged too
    assert "this is not json" in log
