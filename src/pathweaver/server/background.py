"""Background indexing and watching for the server: the first index runs on a thread, so tools answer at once.

``IndexManager`` owns the set of indexed folders, the folder watcher and a status record that ``index_status``
reports. Readers never wait on it: the service gives the indexer its own write connection (SQLite WAL). The folders
are recorded in the store (``folders`` table), so what ``add_folder`` and ``remove_folder`` did inside the allowed
folders holds for every process on the store and after a restart.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathweaver.store.servers import ServerLease

if TYPE_CHECKING:
    from pathweaver.ingest.types import IndexReport
    from pathweaver.service import Pathweaver

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, str], None]
STOP_WAIT_S = 2.0  # for all threads together: a stop (Ctrl-C, SIGTERM, end of input) ends the process in seconds


@dataclass
class IndexStatus:
    """What the indexer is doing now and what it did last."""

    state: str = "idle"  # idle | indexing | watching | error
    indexing: bool = False
    done: int = 0
    total: int = 0
    message: str = ""
    last_report: dict[str, Any] | None = None
    last_error: str | None = None
    batches: int = 0  # watcher batches applied
    started_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "indexing": self.indexing,
            "done": self.done,
            "total": self.total,
            "message": self.message,
            "last_report": self.last_report,
            "last_error": self.last_error,
            "batches": self.batches,
        }


def _report_dict(report: IndexReport) -> dict[str, Any]:
    return report.to_dict() if hasattr(report, "to_dict") else dict(report)


class IndexManager:
    """Index ``folders`` on a background thread, then watch them and apply each change batch."""

    def __init__(self, service: Pathweaver, folders: list[Path], debounce_seconds: float | None = None) -> None:
        self.service = service
        # what the store records at or under these folders (the allowed roots: a folder recorded by a server with
        # other roots stays out of this one's hands, as the tools could not remove it)
        stored = {Path(p): state for p, state in service.folders().items()
                  if any(Path(p) == f or Path(p).is_relative_to(f) for f in folders)}
        self.excluded: set[Path] = {p for p, state in stored.items() if state == "removed"}
        self.folders: list[Path] = []
        for folder in [*folders, *(p for p, state in stored.items() if state != "removed")]:
            if folder not in self.folders and not self.is_excluded(folder):
                self.folders.append(folder)
        self.watched: set[Path] = {f for f in self.folders if stored.get(f, "watched") == "watched"}
        self._recorded = {f for f in self.folders if f in stored}  # in the store's folders table already
        self.debounce_seconds = (
            service.settings.ingest.debounce_seconds if debounce_seconds is None else debounce_seconds
        )
        self.status = IndexStatus()
        self._lock = threading.RLock()  # status and folder sets
        self._watch_lock = threading.Lock()  # swapping the watcher
        self._jobs = 0
        self._watcher: Any = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._warm_wanted = threading.Event()  # a new store version wants its snapshot built (``_warm``)
        self._warmer: threading.Thread | None = None
        self.ready = threading.Event()  # set once the first index has finished (or failed)
        self._lease: ServerLease | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Record this server as live on the store (``store.servers``: the CLI then spares its documents), delete
        the documents of files deleted or edited while no process watched (before any query is served: an edited
        file's text is withheld until re-indexed, first thing on the indexing thread), then on a daemon thread:
        watch the folders, index them, then build the query snapshot."""
        self._lease = ServerLease(self.service.settings.store_dir, [str(f) for f in self.folders])
        outdated: list[str] = []
        try:
            found = self.service.withhold_outdated()
            outdated = found.changed
            if found.gone or found.changed:
                log.info("while the server was stopped %d indexed files were deleted and %d edited",
                         len(found.gone), len(found.changed))
        except Exception as exc:  # recorded for index_status; the background scan removes them too
            log.exception("checking for deleted or edited files failed")
            self.status.last_error = f"checking for deleted or edited files failed: {exc}"
        self._thread = threading.Thread(target=self._initial, args=(outdated,), name="pathweaver-index",
                                        daemon=True)
        self._thread.start()

    def _initial(self, outdated: list[str]) -> None:
        # watch first: a file edited while the first index runs (after the scan has read it) arrives as a batch,
        # which waits for the index's write lock and then applies
        if not self._stopped:
            self._restart_watcher()
        try:
            if outdated and not self._stopped:  # the withheld files first: they were indexed before
                self._begin(f"re-indexing {len(outdated)} files edited while the server was stopped")
                try:
                    report = self.service.apply_changes({Path(p) for p in outdated}, set())
                except Exception as exc:
                    self._end(error=exc)
                    raise
                self._end(report)
            for folder in [f for f in self.folders if f not in self._recorded]:
                self.service.set_folder(folder, "watched" if folder in self.watched else "indexed")
            existing = [f for f in self.folders if f.is_dir()]
            if existing:
                self.index(existing, exact=False)
        except Exception as exc:  # recorded for index_status; the server keeps serving
            log.exception("initial indexing failed")
            self.status.last_error = f"initial indexing failed: {exc}"
        finally:
            self.ready.set()
        self._warm()

    def _warm(self) -> None:
        """Have the query snapshot of the store as it is now built ahead of the next query, with the graph
        structures of the methods queried so far (``Pathweaver.warm``), on a thread of its own, so that a build
        never holds up the watcher's next batch. Requests that come while a build runs make one more."""
        if self._stopped:
            return
        self._warm_wanted.set()
        with self._lock:
            if self._warmer is None:
                self._warmer = threading.Thread(target=self._warm_loop, name="pathweaver-snapshot", daemon=True)
                self._warmer.start()

    def _warm_loop(self) -> None:
        while True:
            self._warm_wanted.wait()  # ``stop`` sets it too, after ``_stopped``
            self._warm_wanted.clear()
            if self._stopped:
                return
            try:
                self.service.warm(self._busy)
            except Exception:  # best effort: a query builds it anyway, or says why
                log.debug("building the snapshot ahead of queries failed", exc_info=True)

    def _busy(self) -> bool:
        """Whether a batch is being applied or waits for its debounce: the warm-up's replays then give way (the
        version they would prepare is about to be replaced, and they would slow the batch down)."""
        watcher = self._watcher
        return self.status.indexing or self._stopped or (watcher is not None and watcher.pending())

    def stop(self, wait_s: float = 30.0) -> None:
        """Stop watching and give the threads ``wait_s`` in all to finish (the server process gives them
        ``STOP_WAIT_S``); a daemon thread still inside a long step is left to the process exit (each file is one
        transaction: an unfinished one is rolled back)."""
        self._stopped = True
        if self._lease is not None:  # no longer serving: the CLI may change these folders' documents again
            self._lease.close()
        deadline = time.monotonic() + wait_s

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        with self._watch_lock:
            old, self._watcher = self._watcher, None
        if old is not None:
            old.stop(flush=False, timeout=left())
        if self._thread is not None:
            self._thread.join(timeout=left())
        self._warm_wanted.set()
        if self._warmer is not None:
            self._warmer.join(timeout=left())

    # -- indexing --------------------------------------------------------------------------------------------
    def _begin(self, message: str) -> None:
        with self._lock:
            self._jobs += 1
            self.status.indexing = True
            self.status.state = "indexing"
            self.status.done = self.status.total = 0
            self.status.message = message

    def _end(self, report: IndexReport | None = None, error: BaseException | None = None) -> None:
        with self._lock:
            self._jobs -= 1
            if report is not None:
                self.status.last_report = _report_dict(report)
                self.status.last_error = None  # a success replaces the failure it reported
            if error is not None:
                self.status.last_error = str(error)
            if self._jobs == 0:
                self.status.indexing = False
                self.status.state = "watching" if self._watcher is not None else "idle"
                self.status.message = ""

    def index(self, paths: list[Path], exact: bool = False, progress: ProgressFn | None = None) -> dict[str, Any]:
        """Index ``paths`` now (on the calling thread), keeping the status current; returns the report."""

        def on_progress(done: int, total: int, message: str) -> None:
            self.status.done, self.status.total, self.status.message = done, total, message
            if progress is not None:
                progress(done, total, message)

        self._begin(f"indexing {', '.join(map(str, paths))}")
        try:
            report = self.service.index(paths, exact=exact, progress=on_progress)
        except BaseException as exc:
            self._end(error=exc)
            raise
        self._end(report)
        return _report_dict(report)

    def _on_batch(self, changed: set[Path], removed: set[Path]) -> None:
        changed = {p for p in changed if not self.is_excluded(p)}
        removed = {p for p in removed if not self.is_excluded(p)}
        if not changed and not removed:
            return
        self._begin(f"applying {len(changed)} changed, {len(removed)} removed")
        try:
            report = self.service.apply_changes(changed, removed)
        except Exception as exc:  # one bad batch must not stop the watcher
            log.exception("watcher batch failed")
            self._end(error=exc)
            return
        self.status.batches += 1
        self._end(report)
        self._warm()

    # -- folders ---------------------------------------------------------------------------------------------
    def is_excluded(self, path: Path) -> bool:
        return any(path == e or path.is_relative_to(e) for e in self.excluded)

    def add_folder(self, folder: Path, watch: bool = True, progress: ProgressFn | None = None) -> dict[str, Any]:
        """Index ``folder`` (keeping other documents) and watch it when ``watch``."""
        with self._lock:
            self.excluded = {e for e in self.excluded if not (e == folder or e.is_relative_to(folder))}
            if folder not in self.folders:
                self.folders.append(folder)
            if watch:
                self.watched.add(folder)
        self.service.set_folder(folder, "watched" if watch or folder in self.watched else "indexed")
        self._record_lease()
        report = self.index([folder], exact=False, progress=progress)
        if watch:
            self._restart_watcher()
        return report

    def remove_folder(self, folder: Path) -> dict[str, Any]:
        """Stop indexing and watching ``folder`` and delete its documents from the store."""
        with self._lock:
            listed = folder in self.folders
            if listed:
                self.folders.remove(folder)
                self.watched.discard(folder)
            inside = any(folder.is_relative_to(f) for f in self.folders)
            if inside:
                self.excluded.add(folder)  # still under another indexed folder: keep it out from now on
            elif not listed:
                raise FileNotFoundError(
                    f"{folder} is not an indexed folder; indexed: {', '.join(map(str, self.folders)) or 'none'}"
                )
        self.service.set_folder(folder, "removed" if inside else None)
        self._record_lease()
        self._begin(f"removing {folder}")
        try:
            report = self.service.apply_changes(set(), {folder})
        except BaseException as exc:
            self._end(error=exc)
            raise
        self._end(report)
        self._restart_watcher()
        return _report_dict(report)

    def reindex(self, path: Path | None = None, progress: ProgressFn | None = None) -> dict[str, Any]:
        """Re-scan ``path`` (or every indexed folder) and bring the store up to date."""
        if path is not None:
            return self.index([path], exact=False, progress=progress)
        folders = [f for f in self.folders if f.is_dir()]
        if not folders:
            raise FileNotFoundError("no folders are indexed; add one with add_folder")
        return self.index(folders, exact=False, progress=progress)

    def _record_lease(self) -> None:
        if self._lease is not None:
            with self._lock:
                folders = [str(f) for f in self.folders]
            self._lease.update(folders)

    def _restart_watcher(self) -> None:
        """Replace the watcher with one over the current watched folders.

        Holds only ``_watch_lock``: stopping a watcher waits for its in-flight batch, which takes ``_lock``.
        """
        from pathweaver.ingest.watcher import FolderWatcher

        with self._watch_lock:
            old, self._watcher = self._watcher, None
            if old is not None:
                old.stop()
            if self._stopped:
                return
            with self._lock:
                roots = sorted(f for f in self.watched if f.is_dir())
            if roots:
                watcher = FolderWatcher(roots, self._on_batch, debounce_seconds=self.debounce_seconds)
                watcher.start()
                self._watcher = watcher
            with self._lock:
                if not self.status.indexing:
                    self.status.state = "watching" if self._watcher is not None else "idle"

    def snapshot(self) -> dict[str, Any]:
        """Status plus the folder lists, for ``index_status``."""
        with self._lock:
            out = self.status.to_dict()
            out["folders"] = [str(f) for f in self.folders]
            out["watched"] = sorted(str(f) for f in self.watched)
            out["excluded"] = sorted(str(f) for f in self.excluded)
            out["ready"] = self.ready.is_set()
            return out
