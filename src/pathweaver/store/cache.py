"""A process-wide cache of graph snapshots, one per store file, valid while the store version does not move."""

from __future__ import annotations

import threading
from collections.abc import Callable

from pathweaver.store.snapshot import GraphSnapshot


class SnapshotCache:
    """Holds the last snapshot of one store; ``get`` rebuilds it only when ``version`` differs."""

    def __init__(self) -> None:
        self._snapshot: GraphSnapshot | None = None
        self._lock = threading.Lock()
        self.builds = 0  # how many times a snapshot was built (for tests and stats)

    def get(self, version: int, build: Callable[[GraphSnapshot | None], GraphSnapshot]) -> GraphSnapshot:
        """The snapshot at ``version``; ``build`` gets the one it replaces (or None) to reuse what did not change."""
        snap = self._snapshot
        if snap is not None and snap.version == version:
            return snap
        with self._lock:
            snap = self._snapshot
            if snap is None or snap.version != version:
                snap = build(snap)
                self._snapshot = snap
                self.builds += 1
        return snap

    def latest(self) -> GraphSnapshot | None:
        """The snapshot held now, of whatever version (None before the first build); builds nothing."""
        return self._snapshot

    def clear(self) -> None:
        with self._lock:
            self._snapshot = None


_CACHES: dict[str, SnapshotCache] = {}
_CACHES_LOCK = threading.Lock()


def cache_for(store_path: str) -> SnapshotCache:
    """The shared cache of the store file at ``store_path`` (all readers of one store share it)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store_path)
        if cache is None:
            cache = _CACHES[store_path] = SnapshotCache()
        return cache
