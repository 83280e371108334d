"""MCP sampling as an LLM backend: the answer pipeline asks the client's own model to write the text.

The pipeline may call the LLM several times per tool call (plan, sub-answers, final answer), from a worker thread,
with prompts it only knows once retrieval has run. So the request is sent as a standalone
``sampling/createMessage`` request tied to the running tool call -- the same path the SDK's ``Resolve``/``Sample``
markers take on handshake protocol versions -- and the worker thread waits on it through ``anyio.from_thread``.
On the stateless 2026-07-28 protocol a mid-call request is impossible; ``supports_sampling`` is then False and the
configured backend answers instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp import types
from mcp.server.mcpserver import Context
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from pathweaver.errors import UserError

SampleFn = Callable[[list[dict[str, Any]], int, float], tuple[str, str]]
SAMPLING_BACKENDS = ("auto", "sampling")


class SamplingError(UserError, RuntimeError):
    """The client refused or failed a sampling request."""


def supports_sampling(ctx: Context[Any, Any]) -> bool:
    """True when the client declared sampling and this connection can carry a mid-call request."""
    try:
        session = ctx.session
        caps = session.client_capabilities
    except ValueError:  # no request context (called in-process)
        return False
    if caps is None or caps.sampling is None:
        return False
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return False
    return bool(session.can_send_request)


def to_sampling_messages(messages: list[dict[str, Any]]) -> tuple[list[types.SamplingMessage], str | None]:
    """Chat messages -> sampling messages; ``system`` messages become the system prompt."""
    system = [str(m.get("content", "")) for m in messages if m.get("role") == "system"]
    out = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role not in ("user", "assistant"):
            raise SamplingError(f"cannot sample a message with role {role!r}")
        out.append(types.SamplingMessage(role=role, content=types.TextContent(type="text", text=str(m["content"]))))
    return out, ("\n\n".join(system) or None)


def _text_of(result: types.CreateMessageResult) -> str:
    blocks = result.content if isinstance(result.content, list) else [result.content]
    return "".join(getattr(b, "text", "") for b in blocks)


def make_sample_fn(ctx: Context[Any, Any]) -> SampleFn:
    """A ``sample_fn(messages, max_tokens, timeout) -> (text, model)`` callable from any thread of this tool call.

    Must be created on the event loop: it captures the loop's token so plain threads can reach it too.
    """
    token = anyio.lowlevel.current_token()

    async def _sample(messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> tuple[str, str]:
        sampling_messages, system_prompt = to_sampling_messages(messages)
        request = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=sampling_messages, max_tokens=max_tokens, system_prompt=system_prompt
            )
        )
        with anyio.fail_after(timeout):
            result = await ctx.session.send_request(
                request,
                types.CreateMessageResult,
                request_read_timeout_seconds=timeout,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        return _text_of(result), result.model

    def sample_fn(messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> tuple[str, str]:
        try:
            return anyio.from_thread.run(_sample, messages, max_tokens, timeout, token=token)
        except TimeoutError as exc:
            raise SamplingError(f"the client did not answer the sampling request within {timeout:.0f}s") from exc
        except Exception as exc:
            if isinstance(exc, SamplingError):
                raise
            raise SamplingError(f"the client's sampling request failed: {exc}") from exc

    return sample_fn


def sampling_backend(ctx: Context[Any, Any], backend_setting: str) -> Any | None:
    """A ``SamplingBackend`` when the settings allow sampling and the client supports it; else ``None``."""
    if backend_setting not in SAMPLING_BACKENDS or not supports_sampling(ctx):
        return None
    from pathweaver.models.llm_sampling import SamplingBackend

    return SamplingBackend(make_sample_fn(ctx))
