"""Vector rows of vec0 tables and composed graph vectors read into arrays, reusing a previous snapshot's rows that
are still valid, so a rebuild after a small change reads or makes only the new rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pathweaver.store.columns import _positions, _read_columns
from pathweaver.store.db import Connection
from pathweaver.store.graphvecs import phrase_vectors, recipe_of
from pathweaver.store.pg.dialect import is_pg
from pathweaver.store.snapshot import GraphSnapshot
from pathweaver.store.vecdump import vec0_rows

MAX_POINT_LOOKUPS = 256  # missing vector rows fetched one by one (vec0 answers ``rowid = ?`` in ~1 ms)


def _reusable(
    old_ids: np.ndarray, old_vecs: np.ndarray, new_ids: np.ndarray, same: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """For each new id: its row in ``old_vecs`` when that row can be reused, else -1. A row is reused when the id is
    in the old snapshot, ``same(new positions, old positions)`` says the row's content (name, text, triple) is
    unchanged, and the old row was loaded (not all zeros)."""
    pos, found = _positions(old_ids, new_ids)
    idx = np.flatnonzero(found)
    if idx.size:
        # a row never written is all zeros; a real embedding has no four exact zeros up front (and a false "never
        # written" only costs a re-read)
        ok = same(idx, pos[idx]) & (old_vecs[pos[idx], :4] != 0).any(axis=1)
        found[idx[~ok]] = False
    return np.where(found, pos, -1)


def _same(new_values: list[str], old_values: list[str]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``same`` for ``_reusable``: equal strings at the new and old positions."""
    new_arr, old_arr = np.asarray(new_values, dtype=object), np.asarray(old_values, dtype=object)

    def check(new: np.ndarray, old: np.ndarray) -> np.ndarray:
        return np.asarray(new_arr[new] == old_arr[old], dtype=bool)

    return check


def _reuse_rows(old_ids: np.ndarray, old_vecs: np.ndarray | None, new_ids: np.ndarray,
                same: Callable[[np.ndarray, np.ndarray], np.ndarray], dim: int
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """``_reusable`` rows of a previous snapshot's table, as ``_vectors``' ``reuse``; None when it has none."""
    if old_vecs is None or old_vecs.ndim != 2 or old_vecs.shape[1] != dim or not old_vecs.shape[0]:
        return None
    return _reusable(old_ids, old_vecs, new_ids, same), old_vecs


def _with_reuse(n: int, dim: int, reuse: tuple[np.ndarray, np.ndarray] | None,
                make: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``n`` rows: those ``reuse`` (row in the old table or -1, old table) keeps, the others from ``make(positions)``.
    After a small change only a new document's rows are made."""
    if reuse is None:
        return make(np.arange(n)) if n else np.zeros((0, dim), dtype=np.float32)
    pos, old = reuse
    if pos.size == old.shape[0] and (pos == np.arange(pos.size)).all():
        return old  # nothing moved: share the array (snapshots never write to their vectors)
    out = _take_rows(old, pos)
    missing = np.flatnonzero(pos < 0)
    if missing.size:
        out[missing] = make(missing)
    return out


MAX_RUNS = 4096  # above this many runs a fancy-index take is as quick as slice copies


def _take_rows(old: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``old[pos]``, with zero rows where ``pos`` is -1, copied slice by slice over the runs where ``pos`` counts
    up by one. After a small change nearly every row keeps its order, so this is a few memory copies instead of
    a row-by-row ``np.take``."""
    n = pos.shape[0]
    if n == 0:
        return np.zeros((0, old.shape[1]), dtype=old.dtype)
    follows = ((pos[1:] == pos[:-1] + 1) & (pos[:-1] >= 0)) | ((pos[1:] < 0) & (pos[:-1] < 0))
    starts = np.concatenate(([0], np.flatnonzero(~follows) + 1)).tolist()
    if len(starts) > MAX_RUNS:
        out = np.take(old, np.maximum(pos, 0), axis=0)
        out[pos < 0] = 0.0
        return out
    out = np.empty((n, old.shape[1]), dtype=old.dtype)
    for a, b in zip(starts, [*starts[1:], n], strict=True):
        first = int(pos[a])
        if first < 0:
            out[a:b] = 0.0
        else:
            out[a:b] = old[first : first + b - a]
    return out


def _vectors(
    conn: Connection,
    table: str,
    ids: np.ndarray,
    dim: int,
    reuse: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Rows of a vec0 table in the order of the ascending ``ids`` (zeros where a row is missing).

    ``reuse`` = (row in ``old_vecs`` or -1 per id, ``old_vecs``): rows of the previous snapshot that are still
    valid (see ``_reusable``); only the others are read, one by one, by a rowid range, or by a full scan,
    whichever reads least: after one changed file only a few hundred rows are new."""
    out = np.zeros((len(ids), dim), dtype=np.float32)
    if not len(ids) or not dim:
        return out
    if is_pg(conn):  # pgvector rows: every one, read as text (store.pg.reads)
        from pathweaver.store.pg.reads import vectors

        return vectors(conn, ids, dim)
    query, args = f"SELECT rowid, embedding FROM {table}", ()
    if reuse is not None and reuse[1].shape[1:] == (dim,) and reuse[1].shape[0]:
        old_pos, old_vecs = reuse
        have = old_pos >= 0
        if have.all() and old_pos.size == old_vecs.shape[0] and (old_pos == np.arange(old_pos.size)).all():
            return old_vecs  # nothing moved: share the array (snapshots never write to their vectors)
        out = _take_rows(old_vecs, old_pos)
        missing = ids[~have]
        if not missing.size:
            return out
        if missing.size <= MAX_POINT_LOOKUPS:
            rows = [
                row
                for rowid in missing.tolist()
                for row in conn.execute(f"{query} WHERE rowid = ?", (rowid,)).fetchall()
            ]
            _place(out, ids, rows, dim)
            return out
        if int((ids >= missing.min()).sum()) <= 4 * missing.size:  # the new rows sit at the end: read that range
            query, args = f"{query} WHERE rowid >= ?", (int(missing.min()),)
    if not args:  # every row: from the table's chunk storage when it has the known layout
        dumped = vec0_rows(conn, table, dim)
        if dumped is not None:
            rowids, vecs = dumped
            if rowids.shape == ids.shape and np.array_equal(rowids, ids):
                return vecs
            _place_array(out, ids, rowids, vecs)
            return out
    _place(out, ids, conn.execute(query, args).fetchall(), dim)
    return out


@dataclass(frozen=True)
class EntityRows:
    """Every entity's id (ascending), name and vector at one point in time."""

    ids: np.ndarray
    names: list[str]
    vecs: np.ndarray

    @classmethod
    def of(cls, snapshot: GraphSnapshot | None) -> EntityRows | None:
        """A snapshot's entities, when it holds their vectors in memory (it makes none)."""
        vecs = None if snapshot is None else snapshot.loaded("entity_vecs")
        if snapshot is None or vecs is None or vecs.ndim != 2 or vecs.shape[1] == 0:
            return None
        return cls(snapshot.entity_ids, snapshot.entity_names, vecs)


def entity_rows(conn: Connection, dim: int, previous: EntityRows | None = None) -> EntityRows:
    """Every entity with its vector (``store.graphvecs``), read in ``conn``'s transaction. Vectors of ``previous``
    whose entity is still there under the same id and name are reused (as a snapshot rebuild does: ids are never
    reused, and a vector depends only on the name), so after a small change only the new rows are made."""
    cols = _read_columns(conn, "entities", ["id"], ("name",), order=1)
    ids, (names,) = cols.ints[:, 0], cols.texts
    reuse = None if previous is None else _reuse_rows(previous.ids, previous.vecs, ids, _same(names, previous.names), dim)
    return EntityRows(ids, names, _entity_vectors(conn, names, dim, reuse))


def _entity_vectors(conn: Connection, names: list[str], dim: int, reuse: tuple[np.ndarray, np.ndarray] | None
                    ) -> np.ndarray:
    """The vectors of entities ``names`` (``store.graphvecs``), the rows ``reuse`` keeps taken from the old table."""
    recipe = recipe_of(conn)
    return _with_reuse(len(names), dim, reuse,
                       lambda at: phrase_vectors(conn, recipe, [names[i] for i in at.tolist()], dim))


def _place(out: np.ndarray, ids: np.ndarray, rows: list[tuple[int, bytes]], dim: int) -> None:
    """Write vec0 ``rows`` (rowid, float32 blob) into ``out`` at their positions in the ascending ``ids``."""
    if not rows:
        return
    rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    blob = b"".join(r[1] for r in rows)
    if len(blob) != len(rows) * dim * 4:  # some row has another width: place row by row, skipping those
        for rowid, data in rows:
            pos, found = _positions(ids, np.array([rowid], dtype=np.int64))
            if found[0] and len(data) == dim * 4:
                out[pos[0]] = np.frombuffer(data, dtype=np.float32)
        return
    _place_array(out, ids, rowids, np.frombuffer(blob, dtype=np.float32).reshape(len(rows), dim))


def _place_array(out: np.ndarray, ids: np.ndarray, rowids: np.ndarray, vecs: np.ndarray) -> None:
    """Write ``vecs`` (one row per ``rowids``) into ``out`` at their positions in the ascending ``ids``."""
    pos, found = _positions(ids, rowids)
    out[pos[found]] = vecs[found]
