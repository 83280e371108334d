"""Which backend a store location names: a directory (the SQLite file, the default) or a postgresql:// URL."""

from __future__ import annotations

from pathlib import Path

from pathweaver.config import is_postgres_url
from pathweaver.store.db import Database, StoreError

# What the PostgreSQL backend does not do yet (issue 39): said once, wherever a command would need it.
PG_COMMANDS_PENDING = ("the PostgreSQL backend so far opens and checks the database, creates its schema and takes a "
                       "SQLite store with `pathweaver migrate SQLITE_STORE URL`; indexing, retrieval and the other "
                       "commands are not ported to it yet and run on SQLite only: use a store directory for them")


def open_database(location: str | Path, readonly: bool = False) -> Database:
    """The SQLite store in directory ``location``, or the PostgreSQL store at a postgresql:// URL (the same
    interface: ``conn``, ``write()``, ``version()``, meta, ``shared``)."""
    if is_postgres_url(str(location)):
        from pathweaver.store.pg.database import PgDatabase

        return PgDatabase(str(location), readonly=readonly)  # type: ignore[return-value]
    return Database(Path(location), readonly=readonly)


def refuse_postgres(url: str) -> None:
    """Raise the pending-backend error for a configured ``url`` (nothing is opened or written)."""
    if url:
        raise StoreError(f"{PG_COMMANDS_PENDING} (configured: {_redacted(url)})")


def _redacted(url: str) -> str:
    from pathweaver.store.pg.connect import redacted

    return redacted(url)
