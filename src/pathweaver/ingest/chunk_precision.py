"""Which precision a store's chunk vectors are made at (``ingest.chunk_vector_precision``), kept for its life.

bfloat16 chunk vectors go through the fixed-shape passes (``Embedder.encode(..., invariant=True)``): a chunk's
vector is the same bits whatever it is embedded with, so an incremental index stores what a fresh one does (float32
keeps the packed passes it always had). A store records the precision of its first index in ``meta``; "auto" then
follows the record, an explicit setting that contradicts it is refused (a store of mixed precisions would rank a
chunk by when it was indexed), and a bfloat16 store on a CPU without native bfloat16 keeps bfloat16, emulated
(slower, the same recipe): re-making every chunk vector on each machine that indexes a shared store would cost a
whole first index each time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pathweaver.config import ConfigError
from pathweaver.models.precision import check_precision, native_bf16, resolve_precision
from pathweaver.store.db import Database
from pathweaver.store.meta import set_meta

log = logging.getLogger(__name__)

META_KEY = "chunk_precision"
SETTING = "ingest.chunk_vector_precision"


def cache_space(precision: str) -> str:
    """The ``embed_cache`` key space of chunk vectors made at ``precision`` (float32's is the original one)."""
    return "" if precision == "float32" else f"chunks-{precision}"


def store_chunk_precision(db: Database, setting: str, invariant: Callable[[str], bool], has_chunks: bool) -> str:
    """The precision this store's chunk vectors are made at: the recorded one while the store holds chunks (stores
    from before the record are float32), else ``setting`` resolved for this CPU (``invariant`` is
    ``Embedder.batch_invariant``) and recorded. Raises ``ConfigError`` for an explicit setting the store's chunks
    contradict."""
    check_precision(setting, SETTING)
    recorded = (db.get_meta(META_KEY) or "float32") if has_chunks else None
    if recorded is None:
        resolved = resolve_precision(setting, invariant, SETTING)
        if not db.readonly and db.get_meta(META_KEY) != resolved:
            with db.write(bump_version=False) as conn:
                set_meta(conn, META_KEY, resolved)
        return resolved
    if setting not in ("auto", recorded):
        raise ConfigError(f"this store's chunk vectors are {recorded}: {SETTING} = {setting} would mix "
                          f"precisions. Set it to auto or {recorded}, or index into a fresh store")
    if recorded == "bfloat16" and not native_bf16():
        log.warning("this store's chunk vectors are bfloat16, which this CPU emulates: new chunks embed slower")
    return recorded
