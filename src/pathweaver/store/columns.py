"""Bulk column reads of whole tables (numpy arrays and shared strings), the chunk rows with their citations, and
id-to-position lookups, and the links between documents: what a snapshot is built from."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass

import numpy as np
import sqlean

from pathweaver.store.db import Connection, StoreError
from pathweaver.store.machine import this_machine
from pathweaver.store.machines import doc_path
from pathweaver.store.pg.dialect import is_pg
from pathweaver.store.text_keys import KEY_SQL, add_key_function


def _positions(ids: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``wanted`` in the ascending ``ids``, and a mask of the ``wanted`` that are present."""
    if not len(ids):
        return np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool)
    pos = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
    return pos, ids[pos] == wanted


def _index_of(ids: np.ndarray, wanted: np.ndarray, what: str) -> np.ndarray:
    """Positions of ``wanted`` in the ascending ``ids``; every one must be present."""
    pos, found = _positions(ids, wanted)
    if not found.all():
        missing = wanted[~found][:5].tolist()
        raise StoreError(f"{what} refer to ids that are not in the store: {missing}; re-index the affected folder")
    return pos


# Bulk reads: SQLite joins each column of every row into one string (group_concat, in C), which numpy parses or
# one ``split`` cuts, because a Python tuple per row costs several times as much on tables of 10^5 rows. The
# aggregates of one query see the rows in one order, so the columns stay aligned; the rows are then sorted by
# ``order`` in numpy. Any surprise (a NULL, a separator inside a text) falls back to one
# tuple per row.
TEXT_SEP = "\x1f"  # ASCII unit separator between text values


@dataclass
class _Columns:
    """Columns of every row of a table, sorted by the ``order`` columns: integers as one (n, k) int64 array,
    texts as lists, reals as float64 arrays."""

    ints: np.ndarray
    texts: list[list[str]]
    reals: list[np.ndarray]


def _parsed(text: object, dtype: type) -> np.ndarray:
    """Space-separated numbers parsed by numpy in C; an empty array when ``text`` is not all numbers."""
    if not isinstance(text, str):
        return np.zeros(0, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # older numpy only warns on unparsed data
        try:
            return np.fromstring(text, dtype=dtype, sep=" ")
        except (ValueError, DeprecationWarning):
            return np.zeros(0, dtype=dtype)


def _read_columns(conn: Connection, table: str, ints: list[str], texts: tuple[str, ...] = (),
                  reals: tuple[str, ...] = (), order: int = 0) -> _Columns:
    """``ints`` (not NULL), ``texts`` and ``reals`` of every row of ``table``, sorted by the first ``order``
    integer columns (0 = the order SQLite gave)."""
    # PostgreSQL has no group_concat trick to gain from: psycopg's rows already carry exact values
    cols = None if is_pg(conn) else _joined_columns(conn, table, ints, texts, reals)
    if cols is None:
        cols = _row_columns(conn, table, ints, texts, reals)
    if order:
        keys = cols.ints[:, :order]
        if not (keys.shape[0] < 2 or _ascending(keys)):
            perm = np.lexsort(keys.T[::-1])
            cols = _Columns(cols.ints[perm], [[t[i] for i in perm.tolist()] for t in cols.texts],
                            [r[perm] for r in cols.reals])
    return cols


def _joined_columns(conn: Connection, table: str, ints: list[str], texts: tuple[str, ...],
                    reals: tuple[str, ...]) -> _Columns | None:
    """The columns from one row of SQLite aggregates (each column of every row joined into one string, parsed by
    numpy), or None where that is not exact (a string over SQLite's length limit, a text holding the separator)."""
    k = len(ints)
    row = " || ' ' || ".join(ints)
    aggregates = [f"group_concat({row}, ' ')"]
    aggregates += [f"group_concat({c}, char(31))" for c in texts] + [f"group_concat({c}, ' ')" for c in reals]
    try:
        n, *joined = conn.execute(f"SELECT count(*), {', '.join(aggregates)} FROM {table}").fetchone()
    except sqlean.Error:  # e.g. a string over SQLite's length limit (1 GB): read row by row
        return None
    if not n:
        return _Columns(np.zeros((0, k), dtype=np.int64), [[] for _ in texts], [np.zeros(0) for _ in reals])
    int_values = _parsed(joined[0], np.int64)
    text_values = [v.split(TEXT_SEP) if isinstance(v, str) else [] for v in joined[1 : 1 + len(texts)]]
    real_values = [_parsed(v, np.float64) for v in joined[1 + len(texts) :]]
    if int_values.size != n * k or any(len(v) != n for v in text_values) or any(v.size != n for v in real_values):
        return None
    return _Columns(int_values.reshape(n, k), text_values, real_values)


def _row_columns(conn: Connection, table: str, ints: list[str], texts: tuple[str, ...],
                 reals: tuple[str, ...]) -> _Columns:
    """The columns read row by row."""
    k = len(ints)
    rows = conn.execute(f"SELECT {', '.join([*ints, *texts, *reals])} FROM {table}").fetchall()
    return _Columns(np.array([r[:k] for r in rows], dtype=np.int64).reshape(len(rows), k),
                    [[r[k + i] for r in rows] for i in range(len(texts))],
                    [np.array([r[k + len(texts) + i] for r in rows], dtype=np.float64) for i in range(len(reals))])


def _shared(texts: list[str]) -> list[str]:
    """``texts`` with one string object per distinct value (relation labels, entity kinds: a few thousand values
    over 10^5 rows)."""
    seen: dict[str, str] = {}
    return [seen.setdefault(t, t) for t in texts]


def _ascending(keys: np.ndarray) -> bool:
    """Whether the rows of ``keys`` (n, m) are in strictly ascending lexicographic order."""
    if keys.shape[1] == 1:
        return bool((np.diff(keys[:, 0]) > 0).all())
    return bool((np.lexsort(keys.T[::-1]) == np.arange(keys.shape[0])).all())


# A chunk's citation: its character span in the decoded file and its locator; the span is -1, -1 where the file has
# none (PDF, DOCX: the locator names the page or paragraph), and the parsed-text span for chunks indexed before
# file spans were recorded.
FILE_SPAN = ("CASE WHEN c.file_start IS NOT NULL THEN c.file_start WHEN c.locator != '' THEN -1 ELSE c.start END, "
             "CASE WHEN c.file_end IS NOT NULL THEN c.file_end WHEN c.locator != '' THEN -1 ELSE c.end END, c.locator")


def cited_doc(machine_id: str) -> str:
    """SQL for the file a chunk cites, as machine ``machine_id`` reads it (``machines.doc_path``): the embedded note
    its text was shown from (``chunks.cite_doc``), else its own document."""
    return doc_path(machine_id, "coalesce(c.cite_doc, d.path)")


@dataclass
class _Chunks:
    """Every chunk row with its document's path and title, by id (no texts: a snapshot reads them when shown)."""

    ids: np.ndarray
    docs: list[str]
    titles: list[str]
    spans: np.ndarray  # (n, 2) character span in the file (``FILE_SPAN``)
    locators: list[str]
    cites: list[str]  # the file each chunk cites: an embedded note's (``ingest.embeds``), else its document's
    keys: np.ndarray  # (n,) int64 ``text_keys`` of the texts; empty where not read


def _chunk_rows(conn: Connection, keys: bool) -> _Chunks:
    """Every chunk row, with ``keys`` each text's key (``text_keys``, SQLite only). A document's path, title and
    cited file are one string object per distinct value, not one per chunk."""
    me = this_machine().id
    if keys:
        add_key_function(conn)
    key = KEY_SQL.format(column="c.text") if keys else "0"
    rows = conn.execute(
        f"SELECT c.id, {key}, {doc_path(me)}, d.title, {FILE_SPAN}, {cited_doc(me)} FROM chunks c "
        "JOIN documents d ON d.id = c.doc_id ORDER BY c.id"
    ).fetchall()
    return _Chunks(np.array([r[0] for r in rows], dtype=np.int64),
                   _shared([r[2] for r in rows]), _shared([r[3] for r in rows]),
                   np.array([[r[4], r[5]] for r in rows], dtype=np.int64).reshape(len(rows), 2),
                   _shared([r[6] for r in rows]), _shared([r[7] for r in rows]),
                   np.array([r[1] for r in rows] if keys else [], dtype=np.int64))


def _link_key(path: str) -> str:
    """The key a note's file and a link's target meet on: the file name without its suffix, case-folded (the
    parser keeps a link's target so: ``[[Note]]``, ``[text](Note.md)``)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return (name.rsplit(".", 1)[0] if "." in name else name).strip().casefold()


def _document_links(conn: Connection) -> dict[str, tuple[str, ...]]:
    """{document path: the paths of the indexed documents it links to, sorted}, each target resolved as Obsidian
    resolves a link name: the file of that name, case-insensitively, the shortest path first; a link to itself or
    to nothing indexed is left out, and so is a document that links to nothing."""
    rows = conn.execute(f"SELECT {doc_path(this_machine().id)} AS p, d.links FROM documents d "
                        "WHERE d.status = 'indexed' ORDER BY p").fetchall()
    files: dict[str, str] = {}
    for path, _ in sorted(rows, key=lambda r: (len(r[0]), r[0])):
        files.setdefault(_link_key(path), path)
    out: dict[str, tuple[str, ...]] = {}
    for path, links in rows:
        targets = {files.get(_link_key(t)) for t in json.loads(links or "[]") if isinstance(t, str) and t.strip()}
        targets.discard(None)
        targets.discard(path)
        if targets:
            out[path] = tuple(sorted(t for t in targets if t is not None))
    return out
