"""Extractive answers without a language model: the shortest span (else the sentence) of the cited chunks that
answers a question, with its citation.

The question's expected answer type comes from its cues (who -> a name, when -> a date, where -> a place, how
many -> a number, "Are both ...?" -> yes/no, "Which came first, A or B?" -> one of the options, decided by the
dates the chunks give for each). Sentences are scored by their similarity to the question (the embedder, when
given) and their idf-weighted word overlap with it; the best-scoring sentences are searched for spans of the
expected type that the question does not already name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from pathweaver.extract.names import without_disambiguator
from pathweaver.extractive.choices import choose_option, yes_no
from pathweaver.extractive.questions import _ROLE, answer_type, options
from pathweaver.extractive.sentences import _title_named, _tokens, content_words, passages_of, rank_sentences
from pathweaver.extractive.spans import typed_spans
from pathweaver.extractive.types import ChunksLike, ExtractiveParams, HopChunks, Passage, Sentence, WordDfFn
from pathweaver.retrieval.types import EncodeFn


def _span_answer(
    question: str, passages: list[Passage], encode: EncodeFn | None, params: ExtractiveParams,
    word_df: WordDfFn | None, n_docs: int,
) -> tuple[str, list[int]]:
    """The best typed span of the best sentences, else the best sentence."""
    kind = answer_type(question)
    if kind == "yesno":
        return yes_no(question, passages)
    ranked = rank_sentences(question, passages, encode, params, word_df, n_docs)
    if not ranked:
        return "", []
    if kind == "relation":
        for sent in ranked[: params.max_sentences]:
            role = _ROLE.search(sent.text)
            if role:
                return role.group("np"), [sent.passage.n]
    qwords = set(_tokens(question))
    best: tuple[float, int, str, Sentence] | None = None
    for pos, sent in enumerate(ranked[: params.max_sentences]):
        if params.span_sentence and kind == "other":
            break
        for start, span, bonus in typed_spans(sent.text, kind, question):
            words = _tokens(span)
            shared = sum(w in qwords for w in words) / max(len(words), 1)
            score = sent.score + params.cue_bonus * bonus - 0.3 * shared - 0.001 * start / max(len(sent.text), 1)
            cand = (score, -pos, span, sent)
            if best is None or cand[:2] > best[:2]:
                best = cand
    if best is not None:
        return best[2], [best[3].passage.n]
    top = ranked[0]
    return top.text, [top.passage.n]


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
        found = bridge_title(hop_q, hop, encode, params, word_df, n_docs) if node_id != plan.final else None
        text, c = found or _span_answer(hop_q, hop, encode, params, word_df, n_docs)
        if not text:
            return None
        answers[node_id] = text
        cites += [n for n in c if n not in cites]
    final = plan.final
    return answers[final], cites


def extractive_answer(
    question: str,
    chunks_or_context: ChunksLike,
    encode: EncodeFn | None = None,
    *,
    resolved: Mapping[str, str] | None = None,
    params: ExtractiveParams | None = None,
    word_df: WordDfFn | None = None,
    n_docs: int = 0,
    hop_chunks: HopChunks | None = None,
) -> tuple[str, list[int]]:
    """The shortest span (else the sentence) of the chunks that answers ``question``, and the citation numbers
    it comes from; ``("", [])`` when there is no chunk. ``resolved`` are a plan's answers to the question's
    sub-questions (a comparison node compares them). ``encode`` (the embedder) joins the sentence score when
    given; ``word_df`` and ``n_docs`` weigh question words by idf. A nested question ("Where was the director of
    film X born?") is answered hop by hop when ``params.chain``."""
    params = params or ExtractiveParams()
    passages = passages_of(chunks_or_context, params.max_chunks)
    if not passages:
        return "", []
    question = " ".join(question.split())
    kind = answer_type(question)
    if kind == "choice":
        return choose_option(question, options(question), passages, resolved)
    if kind != "yesno" and params.chain and not resolved:
        chained = _chain_answer(question, passages, encode, params, word_df, n_docs, hop_chunks)
        if chained is not None:
            return chained
    return _span_answer(question, passages, encode, params, word_df, n_docs)


def baseline_answer(question: str, chunks_or_context: ChunksLike, encode: EncodeFn) -> tuple[str, list[int]]:
    """The plain baseline: the sentence of the top chunk most similar to the question."""
    passages = passages_of(chunks_or_context, 1)
    if not passages:
        return "", []
    ranked = rank_sentences(question, passages, encode, ExtractiveParams(overlap_weight=0.0, rank_decay=0.0))
    return (ranked[0].text, [ranked[0].passage.n]) if ranked else ("", [])
