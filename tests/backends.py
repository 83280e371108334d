"""Settings for a store location that the ``backend`` fixture (conftest.py) gives: a directory or a postgresql://
URL."""

from __future__ import annotations

from pathlib import Path

from pathweaver.config import Settings
from pathweaver.store.schema import MACHINES_VERSION, SCHEMA_FOLDERS_AND_FILE_SPANS, SCHEMA_V1


def store_settings(location: Path | str, settings: Settings | None = None) -> Settings:
    """``settings`` (new ones by default) pointed at the store ``location``."""
    s = settings if settings is not None else Settings()
    if str(location).startswith("postgresql://"):
        s.store_url = str(location)
    else:
        s.store_dir = Path(location)
    return s


def is_pg(location: Path | str) -> bool:
    return str(location).startswith("postgresql://")


def sqlite_before_machines(db_file: Path, version: int = MACHINES_VERSION - 1) -> None:
    """Rewrite a current SQLite store (closed) as the schemas before the machine key wrote it, rows kept, and mark
    it schema ``version``: the old-store migration tests start from it."""
    import sqlean

    old_documents = SCHEMA_V1[1].replace("CREATE TABLE documents", "CREATE TABLE documents_old")
    old_folders = SCHEMA_FOLDERS_AND_FILE_SPANS[0].replace("CREATE TABLE folders", "CREATE TABLE folders_old")
    cols = "id, path, title, content_hash, mtime, size, status, reason, indexed_at, headings, links"
    conn = sqlean.connect(str(db_file), isolation_level=None)
    conn.execute("PRAGMA foreign_keys=OFF")  # dropping documents must not cascade into its chunks
    conn.execute("BEGIN")
    for sql in (
        old_documents, f"INSERT INTO documents_old({cols}) SELECT {cols} FROM documents", "DROP TABLE documents",
        "ALTER TABLE documents_old RENAME TO documents", "CREATE INDEX documents_hash ON documents(content_hash)",
        old_folders, "INSERT INTO folders_old(path, state, changed_at) SELECT path, state, changed_at FROM folders",
        "DROP TABLE folders", "ALTER TABLE folders_old RENAME TO folders", "DROP TABLE machines",
        "UPDATE meta SET key = 'roots' WHERE key LIKE 'roots:%'",
        f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'",
    ):
        conn.execute(sql)
    conn.execute("COMMIT")
    assert conn.execute("PRAGMA foreign_key_check").fetchone() is None
    conn.close()
