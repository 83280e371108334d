"""Read side of the store: the graph snapshot, BM25 over chunks, entity search and neighbours, and the named reads
the indexer and the name layer make; ``records`` has the stats and cards, ``columns`` and ``vector_rows`` the bulk
reads a snapshot is built from.

Every multi-statement read runs in one read transaction, so it sees one committed version even while the indexer
writes (WAL). The snapshot is shared per store file and rebuilt only when ``meta.store_version`` moves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from pathweaver.config import HNSW_EF_SEARCH, ConfigError
from pathweaver.store.cache import cache_for
from pathweaver.store.columns import _chunk_rows, _document_links, _index_of, _read_columns, _shared
from pathweaver.store.composed import composed_search
from pathweaver.store.db import Connection, Database, connect
from pathweaver.store.dense import DenseScores, IndexedScores
from pathweaver.store.graphvecs import recipe_of, relation_vectors
from pathweaver.store.machine import this_machine
from pathweaver.store.pg.dialect import is_pg
from pathweaver.store.records import RecordReader
from pathweaver.store.schema import DESCRIPTION
from pathweaver.store.snapshot import GraphSnapshot, Lazy, LazyRows, StoredTexts
from pathweaver.store.text_keys import checked, same_keys
from pathweaver.store.vector_rows import _entity_vectors, _reusable, _reuse_rows, _same, _vectors, _with_reuse
from pathweaver.text import normalize

NEIGHBOR_HOPS = 1  # relation or synonym edges ``neighbors`` walks from the entity, by default
NEIGHBOR_LIMIT = 25  # neighbours ``neighbors`` returns at most, by default


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
    if is_pg(conn):
        from pathweaver.store.pg.reads import fts_chunk_ids as pg_ids

        return pg_ids(conn, query)
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


def folder_states(conn: Connection, machine_id: str | None = None) -> dict[str, str]:
    """Every folder recorded for machine ``machine_id`` (None: this one, ``store.machine``) and its state
    ('watched', 'indexed' or 'removed')."""
    mid = this_machine().id if machine_id is None else machine_id
    return dict(conn.execute("SELECT path, state FROM folders WHERE machine = ? ORDER BY path", (mid,)).fetchall())


def indexed_paths(conn: Connection) -> list[tuple[int, str]]:
    """(id, path) of every indexed document of this machine."""
    return conn.execute("SELECT id, path FROM documents WHERE status = 'indexed' AND machine = ?",
                        (this_machine().id,)).fetchall()


class StoreReader(RecordReader):
    """Queries over one ``Database`` connection (use one reader per thread)."""

    def __init__(self, db: Database, ef_search: int = HNSW_EF_SEARCH) -> None:
        super().__init__(db)
        self.ef_search = ef_search  # pgvector's ``hnsw.ef_search`` on a PostgreSQL store
        self.cache = cache_for(str(db.path.resolve()))
        self.passage_cache = cache_for(str(db.path.resolve()) + "#passages")  # ``passages()`` views

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
            pg = is_pg(conn)
            chunks = _chunk_rows(conn, keys=not pg)
            doc_links = _document_links(conn)
            rels = _read_columns(conn, "relations", ["id", "src_id", "dst_id"], ("label",), order=1)
            rel_ids, r_arr, labels = rels.ints[:, 0], rels.ints[:, 1:], _shared(rels.texts[0])
            syns = _read_columns(conn, "synonyms", ["a_id", "b_id"], reals=("cos",), order=2)
            y_arr, syn_cos = syns.ints, syns.reals[0]
            m_arr = _read_columns(conn, "mentions", ["chunk_id", "entity_id", "count"]).ints
            nm_arr = _read_columns(conn, "name_mentions", ["chunk_id", "entity_id", "count"]).ints
            tie_arr = _read_columns(conn, NAME_TIES, ["chunk_id", "entity_id"]).ints
            s_arr = _read_columns(conn, "relation_sources", ["relation_id", "chunk_id"]).ints
            chunk_ids = chunks.ids
            texts = self._chunk_texts(chunk_ids, None if pg else chunks.keys)
            has_vec = self._has_vectors(conn)
            rel_src = _index_of(entity_ids, r_arr[:, 0], "relations")
            rel_dst = _index_of(entity_ids, r_arr[:, 1], "relations")
            chunk_reuse = None if previous is None or pg else _reuse_rows(
                previous.chunk_ids, previous.loaded("chunk_vecs"), chunk_ids, same_keys(chunks.keys, previous.chunk_keys),
                dim)
            chunk_vecs: np.ndarray | LazyRows
            if has_vec:
                chunk_vecs = self._chunk_vectors(conn, chunk_ids, dim, chunk_reuse)
                entity_vecs, rel_vecs = self._graph_vectors(previous, dim, entity_ids, names, rel_ids, rel_src, rel_dst,
                                                            labels)
                composed = self._composed(dim, entity_ids, names, rel_ids, rel_src, rel_dst, labels)
            else:
                chunk_vecs = np.zeros((len(texts), 0), dtype=np.float32)
                entity_vecs, rel_vecs = np.zeros((len(names), 0), np.float32), np.zeros((len(labels), 0), np.float32)
                composed = None
            if isinstance(chunk_vecs, np.ndarray):
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
            chunk_spans=chunks.spans, chunk_locators=chunks.locators, chunk_cites=chunks.cites,
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
            chunk_vecs=chunk_vecs,
            entity_kinds=kinds,
            doc_links=doc_links,
            chunk_keys=chunks.keys,
        )

    def _chunk_vectors(self, conn: Connection, chunk_ids: np.ndarray, dim: int,
                       reuse: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray | LazyRows:
        """The chunk matrix (float32, a row per chunk id): read now on SQLite, where dense search ranks it; made on
        first use on PostgreSQL (over a connection of its own), where dense search asks the HNSW index and only
        the methods that score every passage read it. A chunk's vector never changes under its id, so a later
        read gives the same rows (zeros for a chunk deleted since)."""
        if not is_pg(conn):
            return _vectors(conn, "chunk_vec", chunk_ids, dim, reuse)
        path = self.db.path

        def make() -> np.ndarray:
            with contextlib.closing(connect(path, readonly=True)) as own:
                return _vectors(own, "chunk_vec", chunk_ids, dim)

        return LazyRows(make)

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

    def _chunk_texts(self, chunk_ids: np.ndarray, keys: np.ndarray | None) -> StoredTexts:
        """A snapshot's chunk texts, read when asked for over the store's shared reader: a query shows its top k,
        and the whole column would be ~1 KB a chunk of the server's memory. A chunk deleted since reads as ''; so
        does, given the ``keys`` the snapshot read (SQLite, ``store.text_keys``), one whose id now holds another
        text (a PostgreSQL id is never reused)."""
        shared = self.db.shared

        def fetch(ids: list[int]) -> dict[int, str]:
            with shared.use() as conn:
                return _pairs_in(conn, "SELECT id, text FROM chunks WHERE id IN ({marks})", ids)

        return StoredTexts(chunk_ids, fetch if keys is None else checked(fetch, chunk_ids, keys))

    def _descriptions(self) -> Callable[[list[int]], dict[int, str]]:
        """``StoredTexts``' fetch for relation descriptions, over the store file's shared reader (a description never
        changes once its relation is written)."""
        shared = self.db.shared

        def fetch(ids: list[int]) -> dict[int, str]:
            with shared.use() as conn:
                return _pairs_in(conn, f"SELECT r.id, {DESCRIPTION} FROM relations r WHERE r.id IN ({{marks}})", ids)

        return fetch

    def _composed(self, dim: int, entity_ids: np.ndarray, names: list[str], rel_ids: np.ndarray,
                  rel_src: np.ndarray, rel_dst: np.ndarray, labels: list[str]) -> Lazy:
        """The search over composed entity and relation vectors that makes neither table (``store.composed``),
        on first use; the rows it makes later read over the store's shared reader."""
        shared = self.db.shared
        return Lazy(lambda: composed_search(shared, dim, entity_ids, names, rel_ids, rel_src, rel_dst, labels))

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
            pg = is_pg(conn)
            chunks = _chunk_rows(conn, keys=not pg)
            texts = self._chunk_texts(chunks.ids, None if pg else chunks.keys)
            reuse = None
            held = None if source is None or pg else source.loaded("chunk_vecs")
            if held is not None and held.ndim == 2 and held.shape[1] == dim:
                same = same_keys(chunks.keys, source.chunk_keys)
                reuse = (_reusable(source.chunk_ids, held, chunks.ids, same), held)
            vecs: np.ndarray | LazyRows = self._chunk_vectors(conn, chunks.ids, dim, reuse) \
                if self._has_vectors(conn) else np.zeros((len(chunks.ids), 0), dtype=np.float32)
            if isinstance(vecs, np.ndarray):
                vecs.flags.writeable = False
        width = dim if isinstance(vecs, LazyRows) else vecs.shape[1]
        n_p = len(texts)
        empty = np.zeros(0, dtype=np.int64)
        return GraphSnapshot(
            version=version, entity_names=[], entity_ids=empty, chunk_ids=chunks.ids, chunk_texts=texts,
            chunk_docs=chunks.docs, chunk_titles=chunks.titles, chunk_spans=chunks.spans,
            chunk_locators=chunks.locators, chunk_cites=chunks.cites, rel_ids=empty,
            rel_src=empty.astype(np.int32), rel_dst=empty.astype(np.int32), rel_labels=[], rel_descriptions=[],
            rel_chunks=sp.csr_matrix((0, n_p), dtype=np.float32), syn_a=empty.astype(np.int32),
            syn_b=empty.astype(np.int32), syn_cos=np.zeros(0, dtype=np.float32),
            mentions=sp.csr_matrix((n_p, 0), dtype=np.float32), entity_vecs=np.zeros((0, width), np.float32),
            rel_vecs=np.zeros((0, width), np.float32), chunk_vecs=vecs, chunk_keys=chunks.keys,
        )

    def dense_scores(self, snapshot: GraphSnapshot, qvec: np.ndarray) -> DenseScores:
        """A question's dense scores over ``snapshot``'s passages (``store.dense``): through pgvector's HNSW index
        on PostgreSQL (approximate, ``ef_search`` candidates), exact over the snapshot's chunk matrix on SQLite."""
        if not is_pg(self.db.conn):
            return DenseScores(snapshot, qvec)
        from pathweaver.store.pg.search import chunk_cosines, dense_top

        conn = self.db.conn
        return IndexedScores(snapshot, qvec, lambda vec, k: dense_top(conn, vec, k, self.ef_search),
                             lambda vec, ids: chunk_cosines(conn, vec, ids))

    def gram_df(self, grams: Sequence[str]) -> dict[str, int]:
        """Stored document frequencies (chunks containing them) of ``grams``, normalised n-grams as
        ``extract.entities.candidate_grams`` makes them; a gram no chunk has is left out."""
        return gram_df(self.db.conn, list(grams))

    def neighbors(self, name: str, hops: int = NEIGHBOR_HOPS, limit: int = NEIGHBOR_LIMIT) -> dict[str, Any]:
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


