"""Sparse graph helpers shared by the retrieval methods, built once per ``GraphSnapshot`` and cached on it.

PPR node space (see ``store/snapshot.py``): entities are nodes ``0..E-1``, passages are nodes ``E..E+P-1``.
Edges of the undirected weighted node-space graph (HippoRAG 2 / AGRAG §III-B):
- relation edges entity↔entity, weight = number of relations joining the pair (``relation_weight="count"``) or 1;
- synonym edges entity↔entity, weight = their cosine (AGRAG Eq. 5);
- Contains edges passage↔entity, weight = the mention count (``contains_weight="count"``) or 1 (HippoRAG 2);
- name links passage↔passage (``name_link_matrix``), weight ``name_links`` (0 = none; ours, issue 23);
  ``statistical`` < 1 scales the statistical layer (relation, synonym and n-gram Contains edges) down towards the
  name layer alone (0: name mentions and ties are the only Contains edges);
- proper-name Contains edges passage↔n-gram entity where the passage writes it as a name (``propernames.py``),
  weight ``proper_names`` × the count / the name's passage count (0 = none; ours, issue 23), whatever
  ``statistical`` says.

The caches live in a dict attribute on the snapshot object, so they die with it and a new store version (a new
snapshot) never sees stale matrices. Nothing here is built per query.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.numeric.parallel import SparseRows, degree_order, threads
from pathweaver.retrieval.propernames import proper_mentions
from pathweaver.store.snapshot import CARRIED_ATTR, GraphSnapshot

_CACHE_ATTR = "_pathweaver_retrieval_cache"
_LOCKS_ATTR = "_pathweaver_retrieval_locks"  # one lock per cache key, so a structure is built once
_LOCK = threading.Lock()  # guards the creation of those two attributes and of the per-key locks
T = TypeVar("T")
RelationWeight = Literal["count", "one"]
ContainsWeight = Literal["one", "count"]


def cached(snapshot: GraphSnapshot, key: tuple[Any, ...], build: Callable[[], T], synonym_free: bool = False) -> T:
    """Return ``build()`` memoised on ``snapshot`` under ``key`` (built once per snapshot object).

    A thread that asks for a structure another thread is building waits for that build instead of repeating it
    (the server's background warm-up and a query can meet on a new snapshot). A ``synonym_free`` structure, one
    that does not depend on the synonym edges (a projection of vectors, the pair index), is kept where
    ``GraphSnapshot.with_synonyms`` hands it on to the snapshot it carries forward."""
    attr = CARRIED_ATTR if synonym_free else _CACHE_ATTR
    store: dict[tuple[Any, ...], Any] | None = snapshot.__dict__.get(attr)
    if store is not None and key in store:
        return store[key]  # type: ignore[no-any-return]
    with _LOCK:
        store = snapshot.__dict__.get(attr)
        if store is None:
            store = {}
            object.__setattr__(snapshot, attr, store)
        locks: dict[tuple[Any, ...], Any] = snapshot.__dict__.setdefault(_LOCKS_ATTR, {})
        lock = locks.setdefault((attr, *key), threading.RLock())
    with lock:
        if key not in store:
            store[key] = build()
    return store[key]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class NodeSpaceGraph:
    """The node-space graph: symmetric weights ``adjacency`` (n, n), its column-stochastic ``transition``
    (column j = out-edges of j divided by j's weighted degree) and the ``dangling`` nodes (no edges)."""

    adjacency: sp.csr_matrix
    inv_degree: np.ndarray  # (n,) 1 / weighted degree, 0 for dangling nodes
    dangling: np.ndarray  # (n,) bool
    n_entities: int
    n_passages: int

    @property
    def n_nodes(self) -> int:
        return self.n_entities + self.n_passages

    @property
    def transition(self) -> sp.csr_matrix:
        """``adjacency`` with column j scaled by 1/deg(j), made on each call: kept, it would be a second copy of
        the graph (~0.1 KB a chunk) beside the walk's own renumbered rows (``transition_rows``)."""
        return (self.adjacency @ sp.diags(self.inv_degree)).tocsr()


def node_space_graph(
    snapshot: GraphSnapshot,
    relation_weight: RelationWeight = "count",
    contains_weight: ContainsWeight = "count",
    name_links: float = 0.0,
    statistical: float = 1.0,
    proper_names: float = 0.0,
) -> NodeSpaceGraph:
    """The cached entity+passage graph of ``snapshot`` (see the module docstring for the edge weights)."""
    if relation_weight not in ("count", "one"):
        raise ConfigError(f"relation_weight must be 'count' or 'one', got {relation_weight!r}")
    if contains_weight not in ("one", "count"):
        raise ConfigError(f"contains_weight must be 'one' or 'count', got {contains_weight!r}")
    if name_links < 0 or proper_names < 0 or not 0.0 <= statistical <= 1.0:
        raise ConfigError(f"name_links and proper_names must be >= 0 and statistical in [0, 1], got {name_links}, "
                          f"{proper_names}, {statistical}")
    return cached(
        snapshot,
        ("node_space", relation_weight, contains_weight, name_links, statistical, proper_names),
        lambda: _build_node_space(snapshot, relation_weight, contains_weight, name_links, statistical, proper_names),
    )


def transition_rows(
    snapshot: GraphSnapshot,
    relation_weight: RelationWeight = "count",
    contains_weight: ContainsWeight = "count",
    name_links: float = 0.0,
    statistical: float = 1.0,
    proper_names: float = 0.0,
) -> SparseRows:
    """The node-space transition matrix for PageRank steps (cached), its entities renumbered busiest first and its
    passages kept in place (``parallel.degree_order``)."""
    graph = node_space_graph(snapshot, relation_weight, contains_weight, name_links, statistical, proper_names)
    return cached(
        snapshot,
        ("transition_rows", relation_weight, contains_weight, name_links, statistical, proper_names, threads()),
        lambda: _walk_rows(graph.transition, snapshot.n_entities),
    )


def name_link_matrix(snapshot: GraphSnapshot) -> sp.csr_matrix:
    """(P, P) undirected 0/1 passage links: passage a mentions a name tied to passage b's document (or the
    reverse), a != b. The structure people wrote: "this passage mentions the thing that passage is about"."""

    def build() -> sp.csr_matrix:
        assert snapshot.name_mentions is not None and snapshot.ties is not None
        named = snapshot.name_mentions.copy()
        named.data[:] = 1.0
        links = (named @ snapshot.ties.T).tocsr()
        links = (links + links.T).tocsr()
        links.setdiag(0.0)
        links.eliminate_zeros()
        links.data[:] = 1.0
        return links.astype(np.float64)

    return cached(snapshot, ("name_links",), build, synonym_free=True)


def proper_mention_matrix(snapshot: GraphSnapshot) -> sp.csr_matrix:
    """``proper_mentions`` built once per snapshot: the walk's phrase-node edges and ppr's set selection read it."""
    return cached(snapshot, ("proper_mentions",), lambda: proper_mentions(snapshot), synonym_free=True)


def has_names(snapshot: GraphSnapshot) -> bool:
    """Whether the store has a name layer (some name mention); without one the graph is the statistical layer."""
    return snapshot.name_mentions is not None and snapshot.name_mentions.nnz > 0


def documents_link(snapshot: GraphSnapshot) -> bool:
    """Whether some passage mentions a name of another document (``name_link_matrix`` across documents), i.e. the
    documents of this store name each other."""

    def build() -> bool:
        if not has_names(snapshot):
            return False
        links = name_link_matrix(snapshot).tocoo()
        _, doc = np.unique(np.asarray(snapshot.chunk_docs, dtype=object).astype(str), return_inverse=True)
        return bool((doc[links.row] != doc[links.col]).any())

    return cached(snapshot, ("documents_link",), build, synonym_free=True)


def _build_node_space(snapshot: GraphSnapshot, relation_weight: str, contains_weight: str,
                      name_links: float = 0.0, statistical: float = 1.0,
                      proper_names: float = 0.0) -> NodeSpaceGraph:
    n_e, n_p = snapshot.n_entities, snapshot.n_passages
    n = n_e + n_p
    rel_src = snapshot.rel_src.astype(np.int64)
    rel_dst = snapshot.rel_dst.astype(np.int64)
    keep = rel_src != rel_dst  # self-loops carry no path information
    rel = sp.coo_matrix(
        (np.ones(int(keep.sum()), dtype=np.float64), (rel_src[keep], rel_dst[keep])), shape=(n_e, n_e)
    ).tocsr()  # duplicates are summed: the relation count per ordered pair
    rel = rel + rel.T
    if relation_weight == "one":
        rel.data[:] = 1.0
    syn = sp.coo_matrix(
        (
            snapshot.syn_cos.astype(np.float64),
            (snapshot.syn_a.astype(np.int64), snapshot.syn_b.astype(np.int64)),
        ),
        shape=(n_e, n_e),
    ).tocsr()
    syn = syn.maximum(syn.T)
    ent = (rel + syn).tocsr()
    stat = snapshot.statistical_mentions if snapshot.statistical_mentions is not None else snapshot.mentions
    contains = stat.astype(np.float64).tocsr().copy()  # (P, E)
    contains.eliminate_zeros()
    if contains_weight == "one":
        contains.data[:] = 1.0
    if statistical < 1.0:  # the statistical layer (n-gram entities, relations, synonyms) scaled down against names
        assert snapshot.name_mentions is not None and snapshot.ties is not None
        names = snapshot.name_mentions.maximum(snapshot.ties).astype(np.float64).tocsr()
        if contains_weight == "one":
            names.data[:] = 1.0
        contains = (contains * statistical + names * (1.0 - statistical)).tocsr()
        ent = (ent * statistical).tocsr()
        contains.eliminate_zeros()
        ent.eliminate_zeros()
    if proper_names > 0 and n_p:  # phrase nodes for the names a passage writes (HippoRAG 2 §3; propernames.py)
        proper = proper_mention_matrix(snapshot).astype(np.float64)
        if contains_weight == "one":
            proper.data[:] = 1.0
        # HippoRAG 2's node specificity (1/|P_i|, §3) on the edges: each name node weighs the same in all, so a
        # name in two passages carries more of their mass than "American" in two hundred
        df = np.diff(proper.tocsc().indptr).astype(np.float64)
        proper = (proper @ sp.diags(1.0 / np.maximum(df, 1.0))).tocsr()
        contains = (contains + proper * proper_names).tocsr()
    links = name_link_matrix(snapshot) * name_links if name_links > 0 and n_p else None
    adjacency = sp.bmat([[ent, contains.T], [contains, links]], format="csr", dtype=np.float64)
    adjacency.sum_duplicates()
    degree = np.asarray(adjacency.sum(axis=0)).ravel()
    dangling = degree <= 0
    inv = np.zeros(n, dtype=np.float64)
    inv[~dangling] = 1.0 / degree[~dangling]
    return NodeSpaceGraph(adjacency, inv, dangling, n_e, n_p)  # transition: column j scaled by 1/deg(j)


def _walk_rows(transition: sp.csr_matrix, n_entities: int) -> SparseRows:
    """``transition`` as a walk's rows, its entities renumbered busiest first (``parallel.degree_order``)."""
    return SparseRows(transition, order=degree_order(transition, n_entities))


def entity_degrees(snapshot: GraphSnapshot) -> np.ndarray:
    """Number of distinct entity neighbours (relation or synonym) of each entity, |N(v,·)| in PathRAG Eq. 2-3."""
    adjacency = snapshot.adjacency
    assert adjacency is not None  # set in GraphSnapshot.__post_init__
    return cached(snapshot, ("entity_degrees",), lambda: np.diff(adjacency.indptr).astype(np.float64))


def entity_passage_counts(snapshot: GraphSnapshot) -> np.ndarray:
    """Number of passages that mention each entity (HippoRAG 2 divides seed weights by it)."""

    def build() -> np.ndarray:
        m = snapshot.mentions.tocsc()
        return np.diff(m.indptr).astype(np.float64) if m.shape[1] else np.zeros(0)

    return cached(snapshot, ("entity_passage_counts",), build, synonym_free=True)


@dataclass(frozen=True)
class PairRelations:
    """Relation indices per unordered entity pair: the relations sorted by the pair's key ``min·E + max`` (stable,
    so a pair's relations keep their index order), found by binary search. Built with array operations: a dict
    per pair would be rebuilt after every change, which is slow on large stores."""

    keys: np.ndarray  # (R,) int64 sorted pair keys
    order: np.ndarray  # (R,) int64 relation index of each sorted key
    n_entities: int

    def between(self, u: int, v: int) -> list[int]:
        """The relations joining entities ``u`` and ``v`` (either direction), lowest index first."""
        key = min(u, v) * self.n_entities + max(u, v)
        lo, hi = np.searchsorted(self.keys, [key, key + 1])
        return self.order[lo:hi].tolist()


def pair_relations(snapshot: GraphSnapshot) -> PairRelations:
    """The relations of every unordered entity pair (``PairRelations.between``); built once per snapshot."""

    def build() -> PairRelations:
        src, dst = snapshot.rel_src.astype(np.int64), snapshot.rel_dst.astype(np.int64)
        keys = np.minimum(src, dst) * snapshot.n_entities + np.maximum(src, dst)
        order = np.argsort(keys, kind="stable")
        return PairRelations(keys[order], order, snapshot.n_entities)

    return cached(snapshot, ("pair_relations",), build, synonym_free=True)


def relation_passages(snapshot: GraphSnapshot) -> sp.csr_matrix:
    """``rel_chunks`` as CSR (R, P), for fast row access."""
    return cached(snapshot, ("rel_chunks_csr",), lambda: sp.csr_matrix(snapshot.rel_chunks), synonym_free=True)


def passage_relations(snapshot: GraphSnapshot) -> sp.csr_matrix:
    """``rel_chunks`` transposed as CSR (P, R): the relations each passage holds."""
    return cached(snapshot, ("rel_chunks_csr_t",), lambda: sp.csr_matrix(relation_passages(snapshot).T),
                  synonym_free=True)
