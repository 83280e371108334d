"""Replies to malformed JSON-RPC lines on stdio, which the SDK's stdio transport drops without a word.

The SDK parses each line and, when that fails, hands the exception to the session, which neither answers nor
logs it: a client that sent ``"params": "x"`` or ``"jsonrpc": "1.0"`` waits for its own timeout. ``GuardedLines``
sits between the line source and the SDK: a line the SDK's own message adapter accepts passes through untouched;
any other line gets the error JSON-RPC 2.0 §5.1 asks for (-32700 parse error, -32600 invalid request) under the
request's id, or under ``"id": null`` where no id can be read (JSON-RPC 2.0 §5; the SDK's ``JSONRPCError`` allows
it), and a logged line on stderr. A batch (a JSON array, which MCP 2025-06-18 removed) gets an array of Invalid
Request errors, one per request in it (§6). JSON nested too deep to parse is a parse error like any other: the
check never recurses (Python's ``json`` would raise ``RecursionError`` at about 1,000 levels and end the server).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import mcp_types as types
import pydantic_core
from pydantic import ValidationError

log = logging.getLogger(__name__)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_ID_RE = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?=\s*[,}])')  # an id in text that is not JSON
_SHOWN = 200  # characters of a bad line quoted in the log
_NO_ID = object()  # a message without an id member: a notification, which gets no reply
BATCH = ("JSON-RPC batches are not supported (MCP 2025-06-18 removed them); send each message on its own line")


def _loads(line: str | bytes) -> Any:
    """``line`` parsed by pydantic-core, whose parser stops at a fixed depth with a ``ValueError``; None when it is
    not JSON (or nests deeper than that)."""
    try:
        return pydantic_core.from_json(line)
    except ValueError:
        return None


def _id_of(obj: Any) -> Any:
    """The ``id`` member of a parsed message as it was sent (any JSON value), or ``_NO_ID``."""
    return obj.get("id", _NO_ID) if isinstance(obj, dict) else None


def _answerable(value: Any) -> Any:
    """The id to answer under: a string or a number as sent (a fractional one too, so the client can match it),
    else None (JSON-RPC's ``"id": null``)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return value if not isinstance(value, float) or math.isfinite(value) else None  # JSON has no Infinity


def _raw_id(line: str) -> Any:
    """An id read from a ``line`` that is not JSON, or None."""
    m = _ID_RE.search(line)
    if m is None:
        return None
    try:
        return _answerable(json.loads(m.group(1)))
    except ValueError:
        return None


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _batch_reply(items: list[Any]) -> list[dict[str, Any]]:
    """One Invalid Request error per member of a batch that expects a reply (a notification expects none), or a
    single one under ``"id": null`` when none does (the batch was refused all the same)."""
    out = []
    for item in items:
        found = _id_of(item)
        if found is not _NO_ID:
            out.append(_error(_answerable(found), INVALID_REQUEST, f"Invalid Request: {BATCH}"))
    return out or [_error(None, INVALID_REQUEST, f"Invalid Request: {BATCH}")]


def bad_id(text: str | bytes) -> dict[str, Any] | None:
    """The Invalid Request error for a message whose ``id`` is not a string or an integer (1.5, true, null), which
    the SDK reads as a notification, dropping the id, and never answers; None for any other message."""
    if ('"id"' if isinstance(text, str) else b'"id"') not in text:
        return None
    found = _id_of(_loads(text))
    if found is _NO_ID or isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return None
    return _error(_answerable(found), INVALID_REQUEST,
                  f"Invalid Request: id must be a string or an integer, not {json.dumps(found)[:_SHOWN]}")


def error_reply(line: str) -> tuple[str | None, str | None]:
    """``(reply, None)`` for a malformed line whose id can be read, ``(reply, reason)`` for one whose id cannot (the
    reply is under ``"id": null``; ``reason`` is for the log), and ``(None, None)`` for a line the SDK takes (or a
    blank one)."""
    if not line.strip():
        return None, None
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        wrong = bad_id(line) if isinstance(message, types.JSONRPCNotification) else None
        if wrong is None:
            return None, None
        reason = None if wrong["id"] is not None else f"{wrong['error']['message']}, and no request id to answer under"
        return json.dumps(wrong, ensure_ascii=True), reason
    except ValidationError as exc:
        not_json = any(e.get("type") == "json_invalid" for e in exc.errors())
        detail = exc.errors()[0].get("msg", "") if exc.errors() else str(exc)
    except ValueError as exc:
        not_json, detail = True, str(exc)
    obj = None if not_json else _loads(line)
    if isinstance(obj, list) and obj:
        reply: Any = _batch_reply(obj)
        return json.dumps(reply, ensure_ascii=True), None
    code, message = (PARSE_ERROR, "Parse error") if not_json else (INVALID_REQUEST, "Invalid Request")
    found = _raw_id(line) if obj is None else _id_of(obj)
    request_id = None if found is _NO_ID else _answerable(found)
    if not not_json and (isinstance(request_id, float) or (found not in (_NO_ID, None) and request_id is None)):
        detail = f"id must be a string or an integer, not {json.dumps(found)[:_SHOWN]}"
    reply = json.dumps(_error(request_id, code, f"{message}: {detail}"), ensure_ascii=True)
    if request_id is None:
        return reply, f"{message} ({detail}), and no request id to answer under"
    return reply, None


class GuardedLines:
    """The lines of ``lines`` that the SDK can parse; each other line is answered through ``write`` (and logged
    when it has no id to answer under)."""

    def __init__(self, lines: AsyncIterator[str], write: Callable[[str], Awaitable[None]]) -> None:
        self.lines = lines
        self.write = write

    def __aiter__(self) -> GuardedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self.lines.__anext__()
            reply, reason = error_reply(line)
            if reason is not None:
                log.warning("malformed JSON-RPC message on stdin: %s: %r", reason, line[:_SHOWN])
            if reply is None:
                return line
            await self.write(reply + "\n")


class BadIdMiddleware:
    """ASGI middleware for the HTTP transport: a POSTed message whose id is not a string or an integer gets the
    Invalid Request error (400) that ``bad_id`` writes, where the SDK would accept it as a notification (202) and
    never answer. Bodies without a length or over ``max_body`` pass through untouched (the SDK refuses those over
    its limit)."""

    def __init__(self, app: Any, max_body: int = 4 * 1024 * 1024) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if not length.isdigit() or int(length) > self.max_body:
            await self.app(scope, receive, send)
            return
        messages: list[Any] = []
        body = b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        wrong = bad_id(body)
        if wrong is not None:
            payload = json.dumps(wrong, ensure_ascii=True).encode()
            await send({"type": "http.response.start", "status": 400, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
            await send({"type": "http.response.body", "body": payload})
            return

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)
