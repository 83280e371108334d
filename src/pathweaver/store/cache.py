"""A process-wide cache of graph snapshots, one per store file, valid while the store version does not move."""

from __future__ import annotations

import threading
from collections.abc import Callable

from pathweaver.store.snapshot import GraphSnapshot

Derive = Callable[[GraphSnapshot], GraphSnapshot | None]
MAX_PATCHES = 16  # patches kept (the oldest go first); a watcher batch records one


class SnapshotCache:
    """Holds the last snapshot of one store; ``get`` rebuilds it only when ``version`` differs.

    A writer in this process may record that a version it committed is a small function of the one before
    (``patch``: the synonym pass of a watcher batch only adds synonym rows). A snapshot of that earlier version is
    then carried forward by that function instead of being read again from the store, which is slow."""

    def __init__(self) -> None:
        self._snapshot: GraphSnapshot | None = None
        self._lock = threading.Lock()
        self._patches: dict[int, tuple[int, Derive]] = {}
        self._patch_lock = threading.Lock()  # not ``_lock``: a writer must not wait for a reader's build
        self.builds = 0  # how many times a snapshot was built or carried forward (for tests and stats)
        self.patched = 0  # how many of those were carried forward by a patch

    def patch(self, before: int, after: int, derive: Derive) -> None:
        """Record that store version ``after`` is ``derive(snapshot of before)`` (None from ``derive``: read it)."""
        with self._patch_lock:
            self._patches[before] = (after, derive)
            for old in sorted(self._patches)[:-MAX_PATCHES]:
                del self._patches[old]

    def get(self, version: int, build: Callable[[GraphSnapshot | None], GraphSnapshot]) -> GraphSnapshot:
        """The snapshot at ``version``; ``build`` gets the one it replaces (or None) to reuse what did not change."""
        snap = self._snapshot
        if snap is not None and snap.version == version:
            return snap
        with self._lock:
            snap = self._snapshot
            if snap is None or snap.version != version:
                carried = self._carried(snap, version)
                snap = carried if carried is not None else build(snap)
                self._snapshot = snap
                self.builds += 1
                self.patched += carried is not None
        return snap

    def _carried(self, snap: GraphSnapshot | None, version: int) -> GraphSnapshot | None:
        """``snap`` carried forward to ``version`` by recorded patches, or None when they do not lead there."""
        while snap is not None and snap.version != version:
            with self._patch_lock:
                step = self._patches.get(snap.version)
            if step is None or step[0] > version:
                return None
            snap = step[1](snap)
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
