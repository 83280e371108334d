"""The MCP server's stdio on asyncio's own pipe transports.

The SDK's ``stdio_server`` reads stdin and writes stdout through ``anyio.wrap_file``: every request line read, every
reply written and every flush is a hop to a worker thread and back. When stdin and stdout are pipes or sockets (as
every MCP client spawns a server) the event loop can watch them itself, so a line costs no thread hop (figures in
``docs/benchmarks.md``). The SDK's transport still frames the messages: this only hands it a line source and a sink.

As the SDK does, the process's fds 0 and 1 are pointed at the null device and at stderr while serving, so a stray
``print`` or a child process cannot write into the protocol stream; both are restored afterwards, in blocking mode.
Anything else (a terminal, a regular file, Windows, another event loop) returns ``None`` and the caller keeps the
SDK's transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections.abc import AsyncIterator, Callable
from typing import Any

log = logging.getLogger(__name__)
BUFFER = 1 << 20  # bytes the reader buffers before it hands a longer line over in pieces (no line limit)


class PipeLines:
    """Async iterator over the text lines of a pipe, of any length (as the SDK reads them)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        parts: list[bytes] = []
        while True:
            try:
                parts.append(await self.reader.readuntil(b"\n"))
                break
            except asyncio.LimitOverrunError as over:  # a line longer than the buffer: take what is there
                parts.append(await self.reader.readexactly(over.consumed))
            except asyncio.IncompleteReadError as end:  # end of input, maybe after a last unterminated line
                parts.append(end.partial)
                break
        line = b"".join(parts)
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class PipeSink:
    """``write``/``flush`` of the SDK's text stdout over an asyncio pipe writer (flush waits for the pipe to drain).

    When the client stops reading (its end of the pipe closed), replies are dropped and ``on_lost`` runs once, so
    the server winds down as it does when stdin ends, instead of failing with a broken pipe."""

    def __init__(self, writer: asyncio.StreamWriter, on_lost: Callable[[], None] = lambda: None) -> None:
        self.writer = writer
        self.on_lost = on_lost
        self.lost = False

    async def write(self, text: str) -> None:
        if not self.lost and not self.writer.transport.is_closing():
            self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        if self.lost:
            return
        try:
            await self.writer.drain()
        except ConnectionError:
            self.lost = True
            log.warning("the MCP client closed its end of stdout; stopping")
            self.on_lost()


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def usable() -> bool:
    """Whether this process can serve stdio on asyncio pipes: POSIX, asyncio, and fds 0 and 1 pipes or sockets."""
    try:
        asyncio.get_running_loop()  # anyio on trio has none
        on_asyncio = True
    except RuntimeError:
        on_asyncio = False
    return os.name == "posix" and on_asyncio and _is_pipe(0) and _is_pipe(1)


def _claim(fd: int, diversion: int) -> tuple[int, Callable[[], None]]:
    """A private duplicate of ``fd`` for the wire, with ``fd`` itself pointed at ``diversion``; and its undo."""
    wire = os.dup(fd)
    keep = os.dup(fd)
    os.dup2(diversion, fd)

    def restore() -> None:
        with contextlib.suppress(OSError):
            os.set_blocking(keep, True)  # asyncio made the shared pipe non-blocking
            os.dup2(keep, fd)
        with contextlib.suppress(OSError):
            os.close(keep)

    return wire, restore


@contextlib.asynccontextmanager
async def pipe_stdio() -> AsyncIterator[tuple[PipeLines, PipeSink] | None]:
    """``(lines, sink)`` for ``mcp.server.stdio.stdio_server(stdin=, stdout=)``, or ``None`` when not ``usable``."""
    if not usable():
        yield None
        return
    loop = asyncio.get_running_loop()
    undo: list[Callable[[], None]] = []
    transports: list[Any] = []
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        wire_in, restore_in = _claim(0, devnull)
        undo.append(restore_in)
        wire_out, restore_out = _claim(1, 2)
        undo.append(restore_out)
        reader = asyncio.StreamReader(limit=BUFFER)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0))
        transports.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0))
        transports.append(write_transport)
        yield PipeLines(reader), PipeSink(asyncio.StreamWriter(write_transport, protocol, None, loop),
                                          on_lost=read_transport.close)  # ends the lines as EOF does
    finally:
        for transport in transports:
            transport.close()
        for step in reversed(undo):
            step()
        os.close(devnull)
