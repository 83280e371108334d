"""Which backend a store location names: a directory (the SQLite file, the default) or a postgresql:// URL."""

from __future__ import annotations

from pathlib import Path

from pathweaver.config import is_postgres_url
from pathweaver.store.db import Database


def open_database(location: str | Path, readonly: bool = False) -> Database:
    """The SQLite store in directory ``location``, or the PostgreSQL store at a postgresql:// URL (the same
    interface: ``conn``, ``write()``, ``version()``, meta, ``shared``)."""
    if is_postgres_url(str(location)):
        from pathweaver.store.pg.database import PgDatabase

        return PgDatabase(str(location), readonly=readonly)  # type: ignore[return-value]
    return Database(Path(location), readonly=readonly)
