"""Run a plan (PankRAG §2.2-2.3): levels in topological order, the nodes of a level concurrently. Each node is
rephrased with its resolved dependencies, retrieves, reranks its chunks against the resolved answers (Eq. 4-5;
only when it has dependencies), and gets a sub-answer from the LLM or, without one, extractively."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from pathweaver.config import ConfigError
from pathweaver.extract.entities import words
from pathweaver.extractive.questions import answer_type
from pathweaver.extractive.spans import typed_spans
from pathweaver.models.llm import LLMBackend, LLMError
from pathweaver.planner.decompose import Plan, rephrase
from pathweaver.planner.rerank import ALPHA, dependency_rerank, question_type
from pathweaver.results import Citation, dump
from pathweaver.retrieval.context import build_context, sentences
from pathweaver.retrieval.types import ChunkHit, EncodeFn, RetrievalResult, WordDf
from pathweaver.store.snapshot import GraphSnapshot
from pathweaver.text import is_stopword

RRF_K = (
    60  # reciprocal-rank fusion constant (Cormack et al. 2009) for merging node rankings; ours, not PankRAG's
)
MAX_WORKERS = 4
SUB_ANSWER_TOKENS = 64
SUB_ANSWER_CHUNKS = 3
# Sentences an extractive sub-answer embeds when none shares a word with the question (0 = every sentence of the
# SUB_ANSWER_CHUNKS chunks). Ours: the fewest that kept pank's dev figures (bench/pank_variants.py).
SUB_ANSWER_SENTENCES = 5
# The answer kinds whose sub-answers narrow to a span of that type (extractive.typed_spans), not the first entity.
TYPED_KINDS = ("date", "number", "place", "person", "nationality")
# Extractive answers a non-leaf node hands its dependents (``[retrieval.pank] beam``, ``--param beam=N``): each
# dependent retrieves once per candidate and keeps the ranking that best bears its candidate out
# (``bridge_support``); 1 = the single best guess. Ours, not PankRAG's (its LLM answers once); a beam, not a tree:
# a chain of n hops retrieves 1 + (n-1)·BEAM times.
BEAM = 3
SUB_ANSWER_PROMPT = """Answer the question in a few words, using only the sources. If they do not say, reply
"unknown".

{context}

Question: {question}
Answer:"""


@dataclass(frozen=True)
class PlanParams:
    """The plan's own settings (``[retrieval.pank]``, ``--param`` of a ``pank`` method); the rest go to the base."""

    beam: int = BEAM

    def validate(self) -> None:
        if self.beam < 1:
            raise ConfigError(f"pank beam must be at least 1, got {self.beam}")


@dataclass
class NodeTrace:
    id: str
    question: str
    rephrased: str
    depends_on: list[str]
    chunks_before: list[dict[str, Any]]
    chunks_after: list[dict[str, Any]]
    reranked: bool
    alpha: float | None
    answer: str
    answer_source: str  # llm | extractive | none | skipped (retrieval only, nothing depends on it)
    citation: dict[str, Any] | None
    seconds: float
    fallback: str | None = None
    candidates: list[str] = field(default_factory=list)  # the extractive beam: ``answer`` first, then the others


@dataclass
class PlanTrace:
    plan: Plan
    nodes: dict[str, NodeTrace]
    merged: list[ChunkHit]
    fallbacks: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def answers(self) -> dict[str, str]:
        return {k: v.answer for k, v in self.nodes.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict(),
            "nodes": [asdict(self.nodes[i]) for i in self.plan.order if i in self.nodes],
            "seconds": self.seconds,
        }


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def node_pool() -> ThreadPoolExecutor:
    """The threads the nodes of a level run on, one pool for every plan. A pool per plan started new threads each
    time, and each opened its own store connection (the service keeps one per thread): 20 plans left 20
    connections open. A level of one node runs in the caller's thread."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="pathweaver-plan")
        return _pool


def _hits_json(snapshot: GraphSnapshot, hits: list[ChunkHit]) -> list[dict[str, Any]]:
    return [{"chunk_id": int(snapshot.chunk_ids[h.passage]), "score": float(h.score)} for h in hits]


def _cand_vecs(snapshot: GraphSnapshot, hits: list[ChunkHit], encode: EncodeFn) -> np.ndarray:
    vecs = snapshot.chunk_vecs
    if vecs.ndim == 2 and vecs.shape[0] == snapshot.n_passages and vecs.shape[1] > 0:
        return vecs[[h.passage for h in hits]]
    return np.asarray(encode([snapshot.chunk_texts[h.passage] for h in hits]))


def _words(text: str) -> set[str]:
    """The distinct non-stopwords of ``text``, normalised as the store's n-grams are (``gram_df`` keys)."""
    return {w for w in words(text) if len(w) > 1 and not is_stopword(w)}


def idf_weights(terms: set[str], word_df: WordDf | None, n_passages: int) -> dict[str, float]:
    """BM25's idf, ln(1 + (N - df + 0.5) / (df + 0.5)), of each term over the store's ``n_passages`` chunks
    (Robertson & Sparck Jones; FTS5 ranks with the same). Without ``word_df`` every term weighs 1. A term the store
    has no frequency for (a number, an unseen word) counts as in no chunk: the rarest."""
    if word_df is None:
        return dict.fromkeys(terms, 1.0)
    df = word_df(sorted(terms))
    n = max(n_passages, 1)
    return {t: math.log(1.0 + (n - min(df.get(t, 0), n) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms}


def _overlaps(cands: list[tuple[str, int]], question: str, word_df: WordDf | None, n_passages: int) -> list[float]:
    """Each candidate sentence's shared weight with ``question``: the idf sum of the non-stopwords both have."""
    asked = _words(question)
    weight = idf_weights(asked, word_df, n_passages)
    return [sum(weight[t] for t in asked & _words(text)) for text, _ in cands]


def _narrowed_all(snapshot: GraphSnapshot, sentence: str, passage: int, question: str) -> list[str]:
    """The spans ``sentence`` offers as an answer to ``question``, best first (``_narrowed`` keeps the first)."""
    kind = answer_type(question)
    if kind in TYPED_KINDS:
        spans = typed_spans(sentence, kind, question)
        if spans:
            return [s[1] for s in sorted(spans, key=lambda s: (-s[2], s[0]))]
    lowered = question.lower()
    row = snapshot.mentions.getrow(passage) if snapshot.n_entities else None
    names = [snapshot.entity_names[e] for e in (row.indices if row is not None else [])]
    found = []
    for name in names:
        m = re.search(rf"\b{re.escape(name)}\b", sentence, re.I)
        if (
            m
            and name.lower() not in lowered
            and not any(w in lowered for w in name.lower().split() if len(w) > 3)
        ):
            proper = (
                sentence[m.start()].isupper() or sentence[m.start()].isdigit()
            )  # names beat common n-grams
            found.append((not proper, m.start(), -len(name), sentence[m.start() : m.end()]))
    return [f[3] for f in sorted(found)] if found else [sentence]


def _narrowed(snapshot: GraphSnapshot, sentence: str, passage: int, question: str) -> str:
    """The span of ``sentence`` of the type the question asks for (a date for "when", a name after "directed
    by" for "who directed", ``extractive.typed_spans``), else the first (preferably capitalised) entity of
    ``passage`` that ``sentence`` names and ``question`` does not (a placeholder filler), else the sentence."""
    return _narrowed_all(snapshot, sentence, passage, question)[0]


@dataclass(frozen=True)
class Candidate:
    """One extractive answer of a sub-question: the span, the passage it was read from, and the score of its
    sentence (idf overlap with the sub-question, or cosine when no sentence shares a word)."""

    answer: str
    passage: int
    score: float


def extractive_candidates(
    snapshot: GraphSnapshot,
    hits: list[ChunkHit],
    question: str,
    encode: EncodeFn,
    prefetch: Callable[[list[str]], None] | None = None,
    follow_up: Callable[[str], list[str]] | None = None,
    word_df: WordDf | None = None,
    beam: int = 1,
) -> list[Candidate]:
    """Up to ``beam`` distinct extractive answers in the top chunks, best first; the first is
    ``extractive_answer``'s. The sentences are ranked as there (idf overlap with ``question``, else cosine);
    the best sentence gives its spans best first (``_narrowed_all``), then the next sentence, and a span already
    given (case-insensitive) is skipped: on MuSiQue dev the best sentence holds the gold first-hop answer far
    more often than its first span is it (docs/design-notes.md, "Candidate beam").

    With ``prefetch`` (which embeds and caches texts in one batch, so that ``encode`` of one text finds them),
    the embedded sentences go into one batch with ``follow_up(answer)`` for each candidate's answer: the texts
    the plan's next level will embed if this answer wins. The next level then finds its vectors cached and runs
    no model pass of its own; the sentence chosen is the same, only batched (one model pass instead of two)."""
    top = hits[:SUB_ANSWER_CHUNKS]
    cands = [
        (" ".join(snapshot.chunk_texts[h.passage][a:b].split()), h.passage)
        for h in top
        for a, b in sentences(snapshot.chunk_texts[h.passage])
    ]
    cands = [c for c in cands if len(c[0]) > 3]
    if not cands:
        return []
    shared = _overlaps(cands, question, word_df, snapshot.n_passages)
    answers: list[str] | None = None  # every candidate sentence's answer, needed only to look ahead
    if max(shared) > 0:
        scores = [float(x) for x in shared]
        order = sorted((i for i in range(len(cands)) if shared[i] > 0), key=lambda i: (-shared[i], i))
    else:
        cands = cands[:SUB_ANSWER_SENTENCES] if SUB_ANSWER_SENTENCES > 0 else cands
        texts = [c[0] for c in cands]
        if prefetch is not None:
            answers = [_narrowed(snapshot, sentence, passage, question) for sentence, passage in cands]
            ahead = [t for a in dict.fromkeys(answers) for t in (follow_up(a) if follow_up else [])]
            prefetch([question, *texts, *ahead])
            vecs = np.stack([np.asarray(encode([t]))[0] for t in texts])  # one at a time: read from the cache
        else:
            vecs = np.asarray(encode(texts))
        sims = vecs @ np.asarray(encode([question]))[0]
        scores = [float(x) for x in sims]
        order = [int(i) for i in np.argsort(-sims, kind="stable")]
    out: list[Candidate] = []
    seen: set[str] = set()
    for i in order:
        sentence, passage = cands[i]
        spans = [answers[i]] if answers is not None and beam <= 1 else _narrowed_all(snapshot, sentence, passage,
                                                                                     question)
        for answer in spans:
            if answer.lower() in seen:
                continue
            seen.add(answer.lower())
            out.append(Candidate(answer, passage, scores[i]))
            if len(out) >= beam:
                return out
    return out


def extractive_answer(
    snapshot: GraphSnapshot,
    hits: list[ChunkHit],
    question: str,
    encode: EncodeFn,
    prefetch: Callable[[list[str]], None] | None = None,
    follow_up: Callable[[str], list[str]] | None = None,
    word_df: WordDf | None = None,
) -> tuple[str, int | None]:
    """The best-supported answer in the top chunks: a sentence of them, narrowed to the first (preferably
    capitalised) entity it names that the question does not (a placeholder filler), else the sentence. Returns
    (answer, passage).

    The sentence is the one sharing the most idf weight with ``question`` (``_overlaps``; ``word_df`` gives the
    store's document frequencies; ours, PankRAG asks the LLM), with no model pass. When no sentence shares a word,
    the embedding decides: of the first ``SUB_ANSWER_SENTENCES`` sentences, the one most similar to ``question``.
    ``prefetch`` and ``follow_up``: see ``extractive_candidates``."""
    found = extractive_candidates(snapshot, hits, question, encode, prefetch, follow_up, word_df)
    return (found[0].answer, found[0].passage) if found else ("", None)


def _sub_answer(
    node_q: str,
    hits: list[ChunkHit],
    snapshot: GraphSnapshot,
    encode: EncodeFn,
    llm: LLMBackend,
    timeout: float,
    prefetch: Callable[[list[str]], None] | None = None,
    follow_up: Callable[[str], list[str]] | None = None,
    word_df: WordDf | None = None,
    beam: int = 1,
) -> tuple[list[str], str, int | None, str | None, tuple[int, int]]:
    """(answers, source, passage, fallback reason, (prompt tokens, completion tokens)): the model's one answer,
    or without it up to ``beam`` extractive candidates, best first (``extractive_candidates``, which gets
    ``prefetch``, ``follow_up`` and ``word_df``)."""
    if not hits:
        return [""], "none", None, "no chunks retrieved", (0, 0)
    ctx = build_context(snapshot, RetrievalResult(method="plan", chunks=hits[:SUB_ANSWER_CHUNKS]), "chunks")
    messages = [{"role": "user", "content": SUB_ANSWER_PROMPT.format(context=ctx.text, question=node_q)}]
    try:
        res = llm.complete(messages, max_tokens=SUB_ANSWER_TOKENS, timeout=timeout)
        text = " ".join(res.text.split()).strip()
        if text and text.lower().strip(".") != "unknown":
            return [text], "llm", hits[0].passage, None, (res.prompt_tokens, res.completion_tokens)
        reason = "the model had no answer"
    except LLMError as exc:
        reason = str(exc)
    found = extractive_candidates(snapshot, hits, node_q, encode, prefetch, follow_up, word_df, beam)
    if not found:
        return [""], "extractive", None, reason, (0, 0)
    return [c.answer for c in found], "extractive", found[0].passage, reason, (0, 0)


def bridge_support(snapshot: GraphSnapshot, hits: list[ChunkHit], resolved: dict[str, str], asked: set[str],
                   word_df: WordDf | None) -> float:
    """How well ``hits`` bear out the ``resolved`` answers as a bridge: the most idf weight of the node's own
    words ``asked`` that a sentence of the top chunks shares while naming one of the answers."""
    names = [a.lower() for a in resolved.values() if a]
    weight = idf_weights(asked, word_df, snapshot.n_passages)
    best = 0.0
    for h in hits[:SUB_ANSWER_CHUNKS]:
        text = snapshot.chunk_texts[h.passage]
        for a, b in sentences(text):
            sentence = " ".join(text[a:b].split())
            if any(n in sentence.lower() for n in names):
                best = max(best, sum(weight[t] for t in asked & _words(sentence)))
    return best


def merge_rankings(
    plan: Plan, node_hits: dict[str, list[ChunkHit]], top_k: int, root_hits: list[ChunkHit] | None = None
) -> list[ChunkHit]:
    """Union of the node chunk lists by reciprocal-rank fusion (ties keep topological node order). ``root_hits``,
    the whole question's own ranking, joins the fusion first when given (ours, not PankRAG's)."""
    score: dict[int, float] = {}
    first: dict[int, int] = {}
    seq = 0
    lists = ([root_hits] if root_hits else []) + [node_hits.get(n, []) for n in plan.order]
    for rank in range(max((len(h) for h in lists), default=0)):
        for hits in lists:
            if rank < len(hits):
                p = hits[rank].passage
                score[p] = score.get(p, 0.0) + 1.0 / (RRF_K + rank + 1)
                first.setdefault(p, seq)
                seq += 1
    ranked = sorted(score, key=lambda p: (-score[p], first[p]))
    return [ChunkHit(p, score[p]) for p in ranked[:top_k]]


def execute_plan(
    plan: Plan,
    retrieve: Callable[[str], RetrievalResult],
    encode: EncodeFn,
    llm: LLMBackend,
    snapshot: GraphSnapshot,
    top_k: int,
    alpha: float | None = None,
    timeout: float = 60.0,
    root_hits: list[ChunkHit] | None = None,
    answer_leaves: bool = True,
    prefetch: Callable[[list[str]], None] | None = None,
    word_df: WordDf | None = None,
    beam: int = BEAM,
) -> PlanTrace:
    """Run ``plan`` level by level; see the module docstring. ``alpha`` None = by question type (PankRAG §3.4).
    ``root_hits`` (the whole question's ranking) is fused with the nodes' rankings, see ``merge_rankings``.
    ``answer_leaves=False`` skips the sub-answers no other node depends on (retrieval only: nothing reads them).
    ``prefetch``, when given, gets each level's rephrased queries and resolved answers before the level runs (to
    embed them in one batch rather than one by one). An extractive sub-answer also hands it, with its candidate
    sentences, what the next level would embed for each candidate answer (``follow_up``), so that a chain of
    sub-questions pays one model pass per level rather than two. ``word_df`` goes to ``extractive_answer``.
    ``beam``: how many extractive answers a node that others depend on hands them (``BEAM``); a dependent node
    then retrieves and reranks once per candidate of one dependency at a time (the others at their best) and
    keeps the run whose top chunks name its candidates in a sentence sharing the most idf weight with the node's
    own words (``bridge_support``; ties go to the best candidate), rephrased query included. A model's answer
    is one candidate, so with an LLM nothing changes."""
    PlanParams(beam).validate()
    start = time.perf_counter()
    answers: dict[str, str] = {}
    alternatives: dict[str, list[str]] = {}  # each answered node's candidates after its best one
    traces: dict[str, NodeTrace] = {}
    node_hits: dict[str, list[ChunkHit]] = {}
    tokens = [0, 0]
    needed = {d for n in plan.nodes for d in n.depends_on}

    def resolved_of(node_id: str, known: dict[str, str] | None = None) -> dict[str, str]:
        """The answers ``node_id`` depends on among ``known`` (default: those resolved so far)."""
        known = answers if known is None else known
        return {d: known[d] for d in plan.node(node_id).depends_on if known.get(d)}

    def query_of(node_id: str, resolved: dict[str, str]) -> str:
        node = plan.node(node_id)
        return rephrase(node.question, resolved, node.depends_on)

    def variants(node_id: str, resolved: dict[str, str]) -> list[tuple[int, dict[str, str]]]:
        """(candidate rank, answers) per retrieval of ``node_id``: its dependencies' best answers, then each
        other candidate of one dependency with the rest at their best (a beam: 1 + sum of (beam - 1))."""
        out = [(0, resolved)]
        for d in resolved:
            out += [(c, {**resolved, d: alt}) for c, alt in enumerate(alternatives.get(d, []), 1)]
        return out

    def level_texts(level: list[str], known: dict[str, str] | None = None) -> list[str]:
        """What a level will embed alone: each node's rephrased queries and the answers its reranking reads."""
        texts = []
        for node_id in level:
            for _, resolved in variants(node_id, resolved_of(node_id, known)):
                texts += [query_of(node_id, resolved), *resolved.values()]
        return texts

    later = {n.id: [m.id for m in plan.nodes if n.id in m.depends_on] for n in plan.nodes}
    level_of = {node_id: i for i, level in enumerate(plan.levels) for node_id in level}

    def follow_up(node_id: str) -> Callable[[str], list[str]]:
        """For ``node_id``'s candidate answer, what ``level_texts`` will give its dependents whose other
        dependencies are answered already (a sibling's answer is not known yet, so those are left out)."""
        dependents = [
            m for m in later[node_id]
            if not any(d != node_id and level_of.get(d) == level_of[node_id] for d in plan.node(m).depends_on)
        ]
        return lambda answer: level_texts(dependents, {**answers, node_id: answer})

    def ranked(query: str, resolved: dict[str, str], a: float) -> tuple[list[ChunkHit], list[ChunkHit]]:
        """(retrieved, reranked) for one rephrased query: Eq. 5 against ``resolved`` when there are answers."""
        hits = list(retrieve(query).chunks)
        if not (resolved and hits):
            return hits, hits
        scores = dependency_rerank(
            np.array([h.score for h in hits]),
            _cand_vecs(snapshot, hits, encode),
            np.asarray(encode(list(resolved.values()))),
            a,
        )
        return hits, [ChunkHit(hits[i].passage, float(scores[i])) for i in np.argsort(-scores, kind="stable")]

    def run(node_id: str) -> tuple[NodeTrace, list[ChunkHit], tuple[int, int]]:
        t0 = time.perf_counter()
        node = plan.node(node_id)
        resolved = resolved_of(node_id)
        query = query_of(node_id, resolved)
        a = alpha if alpha is not None else ALPHA[question_type(node.question)]
        runs = [(c, r, ranked(query_of(node_id, r), r, a)) for c, r in variants(node_id, resolved)]
        if len(runs) > 1:
            own = _words(node.question)
            best = max(range(len(runs)), key=lambda i: (bridge_support(snapshot, runs[i][2][1], runs[i][1], own,
                                                                        word_df), -i))
            runs = [runs[best]]
            resolved = runs[0][1]
            query = query_of(node_id, resolved)
        before = _hits_json(snapshot, runs[0][2][0])
        reranked = bool(resolved) and bool(runs[0][2][0])
        hits = runs[0][2][1]
        if answer_leaves or node.id in needed:
            found, source, passage, fallback, used = _sub_answer(query, hits, snapshot, encode, llm, timeout,
                                                                 prefetch, follow_up(node_id), word_df,
                                                                 beam if node.id in needed else 1)
        else:
            found, source, passage, fallback, used = [""], "skipped", None, None, (0, 0)
        citation = dump(Citation.model_construct(**snapshot.citation(passage))) if passage is not None else None
        trace = NodeTrace(
            node.id,
            node.question,
            query,
            list(node.depends_on),
            before,
            _hits_json(snapshot, hits),
            reranked,
            a if reranked else None,
            found[0],
            source,
            citation,
            time.perf_counter() - t0,
            fallback,
            found if len(found) > 1 else [],
        )
        return trace, hits[:top_k], used

    for level in plan.levels:
        if prefetch is not None:
            prefetch(level_texts(level))
        for trace, hits, used in [run(level[0])] if len(level) == 1 else node_pool().map(run, level):
            traces[trace.id] = trace
            answers[trace.id] = trace.answer
            alternatives[trace.id] = trace.candidates[1:]
            node_hits[trace.id] = hits
            tokens[0] += used[0]
            tokens[1] += used[1]
    fallbacks = sorted({f"sub-answer: {t.fallback}" for t in traces.values() if t.fallback})
    return PlanTrace(
        plan,
        traces,
        merge_rankings(plan, node_hits, top_k, root_hits),
        fallbacks,
        tokens[0],
        tokens[1],
        time.perf_counter() - start,
    )
