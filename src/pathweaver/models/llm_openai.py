"""OpenAI-compatible chat backend (Ollama, LM Studio, vLLM, llama-server, OpenAI): one httpx POST per call."""

from __future__ import annotations

import os
from typing import Any

import httpx

from pathweaver.config import ModelSettings
from pathweaver.models.llm import LLMError, LLMResult, complete_json
from pathweaver.models.schemas import describe

API_KEY_VARS = ("PATHWEAVER_MODELS_OPENAI_API_KEY", "OPENAI_API_KEY")


class OpenAIBackend:
    """POST ``{base_url}/chat/completions``. Structured output uses ``response_format: json_schema``; a server
    that rejects it (HTTP 400/422) is asked again with ``json_object`` plus the schema in the system prompt."""

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str = "") -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self._json_schema_ok = True

    @classmethod
    def from_settings(cls, models: ModelSettings) -> OpenAIBackend:
        key = models.openai_api_key or next((os.environ[v] for v in API_KEY_VARS if os.environ.get(v)), "")
        return cls(models.openai_base_url, models.openai_model, key)

    def _post(self, body: dict[str, Any], timeout: float) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            return httpx.post(
                f"{self.base_url}/chat/completions", json=body, headers=headers, timeout=timeout
            )
        except httpx.TimeoutException as exc:
            raise LLMError(f"{self.base_url} did not answer within {timeout:.0f}s") from exc
        except httpx.HTTPError as exc:
            raise LLMError(f"cannot reach {self.base_url}: {exc}") from exc

    def _raw(
        self, messages: list[dict[str, Any]], schema: dict[str, Any] | None, max_tokens: int, timeout: float
    ) -> LLMResult:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        if schema is not None and self._json_schema_ok:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": schema, "strict": False},
            }
        elif schema is not None:
            body["response_format"] = {"type": "json_object"}
            body["messages"] = [{"role": "system", "content": describe(schema)}, *messages]
        resp = self._post(body, timeout)
        if schema is not None and self._json_schema_ok and resp.status_code in (400, 422):
            self._json_schema_ok = False  # remember: this server only knows json_object
            return self._raw(messages, schema, max_tokens, timeout)
        if resp.status_code != 200:
            raise LLMError(f"{self.base_url} answered HTTP {resp.status_code}: {resp.text[:200]}")
        try:
            out = resp.json()
            text = out["choices"][0]["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(
                f"{self.base_url} sent a reply that is not a chat completion: {resp.text[:200]}"
            ) from exc
        usage = out.get("usage") or {}
        return LLMResult(
            text=text,
            data=None,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            backend=self.name,
            model=str(out.get("model") or self.model),
        )

    def complete(
        self,
        messages: list[dict[str, Any]],
        json_schema: dict[str, Any] | None = None,
        max_tokens: int = 512,
        timeout: float = 60.0,
    ) -> LLMResult:
        if json_schema is None:
            return self._raw(messages, None, max_tokens, timeout)
        return complete_json(
            lambda msgs: self._raw(msgs, json_schema, max_tokens, timeout), messages, json_schema
        )
