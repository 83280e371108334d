"""LLM backends: the protocol, the shared JSON-mode helper, the ``none`` backend and backend resolution.

Backends: ``llamacpp`` (local GGUF), ``openai`` (any OpenAI-compatible HTTP server: Ollama, LM Studio, vLLM),
``sampling`` (the MCP client's own model) and ``none``. Every caller treats ``LLMError`` as "fall back".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pathweaver.config import ConfigError, ModelSettings
from pathweaver.models.schemas import SchemaViolation, validate

BACKENDS = ("auto", "sampling", "openai", "llamacpp", "none")
JSON_ATTEMPTS = 2  # one retry on invalid JSON, then LLMError


@dataclass
class LLMResult:
    """One completion. ``data`` is the parsed JSON when a schema was requested."""

    text: str
    data: Any | None
    prompt_tokens: int
    completion_tokens: int
    backend: str
    model: str
    fallback: str | None = None


class LLMError(RuntimeError):
    """The model is absent, failed, timed out, or gave invalid JSON; callers fall back."""


class LLMBackend(Protocol):
    name: str
    model: str

    def complete(
        self,
        messages: list[dict[str, Any]],
        json_schema: dict[str, Any] | None = None,
        max_tokens: int = 512,
        timeout: float = 60.0,
    ) -> LLMResult: ...


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def parse_json(text: str, schema: dict[str, Any]) -> Any:
    """Parse ``text`` (tolerating a code fence or prose around one JSON object) and validate it against ``schema``.

    Raises ``ValueError`` with a readable reason."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            raise ValueError(f"not JSON: {text[:80]!r}") from None
        try:
            data = json.loads(body[start : end + 1])
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON ({exc.msg}): {text[:80]!r}") from None
    try:
        validate(data, schema)
    except SchemaViolation as exc:
        raise ValueError(f"JSON does not match the schema: {exc}") from None
    return data


def complete_json(
    call: Callable[[list[dict[str, Any]]], LLMResult], messages: list[dict[str, Any]], schema: dict[str, Any]
) -> LLMResult:
    """Run ``call`` and parse/validate its JSON; retry once on invalid output, then raise ``LLMError``.

    Token counts of both attempts are summed into the returned result."""
    prompt_tokens = completion_tokens = 0
    reason = ""
    attempt_messages = list(messages)
    for _ in range(JSON_ATTEMPTS):
        result = call(attempt_messages)
        prompt_tokens += result.prompt_tokens
        completion_tokens += result.completion_tokens
        try:
            result.data = parse_json(result.text, schema)
        except ValueError as exc:
            reason = str(exc)
            attempt_messages = [
                *messages,
                {"role": "assistant", "content": result.text[:2000]},
                {
                    "role": "user",
                    "content": f"That reply was invalid ({reason}). Reply again with valid JSON only.",
                },
            ]
            continue
        result.prompt_tokens, result.completion_tokens = prompt_tokens, completion_tokens
        return result
    raise LLMError(f"invalid JSON after {JSON_ATTEMPTS} attempts: {reason}")


class NoneBackend:
    """No LLM configured: every call raises ``LLMError`` so callers take their extractive fallback."""

    name = "none"
    model = ""

    def complete(
        self,
        messages: list[dict[str, Any]],
        json_schema: dict[str, Any] | None = None,
        max_tokens: int = 512,
        timeout: float = 60.0,
    ) -> LLMResult:
        raise LLMError("no LLM configured")


def resolve_backend(models: ModelSettings, sampling: LLMBackend | None = None) -> LLMBackend:
    """The backend ``models.llm_backend`` names. ``auto``: sampling if given, then a configured OpenAI-compatible
    endpoint, then llama.cpp if installed with a model file, then ``none``. Explicit names raise ``ConfigError``
    when that backend cannot be used."""
    from pathweaver.models import llm_llamacpp, llm_openai

    name = models.llm_backend
    if name not in BACKENDS:
        raise ConfigError(f"unknown models.llm_backend {name!r}; use one of {', '.join(BACKENDS)}")
    if name == "none":
        return NoneBackend()
    if name == "sampling":
        if sampling is None:
            raise ConfigError("models.llm_backend = 'sampling' needs an MCP client that supports sampling")
        return sampling
    if name == "openai":
        if not models.openai_base_url:
            raise ConfigError(
                "models.llm_backend = 'openai' needs models.openai_base_url (e.g. http://localhost:11434/v1)"
            )
        return llm_openai.OpenAIBackend.from_settings(models)
    if name == "llamacpp":
        return llm_llamacpp.LlamaCppBackend.from_settings(models)
    # auto
    if sampling is not None:
        return sampling
    if models.openai_base_url:
        return llm_openai.OpenAIBackend.from_settings(models)
    if llm_llamacpp.available(models):
        return llm_llamacpp.LlamaCppBackend.from_settings(models)
    return NoneBackend()
