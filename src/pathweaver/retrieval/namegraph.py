"""The name layer as an entity graph, for the path methods (PathRAG, Path Pooling, LEGO) and MCMI (issue 23).

A *name edge* (a, b, p): passage ``p`` is tied to the document named by entity ``a`` (its title or an alias) and
mentions the name ``b`` (the automaton of extract/names.py). It is the structure people wrote: "a's document
mentions b". Built from the snapshot's ``ties`` and ``name_mentions`` (both (P, E)), whatever the entity tables
hold; a store without names has no name edges. Cached per snapshot; nothing here runs per query.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pathweaver.extract.relations import split_sentences
from pathweaver.retrieval.graphs import cached
from pathweaver.store.snapshot import GraphSnapshot


@dataclass(frozen=True)
class NameEdges:
    """Name edges as parallel arrays (one row per (a, b, p), a != b), sorted by the unordered pair key."""

    src: np.ndarray  # (M,) int64 entity whose document holds the passage
    dst: np.ndarray  # (M,) int64 entity the passage mentions
    passage: np.ndarray  # (M,) int64 the mentioning passage
    keys: np.ndarray  # (M,) int64 min(a, b)·E + max(a, b), sorted
    n_entities: int

    @property
    def size(self) -> int:
        return int(self.src.size)

    def _pair(self, u: int, v: int) -> slice:
        """The rows of the name edges joining ``u`` and ``v``, either direction."""
        key = min(u, v) * self.n_entities + max(u, v)
        lo, hi = np.searchsorted(self.keys, [key, key + 1])
        return slice(int(lo), int(hi))

    def row_between(self, u: int, v: int) -> int | None:
        """One name edge joining ``u`` and ``v``: the lowest passage's of those where ``u``'s document mentions ``v``,
        else of those the other way; None when they are not joined."""
        pair = self._pair(u, v)
        rows = np.arange(pair.start, pair.stop)
        if not rows.size:
            return None
        own = rows[self.src[rows] == u]
        rows = own if own.size else rows
        return int(rows[np.argmin(self.passage[rows])])

    def passages_between(self, u: int, v: int) -> list[int]:
        """The passages behind the name edges joining ``u`` and ``v`` (either direction), lowest first."""
        return sorted(set(self.passage[self._pair(u, v)].tolist()))

    def passages_from(self, u: int, v: int) -> list[int]:
        """The passages of ``u``'s document that mention ``v`` (the name edge u -> v), lowest first."""
        rows = self._pair(u, v)
        return sorted(set(self.passage[rows][self.src[rows] == u].tolist()))


def name_edges(snapshot: GraphSnapshot) -> NameEdges:
    """Every name edge of ``snapshot`` (see the module docstring)."""

    def build() -> NameEdges:
        n_e = snapshot.n_entities
        empty = np.zeros(0, dtype=np.int64)
        ties, mentions = snapshot.ties, snapshot.name_mentions
        if ties is None or mentions is None or not ties.nnz or not mentions.nnz:
            return NameEdges(empty, empty, empty, empty, n_e)
        t = ties.tocsr()
        m = mentions.tocsr()
        t_rows = np.repeat(np.arange(t.shape[0]), np.diff(t.indptr))
        m_rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
        # join the (passage, own entity) and (passage, mentioned entity) lists on the passage
        t_order = np.argsort(t_rows, kind="stable")
        t_p, t_e = t_rows[t_order], t.indices[t_order].astype(np.int64)
        lo = np.searchsorted(t_p, m_rows, side="left")
        hi = np.searchsorted(t_p, m_rows, side="right")
        counts = hi - lo
        rep = np.repeat(np.arange(m_rows.size), counts)
        offs = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        src = t_e[np.repeat(lo, counts) + offs]
        dst = m.indices.astype(np.int64)[rep]
        pas = m_rows[rep].astype(np.int64)
        keep = src != dst
        src, dst, pas = src[keep], dst[keep], pas[keep]
        keys = np.minimum(src, dst) * n_e + np.maximum(src, dst)
        order = np.lexsort((pas, keys))
        return NameEdges(src[order], dst[order], pas[order], keys[order], n_e)

    return cached(snapshot, ("name_edges",), build, synonym_free=True)


def name_adjacency(snapshot: GraphSnapshot, directed: bool = False) -> sp.csr_matrix:
    """(E, E) 0/1 entity adjacency of the name edges: undirected, or ``directed`` (row a, column b: a's document
    mentions b)."""

    def build() -> sp.csr_matrix:
        edges = name_edges(snapshot)
        n = snapshot.n_entities
        adj = sp.coo_matrix((np.ones(edges.size), (edges.src, edges.dst)), shape=(n, n)).tocsr()
        if not directed:
            adj = (adj + adj.T).tocsr()
        adj.data[:] = 1.0
        return adj

    return cached(snapshot, ("name_adjacency", directed), build, synonym_free=True)


def own_passages(snapshot: GraphSnapshot) -> sp.csc_matrix:
    """``ties`` as CSC: column e lists the passages of the document entity e names (empty for other entities)."""
    return cached(snapshot, ("ties_csc",), lambda: sp.csc_matrix(snapshot.ties), synonym_free=True)


def passages_of(snapshot: GraphSnapshot, entity: int) -> list[int]:
    """The passages of the document ``entity`` names (its title or alias), in passage order."""
    ties = own_passages(snapshot)
    if entity >= ties.shape[1]:
        return []
    return ties.indices[ties.indptr[entity] : ties.indptr[entity + 1]].astype(int).tolist()


def has_names(snapshot: GraphSnapshot) -> bool:
    """Whether the store has any name edge (titles that occur in other documents' text)."""
    return name_edges(snapshot).size > 0


def path_adjacency(snapshot: GraphSnapshot, statistical: float, directed: bool = False) -> sp.csr_matrix:
    """(E, E) 0/1 adjacency the path methods walk: the name edges (``directed``: only from the mentioning document
    to the name it mentions), plus the statistical relation and synonym edges (both ways) when ``statistical`` > 0
    (or when the store has no name edges at all)."""

    def build() -> sp.csr_matrix:
        stat = snapshot.adjacency
        assert stat is not None
        if not has_names(snapshot):
            return stat.tocsr()
        adj = name_adjacency(snapshot, directed)
        if statistical > 0:
            adj = (adj + stat).tocsr()
            adj.data[:] = 1.0
        return adj

    return cached(snapshot, ("path_adjacency", statistical > 0, directed), build)


def _ties_csr(snapshot: GraphSnapshot) -> sp.csr_matrix | None:
    """``ties`` as CSR (row p lists the document entities of passage p's document), None without any tie."""
    ties = snapshot.ties
    if ties is None or not ties.nnz:
        return None
    return cached(snapshot, ("ties_csr",), ties.tocsr, synonym_free=True)


def tied_entities(snapshot: GraphSnapshot, passages: list[int]) -> list[int]:
    """The document entities (title, aliases) tied to ``passages``, in passage order."""
    t = _ties_csr(snapshot)
    if t is None:
        return []
    out: list[int] = []
    for p in passages:
        for e in t.indices[t.indptr[p] : t.indptr[p + 1]].tolist():
            if e not in out:
                out.append(int(e))
    return out


def name_incidence(snapshot: GraphSnapshot) -> sp.csr_matrix:
    """(E, M) 0/1 incidence of the name edges: row e lists the name-edge rows with e at either end."""

    def build() -> sp.csr_matrix:
        edges = name_edges(snapshot)
        rows = np.concatenate([edges.src, edges.dst])
        cols = np.concatenate([np.arange(edges.size)] * 2)
        inc = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(snapshot.n_entities, edges.size))
        inc.data[:] = 1.0
        return inc

    return cached(snapshot, ("name_incidence",), build, synonym_free=True)


def best_per_pair(edges: NameEdges, rows: np.ndarray, passage_scores: np.ndarray | None) -> np.ndarray:
    """Of the name-edge ``rows``, the one per unordered entity pair whose passage scores best (ties: the lowest
    row; without scores the lowest row), in pair-key order."""
    rows = np.unique(np.asarray(rows, dtype=np.int64))
    if rows.size == 0:
        return rows
    score = passage_scores[edges.passage[rows]] if passage_scores is not None else np.zeros(rows.size)
    rows = rows[np.lexsort((rows, -score, edges.keys[rows]))]
    keys = edges.keys[rows]
    first = np.ones(rows.size, dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    return rows[first]


def mention_sentence(snapshot: GraphSnapshot, row: int) -> str:
    """The sentence of name edge ``row``'s passage that names its mentioned entity (the passage's first sentence
    when the name is not found verbatim, e.g. an alias matched across punctuation)."""
    edges = name_edges(snapshot)
    text = snapshot.chunk_texts[int(edges.passage[row])]
    spans = split_sentences(text) or [(0, len(text))]
    at = text.lower().find(snapshot.entity_names[int(edges.dst[row])].lower())
    start, end = next(((s, e) for s, e in spans if s <= at < e), spans[0]) if at >= 0 else spans[0]
    return " ".join(text[start:end].split())


def best_passage(passages: list[int], passage_scores: np.ndarray) -> int:
    """The passage of the non-empty ``passages`` that scores best in ``passage_scores`` (ties: the lowest)."""
    return max(passages, key=lambda p: (float(passage_scores[p]), -p))


def nearest_own_passage(snapshot: GraphSnapshot, entity: int, passage_scores: np.ndarray) -> int | None:
    """The passage of the document ``entity`` names that scores best in ``passage_scores`` (ties: the first), or
    None when it names no document (Path Pooling's tail passage, ``pooling._stands_for``)."""
    own = passages_of(snapshot, entity)
    return best_passage(own, passage_scores) if own else None
