"""Replies to malformed JSON-RPC lines on stdio, which the SDK's stdio transport drops without a word.

The SDK parses each line and, when that fails, hands the exception to the session, which neither answers nor
logs it: a client that sent ``"params": "x"`` or ``"jsonrpc": "1.0"`` waits for its own timeout. ``GuardedLines``
sits between the line source and the SDK: a line the SDK's own message adapter accepts passes through untouched;
any other line gets the error JSON-RPC 2.0 §5.1 asks for (-32700 parse error, -32600 invalid request) under the
request's id, or, where no id can be read (MCP error replies carry one), a logged line on stderr.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import mcp_types as types
from pydantic import ValidationError

log = logging.getLogger(__name__)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_ID_RE = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)(?=\s*[,}])')  # an id in text that is not JSON
_SHOWN = 200  # characters of a bad line quoted in the log


def _readable_id(obj: Any, line: str) -> str | int | None:
    """The request id (a string or an integer) of a parsed ``obj``, or read from the raw ``line``; else None."""
    if isinstance(obj, dict):
        found = obj.get("id")
        return found if isinstance(found, str | int) and not isinstance(found, bool) else None
    if obj is not None:
        return None
    m = _ID_RE.search(line)
    if m is None:
        return None
    try:
        value = json.loads(m.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str | int) else None


def error_reply(line: str) -> tuple[str | None, str | None]:
    """``(reply, None)`` for a malformed line whose id can be read, ``(None, reason)`` for one whose id cannot, and
    ``(None, None)`` for a line the SDK takes (or a blank one)."""
    if not line.strip():
        return None, None
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None, None
    except ValidationError as exc:
        not_json = any(e.get("type") == "json_invalid" for e in exc.errors())
        detail = exc.errors()[0].get("msg", "") if exc.errors() else str(exc)
    except ValueError as exc:
        not_json, detail = True, str(exc)
    try:
        obj = json.loads(line)
    except ValueError:
        obj = None
    code, message = (PARSE_ERROR, "Parse error") if not_json else (INVALID_REQUEST, "Invalid Request")
    request_id = _readable_id(obj, line)
    if request_id is None:
        return None, f"{message} ({detail}), and no request id to answer"
    reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": f"{message}: {detail}"}}
    return json.dumps(reply, ensure_ascii=True), None


class GuardedLines:
    """The lines of ``lines`` that the SDK can parse; each other line is answered through ``write`` (or logged)."""

    def __init__(self, lines: AsyncIterator[str], write: Callable[[str], Awaitable[None]]) -> None:
        self.lines = lines
        self.write = write

    def __aiter__(self) -> GuardedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self.lines.__anext__()
            reply, reason = error_reply(line)
            if reply is not None:
                await self.write(reply + "\n")
            elif reason is not None:
                log.warning("malformed JSON-RPC message on stdin: %s: %r", reason, line[:_SHOWN])
            else:
                return line
