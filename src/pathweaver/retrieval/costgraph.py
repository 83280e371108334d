"""The cost-weighted graph of AGRAG's MCMI step (Algorithm 2) as flat arrays, and its networkx conversions.

MCMI searches a ball of about 2,000 nodes and 10^4 edges per query. Built as a networkx graph, that ball cost more
than the whole PageRank, so the Steiner tree (``steiner.mehlhorn_edges``) and the greedy growth (``mcmi``) run on
these arrays, and only the served subgraph (tens of edges) becomes a networkx graph.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

COST = "cost"
KIND_RELATION, KIND_SYNONYM, KIND_CONTAINS, KIND_PSEUDO = "relation", "synonym", "contains", "pseudo"
KIND_LINK = "link"  # passage -> passage name link (issue 23): one passage mentions the other's document
KINDS = (KIND_RELATION, KIND_SYNONYM, KIND_CONTAINS, KIND_PSEUDO, KIND_LINK)
NO_KIND = -1  # an edge without a ``kind`` attribute (graphs handed in by callers)


def pair_keys(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """One integer per unordered node pair (a, b) of an ``n``-node graph."""
    return np.minimum(a, b) * n + np.maximum(a, b)


def edge_positions(n_nodes: int, head: np.ndarray, tail: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Positions of the edges (``head``, ``tail``) joining each node pair in ``pairs`` (k, 2), in either order.

    Raises:
        ValueError: a pair is not an edge."""
    keys = pair_keys(head, tail, n_nodes)
    order = np.argsort(keys, kind="stable")
    want = pair_keys(pairs[:, 0], pairs[:, 1], n_nodes)
    pos = np.minimum(np.searchsorted(keys[order], want), max(len(order) - 1, 0))
    if len(want) and (not len(order) or (keys[order][pos] != want).any()):
        raise ValueError("a node pair is not an edge of the graph")
    return order[pos]


@dataclass
class CostGraph:
    """Nodes ``0..n-1`` named by ``labels`` with influence ``scores``; edge ``i`` joins ``head[i]`` and ``tail[i]``
    (undirected, at most one edge per pair, no self-loops) with ``cost[i]``, ``kind[i]`` (an index into ``KINDS``
    or ``NO_KIND``) and ``relation[i]`` (the relation index, or -1)."""

    labels: list[Hashable]
    scores: np.ndarray
    head: np.ndarray
    tail: np.ndarray
    cost: np.ndarray
    kind: np.ndarray
    relation: np.ndarray
    _adjacency: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def n_nodes(self) -> int:
        return len(self.labels)

    @property
    def n_edges(self) -> int:
        return int(self.head.shape[0])

    def kind_name(self, edge: int) -> str | None:
        k = int(self.kind[edge])
        return KINDS[k] if k >= 0 else None

    def adjacency(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR-style ``(indptr, neighbour, edge)``: node u's neighbours are ``neighbour[indptr[u]:indptr[u+1]]``,
        reached over the edges ``edge[...]`` of the same slice. Built once."""
        if self._adjacency is None:
            ends = np.concatenate([self.head, self.tail])
            other = np.concatenate([self.tail, self.head])
            eids = np.concatenate([np.arange(self.n_edges), np.arange(self.n_edges)])
            order = np.lexsort((other, ends))
            indptr = np.zeros(self.n_nodes + 1, dtype=np.int64)
            np.cumsum(np.bincount(ends, minlength=self.n_nodes), out=indptr[1:])
            self._adjacency = (indptr, other[order].astype(np.int64), eids[order].astype(np.int64))
        return self._adjacency

    @classmethod
    def from_networkx(
        cls, graph: nx.Graph, scores: Mapping[Hashable, float] | None = None, weight: str = COST
    ) -> CostGraph:
        """Arrays for ``graph``: node scores from ``scores`` (else the ``score`` node attribute, else 0), edge
        ``weight`` (default 1), ``kind`` and ``relation`` attributes. Self-loops are dropped."""
        labels = list(graph.nodes)
        index = {node: i for i, node in enumerate(labels)}
        if scores is None:
            scores = {n: float(d.get("score", 0.0)) for n, d in graph.nodes(data=True)}
        edges = [(index[u], index[v], d) for u, v, d in graph.edges(data=True) if u != v]
        return cls(
            labels=labels,
            scores=np.array([float(scores.get(n, 0.0)) for n in labels], dtype=np.float64),
            head=np.array([u for u, _, _ in edges], dtype=np.int64),
            tail=np.array([v for _, v, _ in edges], dtype=np.int64),
            cost=np.array([float(d.get(weight, 1.0)) for _, _, d in edges], dtype=np.float64),
            kind=np.array(
                [KINDS.index(d["kind"]) if d.get("kind") in KINDS else NO_KIND for _, _, d in edges], dtype=np.int64
            ),
            relation=np.array([int(d.get("relation", -1)) for _, _, d in edges], dtype=np.int64),
        )

    def to_networkx(self, edges: Iterable[int], nodes: Iterable[int] = ()) -> nx.Graph:
        """The subgraph of ``edges`` plus any extra ``nodes``, labelled, with ``score`` on nodes and ``cost``,
        ``kind`` and ``relation`` on edges."""
        out = nx.Graph()
        for u in nodes:
            out.add_node(self.labels[u], score=float(self.scores[u]))
        for e in edges:
            u, v = int(self.head[e]), int(self.tail[e])
            for w in (u, v):
                if self.labels[w] not in out:
                    out.add_node(self.labels[w], score=float(self.scores[w]))
            data: dict[str, object] = {COST: float(self.cost[e]), "relation": int(self.relation[e])}
            kind = self.kind_name(e)
            if kind is not None:
                data["kind"] = kind
            out.add_edge(self.labels[u], self.labels[v], **data)
        return out
