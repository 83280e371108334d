"""The store's ``meta`` key-value rows: read, set, add to and delete one key (on either backend's connection).

It sits below every other ``store`` module (it imports none), so the machine registry and the writers share it.
"""

from __future__ import annotations

from typing import Any


def meta_value(conn: Any, key: str) -> str | None:
    """The value of ``key`` (read inside ``conn``'s transaction); None when unset."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def meta_int(conn: Any, key: str) -> int:
    """A meta value as an integer, 0 when unset."""
    value = meta_value(conn, key)
    return int(value) if value else 0


def set_meta(conn: Any, key: str, value: str) -> None:
    """Set ``key`` to ``value`` (inside the caller's write transaction)."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value)
    )


def add_meta_int(conn: Any, key: str, delta: int) -> None:
    """Add ``delta`` to the integer value of ``key`` (unset counts as 0), in one statement."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + CAST(excluded.value AS INTEGER)",
        (key, str(delta)),
    )


def delete_meta(conn: Any, key: str) -> None:
    """Remove ``key`` (inside the caller's write transaction)."""
    conn.execute("DELETE FROM meta WHERE key = ?", (key,))
