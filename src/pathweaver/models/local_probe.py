"""Find an OpenAI-compatible server already running on this machine (Ollama, LM Studio) for ``auto``.

The probe connects to 127.0.0.1 only, on the configured ports (``models.local_probe_ports``), and asks
``GET /v1/models`` within one shared deadline (``PROBE_BUDGET_S``): a closed port is refused at once, and a port
that holds something slow or foreign costs at most the rest of the budget. A finding is kept for ``CACHE_S``
seconds, so a session's tool calls do not probe each time.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass

LOOPBACK = "127.0.0.1"
PROBE_BUDGET_S = 0.1  # the whole probe, every port together
CACHE_S = 5.0
KNOWN_PORTS = {11434: "Ollama", 1234: "LM Studio"}
# Ollama lists its embedding models beside its chat models; an id with this word is never chosen.
EMBEDDING_WORD = "embed"


@dataclass(frozen=True)
class LocalServer:
    """A loopback OpenAI-compatible server and the model ``auto`` will ask."""

    port: int
    model: str

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    @property
    def label(self) -> str:
        known = KNOWN_PORTS.get(self.port)
        return f"{self.base_url} ({known}'s port)" if known else self.base_url


_cache: dict[tuple[tuple[int, ...], str], tuple[float, LocalServer | None]] = {}
_lock = threading.Lock()


def _models(port: int, deadline: float) -> list[str] | None:
    """The model ids ``GET /v1/models`` lists on ``port``, or ``None`` when nothing usable answers in time."""
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=left)
    try:
        conn.request("GET", "/v1/models", headers={"Accept": "application/json"})
        conn.sock.settimeout(max(deadline - time.monotonic(), 0.001))
        resp = conn.getresponse()
        if resp.status != 200:
            return None
        data = json.loads(resp.read(1 << 20))
        return [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and m.get("id")]
    except (OSError, ValueError, http.client.HTTPException, AttributeError, TypeError):
        return None
    finally:
        conn.close()


def _pick(ids: list[str], wanted: str) -> str:
    if wanted:
        return wanted if wanted in ids else ""
    return next((i for i in ids if EMBEDDING_WORD not in i.lower()), "")


def probe(ports: list[int], wanted_model: str = "", budget: float = PROBE_BUDGET_S) -> LocalServer | None:
    """The first port (in order) whose server lists a chat model: ``wanted_model`` when set (and listed), else the
    first listed id that is not an embedding model. ``None`` when there is none within ``budget`` seconds."""
    key = (tuple(ports), wanted_model)
    now = time.monotonic()
    with _lock:
        hit = _cache.get(key)
        if hit is not None and now - hit[0] < CACHE_S:
            return hit[1]
    deadline = now + budget
    found: LocalServer | None = None
    for port in ports:
        ids = _models(port, deadline)
        model = _pick(ids, wanted_model) if ids else ""
        if model:
            found = LocalServer(port, model)
            break
    with _lock:
        _cache[key] = (time.monotonic(), found)
    return found


def forget() -> None:
    """Drop the cached findings (a test that stops its server, or a user who just started one)."""
    with _lock:
        _cache.clear()

