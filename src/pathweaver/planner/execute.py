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
TYPED_KINDS = ("date", "number", "place", "person")
SUB_ANSWER_PROMPT = """Answer the question in a few words, using only the sources. If they do not say, reply
"unknown".

{context}

Question: {question}
Answer:"""


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


def _narrowed(snapshot: GraphSnapshot, sentence: str, passage: int, question: str) -> str:
    """The span of ``sentence`` of the type the question asks for (a date for "when", a name after "directed
    by" for "who directed", ``extractive.typed_spans``), else the first (preferably capitalised) entity of
    ``passage`` that ``sentence`` names and ``question`` does not (a placeholder filler), else the sentence."""
    kind = answer_type(question)
    if kind in TYPED_KINDS:
        spans = typed_spans(sentence, kind, question)
        if spans:
            return max(spans, key=lambda s: (s[2], -s[0]))[1]
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
    return min(found)[3] if found else sentence


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
        return "", None
    shared = _overlaps(cands, question, word_df, snapshot.n_passages)
    best = max(range(len(cands)), key=lambda i: (shared[i], -i))
    if shared[best] > 0:
        sentence, passage = cands[best]
        return _narrowed(snapshot, sentence, passage, question), passage
    cands = cands[:SUB_ANSWER_SENTENCES] if SUB_ANSWER_SENTENCES > 0 else cands
    texts = [c[0] for c in cands]
    answers: list[str] | None = None  # every candidate's answer, needed only to look ahead
    if prefetch is not None:
        answers = [_narrowed(snapshot, sentence, passage, question) for sentence, passage in cands]
        ahead = [t for a in dict.fromkeys(answers) for t in (follow_up(a) if follow_up else [])]
        prefetch([question, *texts, *ahead])
        vecs = np.stack([np.asarray(encode([t]))[0] for t in texts])  # one at a time: read from the cache
    else:
        vecs = np.asarray(encode(texts))
    sims = vecs @ np.asarray(encode([question]))[0]
    i = int(np.argmax(sims))
    sentence, passage = cands[i]
    return (answers[i] if answers is not None else _narrowed(snapshot, sentence, passage, question)), passage


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
) -> tuple[str, str, int | None, str | None, tuple[int, int]]:
    """(answer, source, passage, fallback reason, (prompt tokens, completion tokens)); ``prefetch``,
    ``follow_up`` and ``word_df`` go to ``extractive_answer``."""
    if not hits:
        return "", "none", None, "no chunks retrieved", (0, 0)
    ctx = build_context(snapshot, RetrievalResult(method="plan", chunks=hits[:SUB_ANSWER_CHUNKS]), "chunks")
    messages = [{"role": "user", "content": SUB_ANSWER_PROMPT.format(context=ctx.text, question=node_q)}]
    try:
        res = llm.complete(messages, max_tokens=SUB_ANSWER_TOKENS, timeout=timeout)
        text = " ".join(res.text.split()).strip()
        if text and text.lower().strip(".") != "unknown":
            return text, "llm", hits[0].passage, None, (res.prompt_tokens, res.completion_tokens)
        reason = "the model had no answer"
    except LLMError as exc:
        reason = str(exc)
    answer, passage = extractive_answer(snapshot, hits, node_q, encode, prefetch, follow_up, word_df)
    return answer, "extractive", passage, reason, (0, 0)


def merge_rankings(
    plan: Plan, node_hits: dict[str, list[ChunkHit]], top_k: int, root_hits: list[ChunkHit] | None = None
) -> list[ChunkHit]:
    """Union of the node chunk lists by reciprocal-rank fusion (ties keep topological node order). ``root_hits``,
    the whole question's own ranking, joins the fusion first when given (ours, not PankRAG's).

    A list whose top ``top_k`` passages are the same set as an earlier list's brings no new evidence and is left
    out: counted twice, its passages would outvote the first passage of another node's list."""
    score: dict[int, float] = {}
    first: dict[int, int] = {}
    seq = 0
    lists: list[list[ChunkHit]] = []
    seen: list[set[int]] = []
    for hits in ([root_hits] if root_hits else []) + [node_hits.get(n, []) for n in plan.order]:
        top = {h.passage for h in hits[:top_k]}
        if top not in seen:
            lists.append(hits)
            seen.append(top)
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
) -> PlanTrace:
    """Run ``plan`` level by level; see the module docstring. ``alpha`` None = by question type (PankRAG §3.4).
    ``root_hits`` (the whole question's ranking) is fused with the nodes' rankings, see ``merge_rankings``.
    ``answer_leaves=False`` skips the sub-answers no other node depends on (retrieval only: nothing reads them).
    ``prefetch``, when given, gets each level's rephrased queries and resolved answers before the level runs (to
    embed them in one batch rather than one by one). An extractive sub-answer also hands it, with its candidate
    sentences, what the next level would embed for each candidate answer (``follow_up``), so that a chain of
    sub-questions pays one model pass per level rather than two. ``word_df`` goes to ``extractive_answer``."""
    start = time.perf_counter()
    answers: dict[str, str] = {}
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

    def level_texts(level: list[str], known: dict[str, str] | None = None) -> list[str]:
        """What a level will embed alone: each node's rephrased query and the answers its reranking reads."""
        texts = []
        for node_id in level:
            resolved = resolved_of(node_id, known)
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

    def run(node_id: str) -> tuple[NodeTrace, list[ChunkHit], tuple[int, int]]:
        t0 = time.perf_counter()
        node = plan.node(node_id)
        resolved = resolved_of(node_id)
        query = query_of(node_id, resolved)
        hits = list(retrieve(query).chunks)
        before = _hits_json(snapshot, hits)
        a = alpha if alpha is not None else ALPHA[question_type(node.question)]
        reranked = bool(resolved) and bool(hits)
        if reranked:
            scores = dependency_rerank(
                np.array([h.score for h in hits]),
                _cand_vecs(snapshot, hits, encode),
                np.asarray(encode(list(resolved.values()))),
                a,
            )
            hits = [ChunkHit(hits[i].passage, float(scores[i])) for i in np.argsort(-scores, kind="stable")]
        if answer_leaves or node.id in needed:
            answer, source, passage, fallback, used = _sub_answer(query, hits, snapshot, encode, llm, timeout,
                                                                  prefetch, follow_up(node_id), word_df)
        else:
            answer, source, passage, fallback, used = "", "skipped", None, None, (0, 0)
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
            answer,
            source,
            citation,
            time.perf_counter() - t0,
            fallback,
        )
        return trace, hits[:top_k], used

    for level in plan.levels:
        if prefetch is not None:
            prefetch(level_texts(level))
        for trace, hits, used in [run(level[0])] if len(level) == 1 else node_pool().map(run, level):
            traces[trace.id] = trace
            answers[trace.id] = trace.answer
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
