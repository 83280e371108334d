"""Path Pooling (Wang et al. 2025, §3.3-3.4, §4.3): smooth triple scores along path kernels, then rerank/reselect.

- Triple scores come from a base retriever (``base``), as the paper pools SubgraphRAG's structure-aware scores
  (Implementation Details: "We enhance ... SubgraphRAG"): by default ppr's PPR score of the triple's best passage, over the query's best
  (``"cos"``: the "naive triple-based scorer" cos(query, triple), §3.2/§3.4), over the coarse top triples.
  Over the name layer (issue 23, ``statistical``, ``name_triples``) the coarse set also holds name triples
  (a, mentions, b), one per passage of a's document naming b, scored by that passage (its base score); the triples
  touching a name the question mentions join it, and those names seed the kernels first; so do the statistical
  triples of each named document's best passage (``named_passages``), which the naive top M can miss entirely.
- Path kernels (§3.3): paths from the query entities over the graph made of the retrieved triples (undirected),
  by Dijkstra (one shortest path per reached entity, edge length 1 − score: our choice, the paper does not say)
  or BFS (every simple path of up to ``max_path_len`` = 4 triples, §4.3.1). Triples on no kernel path, including
  those unreachable from the query entities, are single-hop paths.
- Smoothing (§3.3): each triple of a path gets the path's mean score (``pooling="max"``: its max, §4.3.2) plus a
  positional score: with m the path's minimum triple score, the i-th triple from the query entity adds
  m / a^i (a = ``position_a``; our reading of the formula, which is lost in our copy of the text). A triple's
  pooled score is the max over all paths containing it.
- ``mode="rerank"`` (§3.4 position reranking): the top ``top_triples`` triples, reordered by pooled score in
  ascending order so the best sits nearest the question (recency bias). ``mode="reselect"`` (§3.4 triple
  reselection): the coarse top ``coarse_m``, pooled, then the pooled top ``top_triples``, in the same order.
- Passages (ours; the paper serves triples): each pooled triple stands for one evidence passage (a relation the
  passage that gave it its score, a name triple its mentioning passage and the named document's best passage by
  the base); a passage scores base(p)^w · pooled(p)^(1 − w) (w = ``base_weight``, pooled(p) its best triple's
  pooled score): pooling refines the base's passage scores rather than replacing them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pathweaver.config import ConfigError
from pathweaver.retrieval.graphs import passage_relations, relation_passages
from pathweaver.retrieval.keywords import NAME_PARTS, matched_entities, query_names
from pathweaver.retrieval.linked import NoteSteps, check_linked_notes
from pathweaver.retrieval.namegraph import (
    best_passage,
    name_edges,
    nearest_own_passage,
    passages_of,
)
from pathweaver.retrieval.pooling_kernels import (
    POOLINGS,
    Kernel,
    bfs_kernels,
    dijkstra_kernels,
    pool_scores,
    recency_order,
)
from pathweaver.retrieval.ppr import PPRParams, ppr_scores
from pathweaver.retrieval.seeds import dense_scores, top_indices, top_triples
from pathweaver.retrieval.types import NAME_EDGE, ChunkHit, PathHit, Query, RetrievalEnv, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot

MODES = ("rerank", "reselect")
KERNELS = ("dijkstra", "bfs")


@dataclass
class PoolingParams(NoteSteps):
    """pathweaver's default Path Pooling (over a ppr base); ``preset = "paper"`` pools the naive cosine scorer's 500
    coarse triples into 25 (§4.2) on the paper's triples alone (``presets.py``)."""

    mode: str = "reselect"  # §3.4: "rerank" (position reranking) | "reselect" (triple reselection)
    coarse_m: int = 100  # M: coarse top-M triples before reselection (§3.4; 100 = SubgraphRAG's default)
    top_triples: int = 25  # K: triples served (§4.2: gains from 25 triples on)
    position_a: float = 10.0  # a: positional score constant (§3.3; its value is not in our copy of the paper)
    # §4.3.2: "mean" (the paper's recommendation, default) | "max". Max was the default while a triple stood for
    # all its passages; with one passage each the two tie on musique dev and mean gains
    # more on 2wiki than it loses on hotpotqa (docs/benchmarks.md, "Why the defaults")
    pooling: str = "mean"
    kernel: str = "dijkstra"  # §3.3 / §4.3.1: "dijkstra" (recommended) | "bfs"
    max_path_len: int = 4  # §4.3.1: maximum BFS path length
    max_bfs_paths: int = 20000  # ours: BFS path budget (BFS paths grow fast, §4.3.1 Table 2)
    query_entities: int = 3  # ours: entities of the retrieved triples nearest the query seed the kernels
    max_paths: int = 20  # ours: kernel paths returned as PathHit, best first
    # ours (issue 23), the name layer: name triples (a, mentions, b), one per passage of a's document that names
    # b, scored by cos(query, that passage) (the naive scorer with the passage standing in for the triple text).
    # ``statistical`` = 0: the name triples alone (when the store has any); > 0: with the statistical triples
    statistical: float = 1.0
    # the triples touching the names the question mentions join the coarse set, so the kernels start from them
    name_triples: int = 50
    name_parts: int = NAME_PARTS  # names the question calls by their last word, as ppr's (0 = off; ours)
    tail_passages: bool = True  # a name triple also brings the passages of the document it names
    # the name triples join the coarse set (ours; false, the paper's statistical triples alone, only through the
    # paper preset)
    names: bool = True
    # §3.4 / Implementation Details: path pooling refines a base retriever's triple scores, and the paper's base
    # is SubgraphRAG's, which scores a triple from its text and its structural distance to the question's topic
    # entities. "ppr" (default): our structure-aware retriever (HippoRAG 2 seeded by the question's names)
    # scores a triple by its best passage's PPR score over the query's best; "cos": the naive scorer
    # cos(query, triple text), cos(query, passage) for a name triple
    base: str = "ppr"
    # ours: a served triple stands for one passage of evidence: a relation the one passage that gave it its score,
    # a name triple its mentioning passage and (tail_passages) the named document's best passage by the base
    # (every passage of them took the pooled score of one triple, crowded the top 5 and lost on dev)
    # ours: when the served triples stand for fewer than top_k passages, "coarse" (default) goes on down the pooled
    # ranking of the coarse triples before any dense back-fill; "served" back-fills at once (the served triples'
    # passages alone, as the paper: only through the paper preset, which then drops the back-fill)
    fill: str = "coarse"
    # ours: the statistical triples of each named entity's document (its best passage by the ppr base) join the
    # coarse set (docs/benchmarks.md, "Why the defaults"); off for base "cos", whose triple scores
    # are cos(query, triple text)
    named_passages: bool = True
    # ours: a passage's score is base(p)^w · pooled(p)^(1 - w), w = base_weight, pooled(p) its best triple's pooled
    # score: pooling refines the base's passage score (§3.4, Implementation Details) instead of replacing it, so a
    # hub that smoothing lifts from near 0 next to the top triple (§3.3's mean) no longer outranks the base's own
    # evidence. 0 = the pooled score alone, the paper's ranking: only through the paper preset (it lost on dev)
    base_weight: float = 0.5
    # ours: whose passages are ranked: "coarse" (default) those of every pooled coarse triple, the smoothed
    # sequence §3.4 reselects from; "served" those of the reselected top_triples first, then (fill) the rest: the
    # triples the paper serves, only through the paper preset (it lost on dev)
    passages_from: str = "coarse"

    def validate(self) -> None:
        check_linked_notes("pooling", self.linked_notes)
        if self.mode not in MODES:
            raise ConfigError(f"pooling mode must be one of {MODES}, got {self.mode!r}")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.kernel not in KERNELS:
            raise ConfigError(f"pooling kernel must be one of {KERNELS}, got {self.kernel!r}")
        if self.position_a == 0:
            raise ConfigError("pooling position_a must be non-zero (§3.3)")
        if min(self.coarse_m, self.top_triples, self.max_path_len, self.max_bfs_paths) < 1:
            raise ConfigError("pooling coarse_m, top_triples, max_path_len and max_bfs_paths must be >= 1")
        if self.base not in ("ppr", "cos"):
            raise ConfigError(f"pooling base must be ppr or cos, got {self.base!r}")
        if min(self.statistical, self.name_triples, self.name_parts) < 0:
            raise ConfigError("pooling statistical, name_triples and name_parts must be >= 0")
        if self.fill not in ("served", "coarse"):
            raise ConfigError(f"pooling fill must be served or coarse, got {self.fill!r}")
        if not 0.0 <= self.base_weight <= 1.0:
            raise ConfigError(f"pooling base_weight must be in [0, 1], got {self.base_weight!r}")
        if not isinstance(self.named_passages, bool):
            raise ConfigError(f"pooling named_passages must be true or false, got {self.named_passages!r}")
        if self.passages_from not in ("coarse", "served"):
            raise ConfigError(f"pooling passages_from must be coarse or served, got {self.passages_from!r}")
        if self.query_entities < 0 or self.max_paths < 0:
            raise ConfigError("pooling query_entities and max_paths must be >= 0")


def query_entity_seeds(snapshot: GraphSnapshot, query: Query, candidates: Sequence[int], n: int) -> list[int]:
    """The query entities among ``candidates`` (entities of the retrieved triples): keyword and query n-gram
    matches first, then the candidates nearest the query vector, ``n`` in all (at least the matches)."""
    cand = set(candidates)
    named = [snapshot.entity_index.get(k.strip().lower(), -1) for k in query.keywords]
    named += matched_entities(snapshot, query.text)
    seeds = [e for e in dict.fromkeys(named) if e in cand]
    vecs = snapshot.entity_vecs
    if len(seeds) < n and candidates and vecs.shape[0] == snapshot.n_entities and vecs.size:
        ids = np.array(sorted(cand), dtype=np.int64)
        cos = vecs[ids] @ query.vec.astype(vecs.dtype, copy=False)
        for i in top_indices(cos, n + len(seeds)).tolist():
            if len(seeds) >= n:
                break
            if int(ids[i]) not in seeds:
                seeds.append(int(ids[i]))
    return seeds


@dataclass(frozen=True)
class Triples:
    """The coarse triples of one query: ``items[i]`` >= 0 is a relation index, -1 - m the name edge m
    (``namegraph.NameEdges`` row); ``ends[i]`` its (head, tail) entities, ``scores[i]`` its cosine."""

    items: list[int]
    ends: list[tuple[int, int]]
    scores: list[float]


def coarse_triples(env: RetrievalEnv, query: Query, params: PoolingParams, first: int, named: list[int],
                   passage_scores: np.ndarray) -> Triples:
    """The coarse top ``first`` triples (statistical, name triples or both, ``params.statistical``), plus the
    best ``name_triples`` name triples touching a name the question mentions and (``named_passages``) the
    statistical triples of each named document's best passage; ``passage_scores`` are the base's
    (``base_passage_scores``)."""
    snap = env.snapshot
    edges = name_edges(snap)
    use_names = edges.size > 0 and params.names
    cands: list[tuple[float, int]] = []
    if params.statistical > 0 or not use_names:
        stat = top_triples(snap, query.vec, first)
        if params.base == "ppr":  # the base retriever scores the triple by the passages it comes from
            rp = relation_passages(snap)
            stat = [(r, float(passage_scores[rp[r].indices].max()) if rp[r].nnz else 0.0) for r, _ in stat]
        cands += [(s, r) for r, s in stat]
    if use_names:
        cos = passage_scores[edges.passage]
        top = top_indices(cos, first).tolist()
        cands += [(float(cos[m]), -1 - m) for m in top]
        if named and params.name_triples:
            touch = np.flatnonzero(np.isin(edges.src, named) | np.isin(edges.dst, named))
            order = touch[np.argsort(-cos[touch], kind="stable")][: params.name_triples]
            cands += [(float(cos[m]), -1 - int(m)) for m in order]
    best: dict[int, float] = {}
    for sc, item in cands:
        best[item] = max(best.get(item, -np.inf), sc)
    ranked = sorted(best.items(), key=lambda it: (-it[1], it[0]))
    if not named or not params.name_triples:
        ranked = ranked[:first]
    if params.named_passages and params.base == "ppr" and named and snap.n_relations:
        # the kernels start from the named entities (§3.3), so the triples of their own documents join the coarse
        # set beside the naive scorer's top M (which can miss them all), scored by the base as the others
        have = {i for i, _ in ranked}
        rp, pr = relation_passages(snap), passage_relations(snap)
        for e in named:
            p = nearest_own_passage(snap, e, passage_scores)  # the document's best passage by the base
            if p is None:
                continue
            for r in pr[p].indices.tolist():
                if r not in have:
                    have.add(r)
                    ranked.append((r, float(passage_scores[rp[r].indices].max())))
        ranked.sort(key=lambda it: (-it[1], it[0]))
    items = [i for i, _ in ranked]

    def ends(i: int) -> tuple[int, int]:
        if i >= 0:
            return int(snap.rel_src[i]), int(snap.rel_dst[i])
        return int(edges.src[-1 - i]), int(edges.dst[-1 - i])

    return Triples(items, [ends(i) for i in items], [s for _, s in ranked])


def base_passage_scores(env: RetrievalEnv, query: Query, params: PoolingParams) -> np.ndarray:
    """Passage scores of the base retriever (``params.base``): ppr's (HippoRAG 2) passage PPR over its best, or
    cos(query, passage)."""
    if params.base != "ppr":
        return dense_scores(env.snapshot, query.vec).astype(np.float64)
    # the base walk leaves out ppr's proper-name phrase nodes: they flatten the passage scores pooling reads per
    # triple, and with them the pooled ranking lost on dev (docs/design-notes.md, "`pooling`")
    scores, _ = ppr_scores(env, query, PPRParams(proper_names=0.0))
    out = scores[env.snapshot.n_entities :].astype(np.float64)
    top = float(out.max()) if out.size else 0.0
    return out / top if top > 0 else out


def item_passages(snap: GraphSnapshot, item: int, tail_passages: bool) -> list[int]:
    """The passages behind a coarse triple: a relation's chunks, or a name triple's passage (and, with
    ``tail_passages``, the passages of the document it names)."""
    if item >= 0:
        rp = relation_passages(snap)
        return [int(p) for p in rp[item].indices.tolist()]
    edges = name_edges(snap)
    out = [int(edges.passage[-1 - item])]
    if tail_passages:
        out += [p for p in passages_of(snap, int(edges.dst[-1 - item])) if p not in out]
    return out


def _label(snap: GraphSnapshot, item: int) -> str:
    return snap.rel_labels[item] if item >= 0 else "mentions"


def _path_hit(snapshot: GraphSnapshot, k: Kernel, tr: Triples, base: float, tail_passages: bool) -> PathHit:
    items = [tr.items[t] for t in k.triples]
    parts = [snapshot.entity_names[k.nodes[0]]]
    for node, t in zip(k.nodes[1:], k.triples, strict=True):
        forward = tr.ends[t][1] == node
        label = _label(snapshot, tr.items[t])
        parts.append(f"-{label}->" if forward else f"<-{label}-")
        parts.append(snapshot.entity_names[node])
    passages: list[int] = []
    for item in items:
        passages.extend(p for p in item_passages(snapshot, item, tail_passages) if p not in passages)
    return PathHit(list(k.nodes), [i if i >= 0 else NAME_EDGE for i in items], base, " ".join(parts), passages)


def _stands_for(snap: GraphSnapshot, item: int, params: PoolingParams, passage_scores: np.ndarray) -> list[int]:
    """The passages a coarse triple stands for: the one that scored it (and a name triple's tail passage)."""
    ps = item_passages(snap, item, params.tail_passages)
    if len(ps) < 2:
        return ps
    first, rest = ([], ps) if item >= 0 else (ps[:1], ps[1:])
    top = best_passage(rest, passage_scores)
    return first + ([top] if top not in first else [])


def _chunks(
    env: RetrievalEnv, query: Query, items: list[int], pooled: dict[int, float], top_k: int, params: PoolingParams,
    passage_scores: np.ndarray, rest: Sequence[int] = (),
) -> list[ChunkHit]:
    """Passages the triples ``items`` stand for, by base(p)^w · pooled(p)^(1 - w) (w = ``params.base_weight``,
    pooled(p) the best pooled score of a triple standing for p), then those of ``rest`` (the other coarse triples,
    best pooled first); dense chunks fill up to top_k."""
    best: dict[int, float] = {}
    for item in items:
        for p in _stands_for(env.snapshot, item, params, passage_scores):
            best[p] = max(best.get(p, -np.inf), pooled[item])
    w = params.base_weight

    def score(p: int) -> float:
        if w == 0:
            return best[p]
        return float(max(passage_scores[p], 0.0) ** w * max(best[p], 0.0) ** (1.0 - w))

    scored = {p: score(p) for p in best}
    order = sorted(best, key=lambda p: (-scored[p], -best[p], p))
    hits = [ChunkHit(p, scored[p]) for p in order[:top_k]]
    for item in rest:  # the pooled ranking past the served triples, before dense back-fill
        if len(hits) >= top_k:
            break
        for p in _stands_for(env.snapshot, item, params, passage_scores):
            if p not in best and len(hits) < top_k:
                best[p] = pooled[item]
                hits.append(ChunkHit(p, float(pooled[item])))
    if len(hits) < top_k and env.snapshot.n_passages:
        dense = dense_scores(env.snapshot, query.vec)
        for p in top_indices(dense, top_k + len(hits)).tolist():
            if len(hits) >= top_k:
                break
            if p not in best:
                hits.append(ChunkHit(int(p), float(dense[p]), backfill=True))
    return hits


def pooling_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: PoolingParams) -> RetrievalResult:
    """Path Pooling over the query's top triples; ``triples`` in prompt order (best last), ``paths`` = kernels.
    ``triples`` and ``triple_scores`` list relation indices only (name triples have none)."""
    snap = env.snapshot
    first = params.coarse_m if params.mode == "reselect" else params.top_triples
    named = query_names(env, query.text, params.name_parts)  # the question's topic entities (§3.3 sources)
    passage_scores = base_passage_scores(env, query, params)
    tr = coarse_triples(env, query, params, first, named, passage_scores)
    entities = sorted({e for pair in tr.ends for e in pair})
    sources = [e for e in named if e in set(entities)]
    sources += [e for e in query_entity_seeds(snap, query, entities, params.query_entities) if e not in sources]
    if params.kernel == "dijkstra":
        kernels = dijkstra_kernels(tr.ends, tr.scores, sources)
    else:
        kernels = bfs_kernels(tr.ends, sources, params.max_path_len, params.max_bfs_paths)
    pooled, bases = pool_scores(kernels, tr.scores, params.position_a, params.pooling)
    chosen = list(range(len(tr.items)))
    if params.mode == "reselect":
        chosen = sorted(chosen, key=lambda i: (-pooled[i], i))[: params.top_triples]
    order = recency_order(pooled, chosen)
    served = [tr.items[i] for i in order]
    pooled_by_item = {tr.items[i]: float(pooled[i]) for i in range(len(tr.items))}
    keep = set(chosen)
    ranked = sorted(
        (i for i, k in enumerate(kernels) if keep.intersection(k.triples)), key=lambda i: (-bases[i], i)
    )
    paths = [_path_hit(snap, kernels[i], tr, bases[i], params.tail_passages) for i in ranked[: params.max_paths]]
    relations = [r for r in served if r >= 0]
    by_pooled = [tr.items[i] for i in sorted(range(len(tr.items)), key=lambda i: (-pooled[i], i))]
    if params.passages_from == "coarse":
        ranked_items, rest = by_pooled, []
    else:
        ranked_items = served
        served_set = set(served)
        rest = [] if params.fill == "served" else [it for it in by_pooled if it not in served_set]
    return RetrievalResult(
        "pooling",
        _chunks(env, query, ranked_items, pooled_by_item, top_k, params, passage_scores, rest),
        paths=paths,
        triples=relations,
        triple_scores={r: pooled_by_item[r] for r in relations},
        info={
            "query_entities": [snap.entity_names[e] for e in sources],
            "kernels": len(kernels),
            "coarse": len(tr.items),
            "name_triples": sum(1 for i in served if i < 0),
            "pooled": {int(r): round(pooled_by_item[r], 6) for r in relations},
        },
    )
