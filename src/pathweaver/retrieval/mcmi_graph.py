"""The bounded cost graph AGRAG's MCMI grows on (AGRAG §III-C, Algorithm 2, Eq. 14): the neighbourhood of the
terminals and its edges with their costs, as arrays (``costgraph.CostGraph``).

Edge costs are Eq. 14, c_e = (1 − MS(q, f_e)) / 2 with f_e the edge's triple. The paper embeds only relation
triples; for the other edge kinds the nearest stored vector stands in (our choice): Contains edge → the passage
vector, synonym edge → the normalised sum of the two entity vectors, name link passage↔passage → the normalised
sum of the two passage vectors. Passages hang off a pseudo node by edges of cost ``connector_cost`` (§III-C after
Eq. 14, after HippoRAG 2).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp

from pathweaver.retrieval.costgraph import (
    COST,
    KIND_CONTAINS,
    KIND_LINK,
    KIND_PSEUDO,
    KIND_RELATION,
    KIND_SYNONYM,
    KINDS,
    CostGraph,
    pair_keys,
)
from pathweaver.store.snapshot import GraphSnapshot

PSEUDO = -1  # node id of the pseudo node joining all passages (entities are 0..E-1, passages E..E+P-1)


def edge_cost(cos: float | np.ndarray) -> float | np.ndarray:
    """AGRAG Eq. 14: c_e = (1 − MS(q, f_e)) / 2, in [0, 1] for cosines in [−1, 1]."""
    return (1.0 - cos) / 2.0


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


def _first_per_pair(keys: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Of the edges listed in ``order``, the first for each pair key."""
    _, first = np.unique(keys[order], return_index=True)
    return order[np.sort(first)]


def cost_graph(
    snapshot: GraphSnapshot, nodes: list[int], qvec: np.ndarray, scores: np.ndarray, connector_cost: float,
    contains: sp.csr_matrix | None = None, links: sp.csr_matrix | None = None,
) -> CostGraph:
    """The cost-weighted graph (Algorithm 2) over ``nodes`` (node-space ids), plus the pseudo node, as arrays.

    Labels are node-space ids (``PSEUDO`` last), scores s_v; edge costs are Eq. 14. Parallel relations keep the
    cheapest (ties: the lower relation index); a synonym edge is only added where no relation joins the pair.
    ``contains`` (P, E) replaces the statistical Contains edges (the name layer's mentions and ties); ``links``
    (P, P) adds passage<->passage name links, costed like a synonym edge on the summed passage vectors.
    """
    n_e = snapshot.n_entities
    q = qvec.astype(np.float32, copy=False)
    ids = np.asarray(nodes, dtype=np.int64)
    pas = ids[ids >= n_e] - n_e
    labels: list[int] = ids.tolist() + ([PSEUDO] if pas.size else [])
    n = len(labels)
    local = np.full(n_e + snapshot.n_passages, -1, dtype=np.int64)
    local[ids] = np.arange(ids.size)
    ent_mask = np.zeros(n_e, dtype=bool)
    ent_mask[ids[ids < n_e]] = True
    none = np.zeros(0, dtype=np.int64)
    heads, tails, costs, kinds, relations = [none], [none], [np.zeros(0)], [none], [none]

    def add(a: np.ndarray, b: np.ndarray, cost: np.ndarray, kind: str, rel: np.ndarray | None = None) -> None:
        heads.append(a)
        tails.append(b)
        costs.append(np.asarray(cost, dtype=np.float64))
        kinds.append(np.full(a.size, KINDS.index(kind), dtype=np.int64))
        relations.append(rel if rel is not None else np.full(a.size, -1, dtype=np.int64))

    # relation edges (Eq. 14 on the triple vector)
    src, dst = snapshot.rel_src, snapshot.rel_dst
    rels = np.flatnonzero(ent_mask[src] & ent_mask[dst] & (src != dst))
    rel_keys = none
    if rels.size:
        cost = np.asarray(edge_cost(snapshot.vector_rows("rel_vecs", rels) @ q), dtype=np.float64)
        a, b = local[src[rels]], local[dst[rels]]
        keep = _first_per_pair(pair_keys(a, b, n), np.lexsort((rels, cost)))
        rel_keys = pair_keys(a[keep], b[keep], n)
        add(a[keep], b[keep], cost[keep], KIND_RELATION, rels[keep].astype(np.int64))
    # synonym edges, where no relation joins the pair: the normalised summed entity vector stands in
    if snapshot.syn_a.size:
        sa, sb = snapshot.syn_a.astype(np.int64), snapshot.syn_b.astype(np.int64)
        syn = np.flatnonzero(ent_mask[sa] & ent_mask[sb] & (sa != sb))
        keys = pair_keys(local[sa[syn]], local[sb[syn]], n)
        fresh = ~np.isin(keys, rel_keys)
        syn = syn[fresh][_first_per_pair(keys[fresh], np.arange(int(fresh.sum())))]
        if syn.size:
            vec = snapshot.vector_rows("entity_vecs", sa[syn]) + snapshot.vector_rows("entity_vecs", sb[syn])
            norm = np.linalg.norm(vec, axis=1)
            cos = np.divide(vec @ q, norm, out=np.zeros(syn.size, dtype=np.float64), where=norm > 0)
            add(local[sa[syn]], local[sb[syn]], edge_cost(cos), KIND_SYNONYM)
    # Contains edges passage-entity (the passage vector stands in), and pseudo edges (cost 10)
    if pas.size:
        has_vecs = snapshot.chunk_vecs.shape[0] == snapshot.n_passages
        pcos = snapshot.chunk_vecs[pas] @ q if has_vecs else np.zeros(pas.size)
        if contains is None:
            contains = snapshot.statistical_mentions if snapshot.statistical_mentions is not None \
                else snapshot.mentions
        sub = contains[pas].tocsr()
        row = np.repeat(np.arange(pas.size), np.diff(sub.indptr))
        ent = sub.indices.astype(np.int64)
        row, ent = row[ent_mask[ent]], ent[ent_mask[ent]]
        keep = _first_per_pair(row * n_e + ent, np.arange(row.size))
        add(local[n_e + pas[row[keep]]], local[ent[keep]], edge_cost(pcos[row[keep]]), KIND_CONTAINS)
        add(np.full(pas.size, n - 1, dtype=np.int64), local[n_e + pas], np.full(pas.size, connector_cost), KIND_PSEUDO)
        if links is not None and has_vecs and pas.size > 1:
            pair = sp.triu(links[pas][:, pas], k=1).tocoo()
            if pair.nnz:
                vec = snapshot.chunk_vecs[pas[pair.row]] + snapshot.chunk_vecs[pas[pair.col]]
                norm = np.linalg.norm(vec, axis=1)
                cos = np.divide(vec @ q, norm, out=np.zeros(pair.nnz, dtype=np.float64), where=norm > 0)
                add(local[n_e + pas[pair.row]], local[n_e + pas[pair.col]], edge_cost(cos), KIND_LINK)
    node_scores = np.asarray(scores, dtype=np.float64)[ids]
    return CostGraph(
        labels=labels,
        scores=np.append(node_scores, 0.0) if pas.size else node_scores,
        head=np.concatenate(heads),
        tail=np.concatenate(tails),
        cost=np.concatenate(costs),
        kind=np.concatenate(kinds),
        relation=np.concatenate(relations),
    )


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
        elif kind == KIND_LINK:
            head, label, tail = min(u, v), "names", max(u, v)
        else:
            head, label, tail = min(u, v), "synonym", max(u, v)
        lines.append(f"({node_label(snapshot, head)}, {label}, {node_label(snapshot, tail)})")
    return "\n".join(lines)
