"""Debounced folder watching: watchdog events are merged into (changed, removed) batches for the indexer.

Events collect until ``debounce_seconds`` pass without a new one (or ``max_wait_seconds`` after the first, so
constant churn still gets indexed), then ``on_batch(changed, removed)`` runs on the watcher's worker thread. The
last event for a path wins: changed-then-deleted ends in ``removed`` only, deleted-then-recreated in ``changed``.
A move is removed(src) + changed(dest); a directory created or moved in is reported as changed (the indexer scans
it). Hidden paths and editor temp files are ignored.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from pathweaver.config import ConfigError

log = logging.getLogger(__name__)

DEFAULT_MAX_WAIT_SECONDS = 5.0
# Vim swap/backup files and its "4913" write test, Emacs lock/autosave files, generic temp/partial downloads.
_TEMP_NAME_RE = re.compile(
    r"(?:.*\.sw[a-px]|.*~|\.#.*|#.*#|4913|.*\.tmp|.*\.part|.*\.crdownload)$", re.IGNORECASE
)


def is_temp_name(name: str) -> bool:
    """True for editor temp/backup files that never hold a document's final content."""
    return bool(_TEMP_NAME_RE.fullmatch(name))


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: FolderWatcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        self.watcher._on_event(event)


class FolderWatcher:
    """Watch ``roots`` recursively and deliver debounced ``on_batch(changed, removed)`` calls."""

    def __init__(
        self,
        roots: list[Path],
        on_batch: Callable[[set[Path], set[Path]], None],
        debounce_seconds: float = 0.5,
        ignore: Callable[[Path], bool] | None = None,
        max_wait_seconds: float = DEFAULT_MAX_WAIT_SECONDS,
    ) -> None:
        if debounce_seconds < 0 or max_wait_seconds <= 0:
            raise ConfigError(
                f"need debounce_seconds >= 0 and max_wait_seconds > 0, got {debounce_seconds} and {max_wait_seconds}"
            )
        self.roots = [Path(os.path.abspath(r)) for r in roots]
        self.on_batch = on_batch
        self.debounce_seconds = debounce_seconds
        self.max_wait_seconds = max(
            max_wait_seconds, debounce_seconds
        )  # churn cap never undercuts the debounce
        self.ignore = ignore
        self._pending: dict[Path, bool] = {}  # path -> True if changed, False if removed (last event wins)
        self._first_at = 0.0
        self._last_at = 0.0
        self._cond = threading.Condition()
        self._stopping = False
        self._observer: Observer | None = None  # type: ignore[valid-type]
        self._worker: threading.Thread | None = None

    def pending(self) -> bool:
        """Whether changes are waiting for their batch (the debounce has not run out yet)."""
        with self._cond:
            return bool(self._pending)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start watching; raises FileNotFoundError/NotADirectoryError for a bad root."""
        if self._observer is not None:
            raise RuntimeError("watcher already started")
        for root in self.roots:
            if not root.exists():
                raise FileNotFoundError(f"watched folder does not exist: {root}")
            if not root.is_dir():
                raise NotADirectoryError(f"watched path is not a folder: {root}")
        self._stopping = False
        observer = Observer()
        handler = _Handler(self)
        for root in self.roots:
            observer.schedule(handler, str(root), recursive=True)
        self._worker = threading.Thread(target=self._run, name="pathweaver-watch-batch", daemon=True)
        self._worker.start()
        observer.start()
        self._observer = observer

    def stop(self, flush: bool = True, timeout: float | None = None) -> None:
        """Stop watching and join the threads (the batch worker up to ``timeout``: a batch being applied then
        finishes on its own); with ``flush``, pending events are delivered first."""
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join()
        with self._cond:
            self._stopping = True
            if not flush:
                self._pending.clear()
            self._cond.notify_all()
        if self._worker is not None:
            self._worker.join(timeout)
            self._worker = None

    def __enter__(self) -> FolderWatcher:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------ events

    def _skip(self, path: Path) -> bool:
        for root in self.roots:
            if path == root or root in path.parents:
                rel = path.relative_to(root).parts
                if any(part.startswith(".") for part in rel) or (rel and is_temp_name(rel[-1])):
                    return True
                break
        return bool(self.ignore and self.ignore(path))

    def _record(self, path: Path, changed: bool) -> None:
        if self._skip(path):
            return
        if not changed:  # a removed folder takes everything pending below it along
            for p in [p for p in self._pending if path in p.parents]:
                del self._pending[p]
        self._pending.pop(path, None)
        self._pending[path] = changed

    def _on_event(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        src = Path(os.fsdecode(event.src_path))
        with self._cond:
            if kind == "moved":
                self._record(src, False)
                self._record(Path(os.fsdecode(event.dest_path)), True)
            elif kind == "deleted":
                self._record(src, False)
            elif kind == "created" or (kind in ("modified", "closed") and not event.is_directory):
                self._record(src, True)
            else:
                return  # opened, closed_no_write, directory "modified" (a child changed: reported on its own)
            now = time.monotonic()
            if len(self._pending) and not self._first_at:
                self._first_at = now
            self._last_at = now
            self._cond.notify_all()

    def _take_batch(self) -> tuple[set[Path], set[Path]] | None:
        """Wait (holding the condition) until a batch is due; None when stopping with nothing pending."""
        with self._cond:
            while True:
                if self._pending:
                    now = time.monotonic()
                    due = min(self._last_at + self.debounce_seconds, self._first_at + self.max_wait_seconds)
                    if self._stopping or now >= due:
                        changed = {p for p, c in self._pending.items() if c}
                        removed = {p for p, c in self._pending.items() if not c}
                        self._pending.clear()
                        self._first_at = 0.0
                        return changed, removed
                    self._cond.wait(due - now)
                elif self._stopping:
                    return None
                else:
                    self._cond.wait()

    def _run(self) -> None:
        while True:
            batch = self._take_batch()
            if batch is None:
                return
            try:
                self.on_batch(*batch)
            except Exception:
                log.exception(
                    "on_batch failed for %d changed and %d removed paths", len(batch[0]), len(batch[1])
                )
