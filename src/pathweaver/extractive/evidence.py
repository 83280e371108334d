"""Whether the evidence decides a question (similar enough, holding its names and most of its idf weight, the
asked thing on topic), and the best span of the expected type that it states."""

from __future__ import annotations

import re
from dataclasses import replace

from pathweaver.extractive.compose import _answers
from pathweaver.extractive.questions import _GENERIC_HEADS, _NOT_PERSON, _PRONOUNS, _WH, AMOUNT, asked_head
from pathweaver.extractive.sentences import _tokens, capitalised, content_words, coverage, stem, stems
from pathweaver.extractive.spans import _cap_spans, _in_question, typed_spans
from pathweaver.extractive.types import ExtractiveParams, Passage, Sentence, WordDfFn
from pathweaver.text import STOPWORDS


def _named(question: str) -> set[str]:
    """The capitalised content words inside the question (not its first word): the names it asks about; a month
    or a day is a date, which notes write in other ways ("2021-01-14")."""
    return (capitalised(question) & content_words(question)) - _NOT_PERSON


def decides(question: str, passages: list[Passage], ranked: list[Sentence], params: ExtractiveParams,
            word_df: WordDfFn | None = None, n_docs: int = 0, embedded: bool = True) -> bool:
    """Whether the evidence can answer ``question``: some sentence is at least ``params.min_sim`` similar to the
    question (when ``embedded``; the best-scored one may win on shared words alone), the chunks hold every name
    the question writes and ``params.min_coverage`` of the question's idf weight, or ``params.close_coverage`` of it when a sentence is at least
    ``params.close_sim`` similar (a paraphrase: "pop-up reminder" for "notifications")."""
    if not ranked:
        return False
    best_sim = max(s.sim for s in ranked)
    if embedded and best_sim < params.min_sim:
        return False
    texts = [p.text for p in passages] + [n for p in passages for n in p.names]  # a note holds its own names
    have = stems(set().union(*(content_words(t) for t in texts)))
    if not stems(_named(question)) <= have:
        return False
    covered = coverage(question, texts, word_df, n_docs)
    close = embedded and best_sim >= params.close_sim
    return covered >= (params.close_coverage if close else params.min_coverage)


def _head_off_topic(question: str, ranked: list[Sentence]) -> bool:
    """Whether the evidence names the thing a "what/which X ...?" question asks for only off its topic: sentences
    write X, but none of them shares another of the question's words ("8 P100 GPUs" in another note, for "What GPU
    did I use to run FLUX.1 on the photos?"). An X the evidence never writes decides nothing (a paraphrase: "I
    mistyped" answers "What mistake ...?"), so only a head the notes do use elsewhere counts against them."""
    head = asked_head(question)
    if head is None:
        return False
    rest = stems(content_words(question)) - {stem(head)}
    if len(rest) < 2:  # one other word is too little topic to judge by ("What other skill did I make?")
        return False
    with_head = [s for s in ranked if stem(head) in stems(content_words(s.text))]
    return bool(with_head) and not any(rest & stems(content_words(s.text)) for s in with_head)


def _best_span(question: str, kind: str, ranked: list[Sentence],
               params: ExtractiveParams) -> tuple[str, Sentence, bool] | None:
    """The best span of the expected ``kind`` in the best sentences that the question does not already name, its
    sentence, and whether the evidence clearly states it: a span of the best answer sentence, or one that its
    sentence cues (the question's words just before it, its counted noun after it, the asked head noun in it)
    and that scores within ``sentence_margin`` of the best; for an amount ("how many / how much"), only a cued
    one. A cued span not stated so whose sentence shares a question word comes with that sentence scored as the
    best, so that the answer's sentences quote it ("retained ... for 365 days" for "How long ... keep ...?")."""
    qwords = set(_tokens(question))
    best: tuple[float, int, str, Sentence, float] | None = None
    answers = _answers(ranked)  # a heading names what its chunk is about: no span of it answers
    top = answers[0]
    for pos, sent in enumerate(answers[: 2 * params.max_sentences]):
        for start, span, bonus in typed_spans(sent.text, kind, question):
            if pos >= params.max_sentences and (bonus < params.stated_cue or sent.sim < top.sim):
                continue
            words = _tokens(span)
            shared = sum(w in qwords for w in words) / max(len(words), 1)
            score = sent.score + params.cue_bonus * bonus - 0.3 * shared - 0.001 * start / max(len(sent.text), 1)
            cand = (score, -pos, span, sent, bonus)
            if best is None or cand[:2] > best[:2]:
                best = cand
    if best is None:
        return None
    sent, bonus = best[3], best[4]
    cued = bonus >= params.stated_cue
    if AMOUNT.search(question):  # a bare number is no amount: "How much did it cost?" is not "250"
        return best[2], sent, cued
    stated = sent is top or (cued and (sent.score >= top.score - params.sentence_margin or sent.sim > top.sim))
    if cued and not stated and stems(content_words(sent.text)) & stems(content_words(question)):
        sent = replace(sent, score=top.score)  # cued, on topic, far below the best: its sentence joins the answer
    return best[2], sent, stated


def _typed_span(question: str, kind: str, ranked: list[Sentence],
                params: ExtractiveParams) -> tuple[str, list[int]] | None:
    """``_best_span`` as (span, its citation), stated clearly or not (a chain's hop needs a name to go on)."""
    found = _best_span(question, kind, ranked, params)
    return (found[0], [found[1].passage.n]) if found else None


_WHAT_HEAD = re.compile(r"\b(?:what|which)\s+(?P<n>[a-z][a-z\-]+)\b")


def head_named_span(question: str, ranked: list[Sentence]) -> tuple[str, Sentence] | None:
    """A "what/which X ...?" question's answer when the best sentence names exactly one X by a name that says it
    is one (English names say what they name: "World War II" for "which war", "the North Atlantic Conference" for
    "what conference"), and the question does not write that name; None otherwise."""
    m = _WHAT_HEAD.search(question.lower())
    head = m.group("n") if m else ""
    if not head or head in STOPWORDS or head in _GENERIC_HEADS or head in _WH or head in _PRONOUNS:
        return None
    best = _answers(ranked)[0]
    qwords = set(_tokens(question))
    found = {span for _, span in _cap_spans(best.text)
             if stem(head) in stems(set(_tokens(span))) and not _in_question(span, qwords)}
    return (found.pop(), best) if len(found) == 1 else None
