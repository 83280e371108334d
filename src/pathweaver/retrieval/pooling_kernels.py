"""Path Pooling's path kernels and smoothing (Wang et al. 2025, §3.3-3.4): the paths from the query entities over
the retrieved triples (Dijkstra or BFS), each triple's pooled score along them, and the recency order of §3.4.
``pooling.py`` feeds them the triples and turns the pooled scores into passages."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from pathweaver.config import ConfigError

POOLINGS = ("mean", "max")


@dataclass
class Kernel:
    """A path kernel: entity ``nodes`` and the ``triples`` (local positions) joining them, from the source on."""

    nodes: list[int]
    triples: list[int]


def _adjacency(triples: Sequence[tuple[int, int]]) -> dict[int, list[tuple[int, int]]]:
    adj: dict[int, list[tuple[int, int]]] = {}
    for t, (h, d) in enumerate(triples):
        if h == d:
            continue
        adj.setdefault(h, []).append((d, t))
        adj.setdefault(d, []).append((h, t))
    return adj


def dijkstra_kernels(
    triples: Sequence[tuple[int, int]], scores: Sequence[float], sources: Iterable[int]
) -> list[Kernel]:
    """One shortest path (edge length 1 − score, floored at 0) from each source to every entity it reaches;
    ties keep the first-found path, lower triple positions first."""
    adj = _adjacency(triples)
    kernels: list[Kernel] = []
    for src in dict.fromkeys(sources):
        if src not in adj:
            continue
        dist = {src: 0.0}
        prev: dict[int, tuple[int, int]] = {}
        heap = [(0.0, src)]
        done: set[int] = set()
        while heap:
            d, u = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            for v, t in adj[u]:
                nd = d + max(1.0 - float(scores[t]), 0.0)
                if v not in dist or nd < dist[v] - 1e-12:
                    dist[v], prev[v] = nd, (u, t)
                    heapq.heappush(heap, (nd, v))
        for target in sorted(prev):
            nodes, path = [target], []
            while nodes[-1] != src:
                u, t = prev[nodes[-1]]
                path.append(t)
                nodes.append(u)
            kernels.append(Kernel(nodes[::-1], path[::-1]))
    return kernels


def bfs_kernels(
    triples: Sequence[tuple[int, int]], sources: Iterable[int], max_len: int, max_paths: int
) -> list[Kernel]:
    """Every simple path of 1..``max_len`` triples from each source, breadth first, up to ``max_paths`` in all."""
    adj = _adjacency(triples)
    kernels: list[Kernel] = []
    for src in dict.fromkeys(sources):
        if src not in adj:
            continue
        queue: deque[Kernel] = deque([Kernel([src], [])])
        while queue and len(kernels) < max_paths:
            k = queue.popleft()
            for v, t in adj[k.nodes[-1]]:
                if v in k.nodes:
                    continue
                nxt = Kernel([*k.nodes, v], [*k.triples, t])
                kernels.append(nxt)
                if len(kernels) >= max_paths:
                    break
                if len(nxt.triples) < max_len:
                    queue.append(nxt)
    return kernels


def pool_scores(
    kernels: Sequence[Kernel], scores: Sequence[float], position_a: float, pooling: str = "mean"
) -> tuple[np.ndarray, list[float]]:
    """Pooled triple scores (§3.3) and each kernel's base score (mean or max of its triple scores).

    Triple i of a kernel (1-based, from the source) scores base + m / a^i, m the kernel's minimum triple score; a
    triple's pooled score is its max over kernels. Triples on no kernel are single-hop paths: s + s / a.
    """
    if pooling not in POOLINGS:
        raise ConfigError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    s = np.asarray(scores, dtype=np.float64)
    pooled = np.full(s.shape[0], -np.inf)
    bases: list[float] = []
    for k in kernels:
        vals = s[k.triples]
        base = float(vals.mean() if pooling == "mean" else vals.max())
        low = float(vals.min())
        bases.append(base)
        for i, t in enumerate(k.triples, start=1):
            pooled[t] = max(pooled[t], base + low / position_a**i)
    single = ~np.isfinite(pooled)
    pooled[single] = s[single] + s[single] / position_a
    return pooled, bases


def recency_order(pooled: Sequence[float], chosen: Iterable[int]) -> list[int]:
    """``chosen`` positions in ascending pooled score, best last (§3.4 recency bias); ties put the earlier
    (better coarse-ranked) position later."""
    return sorted(chosen, key=lambda i: (float(pooled[i]), -i))
