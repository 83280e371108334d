"""AGRAG's Minimum Cost Maximum Influence (MCMI) reasoning subgraph (AGRAG §III-C, Algorithms 2-3, Eq. 10-18).

1. The query is mapped to its top ``k_triples`` (k_a) triples by cos(query, triple) (Eq. 7-8); their entities are
   the terminals. (Eq. 9's LLM triple filter is not applied: no LLM at retrieval.)
2. Node influence s_v is PPR over entities + passages seeded by those triples (Eq. 10-13, ``retrieval.ppr``), with
   passage scores multiplied by 0.05 afterwards (§III-C after Eq. 12).
3. Edge costs (Eq. 14): c_e = (1 − MS(q, f_e)) / 2 with f_e the edge's triple. The paper embeds only relation
   triples; for the other edge kinds we use the nearest vector we store (our choice, documented):
   Contains edge → the passage vector, synonym edge → the normalised sum of the two entity vectors. Passages hang
   off a pseudo node by edges of cost ``connector_cost`` = 10 (§III-C after Eq. 14, after HippoRAG 2).
4. MCST: Mehlhorn's Steiner tree over the terminals (Eq. 16, Algorithm 3 lines 1-10), then greedy growth (Eq. 17,
   lines 13-17): the 1-hop neighbour v with the lowest c_(MCMI,v) / s_v joins while that ratio is below
   r(G) = Σ_e c_e / (s_u + s_v) (Eq. 15), r recomputed after each addition.
5. The subgraph is served as text (Eq. 18) together with hybrid chunks (Eq. 20-21, ``seeds.hybrid_chunk_scores``).

Everything runs on a bounded neighbourhood of the terminals (``ball_hops``, ``ball_max_nodes``) so a query never
touches the whole graph; ``greedy_expand`` and ``cost_score_ratio`` are pure functions over a networkx graph.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.retrieval.graphs import node_space_graph, relation_passages
from pathweaver.retrieval.ppr import PPRParams, ppr_scores
from pathweaver.retrieval.seeds import hybrid_chunk_scores
from pathweaver.retrieval.steiner import mehlhorn_tree
from pathweaver.retrieval.types import ChunkHit, Query, RetrievalEnv, RetrievalResult, Subgraph
from pathweaver.store.snapshot import GraphSnapshot

PSEUDO = -1  # node id of the pseudo node joining all passages (entities are 0..E-1, passages E..E+P-1)
COST = "cost"
KIND_RELATION, KIND_SYNONYM, KIND_CONTAINS, KIND_PSEUDO = "relation", "synonym", "contains", "pseudo"


@dataclass
class MCMIParams:
    """AGRAG §III-C parameters (paper defaults) plus the bounds that keep a query local (ours)."""

    k_triples: int = 5  # k_a, raw mapped triples (Eq. 8; §IV-A4: 5, as HippoRAG 2)
    damping: float = 0.5  # d, Eq. 10 (§III-C: 0.5 as HippoRAG 2)
    ppr_tol: float = 1e-7  # §III-C: PPR converges when it changes less than 1e-7
    ppr_max_iter: int = 100
    passage_score_factor: float = 0.05  # §III-C after Eq. 12: passage-node PPR scores × 0.05
    connector_cost: float = 10.0  # §III-C after Eq. 14: pseudo edges cost 10
    cycle_edges: bool = True  # Eq. 17: v joins with all its edges into the subgraph (Fig. 2 cycles)
    ratio_counts_pseudo: bool = False  # ours: leave pseudo edges (cost 10) out of r(G), Eq. 15
    ball_hops: int = 2  # ours: the subgraph is searched within this many hops of the terminals
    ball_max_nodes: int = 2000  # ours: per-hop growth keeps the highest-influence nodes up to this total
    max_expansion: int = 50  # ours: at most this many nodes join in the greedy step (paper: none)
    hybrid_pool_min: int = 50  # hybrid candidates from each of dense and BM25 (as seeds.HybridParams)
    hybrid_pool_factor: int = 4  # ... or this many times top_k when larger (as seeds.HybridParams)
    prefer_subgraph_passages: bool = False  # ours: rank hybrid chunks that the subgraph touches first

    def validate(self) -> None:
        if self.k_triples < 1:
            raise ConfigError(f"mcmi k_triples must be >= 1, got {self.k_triples}")
        if not 0.0 <= self.damping < 1.0:
            raise ConfigError(f"mcmi damping must be in [0, 1), got {self.damping}")
        if self.ppr_tol <= 0 or self.ppr_max_iter < 1:
            raise ConfigError("mcmi ppr_tol must be > 0 and ppr_max_iter >= 1")
        if self.passage_score_factor < 0 or self.connector_cost < 0:
            raise ConfigError("mcmi passage_score_factor and connector_cost must be >= 0")
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


def edge_cost(cos: float | np.ndarray) -> float | np.ndarray:
    """AGRAG Eq. 14: c_e = (1 − MS(q, f_e)) / 2, in [0, 1] for cosines in [−1, 1]."""
    return (1.0 - cos) / 2.0


def _term(cost: float, s_u: float, s_v: float) -> float:
    denom = s_u + s_v
    return cost / denom if denom > 0 else float("inf")


def cost_score_ratio(
    graph: nx.Graph, scores: Mapping[Hashable, float], skip_kinds: Iterable[str] = ()
) -> float:
    """AGRAG Eq. 15: r(G) = Σ_(u,v)∈E c_(u,v) / (s_u + s_v), over the edges of ``graph`` whose ``kind`` is not in
    ``skip_kinds``. A term whose scores sum to 0 is infinite."""
    skip = set(skip_kinds)
    return float(
        sum(
            _term(d[COST], scores.get(u, 0.0), scores.get(v, 0.0))
            for u, v, d in graph.edges(data=True)
            if d.get("kind") not in skip
        )
    )


@dataclass
class Expansion:
    """The MCMI subgraph, the nodes the greedy step added (in order) and r(G) before and after."""

    graph: nx.Graph
    added: list[Hashable] = field(default_factory=list)
    mcst_ratio: float = 0.0
    ratio: float = 0.0


def greedy_expand(
    graph: nx.Graph,
    tree: nx.Graph,
    scores: Mapping[Hashable, float],
    max_added: int,
    cycle_edges: bool = True,
    skip_kinds: Iterable[str] = (KIND_PSEUDO,),
) -> Expansion:
    """AGRAG Algorithm 3 lines 13-17 / Eq. 17: grow ``tree`` inside ``graph``.

    Each neighbour v outside the subgraph is ranked by c_(MCMI,v) / s_v, its cheapest edge into the subgraph over
    its own influence. The lowest joins while that ratio is strictly below r(G) (Eq. 15, recomputed after each
    addition); with ``cycle_edges`` all of v's edges into the subgraph join with it (except ``skip_kinds``), else
    only the cheapest. Nodes with s_v <= 0 never join. Stops after ``max_added`` additions.
    """
    skip = set(skip_kinds)
    sub = tree.copy()
    r = cost_score_ratio(sub, scores, skip)
    result = Expansion(sub, mcst_ratio=r, ratio=r)
    heap: list[tuple[float, str, Hashable, Hashable]] = []

    def push_neighbours(u: Hashable) -> None:
        for v, data in graph[u].items():
            s_v = scores.get(v, 0.0)
            if v not in sub and s_v > 0:
                heapq.heappush(heap, (data[COST] / s_v, repr(v), v, u))

    for node in list(sub.nodes):
        push_neighbours(node)
    while heap and len(result.added) < max_added:
        ratio_v, _, v, u = heapq.heappop(heap)
        if v in sub:
            continue
        if not ratio_v < r:  # the lowest ratio no longer beats r(G): stop (Algorithm 3 line 14)
            break
        sub.add_node(v, **graph.nodes[v])
        joins = [u]
        if cycle_edges:
            joins += [w for w, d in graph[v].items() if w in sub and w != u and d.get("kind") not in skip]
        for w in joins:
            data = graph[v][w]
            sub.add_edge(w, v, **data)
            if data.get("kind") not in skip:
                r += _term(data[COST], scores.get(w, 0.0), scores.get(v, 0.0))
        result.added.append(v)
        push_neighbours(v)
    result.ratio = r
    return result


def neighbourhood(
    adjacency_rows: sp.csr_matrix, seeds: list[int], scores: np.ndarray, hops: int, max_nodes: int
) -> list[int]:
    """Node-space ids within ``hops`` of ``seeds`` (seeds first). When a hop would pass ``max_nodes`` in all, only
    its highest-``scores`` nodes are kept. ``adjacency_rows`` is a CSR matrix (rows = node neighbours)."""
    seen = list(dict.fromkeys(seeds))
    in_ball = set(seen)
    frontier = np.array(seen, dtype=np.int64)
    for _ in range(hops):
        if frontier.size == 0 or len(seen) >= max_nodes:
            break
        nbrs = np.unique(adjacency_rows[frontier].indices)
        nbrs = np.array([n for n in nbrs.tolist() if n not in in_ball], dtype=np.int64)
        budget = max_nodes - len(seen)
        if nbrs.size > budget:
            order = np.lexsort((nbrs, -scores[nbrs]))  # highest influence first, ties by id
            nbrs = nbrs[order[:budget]]
        seen.extend(nbrs.tolist())
        in_ball.update(nbrs.tolist())
        frontier = nbrs
    return seen


def weighted_graph(
    snapshot: GraphSnapshot, nodes: list[int], qvec: np.ndarray, scores: np.ndarray, connector_cost: float
) -> nx.Graph:
    """The cost-weighted graph (Algorithm 2) over ``nodes`` (node-space ids), plus the pseudo node.

    Node attribute ``score`` = s_v; edge attributes ``cost`` (Eq. 14), ``kind`` and ``relation`` (relation index,
    -1 otherwise). Parallel relations keep the cheapest.
    """
    n_e = snapshot.n_entities
    q = qvec.astype(np.float32, copy=False)
    graph = nx.Graph()
    graph.add_nodes_from((n, {"score": float(scores[n])}) for n in nodes)
    ents = np.array([n for n in nodes if n < n_e], dtype=np.int64)
    pas = np.array([n - n_e for n in nodes if n >= n_e], dtype=np.int64)
    ent_mask = np.zeros(n_e, dtype=bool)
    ent_mask[ents] = True
    # relation edges (Eq. 14 on the triple vector)
    rels = np.flatnonzero(
        ent_mask[snapshot.rel_src] & ent_mask[snapshot.rel_dst] & (snapshot.rel_src != snapshot.rel_dst)
    )
    if rels.size:
        costs = edge_cost(snapshot.rel_vecs[rels] @ q)
        for r, c in sorted(
            zip(rels.tolist(), np.asarray(costs).tolist(), strict=True), key=lambda x: (x[1], x[0])
        ):
            u, v = int(snapshot.rel_src[r]), int(snapshot.rel_dst[r])
            if not graph.has_edge(u, v):
                graph.add_edge(u, v, cost=float(c), kind=KIND_RELATION, relation=r)
    # synonym edges: the pair's normalised summed entity vector stands in for the triple vector
    syn = np.flatnonzero(ent_mask[snapshot.syn_a] & ent_mask[snapshot.syn_b]) if snapshot.syn_a.size else []
    for i in np.asarray(syn, dtype=np.int64).tolist():
        a, b = int(snapshot.syn_a[i]), int(snapshot.syn_b[i])
        if a == b or graph.has_edge(a, b):
            continue
        vec = snapshot.entity_vecs[a] + snapshot.entity_vecs[b]
        norm = float(np.linalg.norm(vec))
        cos = float(vec @ q) / norm if norm > 0 else 0.0
        graph.add_edge(a, b, cost=float(edge_cost(cos)), kind=KIND_SYNONYM, relation=-1)
    # Contains edges passage-entity (the passage vector stands in), and pseudo edges (cost 10)
    if pas.size:
        pcos = (
            snapshot.chunk_vecs[pas] @ q
            if snapshot.chunk_vecs.shape[0] == snapshot.n_passages
            else np.zeros(pas.size)
        )
        sub = snapshot.mentions[pas].tocsr()
        for row, p in enumerate(pas.tolist()):
            c = float(edge_cost(float(pcos[row])))
            for e in sub.indices[sub.indptr[row] : sub.indptr[row + 1]].tolist():
                if ent_mask[e]:
                    graph.add_edge(n_e + p, e, cost=c, kind=KIND_CONTAINS, relation=-1)
        graph.add_node(PSEUDO, score=0.0)
        graph.add_edges_from(
            (PSEUDO, n_e + p, {COST: connector_cost, "kind": KIND_PSEUDO, "relation": -1})
            for p in pas.tolist()
        )
    return graph


def node_label(snapshot: GraphSnapshot, node: int) -> str:
    """Entity name, ``passage <chunk id>: <title>``, or ``[pseudo]``."""
    if node == PSEUDO:
        return "[pseudo]"
    if node < snapshot.n_entities:
        return snapshot.entity_names[node]
    p = node - snapshot.n_entities
    return f"passage {int(snapshot.chunk_ids[p])}: {snapshot.chunk_titles[p]}"


def serialize(snapshot: GraphSnapshot, graph: nx.Graph) -> str:
    """AGRAG Eq. 18, g = StrConcat(V_MCMI, E_MCMI): a node line, then one ``(head, relation, tail)`` line per edge.
    Pseudo edges carry no content and are left out of the text."""
    nodes = [n for n in sorted(graph.nodes, key=lambda n: (n < 0, n)) if n != PSEUDO]
    lines = ["Nodes: " + "; ".join(node_label(snapshot, n) for n in nodes), "Edges:"]
    for u, v, d in sorted(graph.edges(data=True), key=lambda e: (e[2].get(COST, 0.0), min(e[0], e[1]))):
        kind = d.get("kind")
        if kind == KIND_PSEUDO:
            continue
        if kind == KIND_RELATION:
            r = int(d["relation"])
            head, label, tail = int(snapshot.rel_src[r]), snapshot.rel_labels[r], int(snapshot.rel_dst[r])
        elif kind == KIND_CONTAINS:
            head, tail = (u, v) if u >= snapshot.n_entities else (v, u)
            label = "contains"
        else:
            head, label, tail = min(u, v), "synonym", max(u, v)
        lines.append(f"({node_label(snapshot, head)}, {label}, {node_label(snapshot, tail)})")
    return "\n".join(lines)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 2)


def _rank_chunks(
    env: RetrievalEnv, query: Query, top_k: int, params: MCMIParams, touched: set[int]
) -> list[ChunkHit]:
    """AGRAG Eq. 20-21 hybrid chunks (top_k = k_r); optionally passages the subgraph touches first."""
    scores = hybrid_chunk_scores(env, query, max(params.hybrid_pool_min, params.hybrid_pool_factor * top_k))
    first = params.prefer_subgraph_passages
    ranked = sorted(scores.items(), key=lambda it: (first and it[0] not in touched, -it[1], it[0]))
    return [ChunkHit(int(p), float(s)) for p, s in ranked[:top_k]]


def mcmi_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: MCMIParams) -> RetrievalResult:
    """AGRAG graph retrieval: the MCMI subgraph (as text, Eq. 18) and ``top_k`` hybrid chunks (k_r, Eq. 20).

    ``triples`` are the relation indices on the subgraph's edges, cheapest first.
    """
    snap = env.snapshot
    t0 = time.perf_counter()
    ppr_params = PPRParams(
        damping=params.damping, top_triples=params.k_triples, tol=params.ppr_tol, max_iter=params.ppr_max_iter
    )
    raw, seeds = ppr_scores(env, query, ppr_params)
    scores = np.asarray(raw, dtype=np.float64).copy()
    scores[snap.n_entities :] *= params.passage_score_factor  # §III-C after Eq. 12
    info: dict[str, object] = {"ms_ppr": _ms(t0)}
    terminals = list(
        dict.fromkeys(t for r, _ in seeds.triples for t in (int(snap.rel_src[r]), int(snap.rel_dst[r])))
    )
    if not terminals:
        chunks = _rank_chunks(env, query, top_k, params, set())
        return RetrievalResult("mcmi", chunks, info={**info, "reason": "no triples to map the query to"})
    t1 = time.perf_counter()
    adjacency = node_space_graph(snap).adjacency
    ball = neighbourhood(adjacency, terminals, scores, params.ball_hops, params.ball_max_nodes)
    graph = weighted_graph(snap, ball, query.vec, scores, params.connector_cost)
    info["ms_graph"] = _ms(t1)
    t2 = time.perf_counter()
    tree = mehlhorn_tree(graph, terminals, weight=COST)
    info["ms_steiner"] = _ms(t2)
    t3 = time.perf_counter()
    score_map = {n: float(d["score"]) for n, d in graph.nodes(data=True)}
    skip = () if params.ratio_counts_pseudo else (KIND_PSEUDO,)
    grown = greedy_expand(graph, tree, score_map, params.max_expansion, params.cycle_edges, skip)
    info["ms_expand"] = _ms(t3)
    sub = grown.graph
    edges = sorted(sub.edges(data=True), key=lambda e: (e[2][COST], min(e[0], e[1]), max(e[0], e[1])))
    triples = [int(d["relation"]) for _, _, d in edges if d.get("kind") == KIND_RELATION]
    touched = {n - snap.n_entities for n in sub.nodes if n >= snap.n_entities}
    rp = relation_passages(snap)
    for r in triples:
        touched.update(int(p) for p in rp[r].indices.tolist())
    subgraph = Subgraph(
        nodes=[node_label(snap, n) for n in sub.nodes],
        edges=[(node_label(snap, u), node_label(snap, v), float(d[COST])) for u, v, d in edges],
        text=serialize(snap, sub),
        stats={
            "terminals": len(terminals),
            "ball_nodes": graph.number_of_nodes(),
            "mcst_nodes": tree.number_of_nodes(),
            "mcst_edges": tree.number_of_edges(),
            "mcmi_nodes": sub.number_of_nodes(),
            "mcmi_edges": sub.number_of_edges(),
            "mcst_ratio": grown.mcst_ratio,
            "ratio": grown.ratio,
        },
        node_scores={node_label(snap, n): score_map.get(n, 0.0) for n in sub.nodes},
    )
    chunks = _rank_chunks(env, query, top_k, params, touched)
    info["ms_total"] = _ms(t0)
    info["mapped_triples"] = [r for r, _ in seeds.triples]
    return RetrievalResult("mcmi", chunks, subgraph=subgraph, triples=triples, info=info)
