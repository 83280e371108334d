"""PathRAG's flow-based pruning and path reliability (Chen et al., AAAI 2026, §Methodology, Eq. 2-4): the resource
each start spreads level by level over the graph, the paths inside the pruned flow, and their reliability.
``retrieval.pathrag`` retrieves the nodes, pools these paths and serves them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass
class FlowRow:
    """The propagation from one start: the nodes it reached (sorted), their resource S, the level they were
    reached at, and whether they spread further."""

    nodes: np.ndarray  # (m,) int64, sorted
    S: np.ndarray  # (m,) float64
    level: np.ndarray  # (m,) int64
    spread: np.ndarray  # (m,) bool

    def find(self, nodes: np.ndarray) -> np.ndarray:
        """Positions of ``nodes`` in this row, -1 where a node was not reached."""
        if self.nodes.size == 0:
            return np.full(len(nodes), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.nodes, nodes), self.nodes.size - 1)
        return np.where(self.nodes[pos] == nodes, pos, -1)

    def resources(self, n: int) -> np.ndarray:
        """S over all ``n`` nodes (0 where not reached)."""
        out = np.zeros(n)
        out[self.nodes] = self.S
        return out

    def levels(self, n: int) -> np.ndarray:
        """Level over all ``n`` nodes (-1 where not reached)."""
        out = np.full(n, -1, dtype=np.int64)
        out[self.nodes] = self.level
        return out


@dataclass
class Flow:
    """Eq. 2-3 propagation from several starts, one ``FlowRow`` per start (sparse: only reached nodes)."""

    starts: list[int]
    rows: list[FlowRow]


def propagate(
    adjacency: sp.csr_matrix,
    degrees: np.ndarray,
    starts: list[int],
    alpha: float,
    theta: float,
    max_hops: int,
) -> Flow:
    """Flow-based pruning (PathRAG Eq. 2-3) from every node of ``starts`` at once over an undirected adjacency.

    Level by level, the frontier of all starts is one sparse (starts × nodes) matrix times the adjacency, so the
    cost follows the nodes the pruning keeps alive, not the graph size.
    """
    n_s, n = len(starts), adjacency.shape[0]
    rows = np.arange(n_s, dtype=np.int64)
    cols = np.asarray(starts, dtype=np.int64)
    vals = np.ones(n_s)
    parts = [(rows, cols, vals, np.zeros(n_s, dtype=np.int64))]
    seen = np.sort(rows * n + cols)
    spread_keys: list[np.ndarray] = []
    for hop in range(1, max_hops + 1):
        deg = degrees[cols]
        # Eq. 3: a node of the current level spreads only if S(v)/|N(v,·)| >= θ (and it has neighbours).
        alive = (deg > 0) & (vals / np.maximum(deg, 1.0) >= theta)
        if not alive.any():
            break
        spread_keys.append(rows[alive] * n + cols[alive])
        share = alpha * vals[alive] / deg[alive]  # per-edge share α·S(u)/|N(u,·)|, Eq. 2
        frontier = sp.csr_matrix((share, (rows[alive], cols[alive])), shape=(n_s, n))
        incoming = (frontier @ adjacency).tocoo()  # Σ over the in-neighbours u of the previous level
        keys = incoming.row.astype(np.int64) * n + incoming.col
        new = (incoming.data > 0) & ~np.isin(
            keys, seen, assume_unique=False
        )  # each node updated at most once
        if not new.any():
            break
        rows, cols, vals = (
            incoming.row[new].astype(np.int64),
            incoming.col[new].astype(np.int64),
            incoming.data[new],
        )
        parts.append((rows, cols, vals, np.full(rows.size, hop, dtype=np.int64)))
        seen = np.union1d(seen, keys[new])
    all_rows = np.concatenate([p[0] for p in parts])
    all_cols = np.concatenate([p[1] for p in parts])
    all_s = np.concatenate([p[2] for p in parts])
    all_lvl = np.concatenate([p[3] for p in parts])
    spread = np.isin(all_rows * n + all_cols, np.concatenate(spread_keys or [np.zeros(0, dtype=np.int64)]))
    order = np.lexsort((all_cols, all_rows))
    bounds = np.searchsorted(all_rows[order], np.arange(n_s + 1))
    out: list[FlowRow] = []
    for i in range(n_s):
        sel = order[bounds[i] : bounds[i + 1]]
        out.append(FlowRow(all_cols[sel], all_s[sel], all_lvl[sel], spread[sel]))
    return Flow(list(starts), out)


def dag_paths(adjacency: sp.csr_matrix, row: FlowRow, target: int, cap: int) -> list[list[int]]:
    """All start→target paths along one start's propagation DAG (at most ``cap``): each step goes back to a
    neighbour reached one level earlier that spread."""
    out: list[list[int]] = []

    def back(node: int, node_level: int, suffix: list[int]) -> None:
        if len(out) >= cap:
            return
        if node_level == 0:
            out.append([node, *suffix])
            return
        nbrs = adjacency.indices[adjacency.indptr[node] : adjacency.indptr[node + 1]].astype(np.int64)
        pos = row.find(nbrs)
        ok = pos >= 0
        ok[ok] = (row.level[pos[ok]] == node_level - 1) & row.spread[pos[ok]]
        for u in nbrs[ok].tolist():
            back(u, node_level - 1, [node, *suffix])

    pos = row.find(np.array([target], dtype=np.int64))[0]
    if pos >= 0:
        back(target, int(row.level[pos]), [])
    return out


def flow_paths(adjacency: sp.csr_matrix, row: FlowRow, targets: set[int], max_hops: int, cap: int,
               max_steps: int = 20000) -> dict[int, list[list[int]]]:
    """Every simple path of 1..``max_hops`` edges from one start to each node of ``targets`` inside its pruned
    flow (PathRAG §Path Retrieval: paths of several lengths between a pair, not only the shortest): every node
    on the path was reached by the flow (Eq. 2), and every inner node spread (it passed Eq. 3's threshold). At
    most ``cap`` paths per target, found depth first in neighbour order, in at most ``max_steps`` expansions."""
    out: dict[int, list[list[int]]] = {}
    if row.nodes.size == 0:
        return out
    start = int(row.nodes[row.level == 0][0])
    full = {t: 0 for t in targets}
    steps = [0]

    def neighbours(node: int) -> tuple[list[int], list[bool]]:
        nbrs = adjacency.indices[adjacency.indptr[node] : adjacency.indptr[node + 1]].astype(np.int64)
        pos = row.find(nbrs)
        ok = pos >= 0
        return nbrs[ok].tolist(), row.spread[pos[ok]].tolist()

    def walk(path: list[int], on: set[int]) -> None:
        steps[0] += 1
        if steps[0] > max_steps:
            return
        nbrs, spreads = neighbours(path[-1])
        for v, spreads_v in zip(nbrs, spreads, strict=True):
            if v in on:
                continue
            if v in full and full[v] < cap:
                out.setdefault(v, []).append([*path, v])
                full[v] += 1
            if spreads_v and len(path) < max_hops:
                on.add(v)
                path.append(v)
                walk(path, on)
                path.pop()
                on.discard(v)

    walk([start], {start})
    return out


def reliability(path: list[int], row: FlowRow) -> float:
    """PathRAG Eq. 4: S(P) = (1/|E_P|) Σ_{v∈V_P} S(v), with S from the path's start."""
    pos = row.find(np.asarray(path, dtype=np.int64))
    if (pos < 0).any():
        raise ValueError(f"path {path} leaves the propagation of its start")
    return float(row.S[pos].sum()) / (len(path) - 1)
