"""Read side of the store: the graph snapshot, BM25 over chunks, stats, and cards for documents and entities.

Every multi-statement read runs in one read transaction, so it sees one committed version even while the indexer
writes (WAL). The snapshot is shared per store file and rebuilt only when ``meta.store_version`` moves.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import sqlean

from pathweaver.config import ConfigError
from pathweaver.store.bm25 import Bm25Index, query_terms, read_index
from pathweaver.store.cache import cache_for
from pathweaver.store.composed import ComposedSearch, composed_search
from pathweaver.store.db import Connection, Database, StoreError, connect
from pathweaver.store.graphvecs import phrase_vectors, recipe_of, relation_vectors
from pathweaver.store.schema import DESCRIPTION, SOURCE_SENTENCE
from pathweaver.store.snapshot import GraphSnapshot, Lazy, LazyRows, StoredTexts, file_span_json
from pathweaver.store.vecdump import vec0_rows
from pathweaver.text import normalize

EXPORT_TABLES = ("documents", "chunks", "entities", "relations", "mentions", "relation_sources", "synonyms")
# Every relation row with its description as read (``schema.DESCRIPTION``: stored, or its first source's sentence).
RELATION_ROWS = (f"(SELECT r.id AS id, r.src_id AS src_id, r.dst_id AS dst_id, r.label AS label, r.kind AS kind, "
                 f"{DESCRIPTION} AS description FROM relations r)")
_FTS_TOKEN_RE = re.compile(r"[^\W_]+", re.UNICODE)
Bm25Row = tuple[int, float, str, str, int, int, str]  # chunk id, score, path, title, start, end, text


def fts_words(text: str) -> list[str]:
    """The distinct lower-cased words of ``text``, in order: the phrases of ``fts_query``."""
    return list(dict.fromkeys(t.lower() for t in _FTS_TOKEN_RE.findall(text or "")))


def fts_query(text: str) -> str:
    """A safe FTS5 MATCH expression: every word quoted, joined by OR ('' when there are no words)."""
    return " OR ".join(f'"{t}"' for t in fts_words(text))


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
    k = len(ints)
    row = " || ' ' || ".join(ints)
    aggregates = [f"group_concat({row}, ' ')"]
    aggregates += [f"group_concat({c}, char(31))" for c in texts] + [f"group_concat({c}, ' ')" for c in reals]
    try:
        n, *joined = conn.execute(f"SELECT count(*), {', '.join(aggregates)} FROM {table}").fetchone()
    except sqlean.Error:  # e.g. a string over SQLite's length limit (1 GB): read row by row
        n, joined = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0], [None] * len(aggregates)
    if not n:
        return _Columns(np.zeros((0, k), dtype=np.int64), [[] for _ in texts], [np.zeros(0) for _ in reals])
    int_values = _parsed(joined[0], np.int64)
    text_values = [v.split(TEXT_SEP) if isinstance(v, str) else [] for v in joined[1 : 1 + len(texts)]]
    real_values = [_parsed(v, np.float64) for v in joined[1 + len(texts) :]]
    if int_values.size != n * k or any(len(v) != n for v in text_values) or any(v.size != n for v in real_values):
        rows = conn.execute(f"SELECT {', '.join([*ints, *texts, *reals])} FROM {table}").fetchall()
        int_values = np.array([r[:k] for r in rows], dtype=np.int64)
        text_values = [[r[k + i] for r in rows] for i in range(len(texts))]
        real_values = [np.array([r[k + len(texts) + i] for r in rows], dtype=np.float64) for i in range(len(reals))]
    cols = _Columns(int_values.reshape(n, k), text_values, real_values)
    if order:
        keys = cols.ints[:, :order]
        if not (keys.shape[0] < 2 or _ascending(keys)):
            perm = np.lexsort(keys.T[::-1])
            cols = _Columns(cols.ints[perm], [[t[i] for i in perm.tolist()] for t in cols.texts],
                            [r[perm] for r in cols.reals])
    return cols


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


@dataclass
class _Chunks:
    """Every chunk row with its document's path and title, by id."""

    ids: np.ndarray
    texts: list[str]
    docs: list[str]
    titles: list[str]
    spans: np.ndarray  # (n, 2) character span in the file (``FILE_SPAN``)
    locators: list[str]


def _chunk_rows(conn: Connection) -> _Chunks:
    rows = conn.execute(
        f"SELECT c.id, c.text, d.path, d.title, {FILE_SPAN} FROM chunks c JOIN documents d ON d.id = c.doc_id "
        "ORDER BY c.id"
    ).fetchall()
    return _Chunks(np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows], [r[2] for r in rows],
                   [r[3] for r in rows], np.array([[r[4], r[5]] for r in rows], dtype=np.int64).reshape(len(rows), 2),
                   [r[6] for r in rows])


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


IN_BATCH = 500  # keys per "IN (...)" query, well under SQLite's bound-parameter limit


def _pairs_in(conn: Connection, sql: str, keys: list[Any]) -> dict[Any, Any]:
    """The (key, value) rows of ``sql`` (whose ``{marks}`` is the "IN" list) for ``keys``, in batches."""
    out: dict[Any, Any] = {}
    for i in range(0, len(keys), IN_BATCH):
        part = keys[i : i + IN_BATCH]
        out.update(conn.execute(sql.format(marks=",".join("?" * len(part))), part).fetchall())
    return out


def gram_df(conn: Connection, grams: list[str]) -> dict[str, int]:
    """Stored document frequencies of ``grams`` (those the store has)."""
    return _pairs_in(conn, "SELECT gram, df FROM gram_df WHERE gram IN ({marks})", grams)


# -- names (extract/names.py) --------------------------------------------------------------------------------
NAME_TIES = ("(SELECT DISTINCT c.id AS chunk_id, e.id AS entity_id FROM name_rows n JOIN entities e ON e.name = n.name "
             "JOIN chunks c ON c.doc_id = n.doc_id)")


def vocabulary(conn: Connection, rank: Mapping[str, int]) -> dict[str, str]:
    """Every document name (the ``name_rows`` view: titles, aliases, headings no other document shares, link
    texts whose target is some document's name) with its strongest kind (lowest ``rank``)."""
    out: dict[str, str] = {}
    for name, kind in conn.execute("SELECT name, kind FROM name_rows ORDER BY name"):
        if name not in out or rank.get(kind, 9) < rank.get(out[name], 9):
            out[name] = kind
    return out


def doc_names_of(conn: Connection, doc_id: int) -> dict[str, str]:
    return dict(conn.execute("SELECT name, kind FROM doc_names WHERE doc_id = ?", (doc_id,)).fetchall())


def link_names_to(conn: Connection, targets: Iterable[str]) -> set[str]:
    """The link texts (``link_names``) any document writes for one of ``targets``."""
    return set(_pairs_in(conn, "SELECT name, target FROM link_names WHERE target IN ({marks})", sorted(set(targets))))


def fts_chunk_ids(conn: Connection, query: str) -> set[int]:
    """Chunk ids whose FTS row matches ``query`` (an FTS5 expression)."""
    return {int(r[0]) for r in conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (query,))}


def name_mention_chunks(conn: Connection, names: Iterable[str]) -> set[int]:
    """Chunks holding a name mention of any of the entities ``names``."""
    out: set[int] = set()
    for name in names:
        out.update(int(r[0]) for r in conn.execute(
            "SELECT m.chunk_id FROM name_mentions m JOIN entities e ON e.id = m.entity_id WHERE e.name = ?", (name,)))
    return out


def chunk_texts(conn: Connection, chunk_ids: Iterable[int] | None = None) -> dict[int, str]:
    """{chunk id: text} of ``chunk_ids`` (None: every chunk)."""
    if chunk_ids is None:
        return {int(i): t for i, t in conn.execute("SELECT id, text FROM chunks")}
    return _pairs_in(conn, "SELECT id, text FROM chunks WHERE id IN ({marks})", sorted(set(chunk_ids)))


def entity_ids_of(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """{name: entity id} of those ``names`` the store has."""
    return _pairs_in(conn, "SELECT name, id FROM entities WHERE name IN ({marks})", sorted(set(names)))


def folder_states(conn: Connection) -> dict[str, str]:
    """Every recorded folder and its state ('watched', 'indexed' or 'removed')."""
    return dict(conn.execute("SELECT path, state FROM folders ORDER BY path").fetchall())


def indexed_paths(conn: Connection) -> list[tuple[int, str]]:
    """(id, path) of every indexed document."""
    return conn.execute("SELECT id, path FROM documents WHERE status = 'indexed'").fetchall()


class StoreReader:
    """Queries over one ``Database`` connection (use one reader per thread)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.cache = cache_for(str(db.path.resolve()))
        self.passage_cache = cache_for(str(db.path.resolve()) + "#passages")  # ``passages()`` views

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        """One read transaction (a consistent view) unless the connection is already inside one; ``self.db``'s own
        reads inside it (``version()``) see the same view, being on the same connection."""
        conn = self.db.conn
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def _dim(self) -> int:
        return int(self.db.get_meta("embedding_dim", "0") or 0)

    def _has_vectors(self, conn: Connection) -> bool:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vec'").fetchone() is not None

    # -- snapshot --------------------------------------------------------------------------------------------
    def snapshot(self) -> GraphSnapshot:
        """The graph at the current version (shared and cached; one cheap read when nothing changed)."""
        return self.cache.get(self.db.version(), self._build_snapshot)

    def _build_snapshot(self, previous: GraphSnapshot | None = None) -> GraphSnapshot:
        """Read the graph; vectors of ``previous`` whose entity, chunk or triple is unchanged are reused."""
        with self._read() as conn:
            version = self.db.version()
            dim = self._dim()
            ents = _read_columns(conn, "entities", ["id"], ("name", "kind"), order=1)
            entity_ids, (names, kinds) = ents.ints[:, 0], ents.texts
            kinds = _shared(kinds)
            chunks = _chunk_rows(conn)
            rels = _read_columns(conn, "relations", ["id", "src_id", "dst_id"], ("label",), order=1)
            rel_ids, r_arr, labels = rels.ints[:, 0], rels.ints[:, 1:], _shared(rels.texts[0])
            syns = _read_columns(conn, "synonyms", ["a_id", "b_id"], reals=("cos",), order=2)
            y_arr, syn_cos = syns.ints, syns.reals[0]
            m_arr = _read_columns(conn, "mentions", ["chunk_id", "entity_id", "count"]).ints
            nm_arr = _read_columns(conn, "name_mentions", ["chunk_id", "entity_id", "count"]).ints
            tie_arr = _read_columns(conn, NAME_TIES, ["chunk_id", "entity_id"]).ints
            s_arr = _read_columns(conn, "relation_sources", ["relation_id", "chunk_id"]).ints
            chunk_ids, texts = chunks.ids, chunks.texts
            has_vec = self._has_vectors(conn)
            rel_src = _index_of(entity_ids, r_arr[:, 0], "relations")
            rel_dst = _index_of(entity_ids, r_arr[:, 1], "relations")
            chunk_reuse = None if previous is None else _reuse_rows(
                previous.chunk_ids, previous.chunk_vecs, chunk_ids, _same(texts, previous.chunk_texts), dim)
            if has_vec:
                chunk_vecs = _vectors(conn, "chunk_vec", chunk_ids, dim, chunk_reuse)
                entity_vecs, rel_vecs = self._graph_vectors(previous, dim, entity_ids, names, rel_ids, rel_src, rel_dst,
                                                            labels)
                composed = self._composed(dim, entity_ids, names, rel_ids, rel_src, rel_dst, labels)
            else:
                chunk_vecs = np.zeros((len(texts), 0), dtype=np.float32)
                entity_vecs, rel_vecs = np.zeros((len(names), 0), np.float32), np.zeros((len(labels), 0), np.float32)
                composed = None
            chunk_vecs.flags.writeable = False  # the next snapshot may share these arrays
        n_e, n_p, n_r = len(names), len(texts), len(labels)
        m_rows = _index_of(chunk_ids, m_arr[:, 0], "mentions")
        m_cols = _index_of(entity_ids, m_arr[:, 1], "mentions")
        name_mentions = sp.csr_matrix((nm_arr[:, 2].astype(np.float32), (
            _index_of(chunk_ids, nm_arr[:, 0], "name mentions"), _index_of(entity_ids, nm_arr[:, 1], "name mentions"))),
            shape=(n_p, n_e))
        ties = sp.csr_matrix((np.ones(len(tie_arr), dtype=np.float32), (
            _index_of(chunk_ids, tie_arr[:, 0], "name ties"), _index_of(entity_ids, tie_arr[:, 1], "name ties"))),
            shape=(n_p, n_e))
        mentions = sp.csr_matrix((m_arr[:, 2].astype(np.float32), (m_rows, m_cols)), shape=(n_p, n_e))
        s_rows = _index_of(rel_ids, s_arr[:, 0], "relation sources")
        s_cols = _index_of(chunk_ids, s_arr[:, 1], "relation sources")
        return GraphSnapshot(
            version=version,
            entity_names=names,
            entity_ids=entity_ids,
            chunk_ids=chunk_ids,
            chunk_texts=texts,
            chunk_docs=chunks.docs,
            chunk_titles=chunks.titles,
            chunk_spans=chunks.spans, chunk_locators=chunks.locators,
            rel_ids=rel_ids,
            rel_src=rel_src.astype(np.int32),
            rel_dst=rel_dst.astype(np.int32),
            rel_labels=labels,
            rel_descriptions=StoredTexts(rel_ids, self._descriptions()),
            rel_chunks=sp.csr_matrix((np.ones(len(s_arr), dtype=np.float32), (s_rows, s_cols)), shape=(n_r, n_p)),
            syn_a=_index_of(entity_ids, y_arr[:, 0], "synonyms").astype(np.int32),
            syn_b=_index_of(entity_ids, y_arr[:, 1], "synonyms").astype(np.int32),
            syn_cos=syn_cos.astype(np.float32),
            # every method walks the name layer too: a name mention, or a tie to the entity's own document, is a
            # Contains edge (the larger count where the statistical layer has the same pair)
            mentions=mentions.maximum(name_mentions).maximum(ties).tocsr(),
            name_mentions=name_mentions,
            ties=ties,
            statistical_mentions=mentions,
            composed=composed,
            entity_vecs=entity_vecs,
            rel_vecs=rel_vecs,
            chunk_vecs=chunk_vecs.astype(np.float32, copy=False),
            entity_kinds=kinds,
        )

    def _graph_vectors(self, previous: GraphSnapshot | None, dim: int, entity_ids: np.ndarray, names: list[str],
                       rel_ids: np.ndarray, rel_src: np.ndarray, rel_dst: np.ndarray, labels: list[str]
                       ) -> tuple[LazyRows, LazyRows]:
        """Entity and relation vectors, made on first use (``store.graphvecs``, over a connection of their own:
        the snapshot may be read on any thread, long after this transaction). Rows of ``previous`` that are in
        memory and still valid are reused: an entity with the same name, a relation with the same subject name,
        label and object name (its vector depends on nothing else)."""
        entity_reuse = rel_reuse = None
        if previous is not None:
            same_name = _same(names, previous.entity_names)
            entity_reuse = _reuse_rows(previous.entity_ids, previous.loaded("entity_vecs"), entity_ids, same_name, dim)
            old = previous
            same_label = _same(labels, old.rel_labels)

            def same_relation(new: np.ndarray, prev: np.ndarray) -> np.ndarray:
                return (same_label(new, prev) & same_name(rel_src[new], old.rel_src[prev])
                        & same_name(rel_dst[new], old.rel_dst[prev]))

            rel_reuse = _reuse_rows(old.rel_ids, old.loaded("rel_vecs"), rel_ids, same_relation, dim)
        path = self.db.path

        def make_entities() -> np.ndarray:
            with contextlib.closing(connect(path, readonly=True)) as conn:
                return _entity_vectors(conn, names, dim, entity_reuse)

        entity_rows_ = LazyRows(make_entities)

        def make_relations() -> np.ndarray:
            ev = entity_rows_.get()
            with contextlib.closing(connect(path, readonly=True)) as conn:
                recipe = recipe_of(conn)
                return _with_reuse(len(labels), dim, rel_reuse, lambda at: relation_vectors(
                    conn, recipe, ev, names, rel_src[at], rel_dst[at], [labels[i] for i in at.tolist()], dim))

        return entity_rows_, LazyRows(make_relations)

    def _descriptions(self) -> Callable[[list[int]], dict[int, str]]:
        """``StoredTexts``' fetch for relation descriptions, each over a read-only connection of its own, closed
        after it (a description never changes once its relation is written; a connection left open would keep the
        store's WAL from being checkpointed when the store closes)."""
        path = self.db.path

        def fetch(ids: list[int]) -> dict[int, str]:
            conn = connect(path, readonly=True)
            try:
                return _pairs_in(conn, f"SELECT r.id, {DESCRIPTION} FROM relations r WHERE r.id IN ({{marks}})", ids)
            finally:
                conn.close()

        return fetch

    def _composed(self, dim: int, entity_ids: np.ndarray, names: list[str], rel_ids: np.ndarray,
                  rel_src: np.ndarray, rel_dst: np.ndarray, labels: list[str]) -> Lazy:
        """The search over composed entity and relation vectors that makes neither table (``store.composed``),
        on first use, over a connection of its own; the rows it makes later read over the store's shared
        reader."""
        shared = self.db.shared

        def make() -> ComposedSearch | None:
            with contextlib.closing(connect(shared.path, readonly=True)) as conn:
                recipe = recipe_of(conn)
            return composed_search(shared, recipe, dim, entity_ids, names, rel_ids, rel_src, rel_dst, labels)

        return Lazy(make)

    def passages(self) -> GraphSnapshot:
        """The chunks of the store as it is now, as a snapshot with no entities or relations: all that dense and
        hybrid search read. The full snapshot serves when it is current; otherwise this view is built from the
        chunk rows, with the vectors of unchanged chunks taken from the latest full snapshot, so a search right
        after a change does not wait for a rebuild of the whole graph."""
        version = self.db.version()
        full = self.cache.latest()
        if full is not None and full.version == version:
            return full
        return self.passage_cache.get(version, self._build_passages)

    def _build_passages(self, previous: GraphSnapshot | None = None) -> GraphSnapshot:
        full = self.cache.latest()
        source = full if full is not None and (previous is None or full.version > previous.version) else previous
        with self._read() as conn:
            version = self.db.version()
            dim = self._dim()
            chunks = _chunk_rows(conn)
            reuse = None
            if source is not None and source.chunk_vecs.ndim == 2 and source.chunk_vecs.shape[1] == dim:
                same = _same(chunks.texts, source.chunk_texts)
                reuse = (_reusable(source.chunk_ids, source.chunk_vecs, chunks.ids, same), source.chunk_vecs)
            vecs = _vectors(conn, "chunk_vec", chunks.ids, dim, reuse) if self._has_vectors(conn) else \
                np.zeros((len(chunks.ids), 0), dtype=np.float32)
            vecs.flags.writeable = False
        n_p = len(chunks.texts)
        empty = np.zeros(0, dtype=np.int64)
        return GraphSnapshot(
            version=version, entity_names=[], entity_ids=empty, chunk_ids=chunks.ids, chunk_texts=chunks.texts,
            chunk_docs=chunks.docs, chunk_titles=chunks.titles, chunk_spans=chunks.spans,
            chunk_locators=chunks.locators, rel_ids=empty,
            rel_src=empty.astype(np.int32), rel_dst=empty.astype(np.int32), rel_labels=[], rel_descriptions=[],
            rel_chunks=sp.csr_matrix((0, n_p), dtype=np.float32), syn_a=empty.astype(np.int32),
            syn_b=empty.astype(np.int32), syn_cos=np.zeros(0, dtype=np.float32),
            mentions=sp.csr_matrix((n_p, 0), dtype=np.float32), entity_vecs=np.zeros((0, vecs.shape[1]), np.float32),
            rel_vecs=np.zeros((0, vecs.shape[1]), np.float32), chunk_vecs=vecs.astype(np.float32, copy=False),
        )

    # -- search ----------------------------------------------------------------------------------------------
    def bm25_index(self, version: int) -> Bm25Index | None:
        """BM25 postings of the chunks in memory (``store.bm25``) at store ``version``; None when the store is no
        longer at that version, or its FTS rows are not exactly its chunks."""
        with self._read() as conn:
            now = self.db.version()
            return read_index(conn, version) if now == version else None

    def bm25_chunks(self, text: str, k: int, index: Bm25Index | None = None) -> list[tuple[int, float]]:
        """Top ``k`` chunks by FTS5 BM25 as (chunk id, score), higher is better; punctuation-safe. With ``index``
        (read at some store version) the same ranking and scores as FTS5 had at that version, from memory."""
        query = fts_query(text)
        if not query or k < 1:
            return []
        if index is not None:
            terms = query_terms(self.db.conn, fts_words(text))
            if terms is not None:
                return index.top(terms, k)
        rows = self.db.conn.execute(
            "SELECT rowid, bm25(chunks_fts) AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?",
            (query, int(k)),
        ).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows]

    def gram_df(self, grams: Sequence[str]) -> dict[str, int]:
        """Stored document frequencies (chunks containing them) of ``grams``, normalised n-grams as
        ``extract.entities.candidate_grams`` makes them; a gram no chunk has is left out."""
        return gram_df(self.db.conn, list(grams))

    def bm25_rows(self, text: str, k: int, index: Bm25Index | None = None) -> list[Bm25Row]:
        """``bm25_chunks`` with each chunk's document path, title, span and text, as ``(chunk id, score, path,
        title, start, end, locator, text)`` (``FILE_SPAN``), read straight from the tables in one transaction: what a file committed a
        moment ago holds is found without waiting for a snapshot rebuild. ``index`` is used only while the store
        is still at its version."""
        with self._read() as conn:
            now = self.db.version()
            hits = self.bm25_chunks(text, k, index if index is not None and index.version == now else None)
            if not hits:
                return []
            marks = ",".join("?" * len(hits))
            rows = {r[0]: r[1:] for r in conn.execute(
                f"SELECT c.id, d.path, d.title, {FILE_SPAN}, c.text FROM chunks c JOIN documents d "
                f"ON d.id = c.doc_id WHERE c.id IN ({marks})", [cid for cid, _ in hits]).fetchall()}
        return [(cid, score, *rows[cid]) for cid, score in hits if cid in rows]

    def find_entities(self, text: str, k: int = 10) -> list[dict[str, Any]]:
        """Entities whose name matches words of ``text`` (FTS5 BM25), best first."""
        query = fts_query(text)
        if not query or k < 1:
            return []
        rows = self.db.conn.execute(
            "SELECT e.id, e.name, e.kind, -bm25(entities_fts) FROM entities_fts JOIN entities e ON e.id = "
            "entities_fts.rowid WHERE entities_fts MATCH ? ORDER BY bm25(entities_fts) LIMIT ?",
            (query, int(k)),
        ).fetchall()
        return [{"id": r[0], "name": r[1], "kind": r[2], "score": float(r[3])} for r in rows]

    # -- stats -----------------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """The ``stats --json`` contract: counts, version, embedding model and skipped files with reasons."""
        with self._read() as conn:
            def count(sql: str) -> int:
                return int(conn.execute(sql).fetchone()[0])

            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            skipped = [{"path": p, "reason": r} for p, r in conn.execute(
                "SELECT path, reason FROM documents WHERE status = 'skipped' ORDER BY path")]
            return {
                "documents": count("SELECT count(*) FROM documents WHERE status = 'indexed'"),
                "chunks": count("SELECT count(*) FROM chunks"),
                "entities": count("SELECT count(*) FROM entities"),
                "relations": count("SELECT count(*) FROM relations"),
                "synonyms": count("SELECT count(*) FROM synonyms"),
                "mentions": count("SELECT count(*) FROM mentions"),
                "version": int(meta.get("store_version", 0)),
                "embedding_model": meta.get("embedding_model"),
                "embedding_dim": int(meta["embedding_dim"]) if meta.get("embedding_dim") else None,
                "skipped": skipped,
                "store": str(self.db.path),
                "schema_version": int(meta.get("schema_version", 0)),
                "last_refresh": float(meta["last_refresh"]) if meta.get("last_refresh") else None,
                "refresh_pending": meta.get("refresh_pending", "0") == "1",
                "changed_chunks_since_refresh": int(meta.get("changed_chunks", 0)),
            }

    # -- documents and chunks --------------------------------------------------------------------------------
    def documents(self) -> list[dict[str, Any]]:
        rows = self.db.conn.execute(
            "SELECT d.path, d.title, d.size, d.mtime, d.status, d.reason, "
            "(SELECT count(*) FROM chunks c WHERE c.doc_id = d.id) FROM documents d ORDER BY d.path"
        ).fetchall()
        keys = ("path", "title", "size", "mtime", "status", "reason", "chunks")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def document_chunks(self, path: str) -> list[dict[str, Any]]:
        rows = self.db.conn.execute(
            f"SELECT c.id, c.ord, {FILE_SPAN}, c.heading, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.path = ? ORDER BY c.ord", (path,)
        ).fetchall()
        return [{"chunk_id": r[0], "ord": r[1], **file_span_json(r[2], r[3], r[4]), "heading": r[5], "text": r[6]}
                for r in rows]

    def chunk(self, chunk_id: int) -> dict[str, Any] | None:
        r = self.db.conn.execute(
            f"SELECT c.id, d.path, d.title, c.ord, {FILE_SPAN}, c.heading, c.text FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id WHERE c.id = ?", (int(chunk_id),)
        ).fetchone()
        if r is None:
            return None
        return {"chunk_id": r[0], "doc": r[1], "title": r[2], "ord": r[3], **file_span_json(r[4], r[5], r[6]),
                "heading": r[7], "text": r[8]}

    # -- entities --------------------------------------------------------------------------------------------
    def entity(self, name: str) -> dict[str, Any] | None:
        """Entity card: mentions (doc, chunk, count), relations with sources, synonyms; None if unknown."""
        with self._read() as conn:
            row = conn.execute("SELECT id, name, kind FROM entities WHERE name = ?", (normalize(name),)).fetchone()
            if row is None:
                return None
            eid = row[0]
            mentions = [{"doc": r[0], "chunk_id": r[1], "count": r[2], "score": r[3]} for r in conn.execute(
                "SELECT d.path, m.chunk_id, m.count, m.score FROM mentions m JOIN chunks c ON c.id = m.chunk_id "
                "JOIN documents d ON d.id = c.doc_id WHERE m.entity_id = ? ORDER BY m.count DESC, m.chunk_id",
                (eid,))]
            relations = []
            for rid, src, dst, label, desc, kind in conn.execute(
                f"SELECT r.id, s.name, t.name, r.label, {DESCRIPTION}, r.kind FROM relations r "
                "JOIN entities s ON s.id = r.src_id JOIN entities t ON t.id = r.dst_id "
                "WHERE r.src_id = ? OR r.dst_id = ? ORDER BY r.id", (eid, eid)
            ).fetchall():
                # cited by the supporting chunk's span in the file, which holds the sentence (``description``)
                sources = [{"doc": p, "chunk_id": c, **file_span_json(a, b, loc)} for p, c, a, b, loc in conn.execute(
                    f"SELECT d.path, s.chunk_id, {FILE_SPAN} FROM relation_sources s JOIN chunks c ON "
                    "c.id = s.chunk_id JOIN documents d ON d.id = c.doc_id WHERE s.relation_id = ? ORDER BY s.chunk_id",
                    (rid,))]
                relations.append({
                    "id": rid, "src": src, "dst": dst, "label": label, "description": desc, "kind": kind,
                    "direction": "out" if src == row[1] else "in", "other": dst if src == row[1] else src,
                    "sources": sources,
                })
            synonyms = [{"name": n, "cos": float(c)} for n, c in conn.execute(
                "SELECT e.name, s.cos FROM synonyms s JOIN entities e ON e.id = CASE WHEN s.a_id = ? THEN s.b_id "
                "ELSE s.a_id END WHERE s.a_id = ? OR s.b_id = ? ORDER BY s.cos DESC", (eid, eid, eid))]
        return {"id": eid, "name": row[1], "kind": row[2], "mentions": mentions, "relations": relations,
                "synonyms": synonyms}

    def neighbors(self, name: str, hops: int = 1, limit: int = 25) -> dict[str, Any]:
        """Entities within ``hops`` relation/synonym edges of ``name`` (breadth first, at most ``limit``)."""
        if hops < 1 or limit < 1:
            raise ConfigError("hops and limit must be at least 1")
        snap = self.snapshot()
        start = snap.entity_index.get(normalize(name))
        if start is None:
            return {"entity": normalize(name), "found": False, "nodes": [], "edges": []}
        adj = snap.adjacency
        seen = {start: 0}
        frontier = [start]
        for depth in range(1, hops + 1):
            nxt = []
            for u in frontier:
                for v in adj.indices[adj.indptr[u] : adj.indptr[u + 1]].tolist():
                    if v not in seen and len(seen) <= limit:
                        seen[v] = depth
                        nxt.append(v)
            frontier = nxt
        nodes = [{"name": snap.entity_names[n], "kind": snap.entity_kinds[n], "hops": d} for n, d in seen.items()]
        edges = []
        for r in range(snap.n_relations):
            a, b = int(snap.rel_src[r]), int(snap.rel_dst[r])
            if a in seen and b in seen:
                edges.append({"src": snap.entity_names[a], "dst": snap.entity_names[b], "label": snap.rel_labels[r]})
        for a, b in zip(snap.syn_a.tolist(), snap.syn_b.tolist(), strict=True):
            if a in seen and b in seen:
                edges.append({"src": snap.entity_names[a], "dst": snap.entity_names[b], "label": "synonym of"})
        return {"entity": snap.entity_names[start], "found": True, "nodes": nodes, "edges": edges}

    def canonical_graph(self) -> dict[str, set[tuple[Any, ...]]]:
        """The graph without store ids: entity names, (src, dst, label) relations, (entity, chunk text, count)
        mentions and synonym name pairs; two stores of the same corpus compare equal on it."""
        with self._read() as conn:
            return {
                "entities": set(conn.execute("SELECT name, kind FROM entities").fetchall()),
                "relations": set(conn.execute(
                    "SELECT s.name, t.name, r.label FROM relations r JOIN entities s ON s.id = r.src_id "
                    "JOIN entities t ON t.id = r.dst_id").fetchall()),
                "mentions": set(conn.execute(
                    "SELECT e.name, c.text, m.count FROM mentions m JOIN entities e ON e.id = m.entity_id "
                    "JOIN chunks c ON c.id = m.chunk_id").fetchall()),
                **self.canonical_names(conn),
                "synonyms": set(conn.execute(
                    "SELECT min(a.name, b.name), max(a.name, b.name) FROM synonyms s JOIN entities a ON a.id = s.a_id "
                    "JOIN entities b ON b.id = s.b_id").fetchall()),
            }

    def canonical_names(self, conn: Connection | None = None) -> dict[str, set[tuple[Any, ...]]]:
        """The name layer without store ids: (document path, name, kind) and (name, chunk text, count)."""
        conn = conn or self.db.conn
        return {
            "doc_names": set(conn.execute(
                "SELECT d.path, n.name, n.kind FROM doc_names n JOIN documents d ON d.id = n.doc_id").fetchall()),
            "link_names": set(conn.execute(
                "SELECT d.path, n.target, n.name FROM link_names n JOIN documents d ON d.id = n.doc_id").fetchall()),
            "name_rows": set(conn.execute(
                "SELECT d.path, n.name, n.kind FROM name_rows n JOIN documents d ON d.id = n.doc_id").fetchall()),
            "name_mentions": set(conn.execute(
                "SELECT e.name, c.text, m.count FROM name_mentions m JOIN entities e ON e.id = m.entity_id "
                "JOIN chunks c ON c.id = m.chunk_id").fetchall()),
        }

    # -- export ----------------------------------------------------------------------------------------------
    def table_rows(self, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """All rows of a whitelisted table (``EXPORT_TABLES``), with column names; chunk grams are left out."""
        if table not in EXPORT_TABLES:
            raise ConfigError(f"cannot export table {table!r}; choose one of {', '.join(EXPORT_TABLES)}")
        sql = f"SELECT * FROM {table}"
        if table == "relation_sources":  # the sentence column as it was stored before schema 6
            sql = (f"SELECT s.relation_id, s.chunk_id, s.start, s.end, {SOURCE_SENTENCE} AS sentence "
                   "FROM relation_sources s JOIN chunks c ON c.id = s.chunk_id")
        elif table == "relations":  # descriptions as read, in the column order of before schema 8
            sql = f"SELECT id, src_id, dst_id, label, kind, description FROM {RELATION_ROWS}"
        cur = self.db.conn.execute(sql)
        columns = [d[0] for d in cur.description]
        rows = cur.fetchall()
        drop = [i for i, c in enumerate(columns) if c == "grams"]
        if drop:
            columns = [c for i, c in enumerate(columns) if i not in drop]
            rows = [tuple(v for i, v in enumerate(r) if i not in drop) for r in rows]
        return columns, rows
