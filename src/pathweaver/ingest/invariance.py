"""``Embedder.batch_invariant``'s answers remembered in the store and on the machine, per model, device and machine.

The probe runs the full sentence-transformers model (its import alone is ~400 MB and seconds) and five fixed
passes (~3.5 s of CPU), and every ``Indexer`` needs the answer to resolve ``extract.graph_vector_precision`` and
``ingest.chunk_vector_precision`` "auto", which the store records and every scan compares. The answer depends only
on the model, the device and the machine (``models.precision.machine_key``), so a server over an indexed store
that has nothing to embed loads no model, and a new store on a machine that probed before does not probe again:
the answers are also kept in the user data directory (``MACHINE_FILE``; a file that cannot be read or written is
passed over).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pathweaver.models.precision import machine_key
from pathweaver.store.db import Database
from pathweaver.store.meta import set_meta

META_KEY = "batch_invariance"
MACHINE_FILE = "batch_invariance.json"


def machine_file() -> Path:
    """Where this machine's probe answers are kept (the user data directory, ``locations.data_dir``)."""
    from pathweaver.locations import data_dir

    return data_dir() / MACHINE_FILE


def _answers(text: str | None) -> dict[str, Any]:
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def machine_answers() -> dict[str, Any]:
    """This machine's remembered answers ({} when there are none or the file is unreadable)."""
    try:
        return _answers(machine_file().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return {}


def remember_on_machine(key: str, answer: bool) -> None:
    """Add one answer to the machine's file (written whole to a temporary file, then renamed over it)."""
    path = machine_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                         prefix=".batch_invariance-") as f:
            json.dump({**machine_answers(), key: answer}, f, sort_keys=True)
        os.replace(f.name, path)
    except OSError:
        pass


def recorded_invariance(db: Database, embedder: Any, model: str) -> Callable[[str], bool]:
    """``embedder.batch_invariant`` answered from the store's record when it holds this model, device and
    machine, else from the machine's, else probed; kept in both (a read-only store only reads)."""
    device = getattr(embedder, "device", "cpu")

    def invariant(precision: str) -> bool:
        key = f"{model}|{device}|{precision}|{machine_key()}"
        recorded = _answers(db.get_meta(META_KEY, "{}"))
        if isinstance(recorded.get(key), bool):
            return recorded[key]
        answer = machine_answers().get(key)
        if not isinstance(answer, bool):
            answer = bool(embedder.batch_invariant(precision))
            remember_on_machine(key, answer)
        if not db.readonly:
            with db.write(bump_version=False) as conn:
                set_meta(conn, META_KEY, json.dumps({**recorded, key: answer}, sort_keys=True))
        return answer

    return invariant
