"""``StoreAccess``: the settings, the connections (one main connection, one reader per thread: WAL lets readers run
while the indexer writes), the shared embedder, and the store's plain reads (counts, the graph snapshot, documents,
entities)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Self

from pathweaver.config import ConfigError, Settings
from pathweaver.models.embedder import Embedder, get_embedder
from pathweaver.numeric import parallel
from pathweaver.store.backend import open_database
from pathweaver.store.db import Database, StoreError
from pathweaver.store.reads import NEIGHBOR_HOPS, NEIGHBOR_LIMIT, StoreReader
from pathweaver.store.snapshot import GraphSnapshot


class StoreAccess:
    """A store's connections and reads: the base of the facade (``service.Pathweaver``)."""

    def __init__(self, settings: Settings, readonly: bool = False) -> None:
        self.settings = settings
        self.readonly = readonly
        parallel.set_threads(settings.models.query_threads)  # one pool per process: the last store opened sets it
        if readonly and not settings.store_url and not settings.db_path.exists():
            raise StoreError(
                f"no store at {settings.store_dir}; run `pathweaver --store {settings.store_dir} index PATH` first"
            )
        # Open (and migrate) once up front so a bad store fails here, not inside a worker thread.
        self._main_db = self.open_db(readonly)
        self._local = threading.local()
        self._dbs: list[Database] = [self._main_db]
        self._dbs_lock = threading.Lock()

    # -- connections -----------------------------------------------------------------------------------------
    def open_db(self, readonly: bool = False) -> Database:
        """A new connection to the store: the SQLite file in ``store_dir``, or the PostgreSQL store's URL."""
        return open_database(self.settings.store_url or self.settings.store_dir, readonly=readonly)

    @property
    def reader(self) -> StoreReader:
        """This thread's reader (its own connection; WAL readers never block the writer)."""
        reader = getattr(self._local, "reader", None)
        if reader is None:
            if threading.current_thread() is threading.main_thread():
                db = self._main_db
            else:
                db = self.open_db(self.readonly)
                with self._dbs_lock:
                    self._dbs.append(db)
            reader = StoreReader(db, ef_search=self.settings.hnsw_ef_search)
            self._local.reader = reader
        return reader

    @property
    def embedder(self) -> Embedder:
        return get_embedder(self.settings.models.embedding_model, self.settings.models.device)

    def close(self) -> None:
        with self._dbs_lock:
            for db in self._dbs:
                with contextlib.suppress(Exception):  # closing is best effort
                    db.close()
            self._dbs.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads -----------------------------------------------------------------------------------------------
    def folders(self) -> dict[str, str]:
        """The folders recorded in the store and their states."""
        from pathweaver.store.reads import folder_states

        return folder_states(self.reader.db.conn)

    def stats(self) -> dict[str, Any]:
        return self.reader.stats()

    def snapshot(self) -> GraphSnapshot:
        """The cached graph snapshot; rebuilt only when the store version moved (one cheap read per call).

        The cache lives in ``store.cache`` and is shared by every reader of this store file."""
        return self.reader.snapshot()

    def _check_embedding(self) -> None:
        stored = self.reader.db.get_meta("embedding_model")
        if stored is not None and stored != self.settings.models.embedding_model:
            raise StoreError(
                f"store {self.settings.store_dir} was built with embedding model {stored!r}, but "
                f"{self.settings.models.embedding_model!r} is configured; set models.embedding_model back, or "
                "rebuild the store with another --store"
            )

    def documents(self) -> list[dict[str, Any]]:
        return self.reader.documents()

    def document_chunks(self, path: str) -> list[dict[str, Any]]:
        return self.reader.document_chunks(path)

    def entity(self, name: str) -> dict[str, Any] | None:
        return self.reader.entity(name)

    def neighbors(self, name: str, hops: int = NEIGHBOR_HOPS, limit: int = NEIGHBOR_LIMIT) -> dict[str, Any]:
        if hops < 1 or limit < 1:
            raise ConfigError("hops and limit must be at least 1")
        return self.reader.neighbors(name, hops, limit)

