"""``PgDatabase``: a PostgreSQL store with the lifecycle, meta and transaction API of ``store.db.Database``.

Writers are serialised as SQLite's ``BEGIN IMMEDIATE`` serialises them: every ``write()`` transaction first takes
one transaction-level advisory lock, so the store's read-then-write logic (ids, watermarks, counters) never
interleaves with another process's, and a writer killed mid-transaction leaves nothing behind (PostgreSQL rolls
it back). Each committed version bump also sends ``NOTIFY pathweaver_changes`` with the new version, delivered on
commit, so another process's reader can learn of it without polling.
"""

from __future__ import annotations

import time
from typing import Any

from pathweaver.store import machines
from pathweaver.store.db import EmbeddingMismatchError, StoreError, StoreHandle, shared_reader
from pathweaver.store.machine import this_machine
from pathweaver.store.pg.connect import check_vector, connect, redacted
from pathweaver.store.pg.dialect import WRITE_LOCK, PgConnection
from pathweaver.store.pg.schema import (
    OUR_TABLES,
    PG_MACHINES_VERSION,
    PG_SCHEMA_VERSION,
    SCHEMA,
    TABLES,
    UPGRADES,
    vector_ddl,
)
from pathweaver.store.schema import SCHEMA_VERSION

CHANNEL = "pathweaver_changes"


class StoreUrl(str):
    """A PostgreSQL store's URL where a SQLite store has its file's ``Path`` (``db.path``): a cache key, and what
    messages show (the password is never in it)."""

    def resolve(self) -> StoreUrl:
        return self

    def exists(self) -> bool:
        return True

    is_file = exists


def search_path(raw: Any) -> None:
    """Name our schema first, then the one pgvector's types live in."""
    row = raw.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                      "WHERE e.extname = 'vector'").fetchone()
    path = [SCHEMA] + ([row[0]] if row and row[0] != SCHEMA else [])
    raw.execute("SELECT set_config('search_path', %s, false)", (", ".join(path),))


def pg_connect(url: str) -> PgConnection:
    """A connection to the existing store at ``url`` that speaks the store's SQL (``store.pg.dialect``)."""
    raw = connect(url)
    try:
        search_path(raw)
    except BaseException:
        raw.close()
        raise
    return PgConnection(raw, url)


class PgDatabase(StoreHandle):
    """A PostgreSQL store at ``url``: checks and schema on open, ``write()`` transactions that bump the version."""

    def __init__(self, url: str, readonly: bool = False) -> None:
        self.url = url
        self.path = StoreUrl(redacted(url))  # what messages and stats show where a SQLite store shows its file
        self.store_dir = self.path
        self.readonly = readonly
        raw = connect(url)
        self.conn = PgConnection(raw, url)
        try:
            self._open()
        except BaseException:
            raw.close()
            raise
        self.shared = shared_reader(url)  # for snapshots' lookups on demand; released with this
        self.shared.hold()
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------------------
    def _open(self) -> None:
        """Every check first (schema owner, versions, pgvector), then the schema when the database has none."""
        state = self._schema_state()
        if state is None:
            if self.readonly:
                raise StoreError(f"no pathweaver store in {self.path}; run `pathweaver --store URL index PATH` first")
            check_vector(self.conn.raw)
            self._create()
        elif state < PG_SCHEMA_VERSION:
            self._upgrade()
        self._use_schema()

    def _schema_state(self) -> int | None:
        """The stored schema version, None for a database without our schema; raises for one we must not use."""
        conn = self.conn
        tables = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (SCHEMA,))}
        if not tables:
            return None
        if "meta" not in tables or not set(OUR_TABLES) <= tables:
            raise StoreError(f"{self.path} has a schema {SCHEMA!r} that pathweaver did not make (tables: "
                             f"{', '.join(sorted(tables)[:8])}); use another database or drop that schema")
        row = conn.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'pg_schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > PG_SCHEMA_VERSION:
            raise StoreError(f"{self.path} has pathweaver schema version {version}, newer than this pathweaver's "
                             f"({PG_SCHEMA_VERSION}); upgrade pathweaver")
        if version < PG_SCHEMA_VERSION and (version not in UPGRADES or self.readonly):
            fix = ("open it once with a command that writes (`pathweaver --store URL compact`) to upgrade it"
                   if version in UPGRADES else "index into a new database, or use the pathweaver that made it")
            raise StoreError(f"{self.path} has pathweaver schema version {version}, older than this pathweaver's "
                             f"({PG_SCHEMA_VERSION}); {fix}")
        return version

    def _upgrade(self) -> None:
        """Bring an older schema to this version in one transaction under the write lock; a process that lost the
        race finds it done."""
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            self._use_schema()
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'pg_schema_version'").fetchone()
            version = int(row[0]) if row else 0
            while version < PG_SCHEMA_VERSION:
                for sql in UPGRADES[version]:
                    self.conn.execute(sql)
                version += 1
                if version == PG_MACHINES_VERSION:
                    machines.claim(self.conn, this_machine(), time.time())
            self.conn.execute("UPDATE meta SET value = %s WHERE key = 'pg_schema_version'", (str(version),))
            self.conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    def _create(self) -> None:
        """The schema, its tables and the version rows, in one transaction; a process that lost the race to
        create them finds them made."""
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            if self.conn.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                                 "AND table_name = 'meta'", (SCHEMA,)).fetchone():
                return
            self.conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            self._use_schema()
            for sql in TABLES:
                self.conn.execute(sql)
            self.conn.execute("INSERT INTO meta(key, value) VALUES ('pg_schema_version', %s), ('store_version', '0'), "
                              "('schema_version', %s)", (str(PG_SCHEMA_VERSION), str(SCHEMA_VERSION)))

    def _use_schema(self) -> None:
        search_path(self.conn.raw)

    # -- transactions ----------------------------------------------------------------------------------------
    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")  # BEGIN + the store's advisory write lock (store.pg.dialect)

    @staticmethod
    def bump_version(conn: Any) -> int:
        """Move ``store_version`` on by one inside the open write transaction and notify listeners of it."""
        version = int(conn.execute("UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'store_version' "
                                   "RETURNING value").fetchone()[0])
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(version)))
        return version

    def ensure_embedding(self, model_name: str, dim: int) -> None:
        """Record the embedding model on first use (and make the vector table); refuse a different one."""
        stored_model = self.get_meta("embedding_model")
        stored_dim = self.get_meta("embedding_dim")
        if stored_model is None:
            with self.write() as conn:
                conn.execute("INSERT INTO meta(key, value) VALUES ('embedding_model', %s), ('embedding_dim', %s) "
                             "ON CONFLICT (key) DO NOTHING", (model_name, str(dim)))
                for sql in vector_ddl(dim):
                    conn.execute(sql)
            stored_model, stored_dim = self.get_meta("embedding_model"), self.get_meta("embedding_dim")
        if stored_model != model_name or int(stored_dim or 0) != dim:
            raise EmbeddingMismatchError(
                f"store {self.path} was built with embedding model {stored_model!r} (dim {stored_dim}), but "
                f"{model_name!r} (dim {dim}) is configured. Set models.embedding_model back to {stored_model!r}, "
                "or index into another database.")

    def vacuum(self, after: str) -> None:
        """PostgreSQL's autovacuum gives space back; nothing to do after a first index."""

    def size(self) -> int:
        """The database's size in bytes (``pg_database_size``: our schema and anything else in it)."""
        return int(self.conn.raw.execute("SELECT pg_database_size(current_database())").fetchone()[0])

    def compact(self) -> int:
        """VACUUM (FULL is not needed: autovacuum reuses the space); returns the database's size in bytes."""
        self.conn.raw.execute("VACUUM ANALYZE")
        return self.size()

    def pgvector_version(self) -> str:
        """The version of the pgvector extension this database has."""
        row = self.conn.raw.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        return str(row[0]) if row else ""

    def integrity_ok(self) -> bool:
        """PostgreSQL checks its own pages; here: every chunk has its postings length row (a cheap invariant)."""
        row = self.conn.execute("SELECT count(*) FROM chunks c LEFT JOIN chunk_lengths l ON l.chunk_id = c.id "
                                "WHERE l.chunk_id IS NULL").fetchone()
        return int(row[0]) == 0
