"""Extractive answers without a language model: what the cited chunks say, with citations, or that they don't say.

The question's expected answer type comes from its wh-word (who -> a name, when -> a date, how many -> a number,
"Is X ...?" -> yes/no, "Which came first, A or B?" -> one of the options, decided by the dates the chunks give
for each). Sentences (list items, table rows) are scored by their similarity to the question (the embedder, when
given), the share of the question's idf weight they hold, and their chunk's rank. When the evidence does not
decide (the best sentence is far from the question, the chunks lack the question's key words, no sentence
states a yes/no question's claim, no date orders a choice's options), the answer says so (``NOT_SAID``) and
quotes the closest sentence. Otherwise a question that asks for a name, date, number or place gets the best span
of that type, and any other question (how, what, why) the best one to three sentences, each with its ``[n]``.
"""

from __future__ import annotations

from collections.abc import Mapping

from pathweaver.extractive.chain import _chain_answer, bridge_title, memo_encode
from pathweaver.extractive.choices import choose_option, partly_stated, yes_no
from pathweaver.extractive.compose import NOT_SAID, _answers, _listed, _not_said, _sentences
from pathweaver.extractive.evidence import _best_span, _head_off_topic, decides, head_named_span
from pathweaver.extractive.forms import form_sentence
from pathweaver.extractive.questions import (
    AMOUNT,
    NOTE_WORD_RE,
    SPAN_TYPES,
    answer_type,
    asks_several,
    options,
)
from pathweaver.extractive.sentences import passages_of, rank_sentences
from pathweaver.extractive.stranded import stranded_answer
from pathweaver.extractive.types import Answer, ChunksLike, ExtractiveParams, HopChunks, WordDfFn
from pathweaver.retrieval.types import EncodeFn

__all__ = ["NOT_SAID", "baseline_answer", "bridge_title", "decides", "extractive_answer", "memo_encode"]


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
) -> Answer:
    """What the chunks say to ``question`` (``Answer``: its parts with their citation numbers, and whether the
    evidence decides); no parts when there is no chunk. ``resolved`` are a plan's answers to the question's
    sub-questions (a comparison node compares them). ``encode`` (the embedder) joins the sentence score and the
    support bar when given; ``word_df`` and ``n_docs`` weigh question words by idf. A nested question that asks
    for a name, date, number or place ("Where was the director of film X born?") is answered hop by hop when
    ``params.chain``."""
    params = params or ExtractiveParams()
    question = " ".join(question.split())
    kind = answer_type(question)
    passages = passages_of(chunks_or_context, params.list_notes if kind == "list" else params.max_chunks)
    if not passages:
        return Answer((), supported=False)
    encode = memo_encode(encode)  # the chain's hops rank the same sentences again
    ranked = rank_sentences(question, passages, encode, params, word_df, n_docs)
    if not ranked:
        return Answer((), supported=False)
    floor = params.min_sim if encode is not None else -1.0  # without an embedder no sentence has a similarity
    if kind == "choice":
        picked = choose_option(question, options(question), passages, resolved)
        return Answer(((picked[0], tuple(picked[1])),), supported=True) if picked else _not_said(ranked, params)
    # "Which notes ...?" asks for notes: the word is not what the notes must hold
    asked = NOTE_WORD_RE.sub(" ", question) if kind == "list" else question
    if not decides(asked, passages, ranked, params, word_df, n_docs, embedded=encode is not None):
        return _not_said(ranked, params)
    if kind not in ("yesno", "list") and _head_off_topic(question, ranked):
        return _not_said(ranked, params)
    if kind == "yesno":  # "Yes." or "No." and the sentence that states it
        said = yes_no(question, ranked, floor)
        if said:
            return Answer(((said[0], ()), *said[1]), supported=True)
        # no "yes" or "no": what the notes say on it
        near = partly_stated(question, _answers(ranked), floor, word_df=word_df, n_docs=n_docs)
        return _sentences(ranked, params, must=near) if near is not None else _not_said(ranked, params)
    if kind == "list":
        listed = _listed(ranked, encode is not None, params, question)
        return listed or _not_said(ranked, params)
    if kind in SPAN_TYPES and params.chain and not resolved:
        chained = _chain_answer(question, passages, encode, params, word_df, n_docs, hop_chunks)
        if chained is not None:
            return Answer(((chained[0], tuple(chained[1])),), supported=True)
    if kind in SPAN_TYPES:
        span = _best_span(question, kind, ranked, params)
        if AMOUNT.search(question) and not (span and span[2]):  # an amount asked for that no sentence states
            return _not_said(ranked, params)
        if span is not None and span[2]:
            return Answer(((span[0], (span[1].passage.n,)),), supported=True)
        if span is not None:  # a span the evidence does not clearly state: the sentences, its own among them
            return _sentences(ranked, params, must=span[1])
    if kind == "other":  # "What is X inspired by?": the sentence that writes "inspired by" and what follows
        stated = stranded_answer(question, ranked, params, word_df, n_docs)
        if stated is not None:
            return stated
    if kind in ("other", "name") and not asks_several(question):  # "what/which X ...?": a name that says it is
        named = head_named_span(question, ranked)  # an X, alone in the best sentence
        if named is not None:
            return Answer(((named[0], (named[1].passage.n,)),), supported=True)
    return _sentences(ranked, params, must=form_sentence(question, _answers(ranked), floor))


def baseline_answer(question: str, chunks_or_context: ChunksLike, encode: EncodeFn) -> tuple[str, list[int]]:
    """The plain baseline: the sentence of the top chunk most similar to the question."""
    passages = passages_of(chunks_or_context, 1)
    if not passages:
        return "", []
    ranked = rank_sentences(question, passages, encode, ExtractiveParams(overlap_weight=0.0, rank_decay=0.0))
    return (ranked[0].text, [ranked[0].passage.n]) if ranked else ("", [])
