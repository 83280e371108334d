"""End to end over streamable HTTP: bearer token enforced (401), tools and sampling work, 0.0.0.0 needs a token."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from test_server_stdio import (
    SAMPLED_PREFIX,
    mcp_client,
    sampling_callback,
    serve_args,
    server_env,
    write_notes,
)

TOKEN = "test-token-5f2c"
START_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path, ip: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited ({proc.returncode}): {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection((ip, port), timeout=0.5):
            return
        time.sleep(0.3)
    raise AssertionError("server did not start listening")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server, and kill it if it has not ended in 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("http")
    notes = write_notes(base / "notes")
    port = free_port()
    log = base / "server.log"
    cmd = [
        sys.executable,
        *serve_args(base / "store", [notes], "--http", "--port", str(port), "--token", TOKEN),
    ]
    with open(log, "wb") as errlog:
        proc = subprocess.Popen(cmd, env=server_env(), stdout=errlog, stderr=subprocess.STDOUT)
        try:
            wait_listening(proc, port, log)
            yield {"url": f"http://127.0.0.1:{port}/mcp", "base": base}
        finally:
            stop(proc)


def http_session(url: str, token: str):  # type: ignore[no-untyped-def]
    @contextlib.asynccontextmanager
    async def open_session() -> AsyncIterator[ClientSession]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0, read=300.0)) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write, sampling_callback=sampling_callback) as session,
        ):
            await session.initialize()
            yield session

    return open_session


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_requests_without_the_token_get_401(server: dict[str, Any], auth: str | None) -> None:
    headers = dict(ACCEPT)
    if auth:
        headers["Authorization"] = auth
    response = httpx.post(server["url"], json=INIT, headers=headers, timeout=10)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_request_with_the_token_is_served(server: dict[str, Any]) -> None:
    headers = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
    response = httpx.post(server["url"], json=INIT, headers=headers, timeout=30)
    assert response.status_code == 200
    assert "pathweaver" in response.text


def test_tools_and_sampling_over_http(server: dict[str, Any]) -> None:
    with mcp_client(http_session(server["url"], TOKEN)) as c:
        tools = {t.name for t in c.run(c.session.list_tools).tools}
        assert {"answer", "retrieve_paths", "add_folder"} <= tools
        c.wait_indexed()
        hits = c.ok("search", {"query": "punched cards", "k": 2})["results"]
        assert hits[0]["doc"].endswith("Analytical Engine.md")
        out = c.ok("answer", {"question": "Who designed the Analytical Engine?"})
        assert out["answer"].startswith(SAMPLED_PREFIX) and out["llm"]["backend"] == "sampling"
        outside = c.call("add_folder", {"path": "/etc"})
        assert outside.is_error


def test_refuses_public_host_without_token(tmp_path: Path) -> None:
    cmd = [sys.executable, *serve_args(tmp_path / "store", [], "--http", "--host", "0.0.0.0", "--port", "1")]
    env = server_env(PATHWEAVER_SERVER_TOKEN="")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "refusing to serve MCP over HTTP on 0.0.0.0 without a token" in done.stderr


def test_check_bind_and_middleware_in_process() -> None:
    import anyio

    from pathweaver.config import ConfigError
    from pathweaver.server.auth import BearerTokenMiddleware, check_bind, is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "secret")
    with pytest.raises(ConfigError, match="without a token"):
        check_bind("0.0.0.0", "")

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    app = BearerTokenMiddleware(inner, "secret")

    async def get(headers: dict[str, str]) -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return (await client.get("/mcp", headers=headers)).status_code

    assert anyio.run(get, {}) == 401
    assert anyio.run(get, {"Authorization": "Bearer nope"}) == 401
    assert anyio.run(get, {"Authorization": "Bearer secret"}) == 200
    for scheme in ("bearer", "BEARER", "BeArEr"):  # the scheme is case-insensitive, the token is not
        assert anyio.run(get, {"Authorization": f"{scheme} secret"}) == 200
        assert anyio.run(get, {"Authorization": f"{scheme} SECRET"}) == 401
    assert anyio.run(get, {"Authorization": "Bearersecret"}) == 401
    assert anyio.run(get, {"Authorization": "Basic secret"}) == 401
