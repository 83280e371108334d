"""Personalized PageRank over the entity+passage node space (AGRAG §III-C Eq. 10-13, HippoRAG 2).

Convention (AGRAG Eq. 10): PPR^i = (1-d)·p + d·P·PPR^{i-1}, so the damping d multiplies the *walk* term and
(1-d) is the restart probability; d = 0.5 as in HippoRAG 2 (igraph's ``damping``, same meaning). AGRAG Eq. 12
also gives non-edges a 1/|V| transition; we follow HippoRAG 2's code instead (plain weighted edges), and send the
mass of dangling nodes back to the personalisation vector.

Personalisation (HippoRAG 2 style, generalising AGRAG Eq. 11): the query is mapped to its top ``top_triples``
(k_a) triples by cos(query, triple); each triple's subject and object entity gets weight += that cosine; every
entity the query names (HippoRAG 1's query-entity linking) gets += ``name_seeds``; each weight is divided by the
number of passages mentioning the entity (HippoRAG 2's specificity). Passage nodes get their min-max
normalised dense similarity × ``passage_weight`` (0.05). Chunks are ranked by their passage node's PPR score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.retrieval.graphs import entity_passage_counts, node_space_graph, transition_rows
from pathweaver.retrieval.keywords import matched_entities
from pathweaver.retrieval.parallel import SparseRows
from pathweaver.retrieval.seeds import dense_scores, minmax, top_entities, top_indices, top_triples
from pathweaver.retrieval.types import ChunkHit, Query, RetrievalEnv, RetrievalResult


class PPRError(ValueError):
    """Bad PPR input (shapes, an all-zero personalisation vector)."""


COARSE_TOL = 1e-6  # float32 steps until the L1 change is below this, then float64 steps down to tol (ours)


def personalized_pagerank(
    matrix: sp.spmatrix | np.ndarray | SparseRows,
    reset: np.ndarray,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 100,
    dangling: np.ndarray | None = None,
    coarse_tol: float = COARSE_TOL,
) -> np.ndarray:
    """Sparse power iteration of x ← (1-d)·r + d·(M·x + (dangling·x)·r)  (AGRAG Eq. 10).

    ``matrix`` is column-stochastic (n, n): column j holds the transition probabilities out of node j; a column
    that sums to 0 is a dangling node whose mass returns to the personalisation. It may come pre-split into row
    blocks (``SparseRows``, multi-threaded steps); then ``dangling`` (a bool mask or node indices) is required,
    otherwise it is read from the column sums. ``reset`` (n,) is non-negative and normalised here to sum 1. Stops
    when the L1 change is below ``tol`` or after ``max_iter`` steps. The result sums to 1.

    While the change is above ``coarse_tol`` (> ``tol``; 0 = never), steps run in float32, which reads a third
    fewer bytes; the float64 steps after them converge to the same fixed point under the same stopping rule, since
    each step contracts the error by d whatever the start. On the 2wiki store, 51 dev questions: the result moves
    by < 5e-8 in L1 from a float64-only solve (less than the 1e-7 stopping rule allows), every top 8 passages is
    the same, and the iteration takes ~21.4 ms against 23.2 with float32 down to 1e-5 and ~27 in float64 only.
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
    r = reset.astype(np.float64) / total
    x, steps = r, 0
    if coarse_tol > tol:
        x, steps = _power_steps(rows.single(), r.astype(np.float32), r.astype(np.float32), damping, coarse_tol,
                                max_iter, dead)
        x = x.astype(np.float64)
    x, _ = _power_steps(rows, r, x, damping, tol, max_iter - steps, dead)
    return x


def _power_steps(rows: SparseRows, r: np.ndarray, x: np.ndarray, damping: float, tol: float, max_iter: int,
                 dead: np.ndarray) -> tuple[np.ndarray, int]:
    """Eq. 10 steps from ``x`` in the dtype of ``r`` until the L1 change is below ``tol``; (x, steps taken).
    In float32 they also stop when the change no longer shrinks: float32 rounding has a floor (about 1e-7 in L1
    on the 2wiki graph), and a ``tol`` under it would otherwise run to ``max_iter``."""
    base = (1.0 - damping) * r
    x, nxt, diff = x.copy(), np.empty_like(r), np.empty_like(r)
    steps, last = 0, np.inf
    coarse = r.dtype == np.float32
    while steps < max_iter:
        rows.dot(x, out=nxt)
        if dead.size:
            nxt += x[dead].sum() * r
        nxt *= damping
        nxt += base
        np.subtract(nxt, x, out=diff)
        delta = float(np.abs(diff, out=diff).sum())
        x, nxt = nxt, x
        steps += 1
        if delta < tol or (coarse and delta >= last):
            break
        last = delta
    return x, steps


@dataclass
class PPRParams:
    """HippoRAG 2 / AGRAG §III-C parameters."""

    damping: float = 0.5  # d, AGRAG §III-C after Eq. 10 ("to align with HippoRAG 2")
    passage_weight: float = 0.05  # passage-node balance factor, AGRAG §III-C after Eq. 12 / HippoRAG 2
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
    dense_pool: int = 0  # personalise only the top-n passages by dense score (0 = all passages, HippoRAG 2)
    relation_weight: Literal["count", "one"] = "count"  # relation edge weight (graphs.node_space_graph)
    # passage↔entity weight: HippoRAG 2 uses 1; the mention count was better on 2wiki dev (q 0-50, all-evidence@5
    # 0.41 vs 0.33 with statistical triples), so it is our default
    contains_weight: Literal["one", "count"] = "count"

    def validate(self) -> None:
        if not 0.0 <= self.damping < 1.0:
            raise ConfigError(f"ppr damping must be in [0, 1), got {self.damping}")
        if min(self.passage_weight, self.top_triples, self.seed_entities, self.dense_pool, self.name_seeds) < 0:
            raise ConfigError("ppr passage_weight, top_triples, seed_entities, dense_pool and name_seeds must be >= 0")
        if self.tol <= 0 or self.max_iter < 1 or self.coarse_tol < 0:
            raise ConfigError(f"ppr tol must be > 0, coarse_tol >= 0 and max_iter >= 1, got {self.tol}, "
                              f"{self.coarse_tol}, {self.max_iter}")
        if self.relation_weight not in ("count", "one") or self.contains_weight not in ("one", "count"):
            raise ConfigError("ppr relation_weight must be count|one and contains_weight one|count")


@dataclass
class SeedInfo:
    """How the walk was personalised: the triples (relation index, cos) and the entity seeds."""

    triples: list[tuple[int, float]] = field(default_factory=list)
    entity_weights: dict[int, float] = field(default_factory=dict)


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
    if params.name_seeds > 0 and query.text:
        for ent in matched_entities(snap, query.text):
            weights[ent] = weights.get(ent, 0.0) + params.name_seeds
    if params.specificity and weights:
        counts = entity_passage_counts(snap)
        weights = {
            e: w / max(float(counts[e]) if e < counts.shape[0] else 1.0, 1.0) for e, w in weights.items()
        }
    info.entity_weights = weights
    for ent, w in weights.items():
        reset[ent] = w
    if n_p and params.passage_weight > 0:
        dense = dense_scores(snap, query.vec)
        idx = top_indices(dense, params.dense_pool) if params.dense_pool else np.arange(n_p)
        pw = minmax(dense[idx]) * params.passage_weight
        reset[n_e + idx] = pw
    if reset.sum() <= 0:  # nothing matched: fall back to a uniform walk start over passages, or all nodes
        if n_p:
            reset[n_e:] = 1.0
        else:
            reset[:] = 1.0
    return reset, info


def ppr_scores(env: RetrievalEnv, query: Query, params: PPRParams) -> tuple[np.ndarray, SeedInfo]:
    """PPR node scores over the node space (entities ``0..E-1``, passages ``E..E+P-1``; sum 1) and the seeds.

    This is AGRAG's node influence s_v (Eq. 13) before its ×0.05 passage scaling, which callers apply if needed.
    """
    snap = env.snapshot
    if snap.n_entities + snap.n_passages == 0:
        return np.zeros(0), SeedInfo()
    graph = node_space_graph(snap, params.relation_weight, params.contains_weight)
    rows = transition_rows(snap, params.relation_weight, params.contains_weight)
    reset, info = personalization(env, query, params)
    scores = personalized_pagerank(rows, reset, params.damping, params.tol, params.max_iter, graph.dangling,
                                   params.coarse_tol)
    return scores, info


def ppr_retrieve(env: RetrievalEnv, query: Query, top_k: int, params: PPRParams) -> RetrievalResult:
    """HippoRAG 2 retrieval: passages ranked by the PPR score of their passage node."""
    snap = env.snapshot
    scores, info = ppr_scores(env, query, params)
    passage_scores = scores[snap.n_entities :]
    idx = top_indices(passage_scores, top_k)
    return RetrievalResult(
        "ppr",
        [ChunkHit(int(p), float(passage_scores[p])) for p in idx],
        triples=[r for r, _ in info.triples],
        info={"seed_entities": len(info.entity_weights), "seed_triples": len(info.triples)},
    )
