"""LLM backends: the protocol, the shared JSON-mode helper, the extractive (no-LLM) backend, backend resolution
and the heartbeat that reports a slow call.

Backends: ``llamacpp`` (local GGUF), ``openai`` (any OpenAI-compatible HTTP server: Ollama, LM Studio, vLLM),
``sampling`` (the MCP client's own model) and ``extractive`` (no model; ``none`` is its older name). Every caller
treats ``LLMError`` as "fall back".
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pathweaver.config import ConfigError, ModelSettings
from pathweaver.errors import UserError
from pathweaver.models.schemas import SchemaViolation, validate

BACKENDS = ("auto", "sampling", "openai", "llamacpp", "extractive", "none")
EXTRACTIVE = "extractive"
NO_LLM = "no LLM configured"  # the extractive backend's LLMError message
# Invalid JSON is an LLMError at once: every JSON caller (plan, keywords) has a heuristic fallback, and a retry
# cost a small local model a minute.
JSON_ATTEMPTS = 1
HEARTBEAT_AFTER_S = 1.0  # an LLM call running longer than this reports progress ...
HEARTBEAT_EVERY_S = 1.0  # ... this often until it returns


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


class LLMError(UserError, RuntimeError):
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
    call: Callable[[list[dict[str, Any]]], LLMResult],
    messages: list[dict[str, Any]],
    schema: dict[str, Any],
    attempts: int = JSON_ATTEMPTS,
) -> LLMResult:
    """Run ``call`` and parse/validate its JSON, up to ``attempts`` times (each retry shows the model its invalid
    reply), then raise ``LLMError``. Token counts of all attempts are summed into the returned result."""
    prompt_tokens = completion_tokens = 0
    reason = ""
    attempt_messages = list(messages)
    for _ in range(max(attempts, 1)):
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
    raise LLMError(f"invalid JSON: {reason}" if attempts <= 1 else f"invalid JSON after {attempts} attempts: {reason}")


class NoneBackend:
    """No LLM: every call raises ``LLMError`` so callers take their extractive or heuristic answer."""

    name = EXTRACTIVE
    model = ""

    def complete(
        self,
        messages: list[dict[str, Any]],
        json_schema: dict[str, Any] | None = None,
        max_tokens: int = 512,
        timeout: float = 60.0,
    ) -> LLMResult:
        raise LLMError(NO_LLM)


ExtractiveBackend = NoneBackend


@dataclass(frozen=True)
class BackendChoice:
    """Which backend a setting resolves to, and why, in words a user can act on."""

    setting: str
    backend: str  # sampling | openai | llamacpp | extractive
    reason: str
    base_url: str = ""  # set when auto found a local OpenAI-compatible server (models.local_probe)
    model: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"setting": self.setting, "backend": self.backend, "reason": self.reason}
        if self.base_url:
            out.update(base_url=self.base_url, model=self.model)
        return out


def _llamacpp_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def choose_backend(models: ModelSettings, sampling_offered: bool = False) -> BackendChoice:
    """The backend ``models.llm_backend`` resolves to when the MCP client does (``sampling_offered``) or does not
    offer sampling. ``auto``: sampling, then ``openai_base_url``, then llama.cpp with the model file the user named
    in ``llm_model_path``, then an OpenAI-compatible server already running on a loopback port of
    ``local_probe_ports`` (``models.local_probe``), else extractive; the bundled SmolLM2 only when ``llamacpp`` is
    named. Raises
    ``ConfigError`` only for an unknown name; an explicit backend that cannot run is refused by
    ``resolve_backend``."""
    name = models.llm_backend
    if name not in BACKENDS:
        raise ConfigError(f"unknown models.llm_backend {name!r}; use one of {', '.join(BACKENDS)}")
    if name in (EXTRACTIVE, "none"):
        return BackendChoice(name, EXTRACTIVE, f"models.llm_backend = {name!r}")
    if name != "auto":
        return BackendChoice(name, name, f"models.llm_backend = {name!r}")
    if sampling_offered:
        return BackendChoice(name, "sampling", "the MCP client offers sampling")
    if models.openai_base_url:
        return BackendChoice(name, "openai", f"models.openai_base_url = {models.openai_base_url}")
    if models.llm_model_path:
        path = Path(models.llm_model_path).expanduser()
        if not path.is_file():
            return BackendChoice(name, EXTRACTIVE, f"models.llm_model_path {path} is not a file")
        if not _llamacpp_installed():
            return BackendChoice(
                name, EXTRACTIVE, "models.llm_model_path is set but llama-cpp-python is not installed"
            )
        return BackendChoice(name, "llamacpp", f"models.llm_model_path = {path}")
    from pathweaver.models.local_probe import probe

    ports = [int(p) for p in models.local_probe_ports]
    local = probe(ports, models.openai_model) if ports else None
    if local is not None:
        return BackendChoice(
            name, "openai", f"found a local OpenAI-compatible server at {local.label}, model {local.model}",
            local.base_url, local.model,
        )
    tried = f"no server on 127.0.0.1:{'/'.join(map(str, ports))}" if ports else "models.local_probe_ports = []"
    return BackendChoice(
        name, EXTRACTIVE, f"no MCP sampling, no models.openai_base_url, no models.llm_model_path and {tried}"
    )


def resolve_backend(models: ModelSettings, sampling: LLMBackend | None = None) -> LLMBackend:
    """The backend ``choose_backend`` picks (``sampling`` is the client's, when it offers it). Explicit names
    raise ``ConfigError`` when that backend cannot be used."""
    from pathweaver.models import llm_llamacpp, llm_openai

    choice = choose_backend(models, sampling is not None)
    if choice.backend == EXTRACTIVE:
        return NoneBackend()
    if choice.backend == "sampling":
        if sampling is None:
            raise ConfigError("models.llm_backend = 'sampling' needs an MCP client that supports sampling")
        return sampling
    if choice.backend == "openai" and choice.base_url:
        return llm_openai.OpenAIBackend(choice.base_url, choice.model)
    if choice.backend == "openai":
        if not models.openai_base_url:
            raise ConfigError(
                "models.llm_backend = 'openai' needs models.openai_base_url (e.g. http://localhost:11434/v1)"
            )
        return llm_openai.OpenAIBackend.from_settings(models)
    return llm_llamacpp.LlamaCppBackend.from_settings(models)


BeatFn = Callable[[float, str], None]


class Heartbeat:
    """A backend that calls ``beat(seconds, message)`` every ``every`` seconds while one of its calls has run for
    more than ``after`` seconds, from a timer thread, until the call returns. ``seconds`` count from the
    heartbeat's creation and only grow, so they can serve as an MCP progress value across concurrent calls."""

    def __init__(
        self, inner: LLMBackend, beat: BeatFn, after: float = HEARTBEAT_AFTER_S, every: float = HEARTBEAT_EVERY_S
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.beat = beat
        self.after = after
        self.every = every
        self._origin = time.monotonic()
        self._last = -1.0
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return self.inner.model

    def _send(self, waited: float) -> None:
        with self._lock:
            seconds = max(time.monotonic() - self._origin, self._last + 1e-3)
            self._last = seconds
            with contextlib.suppress(Exception):  # progress is best effort; the client may have gone
                self.beat(seconds, f"waiting for the {self.name} model ({waited:.0f}s)")

    def complete(
        self,
        messages: list[dict[str, Any]],
        json_schema: dict[str, Any] | None = None,
        max_tokens: int = 512,
        timeout: float = 60.0,
    ) -> LLMResult:
        done = threading.Event()
        start = time.monotonic()

        def run() -> None:
            wait = self.after
            while not done.wait(wait):
                self._send(time.monotonic() - start)
                wait = self.every

        timer = threading.Thread(target=run, name="pathweaver-llm-heartbeat", daemon=True)
        timer.start()
        try:
            return self.inner.complete(messages, json_schema=json_schema, max_tokens=max_tokens, timeout=timeout)
        finally:
            done.set()
