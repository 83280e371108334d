"""Build and run pathweaver's MCP server (stdio by default, or streamable HTTP with an optional bearer token)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mcp.server.mcpserver import MCPServer

from pathweaver.config import ConfigError, Settings, load_settings
from pathweaver.server import ServerState
from pathweaver.server.auth import BearerTokenMiddleware, check_bind, loopback_security
from pathweaver.server.background import STOP_WAIT_S, IndexManager
from pathweaver.server.prompts import PromptCheckingServer, register_prompts
from pathweaver.server.resources import register_resources
from pathweaver.server.roots import Roots, allowed_roots
from pathweaver.server.tools import register_tools

if TYPE_CHECKING:
    from pathweaver.service import Pathweaver

log = logging.getLogger(__name__)

INSTRUCTIONS = """pathweaver answers questions from the user's own documents through a knowledge graph.
Quick answer: `answer`. Step by step: `decompose_query` -> `retrieve_paths` / `build_mcmi` per sub-question ->
`rerank` with resolved answers -> write the answer citing file, chunk and span. `search` finds exact phrases,
`get_entity`/`neighbors` explore the graph, `index_status` says what is indexed and whether indexing is running."""

MCP_PATH = "/mcp"


def build_server(
    service: Pathweaver, roots: Sequence[Path], settings: Settings, manager: IndexManager | None = None
) -> MCPServer:
    """An ``MCPServer`` with pathweaver's tools, resources and prompts over ``service``.

    ``roots`` are the folders path arguments must lie in; ``manager`` (created, not started, when omitted) runs
    indexing and watching.
    """
    checked = Roots(roots)
    if manager is None:
        manager = IndexManager(service, list(checked.roots))
    state = ServerState(service=service, roots=checked, manager=manager, settings=settings)
    server: MCPServer = PromptCheckingServer(name="pathweaver", instructions=INSTRUCTIONS, log_level="WARNING")
    register_tools(server, state)
    register_resources(server, state)
    register_prompts(server)
    return server


def _watch_dirs(watch: Sequence[Path]) -> list[Path]:
    bad = [str(p) for p in watch if not Path(p).expanduser().is_dir()]
    if bad:
        raise ConfigError(f"--watch needs existing folders; not a folder: {', '.join(bad)}")
    return [Path(p).expanduser() for p in watch]


def run_server(
    store_dir: str | Path | None = None,
    watch: Sequence[Path] = (),
    transport: Literal["stdio", "http"] = "stdio",
    host: str | None = None,
    port: int | None = None,
    token: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> None:
    """Open the store, index and watch the allowed folders in the background, and serve until stopped.

    ``host``/``port``/``token`` default to ``[server]`` settings (127.0.0.1:8765, no token). Over HTTP a
    non-loopback host without a token is refused with a ``ConfigError`` before anything is opened.
    """
    if transport not in ("stdio", "http"):
        raise ConfigError(f"unknown transport {transport!r}; use stdio or http")
    settings = load_settings(store_dir, overrides)
    host = host or settings.server.host
    port = port or settings.server.port
    token = token or settings.server.token or None
    if transport == "http":
        check_bind(host, token)
    roots = allowed_roots(settings, _watch_dirs(watch))

    from pathweaver.service import Pathweaver

    service = Pathweaver(settings)
    manager = IndexManager(service, [r for r in roots if r.is_dir()])
    server = build_server(service, roots, settings, manager)
    manager.start()
    try:
        if transport == "stdio":
            import anyio

            anyio.run(serve_stdio, server)
        else:
            _serve_http(server, host, port, token)
    finally:
        manager.stop(STOP_WAIT_S)  # a stop signal ends the process within seconds (``cli.signals.stop_on_signals``)
        service.close()


async def serve_stdio(server: MCPServer) -> None:
    """Serve over stdin/stdout on asyncio's pipe transports when they are pipes (``pipes.py``: no thread hop per
    line), with malformed lines answered (``malformed.py``), else through the SDK's own stdio transport. The SDK
    has no public way to run a server on given streams, so this reads its ``_lowlevel_server`` and falls back to
    ``run_stdio_async`` where that is missing."""
    from mcp.server.stdio import stdio_server

    from pathweaver.server.malformed import GuardedLines
    from pathweaver.server.pipes import pipe_stdio

    lowlevel = getattr(server, "_lowlevel_server", None)
    if lowlevel is None:
        await server.run_stdio_async()
        return
    async with pipe_stdio() as pipes:
        if pipes is None:
            await server.run_stdio_async()
            return
        lines, sink = pipes

        async def reply(text: str) -> None:
            await sink.write(text)
            await sink.flush()

        async with stdio_server(stdin=GuardedLines(lines, reply), stdout=sink) as (read_stream, write_stream):  # type: ignore[arg-type]
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def http_app(server: MCPServer, host: str, token: str | None) -> Any:
    """The streamable-HTTP ASGI app at ``/mcp``, behind the bearer-token check when ``token`` is set, and behind
    pathweaver's own Host/Origin check (``auth.loopback_security``) whenever it binds to a loopback address; a
    message with an id that is not a string or an integer is answered (``malformed.BadIdMiddleware``)."""
    from pathweaver.server.malformed import BadIdMiddleware

    app: Any = BadIdMiddleware(server.streamable_http_app(streamable_http_path=MCP_PATH, host=host,
                                                          transport_security=loopback_security(host)))
    return BearerTokenMiddleware(app, token) if token else app


def _serve_http(server: MCPServer, host: str, port: int, token: str | None) -> None:
    import uvicorn

    log.warning("pathweaver MCP over HTTP at http://%s:%d%s%s", host, port, MCP_PATH, " (token)" if token else "")
    uvicorn.run(http_app(server, host, token), host=host, port=port, log_level="warning", interface="asgi3")
