"""Steiner trees for AGRAG's MCST step (§III-C Eq. 16, Algorithm 3 lines 1-10).

``mehlhorn_edges`` is Mehlhorn's 2-approximation (AGRAG Theorem 2; K. Mehlhorn, IPL 27(3), 1988) on edge arrays:
one multi-source Dijkstra (scipy) gives every node its nearest terminal; each edge between two terminals' regions
is a candidate bridge of length d(u) + c(u,v) + d(v); the minimum spanning tree of the bridges, each expanded into
its two shortest paths, is spanned once more and its non-terminal leaves are pruned. Where the terminals fall in
several connected components it returns a Steiner forest, one tree per component. networkx's own
``steiner_tree(method="mehlhorn")`` is the same algorithm but re-runs Dijkstra for each tree edge and needs a
connected graph, so it is not used. tests/mcmi_twins.py holds the networkx twin and a brute-force optimum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from pathweaver.retrieval.costgraph import edge_positions


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


