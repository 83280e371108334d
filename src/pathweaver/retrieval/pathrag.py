"""PathRAG (Chen et al., AAAI 2026, §Methodology): keyword → node retrieval, flow-based pruning, path reliability,
paths served in ascending reliability.

1. Node retrieval: each keyword (the agent's ``query.keywords``, else ``keywords.statistical_keywords``) is matched
   to entities by cosine; the keywords take turns adding their next-nearest entity until N = ``top_nodes``.
2. Flow-based pruning (Eq. 2-3) from every retrieved node s, over the snapshot's undirected entity adjacency
   (relation and synonym edges): S(s) = 1; level by level, S(v) = Σ α·S(u)/|N(u,·)| over the nodes u of the
   previous level that still spread; a node is updated at most once (the level it is first reached), and spreads
   only if S(v)/|N(v,·)| ≥ θ (Eq. 3). Propagation stops after ``max_hops`` levels (the authors' code enumerates
   paths of at most 3 hops). All starts propagate at once as a dense (N, E) array times the sparse adjacency.
3. Paths s → t between retrieved nodes follow the propagation DAG; reliability S(P) = Σ_{v∈V_P} S(v) / |E_P|
   (Eq. 4, as printed: node resources summed, divided by the edge count). The best ``paths_per_pair`` per ordered
   pair enter the pool; a path and its reverse count once (the more reliable direction is kept); the top
   K = ``top_paths`` are served in ascending reliability (Eq. 6: the best path is last, next to the answer).
4. Textual paths (Eq. 5): node name, then the edge text (relation label and its supporting sentence), alternating.

``RetrievalResult.chunks``: the passages that support the served paths' edges (``rel_chunks``), ranked by the best
reliability of a path they support (ties by dense cosine), then filled up to ``top_k`` with dense hits.
``triples``: the relation indices on the served paths, in path order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.retrieval.graphs import entity_degrees, pair_relations, relation_passages
from pathweaver.retrieval.keywords import DEFAULT_KEYWORDS, statistical_keywords
from pathweaver.retrieval.seeds import dense_scores, top_indices
from pathweaver.retrieval.types import ChunkHit, PathHit, Query, RetrievalEnv, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot


@dataclass
class PathRAGParams:
    """PathRAG hyper-parameters; N, K and α are fixed in the paper's §Experiments (Implementation Details)."""

    top_nodes: int = 40  # N, retrieved nodes
    top_paths: int = 15  # K, served paths
    alpha: float = 0.7  # α, decay rate (paper text; the authors' code uses 0.8)
    # θ, pruning threshold of Eq. 3. The paper gives no value; the authors' code uses 0.3, but there |N(v,·)|
    # counts neighbours inside one pair's path set only. Over whole-graph degrees that would stop almost every
    # walk after one hop, so our default lets 2-3 hop flows through nodes of moderate degree.
    theta: float = 0.001
    max_hops: int = 3  # longest path in edges (the authors' code: DFS depth <= 3)
    paths_per_pair: int = 2  # "retain only the most reliable relational paths for this node pair" (count: ours)
    max_candidates_per_pair: int = 64  # cap on DAG paths enumerated per pair before scoring (efficiency; ours)
    n_keywords: int = DEFAULT_KEYWORDS  # statistical keywords when the query brings none (ours)

    def validate(self) -> None:
        if self.top_nodes < 2 or self.top_paths < 1:
            raise ConfigError(f"pathrag needs top_nodes >= 2 and top_paths >= 1, got {self.top_nodes}, {self.top_paths}")
        if not 0.0 < self.alpha <= 1.0:
            raise ConfigError(f"pathrag alpha must be in (0, 1], got {self.alpha}")
        if self.theta < 0.0:
            raise ConfigError(f"pathrag theta must be >= 0, got {self.theta}")
        if self.max_hops < 1 or self.paths_per_pair < 1 or self.max_candidates_per_pair < 1 or self.n_keywords < 1:
            raise ConfigError("pathrag max_hops, paths_per_pair, max_candidates_per_pair and n_keywords must be >= 1")


@dataclass
class Flow:
    """Eq. 2-3 propagation from several starts: per start row, resources ``S``, the level each node was reached
    at (-1 = never) and whether it spread further (``spread``)."""

    starts: list[int]
    S: np.ndarray  # (n_starts, E) float64
    level: np.ndarray  # (n_starts, E) int16
    spread: np.ndarray  # (n_starts, E) bool


def retrieve_nodes(snapshot: GraphSnapshot, keyword_vecs: np.ndarray, n: int) -> list[int]:
    """PathRAG node retrieval: keywords take turns adding their next-nearest entity until ``n`` are retrieved."""
    if snapshot.n_entities == 0 or keyword_vecs.shape[0] == 0:
        return []
    n = min(n, snapshot.n_entities)
    sims = keyword_vecs @ snapshot.entity_vecs.T  # (K, E)
    ranked = [top_indices(row, n).tolist() for row in sims]
    out: list[int] = []
    seen: set[int] = set()
    for rank in range(n):
        for lst in ranked:
            if rank < len(lst) and lst[rank] not in seen:
                seen.add(lst[rank])
                out.append(lst[rank])
                if len(out) == n:
                    return out
    return out


def propagate(
    adjacency: sp.csr_matrix, degrees: np.ndarray, starts: list[int], alpha: float, theta: float, max_hops: int
) -> Flow:
    """Flow-based pruning (PathRAG Eq. 2-3) from every node of ``starts`` at once over an undirected adjacency."""
    n_s, n = len(starts), adjacency.shape[0]
    S = np.zeros((n_s, n), dtype=np.float64)
    level = np.full((n_s, n), -1, dtype=np.int16)
    spread = np.zeros((n_s, n), dtype=bool)
    rows = np.arange(n_s)
    S[rows, starts] = 1.0
    level[rows, starts] = 0
    frontier = np.zeros((n_s, n), dtype=bool)
    frontier[rows, starts] = True
    safe_deg = np.maximum(degrees, 1.0)
    adj_t = adjacency.T.tocsr()
    for hop in range(1, max_hops + 1):
        # Eq. 3: a node of the current level spreads only if S(v)/|N(v,·)| >= θ (and it has neighbours).
        alive = frontier & (degrees > 0) & (S / safe_deg >= theta)
        spread |= alive
        if not alive.any():
            break
        out = np.where(alive, alpha * S / safe_deg, 0.0)  # per-edge share α·S(u)/|N(u,·)|, Eq. 2
        incoming = np.asarray((adj_t @ sp.csr_matrix(out).T).T.todense())  # Σ over in-neighbours u
        new = (incoming > 0) & (level < 0)  # each node is updated at most once
        S[new] = incoming[new]
        level[new] = hop
        frontier = new
    return Flow(list(starts), S, level, spread)


def _dag_paths(adjacency: sp.csr_matrix, flow: Flow, i: int, target: int, cap: int) -> list[list[int]]:
    """All start→target paths of start row ``i`` along the propagation DAG (at most ``cap``)."""
    lvl, spread = flow.level[i], flow.spread[i]
    out: list[list[int]] = []

    def back(node: int, suffix: list[int]) -> None:
        if len(out) >= cap:
            return
        if lvl[node] == 0:
            out.append([node, *suffix])
            return
        nbrs = adjacency.indices[adjacency.indptr[node] : adjacency.indptr[node + 1]]
        for u in nbrs[(lvl[nbrs] == lvl[node] - 1) & spread[nbrs]].tolist():
            back(u, [node, *suffix])

    back(target, [])
    return out


def reliability(path: list[int], resources: np.ndarray) -> float:
    """PathRAG Eq. 4: S(P) = (1/|E_P|) Σ_{v∈V_P} S(v)."""
    return float(resources[path].sum()) / (len(path) - 1)


def candidate_paths(
    snapshot: GraphSnapshot, nodes: list[int], params: PathRAGParams
) -> list[tuple[float, list[int]]]:
    """The pool of (reliability, path) over all ordered pairs of ``nodes``, best ``paths_per_pair`` per pair,
    a path and its reverse merged (highest reliability kept)."""
    adjacency = snapshot.adjacency
    assert adjacency is not None
    flow = propagate(adjacency, entity_degrees(snapshot), nodes, params.alpha, params.theta, params.max_hops)
    node_arr = np.array(nodes, dtype=np.int64)
    pool: dict[tuple[int, ...], tuple[float, list[int]]] = {}
    for i, start in enumerate(nodes):
        reached = node_arr[flow.level[i, node_arr] > 0]
        for t in reached.tolist():
            if t == start:
                continue
            scored = [(reliability(p, flow.S[i]), p) for p in _dag_paths(adjacency, flow, i, t, params.max_candidates_per_pair)]
            scored.sort(key=lambda rp: (-rp[0], rp[1]))
            for rel, path in scored[: params.paths_per_pair]:
                key = tuple(min(path, path[::-1]))
                if key not in pool or rel > pool[key][0]:
                    pool[key] = (rel, path)
    return list(pool.values())


def _edge_relations(snapshot: GraphSnapshot, u: int, v: int) -> list[int]:
    return pair_relations(snapshot).get((min(u, v), max(u, v)), [])


def path_text(snapshot: GraphSnapshot, path: list[int]) -> str:
    """PathRAG Eq. 5: node text, edge text, node text, ... (edge text = relation label and supporting sentence)."""
    parts = [snapshot.entity_names[path[0]]]
    for u, v in zip(path[:-1], path[1:], strict=True):
        rels = _edge_relations(snapshot, u, v)
        if rels:
            r = rels[0]
            desc = snapshot.rel_descriptions[r].strip()
            edge = f"{snapshot.rel_labels[r]}: {desc}" if desc else snapshot.rel_labels[r]
        else:
            edge = "synonym of"
        parts.append(f"--[{edge}]-->")
        parts.append(snapshot.entity_names[v])
    return " ".join(parts)


def make_path_hit(snapshot: GraphSnapshot, path: list[int], rel: float) -> PathHit:
    """A served path: per-edge relation index (-1 = synonym edge), text, and the passages supporting its edges."""
    rel_chunks = relation_passages(snapshot)
    relations: list[int] = []
    passages: list[int] = []
    for u, v in zip(path[:-1], path[1:], strict=True):
        rels = _edge_relations(snapshot, u, v)
        relations.append(rels[0] if rels else -1)
        for r in rels:
            for p in rel_chunks.indices[rel_chunks.indptr[r] : rel_chunks.indptr[r + 1]].tolist():
                if p not in passages:
                    passages.append(p)
    return PathHit(list(path), relations, rel, path_text(snapshot, path), passages)


def _keyword_vectors(env: RetrievalEnv, keywords: list[str]) -> np.ndarray:
    """Entity names reuse their stored vectors; other keywords are embedded."""
    snap = env.snapshot
    known = [snap.entity_index.get(k) for k in keywords]
    vecs = np.zeros((len(keywords), snap.entity_vecs.shape[1]), dtype=np.float32)
    unknown = [i for i, e in enumerate(known) if e is None]
    for i, e in enumerate(known):
        if e is not None:
            vecs[i] = snap.entity_vecs[e]
    if unknown:
        vecs[unknown] = env.encode([keywords[i] for i in unknown])
    return vecs


def rank_chunks(snapshot: GraphSnapshot, paths: list[PathHit], dense: np.ndarray, top_k: int) -> list[ChunkHit]:
    """Passages supporting ``paths`` by best path reliability (ties: dense cosine), filled with dense hits."""
    best: dict[int, float] = {}
    for hit in paths:
        for p in hit.passages:
            best[p] = max(best.get(p, 0.0), hit.reliability)
    order = sorted(best, key=lambda p: (-best[p], -float(dense[p]) if dense.size else 0.0, p))
    chunks = [ChunkHit(p, best[p]) for p in order[:top_k]]
    if len(chunks) < top_k and dense.size:
        for p in top_indices(dense, top_k + len(chunks)).tolist():
            if p not in best:
                chunks.append(ChunkHit(p, 0.0))
            if len(chunks) >= top_k:
                break
    return chunks


def pathrag_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: PathRAGParams) -> RetrievalResult:
    """PathRAG retrieval (see the module docstring); ``paths`` are in ascending reliability (Eq. 6)."""
    snap = env.snapshot
    keywords = list(query.keywords) or statistical_keywords(snap, query.text, query.vec, params.n_keywords)
    nodes = retrieve_nodes(snap, _keyword_vectors(env, keywords), params.top_nodes) if keywords else []
    pool = candidate_paths(snap, nodes, params) if len(nodes) >= 2 else []
    pool.sort(key=lambda rp: (-rp[0], len(rp[1]), rp[1]))
    served = [make_path_hit(snap, path, rel) for rel, path in pool[: params.top_paths]]
    served.reverse()  # Eq. 6: ascending reliability, the most reliable path last
    triples = [r for hit in served for r in hit.relations if r >= 0]
    dense = dense_scores(snap, query.vec) if snap.n_passages else np.zeros(0)
    return RetrievalResult(
        "pathrag",
        rank_chunks(snap, served, dense, top_k),
        paths=served,
        triples=triples,
        info={"keywords": keywords, "nodes": len(nodes), "candidate_paths": len(pool)},
    )
