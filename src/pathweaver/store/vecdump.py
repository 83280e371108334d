"""Every vector of a sqlite-vec ``vec0`` table, read from its chunk storage instead of row by row.

vec0 (sqlite-vec 0.1) keeps vectors in chunks of ``chunk_size`` slots: ``<table>_chunks`` holds each chunk's slot
count, a validity bitmap and the slots' row ids (an int64 array), and ``<table>_vector_chunks00`` the slots'
vectors as one float32 blob. Reading those blobs instead of scanning the virtual table (one row, one blob, one
Python tuple at a time) is what makes a cold snapshot read of the chunk vectors cheap.

The layout is sqlite-vec's own, not a public API, so it is used only for the versions it was checked on, and
each read is verified: the row count against ``<table>_rowids``, and a few rows against the virtual table itself.
Any mismatch or error returns None, and the caller scans the table as before.
"""

from __future__ import annotations

import numpy as np
import sqlean

from pathweaver.store.db import Connection

KNOWN_VERSIONS = ("v0.1.",)  # sqlite-vec versions whose chunk layout this reads
SPOT_CHECKS = 4  # rows compared with the virtual table's own answer on every read


def vec0_rows(conn: Connection, table: str, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(row ids, vectors (n, dim) float32) of every row of the vec0 ``table``, or None when its storage is not
    the known layout (the caller then scans the table)."""
    try:
        version = str(conn.execute("SELECT vec_version()").fetchone()[0])
        if not version.startswith(KNOWN_VERSIONS):
            return None
        chunks = conn.execute(
            f"SELECT c.size, c.validity, c.rowids, v.vectors FROM {table}_chunks c "
            f"JOIN {table}_vector_chunks00 v ON v.rowid = c.chunk_id ORDER BY c.chunk_id"
        ).fetchall()
        expected = int(conn.execute(f"SELECT count(*) FROM {table}_rowids").fetchone()[0])
    except sqlean.Error:
        return None
    id_parts, vec_parts = [], []
    for size, validity, rowids, vectors in chunks:
        if len(rowids) != 8 * size or len(vectors) != 4 * dim * size or 8 * len(validity) < size:
            return None
        valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[:size].astype(bool)
        id_parts.append(np.frombuffer(rowids, dtype=np.int64)[valid])
        vec_parts.append(np.frombuffer(vectors, dtype=np.float32).reshape(size, dim)[valid])
    ids = np.concatenate(id_parts) if id_parts else np.zeros(0, dtype=np.int64)
    vecs = np.concatenate(vec_parts) if vec_parts else np.zeros((0, dim), dtype=np.float32)
    if ids.size != expected or not _spot_checked(conn, table, ids, vecs):
        return None
    return ids, vecs


def _spot_checked(conn: Connection, table: str, ids: np.ndarray, vecs: np.ndarray) -> bool:
    """Whether a few evenly spread rows equal what the virtual table returns for their row ids."""
    if not ids.size:
        return True
    for i in np.unique(np.linspace(0, ids.size - 1, SPOT_CHECKS).astype(np.int64)).tolist():
        try:
            row = conn.execute(f"SELECT embedding FROM {table} WHERE rowid = ?", (int(ids[i]),)).fetchone()
        except sqlean.Error:
            return False
        if row is None or bytes(row[0]) != vecs[i].tobytes():
            return False
    return True
