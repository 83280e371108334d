"""Connection setup: one SQLite file per store directory, WAL, FTS5 and sqlite-vec.

The stdlib ``sqlite3`` of many Python builds cannot load extensions, so the store uses ``sqlean`` (a drop-in
DB-API module with extension loading). Every write goes through :meth:`Database.write`, one ``BEGIN IMMEDIATE``
transaction that also bumps the store version counter, so readers can tell with one cheap read that the graph
moved.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import sqlean as sqlite3
import sqlite_vec

from pathweaver.errors import UserError
from pathweaver.store import machines
from pathweaver.store.machine import this_machine
from pathweaver.store.meta import meta_value
from pathweaver.store.schema import (
    DROPPED_VECTOR_TABLES,
    MACHINES_VERSION,
    MIGRATIONS,
    SCHEMA_VERSION,
    vector_table_ddl,
)

DB_FILE = "pathweaver.db"
# Page size of new stores (SQLite fixes it with the first table; existing stores keep theirs). A vec0 table keeps
# 1,024 vectors per 1.5 MB blob, which each insert reaches through the blob's chain of pages, so larger pages
# write and read them faster, and a 1.5 KB ``embed_cache`` vector fits in its B-tree page (docs/design-notes.md,
# "Store").
PAGE_SIZE = 16_384
BUSY_TIMEOUT_MS = 30_000
LOCK_RETRIES = 8

log = logging.getLogger(__name__)
Connection = sqlite3.Connection
OperationalError = sqlite3.OperationalError
IntegrityError = sqlite3.IntegrityError


class StoreError(UserError, RuntimeError):
    """The store cannot be used as asked; the message names the fix."""


class EmbeddingMismatchError(StoreError):
    """The store was built with another embedding model or dimension."""


def _is_locked(exc: Exception) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def is_url(path: object) -> bool:
    """Whether a store location is a PostgreSQL URL (``store.pg``) rather than a file or directory."""
    return str(path).startswith(("postgresql://", "postgres://"))


def connect(path: Path, readonly: bool = False) -> Connection:
    """Open ``path`` with WAL, foreign keys, a busy timeout and sqlite-vec loaded; a postgresql:// URL gets a
    connection that speaks the same SQL (``store.pg.dialect``)."""
    if is_url(path):
        from pathweaver.store.pg.database import pg_connect

        return pg_connect(str(path))
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                               check_same_thread=False, isolation_level=None)
    else:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False,
                               isolation_level=None)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if not readonly:
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a no-op once the file has tables
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def sqlite_vec_version() -> str:
    """The version of sqlite-vec as loaded into a fresh in-memory connection; raises when it cannot load."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        return str(conn.execute("SELECT vec_version()").fetchone()[0])
    finally:
        conn.close()


def retry_locked(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``, retrying with jittered back-off while SQLite reports the database locked or busy."""
    for attempt in range(LOCK_RETRIES):
        try:
            return fn(*args, **kwargs)
        except OperationalError as exc:
            if not _is_locked(exc) or attempt == LOCK_RETRIES - 1:
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


class SharedReader:
    """One read-only connection to a store file for rows looked up on demand long after a snapshot was read (its
    word vectors, relation descriptions), shared by every ``Database`` open on that file (``shared_reader``).

    Snapshots are cached per store path (``cache.cache_for``) and may outlive the ``Database`` that read them, so
    the reader is counted by the ``Database``s holding the file, not owned by one: the connection stays open while
    one is held and closes with the last ``release`` (so the last writer to close can checkpoint and remove the
    WAL); a lookup while none is held opens a connection for that block alone."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self._conn: Connection | None = None
        self._holders = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def use(self) -> Iterator[Connection]:
        """The connection, for this thread alone until the block ends."""
        with self._lock:
            if self._holders > 0:
                if self._conn is None:
                    self._conn = connect(self.path, readonly=True)
                yield self._conn
            else:
                with contextlib.closing(connect(self.path, readonly=True)) as conn:
                    yield conn

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    def hold(self) -> None:
        with self._lock:
            self._holders += 1

    def release(self) -> None:
        """One holder less; the last one closes the connection."""
        with self._lock:
            self._holders = max(0, self._holders - 1)
            if self._holders == 0 and self._conn is not None:
                self._conn.close()
                self._conn = None


_readers: dict[Path, SharedReader] = {}
_readers_lock = threading.Lock()


def shared_reader(path: Path | str) -> SharedReader:
    """The one ``SharedReader`` of the store file at ``path`` in this process."""
    key = path if is_url(path) else Path(path).resolve()
    with _readers_lock:
        reader = _readers.get(key)
        if reader is None:
            reader = _readers[key] = SharedReader(key)
        return reader


class StoreHandle:
    """What both backends' databases share: closing (with the shared reader), and the meta reads; ``conn``
    takes the SQLite store's SQL on either backend (``store.pg.dialect``)."""

    conn: Any
    shared: SharedReader
    _closed: bool = True

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.shared.release()
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        value = meta_value(self.conn, key)
        return default if value is None else value

    def version(self) -> int:
        """The store version counter: one cheap read, moves on every committed change."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'store_version'").fetchone()
        return int(row[0]) if row else 0

    readonly: bool = False

    def _begin(self) -> None:
        """Open the write transaction holding the store's write lock (each backend's own way)."""
        raise NotImplementedError

    @staticmethod
    def bump_version(conn: Any) -> int:
        """Move ``store_version`` on by one inside the open write transaction; returns the new version."""
        raise NotImplementedError

    @contextlib.contextmanager
    def write(self, bump_version: bool = True) -> Iterator[Any]:
        """One write transaction; bumps ``store_version`` (unless the write changes nothing a reader sees, as an
        embedding-cache fill) and commits, or rolls back on error."""
        if self.readonly:
            raise StoreError("this store was opened read-only")
        self._begin()
        try:
            yield self.conn
            if bump_version:
                self.bump_version(self.conn)
            self.conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                self.conn.execute("ROLLBACK")
            raise


class Database(StoreHandle):
    """A store file: migrations on open, ``write()`` transactions that bump the version, and plain reads."""

    def __init__(self, store_dir: Path, readonly: bool = False) -> None:
        self.store_dir = Path(store_dir)
        if not readonly:
            self.store_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.store_dir / DB_FILE
        if readonly and not self.path.exists():
            raise StoreError(f"no store at {self.path}; run `pathweaver --store {self.store_dir} index PATH` first")
        self.conn = connect(self.path, readonly=readonly)
        self.readonly = readonly
        self.shared = shared_reader(self.path)  # for snapshots' lookups on demand; released with this
        self.shared.hold()
        self._closed = False
        if not readonly:
            retry_locked(self._migrate)
        else:
            self._check_current()

    # -- transactions ----------------------------------------------------------------------------------------
    def _begin(self) -> None:
        retry_locked(self.conn.execute, "BEGIN IMMEDIATE")

    @staticmethod
    def bump_version(conn: Connection) -> int:
        """Move ``store_version`` on by one inside the open write transaction (``write(bump_version=False)``
        for a write that decides itself whether readers see a change); returns the new version."""
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('store_version', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )
        return int(conn.execute("SELECT value FROM meta WHERE key = 'store_version'").fetchone()[0])

    # -- schema ----------------------------------------------------------------------------------------------
    def _migrate(self) -> None:
        # foreign keys off while tables are made again (migration 12), as SQLite's procedure for it asks; checked
        # before the commit instead
        self.conn.execute("PRAGMA foreign_keys=OFF")
        try:
            self._migrate_tables()
        finally:
            self.conn.execute("PRAGMA foreign_keys=ON")

    def _migrate_tables(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {current}, newer than this pathweaver ({SCHEMA_VERSION}); "
                    "upgrade pathweaver"
                )
            marks = ",".join("?" * len(DROPPED_VECTOR_TABLES))
            shrinking = 0 < current < SCHEMA_VERSION  # later migrations drop what an existing store held
            dropping = current < SCHEMA_VERSION and self.conn.execute(
                f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})", DROPPED_VECTOR_TABLES).fetchone()[0] > 0
            for statements in MIGRATIONS[current:]:
                for sql in statements:
                    if sql.lstrip().upper().startswith("CREATE TABLE IF NOT EXISTS META"):
                        continue
                    self.conn.execute(sql)
            if 0 < current < MACHINES_VERSION:
                machines.claim(self.conn, this_machine(), time.time())
            if current < SCHEMA_VERSION and self.conn.execute("PRAGMA foreign_key_check").fetchone() is not None:
                raise StoreError(f"{self.path}: the migration to schema {SCHEMA_VERSION} would break a foreign key; "
                                 "nothing was changed")
            settings = self.conn.execute("SELECT value FROM meta WHERE key = 'vector_settings'").fetchone()
            if dropping and (settings is None or "passes:" not in settings[0]):
                # the recorded settings name no embed_cache key space to make the vectors from: re-derive them
                self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('refresh_pending', '1')")
            self.conn.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
            self.conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('store_version', '0')")
            self.conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                self.conn.execute("ROLLBACK")
            raise
        if shrinking:
            self.vacuum("the schema migration")

    def _check_current(self) -> None:
        """A read-only open may not migrate: a store of an older schema is named with the command that upgrades it."""
        try:
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except OperationalError:
            return  # no meta table yet: the reads say what is missing
        current = int(row[0]) if row else 0
        if 0 < current < SCHEMA_VERSION:
            self.close()
            raise StoreError(f"{self.path} has schema version {current}, older than this pathweaver's "
                             f"({SCHEMA_VERSION}); open it once with a command that writes "
                             f"(`pathweaver --store {self.store_dir} compact`) to upgrade it")

    def vacuum(self, after: str) -> None:
        """Give free pages back to the file system and pack the B-trees: once right after the migration that
        dropped tables or columns, and after a first index, whose inserts in random key order left pages part
        full (docs/benchmarks.md, "Cold CLI queries"). A writer in another process makes VACUUM fail; the store
        then stays correct at its old size, and ``pathweaver compact`` retries."""
        try:
            self.conn.execute("VACUUM")
        except OperationalError as exc:
            log.warning("VACUUM after %s failed (%s); run `pathweaver compact` later", after, exc)

    def size(self) -> int:
        """The store file's size in bytes."""
        return self.path.stat().st_size

    def compact(self) -> int:
        """VACUUM the store (no other process may hold it open); returns the file's size after, in bytes."""
        retry_locked(self.conn.execute, "VACUUM")
        return self.path.stat().st_size

    def ensure_embedding(self, model_name: str, dim: int) -> None:
        """Record the embedding model on first use; refuse a different one with an error naming the fix."""
        stored_model = self.get_meta("embedding_model")
        stored_dim = self.get_meta("embedding_dim")
        if stored_model is None:
            with self.write() as conn:
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embedding_model', ?)", (model_name,))
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embedding_dim', ?)", (str(dim),))
                for sql in vector_table_ddl(dim):
                    conn.execute(sql)
            return
        if stored_model != model_name or int(stored_dim or 0) != dim:
            raise EmbeddingMismatchError(
                f"store {self.store_dir} was built with embedding model {stored_model!r} (dim {stored_dim}), "
                f"but {model_name!r} (dim {dim}) is configured. Either set models.embedding_model back to "
                f"{stored_model!r}, or rebuild: delete {self.path} (or use another --store) and index again."
            )

    def integrity_ok(self) -> bool:
        row = self.conn.execute("PRAGMA integrity_check").fetchone()
        return bool(row) and row[0] == "ok"
