"""LEGO-GraphRAG subgraph extraction: query seed entities, SBE-PPR and SAE-EEMs (LEGO appendix B.1, B.7).

- ``query_seeds``: the query's start entities (the papers' "topic entities"); we have no entity linker, so they are
  the entities the query names (agent keywords, then the query's n-grams), else the entities nearest by cosine.
- SBE-PPR: personalised PageRank over the entity graph from the seeds; keep the top ``max_ent`` entities and every
  relation among them (Table 1: max_ent = 1000).
- SAE-EEMs: the top ``max_edge`` triples by cos(query, triple) (Table 1: max_edge = 64), with the seeds (the nodes
  most similar to the query), merged with the one-hop neighbourhood of each of those nodes (B.7 (3)).

Both return an ``ExtractedSubgraph`` whose edge list is the only graph the path modules see; nothing builds a graph
of the whole snapshot per query (the sparse matrices used here are cached on the snapshot).
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
from pathweaver.retrieval.ppr import COARSE_TOL, personalized_pagerank
from pathweaver.retrieval.seeds import top_entities, top_indices, top_triples
from pathweaver.retrieval.types import Query
from pathweaver.store.snapshot import GraphSnapshot
from pathweaver.text import normalize

SYNONYM = -1  # relation index of a synonym edge (as in ``PathHit.relations``)


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
            lst.sort(key=lambda item: (item[0], item[1] if item[1] >= 0 else 1 << 62))
        return adj

    @property
    def relations(self) -> list[int]:
        return [r for _, _, r in self.edges if r != SYNONYM]


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


def entity_transition(snapshot: GraphSnapshot, use_synonyms: bool) -> tuple[SparseRows, np.ndarray]:
    """Column-stochastic (E, E) walk over the undirected entity graph (relation, optionally synonym, edges with
    weight 1 per distinct neighbour), its nodes renumbered busiest first, and its dangling mask; cached."""

    def build() -> tuple[SparseRows, np.ndarray]:
        n = snapshot.n_entities
        src, dst = snapshot.rel_src.astype(np.int64), snapshot.rel_dst.astype(np.int64)
        if use_synonyms:
            src = np.concatenate([src, snapshot.syn_a.astype(np.int64)])
            dst = np.concatenate([dst, snapshot.syn_b.astype(np.int64)])
        keep = src != dst
        rows, cols = np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])
        adj = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
        adj.data[:] = 1.0
        degree = np.asarray(adj.sum(axis=0)).ravel()
        inv = np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)
        transition = (adj @ sp.diags(inv)).tocsr()
        return SparseRows(transition, order=degree_order(transition)), degree <= 0

    return cached(snapshot, ("lego_entity_transition", use_synonyms, threads()), build)


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


def _edges_among(snapshot: GraphSnapshot, keep: np.ndarray, use_synonyms: bool) -> list[tuple[int, int, int]]:
    """Relation (and synonym) edges with both ends in the boolean entity mask ``keep``; self-loops dropped."""
    src, dst = snapshot.rel_src, snapshot.rel_dst
    rel = np.flatnonzero(keep[src] & keep[dst] & (src != dst)) if len(src) else np.zeros(0, dtype=np.int64)
    edges = [(int(src[r]), int(dst[r]), int(r)) for r in rel]
    if use_synonyms and len(snapshot.syn_a):
        a, b = snapshot.syn_a, snapshot.syn_b
        edges += [(int(a[s]), int(b[s]), SYNONYM) for s in np.flatnonzero(keep[a] & keep[b] & (a != b))]
    return edges


def sbe_ppr(
    snapshot: GraphSnapshot,
    seeds: list[int],
    max_ent: int,
    damping: float,
    tol: float,
    max_iter: int,
    use_synonyms: bool = True,
    coarse_tol: float = COARSE_TOL,
) -> ExtractedSubgraph:
    """SBE-PPR (LEGO Table 1, No.1): PPR from the seeds (uniform reset over them), keep the ``max_ent`` entities
    with the highest positive PPR mass, and the edges among them."""
    if max_ent < 1:
        raise ConfigError(f"max_ent must be at least 1, got {max_ent}")
    n = snapshot.n_entities
    if n == 0 or not seeds:
        return ExtractedSubgraph([], [])
    reset = np.zeros(n)
    reset[seeds] = 1.0
    rows, dangling = entity_transition(snapshot, use_synonyms)
    scores = personalized_pagerank(rows, reset, damping, tol, max_iter, dangling, coarse_tol)
    top = [int(e) for e in top_indices(scores, max_ent) if scores[e] > 0.0]
    keep = np.zeros(n, dtype=bool)
    keep[top] = True
    return ExtractedSubgraph(
        top, _edges_among(snapshot, keep, use_synonyms), {e: float(scores[e]) for e in top}
    )


def sae_eem(
    snapshot: GraphSnapshot,
    qvec: np.ndarray,
    seeds: list[int],
    max_edge: int,
    hops: int = 1,
    use_synonyms: bool = True,
) -> ExtractedSubgraph:
    """SAE-EEMs: the top ``max_edge`` triples by cos(query, triple vector) (Table 1, No.2-11); their endpoints and
    the seeds form the core, merged with the ``hops``-hop neighbourhood of every core node (B.7 (3): "include the
    one-hop neighbors of each retrieved node and merge them"). Kept edges: the top triples plus every edge that
    touches a node less than ``hops`` hops from the core. Entity score = best cosine of a kept incident triple."""
    if max_edge < 1:
        raise ConfigError(f"max_edge must be at least 1, got {max_edge}")
    if hops < 0:
        raise ConfigError(f"sae_hops must be >= 0, got {hops}")
    top = [r for r, _ in top_triples(snapshot, qvec, max_edge) if snapshot.rel_src[r] != snapshot.rel_dst[r]]
    rel_set: set[int] = set(top)
    syn_set: set[int] = set()
    nodes: set[int] = set(seeds)
    for r in top:
        nodes.update((int(snapshot.rel_src[r]), int(snapshot.rel_dst[r])))
    rel_inc, syn_inc = _incidence(snapshot)
    frontier = sorted(nodes)
    for _ in range(hops):
        if not frontier:
            break
        new_rel = [
            int(r) for r in np.unique(rel_inc[frontier].indices) if snapshot.rel_src[r] != snapshot.rel_dst[r]
        ]
        new_syn = [int(s) for s in np.unique(syn_inc[frontier].indices)] if use_synonyms else []
        rel_set.update(new_rel)
        syn_set.update(new_syn)
        reached = {int(snapshot.rel_src[r]) for r in new_rel} | {int(snapshot.rel_dst[r]) for r in new_rel}
        reached |= {int(snapshot.syn_a[s]) for s in new_syn} | {int(snapshot.syn_b[s]) for s in new_syn}
        frontier = sorted(reached - nodes)
        nodes |= reached
    rels = sorted(rel_set)
    edges = [(int(snapshot.rel_src[r]), int(snapshot.rel_dst[r]), r) for r in rels]
    edges += [(int(snapshot.syn_a[s]), int(snapshot.syn_b[s]), SYNONYM) for s in sorted(syn_set)]
    scores = {e: 0.0 for e in nodes}
    if rels:
        cos = snapshot.rel_vecs[rels] @ qvec.astype(snapshot.rel_vecs.dtype, copy=False)
        for r, c in zip(rels, cos.tolist(), strict=True):
            for e in (int(snapshot.rel_src[r]), int(snapshot.rel_dst[r])):
                scores[e] = max(scores[e], float(c))
    return ExtractedSubgraph(sorted(nodes), edges, scores)
