"""Steiner trees for AGRAG's MCST step (§III-C Eq. 16, Algorithm 3 lines 1-10).

``mehlhorn_edges`` is Mehlhorn's 2-approximation (AGRAG Theorem 2; K. Mehlhorn, IPL 27(3), 1988) on edge arrays:
one multi-source Dijkstra (scipy) gives every node its nearest terminal; each edge between two terminals' regions
is a candidate bridge of length d(u) + c(u,v) + d(v); the minimum spanning tree of the bridges, each expanded into
its two shortest paths, is spanned once more and its non-terminal leaves are pruned. Where the terminals fall in
several connected components it returns a Steiner forest, one tree per component. ``mehlhorn_tree`` runs it on a
networkx graph. networkx's own ``steiner_tree(method="mehlhorn")`` is the same algorithm but re-runs Dijkstra for
each tree edge and needs a connected graph; on MCMI's query balls it took 75 ms where this takes a few.
``exact_steiner_cost`` brute-forces the optimum on tiny graphs, for tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Sequence

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from pathweaver.retrieval.costgraph import COST, CostGraph, edge_positions

EXACT_MAX_STEINER_NODES = 16  # brute force enumerates 2^n subsets of non-terminals


class SteinerError(ValueError):
    """Bad Steiner input: a terminal missing from the graph, a negative cost, a graph too big to brute-force."""


def _check(graph: nx.Graph, terminals: list[Hashable], weight: str) -> None:
    missing = [t for t in terminals if t not in graph]
    if missing:
        raise SteinerError(f"terminals not in the graph: {missing[:5]}")
    for u, v, data in graph.edges(data=True):
        if data.get(weight, 1.0) < 0:
            raise SteinerError(f"edge ({u}, {v}) has a negative {weight!r}")


def _kruskal(n_nodes: int, a: np.ndarray, b: np.ndarray, weight: np.ndarray) -> list[int]:
    """Positions of a minimum spanning forest's edges (ties by position)."""
    parent = list(range(n_nodes))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    chosen = []
    for i in np.lexsort((np.arange(len(weight)), weight)).tolist():
        ra, rb = find(int(a[i])), find(int(b[i]))
        if ra != rb:
            parent[ra] = rb
            chosen.append(i)
    return chosen


def _prune_leaves(edges: list[int], head: np.ndarray, tail: np.ndarray, keep: set[int]) -> list[int]:
    """Drop edges that end in a leaf outside ``keep`` until none is left."""
    live = set(edges)
    while True:
        degree: dict[int, int] = {}
        for e in live:
            for x in (int(head[e]), int(tail[e])):
                degree[x] = degree.get(x, 0) + 1
        dead = {e for e in live if any(degree[x] == 1 and x not in keep for x in (int(head[e]), int(tail[e])))}
        if not dead:
            return sorted(live)
        live -= dead


def mehlhorn_edges(
    n_nodes: int, head: np.ndarray, tail: np.ndarray, cost: np.ndarray, terminals: Sequence[int]
) -> list[int]:
    """Edge positions of Mehlhorn's Steiner tree (a forest across components) over node ids ``terminals``.

    The graph is undirected with edge i = (``head[i]``, ``tail[i]``) of non-negative ``cost[i]``, at most one edge
    per node pair and no self-loops (as ``CostGraph``)."""
    terms = list(dict.fromkeys(int(t) for t in terminals))
    if len(terms) < 2 or head.size == 0:
        return []
    graph = sp.csr_matrix((cost, (head, tail)), shape=(n_nodes, n_nodes))  # explicit zeros stay edges
    dist, pred, source = dijkstra(graph, directed=False, indices=terms, return_predecessors=True, min_only=True)
    # bridges between two terminals' Voronoi regions, with Mehlhorn's d1 length
    su, sv = source[head], source[tail]
    bridge = np.flatnonzero((su >= 0) & (sv >= 0) & (su != sv))
    if bridge.size == 0:
        return []
    length = dist[head[bridge]] + cost[bridge] + dist[tail[bridge]]
    lo, hi = np.minimum(su[bridge], sv[bridge]), np.maximum(su[bridge], sv[bridge])
    order = np.lexsort((bridge, length, hi, lo))  # per terminal pair: the shortest bridge first
    first = order[np.r_[True, (lo[order][1:] != lo[order][:-1]) | (hi[order][1:] != hi[order][:-1])]]
    mst = _kruskal(n_nodes, lo[first], hi[first], length[first])
    union = {int(bridge[first[i]]) for i in mst}
    pairs: list[tuple[int, int]] = []
    for e in union:  # G_3: each bridge with the shortest paths from its two ends back to their terminals
        for x in (int(head[e]), int(tail[e])):
            while pred[x] >= 0:
                pairs.append((x, int(pred[x])))
                x = int(pred[x])
    if pairs:
        union.update(edge_positions(n_nodes, head, tail, np.array(pairs, dtype=np.int64)).tolist())
    ids = np.array(sorted(union), dtype=np.int64)
    spanning = [int(ids[i]) for i in _kruskal(n_nodes, head[ids], tail[ids], cost[ids])]
    return _prune_leaves(spanning, head, tail, set(terms))


def mehlhorn_tree(graph: nx.Graph, terminals: Iterable[Hashable], weight: str = COST) -> nx.Graph:
    """Mehlhorn's Steiner tree over ``terminals`` (a forest when they span several components).

    The result is a subgraph of ``graph`` (edge attributes kept) holding every terminal; a component with a single
    terminal contributes that node alone.
    """
    terms = list(dict.fromkeys(terminals))
    _check(graph, terms, weight)
    cg = CostGraph.from_networkx(graph, weight=weight)
    index = {node: i for i, node in enumerate(cg.labels)}
    chosen = mehlhorn_edges(cg.n_nodes, cg.head, cg.tail, cg.cost, [index[t] for t in terms])
    forest = nx.Graph()
    forest.add_nodes_from((t, graph.nodes[t]) for t in terms)
    for e in chosen:
        u, v = cg.labels[int(cg.head[e])], cg.labels[int(cg.tail[e])]
        forest.add_node(u, **graph.nodes[u])
        forest.add_node(v, **graph.nodes[v])
        forest.add_edge(u, v, **graph[u][v])
    return forest


def tree_cost(graph: nx.Graph, weight: str = "cost") -> float:
    """Sum of the edge ``weight`` of ``graph``."""
    return float(sum(d.get(weight, 1.0) for _, _, d in graph.edges(data=True)))


def exact_steiner_cost(graph: nx.Graph, terminals: Iterable[Hashable], weight: str = "cost") -> float:
    """The optimal Steiner tree cost, by brute force: the cheapest minimum spanning tree over terminals plus any
    subset of the other nodes whose induced subgraph is connected. Exponential; tiny graphs only."""
    terms = list(dict.fromkeys(terminals))
    _check(graph, terms, weight)
    others = [n for n in graph.nodes if n not in set(terms)]
    if len(others) > EXACT_MAX_STEINER_NODES:
        raise SteinerError(f"{len(others)} non-terminal nodes is too many to brute-force")
    best = float("inf")
    for size in range(len(others) + 1):
        for extra in itertools.combinations(others, size):
            sub = graph.subgraph([*terms, *extra])
            if sub.number_of_nodes() and nx.is_connected(sub):
                best = min(best, tree_cost(nx.minimum_spanning_tree(sub, weight=weight), weight))
    if best == float("inf"):
        raise SteinerError("the terminals are not connected")
    return best
