"""``auto`` finds an OpenAI-compatible server already running on a loopback port (Ollama, LM Studio): a real HTTP
server on a free port stands in for one."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pathweaver.config import ModelSettings, load_settings
from pathweaver.models import local_probe
from pathweaver.models.llm import choose_backend, resolve_backend
from pathweaver.models.llm_openai import OpenAIBackend
from pathweaver.models.llm_sampling import SamplingBackend


class FakeLocalServer:
    """``GET /v1/models`` lists ``models``; ``POST /v1/chat/completions`` answers with the model it was asked."""

    def __init__(self, models: list[str]) -> None:
        self.models = models
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                outer.paths.append(self.path)
                if self.path != "/v1/models":
                    self._send(404, {"error": "not found"})
                    return
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in outer.models]})

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.paths.append(self.path)
                self._send(200, {
                    "model": body["model"],
                    "choices": [{"message": {"role": "assistant", "content": f"hello from {body['model']}"}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 4},
                })

            def _send(self, code: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def fresh_probe() -> Iterator[None]:
    local_probe.forget()
    yield
    local_probe.forget()


@pytest.fixture
def ollama_like() -> Iterator[FakeLocalServer]:
    server = FakeLocalServer(["nomic-embed-text:latest", "llama3.2:1b", "qwen2.5:0.5b"])
    yield server
    server.close()


def test_auto_uses_a_local_server_after_sampling_and_before_extractive(ollama_like: FakeLocalServer) -> None:
    settings = ModelSettings(local_probe_ports=[closed_port(), ollama_like.port])
    choice = choose_backend(settings)
    assert (choice.backend, choice.model) == ("openai", "llama3.2:1b")  # the embedding model is passed over
    assert choice.base_url == f"http://127.0.0.1:{ollama_like.port}/v1"
    assert "found a local OpenAI-compatible server" in choice.reason and "llama3.2:1b" in choice.reason
    assert choice.to_dict()["base_url"] == choice.base_url
    backend = resolve_backend(settings)
    assert isinstance(backend, OpenAIBackend)
    result = backend.complete([{"role": "user", "content": "hi"}])
    assert (result.text, result.backend, result.model) == ("hello from llama3.2:1b", "openai", "llama3.2:1b")
    assert ollama_like.paths == ["/v1/models", "/v1/chat/completions"]  # the finding is cached for the call
    sampling = SamplingBackend(lambda m, n, t: ("x", "client-model"))
    assert choose_backend(settings, sampling_offered=True).backend == "sampling"
    assert resolve_backend(settings, sampling) is sampling
    explicit = ModelSettings(openai_base_url="http://127.0.0.1:9/v1", local_probe_ports=[ollama_like.port])
    assert choose_backend(explicit).base_url == ""  # a configured endpoint wins over the probe


def test_a_configured_model_is_asked_only_when_the_server_lists_it(ollama_like: FakeLocalServer) -> None:
    named = ModelSettings(local_probe_ports=[ollama_like.port], openai_model="qwen2.5:0.5b")
    assert choose_backend(named).model == "qwen2.5:0.5b"
    local_probe.forget()
    absent = ModelSettings(local_probe_ports=[ollama_like.port], openai_model="mistral:7b")
    assert choose_backend(absent).backend == "extractive"


def test_no_local_server_is_extractive_and_says_which_ports_it_tried() -> None:
    port = closed_port()
    choice = choose_backend(ModelSettings(local_probe_ports=[port]))
    assert choice.backend == "extractive" and f"no server on 127.0.0.1:{port}" in choice.reason
    off = choose_backend(ModelSettings(local_probe_ports=[]))
    assert off.backend == "extractive" and "local_probe_ports = []" in off.reason


def test_a_port_that_never_answers_is_given_up_within_the_budget() -> None:
    """Something listens but never replies (a foreign service): the probe gives up and reports nothing."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        assert local_probe.probe([silent.getsockname()[1]]) is None


def test_a_server_that_lists_only_embedding_models_is_not_used() -> None:
    server = FakeLocalServer(["nomic-embed-text:latest"])
    try:
        assert local_probe.probe([server.port]) is None
    finally:
        server.close()


def test_the_ports_setting_reads_from_a_variable_as_numbers(tmp_path: Any) -> None:
    env = {"PATHWEAVER_MODELS_LOCAL_PROBE_PORTS": "11434:8080"}
    assert load_settings(tmp_path, environ=env).models.local_probe_ports == [11434, 8080]
    assert load_settings(tmp_path, environ={}).models.local_probe_ports == [11434, 1234]
