"""Personalized PageRank over the entity+passage node space (AGRAG §III-C Eq. 10-13, HippoRAG 2).

Convention (AGRAG Eq. 10): PPR^i = (1-d)·p + d·P·PPR^{i-1}, so the damping d multiplies the *walk* term and
(1-d) is the restart probability; d = 0.5 as in HippoRAG 2 (igraph's ``damping``, same meaning). AGRAG Eq. 12
also gives non-edges a 1/|V| transition; we follow HippoRAG 2's code instead (plain weighted edges), and send the
mass of dangling nodes back to the personalisation vector.

Personalisation (HippoRAG 2 style, generalising AGRAG Eq. 11): the query is mapped to its top ``top_triples``
(k_a) triples by cos(query, triple); each triple's subject and object entity gets weight += that cosine; every
entity the query names (HippoRAG 1's query-entity linking) gets += ``name_seeds``; each weight is divided by the
number of passages mentioning the entity (HippoRAG 2's specificity). Passage nodes get their min-max
normalised dense similarity × ``passage_weight``: HippoRAG 2 and AGRAG use 0.05 over every passage (the paper
preset, ``presets.py``); pathweaver's default gives the dense top ``dense_pool`` = 5 full weight (1.0), and the
hybrid top ``hybrid_pool`` = 5 as well when the question names no document, beside the name layer (the named
documents' passages, passage name links). Chunks are ranked by their passage node's PPR
score, then (pathweaver's default) a top-k set selection (``selection.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np

from pathweaver.config import ConfigError
from pathweaver.retrieval.graphs import entity_passage_counts, has_names, node_space_graph, transition_rows
from pathweaver.retrieval.keywords import NAME_PARTS, matched_entities, query_names
from pathweaver.retrieval.linked import NoteSteps, check_linked_notes
from pathweaver.retrieval.namegraph import passages_of
from pathweaver.retrieval.pagerank import COARSE_TOL, RankingSettled, Settled, personalized_pagerank
from pathweaver.retrieval.seeds import (
    HybridParams,
    dense_view,
    hybrid_chunk_scores,
    minmax,
    top_entities,
    top_hits,
    top_indices,
    top_triples,
)
from pathweaver.retrieval.selection import document_keys, passage_links, select_passages
from pathweaver.retrieval.types import ChunkHit, Query, RetrievalEnv, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot


@dataclass
class PPRParams(NoteSteps):
    """pathweaver's default ppr: HippoRAG 2 / AGRAG §III-C over the name layer too; ``preset = "paper"`` sets the
    papers' values (``presets.py``)."""

    damping: float = 0.5  # d, AGRAG §III-C after Eq. 10 ("to align with HippoRAG 2")
    # passage-node balance factor: 1.0 over the dense top ``dense_pool`` (ours, best on dev with the name layer);
    # AGRAG §III-C after Eq. 12 and HippoRAG 2 use 0.05 over every passage (the paper preset)
    passage_weight: float = 1.0
    # k_a: query-mapped triples seeding the walk. HippoRAG 2 uses 5 (linking_top_k) after an LLM filters them; our
    # statistical triples are unfiltered, and 1 with name seeds was best on all three dev splits (design-notes.md)
    top_triples: int = 1
    tol: float = 1e-7  # AGRAG §III-C: converge when the change is below 1e-7
    max_iter: int = 100
    coarse_tol: float = COARSE_TOL  # float32 steps down to this change first (0 = float64 only; ours)
    specificity: bool = True  # HippoRAG 2: divide a seed entity's weight by its passage count
    seed_entities: int = 0  # extra seeds: the n entities nearest the query (ours; for graphs without triples)
    # extra seeds: entities the query names (its n-grams that are entity names, as HippoRAG 1 links query NER), each
    # with this weight before the specificity division (ours; 0 = off; 2-5 form a plateau on dev, design-notes.md)
    name_seeds: float = 3.0
    # personalise only the top-n passages by dense score (0 = all passages, HippoRAG 2); with the name layer the
    # top 5 at full weight (passage_weight 1) were best on dev (issue 23)
    dense_pool: int = 5
    # a question that names no document also seeds the hybrid top ``hybrid_pool`` passages (AGRAG Eq. 21's dense
    # + BM25 score, each passage keeping the larger of its two seeds; 0 = dense alone): a question about one's
    # notes seldom writes a note's title, and its own words find the note then (ours, issue 37; 10 lost 2 more
    # points on musique dev, docs/design-notes.md)
    hybrid_pool: int = 5
    relation_weight: Literal["count", "one"] = "count"  # relation edge weight (graphs.node_space_graph)
    # passage↔entity weight: HippoRAG 2 uses 1; the mention count was better on 2wiki dev, so it is our default
    contains_weight: Literal["one", "count"] = "count"
    # the name layer (issue 23, ours; tuned on the three dev splits, docs/design-notes.md "Names people wrote"):
    # passage↔passage edges where one passage mentions a name tied to the other's document, with this weight
    # (0 = off); a reset weight for the passages tied to each name the query mentions (the automaton of
    # extract/names.py; split over that name's passages); and the weight of the statistical layer (n-gram
    # entities, relations, synonyms) against the name layer, 0 = the name layer alone. A store without any name
    # mention (no titles occur in its text) walks the statistical layer whatever this says.
    name_links: float = 3.0
    name_passages: float = 2.0
    # a named document's reset weight is split over the passages its name ties to by their min-max normalised
    # similarity to the query (one title often names several passages, e.g. MuSiQue's six "Dell" paragraphs; an
    # even split lost on dev)
    statistical: float = 0.0
    # Contains edges from each passage to the n-gram entities it writes as proper names, with this weight: HippoRAG
    # 2's phrase nodes for names no document is titled by ("Jane Siberry" in two passages about others), which the
    # name layer cannot reach (0 = off; ours, issue 23; retrieval/propernames.py); only beside the name layer
    # (a named store, statistical < 1)
    proper_names: float = 0.2
    # a question that names no document in full seeds the names of two or three words ending in a capitalised
    # word it writes alone ("Scrooge" -> "Ebenezer Scrooge"), when at most this many names end so (0 = off; ours;
    # keywords.question_names)
    name_parts: int = NAME_PARTS
    # top-k set selection (ours, issue 23; retrieval/selection.py), among the ``select_pool`` best passages: each
    # further passage of a document already chosen counts its score times ``document_decay``, and a passage that no
    # chosen passage links to (a name link, or a proper name both write) times ``unlinked``; 1 and 1 = the plain
    # ranking by PPR score (a pank plan asks for that: registry.plain_ranking). Chosen on the dev splits
    # (docs/design-notes.md, "Top-k set selection")
    document_decay: float = 0.25
    unlinked: float = 0.5
    select_pool: int = 20

    def validate(self) -> None:
        check_linked_notes("ppr", self.linked_notes)
        if not 0.0 <= self.damping < 1.0:
            raise ConfigError(f"ppr damping must be in [0, 1), got {self.damping}")
        if min(self.passage_weight, self.top_triples, self.seed_entities, self.dense_pool, self.name_seeds,
               self.hybrid_pool) < 0:
            raise ConfigError("ppr passage_weight, top_triples, seed_entities, dense_pool, hybrid_pool and name_seeds "
                              "must be >= 0")
        if self.tol <= 0 or self.max_iter < 1 or self.coarse_tol < 0:
            raise ConfigError(f"ppr tol must be > 0, coarse_tol >= 0 and max_iter >= 1, got {self.tol}, "
                              f"{self.coarse_tol}, {self.max_iter}")
        if min(self.name_links, self.name_passages, self.name_parts, self.proper_names) < 0 \
                or not 0.0 <= self.statistical <= 1.0:
            raise ConfigError("ppr name_links, name_passages, name_parts and proper_names must be >= 0, statistical in "
                              "[0, 1]")
        if not (0.0 <= self.document_decay <= 1.0 and 0.0 <= self.unlinked <= 1.0) or self.select_pool < 0:
            raise ConfigError(f"ppr document_decay and unlinked must be in [0, 1] and select_pool >= 0, got "
                              f"{self.document_decay}, {self.unlinked}, {self.select_pool}")
        if self.relation_weight not in ("count", "one") or self.contains_weight not in ("one", "count"):
            raise ConfigError("ppr relation_weight must be count|one and contains_weight one|count")


@dataclass
class SeedInfo:
    """How the walk was personalised: the triples (relation index, cos) and the entity seeds."""

    triples: list[tuple[int, float]] = field(default_factory=list)
    entity_weights: dict[int, float] = field(default_factory=dict)
    named: list[int] = field(default_factory=list)  # entities of the document names the query mentions


def personalization(env: RetrievalEnv, query: Query, params: PPRParams) -> tuple[np.ndarray, SeedInfo]:
    """The reset vector over the node space (entities, then passages) and the seeds it came from."""
    snap = env.snapshot
    n_e, n_p = snap.n_entities, snap.n_passages
    reset = np.zeros(n_e + n_p, dtype=np.float64)
    info = SeedInfo(triples=top_triples(snap, query.vec, params.top_triples))
    weights: dict[int, float] = {}
    for r, cos in info.triples:
        for ent in {int(snap.rel_src[r]), int(snap.rel_dst[r])}:
            weights[ent] = weights.get(ent, 0.0) + max(cos, 0.0)
    for ent, cos in top_entities(snap, query.vec, params.seed_entities):
        weights[ent] = weights.get(ent, 0.0) + max(cos, 0.0)
    named = query_names(env, query.text, params.name_parts)
    if params.name_seeds > 0 and query.text:
        # the query's n-gram entities belong to the statistical layer: seeds only where the walk has that layer
        # (a proper name the query writes is found through the passages the question names or resembles)
        grams = matched_entities(snap, query.text) if _walk_layers(snap, params).statistical > 0 else []
        for ent in dict.fromkeys(named + grams):
            weights[ent] = weights.get(ent, 0.0) + params.name_seeds
    if params.specificity and weights:
        counts = entity_passage_counts(snap)
        weights = {
            e: w / max(float(counts[e]) if e < counts.shape[0] else 1.0, 1.0) for e, w in weights.items()
        }
    info.entity_weights = weights
    for ent, w in weights.items():
        reset[ent] = w
    dense = dense_view(env, query)
    if n_p and params.passage_weight > 0:
        idx, cos = dense.top(params.dense_pool) if params.dense_pool else (np.arange(n_p), dense.full())
        reset[n_e + idx] = minmax(cos) * params.passage_weight
    if n_p and params.passage_weight > 0 and params.hybrid_pool and not named:
        best = top_hits(hybrid_chunk_scores(env, query, HybridParams().pool(params.hybrid_pool)), params.hybrid_pool)
        idx = np.array([h.passage for h in best], dtype=np.int64)
        seeds = minmax(np.array([h.score for h in best], dtype=np.float64)) * params.passage_weight
        reset[n_e + idx] = np.maximum(reset[n_e + idx], seeds)
    if params.name_passages > 0:
        for ent in named:
            own = np.asarray(passages_of(snap, ent), dtype=np.int64)
            if own.size:
                reset[n_e + own] += params.name_passages * _split(dense.at(own))
    info.named = named
    if reset.sum() <= 0:  # nothing matched: fall back to a uniform walk start over passages, or all nodes
        if n_p:
            reset[n_e:] = 1.0
        else:
            reset[:] = 1.0
    return reset, info


class _WalkLayers(NamedTuple):
    """The layers of the node-space graph a walk runs on (``graphs.node_space_graph``'s arguments, in order)."""

    relation_weight: str
    contains_weight: str
    name_links: float
    statistical: float
    proper_names: float


def _walk_layers(snap: GraphSnapshot, params: PPRParams) -> _WalkLayers:
    """The layers ``params`` walk on ``snap``: the statistical graph alone on a store without names, and
    proper-name nodes only beside the name layer."""
    named_store = has_names(snap)
    return _WalkLayers(params.relation_weight, params.contains_weight, params.name_links,
                      params.statistical if named_store else 1.0,
                      # AGRAG's whole statistical graph (statistical 1, MCMI's HippoRAG reset) is walked as the
                      # paper has it
                      params.proper_names if named_store and params.statistical < 1.0 else 0.0)


def _split(similarity: np.ndarray) -> np.ndarray:
    """Shares (sum 1) of one named document's reset weight over its passages, by their query similarity."""
    share = minmax(similarity)
    total = float(share.sum())
    return share / total if total > 0 else np.full(similarity.shape[0], 1.0 / similarity.shape[0])


def ppr_scores(env: RetrievalEnv, query: Query, params: PPRParams, settled: Settled | None = None
               ) -> tuple[np.ndarray, SeedInfo]:
    """PPR node scores over the node space (entities ``0..E-1``, passages ``E..E+P-1``; sum 1) and the seeds.

    This is AGRAG's node influence s_v (Eq. 13) before its ×0.05 passage scaling, which callers apply if needed.
    ``settled`` may end the walk early (``personalized_pagerank``).
    """
    snap = env.snapshot
    if snap.n_entities + snap.n_passages == 0:
        return np.zeros(0), SeedInfo()
    layers = _walk_layers(snap, params)
    graph = node_space_graph(snap, *layers)
    rows = transition_rows(snap, *layers)
    reset, info = personalization(env, query, params)
    scores = personalized_pagerank(rows, reset, params.damping, params.tol, params.max_iter, graph.dangling,
                                   params.coarse_tol, settled)
    return scores, info


def _chosen(snap: GraphSnapshot, scores: np.ndarray, top_k: int, depth: int, params: PPRParams) -> np.ndarray:
    """ppr's top-k set (retrieval/selection.py), its links read from the layers this walk has."""
    pool = top_indices(scores, depth)
    layers = _walk_layers(snap, params)
    links = passage_links(snap, pool, layers.name_links > 0, layers.proper_names > 0) if params.unlinked < 1.0 \
        else None
    return select_passages(pool, scores[pool], top_k, document_keys(snap, pool.tolist()), params.document_decay, links,
                           params.unlinked)


def ppr_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: PPRParams) -> RetrievalResult:
    """HippoRAG 2 retrieval: passages ranked by the PPR score of their passage node."""
    snap = env.snapshot
    # the walk stops once the passages it chooses among, and their order, provably are the fixed point's (ours)
    chooses = params.document_decay < 1.0 or params.unlinked < 1.0
    depth = max(top_k, params.select_pool) if chooses else top_k
    scores, info = ppr_scores(env, query, params, RankingSettled(snap.n_entities, depth))
    passage_scores = scores[snap.n_entities :]
    idx = _chosen(snap, passage_scores, top_k, depth, params) if chooses else top_indices(passage_scores, top_k)
    return RetrievalResult(
        "ppr",
        [ChunkHit(int(p), float(passage_scores[p])) for p in idx],
        triples=[r for r, _ in info.triples],
        info={"seed_entities": len(info.entity_weights), "seed_triples": len(info.triples),
              "named_entities": [snap.entity_names[e] for e in info.named]},
    )
