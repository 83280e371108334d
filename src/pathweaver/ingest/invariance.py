"""``Embedder.batch_invariant``'s answers remembered in the store, per model, device and machine.

The probe runs the full sentence-transformers model (its import alone is ~400 MB and seconds), and every
``Indexer`` needs the answer to resolve ``extract.graph_vector_precision = "auto"``, which ``meta.vector_settings``
records and every scan compares. The answer depends only on the model, the device and the machine
(``models.precision.machine_key``), so a server over an indexed store that has nothing to embed loads no model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pathweaver.models.precision import machine_key
from pathweaver.store.db import Database
from pathweaver.store.meta import set_meta

META_KEY = "batch_invariance"


def recorded_invariance(db: Database, embedder: Any, model: str) -> Callable[[str], bool]:
    """``embedder.batch_invariant`` answered from the store's record when it holds this model, device and
    machine, else probed and recorded (a read-only store only probes)."""
    device = getattr(embedder, "device", "cpu")

    def invariant(precision: str) -> bool:
        key = f"{model}|{device}|{precision}|{machine_key()}"
        try:
            recorded = json.loads(db.get_meta(META_KEY, "{}") or "{}")
        except ValueError:
            recorded = {}
        if isinstance(recorded, dict) and isinstance(recorded.get(key), bool):
            return recorded[key]
        answer = bool(embedder.batch_invariant(precision))
        if not db.readonly:
            with db.write(bump_version=False) as conn:
                set_meta(conn, META_KEY, json.dumps({**recorded, key: answer}, sort_keys=True))
        return answer

    return invariant
