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

import re
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from pathweaver.extract.names import without_disambiguator
from pathweaver.extractive.choices import choose_option, yes_no
from pathweaver.extractive.questions import _NOT_PERSON, AMOUNT, SPAN_TYPES, answer_type, asked_head, options
from pathweaver.extractive.sentences import (
    _title_named,
    _tokens,
    capitalised,
    content_words,
    coverage,
    passages_of,
    rank_sentences,
    stem,
    stems,
    units,
)
from pathweaver.extractive.spans import typed_spans
from pathweaver.extractive.types import (
    Answer,
    ChunksLike,
    ExtractiveParams,
    HopChunks,
    Passage,
    Sentence,
    WordDfFn,
)
from pathweaver.retrieval.types import EncodeFn

NOT_SAID = "The notes don't say."


def _not_said(ranked: list[Sentence]) -> Answer:
    """The answer when the evidence does not decide: ``NOT_SAID`` and the closest sentence, cited."""
    if not ranked:
        return Answer(((NOT_SAID, ()),), supported=False)
    best = _answers(ranked)[0]  # a sentence, not a heading, when the chunks have one
    # a sentence is read in its context: the one after it often qualifies it ("This is not yet implemented.")
    after = [s.text for s in _following(best, 1) if not _is_heading(s)]
    quoted = " ".join([best.text, *after])
    return Answer(((NOT_SAID, ()), (f'Closest evidence: "{quoted}"', (best.passage.n,))), supported=False)


def _is_heading(sent: Sentence) -> bool:
    """Whether the unit is a heading (a one-line paragraph without closing punctuation) in its chunk."""
    found = units(sent.passage.text)
    return sent.index < len(found) and found[sent.index][1]


def _named(question: str) -> set[str]:
    """The capitalised content words inside the question (not its first word): the names it asks about; a month
    or a day is a date, which notes write in other ways ("2021-01-14")."""
    return (capitalised(question) & content_words(question)) - _NOT_PERSON


def decides(question: str, passages: list[Passage], ranked: list[Sentence], params: ExtractiveParams,
            word_df: WordDfFn | None = None, n_docs: int = 0, embedded: bool = True) -> bool:
    """Whether the evidence can answer ``question``: some sentence is at least ``params.min_sim`` similar to the
    question (when ``embedded``; the best-scored one may win on shared words alone), the chunks hold every name the question writes and ``params.min_coverage``
    of the question's idf weight, or ``params.close_coverage`` of it when a sentence is at least
    ``params.close_sim`` similar (a paraphrase: "pop-up reminder" for "notifications")."""
    if not ranked or (embedded and max(s.sim for s in ranked) < params.min_sim):
        return False
    texts = [p.text for p in passages]
    have = stems(set().union(*(content_words(t) for t in texts)))
    if not stems(_named(question)) <= have:
        return False
    covered = coverage(question, texts, word_df, n_docs)
    close = embedded and max(s.sim for s in ranked) >= params.close_sim
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
    for pos, sent in enumerate(answers[: params.max_sentences]):
        for start, span, bonus in typed_spans(sent.text, kind, question):
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
    stated = sent is top or (cued and sent.score >= top.score - params.sentence_margin)
    if cued and not stated and stems(content_words(sent.text)) & stems(content_words(question)):
        sent = replace(sent, score=top.score)  # cued, on topic, far below the best: its sentence joins the answer
    return best[2], sent, stated


def _typed_span(question: str, kind: str, ranked: list[Sentence],
                params: ExtractiveParams) -> tuple[str, list[int]] | None:
    """``_best_span`` as (span, its citation), stated clearly or not (a chain's hop needs a name to go on)."""
    found = _best_span(question, kind, ranked, params)
    return (found[0], [found[1].passage.n]) if found else None


def _answers(ranked: list[Sentence]) -> list[Sentence]:
    """The sentences that can answer: not a question ("Why does X fail?", a FAQ's heading) and not a short line
    without a full stop among sentences that have one (a title or heading); all of them when none is left."""
    kept = [s for s in ranked if not s.text.endswith("?") and not (s.heading and len(s.text.split()) <= 8)]
    return kept or ranked


def _following(sent: Sentence, count: int, *, to_sentence: bool = False) -> list[Sentence]:
    """Up to ``count`` units after ``sent`` in its chunk (what a line ending with a colon introduces); with
    ``to_sentence``, only up to the first one that ends a sentence (a heading's section: a command line, then
    the sentence that explains it)."""
    out = []
    for i, (text, _) in enumerate(units(sent.passage.text)[sent.index + 1: sent.index + 1 + count]):
        out.append(Sentence(text, sent.passage, sent.score, sent.sim, sent.index + 1 + i))
        if to_sentence and text.endswith((".", "!", "?")):
            break
    return out


# a sentence that opens with a pronoun or demonstrative ("This utilizes ...", "It also ...") goes on from the one
# before it, which says what it refers to
_ANAPHOR = re.compile(r"^(?:This|These|That|Those|It|Its|They|Their|Such)\b(?!\s+(?:is|was)\s+(?:why|how|what)\b)")


def _preceding(sent: Sentence) -> list[Sentence]:
    """The sentence before ``sent`` in its chunk when ``sent`` opens by referring back to it (``_ANAPHOR``) and it
    is a sentence of the same paragraph's kind (not a heading)."""
    if sent.index == 0 or not _ANAPHOR.match(sent.text):
        return []
    found = units(sent.passage.text)
    if sent.index > len(found) or found[sent.index - 1][1]:
        return []
    return [Sentence(found[sent.index - 1][0], sent.passage, sent.score, sent.sim, sent.index - 1)]


def _sentences(ranked: list[Sentence], params: ExtractiveParams, must: Sentence | None = None) -> Answer:
    """The best sentence and up to ``answer_sentences - 1`` more that score within ``sentence_margin`` of it
    (``other_margin`` for another chunk's: an answer goes on in its own note; ``must`` among them when given),
    each cited; sentences of one chunk in the chunk's order. A heading or question line that ranks first brings
    its section up to the section's first sentence (a FAQ's answer under its question, a command and the sentence
    that explains it); otherwise the best sentence brings the one after it, and the one before it when it opens by
    referring back ("This ..."); a line ending with a colon among the three best takes the last place. A sentence
    that ends with a colon ("The goals of this migration:") brings up to ``intro_units`` units after it (the
    command or list it introduces)."""
    answers = _answers(ranked)
    top = answers[0]
    chosen = [s for s in answers[: params.answer_sentences] if s.score >= top.score - (
        params.sentence_margin if s.passage.n == top.passage.n else params.other_margin)]
    if must is not None and must not in chosen and must.score >= top.score - params.sentence_margin:
        chosen = chosen[: params.answer_sentences - 1] + [must]
    lead = ranked[0]
    if lead is not top or lead.heading:  # the best unit is a heading or a question: its section answers
        section = _following(lead, 2, to_sentence=True)
        chosen = ([lead] if lead is top else []) + section + chosen[int(lead is top): params.answer_sentences - 1]
    elif not top.text.endswith(":"):  # a statement goes on in the sentence after it
        rest = sorted((c for c in chosen if c is not top), key=lambda c: c is not must)  # ``must`` stays
        before = _preceding(top)
        after = _following(top, 1)
        near = {(c.passage.n, c.index) for c in [top, *before, *after]}
        intro = [s for s in answers[:3] if s.text.endswith(":") and (s.passage.n, s.index) not in near][:1]
        if intro and must is None:  # a line that announces what follows ranks among the best: what it
            rest = intro  # announces answers (it takes the last place, and brings its units below)
        chosen = [top] + before + after + rest[: max(params.answer_sentences - 1 - len(before) - len(after), 0)]
    for s in list(chosen):
        for after in (_following(s, params.intro_units) if s.text.endswith(":") else []):
            if all((c.passage.n, c.index) != (after.passage.n, after.index) for c in chosen):
                chosen.append(after)
    first = {}  # a chunk's place is that of its best chosen sentence
    for i, s in enumerate(chosen):
        first.setdefault(s.passage.n, i)
    unique = {(s.passage.n, s.index): s for s in reversed(chosen)}  # a unit once, as first chosen
    chosen = sorted(unique.values(), key=lambda s: (first[s.passage.n], s.index))
    return Answer(tuple((s.text, (s.passage.n,)) for s in chosen), supported=True)


def _listed(ranked: list[Sentence], embedded: bool, params: ExtractiveParams) -> Answer | None:
    """A "which notes ...?" question: the titles of the cited chunks whose best sentence clears the bar (at least
    ``min_sim`` similar, or sharing a word without an embedder), each cited, in rank order; None when none does."""
    best: dict[int, Sentence] = {}
    for sent in ranked:
        best.setdefault(sent.passage.n, sent)
    keep = [s for s in best.values() if s.passage.title and (s.sim >= params.min_sim if embedded else s.score > 0)]
    keep.sort(key=lambda s: s.passage.rank)
    parts = tuple((title, tuple(s.passage.n for s in keep if s.passage.title == title))
                  for title in dict.fromkeys(s.passage.title for s in keep))
    return Answer(parts, supported=True) if parts else None


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
    passages = passages_of(chunks_or_context, params.max_chunks)
    if not passages:
        return Answer((), supported=False)
    question = " ".join(question.split())
    encode = memo_encode(encode)  # the chain's hops rank the same sentences again
    ranked = rank_sentences(question, passages, encode, params, word_df, n_docs)
    if not ranked:
        return Answer((), supported=False)
    kind = answer_type(question)
    if kind == "choice":
        picked = choose_option(question, options(question), passages, resolved)
        return Answer(((picked[0], tuple(picked[1])),), supported=True) if picked else _not_said(ranked)
    if not decides(question, passages, ranked, params, word_df, n_docs, embedded=encode is not None):
        return _not_said(ranked)
    if kind not in ("yesno", "list") and _head_off_topic(question, ranked):
        return _not_said(ranked)
    if kind == "yesno":  # "Yes." or "No." and the sentence that states it
        said = yes_no(question, ranked, params.min_sim if encode is not None else -1.0)
        return Answer(((said[0], ()), *said[1]), supported=True) if said else _not_said(ranked)
    if kind == "list":
        listed = _listed(ranked, encode is not None, params)
        return listed or _not_said(ranked)
    if kind in SPAN_TYPES and params.chain and not resolved:
        chained = _chain_answer(question, passages, encode, params, word_df, n_docs, hop_chunks)
        if chained is not None:
            return Answer(((chained[0], tuple(chained[1])),), supported=True)
    if kind in SPAN_TYPES:
        span = _best_span(question, kind, ranked, params)
        if AMOUNT.search(question) and not (span and span[2]):  # an amount asked for that no sentence states
            return _not_said(ranked)
        if span is not None and span[2]:
            return Answer(((span[0], (span[1].passage.n,)),), supported=True)
        if span is not None:  # a span the evidence does not clearly state: the sentences, its own among them
            return _sentences(ranked, params, must=span[1])
    return _sentences(ranked, params)


def baseline_answer(question: str, chunks_or_context: ChunksLike, encode: EncodeFn) -> tuple[str, list[int]]:
    """The plain baseline: the sentence of the top chunk most similar to the question."""
    passages = passages_of(chunks_or_context, 1)
    if not passages:
        return "", []
    ranked = rank_sentences(question, passages, encode, ExtractiveParams(overlap_weight=0.0, rank_decay=0.0))
    return (ranked[0].text, [ranked[0].passage.n]) if ranked else ("", [])
