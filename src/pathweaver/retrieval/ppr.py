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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.numeric.parallel import SparseRows
from pathweaver.retrieval.graphs import entity_passage_counts, has_names, node_space_graph, transition_rows
from pathweaver.retrieval.keywords import NAME_PARTS, matched_entities, query_names
from pathweaver.retrieval.linked import NoteSteps, check_linked_notes
from pathweaver.retrieval.namegraph import passages_of
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


class PPRError(ValueError):
    """Bad PPR input (shapes, an all-zero personalisation vector)."""


COARSE_TOL = 1e-6  # float32 steps until the residual is below this, then float64 steps down to tol (ours)
SCORE_RTOL = 1e-3  # RankingSettled: the error bound must be under this share of the best score
ROUNDING = 1e-12  # slack on the error bound for float64 rounding in a step (L1, scores summing to 1)
Settled = Callable[[np.ndarray, float], bool]  # (scores, L1 error bound) -> the caller's answer can no longer change


def personalized_pagerank(
    matrix: sp.spmatrix | np.ndarray | SparseRows,
    reset: np.ndarray,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 100,
    dangling: np.ndarray | None = None,
    coarse_tol: float = COARSE_TOL,
    settled: Settled | None = None,
) -> np.ndarray:
    """The fixed point of x = F(x) = (1-d)·r + d·(M·x + (dangling·x)·r)  (AGRAG Eq. 10).

    ``matrix`` is column-stochastic (n, n): column j holds the transition probabilities out of node j; a column
    that sums to 0 is a dangling node whose mass returns to the personalisation. It may come prepared as
    ``SparseRows`` (multi-threaded steps, nodes possibly renumbered; vectors in and out stay in node order); then
    ``dangling`` (a bool mask or node indices) is required, otherwise it is read from the column sums. ``reset`` (n,) is non-negative and normalised here to sum 1. The
    result sums to 1.

    Stopping rule (AGRAG §III-C: a change below ``tol``): each iterate x's residual |F(x) − x|₁ is the change one
    Eq. 10 step would make; when it is below ``tol``, F(x) is returned, or after ``max_iter`` steps. For any x,
    |F(x) − x*|₁ ≤ d/(1−d)·|F(x) − x|₁ (F contracts by d in L1), so the answer is as close to the fixed point x*
    as the plain iteration's under the same rule. ``settled(F(x), bound)`` may stop earlier: it is handed that
    bound and says whether what the caller reads from the scores can no longer change (``RankingSettled``).

    The F steps are combined by Chebyshev semi-iteration (ours), x_{k+1} = ω_{k+1}·(F(x_k) − x_{k−1}) + x_{k−1},
    which reaches Eq. 10's fixed point in fewer steps when M's eigenvalues are real (undirected graphs, as here);
    it falls back to Eq. 10's plain steps when the residual grows (``_Walk.run``).

    While the residual is above ``coarse_tol`` (> ``tol``; 0 = never), steps run in float32, which reads a third
    fewer bytes; they also stop when the residual no longer shrinks (float32's rounding floor), and the float64
    steps that follow restart from that vector, so the result obeys the float64 rule whatever the float32 phase
    did. See docs/design-notes.md ("PageRank") for the measurements.
    """
    n = matrix.shape[0]
    if tuple(matrix.shape) != (n, n) or reset.shape != (n,):
        raise PPRError(f"matrix must be square and match reset: {tuple(matrix.shape)} vs {reset.shape}")
    if not 0.0 <= damping < 1.0:
        raise PPRError(f"damping must be in [0, 1), got {damping}")
    total = float(reset.sum())
    if not np.all(reset >= 0) or total <= 0.0:
        raise PPRError("the personalisation vector must be non-negative with a positive sum")
    if isinstance(matrix, SparseRows):
        if dangling is None:
            raise PPRError("a pre-split matrix needs its dangling nodes")
        rows = matrix
    else:
        m = sp.csr_matrix(matrix, dtype=np.float64)
        if dangling is None:
            dangling = np.asarray(m.sum(axis=0)).ravel() <= 0.0
        rows = SparseRows(m)
    dead = np.flatnonzero(dangling) if dangling.dtype == np.bool_ else np.asarray(dangling, dtype=np.int64)
    walk = _Walk(damping, rows.inner_index(dead))
    r = rows.inner(reset.astype(np.float64) / total)  # the walk runs in the matrix's own node numbering
    if settled is not None and rows.order is not None and not (
            isinstance(settled, RankingSettled) and settled.offset >= rows.fixed_from):
        settled = _in_node_order(settled, rows)
    x, steps = r, 0
    if coarse_tol > tol:
        # the float32 phase may hand over early when ``settled`` looks likely to hold (twice its bound); only the
        # float64 steps' bound is trusted
        loose = None if settled is None else (lambda fx, bound: settled(fx, 2.0 * bound))
        x, steps, _ = walk.run(rows.single(), r.astype(np.float32), r.astype(np.float32), coarse_tol, max_iter,
                               loose)
        x = x.astype(np.float64)
    x, _, _ = walk.run(rows, r, x, tol, max(max_iter - steps, 1), settled)
    return rows.outer(x)


def _in_node_order(settled: Settled, rows: SparseRows) -> Settled:
    """``settled`` handed the scores in node order (one gather per call)."""
    return lambda scores, bound: settled(rows.outer(scores), bound)


@dataclass(frozen=True)
class _Walk:
    """Eq. 10 steps, Chebyshev-accelerated, in the dtype of the personalisation they are given."""

    damping: float
    dead: np.ndarray

    def run(self, rows: SparseRows, r: np.ndarray, x: np.ndarray, tol: float, max_iter: int,
            settled: Settled | None) -> tuple[np.ndarray, int, bool]:
        """Steps from ``x`` until the residual is below ``tol``, ``settled`` holds or ``max_iter`` steps:
        (F of the last iterate, steps taken, whether it stopped on the residual or ``settled``). In float32 they
        also stop when the residual no longer shrinks: rounding has a floor, and a ``tol`` under it would otherwise run to ``max_iter``. Chebyshev steps turn into plain ones
        when the residual grows: its error polynomial shrinks every eigenvalue of d·M inside an ellipse with foci
        ±d through 1, which holds all of them when M's are real (undirected graphs, as here) or when
        d ≤ 1/√2; a directed graph at a higher d may have some outside, and plain steps converge from anywhere."""
        d = self.damping
        base = (1.0 - d) * r
        coarse = r.dtype == np.float32
        factor = d / (1.0 - d)  # |F(x) - x*| <= d/(1-d) |F(x) - x|, in L1
        x, prev, fx, diff = x.copy(), None, np.empty_like(r), np.empty_like(r)
        omega, last, accelerate = 1.0, np.inf, True
        for steps in range(1, max_iter + 1):
            rows.dot(x, out=fx)
            if self.dead.size:
                fx += x[self.dead].sum() * r
            fx *= d
            fx += base
            np.subtract(fx, x, out=diff)
            residual = float(np.abs(diff, out=diff).sum())
            if residual < tol or (settled is not None and settled(fx, factor * residual * (1.0 + 1e-9) + ROUNDING)):
                return fx, steps, True
            if steps == max_iter or (coarse and residual >= last):
                break
            if accelerate and residual > last:  # outside Chebyshev's ellipse (a directed graph, d > 1/sqrt 2)
                accelerate = False
            last = residual
            if not accelerate:
                x, fx, prev = fx, x, None
            elif prev is None:  # a Chebyshev run starts with one plain step
                prev, x, fx = x, fx, np.empty_like(r)
                omega = 1.0 / (1.0 - d * d / 2.0)
            else:  # Chebyshev semi-iteration for a spectrum in [-d, d]; x_{k+1} = ω (F(x_k) - x_{k-1}) + x_{k-1}
                fx -= prev
                fx *= omega
                fx += prev
                prev, x, fx = x, fx, prev
                omega = 1.0 / (1.0 - d * d * omega / 4.0)
        return fx, steps, False


@dataclass(frozen=True)
class RankingSettled:
    """A ``settled`` test: the top ``k`` of ``scores[offset:]``, in order, are those of the fixed point.

    With |F(x) − x*|₁ ≤ bound, two scores can swap only if they differ by at most the bound (the sum of their two
    errors is at most the L1 error). So when each gap between consecutive scores among the best k + 1 (all of
    them, if there are no more) exceeds it, the fixed point has the same top k in the same order (ours: the caller
    reads only that much). The bound must also be under ``SCORE_RTOL`` of the best score, so that the scores the
    caller reports stay close to the fixed point's. It reads only ``scores[offset:]``, so a walk whose matrix
    keeps those nodes in place need not renumber the scores for it."""

    offset: int
    k: int

    def __call__(self, scores: np.ndarray, bound: float) -> bool:
        part = scores[self.offset:]
        n = part.shape[0]
        if self.k < 1 or n == 0 or bound > SCORE_RTOL * float(part.max()):
            return False
        m = min(self.k + 1, n)
        best = np.sort(part[np.argpartition(part, n - m)[n - m:]])
        return m == 1 or bool(np.diff(best).min() > bound)


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
