"""LEGO-GraphRAG: a subgraph-extraction module composed with a path-retrieval module (LEGO appendix B.1, B.7-B.8).

``lego:<sbe|sae>+<sbr|osar|isar>``: extraction (``lego_extract``) keeps a query subgraph, path retrieval
(``lego_paths``) finds ranked paths in it from the query's seed entities. Chunks are the passages that support the
path triples, ranked by their best path's score, then filled with dense chunks up to ``top_k``.

The graph (issue 23, ``names`` / ``statistical``): the name edges (a's document has a passage that mentions b;
``namegraph``) and the statistical relation and synonym edges. A name edge's passage is the passage that mentions
b; in the served ``PathHit.relations`` it reads ``NAME_EDGE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.retrieval.keywords import query_names
from pathweaver.retrieval.lego_extract import (
    SYNONYM,
    EdgeLayers,
    ExtractedSubgraph,
    edge_ends,
    graph_seeds,
    is_name,
    name_row,
    query_seeds,
    sae_eem,
    sbe_ppr,
)
from pathweaver.retrieval.lego_paths import (
    PRUNE_RULES,
    PathScorer,
    PruneRule,
    isar_paths,
    osar_paths,
    path_text,
    sbr_paths,
)
from pathweaver.retrieval.linked import NoteSteps, check_linked_notes
from pathweaver.retrieval.namegraph import best_passage, name_edges, nearest_own_passage
from pathweaver.retrieval.pagerank import COARSE_TOL
from pathweaver.retrieval.seeds import dense_scores, top_indices
from pathweaver.retrieval.types import (
    NAME_EDGE,
    ChunkHit,
    PathHit,
    Query,
    RetrievalEnv,
    RetrievalResult,
    Subgraph,
)
from pathweaver.store.snapshot import GraphSnapshot

EXTRACTORS = ("sbe", "sae")
PATH_MODULES = ("sbr", "osar", "isar")


@dataclass
class LegoParams(NoteSteps):
    """LEGO-GraphRAG parameters from appendix Table 1 unless marked ours; pathweaver's default walks the name
    edges too, ``preset = "paper"`` the statistical graph alone (``presets.py``)."""

    extractor: str = "sbe"  # sbe (SBE-PPR) | sae (SAE-EEMs)
    path_module: str = "isar"  # sbr (SBR-SPR) | osar (OSAR-EEMs) | isar (ISAR-EEMs)
    seed_entities: int = 3  # ours: start entities per query (the appendix assumes given topic entities)
    max_ent: int = 1000  # Table 1, SBE-PPR: entities kept
    ppr_damping: float = 0.85  # ours: PPR walk probability (appendix gives none)
    ppr_tol: float = 1e-7  # ours: L1 convergence tolerance of the PPR power iteration
    ppr_max_iter: int = 100  # ours
    ppr_coarse_tol: float = COARSE_TOL  # ours: float32 PPR steps down to this change first (0 = off; ppr.py)
    max_edge: int = 64  # Table 1, SAE-EEMs: top triples kept
    sae_hops: int = 1  # B.7 (3): one-hop neighbours of each retrieved node are merged in
    top_k_paths: int = 32  # Table 1, OSAR: top_k paths (also caps SBR's output, ours)
    beam_width: int = 8  # Table 1, ISAR: beam width B
    max_hop: int = 4  # Table 1, ISAR: max path length L (also bounds OSAR's candidate paths)
    # B.8 (1): score only the newly added triple at each ISAR step (stored relation vectors, a name edge by its
    # passage), so no path text is embedded per question: on by default (ours; notes dev 10 s -> 0.3 s a question,
    # multi-hop dev at or above the path-text EEM; docs/benchmarks.md), off in the paper preset
    triple_scoring: bool = True
    dynamic_pruning: bool = False  # B.8 (1): dynamic threshold on normalised candidate scores per ISAR step
    prune_rule: str = "mean"  # B.8 (1): keep scores above the mean, or above a percentile
    prune_percentile: float = 50.0  # B.8 (1): the "given percentile" when prune_rule = "percentile"
    sbr_targets: int = 32  # ours: best-scored subgraph entities SBR draws shortest paths to (besides seeds)
    max_candidates: int = 1000  # ours: cap on OSAR's candidate paths (breadth-first, shortest kept)
    # ours: cap on ISAR extensions embedded per step, pre-cut by triple score (64: 256's dev figures, faster since
    # name edges read as sentences; docs/benchmarks.md, "Why the defaults")
    max_expansions: int = 64
    subgraph_max_edges: int = 500  # ours: edges served in the result's subgraph (path edges first)
    use_synonyms: bool = True  # ours: synonym edges count as graph edges
    # ours (issue 23): the name edges (a's document mentions b) join the graph; a store without them walks the
    # statistical edges alone. false (the paper's graph) only through the paper preset (presets.py)
    names: bool = True
    # ours (issue 23): the statistical relation (and synonym) edges join the graph (> 0), as pathrag's and pooling's
    # ``statistical``. 0 (default, as pathrag's and mcmi's): the name edges alone where the store has any; with
    # them lego:sae+sbr gained 0.12 on hotpotqa dev but lost 0.02 on musique and 0.18 on 2wiki (docs/design-notes.md)
    statistical: float = 0.0
    # ours (issue 23): a name edge (a, mentions, b) also stands for b's document's passage nearest the query, as a
    # Path Pooling name triple does (its tail passage): a path that ends at b has then read b's page
    tail_passages: bool = True
    # ours: the passages a relation on a path stands for: "all" its chunks, or the "best", the one nearest the
    # query (Path Pooling's ``triple_passages``: many chunks sharing one triple's score crowd the top k)
    triple_passages: str = "all"
    # ours: when the paths' passages are fewer than top_k, "subgraph" goes on with the passages of the extracted
    # subgraph's other edges (best triple score first) before any dense back-fill; "dense" back-fills at once (the
    # paths' passages alone, as the paper: only through the paper preset, which then drops the back-fill)
    fill: str = "subgraph"

    def validate(self) -> None:
        check_linked_notes("lego", self.linked_notes)
        if self.extractor not in EXTRACTORS:
            raise ConfigError(
                f"unknown LEGO extractor {self.extractor!r}; choose one of: {', '.join(EXTRACTORS)}"
            )
        if self.path_module not in PATH_MODULES:
            raise ConfigError(
                f"unknown LEGO path module {self.path_module!r}; choose one of: {', '.join(PATH_MODULES)}"
            )
        for name in (
            "seed_entities",
            "max_ent",
            "max_edge",
            "top_k_paths",
            "beam_width",
            "max_hop",
            "ppr_max_iter",
            "max_candidates",
            "max_expansions",
            "subgraph_max_edges",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"lego {name} must be at least 1, got {getattr(self, name)}")
        if self.sae_hops < 0 or self.sbr_targets < 0:
            raise ConfigError(
                f"lego sae_hops and sbr_targets must be >= 0, got {self.sae_hops}, {self.sbr_targets}"
            )
        if not 0.0 <= self.ppr_damping < 1.0 or self.ppr_tol <= 0 or self.ppr_coarse_tol < 0:
            raise ConfigError(
                f"lego ppr_damping must be in [0, 1), ppr_tol > 0 and ppr_coarse_tol >= 0, got {self.ppr_damping}, "
                f"{self.ppr_tol}, {self.ppr_coarse_tol}"
            )
        if self.prune_rule not in PRUNE_RULES:
            raise ConfigError(
                f"lego prune_rule must be one of {', '.join(PRUNE_RULES)}, got {self.prune_rule!r}"
            )
        if not 0.0 <= self.prune_percentile <= 100.0:
            raise ConfigError(f"lego prune_percentile must be in [0, 100], got {self.prune_percentile}")
        if self.triple_passages not in ("all", "best"):
            raise ConfigError(f"lego triple_passages must be all or best, got {self.triple_passages!r}")
        if self.fill not in ("subgraph", "dense"):
            raise ConfigError(f"lego fill must be subgraph or dense, got {self.fill!r}")
        if self.statistical < 0:
            raise ConfigError(f"lego statistical must be >= 0, got {self.statistical}")

    @property
    def layers(self) -> EdgeLayers:
        """The graph: ``names = false`` is the statistical graph alone (LEGO before issue 23)."""
        return EdgeLayers(self.statistical > 0 or not self.names, self.use_synonyms, self.names)


def passage_cosines(env: RetrievalEnv, query: Query) -> np.ndarray:
    """cos(query, passage) for every passage (empty for a store without passages), computed once per query: name
    edges are scored by their passage, and the chunk list ranks and fills by it."""
    return np.asarray(dense_scores(env.snapshot, query.vec), dtype=np.float64)


def extract_subgraph(
    env: RetrievalEnv, query: Query, seeds: list[int], params: LegoParams, passage_scores: np.ndarray | None = None
) -> ExtractedSubgraph:
    """Run the configured extraction module."""
    snap = env.snapshot
    if params.extractor == "sbe":
        return sbe_ppr(
            snap,
            seeds,
            params.max_ent,
            params.ppr_damping,
            params.ppr_tol,
            params.ppr_max_iter,
            params.layers,
            params.ppr_coarse_tol,
            passage_scores,
        )
    return sae_eem(snap, query.vec, seeds, params.max_edge, params.sae_hops, params.layers, passage_scores)


def retrieve_paths(
    env: RetrievalEnv,
    query: Query,
    sub: ExtractedSubgraph,
    seeds: list[int],
    params: LegoParams,
    passage_scores: np.ndarray | None = None,
) -> list[PathHit]:
    """Run the configured path-retrieval module on ``sub``; paths best first."""
    snap = env.snapshot
    if params.path_module == "sbr":
        return sbr_paths(snap, sub, seeds, params.sbr_targets, params.top_k_paths)
    # a rerun on the same question (per-note widening) embeds no path text twice
    scorer = PathScorer(snap, env.encode, query.vec, passage_scores,
                        query.memo.setdefault(f"lego_text_scores:{snap.version}", {}))
    if params.path_module == "osar":
        return osar_paths(snap, sub, seeds, scorer, params.max_hop, params.top_k_paths, params.max_candidates)
    prune = PruneRule(params.prune_rule, params.prune_percentile) if params.dynamic_pruning else None
    return isar_paths(
        snap,
        sub,
        seeds,
        scorer,
        params.beam_width,
        params.max_hop,
        params.triple_scoring,
        prune,
        params.max_expansions,
    )


def edge_passages(
    snap: GraphSnapshot,
    code: int,
    rel_chunks: sp.csr_matrix,
    tail_scores: np.ndarray | None = None,
    best_scores: np.ndarray | None = None,
) -> list[int]:
    """The passages behind an edge: a relation's chunks (rows of ``rel_chunks``; given ``best_scores``, the one
    that scores best in them), a name edge's mentioning passage (and, given ``tail_scores``, the named document's
    best passage by them), none for a synonym edge."""
    if is_name(code):
        edges = name_edges(snap)
        out = [int(edges.passage[name_row(code)])]
        tail = None if tail_scores is None else nearest_own_passage(snap, int(edges.dst[name_row(code)]), tail_scores)
        return out + ([tail] if tail is not None and tail not in out else [])
    if code == SYNONYM:
        return []
    chunks = [int(p) for p in rel_chunks.indices[rel_chunks.indptr[code] : rel_chunks.indptr[code + 1]]]
    if best_scores is not None and len(chunks) > 1:
        return [best_passage(chunks, best_scores)]
    return chunks


def path_chunks(
    env: RetrievalEnv,
    query: Query,
    paths: list[PathHit],
    top_k: int,
    tail_passages: bool = False,
    triple_passages: str = "all",
    fill: Sequence[tuple[int, float]] = (),
    dense: np.ndarray | None = None,
) -> list[ChunkHit]:
    """Passages supporting the path triples (``edge_passages``; ``tail_passages``: a name edge's named document
    too; ``triple_passages`` "best": a relation's chunk nearest the query alone), ranked by their best path's score (ties: cos(query, passage), as pathrag's ``rank_chunks``), then dense
    chunks fill the remaining slots up to ``top_k`` (scored by their cosine; ``dense``: ``passage_cosines``, computed
    when not given). Sets ``PathHit.passages``."""
    snap = env.snapshot
    rel_chunks = snap.rel_chunks.tocsr()
    dense = passage_cosines(env, query) if dense is None else dense
    best: dict[int, float] = {}
    for hit in paths:
        passages: list[int] = []
        for r in hit.relations:
            passages += edge_passages(snap, r, rel_chunks, dense if tail_passages else None,
                                      dense if triple_passages == "best" else None)
        hit.passages = sorted(set(passages))
        for p in hit.passages:
            best[p] = max(best.get(p, -np.inf), hit.reliability)
    ranked = sorted(best.items(), key=lambda item: (-item[1], -float(dense[item[0]]), item[0]))[:top_k]
    hits = [ChunkHit(p, s) for p, s in ranked]
    # the extracted subgraph's other edges, best first, before any dense back-fill; no tail passage: no path
    # walked these edges to the named document
    for code, score in fill:
        if len(hits) >= top_k:
            break
        for p in edge_passages(snap, code, rel_chunks, None, dense if triple_passages == "best" else None):
            if p not in best and len(hits) < top_k:
                best[p] = score
                hits.append(ChunkHit(p, score))
    if len(hits) < top_k and snap.n_passages:
        taken = {h.passage for h in hits}
        for p in top_indices(dense, top_k + len(taken)).tolist():
            if len(hits) >= top_k:
                break
            if p not in taken:
                hits.append(ChunkHit(int(p), float(dense[p]), backfill=True))
    return hits


def edge_scores(env: RetrievalEnv, query: Query, codes: Sequence[int], dense: np.ndarray) -> np.ndarray:
    """cos(query, triple) per edge code: a relation by its stored vector, a name edge by its passage's ``dense``
    score (``passage_cosines``); -inf for a synonym edge, and for relations when the snapshot has no relation
    vectors."""
    snap = env.snapshot
    arr = np.array(codes, dtype=np.int64)
    cos = np.full(arr.size, -np.inf)
    rv = snap.rel_vecs
    stat = arr >= 0
    if stat.any() and rv.ndim == 2 and rv.shape == (snap.n_relations, query.vec.shape[0]):
        cos[stat] = rv[arr[stat]] @ query.vec
    named = arr <= -2
    if named.any():
        cos[named] = dense[name_edges(snap).passage[-2 - arr[named]]]
    return cos


def subgraph_fill(
    env: RetrievalEnv, query: Query, sub: ExtractedSubgraph, paths: list[PathHit], dense: np.ndarray
) -> list[tuple[int, float]]:
    """The subgraph's edges on no path (synonym edges left out), best ``edge_scores`` first, with their scores."""
    on_paths = {r for hit in paths for r in hit.relations}
    codes = list(dict.fromkeys(r for _, _, r in sub.edges if r != SYNONYM and r not in on_paths))
    if not codes:
        return []
    cos = edge_scores(env, query, codes, dense)
    order = np.lexsort((np.arange(len(codes)), -cos))
    return [(codes[i], float(cos[i])) for i in order if np.isfinite(cos[i])]


def served_edges(
    env: RetrievalEnv, query: Query, sub: ExtractedSubgraph, paths: list[PathHit], limit: int, dense: np.ndarray
) -> list[tuple[int, int, int]]:
    """At most ``limit`` subgraph edges to serve: those on the retrieved paths (in path order), then the rest by
    ``edge_scores``, synonym edges last."""
    snap = env.snapshot
    path_rels = dict.fromkeys(r for hit in paths for r in hit.relations if r != SYNONYM)
    first = [(*edge_ends(snap, r), r) for r in path_rels]
    rest = [e for e in sub.edges if e[2] not in path_rels]
    if rest:
        cos = edge_scores(env, query, [r for _, _, r in rest], dense)
        rest = [rest[i] for i in np.lexsort((np.arange(len(rest)), -cos))]
    return (first + rest)[:limit]


def shape_subgraph(
    env: RetrievalEnv, query: Query, sub: ExtractedSubgraph, paths: list[PathHit], params: LegoParams,
    dense: np.ndarray,
) -> Subgraph:
    """The extracted subgraph as named nodes, unit-cost edges (one per hop) and one text line per edge, cut to
    ``params.subgraph_max_edges`` served edges (``stats`` keeps the full sizes)."""
    snap = env.snapshot
    names = snap.entity_names
    edges = served_edges(env, query, sub, paths, params.subgraph_max_edges, dense)
    nodes = list(
        dict.fromkeys([n for hit in paths for n in hit.nodes] + [x for u, v, _ in edges for x in (u, v)])
    )
    stats = {
        "extractor": params.extractor,
        "path_module": params.path_module,
        "subgraph_entities": len(sub.entities),
        "subgraph_edges": len(sub.edges),
        "served_edges": len(edges),
    }
    return Subgraph(
        [names[e] for e in nodes],
        [(names[u], names[v], 1.0) for u, v, _ in edges],
        "\n".join(path_text(snap, [u, v], [r]) for u, v, r in edges),
        stats,
        {names[e]: sub.scores.get(e, 0.0) for e in nodes},
    )


def lego_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: LegoParams) -> RetrievalResult:
    """Seeds -> extraction module -> path module on the subgraph -> paths, triples, supporting chunks."""
    params.validate()
    snap = env.snapshot
    seeds = query_seeds(snap, query, params.seed_entities, query_names(env, query.text)) if snap.n_entities else []
    if params.extractor == "sbe":  # SBE's walk starts from the seeds alone; SAE's core is the query's top triples
        seeds = graph_seeds(snap, query.vec, seeds, params.seed_entities, params.layers)
    dense = passage_cosines(env, query)
    # name edges are scored by their passage; without them the modules take no passage scores
    passage_scores = dense if params.names and dense.size and name_edges(snap).size else None
    sub = extract_subgraph(env, query, seeds, params, passage_scores)
    paths = retrieve_paths(env, query, sub, seeds, params, passage_scores) if sub.entities else []
    fill = subgraph_fill(env, query, sub, paths, dense) if params.fill == "subgraph" else []
    chunks = path_chunks(env, query, paths, top_k, params.tail_passages, params.triple_passages, fill, dense)
    triples = list(dict.fromkeys(r for hit in paths for r in hit.relations if r >= 0))
    subgraph = shape_subgraph(env, query, sub, paths, params, dense)
    info = {
        "seeds": [snap.entity_names[s] for s in seeds],
        "paths": len(paths),
        "name_edges": sum(1 for _, _, r in sub.edges if is_name(r)),
    }
    for hit in paths:  # the served relations: a name edge has no relation index of its own
        hit.relations = [NAME_EDGE if is_name(r) else r for r in hit.relations]
    return RetrievalResult(
        f"lego:{params.extractor}+{params.path_module}",
        chunks,
        paths,
        subgraph,
        triples,
        info=info,
    )
