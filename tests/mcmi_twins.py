"""networkx twins of the array-based MCMI and Steiner code, for tests on small hand-built graphs (AGRAG Eq. 15-17)."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from pathweaver.retrieval.costgraph import COST, KIND_PSEUDO, CostGraph, edge_positions
from pathweaver.retrieval.mcmi import _skip_codes, edges_ratio, grow
from pathweaver.retrieval.mcmi_graph import cost_graph
from pathweaver.retrieval.steiner import mehlhorn_edges
from pathweaver.store.snapshot import GraphSnapshot

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


def cost_score_ratio(
    graph: nx.Graph, scores: Mapping[Hashable, float], skip_kinds: Iterable[str] = ()
) -> float:
    """AGRAG Eq. 15: r(G) = Σ_(u,v)∈E c_(u,v) / (s_u + s_v), over the edges of ``graph`` whose ``kind`` is not in
    ``skip_kinds``. A term whose scores sum to 0 is infinite."""
    cg = CostGraph.from_networkx(graph, scores)
    return edges_ratio(cg, range(cg.n_edges), _skip_codes(skip_kinds))


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
    """``grow`` on networkx graphs: ``tree`` is a subgraph of ``graph``; node influence comes from ``scores``."""
    cg = CostGraph.from_networkx(graph, scores)
    index = {node: i for i, node in enumerate(cg.labels)}
    pairs = np.array([(index[u], index[v]) for u, v in tree.edges if u != v], dtype=np.int64).reshape(-1, 2)
    tree_edges = edge_positions(cg.n_nodes, cg.head, cg.tail, pairs).tolist()
    out = grow(cg, [index[n] for n in tree.nodes], tree_edges, max_added, cycle_edges, skip_kinds)
    return Expansion(
        cg.to_networkx(out.edges, out.nodes), [cg.labels[v] for v in out.added], out.mcst_ratio, out.ratio
    )


def weighted_graph(
    snapshot: GraphSnapshot, nodes: list[int], qvec: np.ndarray, scores: np.ndarray, connector_cost: float
) -> nx.Graph:
    """``cost_graph`` as a networkx graph: node attribute ``score`` = s_v; edge attributes ``cost`` (Eq. 14),
    ``kind`` and ``relation`` (relation index, -1 otherwise)."""
    cg = cost_graph(snapshot, nodes, qvec, scores, connector_cost)
    return cg.to_networkx(range(cg.n_edges), range(cg.n_nodes))
