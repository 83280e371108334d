"""A chunk text's 64-bit key: what a SQLite snapshot keeps per chunk instead of its text (~1 KB a chunk of a
server's memory), to tell whether a chunk id still holds the text it read. SQLite reuses the id of a deleted last
chunk, so an id alone cannot say that a vector of an older snapshot, or a text read now, is still this chunk's.

The key is the first 8 bytes of the BLAKE2b digest of the text's UTF-8 bytes (as the store holds it), made in the
read's own statement (``KEY_SQL``, a function on that connection) so no text becomes a Python object per row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from pathweaver.store.db import Connection

FUNCTION = "pw_text_key"
KEY_SQL = FUNCTION + "(CAST({column} AS BLOB))"  # a text column's key, once ``add_key_function`` ran


def text_key(data: bytes | str) -> int:
    """The key of a text (str) or of its UTF-8 bytes, as a signed 64-bit integer."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little", signed=True)


def add_key_function(conn: Connection) -> None:
    """Make ``KEY_SQL`` callable on ``conn`` (again: a no-op in effect)."""
    conn.create_function(FUNCTION, 1, text_key, deterministic=True)


def same_keys(new_keys: np.ndarray, old_keys: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``same`` for ``vector_rows._reusable``: equal keys at the new and old positions (no keys: nothing equal)."""

    def check(new: np.ndarray, old: np.ndarray) -> np.ndarray:
        if not len(old_keys):
            return np.zeros(len(new), dtype=bool)
        return np.asarray(new_keys[new] == old_keys[old], dtype=bool)

    return check


def checked(fetch: Callable[[list[int]], dict[int, str]], ids: np.ndarray, keys: np.ndarray
            ) -> Callable[[list[int]], dict[int, str]]:
    """``fetch`` (``{id: text}`` of the store now) keeping only the texts whose key is the one the snapshot read
    for that id (ascending ``ids``, ``keys`` aligned): a chunk replaced since under a reused id reads as deleted."""

    def check(wanted: list[int]) -> dict[int, str]:
        found = fetch(wanted)
        if not found:
            return found
        got = np.fromiter(found, dtype=np.int64, count=len(found))
        pos = np.minimum(np.searchsorted(ids, got), max(len(ids) - 1, 0))
        return {int(i): found[int(i)] for i, p in zip(got.tolist(), pos.tolist(), strict=True)
                if len(ids) and ids[p] == i and text_key(found[int(i)]) == int(keys[p])}

    return check
