"""PathRAG (Chen et al., AAAI 2026, §Methodology): keyword → node retrieval, flow-based pruning, path reliability,
paths served in ascending reliability.

1. Node retrieval (N = ``top_nodes``): the document names the question mentions (the name layer's automaton,
   ``name_nodes``), the documents of the top ``dense_nodes`` dense passages unless the question names two or more
   documents (a title entity's description is its document, so its nearest-node test is the dense one), then the paper's keyword → node retrieval (the agent's
   ``query.keywords``, else ``keywords.statistical_keywords``; keywords take turns adding their next-nearest
   entity) over the entities of the graph walked.
2. The graph walked (``namegraph.path_adjacency``): the name edges (``names``), directed from a to b when a's
   document mentions b, and, with ``statistical`` > 0 or on a store without names, the statistical relation
   and synonym edges (both ways). The paper preset (``presets.py``) walks the statistical graph alone.
3. Flow-based pruning (Eq. 2-3, ``pathrag_flow``) from every retrieved node s: S(s) = 1; level by level,
   S(v) = Σ α·S(u)/|N(u,·)| over the in-neighbours u of the previous level that still spread (|N(u,·)|: u's
   out-degree); a node is updated at most once (the level it is
   first reached), and spreads only if S(v)/|N(v,·)| ≥ θ (Eq. 3). Propagation stops after ``max_hops`` levels (the
   authors' code enumerates paths of at most 3 hops). All starts propagate at once as a sparse matrix product.
4. Paths (``paths = "flow"``): every simple path of 1..``max_hops`` edges inside the pruned flow (each node on it
   reached, each inner node spreading), so a pair is joined by paths of several lengths, not only the shortest
   (``"hop-first"`` keeps the earlier minimum-hop paths, the paper's Table 3 ablation). Ends: pairs of retrieved
   nodes (the paper, ``targets = "retrieved"``, set by the paper preset), or also any node the flow of a
   question-named start reached (``targets = "named"``, ours, the default: a bridge document the question does not name; where the question
   names none, the top dense passage's document is that start, ``unnamed``). Reliability
   S(P) = Σ_{v∈V_P} S(v) / |E_P| (Eq. 4, as printed: node resources summed, divided by the edge count). The best
   ``paths_per_pair`` per ordered pair enter the pool; a path and its reverse count once (the more reliable
   direction is kept); the top K = ``top_paths`` are served in ascending reliability (Eq. 6: the best path last).
5. Textual paths (Eq. 5): node name, then the edge text (relation label and its supporting sentence, or the
   document whose passage names the other end), alternating.

``RetrievalResult.chunks``: the passages of the served paths (relation chunks, the passages behind name edges, and
each document entity's own passage nearest the query), ranked by the best reliability of
a path they lie on (ties by dense cosine), taking turns with the text units of the retrieved nodes the question
names, or where it names none the top dense passage's document (``text_units``, ``unnamed``; PathRAG's released
code, after LightRAG's local context, serves the retrieved nodes' text chunks next to the paths), then filled up
to ``top_k`` with dense hits marked as back-fill (the paper preset drops them: ``registry.run_method``).
``triples``: the relation indices on the served paths, in path order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.numeric.parallel import matmul
from pathweaver.retrieval.graphs import cached, documents_link, pair_relations, relation_passages
from pathweaver.retrieval.keywords import DEFAULT_KEYWORDS, NAME_PARTS, query_names, statistical_keywords
from pathweaver.retrieval.linked import NoteSteps, check_linked_notes
from pathweaver.retrieval.namegraph import (
    mention_sentence,
    name_edges,
    nearest_own_passage,
    passages_of,
    path_adjacency,
    tied_entities,
)
from pathweaver.retrieval.pathrag_flow import dag_paths, flow_paths, propagate, reliability
from pathweaver.retrieval.pathrag_passages import node_text_units, rank_chunks, with_text_units
from pathweaver.retrieval.seeds import SeedError, dense_scores, top_indices
from pathweaver.retrieval.types import (
    NAME_EDGE,
    SYNONYM_EDGE,
    PathHit,
    Query,
    RetrievalEnv,
    RetrievalResult,
)
from pathweaver.store.snapshot import GraphSnapshot
from pathweaver.text import normalize

PATH_MODES = ("flow", "hop-first")
TEXT_UNITS = ("named", "none")
TOP_NODES_LINKED, TOP_NODES_UNLINKED = 10, 40  # N when ``top_nodes`` is None (see PathRAGParams)


@dataclass
class PathRAGParams(NoteSteps):
    """pathweaver's default PathRAG over the names people wrote; ``preset = "paper"`` sets the paper's N = 40,
    K = 15, α = 0.7 (§Experiments, Implementation Details), keyword nodes and graph (``presets.py``)."""

    # N, retrieved nodes: the paper's experiments use N in [10, 60] (§Complexity Analysis). None: 10 where the
    # store's documents name each other (``graphs.documents_link``; best on the dev splits over the name layer),
    # else 40, where keyword nodes carry the search (it kept GraphRAG-Bench medical's recall); docs/design-notes.md
    # "`pathrag`: PathRAG"
    top_nodes: int | None = None
    top_paths: int = 15  # K, served paths
    alpha: float = 0.7  # α, decay rate (paper text; the authors' code uses 0.8)
    # θ, pruning threshold of Eq. 3. The paper gives no value; the authors' code uses 0.3, but there |N(v,·)|
    # counts neighbours inside one pair's path set only. Over whole-graph degrees that would stop almost every
    # walk after one hop, so our default lets 2-3 hop flows through nodes of moderate degree.
    theta: float = 0.001
    max_hops: int = 3  # longest path in edges (the authors' code: DFS depth <= 3)
    # "retain only the most reliable relational paths for this node pair": how many is ours
    paths_per_pair: int = 2
    max_candidates_per_pair: int = 64  # DAG paths enumerated per pair before scoring (efficiency; ours)
    n_keywords: int = DEFAULT_KEYWORDS  # statistical keywords when the query brings none (ours)
    # ours (issue 23): "hop-first" keeps only minimum-hop paths (PathRAG Table 3's ablation); "flow" (default) takes every simple path of 1..max_hops edges whose inner nodes the flow kept
    paths: str = "flow"
    # ours (issue 23), the name layer: weight of the statistical relation/synonym edges next to the name edges
    # (0 = the name edges alone, when the store has any; > 0 = both, as 0/1 structure)
    statistical: float = 0.0
    # the name edges join the graph walked (ours; false, the statistical graph alone, only through the paper
    # preset). They are directed in Eq. 2-3 (§Path Retrieval as printed: S flows from v_j to the nodes it points
    # to, |N(v_j, .)| the out-degree): a name edge points from the mentioning document to the name it mentions, so
    # a hub that many documents mention no longer joins them (undirected name edges lost on all three dev splits)
    names: bool = True
    name_nodes: bool = True  # the document names the question mentions lead the retrieved nodes
    name_parts: int = NAME_PARTS  # names the question calls by their last word, as ppr's (0 = off; ours)
    # the documents of the top n dense passages join the retrieved nodes (0 = off; ours): with the named nodes'
    # text units served beside the paths, more dense documents only crowd out the paths between named ones
    dense_nodes: int = 3
    # they join only while the question names fewer than two documents (ours: a path needs two ends; a question
    # that names its pair needs no dense stand-in for them; joining always lost on dev). A served path's document
    # entities bring their one passage nearest the query (§Preliminaries: a node has one textual chunk t_v, and
    # Eq. 5 serves it; every passage, the ends' alone, or none lost on dev)
    # "retrieved": paths join pairs of retrieved nodes (the paper; only through the paper preset); "named" (ours):
    # the flows of the nodes the question names may also end at any node they reached, so a document the question
    # leads to without naming it can be served (every start's flow ending anywhere flooded the list, and lost)
    targets: str = "named"
    max_walk_steps: int = 20000  # depth-first steps per start when enumerating flow paths (efficiency; ours)
    # the retrieved nodes' text units (PathRAG's released code, after LightRAG, serves the text chunks of the
    # retrieved nodes next to the paths): "named" (default) the nodes the question names, "none" paths alone (the
    # paper preset; every retrieved node's lost on dev: the dense-passage documents among them only repeat dense
    # hits); they take turns with the path passages in the chunk list, ``units_per_node`` passages per node (its
    # nearest to the query). A passage scores the best reliability of a served path it lies on (the sum lost)
    text_units: str = "named"
    # ours: where the question names no document, the top dense passage's document stands in for the named nodes:
    # "anchor" (default) as their text unit and a start whose paths may end anywhere (``targets``), or "none"
    unnamed: str = "anchor"
    units_per_node: int = 1

    def validate(self) -> None:
        check_linked_notes("pathrag", self.linked_notes)
        if (self.top_nodes is not None and self.top_nodes < 1) or self.top_paths < 1:
            raise ConfigError(
                f"pathrag needs top_nodes >= 1 and top_paths >= 1, got {self.top_nodes}, {self.top_paths}"
            )
        if not 0.0 < self.alpha <= 1.0:
            raise ConfigError(f"pathrag alpha must be in (0, 1], got {self.alpha}")
        if self.theta < 0.0:
            raise ConfigError(f"pathrag theta must be >= 0, got {self.theta}")
        if self.paths not in PATH_MODES:
            raise ConfigError(f"pathrag paths must be one of {PATH_MODES}, got {self.paths!r}")
        if self.targets not in ("retrieved", "named"):
            raise ConfigError(f"pathrag targets must be named (or retrieved, through preset=paper), got "
                              f"{self.targets!r}")
        if self.unnamed not in ("anchor", "none"):
            raise ConfigError(f"pathrag unnamed must be anchor or none, got {self.unnamed!r}")
        if self.text_units not in TEXT_UNITS or self.units_per_node < 1:
            raise ConfigError(f"pathrag text_units must be one of {TEXT_UNITS} and units_per_node >= 1, got "
                              f"{self.text_units!r}, {self.units_per_node}")
        if min(self.statistical, self.dense_nodes, self.name_parts) < 0:
            raise ConfigError("pathrag statistical, dense_nodes and name_parts must be >= 0")
        if (
            self.max_hops < 1
            or self.paths_per_pair < 1
            or self.max_candidates_per_pair < 1
            or self.n_keywords < 1
        ):
            raise ConfigError(
                "pathrag max_hops, paths_per_pair, max_candidates_per_pair and n_keywords must be >= 1"
            )


def retrieve_nodes(snapshot: GraphSnapshot, keyword_vecs: np.ndarray, n: int,
                   candidates: np.ndarray | None = None) -> list[int]:
    """PathRAG node retrieval: keywords take turns adding their next-nearest entity until ``n`` are retrieved.
    ``candidates`` (sorted entity indices) limits the search to them (the entities of the graph walked)."""
    if snapshot.n_entities == 0 or keyword_vecs.shape[0] == 0:
        return []
    if candidates is None:
        ids, vecs = np.arange(snapshot.n_entities), snapshot.entity_vecs
    else:
        ids = candidates
        vecs = cached(snapshot, ("pathrag_candidate_vecs", ids.size, int(ids.sum())),
                      lambda: np.ascontiguousarray(snapshot.vector_rows("entity_vecs", ids)))
    n = min(n, ids.size)
    if n == 0:
        return []
    sims = matmul(vecs, keyword_vecs.T)  # (E, K)
    ranked = [ids[top_indices(sims[:, k], n)].tolist() for k in range(sims.shape[1])]
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


def query_nodes(env: RetrievalEnv, query: Query, params: PathRAGParams
                ) -> tuple[list[int], list[str], frozenset[int]]:
    """The retrieved nodes V_q (N = ``top_nodes``) and the keywords: the names the question mentions
    (``name_nodes``), the documents of the top ``dense_nodes`` dense passages, then the paper's keyword → node
    retrieval over the entities of the graph walked (ours: the first two, issue 23). Also the named nodes (with
    ``unnamed = "anchor"``, the top dense passage's document where the question names none)."""
    snap = env.snapshot
    nodes: list[int] = []
    if params.name_nodes and query.text:
        nodes += query_names(env, query.text, params.name_parts)
    named = frozenset(nodes)
    paired = named_documents(snap, named) >= 2
    if params.dense_nodes and not paired and snap.n_passages and snap.chunk_vecs.shape[0] == snap.n_passages:
        top = top_indices(dense_scores(snap, query.vec), params.dense_nodes).tolist()
        nodes += tied_entities(snap, top)
        if not named and params.unnamed == "anchor":
            named = frozenset(tied_entities(snap, top[:1]))
    n = params.top_nodes or (TOP_NODES_LINKED if documents_link(snap) else TOP_NODES_UNLINKED)
    nodes = list(dict.fromkeys(nodes))[:n]
    keywords = list(query.keywords) or statistical_keywords(snap, query.text, query.vec, params.n_keywords)
    if keywords and len(nodes) < n:
        # the entities on an edge of the graph walked, whichever way its name edges point
        walked = cached(snap, ("pathrag_walked", params.statistical > 0, params.names),
                        lambda: np.flatnonzero(np.diff(_both_ways(snap, params).indptr) > 0))
        found = retrieve_nodes(snap, _keyword_vectors(env, keywords), n, walked)
        nodes += [e for e in found if e not in nodes][: n - len(nodes)]
    return nodes, keywords, named


def walked_graph(snapshot: GraphSnapshot, params: PathRAGParams) -> sp.csr_matrix:
    """The (E, E) 0/1 adjacency Eq. 2-3 walk: the directed name edges (with the statistical edges when
    ``statistical`` > 0), or with ``names`` false the statistical relation and synonym edges alone (both ways)."""
    if params.names or snapshot.adjacency is None:
        return path_adjacency(snapshot, params.statistical, directed=True)
    return snapshot.adjacency.tocsr()  # as ``path_adjacency`` walks a store without names


def _both_ways(snapshot: GraphSnapshot, params: PathRAGParams) -> sp.csr_matrix:
    """``walked_graph`` with its name edges both ways: an entity a name edge only points to is on it too."""
    return path_adjacency(snapshot, params.statistical) if params.names else walked_graph(snapshot, params)


def named_documents(snapshot: GraphSnapshot, named: frozenset[int]) -> int:
    """How many documents ``named`` names (a title and its alias name one document: the same own passages)."""
    return len({tuple(passages_of(snapshot, e)) for e in named})


def candidate_paths(
    snapshot: GraphSnapshot, nodes: list[int], params: PathRAGParams, named: frozenset[int] = frozenset()
) -> list[tuple[float, list[int]]]:
    """The pool of (reliability, path) over all ordered pairs of ``nodes``, best ``paths_per_pair`` per pair,
    a path and its reverse merged (highest reliability kept)."""
    adjacency = walked_graph(snapshot, params)
    degrees = np.diff(adjacency.indptr).astype(np.float64)  # |N(v,·)|, distinct (out-)neighbours
    # hop-first paths step back from the target to its in-neighbours (flow paths need no reverse graph)
    backward = adjacency.T.tocsr() if params.names and params.paths == "hop-first" else adjacency
    flow = propagate(adjacency, degrees, nodes, params.alpha, params.theta, params.max_hops)
    node_arr = np.array(nodes, dtype=np.int64)
    pool: dict[tuple[int, ...], tuple[float, list[int]]] = {}
    for start, row in zip(nodes, flow.rows, strict=True):
        open_ends = params.targets == "named" and start in named
        ends = row.nodes if open_ends else node_arr[row.find(node_arr) >= 0]
        reached = [t for t in ends.tolist() if t != start]
        if params.paths == "flow":
            found = flow_paths(adjacency, row, set(reached), params.max_hops, params.max_candidates_per_pair,
                               params.max_walk_steps)
        else:
            found = {t: dag_paths(backward, row, t, params.max_candidates_per_pair) for t in reached}
        for t in reached:
            scored = [(reliability(p, row), p) for p in found.get(t, [])]
            scored.sort(key=lambda rp: (-rp[0], rp[1]))
            for rel, path in scored[: params.paths_per_pair]:
                key = tuple(min(path, path[::-1]))
                if key not in pool or rel > pool[key][0]:
                    pool[key] = (rel, path)
    return list(pool.values())


def _edge_relations(snapshot: GraphSnapshot, u: int, v: int) -> list[int]:
    return pair_relations(snapshot).between(u, v)


def _edge_text(snapshot: GraphSnapshot, u: int, v: int) -> str:
    rels = _edge_relations(snapshot, u, v)
    if rels:
        r = rels[0]
        desc = snapshot.rel_descriptions[r].strip()
        return f"{snapshot.rel_labels[r]}: {desc}" if desc else snapshot.rel_labels[r]
    row = name_edges(snapshot).row_between(u, v) if name_edges(snapshot).size else None
    if row is not None:  # the note's own sentence that names the other
        return f"mentions: {mention_sentence(snapshot, row)}"
    return "synonym of"


def path_text(snapshot: GraphSnapshot, path: list[int]) -> str:
    """PathRAG Eq. 5: node text, edge text, node text, ... (edge text = relation label and supporting sentence,
    or for a name edge the document whose passage mentions the other name)."""
    parts = [snapshot.entity_names[path[0]]]
    for u, v in zip(path[:-1], path[1:], strict=True):
        parts.append(f"--[{_edge_text(snapshot, u, v)}]-->")
        parts.append(snapshot.entity_names[v])
    return " ".join(parts)


def make_path_hit(snapshot: GraphSnapshot, path: list[int], rel: float, dense: np.ndarray | None = None,
                  directed: bool = True, names: bool = True) -> PathHit:
    """A served path: per-edge relation index (``NAME_EDGE``, ``SYNONYM_EDGE``), text, and its passages: those
    supporting its edges (relation chunks, the passages behind name edges), then each document entity's one own
    passage with the highest ``dense`` score (a title's description is its document; every own passage where
    ``dense`` is not given). A
    ``directed`` name edge u -> v brings only u's passages that mention v; with ``names`` false the name edges
    bring none (the statistical graph alone)."""
    rel_chunks = relation_passages(snapshot)
    edges = name_edges(snapshot)
    relations: list[int] = []
    passages: list[int] = []

    def add(ps: list[int]) -> None:
        passages.extend(p for p in ps if p not in passages)

    for u, v in zip(path[:-1], path[1:], strict=True):
        rels = _edge_relations(snapshot, u, v)
        relations.append(rels[0] if rels else NAME_EDGE if edges.size and edges.row_between(u, v) is not None
                         else SYNONYM_EDGE)
        for r in rels:
            add(rel_chunks.indices[rel_chunks.indptr[r] : rel_chunks.indptr[r + 1]].tolist())
        if edges.size and names:
            add(edges.passages_from(u, v) if directed else edges.passages_between(u, v))
    for node in path:
        if dense is not None and dense.size:
            add([p for p in [nearest_own_passage(snapshot, node, dense)] if p is not None])
        else:
            add(passages_of(snapshot, node))
    return PathHit(list(path), relations, rel, path_text(snapshot, path), passages)


def _keyword_vectors(env: RetrievalEnv, keywords: list[str]) -> np.ndarray:
    """Keywords naming an entity (after ``normalize``) reuse its stored vector; other keywords are embedded."""
    snap = env.snapshot
    dim = snap.vector_dim("entity_vecs")
    if dim == 0:
        raise SeedError(
            "pathrag needs entity vectors; load the snapshot with vectors from a store indexed with the embedder"
        )
    known = [snap.entity_index.get(normalize(k)) for k in keywords]
    vecs = np.zeros((len(keywords), dim), dtype=np.float32)
    unknown = [i for i, e in enumerate(known) if e is None]
    for i, e in enumerate(known):
        if e is not None:
            vecs[i] = snap.vector_rows("entity_vecs", e)
    if unknown:
        vecs[unknown] = env.encode([keywords[i] for i in unknown])
    return vecs


def pathrag_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: PathRAGParams) -> RetrievalResult:
    """PathRAG retrieval (see the module docstring); ``paths`` are in ascending reliability (Eq. 6)."""
    snap = env.snapshot
    nodes, keywords, named = query_nodes(env, query, params)
    pool = candidate_paths(snap, nodes, params, named) if len(nodes) >= 2 or named else []
    pool.sort(key=lambda rp: (-rp[0], len(rp[1]), rp[1]))
    dense = dense_scores(snap, query.vec) if snap.n_passages else np.zeros(0)
    served = [make_path_hit(snap, path, rel, dense, names=params.names) for rel, path in pool[: params.top_paths]]
    served.reverse()  # Eq. 6: ascending reliability, the most reliable path last
    triples = [r for hit in served for r in hit.relations if r >= 0]
    chunks = rank_chunks(snap, served, dense, top_k)
    if params.text_units != "none":
        units = [v for v in nodes if v in named]
        chunks = with_text_units(chunks, node_text_units(snap, units, dense, params.units_per_node), top_k)
    return RetrievalResult(
        "pathrag",
        chunks,
        paths=served,
        triples=triples,
        info={"keywords": keywords, "nodes": len(nodes), "candidate_paths": len(pool),
              "named_nodes": [snap.entity_names[e] for e in nodes[:5]]},
    )
