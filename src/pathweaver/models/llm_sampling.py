"""MCP sampling backend: the client's own model writes the text through a callable the server supplies.

This module does not import the server: ``sample_fn(messages, max_tokens, timeout) -> (text, model)`` is given to
it. JSON mode has no constrained decoding here, so the schema goes into the system prompt and the reply is parsed,
validated and retried once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pathweaver.models.llm import LLMError, LLMResult, complete_json
from pathweaver.models.schemas import describe

SampleFn = Callable[[list[dict[str, Any]], int, float], tuple[str, str]]


def _rough_tokens(text: str) -> int:
    """Sampling results carry no usage; about four characters per token."""
    return (len(text) + 3) // 4


class SamplingBackend:
    name = "sampling"

    def __init__(self, sample_fn: SampleFn) -> None:
        self.sample_fn = sample_fn
        self.model = ""

    def _raw(self, messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> LLMResult:
        try:
            text, model = self.sample_fn(messages, max_tokens, timeout)
        except LLMError:
            raise
        except Exception as exc:  # the server's SamplingError, timeouts, refusals
            raise LLMError(f"sampling failed: {exc}") from exc
        self.model = model or self.model
        prompt = "".join(str(m.get("content", "")) for m in messages)
        return LLMResult(
            text=text or "",
            data=None,
            prompt_tokens=_rough_tokens(prompt),
            completion_tokens=_rough_tokens(text or ""),
            backend=self.name,
            model=self.model,
        )

    def complete(
        self,
        messages: list[dict[str, Any]],
        json_schema: dict[str, Any] | None = None,
        max_tokens: int = 512,
        timeout: float = 60.0,
    ) -> LLMResult:
        if json_schema is None:
            return self._raw(messages, max_tokens, timeout)
        instructed = [{"role": "system", "content": describe(json_schema)}, *messages]
        return complete_json(lambda msgs: self._raw(msgs, max_tokens, timeout), instructed, json_schema)
