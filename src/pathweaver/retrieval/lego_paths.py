"""LEGO-GraphRAG path retrieval on an extracted subgraph: SBR-SPR, OSAR-EEMs and ISAR-EEMs (appendix B.1, B.8).

All three start from the query's seed entities inside the subgraph and walk its edges in either direction. A name
edge (a, mentions, b) reads as ``a -mentions: <the sentence of a's passage that names b>-> b`` (issue 23): the
sentence says what the statistical label would, and the EEM scores it against the query.
- SBR-SPR: one BFS shortest path from each seed to every other seed and to the top-scored subgraph entities.
- OSAR-EEMs: enumerate simple paths of 1..``max_hop`` edges, embed all path texts in one shot, keep the top_k
  (Table 1: top_k = 32).
- ISAR-EEMs: beam search (Algorithm 1, Table 1: beam_width = 8, max_hop = 4), optionally with triple-level
  scoring and dynamic pruning (B.8 (1)).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pathweaver.config import ConfigError
from pathweaver.retrieval.lego_extract import SYNONYM, ExtractedSubgraph, edge_ends, is_name, name_row
from pathweaver.retrieval.namegraph import mention_sentence, name_edges
from pathweaver.retrieval.types import EncodeFn, PathHit
from pathweaver.store.snapshot import GraphSnapshot

SYNONYM_LABEL = "synonym of"
MENTIONS_LABEL = "mentions"
PRUNE_RULES = ("mean", "percentile")


def step_text(snapshot: GraphSnapshot, a: int, r: int, b: int) -> str:
    """One hop as text: ``a -label-> b`` along the relation, ``a <-label- b`` against it."""
    names = snapshot.entity_names
    if r == SYNONYM:
        return f"-{SYNONYM_LABEL}-> {names[b]}"
    label = f"{MENTIONS_LABEL}: {mention_sentence(snapshot, name_row(r))}" if is_name(r) else snapshot.rel_labels[r]
    forward = edge_ends(snapshot, r) == (a, b)
    return f"-{label}-> {names[b]}" if forward else f"<-{label}- {names[b]}"


def path_text(snapshot: GraphSnapshot, nodes: Sequence[int], rels: Sequence[int]) -> str:
    """``a -label-> b -label-> c`` for a path of entity indices joined by ``rels``."""
    parts = [snapshot.entity_names[nodes[0]]]
    parts += [step_text(snapshot, nodes[i], r, nodes[i + 1]) for i, r in enumerate(rels)]
    return " ".join(parts)


def triple_text(snapshot: GraphSnapshot, a: int, r: int, b: int) -> str:
    """The text of one triple (the text its relation vector embeds; synonym edges get ``a synonym of b``, name
    edges ``a mentions b: sentence``)."""
    if r == SYNONYM:
        return f"{snapshot.entity_names[a]} {SYNONYM_LABEL} {snapshot.entity_names[b]}"
    if is_name(r):
        src, dst = edge_ends(snapshot, r)
        names = snapshot.entity_names
        return f"{names[src]} {MENTIONS_LABEL} {names[dst]}: {mention_sentence(snapshot, name_row(r))}"
    return snapshot.triple_text(r)


class PathScorer:
    """EEM scores against the query: cos(encode(text), query), cached per text for one query. Triple scores use
    the stored relation vectors when the snapshot has them (they embed the same triple text); a name triple
    scores its passage's cosine in ``passage_scores`` when given (the naive scorer SAE-EEMs ranks it by). ``cache``
    may carry the text scores over from an earlier run on the same question and snapshot."""

    def __init__(self, snapshot: GraphSnapshot, encode: EncodeFn, qvec: np.ndarray,
                 passage_scores: np.ndarray | None = None, cache: dict[str, float] | None = None) -> None:
        self.snapshot = snapshot
        self.encode = encode
        self.qvec = np.asarray(qvec, dtype=np.float32)
        self.passage_scores = passage_scores
        self._cache: dict[str, float] = {} if cache is None else cache  # text -> its score against ``qvec``
        rv = snapshot.rel_vecs
        self._rel_vecs = (
            rv.shape[0] == snapshot.n_relations and rv.ndim == 2 and rv.shape[1] == self.qvec.shape[0]
        )

    def texts(self, texts: list[str]) -> np.ndarray:
        """Scores of ``texts``, encoding only the ones not seen yet, in one batch."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            vecs = np.asarray(self.encode(todo), dtype=np.float32)
            for t, s in zip(todo, (vecs @ self.qvec).tolist(), strict=True):
                self._cache[t] = float(s)
        return np.array([self._cache[t] for t in texts], dtype=np.float64)

    def triples(self, steps: list[tuple[int, int, int]]) -> np.ndarray:
        """Scores of single triples ``(a, relation, b)`` (ISAR triple-level scoring, B.8 (1))."""
        out = np.zeros(len(steps), dtype=np.float64)
        rels = np.array([r for _, r, _ in steps], dtype=np.int64)
        stored = rels >= 0
        named = np.flatnonzero(rels <= -2) if self.passage_scores is not None else np.zeros(0, dtype=np.int64)
        if named.size:
            out[named] = self.passage_scores[name_edges(self.snapshot).passage[-2 - rels[named]]]
        if self._rel_vecs and stored.any():
            vecs = self.snapshot.rel_vecs[rels[stored]]
            stored[stored] = np.any(vecs != 0, axis=1)  # an all-zero row means the vector was not loaded
            out[stored] = self.snapshot.rel_vecs[rels[stored]] @ self.qvec
        else:
            stored[:] = False
        done = stored.copy()
        done[named] = True
        need = np.flatnonzero(~done).tolist()
        if need:
            out[need] = self.texts([triple_text(self.snapshot, *steps[i]) for i in need])
        return out


def start_entities(sub: ExtractedSubgraph, seeds: list[int]) -> list[int]:
    """The seeds that lie on an edge of the subgraph; when none does, its best-scored entity on an edge (ours, so
    a path search runs: a seed SAE-EEMs kept with no edge, e.g. a phrase in a graph of names, starts no path)."""
    linked = {x for u, v, _ in sub.edges for x in (u, v)}
    starts = [s for s in seeds if s in linked]
    if not starts and linked:
        starts = [min(linked, key=lambda e: (-sub.scores.get(e, 0.0), e))]
    return starts


def _hit(snapshot: GraphSnapshot, nodes: list[int], rels: list[int], score: float) -> PathHit:
    return PathHit(list(nodes), list(rels), float(score), path_text(snapshot, nodes, rels))


def _rank(hits: list[PathHit]) -> list[PathHit]:
    """Best score first, then fewer hops, then generation order (stable sort)."""
    return sorted(hits, key=lambda h: (-h.reliability, len(h.relations)))


def sbr_paths(
    snapshot: GraphSnapshot, sub: ExtractedSubgraph, seeds: list[int], n_targets: int, top_n: int
) -> list[PathHit]:
    """SBR-SPR (Table 1, No.1/10/11): a shortest path (BFS over the subgraph, fewest hops; ties broken by the
    lowest neighbour index) from each start entity to every other start entity and to the ``n_targets``
    best-scored non-seed entities. A path's reliability is its end entity's extraction score (ours: SPR itself
    is unscored). Returns the ``top_n`` best, one path per unordered entity pair."""
    adj = sub.neighbours()
    starts = start_entities(sub, seeds)
    others = sorted((e for e in sub.entities if e not in starts), key=lambda e: (-sub.scores.get(e, 0.0), e))
    targets = set(starts) | set(others[:n_targets])
    hits: list[PathHit] = []
    seen: set[tuple[int, int]] = set()
    for s in starts:
        parent: dict[int, tuple[int, int]] = {s: (-1, 0)}
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for v, r in adj.get(u, []):
                if v not in parent:
                    parent[v] = (u, r)
                    queue.append(v)
        for t in sorted(targets & parent.keys()):
            pair = (min(s, t), max(s, t))
            if t == s or pair in seen:
                continue
            seen.add(pair)
            nodes, rels = [t], []
            while nodes[-1] != s:
                u, r = parent[nodes[-1]]
                nodes.append(u)
                rels.append(r)
            nodes.reverse()
            rels.reverse()
            hits.append(_hit(snapshot, nodes, rels, sub.scores.get(t, 0.0)))
    return _rank(hits)[:top_n]


def enumerate_paths(
    sub: ExtractedSubgraph, starts: list[int], max_hop: int, limit: int
) -> list[tuple[list[int], list[int]]]:
    """Simple paths of 1..``max_hop`` edges from ``starts``, shortest first (breadth-first), at most ``limit``."""
    adj = sub.neighbours()
    out: list[tuple[list[int], list[int]]] = []
    level: list[tuple[list[int], list[int]]] = [([s], []) for s in starts]
    for _ in range(max_hop):
        nxt: list[tuple[list[int], list[int]]] = []
        for nodes, rels in level:
            for v, r in adj.get(nodes[-1], []):
                if v in nodes:
                    continue
                nxt.append((nodes + [v], rels + [r]))
                if len(out) + len(nxt) >= limit:
                    return out + nxt
        out += nxt
        level = nxt
        if not level:
            break
    return out


def osar_paths(
    snapshot: GraphSnapshot,
    sub: ExtractedSubgraph,
    seeds: list[int],
    scorer: PathScorer,
    max_hop: int,
    top_n: int,
    max_candidates: int,
) -> list[PathHit]:
    """OSAR-EEMs (Table 1, No.2/12): all candidate paths (bounded by ``max_hop`` and ``max_candidates``) scored
    in one shot by cos(EEM(path text), query); the ``top_n`` best."""
    cands = enumerate_paths(sub, start_entities(sub, seeds), max_hop, max_candidates)
    if not cands:
        return []
    texts = [path_text(snapshot, nodes, rels) for nodes, rels in cands]
    scores = scorer.texts(texts)
    hits = [PathHit(n, r, float(s), t) for (n, r), s, t in zip(cands, scores.tolist(), texts, strict=True)]
    return _rank(hits)[:top_n]


@dataclass(frozen=True)
class PruneRule:
    """B.8 (1) dynamic pruning: min-max normalise the candidates' scores at each step and keep those at or above
    the mean (``rule="mean"``) or the ``percentile``-th percentile (``rule="percentile"``) of the normalised
    scores; the beam width still caps how many survive (ours: keeps the search bounded)."""

    rule: str = "mean"
    percentile: float = 50.0

    def __post_init__(self) -> None:
        if self.rule not in PRUNE_RULES:
            raise ConfigError(f"prune_rule must be one of {', '.join(PRUNE_RULES)}, got {self.rule!r}")
        if not 0.0 <= self.percentile <= 100.0:
            raise ConfigError(f"prune_percentile must be in [0, 100], got {self.percentile}")

    def keep(self, scores: np.ndarray) -> np.ndarray:
        """Boolean mask of the candidates that pass the dynamic threshold."""
        if scores.size == 0:
            return np.zeros(0, dtype=bool)
        lo, hi = float(scores.min()), float(scores.max())
        norm = (scores - lo) / (hi - lo) if hi > lo else np.ones_like(scores, dtype=np.float64)
        threshold = float(norm.mean()) if self.rule == "mean" else float(np.percentile(norm, self.percentile))
        return norm >= threshold - 1e-12


@dataclass(frozen=True)
class BeamStep:
    """What one ISAR step did: candidates scored, and the kept beams as (nodes, score)."""

    candidates: int
    kept: list[tuple[list[int], float]]


def isar_paths(
    snapshot: GraphSnapshot,
    sub: ExtractedSubgraph,
    seeds: list[int],
    scorer: PathScorer,
    beam_width: int,
    max_hop: int,
    triple_scoring: bool = False,
    prune: PruneRule | None = None,
    max_expansions: int = 64,
    trace: list[BeamStep] | None = None,
) -> list[PathHit]:
    """ISAR-EEMs, LEGO Algorithm 1: beams start as the seed entities; at each step 1..``max_hop`` every beam path
    is extended by each neighbouring edge that reaches a new node and scored, S(p') = M(p', q) = cos(EEM(text of
    p'), q), or with ``triple_scoring`` the cos of the newly added triple only (B.8 (1)); the top ``beam_width``
    (after ``prune``, when given) become the next beams and join the result set, which is returned best first.
    More than ``max_expansions`` extensions in one step are first cut to the best by triple score (ours, an
    EEM pre-filter in the spirit of B.8 (2) EEMs-PF). ``trace`` collects each step's kept beams."""
    if beam_width < 1 or max_hop < 1:
        raise ConfigError(f"beam_width and max_hop must be at least 1, got {beam_width}, {max_hop}")
    adj = sub.neighbours()
    beams: list[tuple[list[int], list[int]]] = [([s], []) for s in start_entities(sub, seeds)]
    result: list[PathHit] = []
    for _ in range(max_hop):
        ext = [
            (b, v, r)
            for b, (nodes, _) in enumerate(beams)
            for v, r in adj.get(nodes[-1], [])
            if v not in nodes
        ]
        if not ext:
            break
        tscores = np.zeros(0)
        if len(ext) > max_expansions or triple_scoring:
            tscores = scorer.triples([(beams[b][0][-1], r, v) for b, v, r in ext])
        if len(ext) > max_expansions:
            order = np.lexsort((np.arange(len(ext)), -tscores))[:max_expansions]
            ext, tscores = [ext[i] for i in order], tscores[order]
        cands = [(beams[b][0] + [v], beams[b][1] + [r]) for b, v, r in ext]
        scores = tscores if triple_scoring else scorer.texts([path_text(snapshot, n, r) for n, r in cands])
        idx = np.arange(len(cands))
        if prune is not None:
            idx = idx[prune.keep(scores)]
        idx = idx[np.lexsort((idx, -scores[idx]))][:beam_width]
        beams = [cands[i] for i in idx]
        hits = [_hit(snapshot, cands[i][0], cands[i][1], float(scores[i])) for i in idx]
        result += hits
        if trace is not None:
            trace.append(BeamStep(len(cands), [(h.nodes, h.reliability) for h in hits]))
    return _rank(result)
