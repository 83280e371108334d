"""``Pathweaver``: the one facade the CLI and the MCP server call.

It owns the settings, a write connection for the indexer, one read connection per thread for queries (WAL lets
readers run while the indexer writes), the shared embedder, and the graph snapshot, which is rebuilt only when the
store's version counter moves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathweaver.config import ConfigError, Settings, load_settings
from pathweaver.results import dump
from pathweaver.service.answers import AnswerSide
from pathweaver.store.db import Database, StoreError

if TYPE_CHECKING:
    from pathweaver.ingest.documents import StartupPass
    from pathweaver.ingest.pipeline import Indexer
    from pathweaver.ingest.types import IndexReport

ProgressFn = Callable[[int, int, str], None]


class Pathweaver(AnswerSide):
    """A store plus everything needed to index it and query it: ``StoreAccess`` (connections, reads) <
    ``QuerySide`` (retrieval, search) < ``AnswerSide`` (plans, answers) < this (indexing)."""

    def __init__(self, settings: Settings, readonly: bool = False) -> None:
        super().__init__(settings, readonly)
        self._write_lock = threading.Lock()
        self._write_db: Database | None = None
        self._indexer: Indexer | None = None

    @classmethod
    def open(
        cls,
        store_dir: str | Path | None = None,
        overrides: dict[str, Any] | None = None,
        readonly: bool = False,
    ) -> Pathweaver:
        """Load settings for ``store_dir`` (defaults < pathweaver.toml < env < ``overrides``) and open the store."""
        return cls(load_settings(store_dir, overrides), readonly=readonly)

    # -- indexing --------------------------------------------------------------------------------------------
    def _indexer_instance(self) -> Indexer:
        from pathweaver.ingest.pipeline import Indexer

        if self.readonly:
            raise StoreError("this store was opened read-only; indexing needs write access")
        if self._indexer is None:
            self._write_db = self.open_db()
            with self._dbs_lock:
                self._dbs.append(self._write_db)
            self._indexer = Indexer(self._write_db, self.settings, self.embedder)
        return self._indexer

    def index(self, paths: list[Path], exact: bool = True, progress: ProgressFn | None = None,
              force: bool = False) -> IndexReport:
        """Make the store match ``paths`` (files or folders); see ``Indexer.index_paths`` (``force``: delete a
        running server's documents too)."""
        missing = [str(p) for p in paths if not Path(p).exists()]
        if missing:
            raise ConfigError(f"no such file or folder: {', '.join(missing)}")
        with self._write_lock:
            return self._indexer_instance().index_paths([Path(p) for p in paths], exact=exact, progress=progress,
                                                        force=force)

    def apply_changes(self, changed: set[Path], removed: set[Path]) -> IndexReport:
        """Apply one watcher batch."""
        with self._write_lock:
            return self._indexer_instance().apply_changes(changed, removed)

    def set_folder(self, path: Path, state: str | None) -> None:
        """Record a folder as 'watched', 'indexed' or 'removed' in the store (None forgets it)."""
        with self._write_lock:
            self._indexer_instance().set_folder(path, state)

    def take_over_machine(self, name: str) -> int:
        """This machine takes machine ``name``'s documents (``Indexer.take_over``); returns how many."""
        with self._write_lock:
            return self._indexer_instance().take_over(name)

    def forget_machine(self, name: str) -> int:
        """Delete machine ``name``'s documents (``Indexer.forget``); returns how many."""
        with self._write_lock:
            return self._indexer_instance().forget(name)

    def withhold_outdated(self) -> StartupPass:
        """Delete the documents whose files are gone or changed (``ingest.documents.withhold_outdated``)."""
        from pathweaver.ingest.documents import StartupPass, withhold_outdated

        if self.readonly:
            return StartupPass()
        with self._write_lock:
            return withhold_outdated(self._main_db)

    def refresh(self) -> dict[str, Any]:
        """Recompute what corpus statistics decide (ER entities, relations, synonyms): ``results.RefreshOut``."""
        with self._write_lock:
            return dump(self._indexer_instance().refresh())
