"""Nested questions answered hop by hop ("Where was the director of film X born?"): each hop's span or a title the
store knows fills the next hop's question."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from pathweaver.extract.names import without_disambiguator
from pathweaver.extractive.compose import _sentences
from pathweaver.extractive.evidence import _typed_span
from pathweaver.extractive.questions import SPAN_TYPES, answer_type
from pathweaver.extractive.sentences import _title_named, _tokens, content_words, passages_of, rank_sentences
from pathweaver.extractive.types import ExtractiveParams, HopChunks, Passage, WordDfFn
from pathweaver.retrieval.types import EncodeFn


def _hop_answer(question: str, passages: list[Passage], encode: EncodeFn | None, params: ExtractiveParams,
                word_df: WordDfFn | None, n_docs: int, final: bool) -> tuple[str, list[int]]:
    """One hop of a chain: its typed span; a name (any capitalised span) for an inner hop, whose answer fills
    the next hop; else the best sentence."""
    ranked = rank_sentences(question, passages, encode, params, word_df, n_docs)
    if not ranked:
        return "", []
    kind = answer_type(question)
    if kind not in SPAN_TYPES and not final:
        kind = "name"
    found = _typed_span(question, kind, ranked, params) if kind in SPAN_TYPES else None
    if found is not None:
        return found
    if final:
        answer = _sentences(ranked, params)
        return answer.text, answer.cites
    return ranked[0].text, [ranked[0].passage.n]


def memo_encode(encode: EncodeFn | None) -> EncodeFn | None:
    """``encode`` remembering the vectors it made, for answering several hops or parts over the same chunks: their
    sentences are embedded once, not once per hop."""
    if encode is None:
        return None
    seen: dict[str, np.ndarray] = {}
    inner = encode

    def cached(texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in seen]
        if todo:
            seen.update(zip(todo, np.asarray(inner(todo)), strict=True))
        return np.stack([seen[t] for t in texts]) if texts else np.asarray(inner(texts))

    return cached


def _title_forms(title: str) -> list[str]:
    """A passage title as a sentence may write it: whole, and without a trailing "(...)" disambiguator."""
    bare = without_disambiguator(title)
    return [title.strip()] + ([bare] if bare else [])


def bridge_title(
    question: str, passages: list[Passage], encode: EncodeFn | None, params: ExtractiveParams,
    word_df: WordDfFn | None, n_docs: int,
) -> tuple[str, list[int]] | None:
    """A chain's inner hop answered by a name the store knows: the first title of another retrieved passage
    that the best sentences write ("the group who performed Attics to Eden" -> "Madina Lake", which has a
    passage of its own), as the next hop then retrieves by it; None when no such title is written."""
    asked = set(_tokens(question))
    forms = [(f, p) for p in passages if p.title and not _title_named(p, asked) for f in _title_forms(p.title)
             if not content_words(f) <= asked]  # a form the question writes ("Come Dance" in "Come Dance With Me")
    if not forms:
        return None
    for sent in rank_sentences(question, passages, encode, params, word_df, n_docs)[: params.max_sentences]:
        hits = []
        for form, owner in forms:
            if owner.title == sent.passage.title or len(form) < 3:
                continue
            m = re.search(rf"(?<!\w){re.escape(form)}(?!\w)", sent.text, re.I)
            if m:
                hits.append((m.start(), -len(form), m.group(0)))
        if hits:
            return min(hits)[2], [sent.passage.n]
    return None


def _chain_answer(
    question: str, passages: list[Passage], encode: EncodeFn | None, params: ExtractiveParams,
    word_df: WordDfFn | None, n_docs: int, hop_chunks: HopChunks | None = None,
) -> tuple[str, list[int]] | None:
    """A nested question answered hop by hop: the heuristic plan's nodes in order, each node's answer filling
    the next node's "#id" (an inner node answering with a title the store knows, ``bridge_title``). A hop that
    depends on another searches the question's chunks, then the chunks ``hop_chunks`` retrieves for it when
    given (PankRAG §2.3's progressive resolution, without an LLM). None when the plan is one node or not a
    chain."""
    from pathweaver.planner.decompose import rephrase
    from pathweaver.planner.heuristic import heuristic_decompose

    plan = heuristic_decompose(question)
    if len(plan.nodes) < 2 or any(len(lv) > 1 for lv in plan.levels):
        return None
    answers: dict[str, str] = {}
    cites: list[int] = []
    encode = memo_encode(encode)
    for node_id in plan.order:
        node = plan.node(node_id)
        hop_q = rephrase(node.question, answers, node.depends_on)
        hop = passages
        if hop_chunks is not None and node.depends_on:  # the question's chunks first, then the hop's own
            seen = {p.n for p in passages}
            fresh = [p for p in passages_of(hop_chunks(hop_q), params.max_chunks) if p.n not in seen]
            hop = [replace(p, rank=r) for r, p in enumerate(passages + fresh)]
        final = node_id == plan.final
        found = bridge_title(hop_q, hop, encode, params, word_df, n_docs) if not final else None
        text, c = found or _hop_answer(hop_q, hop, encode, params, word_df, n_docs, final)
        if not text:
            return None
        answers[node_id] = text
        cites += [n for n in c if n not in cites]
    return answers[plan.final], cites

