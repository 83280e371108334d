"""AGRAG's Minimum Cost Maximum Influence (MCMI) reasoning subgraph (AGRAG §III-C, Algorithms 2-3, Eq. 10-18).

1. The query is mapped to its top ``k_triples`` (k_a) triples by cos(query, triple) (Eq. 7-8); their entities are
   the terminals, and (ours, issue 23, ``name_seeds`` > 0) so are the document names the question mentions.
   (Eq. 9's LLM triple filter is not applied: no LLM at retrieval.)
2. Node influence s_v is PPR over entities + passages (Eq. 10, ``pagerank.personalized_pagerank``) with AGRAG Eq. 11's
   personalisation: p[u] = 1 for every terminal, 0 elsewhere. The graph is ppr's node space with the name
   layer (``name_links``, ``statistical``: 0 walks the name layer alone on a store with names). Passage scores are
   multiplied by 0.05 afterwards (§III-C after Eq. 12).
3. Edge costs (Eq. 14, ``mcmi_graph.cost_graph``): c_e = (1 − MS(q, f_e)) / 2 with f_e the edge's triple. The paper embeds only relation
   triples; for the other edge kinds we use the nearest vector we store (our choice, documented):
   Contains edge → the passage vector, synonym edge → the normalised sum of the two entity vectors, name link
   passage↔passage → the normalised sum of the two passage vectors. Passages hang off a pseudo node by edges of
   cost ``connector_cost`` = 10 (§III-C after Eq. 14, after HippoRAG 2).
4. MCST: Mehlhorn's Steiner tree over the terminals (Eq. 16, Algorithm 3 lines 1-10), then greedy growth (Eq. 17,
   lines 13-17): the 1-hop neighbour v with the lowest c_(MCMI,v) / s_v joins while that ratio is below
   r(G) = Σ_e c_e / (s_u + s_v) (Eq. 15), r recomputed after each addition.
5. The subgraph is served as text (Eq. 18). Chunks (``chunks``): the walk's passages by influence taking turns
   with AGRAG's hybrid chunks (Eq. 20-21; ours, the default), the subgraph's passages by influence then the
   walk's, or the hybrid chunks alone; hybrid chunks outside the subgraph are marked as back-fill.

Everything runs on a bounded neighbourhood of the terminals (``ball_hops``, ``ball_max_nodes``) so a query never
touches the whole graph; tests/mcmi_twins.py holds networkx twins of ``grow`` and r(G) for hand-built graphs.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.numeric.projection import top_indices
from pathweaver.retrieval.costgraph import (
    COST,
    KIND_PSEUDO,
    KIND_RELATION,
    KINDS,
    CostGraph,
)
from pathweaver.retrieval.graphs import (
    documents_link,
    has_names,
    name_link_matrix,
    node_space_graph,
    relation_passages,
    transition_rows,
)
from pathweaver.retrieval.keywords import NAME_PARTS, query_names
from pathweaver.retrieval.linked import NoteSteps, check_linked_notes
from pathweaver.retrieval.mcmi_graph import cost_graph, neighbourhood, node_label, serialize
from pathweaver.retrieval.namegraph import passages_of
from pathweaver.retrieval.pagerank import COARSE_TOL, personalized_pagerank
from pathweaver.retrieval.seeds import hybrid_chunk_scores, top_triples
from pathweaver.retrieval.steiner import mehlhorn_edges
from pathweaver.retrieval.types import ChunkHit, Query, RetrievalEnv, RetrievalResult, Subgraph, take_turns
from pathweaver.store.snapshot import GraphSnapshot

CHUNK_MODES = ("auto", "turns", "subgraph", "hybrid")


@dataclass
class MCMIParams(NoteSteps):
    """pathweaver's default MCMI: AGRAG §III-C parameters over the name layer too, plus the bounds that keep a
    query local (ours); ``preset = "paper"`` sets AGRAG's graph and chunks (``presets.py``)."""

    k_triples: int = 5  # k_a, raw mapped triples (Eq. 8; §IV-A4: 5, as HippoRAG 2)
    damping: float = 0.5  # d, Eq. 10 (§III-C: 0.5 as HippoRAG 2)
    ppr_tol: float = 1e-7  # §III-C: PPR converges when it changes less than 1e-7
    ppr_max_iter: int = 100
    ppr_coarse_tol: float = COARSE_TOL  # ours: float32 PPR steps down to this change first (0 = off; ppr.py)
    passage_score_factor: float = 0.05  # §III-C after Eq. 12: passage-node PPR scores × 0.05
    connector_cost: float = 10.0  # §III-C after Eq. 14: pseudo edges cost 10
    cycle_edges: bool = True  # Eq. 17: v joins with all its edges into the subgraph (Fig. 2 cycles)
    ball_hops: int = 2  # ours: the subgraph is searched within this many hops of the terminals
    ball_max_nodes: int = 2000  # ours: per-hop growth keeps the highest-influence nodes up to this total
    max_expansion: int = 50  # ours: at most this many nodes join in the greedy step (paper: none)
    hybrid_pool_min: int = 50  # hybrid candidates from each of dense and BM25 (as seeds.HybridParams)
    hybrid_pool_factor: int = 4  # ... or this many times top_k when larger (as seeds.HybridParams)
    # ours (issue 23): the document names the query mentions (extract/names.py) are terminals too, ahead of the
    # mapped triples' entities; each gets p = 1 (Eq. 11) like a mapped triple's entity
    name_seeds: float = 1.0
    name_parts: int = NAME_PARTS  # names the question calls by their last word, as ppr's (0 = off; ours)
    # ours (issue 23), the graph walked and searched, as ppr's: passage<->passage name links at this weight
    # (0 = none) and the statistical layer's weight against the name layer (0 = the name layer alone, when the
    # store has name mentions; 1 = AGRAG's statistical graph alone)
    name_links: float = 3.0
    statistical: float = 0.0
    # "turns" (ours): AGRAG hands the LLM both its graph retrieval and its k_r hybrid chunks (Step 3, Eq. 20-21),
    # so the passages by node influence s_v (Eq. 10-13) and the hybrid chunks take turns, an influence passage
    # first; "subgraph" (ours): the passages of the MCMI subgraph (and those its relations come from) by s_v,
    # then the walk's highest-influence passages; "hybrid": AGRAG Eq. 20's k_r hybrid chunks alone; "auto"
    # (default): "turns" when the walk is over the name layer and the store's documents name each other
    # (``graphs.documents_link``), else "hybrid", since n-gram walks alone pick passages poorly. Whatever the
    # mode, a hybrid chunk the MCMI subgraph did not reach is reported as a back-fill
    chunks: str = "auto"

    def validate(self) -> None:
        check_linked_notes("mcmi", self.linked_notes)
        if self.chunks not in CHUNK_MODES:
            raise ConfigError(f"mcmi chunks must be one of {CHUNK_MODES}, got {self.chunks!r}")
        if self.name_links < 0 or not 0.0 <= self.statistical <= 1.0:
            raise ConfigError("mcmi name_links must be >= 0 and statistical in [0, 1]")
        if self.k_triples < 1:
            raise ConfigError(f"mcmi k_triples must be >= 1, got {self.k_triples}")
        if not 0.0 <= self.damping < 1.0:
            raise ConfigError(f"mcmi damping must be in [0, 1), got {self.damping}")
        if self.ppr_tol <= 0 or self.ppr_max_iter < 1 or self.ppr_coarse_tol < 0:
            raise ConfigError("mcmi ppr_tol must be > 0, ppr_coarse_tol >= 0 and ppr_max_iter >= 1")
        if min(self.passage_score_factor, self.connector_cost, self.name_seeds, self.name_parts) < 0:
            raise ConfigError("mcmi passage_score_factor, connector_cost, name_seeds and name_parts must be >= 0")
        if (
            self.ball_hops < 1
            or self.ball_max_nodes < 2
            or self.max_expansion < 0
            or self.hybrid_pool_min < 1
            or self.hybrid_pool_factor < 1
        ):
            raise ConfigError(
                "mcmi needs ball_hops >= 1, ball_max_nodes >= 2, max_expansion >= 0, hybrid_pool_min/factor >= 1"
            )


def _term(cost: float, s_u: float, s_v: float) -> float:
    denom = s_u + s_v
    return cost / denom if denom > 0 else float("inf")


def _skip_codes(skip_kinds: Iterable[str]) -> set[int]:
    return {KINDS.index(k) for k in skip_kinds if k in KINDS}


def edges_ratio(graph: CostGraph, edges: Iterable[int], skip: set[int]) -> float:
    """AGRAG Eq. 15 over ``edges`` of ``graph``: Σ c_(u,v) / (s_u + s_v), leaving out edges whose kind code is in
    ``skip``. A term whose scores sum to 0 is infinite."""
    s = graph.scores
    return float(
        sum(
            _term(float(graph.cost[e]), float(s[graph.head[e]]), float(s[graph.tail[e]]))
            for e in edges
            if int(graph.kind[e]) not in skip
        )
    )



@dataclass
class Growth:
    """The greedy growth on a ``CostGraph``: the subgraph's nodes and edges, the nodes added (in order), and r(G)
    of the Steiner tree and of the result."""

    nodes: list[int]
    edges: list[int]
    added: list[int] = field(default_factory=list)
    mcst_ratio: float = 0.0
    ratio: float = 0.0


def grow(
    graph: CostGraph,
    tree_nodes: Iterable[int],
    tree_edges: Iterable[int],
    max_added: int,
    cycle_edges: bool = True,
    skip_kinds: Iterable[str] = (KIND_PSEUDO,),
) -> Growth:
    """AGRAG Algorithm 3 lines 13-17 / Eq. 17: grow the tree inside ``graph``.

    Each neighbour v outside the subgraph is ranked by c_(MCMI,v) / s_v, its cheapest edge into the subgraph over
    its own influence. The lowest joins while that ratio is strictly below r(G) (Eq. 15, recomputed after each
    addition); with ``cycle_edges`` all of v's edges into the subgraph join with it (except ``skip_kinds``), else
    only the cheapest. Nodes with s_v <= 0 never join. Stops after ``max_added`` additions.
    """
    skip = _skip_codes(skip_kinds)
    indptr, neighbour, edge_of = graph.adjacency()
    scores, labels = graph.scores, graph.labels
    edges = list(dict.fromkeys(tree_edges))
    nodes = list(dict.fromkeys([*tree_nodes, *(int(x) for e in edges for x in (graph.head[e], graph.tail[e]))]))
    inside = np.zeros(graph.n_nodes, dtype=bool)
    inside[nodes] = True
    r = edges_ratio(graph, edges, skip)
    result = Growth(nodes, edges, mcst_ratio=r, ratio=r)
    heap: list[tuple[float, str, int, int, int]] = []

    def push_neighbours(u: int) -> None:
        for j in range(int(indptr[u]), int(indptr[u + 1])):
            v = int(neighbour[j])
            s_v = float(scores[v])
            if not inside[v] and s_v > 0:
                e = int(edge_of[j])
                heapq.heappush(heap, (float(graph.cost[e]) / s_v, repr(labels[v]), v, u, e))

    for node in nodes:
        push_neighbours(node)
    while heap and len(result.added) < max_added:
        ratio_v, _, v, u, e_uv = heapq.heappop(heap)
        if inside[v]:
            continue
        if not ratio_v < r:  # the lowest ratio no longer beats r(G): stop (Algorithm 3 line 14)
            break
        inside[v] = True
        nodes.append(v)
        joins = [e_uv]
        if cycle_edges:
            span = range(int(indptr[v]), int(indptr[v + 1]))
            joins += [
                int(edge_of[j])
                for j in span
                if inside[neighbour[j]] and neighbour[j] != u and int(graph.kind[edge_of[j]]) not in skip
            ]
        edges.extend(joins)
        r += edges_ratio(graph, joins, skip)
        result.added.append(v)
        push_neighbours(v)
    result.ratio = r
    return result




def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 2)


def _rank_chunks(
    env: RetrievalEnv, query: Query, top_k: int, params: MCMIParams, touched: set[int]
) -> list[ChunkHit]:
    """AGRAG Eq. 20-21 hybrid chunks (top_k = k_r)."""
    scores = hybrid_chunk_scores(env, query, max(params.hybrid_pool_min, params.hybrid_pool_factor * top_k))
    ranked = sorted(scores.items(), key=lambda it: (-it[1], it[0]))
    # AGRAG's chunks are hybrid ones (Eq. 20); those the subgraph does not touch are counted as a back-fill
    return [ChunkHit(int(p), float(s), backfill=int(p) not in touched) for p, s in ranked[:top_k]]


def _subgraph_chunks(
    env: RetrievalEnv, query: Query, top_k: int, params: MCMIParams, touched: set[int], passage_scores: np.ndarray,
) -> tuple[list[ChunkHit], int]:
    """The subgraph's passages by node influence s_v (ties: passage index), then the walk's highest-influence
    passages, then hybrid chunks (a back-fill): the chunks and how many came from the walk beyond the subgraph."""
    order = sorted(touched, key=lambda p: (-float(passage_scores[p]), p))[:top_k]
    hits = [ChunkHit(int(p), float(passage_scores[p])) for p in order]
    seen = set(order)
    walked = 0
    if len(hits) < top_k and passage_scores.size:
        for p in top_indices(passage_scores, top_k + len(hits)).tolist():
            if len(hits) >= top_k:
                break
            if p not in seen and passage_scores[p] > 0:
                hits.append(ChunkHit(int(p), float(passage_scores[p])))
                seen.add(p)
                walked += 1
    if len(hits) < top_k:
        for hit in _rank_chunks(env, query, top_k + len(hits), params, set()):
            if len(hits) >= top_k:
                break
            if hit.passage not in seen:
                hits.append(hit)
                seen.add(hit.passage)
    return hits, walked


def _turns(env: RetrievalEnv, query: Query, top_k: int, params: MCMIParams, touched: set[int],
           passage_scores: np.ndarray) -> list[ChunkHit]:
    """The passages by node influence s_v and AGRAG's hybrid chunks (Eq. 20-21) taking turns, an influence
    passage first, each passage once; hybrid chunks neither in the MCMI subgraph nor among those influence
    passages are marked as back-fill."""
    walked = [ChunkHit(int(p), float(passage_scores[p])) for p in top_indices(passage_scores, top_k).tolist()
              if passage_scores[p] > 0]
    mine = {hit.passage for hit in walked}
    return take_turns(walked, _rank_chunks(env, query, 2 * top_k, params, touched | mine), top_k)


def _layers(snap: GraphSnapshot, params: MCMIParams) -> tuple[float, float]:
    """(name_links, statistical) of the graph walked: the statistical graph alone on a store without names."""
    return (params.name_links, params.statistical) if has_names(snap) else (0.0, 1.0)


def _contains_layer(snap: GraphSnapshot, statistical: float) -> sp.csr_matrix:
    """The Contains edges of the graph walked: name mentions and ties, plus the statistical mentions when
    ``statistical`` > 0 (structure only: the costs come from the passage vector)."""
    assert snap.name_mentions is not None and snap.ties is not None
    names = snap.name_mentions.maximum(snap.ties).tocsr()
    if statistical > 0:
        stat = snap.statistical_mentions if snap.statistical_mentions is not None else snap.mentions
        names = names.maximum(stat).tocsr()
    return names


def eq11_scores(snap: GraphSnapshot, terminals: list[int], params: MCMIParams) -> np.ndarray:
    """AGRAG Eq. 10-11: PPR over the node space with p[u] = 1 for every terminal u (the nodes of the mapped
    triples, and the names the query mentions), 0 elsewhere; sums to 1."""
    name_links, statistical = _layers(snap, params)
    graph = node_space_graph(snap, "count", "count", name_links, statistical)
    rows = transition_rows(snap, "count", "count", name_links, statistical)
    reset = np.zeros(snap.n_entities + snap.n_passages, dtype=np.float64)
    reset[terminals] = 1.0
    return personalized_pagerank(rows, reset, params.damping, params.ppr_tol, params.ppr_max_iter, graph.dangling,
                                 params.ppr_coarse_tol)


def mcmi_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: MCMIParams) -> RetrievalResult:
    """AGRAG graph retrieval: the MCMI subgraph (as text, Eq. 18) and ``top_k`` chunks (``params.chunks``).

    ``triples`` are the relation indices on the subgraph's edges, cheapest first.
    """
    snap = env.snapshot
    t0 = time.perf_counter()
    triples_f = top_triples(snap, query.vec, params.k_triples)  # Eq. 7-8 (no LLM filter, Eq. 9)
    named = query_names(env, query.text, params.name_parts) if params.name_seeds > 0 else []
    terminals = list(
        dict.fromkeys([*named, *(t for r, _ in triples_f for t in (int(snap.rel_src[r]), int(snap.rel_dst[r])))])
    )
    raw = eq11_scores(snap, terminals, params) if terminals else np.zeros(snap.n_entities + snap.n_passages)
    scores = np.asarray(raw, dtype=np.float64).copy()
    scores[snap.n_entities :] *= params.passage_score_factor  # §III-C after Eq. 12
    info: dict[str, object] = {"ms_ppr": _ms(t0), "mapped_triples": [r for r, _ in triples_f],
                               "named_entities": [snap.entity_names[e] for e in named]}
    if not terminals:
        chunks = _rank_chunks(env, query, top_k, params, set())
        return RetrievalResult("mcmi", chunks, info={**info, "reason": "no triples to map the query to"})
    t1 = time.perf_counter()
    name_links, statistical = _layers(snap, params)
    adjacency = node_space_graph(snap, "count", "count", name_links, statistical).adjacency
    ball = neighbourhood(adjacency, terminals, scores, params.ball_hops, params.ball_max_nodes)
    contains = links = None
    if statistical < 1.0:
        contains = _contains_layer(snap, statistical)
        links = name_link_matrix(snap) if name_links > 0 else None
    graph = cost_graph(snap, ball, query.vec, scores, params.connector_cost, contains, links)
    info["ms_graph"] = _ms(t1)
    t2 = time.perf_counter()
    term_nodes = list(range(len(terminals)))  # the ball lists the terminals first
    tree_edges = mehlhorn_edges(graph.n_nodes, graph.head, graph.tail, graph.cost, term_nodes)
    info["ms_steiner"] = _ms(t2)
    t3 = time.perf_counter()
    # pseudo edges (cost 10) stay out of r(G), Eq. 15 (ours): they join the tree, they carry no relation
    grown = grow(graph, term_nodes, tree_edges, params.max_expansion, params.cycle_edges, (KIND_PSEUDO,))
    info["ms_expand"] = _ms(t3)
    sub = graph.to_networkx(grown.edges, grown.nodes)
    edges = sorted(sub.edges(data=True), key=lambda e: (e[2][COST], min(e[0], e[1]), max(e[0], e[1])))
    triples = [int(d["relation"]) for _, _, d in edges if d.get("kind") == KIND_RELATION]
    touched = {n - snap.n_entities for n in sub.nodes if n >= snap.n_entities}
    rp = relation_passages(snap)
    for r in triples:
        touched.update(int(p) for p in rp[r].indices.tolist())
    for ent in named:  # a named terminal stands for its own document's passages (its ties)
        touched.update(passages_of(snap, ent))
    tree_nodes = set(term_nodes) | {int(x) for e in tree_edges for x in (graph.head[e], graph.tail[e])}
    subgraph = Subgraph(
        nodes=[node_label(snap, n) for n in sub.nodes],
        edges=[(node_label(snap, u), node_label(snap, v), float(d[COST])) for u, v, d in edges],
        text=serialize(snap, sub),
        stats={
            "terminals": len(terminals),
            "ball_nodes": graph.n_nodes,
            "mcst_nodes": len(tree_nodes),
            "mcst_edges": len(tree_edges),
            "mcmi_nodes": sub.number_of_nodes(),
            "mcmi_edges": sub.number_of_edges(),
            "mcst_ratio": grown.mcst_ratio,
            "ratio": grown.ratio,
        },
        node_scores={node_label(snap, n): float(d["score"]) for n, d in sub.nodes(data=True)},
    )
    named_graph = statistical < 1.0 and documents_link(snap)
    mode = params.chunks if params.chunks != "auto" else ("turns" if named_graph else "hybrid")
    if mode == "turns":
        chunks = _turns(env, query, top_k, params, touched, raw[snap.n_entities:])
    elif mode == "subgraph":
        chunks, info["walk_fill"] = _subgraph_chunks(env, query, top_k, params, touched, raw[snap.n_entities:])
    else:
        chunks = _rank_chunks(env, query, top_k, params, touched)
    info["ms_total"] = _ms(t0)
    return RetrievalResult("mcmi", chunks, subgraph=subgraph, triples=triples, info=info)
