"""Answer generation: retrieve (or plan and execute), build the paper's context layout, and ask the LLM for a cited
answer. Without a model (the ``extractive`` backend, the default when no client sampling, endpoint or model file
is configured), or when the model fails, the answer is extractive: evidence from the cited chunks with its
citations. The result's ``backend`` says which wrote the answer. ``ask`` never raises because of the model."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pathweaver.extractive import extractive_answer, memo_encode
from pathweaver.extractive.questions import answer_type
from pathweaver.extractive.types import Answer, ChunksLike, ExtractiveParams, HopChunks
from pathweaver.models.llm import EXTRACTIVE, NO_LLM, LLMBackend, LLMError
from pathweaver.planner.decompose import Plan, rephrase
from pathweaver.planner.decompose import decompose as make_plan
from pathweaver.planner.execute import PlanTrace, execute_plan
from pathweaver.planner.heuristic import heuristic_decompose, is_conjunction
from pathweaver.results import AnswerCitation, AnswerLLM, AskOut
from pathweaver.retrieval.context import Context, ContextItem, build_context, layout_for, top_chunks
from pathweaver.retrieval.types import EncodeFn, RetrievalEnv, RetrievalResult

ANSWER_MAX_TOKENS = 512
NO_EVIDENCE = "No indexed passage answers the question."

SYSTEM = (
    "You answer questions using only the numbered sources given. Cite every claim with its source number in "
    "brackets, like [1]. If the sources do not contain the answer, say so."
)
# Per-layout instruction: where the evidence sits and how to read it.
TEMPLATES = {
    # PathRAG Eq. 6: query first, then paths in ascending reliability (most reliable last)
    "pathrag": "{context}\n\nThe relational paths are ordered from least to most reliable; the last ones matter "
    "most. Answer the question above.",
    # AGRAG §III-D: reasoning subgraph string (Eq. 18) plus hybrid chunks
    "agrag": "{context}\n\nUse the reasoning subgraph to connect the facts and the chunks for details.\n\n"
    "Question: {question}",
    # Path Pooling: triples ordered with the most relevant nearest the question (recency bias)
    "pooling": "{context}\n\nQuestion: {question}",
    "chunks": "{context}\n\nQuestion: {question}",
}


def prompt_messages(question: str, context: Context, layout: str, resolved: str = "") -> list[dict[str, str]]:
    body = TEMPLATES[layout].format(context=context.text, question=question)
    if resolved:  # PankRAG §2.3: resolved dependencies D join the reranked knowledge K in one context
        body = f"Resolved sub-questions:\n{resolved}\n\n{body}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]


def _span_answer(context: ChunksLike, question: str, env: RetrievalEnv, resolved: dict[str, str],
                 encode: EncodeFn | None = None, hop_chunks: HopChunks | None = None) -> Answer:
    """``extractive.extractive_answer`` of ``question`` over the context (with ``encode``, else the env's)."""
    return extractive_answer(
        question, context, encode or env.encode, resolved=resolved or None, word_df=env.word_df,
        n_docs=env.snapshot.n_passages, hop_chunks=hop_chunks,
    )


def extractive_text(context: Context, question: str, env: RetrievalEnv, resolved: dict[str, str],
                    hop_chunks: HopChunks | None = None) -> tuple[str, bool]:
    """The extractive answer with its ``[n]`` citations, and whether the evidence decides it: the one place
    ``ask`` answers a question without a model."""
    answer = _span_answer(context, question, env, resolved, hop_chunks=hop_chunks)
    return (answer.marked, answer.supported) if answer.parts else (NO_EVIDENCE, False)


class HopRetrieval:
    """A chain question's later hops retrieving for themselves (PankRAG §2.3's progressive resolution, without a
    plan): each hop's chunks join the answer's context after the ones already there, so citations keep their
    numbers; the hop searches the question's chunks, then its own.

    ``hop_chunks``: the chunks each hop retrieves (``ask`` passes its ``top_k``). ``derived_items``: the paths or
    triples the grown context keeps; None keeps as many as it has chunks."""

    def __init__(self, env: RetrievalEnv, result: RetrievalResult, retrieve: Callable[[str, list[str] | None],
                 RetrievalResult], layout: str, question: str, context: Context, *, hop_chunks: int,
                 derived_items: int | None = None, merged: bool = False) -> None:
        self.env, self.result, self.retrieve = env, result, retrieve
        self.layout, self.question, self.merged = layout, question, merged
        self.hop_chunks, self.derived_items = hop_chunks, derived_items
        self.chunks = top_chunks(result.chunks, hop_chunks)
        self.context = context

    def __call__(self, hop_question: str) -> list[ContextItem]:
        hop = top_chunks(self.retrieve(hop_question, None).chunks, self.hop_chunks)
        seen = {h.passage for h in self.chunks}
        self.chunks += [h for h in hop if h.passage not in seen]
        self.context = build_context(self.env.snapshot, replace(self.result, chunks=self.chunks), self.layout,
                                     max_items=len(self.chunks), question=self.question,
                                     max_derived=self.derived_items, merged=self.merged)
        items = {i.passage: i for i in self.context.items if i.kind == "chunk"}
        wanted = (p for h in hop for p in ([h.passage, *h.merged] if self.merged else [h.passage]))
        return [items[p] for p in dict.fromkeys(wanted) if p in items]


def _part_chunks(context: Context, own: list[ContextItem]) -> list[ContextItem]:
    """The chunks one part of a question is answered from: its own retrieved chunks and the whole question's,
    taken in turn (each list best first, each chunk once), so a part about a second note finds that note even
    when the question's top chunks are all about the first."""
    asked = [i for i in context.items if i.kind == "chunk"]
    out: dict[int, ContextItem] = {}
    for pair in zip(own + [None] * len(asked), asked + [None] * len(own), strict=True):
        for c in pair:
            if c is not None:
                out.setdefault(c.n, c)
    return list(out.values())


def conjunction_text(context: Context, plan: Plan, env: RetrievalEnv,
                     hops: HopRetrieval | None = None) -> tuple[str, bool]:
    """A question that asks two things answered part by part, each part's answer filling the "#n" of the parts
    after it: "Jacob Marley [1]; Jacob Marley was his sole business partner [1]", and whether every part is
    decided. With ``hops``, each part also retrieves for itself (its chunks join the context after the
    question's, keeping the citation numbers); a part's text said already by an earlier part is not repeated."""
    answers: dict[str, str] = {}
    marked: list[str] = []
    supported = True
    encode = memo_encode(env.encode)  # the parts rank the same chunks' sentences
    for node_id in plan.order:
        node = plan.node(node_id)
        question = rephrase(node.question, answers, node.depends_on)
        resolved = {plan.node(d).question: answers[d] for d in node.depends_on if answers.get(d)}
        chunks: ChunksLike = _part_chunks(context, hops(question)) if hops is not None else context
        answer = _span_answer(chunks, question, env, resolved, encode)
        answers[node_id] = answer.text if answer.supported else ""
        if answer.marked not in marked:
            marked.append(answer.marked)
        supported = supported and answer.supported and bool(answer.parts)
    text = "; ".join(t for t in marked if t)
    return (text, supported) if text else (NO_EVIDENCE, False)


def _resolved(trace: PlanTrace) -> dict[str, str]:
    """The answered sub-questions before the final node: rephrased question -> answer."""
    out: dict[str, str] = {}
    for node_id in trace.plan.order[:-1]:
        node = trace.nodes[node_id]
        if node.answer:
            out[node.rephrased] = node.answer
    return out


def _resolved_text(resolved: dict[str, str]) -> str:
    return "\n".join(f"- {q} -> {a}" for q, a in resolved.items())


def _final_question(trace: PlanTrace) -> tuple[str, dict[str, str]]:
    """What the extractive answer of a plan answers: its last sub-question with its dependencies' answers filled
    in (PankRAG's top-down rephrase), and those answers in ``depends_on`` order (a comparison compares them)."""
    final = trace.nodes.get(trace.plan.final)
    if final is None:
        return "", {}
    deps = [trace.nodes[d] for d in final.depends_on if d in trace.nodes]
    return final.rephrased or final.question, {d.rephrased: d.answer for d in deps if d.answer}


def ask(
    env: RetrievalEnv,
    question: str,
    *,
    retrieve: Callable[..., RetrievalResult],
    method: str,
    top_k: int,
    llm: LLMBackend,
    decompose: bool = False,
    plan: dict[str, Any] | None = None,
    timeout: float = 60.0,
    max_tokens: int = ANSWER_MAX_TOKENS,
    prefetch: Callable[[list[str]], None] | None = None,
) -> AskOut:
    """Answer ``question`` with citations (``results.AskOut``; built unvalidated, for ``results.dump``).
    ``retrieve(text, keywords)`` runs the method (a "which notes ...?" question without a model also passes how
    many notes, ``retrieve(text, keywords, k)``). ``prefetch`` gets each plan level's queries before the level
    runs (``execute_plan``)."""
    start = time.perf_counter()
    model, backend = getattr(llm, "model", ""), getattr(llm, "name", EXTRACTIVE)
    fallbacks: list[str] = []
    tokens = [0, 0]
    plan_dict: dict[str, Any] | None = None
    resolved: dict[str, str] = {}
    extract_q, extract_resolved = question, {}  # what an extractive answer answers: a plan's last sub-question
    parts: Plan | None = None  # a plan of a question that asks two things: the extractive answer answers each
    if decompose or plan is not None:
        built, info = make_plan(question, llm, plan, timeout=timeout)
        if info.get("fallback"):
            fallbacks.append(f"plan: {info['fallback']}")
        tokens[0] += int(info.get("prompt_tokens", 0))
        tokens[1] += int(info.get("completion_tokens", 0))
        trace = execute_plan(
            built, lambda q: retrieve(q, None), env.encode, llm, env.snapshot, top_k, timeout=timeout,
            prefetch=prefetch, word_df=env.word_df,
        )
        fallbacks += trace.fallbacks
        tokens[0] += trace.prompt_tokens
        tokens[1] += trace.completion_tokens
        result = RetrievalResult(method=method, chunks=trace.merged)
        layout = "chunks"
        plan_dict = {**trace.to_dict(), "trace": info}
        resolved = _resolved(trace)
        extract_q, extract_resolved = _final_question(trace)
        extract_q = extract_q or question
        parts = built if is_conjunction(question) else None
    else:
        if backend == EXTRACTIVE and answer_type(question) == "list":  # a list of notes may run past the top k
            top_k = max(top_k, ExtractiveParams().list_notes)
            result = retrieve(question, None, top_k)
        else:
            result = retrieve(question, None)
        layout = layout_for(method)
        if is_conjunction(question):  # one retrieval, but an extractive answer still answers each part
            parts = heuristic_decompose(question)
    # without a model the answer reads every retrieved chunk of the top notes, not only each note's best one
    context = build_context(env.snapshot, result, layout, max_items=max(top_k, 1), question=question,
                            merged=backend == EXTRACTIVE)
    hops = HopRetrieval(env, result, retrieve, layout, question, context, hop_chunks=max(top_k, 1),
                        merged=backend == EXTRACTIVE) if not (decompose or plan is not None) else None
    answer = ""
    try:
        if backend == EXTRACTIVE:
            pass  # the chosen backend: no model call, nothing to fall back from
        elif not context.items:
            fallbacks.append("answer: nothing was retrieved")
        else:
            res = llm.complete(
                prompt_messages(question, context, layout, _resolved_text(resolved)), max_tokens=max_tokens,
                timeout=timeout,
            )
            answer = res.text.strip()
            model = res.model or model
            tokens[0] += res.prompt_tokens
            tokens[1] += res.completion_tokens
            if not answer:
                fallbacks.append("answer: the model returned an empty answer")
    except LLMError as exc:
        fallbacks.append(f"answer: {exc}")
    except Exception as exc:  # a model failure never escapes ask()
        fallbacks.append(f"answer: {type(exc).__name__}: {exc}")
    if backend == EXTRACTIVE:  # no model was asked for, so its absence is no fallback
        fallbacks = [f for f in fallbacks if not f.endswith(NO_LLM)]
    is_extractive = not answer
    supported = bool(context.items)  # a model's answer says in its own words when the sources lack one
    if is_extractive:
        answer, supported = (conjunction_text(context, parts, env, hops) if parts is not None
                             else extractive_text(context, extract_q, env, extract_resolved, hops))
        if hops is not None:
            context = hops.context
    return AskOut.model_construct(
        answer=answer,
        citations=[
            AnswerCitation.model_construct(**{k: c[k] for k in AnswerCitation.model_fields if k in c})
            for c in context.citations
        ],
        context=context.to_dict(),
        plan=plan_dict,
        llm=AnswerLLM.model_construct(backend=backend, model=model, prompt_tokens=tokens[0],
                                      completion_tokens=tokens[1], fallbacks=fallbacks),
        seconds=time.perf_counter() - start,
        backend=EXTRACTIVE if is_extractive else backend,  # who wrote the answer text
        extractive=is_extractive,
        supported=supported,
    )
