"""LEGO-GraphRAG subgraph extraction: query seed entities, SBE-PPR and SAE-EEMs (LEGO appendix B.1, B.7).

- ``query_seeds``: the query's start entities (the papers' "topic entities"); we have no entity linker, so they are
  the entities the query names (agent keywords, then the query's n-grams), else the entities nearest by cosine.
- SBE-PPR: personalised PageRank over the entity graph from the seeds; keep the top ``max_ent`` entities and every
  relation among them (Table 1: max_ent = 1000).
- SAE-EEMs: the top ``max_edge`` triples by cos(query, triple) (Table 1: max_edge = 64), with the seeds (the nodes
  most similar to the query), merged with the one-hop neighbourhood of each of those nodes (B.7 (3)).

Both return an ``ExtractedSubgraph`` whose edge list is the only graph the path modules see; nothing builds a graph
of the whole snapshot per query (the sparse matrices used here are cached on the snapshot).

The graph (issue 23, ``EdgeLayers``): the statistical relation (and synonym) edges and/or the name edges
(namegraph: a's document has a passage that mentions b). A name edge is a triple (a, mentions, b) coded
``name_code(m)`` (m its ``NameEdges`` row); one per entity pair is kept, the row whose passage is nearest the query,
and SAE-EEMs scores it by cos(query, that passage), the naive triple scorer with the passage as the triple's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.numeric.parallel import SparseRows, degree_order, threads
from pathweaver.retrieval.graphs import cached
from pathweaver.retrieval.keywords import matched_entities, question_names
from pathweaver.retrieval.namegraph import (
    best_per_pair,
    has_names,
    name_adjacency,
    name_edges,
    name_incidence,
)
from pathweaver.retrieval.pagerank import COARSE_TOL, personalized_pagerank
from pathweaver.retrieval.seeds import top_entities, top_indices, top_triples
from pathweaver.retrieval.types import SYNONYM_EDGE, Query
from pathweaver.store.snapshot import GraphSnapshot
from pathweaver.text import normalize

SYNONYM = SYNONYM_EDGE  # the code of a synonym edge (as in ``PathHit.relations``)


def name_code(row: int) -> int:
    """The edge code of name-edge row ``row`` (codes <= -2; relations are >= 0, ``SYNONYM`` is -1)."""
    return -2 - int(row)


def name_row(code: int) -> int:
    """The name-edge row behind edge code ``code`` (``is_name(code)``)."""
    return -2 - int(code)


def is_name(code: int) -> bool:
    return code <= -2


@dataclass(frozen=True)
class EdgeLayers:
    """Which edges LEGO's graph has: the statistical relations (with ``synonyms``) and the name edges. A store
    without name edges walks the statistical ones whatever is asked; asking for neither is an error."""

    statistical: bool = True
    synonyms: bool = True
    names: bool = True

    def on(self, snapshot: GraphSnapshot) -> EdgeLayers:
        """The layers this snapshot has: names only where it has name edges, statistical when asked or alone."""
        if not (self.statistical or self.names):
            raise ConfigError("lego needs the statistical edges, the name edges or both")
        names = self.names and has_names(snapshot)
        stat = self.statistical or not names
        return EdgeLayers(stat, self.synonyms and stat, names)


STATISTICAL_ONLY = EdgeLayers(names=False)


def edge_ends(snapshot: GraphSnapshot, code: int) -> tuple[int, int]:
    """(source, destination) entities of a relation or name edge code (a synonym edge has no code of its own)."""
    if is_name(code):
        edges = name_edges(snapshot)
        return int(edges.src[name_row(code)]), int(edges.dst[name_row(code)])
    return int(snapshot.rel_src[code]), int(snapshot.rel_dst[code])


@dataclass
class ExtractedSubgraph:
    """Entities and edges kept by an extraction module. ``edges`` are ``(u, v, relation)`` with ``relation`` a
    relation index (``u``/``v`` are its source/destination) or ``SYNONYM``; ``scores`` rank the entities (PPR mass
    for SBE, best incident triple cosine for SAE)."""

    entities: list[int]
    edges: list[tuple[int, int, int]]
    scores: dict[int, float] = field(default_factory=dict)

    def neighbours(self) -> dict[int, list[tuple[int, int]]]:
        """Undirected adjacency lists ``entity -> [(neighbour, relation)]``, sorted for determinism."""
        adj: dict[int, list[tuple[int, int]]] = {e: [] for e in self.entities}
        for u, v, r in self.edges:
            adj.setdefault(u, []).append((v, r))
            adj.setdefault(v, []).append((u, r))
        for lst in adj.values():
            lst.sort(key=lambda item: (item[0], item[1] if item[1] >= 0 else (1 << 62) - item[1]))
        return adj

    @property
    def relations(self) -> list[int]:
        return [r for _, _, r in self.edges if r >= 0]


def query_seeds(snapshot: GraphSnapshot, query: Query, n: int, named_first: Sequence[int] | None = None) -> list[int]:
    """Up to ``n`` start entities: the entities named by ``query.keywords``, then the document names the query
    mentions, then its n-grams; when the
    query names none, the ``n`` entities nearest to ``query.vec`` (ours: the appendix assumes given topic
    entities, so named entities are trusted and the cosine fallback only runs when there are none).
    ``named_first``: the names the question mentions when the caller has them (``keywords.query_names``, with
    NER on the question), else ``keywords.question_names``."""
    if n < 1:
        raise ConfigError(f"seed_entities must be at least 1, got {n}")
    seeds: list[int] = []
    named = [snapshot.entity_index.get(normalize(k)) for k in query.keywords]
    # document names the query mentions (extract/names.py) come before its n-gram matches
    mentioned = list(named_first) if named_first is not None else question_names(snapshot, query.text)
    named += (mentioned + matched_entities(snapshot, query.text)) if query.text else []
    for ent in named:
        if ent is not None and ent not in seeds and len(seeds) < n:
            seeds.append(ent)
    return seeds or [ent for ent, _ in top_entities(snapshot, query.vec, n)]


def graph_seeds(snapshot: GraphSnapshot, qvec: np.ndarray, seeds: list[int], n: int, layers: EdgeLayers
                ) -> list[int]:
    """``seeds``, and when none of them lies on an edge of the graph of ``layers``, the ``n`` entities on an edge
    nearest to ``qvec`` after them (ours, for SBE-PPR: the appendix assumes topic entities in the graph; a named
    entity no edge touches, e.g. a name no document is titled, starts no walk; ``query_seeds``' cosine fallback).
    SAE-EEMs needs none: its core is the query's top triples, and a path starts from its best-scored entity."""
    if n < 1 or not seeds or snapshot.n_entities == 0:
        return seeds
    _, dangling = entity_transition(snapshot, layers.on(snapshot))
    if not dangling.all() and any(not dangling[s] for s in seeds):
        return seeds
    for k in (64 * n, 1024 * n):  # a widening search: most entities nearest the query may have no edge
        near = [e for e, _ in top_entities(snapshot, qvec, k) if not dangling[e] and e not in seeds]
        if near or k >= snapshot.n_entities:
            return seeds + near[:n]
    return seeds


def entity_transition(snapshot: GraphSnapshot, layers: EdgeLayers) -> tuple[SparseRows, np.ndarray]:
    """Column-stochastic (E, E) walk over the undirected entity graph of ``layers`` (as resolved by
    ``EdgeLayers.on``; weight 1 per distinct neighbour), its nodes renumbered busiest first, and its dangling
    mask; cached."""

    def build() -> tuple[SparseRows, np.ndarray]:
        n = snapshot.n_entities
        empty = np.zeros(0, dtype=np.int64)
        src = snapshot.rel_src.astype(np.int64) if layers.statistical else empty
        dst = snapshot.rel_dst.astype(np.int64) if layers.statistical else empty
        if layers.synonyms:
            src = np.concatenate([src, snapshot.syn_a.astype(np.int64)])
            dst = np.concatenate([dst, snapshot.syn_b.astype(np.int64)])
        keep = src != dst
        rows, cols = np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])
        adj = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
        if layers.names:
            adj = (adj + name_adjacency(snapshot)).tocsr()
        adj.data[:] = 1.0
        degree = np.asarray(adj.sum(axis=0)).ravel()
        inv = np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)
        transition = (adj @ sp.diags(inv)).tocsr()
        return SparseRows(transition, order=degree_order(transition)), degree <= 0

    return cached(snapshot, ("lego_entity_transition", layers, threads()), build)


def _incidence(snapshot: GraphSnapshot) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Cached (E, R) relation and (E, S) synonym incidence matrices: row e lists the edges touching entity e."""

    def build() -> tuple[sp.csr_matrix, sp.csr_matrix]:
        n = snapshot.n_entities

        def inc(a: np.ndarray, b: np.ndarray) -> sp.csr_matrix:
            idx = np.arange(len(a), dtype=np.int64)
            rows = np.concatenate([a, b]).astype(np.int64)
            m = sp.csr_matrix((np.ones(2 * len(a)), (rows, np.concatenate([idx, idx]))), shape=(n, len(a)))
            m.data[:] = 1.0
            return m

        return inc(snapshot.rel_src, snapshot.rel_dst), inc(snapshot.syn_a, snapshot.syn_b)

    return cached(snapshot, ("lego_incidence",), build)


def _name_triples(snapshot: GraphSnapshot, rows: np.ndarray, passage_scores: np.ndarray | None
                  ) -> list[tuple[int, int, int]]:
    """Name edges of ``rows`` as ``(a, b, name_code)``, one per entity pair (``namegraph.best_per_pair``)."""
    edges = name_edges(snapshot)
    best = best_per_pair(edges, rows, passage_scores)
    return [(int(edges.src[m]), int(edges.dst[m]), name_code(int(m))) for m in best]


def _edges_among(snapshot: GraphSnapshot, keep: np.ndarray, layers: EdgeLayers,
                 passage_scores: np.ndarray | None = None) -> list[tuple[int, int, int]]:
    """The edges of ``layers`` with both ends in the boolean entity mask ``keep``; self-loops dropped."""
    edges: list[tuple[int, int, int]] = []
    src, dst = snapshot.rel_src, snapshot.rel_dst
    if layers.statistical and len(src):
        edges += [(int(src[r]), int(dst[r]), int(r)) for r in np.flatnonzero(keep[src] & keep[dst] & (src != dst))]
    if layers.synonyms and len(snapshot.syn_a):
        a, b = snapshot.syn_a, snapshot.syn_b
        edges += [(int(a[s]), int(b[s]), SYNONYM) for s in np.flatnonzero(keep[a] & keep[b] & (a != b))]
    if layers.names:
        names = name_edges(snapshot)
        edges += _name_triples(snapshot, np.flatnonzero(keep[names.src] & keep[names.dst]), passage_scores)
    return edges


def sbe_ppr(
    snapshot: GraphSnapshot,
    seeds: list[int],
    max_ent: int,
    damping: float,
    tol: float,
    max_iter: int,
    layers: EdgeLayers = STATISTICAL_ONLY,
    coarse_tol: float = COARSE_TOL,
    passage_scores: np.ndarray | None = None,
) -> ExtractedSubgraph:
    """SBE-PPR (LEGO Table 1, No.1): PPR from the seeds (uniform reset over them) over the edges of ``layers``,
    keep the ``max_ent`` entities with the highest positive PPR mass, and the edges among them (a name edge per
    pair: the row whose passage scores best in ``passage_scores``)."""
    if max_ent < 1:
        raise ConfigError(f"max_ent must be at least 1, got {max_ent}")
    n = snapshot.n_entities
    if n == 0 or not seeds:
        return ExtractedSubgraph([], [])
    reset = np.zeros(n)
    reset[seeds] = 1.0
    layers = layers.on(snapshot)
    rows, dangling = entity_transition(snapshot, layers)
    scores = personalized_pagerank(rows, reset, damping, tol, max_iter, dangling, coarse_tol)
    top = [int(e) for e in top_indices(scores, max_ent) if scores[e] > 0.0]
    keep = np.zeros(n, dtype=bool)
    keep[top] = True
    return ExtractedSubgraph(
        top, _edges_among(snapshot, keep, layers, passage_scores), {e: float(scores[e]) for e in top}
    )


def sae_eem(
    snapshot: GraphSnapshot,
    qvec: np.ndarray,
    seeds: list[int],
    max_edge: int,
    hops: int = 1,
    layers: EdgeLayers = STATISTICAL_ONLY,
    passage_scores: np.ndarray | None = None,
) -> ExtractedSubgraph:
    """SAE-EEMs: the top ``max_edge`` triples by cos(query, triple vector) (Table 1, No.2-11); their endpoints and
    the seeds form the core, merged with the ``hops``-hop neighbourhood of every core node (B.7 (3): "include the
    one-hop neighbors of each retrieved node and merge them"). Kept edges: the top triples plus every edge that
    touches a node less than ``hops`` hops from the core. Entity score = best cosine of a kept incident triple.
    With name edges in ``layers`` a name triple competes for the top by its passage's cosine in
    ``passage_scores`` (cos(query, passage), required then), and one name edge per pair is kept."""
    if max_edge < 1:
        raise ConfigError(f"max_edge must be at least 1, got {max_edge}")
    if hops < 0:
        raise ConfigError(f"sae_hops must be >= 0, got {hops}")
    layers = layers.on(snapshot)
    if layers.names and passage_scores is None:
        raise ConfigError("sae_eem over name edges needs the query's passage scores")
    names = name_edges(snapshot)
    ranked: list[tuple[float, int]] = []
    if layers.statistical:
        ranked += [(c, r) for r, c in top_triples(snapshot, qvec, max_edge)
                   if snapshot.rel_src[r] != snapshot.rel_dst[r]]
    name_cos = np.zeros(0)
    if layers.names:
        name_cos = np.asarray(passage_scores, dtype=np.float64)[names.passage]
        # a few rows per kept pair, so that ``max_edge`` distinct pairs survive the one-per-pair cut (ours)
        rows = best_per_pair(names, top_indices(name_cos, 4 * max_edge), passage_scores)
        ranked += [(float(name_cos[m]), name_code(int(m))) for m in rows]
    top = [code for _, code in sorted(ranked, key=lambda item: (-item[0], item[1]))[:max_edge]]
    rel_set: set[int] = {r for r in top if r >= 0}
    name_set: set[int] = {name_row(c) for c in top if is_name(c)}
    syn_set: set[int] = set()
    nodes: set[int] = set(seeds)
    for code in top:
        nodes.update(edge_ends(snapshot, code))
    rel_inc, syn_inc = _incidence(snapshot)
    name_inc = name_incidence(snapshot) if layers.names else None
    frontier = sorted(nodes)
    for _ in range(hops):
        if not frontier:
            break
        new_rel = [
            int(r) for r in np.unique(rel_inc[frontier].indices) if snapshot.rel_src[r] != snapshot.rel_dst[r]
        ] if layers.statistical else []
        new_syn = [int(s) for s in np.unique(syn_inc[frontier].indices)] if layers.synonyms else []
        new_name = best_per_pair(names, name_inc[frontier].indices, passage_scores).tolist() \
            if name_inc is not None else []
        rel_set.update(new_rel)
        syn_set.update(new_syn)
        name_set.update(new_name)
        reached = {int(snapshot.rel_src[r]) for r in new_rel} | {int(snapshot.rel_dst[r]) for r in new_rel}
        reached |= {int(snapshot.syn_a[s]) for s in new_syn} | {int(snapshot.syn_b[s]) for s in new_syn}
        reached |= {int(names.src[m]) for m in new_name} | {int(names.dst[m]) for m in new_name}
        frontier = sorted(reached - nodes)
        nodes |= reached
    rels = sorted(rel_set)
    edges = [(int(snapshot.rel_src[r]), int(snapshot.rel_dst[r]), r) for r in rels]
    edges += [(int(snapshot.syn_a[s]), int(snapshot.syn_b[s]), SYNONYM) for s in sorted(syn_set)]
    edges += _name_triples(snapshot, np.array(sorted(name_set), dtype=np.int64), passage_scores)
    scores = {e: 0.0 for e in nodes}
    if rels:
        cos = snapshot.rel_vecs[rels] @ qvec.astype(snapshot.rel_vecs.dtype, copy=False)
        for r, c in zip(rels, cos.tolist(), strict=True):
            for e in (int(snapshot.rel_src[r]), int(snapshot.rel_dst[r])):
                scores[e] = max(scores[e], float(c))
    for u, v, code in edges:
        if is_name(code):
            for e in (u, v):
                scores[e] = max(scores[e], float(name_cos[name_row(code)]))
    return ExtractedSubgraph(sorted(nodes), edges, scores)
