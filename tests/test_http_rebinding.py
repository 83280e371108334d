"""DNS rebinding over raw HTTP: a web page whose own name resolves to this machine (Host and Origin
``attacker.example``) is refused on every loopback spelling the server accepts without a token (``127.0.0.2``,
``LOCALHOST``), not only on the three the MCP SDK guards by itself; a local client is still served."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from test_server_http import ACCEPT, INIT, stop, wait_listening
from test_server_stdio import serve_args, server_env, write_notes

ATTACKER = "attacker.example"
SEARCH = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "search", "arguments": {"query": "punched cards", "mode": "bm25"}}}


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(base: Path, host: str, ip: str) -> Iterator[int]:
    """``pathweaver serve --http --host HOST`` without a token, listening on ``ip``; yields its port."""
    notes = write_notes(base / "notes")
    port = free_port(ip)
    log = base / "server.log"
    cmd = [sys.executable, *serve_args(base / "store", [notes], "--http", "--host", host, "--port", str(port))]
    with open(log, "wb") as errlog:
        proc = subprocess.Popen(cmd, env=server_env(PATHWEAVER_SERVER_TOKEN=""), stdout=errlog,
                                stderr=subprocess.STDOUT)
        try:
            wait_listening(proc, port, log, ip)
            yield port
        finally:
            stop(proc)


def post(url: str, body: object, **headers: str) -> httpx.Response:
    return httpx.post(url, json=body, headers={**ACCEPT, **headers}, timeout=60)


@pytest.mark.parametrize(("host", "ip"), [("127.0.0.2", "127.0.0.2"), ("LOCALHOST", "127.0.0.1")])
def test_foreign_host_and_origin_are_refused_on_any_loopback_spelling(tmp_path: Path, host: str, ip: str) -> None:
    with http_server(tmp_path, host, ip) as port:
        url = f"http://{ip}:{port}/mcp"
        page = f"http://{ATTACKER}:{port}"
        for foreign in (ATTACKER, f"{ATTACKER}:{port}"):  # the rebinding page: its own name as Host and Origin
            refused = post(url, INIT, Host=foreign, Origin=page)
            assert refused.status_code == 421, (foreign, refused.status_code, refused.text[:300])
            assert "result" not in refused.text
        # a page elsewhere that reaches the server by a loopback name still carries its own Origin
        assert post(url, INIT, Host=f"{host}:{port}", Origin=page).status_code == 403
        assert post(url, INIT, Host=f"{host.lower()}:{port}", Origin=f"https://{ATTACKER}").status_code == 403

        served = post(url, INIT, Host=f"{host.lower()}:{port}")  # a local client: no Origin
        assert served.status_code == 200 and "pathweaver" in served.text, served.text[:300]
        session = served.headers["mcp-session-id"]
        assert post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    **{"mcp-session-id": session}).status_code == 202
        # a local tool in a browser (an Origin on a loopback name, as the MCP Inspector sends) is served
        assert post(url, {"jsonrpc": "2.0", "id": 3, "method": "ping"}, Origin="http://localhost:6274",
                    **{"mcp-session-id": session}).status_code == 200
        # hostile JSON-RPC over HTTP is answered, and the server keeps serving
        sid = {"mcp-session-id": session}
        for body in (b"[" * 100_000, b'{"a": ' * 100_000):
            deep = httpx.post(url, content=body, headers={**ACCEPT, **sid}, timeout=60)
            assert deep.status_code == 400 and deep.json()["error"]["code"] == -32700, deep.text[:300]
        batch = post(url, [{"jsonrpc": "2.0", "id": 4, "method": "ping"}], **sid)
        assert batch.status_code == 400 and batch.json()["error"]["code"] < 0, batch.text[:300]
        fractional = post(url, {"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, **sid)  # once a silent 202
        assert fractional.status_code == 400, fractional.text[:300]
        assert fractional.json()["id"] == 1.5 and fractional.json()["error"]["code"] == -32600
        form = httpx.post(url, content=b'{"jsonrpc": "2.0", "id": 6, "method": "ping"}', timeout=60,
                          headers={**ACCEPT, **sid, "Content-Type": "text/plain"})  # what a plain HTML form sends
        assert form.status_code == 400, form.text[:300]
        assert post(url, {"jsonrpc": "2.0", "id": 5, "method": "ping"}, **sid).status_code == 200
        # the attack that read the notes: a search under the session, from the rebinding page
        stolen = post(url, SEARCH, Host=f"{ATTACKER}:{port}", Origin=page, **{"mcp-session-id": session})
        assert stolen.status_code == 421 and "Analytical" not in stolen.text


def test_loopback_security_settings() -> None:
    from pathweaver.server.auth import loopback_security

    assert loopback_security("0.0.0.0") is None and loopback_security("192.168.1.5") is None  # a token guards these
    for host, name in [("127.0.0.2", "127.0.0.2"), ("LOCALHOST", "localhost"), ("::1", "[::1]"),
                       ("127.0.0.1", "127.0.0.1")]:
        settings = loopback_security(host)
        assert settings is not None and settings.enable_dns_rebinding_protection
        assert f"{name}:*" in settings.allowed_hosts and f"http://{name}:*" in settings.allowed_origins
        assert not any(ATTACKER in h for h in settings.allowed_hosts + settings.allowed_origins)
