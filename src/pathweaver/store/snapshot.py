"""``GraphSnapshot``: the whole graph as CSR arrays, built once per store version.

Node space (for PPR and path search): entities are nodes ``0..E-1``; passages (chunks) are nodes ``E..E+P-1``.
Edges:
- relation edges entity↔entity (co-occurrence / link relations, one row per relation, ``rel_*`` arrays);
- synonym edges entity↔entity (``syn_*`` arrays);
- Contains edges passage↔entity (``mention_*``, from the mentions table).

``from_arrays`` builds a snapshot from plain lists so retrieval code can be tested on hand-built graphs.
``load_snapshot`` (in ``store.reads``) builds it from a store; ``SnapshotCache`` reuses it until the version moves.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

import numpy as np
import scipy.sparse as sp

T = TypeVar("T")
# Where retrieval keeps the structures it derives from a snapshot that do not depend on the synonym edges
# (projections of the vectors, the relation pair index): ``with_synonyms`` hands them on to the snapshot it makes.
CARRIED_ATTR = "_pathweaver_synonym_free_cache"


def file_span_json(start: int, end: int, locator: str = "") -> dict[str, Any]:
    """``{span}``: character offsets in the decoded file, or None where the file has none (PDF, DOCX), which get
    ``{locator}`` ("page 3", "paragraph 7") instead."""
    out: dict[str, Any] = {"span": [int(start), int(end)] if start >= 0 else None}
    if locator:
        out["locator"] = locator
    return out


def citation_json(doc: str, title: str, chunk_id: int, start: int, end: int, locator: str = "") -> dict[str, Any]:
    """Where a chunk comes from, as every JSON result cites it: ``{doc, title, chunk_id, span[, locator]}``."""
    return {"doc": doc, "title": title, "chunk_id": int(chunk_id), **file_span_json(start, end, locator)}


class Lazy(Generic[T]):
    """A value made on first use, once, under a lock (the maker's inputs are dropped with it)."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make: Callable[[], T] | None = make
        self._value: Any = None  # a T once made
        self._lock = threading.Lock()

    @property
    def ready(self) -> T | None:
        """The value when it was made already, else None (makes nothing)."""
        return self._value

    def get(self) -> T:
        if self._make is not None:
            with self._lock:
                if self._make is not None:
                    self._value, self._make = self._make(), None
        return self._value


class StoredTexts(Sequence[str]):
    """A text per row read from the store when asked for (relation descriptions: 55 MB of sentences that a query
    reads a few of; chunk texts, ~1 KB a chunk, of which a query shows its top k), through
    ``fetch(ids) -> {id: text}``, which may be called from any thread; a row the store no longer has reads as ''."""

    BATCH = 2000  # rows per read when iterated

    def __init__(self, ids: np.ndarray, fetch: Callable[[list[int]], dict[int, str]]) -> None:
        self._ids = ids
        self._fetch = fetch

    def __len__(self) -> int:
        return int(self._ids.shape[0])

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        ids = self._ids[i]
        keys = [int(x) for x in np.atleast_1d(ids).tolist()]
        found = self._fetch(keys)
        texts = [found.get(k, "") for k in keys]
        return texts if isinstance(i, slice) else texts[0]

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), self.BATCH):  # a read per batch, not per row
            yield from self[start : start + self.BATCH]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


class IdPositions(Mapping[int, int]):
    """{store id: position} over ascending ids, by binary search: no Python objects per row (a dict of 10^6 ids
    is ~100 MB of a server's memory)."""

    def __init__(self, ids: np.ndarray) -> None:
        self._ids = ids

    def __getitem__(self, key: int) -> int:
        try:
            i = int(np.searchsorted(self._ids, key))
        except (TypeError, ValueError):
            raise KeyError(key) from None
        if i < self._ids.shape[0] and self._ids[i] == key:
            return i
        raise KeyError(key)

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids.tolist())

    def __len__(self) -> int:
        return int(self._ids.shape[0])


class LazyRows(Lazy[np.ndarray]):
    """A snapshot's vector table made on first use, once (a dense query never needs the graph's vectors), as
    read-only float32 rows: the next snapshot may share them."""

    def __init__(self, make: Callable[[], np.ndarray]) -> None:
        def frozen() -> np.ndarray:
            value = np.asarray(make(), dtype=np.float32)
            value.flags.writeable = False
            return value

        super().__init__(frozen)


@dataclass
class GraphSnapshot:
    """Immutable view of the graph. Indices are positions in these arrays, not store ids."""

    version: int
    # entities
    entity_names: list[str]
    entity_ids: np.ndarray  # (E,) int64 store ids
    # passages (chunks)
    chunk_ids: np.ndarray  # (P,) int64 store ids
    chunk_texts: Sequence[str]  # a ``StoredTexts`` from a store
    chunk_docs: list[str]  # document path per chunk
    chunk_titles: list[str]  # document title per chunk
    chunk_spans: np.ndarray  # (P, 2) int64 character span in the decoded file (-1, -1: see chunk_locators)
    # relations (entity index -> entity index)
    rel_ids: np.ndarray  # (R,) int64 store ids
    rel_src: np.ndarray  # (R,) int32
    rel_dst: np.ndarray  # (R,) int32
    rel_labels: list[str]
    rel_descriptions: Sequence[str]  # the supporting sentence (``StoredTexts`` from a store)
    rel_chunks: sp.csr_matrix  # (R, P) 1 where the chunk supports the relation
    # synonyms
    syn_a: np.ndarray  # (S,) int32
    syn_b: np.ndarray  # (S,) int32
    syn_cos: np.ndarray  # (S,) float32
    # Contains edges: (P, E) mention counts
    mentions: sp.csr_matrix
    # vectors (unit-normalised rows); may be empty arrays of shape (0, d) when not loaded. Each may be given as
    # ``LazyRows``, made when first read (``loaded``: without making them); a PostgreSQL store gives ``chunk_vecs``
    # so, since its dense search asks the HNSW index (``store.dense``)
    entity_vecs: np.ndarray
    rel_vecs: np.ndarray
    chunk_vecs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    entity_kinds: list[str] = field(default_factory=list)  # 'ngram' | 'title' | 'heading' | 'link'
    chunk_locators: list[str] = field(default_factory=list)  # page or paragraph per chunk (PDF, DOCX), else ''
    # the file each chunk cites where it is not its document: the embedded note its text comes from; [] = none
    chunk_cites: list[str] = field(default_factory=list)
    # the name layer (extract/names.py), both (P, E) and already inside ``mentions``: name mentions found by the
    # automaton, and ties of a title or alias entity to its own document's chunks (1); None = none
    name_mentions: sp.csr_matrix | None = None
    ties: sp.csr_matrix | None = None
    # the Contains edges of the statistical layer alone (AGRAG's graph, which MCMI walks); None = ``mentions``
    statistical_mentions: sp.csr_matrix | None = None
    # nearest composed entities and relations without their tables (``store.composed.ComposedSearch``, made on
    # first use; its value None where the store's vectors are not composed); None = none
    composed: Lazy | None = None
    # {document path: the paths of the documents it links to} (wiki and Markdown links, embeds; ``columns``); {} =
    # none
    doc_links: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # (P,) int64 key of each chunk's text (``store.text_keys``) on a SQLite store, which holds no texts: what tells
    # the next snapshot which vectors it may reuse (SQLite reuses a deleted chunk's id); empty = none
    chunk_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # derived
    entity_index: dict[str, int] = field(default_factory=dict)
    chunk_index: Mapping[int, int] = field(default_factory=dict)  # store chunk id -> passage index
    adjacency: sp.csr_matrix | None = None  # (E, E) undirected relation+synonym edges, data = 1
    edge_relation: sp.csr_matrix | None = None  # (E, E) data = relation index + 1 (0 if synonym-only)

    def __post_init__(self) -> None:
        if not self.entity_index:
            self.entity_index = {name: i for i, name in enumerate(self.entity_names)}
        if not self.chunk_index:
            ids = self.chunk_ids
            self.chunk_index = IdPositions(ids) if bool((ids[1:] > ids[:-1]).all()) else \
                {int(c): i for i, c in enumerate(ids.tolist())}
        if not self.entity_kinds:
            self.entity_kinds = ["ngram"] * len(self.entity_names)
        shape = (len(self.chunk_ids), len(self.entity_names))
        if self.name_mentions is None:
            self.name_mentions = sp.csr_matrix(shape, dtype=np.float32)
        if self.ties is None:
            self.ties = sp.csr_matrix(shape, dtype=np.float32)
        if self.adjacency is None or self.edge_relation is None:
            self.adjacency, self.edge_relation = _entity_adjacency(
                len(self.entity_names), self.rel_src, self.rel_dst, self.syn_a, self.syn_b
            )

    @property
    def n_entities(self) -> int:
        return len(self.entity_names)

    @property
    def n_passages(self) -> int:
        return len(self.chunk_ids)

    @property
    def n_relations(self) -> int:
        return len(self.rel_ids)

    def citation(self, passage: int) -> dict[str, Any]:
        """Where passage ``passage`` comes from (``citation_json``)."""
        start, end = self.chunk_spans[passage]
        locator = self.chunk_locators[passage] if self.chunk_locators else ""
        doc = self.chunk_cites[passage] if self.chunk_cites else self.chunk_docs[passage]
        return citation_json(doc, self.chunk_titles[passage], self.chunk_ids[passage], start, end,
                             locator)

    def triple_text(self, r: int) -> str:
        """"subject label object", the text embedded for a relation."""
        return f"{self.entity_names[self.rel_src[r]]} {self.rel_labels[r]} {self.entity_names[self.rel_dst[r]]}"

    def with_synonyms(self, version: int, pairs: list[tuple[int, int, float]]) -> GraphSnapshot | None:
        """This graph plus synonym edges ``pairs`` (store ids, cos), as store version ``version``: what a commit
        that only added those rows to ``synonyms`` makes of it, in the order a read of the store gives. Every
        other array is shared. None when a pair names an entity this graph lacks or an edge it already has (the
        caller then reads the store)."""
        ids = np.array([(min(a, b), max(a, b)) for a, b, _ in pairs], dtype=np.int64).reshape(-1, 2)
        pos = np.minimum(np.searchsorted(self.entity_ids, ids), max(len(self.entity_ids) - 1, 0))
        if len(pairs) and (not len(self.entity_ids) or not (self.entity_ids[pos] == ids).all()):
            return None
        syn_a = np.concatenate([self.syn_a.astype(np.int64), pos[:, 0]])
        syn_b = np.concatenate([self.syn_b.astype(np.int64), pos[:, 1]])
        syn_cos = np.concatenate([self.syn_cos, np.array([c for *_, c in pairs], dtype=np.float32)])
        order = np.lexsort((syn_b, syn_a))
        syn_a, syn_b, syn_cos = syn_a[order], syn_b[order], syn_cos[order]
        if ((syn_a[1:] == syn_a[:-1]) & (syn_b[1:] == syn_b[:-1])).any():
            return None
        carried = dataclasses.replace(self, version=version, syn_a=syn_a.astype(np.int32),
                                      syn_b=syn_b.astype(np.int32), syn_cos=syn_cos, adjacency=None, edge_relation=None,
                                      entity_vecs=self.__dict__["_entity_vecs"], rel_vecs=self.__dict__["_rel_vecs"],
                                      chunk_vecs=self.__dict__["_chunk_vecs"])
        inherited = self.__dict__.get(CARRIED_ATTR)
        if inherited:
            object.__setattr__(carried, CARRIED_ATTR, dict(inherited))
        return carried

    def loaded(self, name: str) -> np.ndarray | None:
        """``entity_vecs``, ``rel_vecs`` or ``chunk_vecs`` when in memory already, else None (makes nothing)."""
        value = self.__dict__["_" + name]
        return value.ready if isinstance(value, LazyRows) else value

    def _search(self) -> Any:
        return self.composed.get() if self.composed is not None else None

    def vector_rows(self, name: str, idx: Any) -> np.ndarray:
        """``getattr(self, name)[idx]`` for ``name`` "entity_vecs" or "rel_vecs", with the same bits, but made
        alone by the composed search (``store.composed``) when the table is not in memory, which then stays
        unmade (a warm server's mcmi and pathrag read a few thousand of 10^5 rows)."""
        search = self._search() if self.loaded(name) is None else None
        if search is None:
            return getattr(self, name)[idx]
        rows = np.asarray(idx, dtype=np.int64)
        flat = rows.reshape(-1)
        made = search.entity_rows(flat) if name == "entity_vecs" else search.relation_rows(flat)
        return made.reshape(*rows.shape, made.shape[1])

    def vector_dim(self, name: str) -> int:
        """The width of ``entity_vecs`` or ``rel_vecs`` when it has a row per entity or relation, else 0 (made
        through neither table when the composed search answers)."""
        table = self.loaded(name)
        search = self._search() if table is None else None
        if search is not None:
            return int(search.words.shape[1])
        table = getattr(self, name)
        count = self.n_entities if name == "entity_vecs" else self.n_relations
        return int(table.shape[1]) if table.ndim == 2 and table.shape[0] == count else 0

    @classmethod
    def from_arrays(
        cls,
        entities: list[str],
        relations: list[tuple[int, int, str]],
        passages: list[str] | None = None,
        mentions: list[tuple[int, int, int]] | None = None,
        synonyms: list[tuple[int, int, float]] | None = None,
        relation_chunks: list[tuple[int, int]] | None = None,
        entity_vecs: np.ndarray | None = None,
        rel_vecs: np.ndarray | None = None,
        chunk_vecs: np.ndarray | None = None,
        version: int = 0,
    ) -> GraphSnapshot:
        """Hand-built graph: ``relations`` are ``(src, dst, label)``, ``mentions`` ``(passage, entity, count)``,
        ``synonyms`` ``(a, b, cos)``, ``relation_chunks`` ``(relation, passage)``."""
        passages = passages or []
        mentions = mentions or []
        synonyms = synonyms or []
        relation_chunks = relation_chunks or []
        n_e, n_p, n_r = len(entities), len(passages), len(relations)
        dim = entity_vecs.shape[1] if entity_vecs is not None else 0
        return cls(
            version=version,
            entity_names=list(entities),
            entity_ids=np.arange(1, n_e + 1, dtype=np.int64),
            chunk_ids=np.arange(1, n_p + 1, dtype=np.int64),
            chunk_texts=list(passages),
            chunk_docs=[f"doc{i}" for i in range(n_p)],
            chunk_titles=[f"doc{i}" for i in range(n_p)],
            chunk_spans=np.array([[0, len(t)] for t in passages], dtype=np.int64).reshape(n_p, 2),
            rel_ids=np.arange(1, n_r + 1, dtype=np.int64),
            rel_src=np.array([r[0] for r in relations], dtype=np.int32),
            rel_dst=np.array([r[1] for r in relations], dtype=np.int32),
            rel_labels=[r[2] for r in relations],
            rel_descriptions=["" for _ in relations],
            rel_chunks=_coo(relation_chunks, (n_r, n_p)),
            syn_a=np.array([s[0] for s in synonyms], dtype=np.int32),
            syn_b=np.array([s[1] for s in synonyms], dtype=np.int32),
            syn_cos=np.array([s[2] for s in synonyms], dtype=np.float32),
            mentions=sp.csr_matrix(
                (
                    np.array([m[2] for m in mentions], dtype=np.float32),
                    (np.array([m[0] for m in mentions], dtype=np.int64), np.array([m[1] for m in mentions], dtype=np.int64)),
                ),
                shape=(n_p, n_e),
            ),
            entity_vecs=entity_vecs if entity_vecs is not None else np.zeros((n_e, dim), dtype=np.float32),
            rel_vecs=rel_vecs if rel_vecs is not None else np.zeros((n_r, dim), dtype=np.float32),
            chunk_vecs=chunk_vecs if chunk_vecs is not None else np.zeros((n_p, dim), dtype=np.float32),
        )


def _lazy_vectors(name: str) -> property:
    key = "_" + name

    def get(self: GraphSnapshot) -> np.ndarray:
        value = self.__dict__[key]
        return value.get() if isinstance(value, LazyRows) else value

    def put(self: GraphSnapshot, value: np.ndarray | LazyRows) -> None:
        self.__dict__[key] = value

    return property(get, put)


GraphSnapshot.entity_vecs = _lazy_vectors("entity_vecs")  # type: ignore[assignment]
GraphSnapshot.rel_vecs = _lazy_vectors("rel_vecs")  # type: ignore[assignment]
GraphSnapshot.chunk_vecs = _lazy_vectors("chunk_vecs")  # type: ignore[assignment]


def _coo(pairs: list[tuple[int, int]], shape: tuple[int, int]) -> sp.csr_matrix:
    rows = np.array([p[0] for p in pairs], dtype=np.int64)
    cols = np.array([p[1] for p in pairs], dtype=np.int64)
    return sp.csr_matrix((np.ones(len(pairs), dtype=np.float32), (rows, cols)), shape=shape)


def _entity_adjacency(
    n: int, src: np.ndarray, dst: np.ndarray, syn_a: np.ndarray, syn_b: np.ndarray
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Undirected entity graph and, per entity pair, one relation index + 1 (0 for synonym-only pairs)."""
    rows = np.concatenate([src, dst, syn_a, syn_b]).astype(np.int64)
    cols = np.concatenate([dst, src, syn_b, syn_a]).astype(np.int64)
    adj = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n, n))
    adj.data[:] = 1.0  # collapse duplicates
    er = _max_per_pair(n, src, dst, np.arange(1, len(src) + 1, dtype=np.float64))
    return adj.tocsr(), er


def _max_per_pair(n: int, src: np.ndarray, dst: np.ndarray, rel_idx: np.ndarray) -> sp.csr_matrix:
    """For parallel relations between the same pair, keep the lowest relation index (deterministic)."""
    if not len(src):
        return sp.csr_matrix((n, n), dtype=np.float64)
    rows = np.concatenate([src, dst]).astype(np.int64)
    cols = np.concatenate([dst, src]).astype(np.int64)
    vals = np.concatenate([rel_idx, rel_idx]).astype(np.float64)
    order = np.lexsort((vals, cols, rows))  # per (row, col): the lowest index first
    keys = rows[order] * n + cols[order]
    keep = order[np.r_[True, keys[1:] != keys[:-1]]]
    return sp.csr_matrix((vals[keep], (rows[keep], cols[keep])), shape=(n, n))
