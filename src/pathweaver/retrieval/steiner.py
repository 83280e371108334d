"""Steiner trees for AGRAG's MCST step (§III-C Eq. 16, Algorithm 3 lines 1-10).

``mehlhorn_tree`` wraps networkx's Mehlhorn 2-approximation (AGRAG Theorem 2) and, unlike it, accepts graphs
where the terminals fall in several connected components: it returns a Steiner forest, one tree per component
that holds terminals. ``exact_steiner_cost`` brute-forces the optimum on tiny graphs, for tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable

import networkx as nx
from networkx.algorithms.approximation import steiner_tree

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


def mehlhorn_tree(graph: nx.Graph, terminals: Iterable[Hashable], weight: str = "cost") -> nx.Graph:
    """Mehlhorn's Steiner tree over ``terminals`` (a forest when they span several components).

    The result is a subgraph of ``graph`` (edge attributes kept) holding every terminal; a component with a single
    terminal contributes that node alone.
    """
    terms = list(dict.fromkeys(terminals))
    _check(graph, terms, weight)
    forest = nx.Graph()
    by_component: dict[int, list[Hashable]] = {}
    component_of: dict[Hashable, int] = {}
    components = list(nx.connected_components(graph))
    for i, comp in enumerate(components):
        for node in comp:
            component_of[node] = i
    for t in terms:
        by_component.setdefault(component_of[t], []).append(t)
    for i, group in by_component.items():
        if len(group) == 1:
            forest.add_node(group[0], **graph.nodes[group[0]])
            continue
        # networkx's Mehlhorn needs every node reachable from the terminals: hand it one component
        part = graph if len(components) == 1 else graph.subgraph(components[i]).copy()
        tree = steiner_tree(part, group, weight=weight, method="mehlhorn")
        forest.add_nodes_from(tree.nodes(data=True))
        forest.add_edges_from(tree.edges(data=True))
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
