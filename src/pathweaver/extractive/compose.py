"""The answer's sentences: the best units with the ones around them that complete them (the sentence after, the
one a "This ..." refers back to, a heading's section, the list a colon line introduces), or that the notes don't
say and the closest evidence."""

from __future__ import annotations

import re

from pathweaver.extractive.questions import NOTE_NOUNS
from pathweaver.extractive.sentences import content_words, stems, units
from pathweaver.extractive.types import Answer, ExtractiveParams, Sentence

NOT_SAID = "The notes don't say."
_NOTE_WORDS = stems({w for n in NOTE_NOUNS for w in (n, f"{n}s")})  # they ask for notes, not their topic


def _not_said(ranked: list[Sentence], params: ExtractiveParams | None = None) -> Answer:
    """The answer when the evidence does not decide: ``NOT_SAID`` and the closest evidence, cited: the units a
    decided answer would quote (``_sentences``) with ``params``, else the closest sentence and the one after it."""
    if not ranked:
        return Answer(((NOT_SAID, ()),), supported=False)
    if params is not None:
        quoted = _sentences(ranked, params)
        return Answer(((NOT_SAID, ()), (f'Closest evidence: "{quoted.text}"', tuple(quoted.cites))), supported=False)
    best = _answers(ranked)[0]  # a sentence, not a heading, when the chunks have one
    # a sentence is read in its context: the one after it often qualifies it ("This is not yet implemented.")
    after = [s.text for s in _following(best, 1) if not s.heading]
    quoted_text = " ".join([best.text, *after])
    return Answer(((NOT_SAID, ()), (f'Closest evidence: "{quoted_text}"', (best.passage.n,))), supported=False)


def _answers(ranked: list[Sentence]) -> list[Sentence]:
    """The sentences that can answer: not a question ("Why does X fail?", a FAQ's heading) and not a short line
    without a full stop among sentences that have one (a title or heading); all of them when none is left."""
    return [s for s in ranked if _quotable(s)] or ranked


# a line that gives a field's value ("alias: Presentation", "type: Feature"): a note's properties
# (``ingest.properties``) say what the note is about, so such a line heads no section and answers nothing
_FIELD = re.compile(r"^[a-z][\w\-]*:\s+\S")


def _quotable(sent: Sentence) -> bool:
    """Whether ``sent`` can answer or go on with an answer: not a question, not a short heading and not a property
    line ("summary: ...", "tags: ...": it describes the note, whose body answers)."""
    return (not sent.text.endswith("?") and not (sent.heading and len(sent.text.split()) <= 8)
            and not _FIELD.match(sent.text))


def _following(sent: Sentence, count: int, *, to_sentence: bool = False) -> list[Sentence]:
    """Up to ``count`` units after ``sent`` in its chunk (what a line ending with a colon introduces); with
    ``to_sentence``, only up to the first one that ends a sentence (a heading's section: a command line, then
    the sentence that explains it)."""
    out = []
    for i, (text, heading) in enumerate(units(sent.passage.text)[sent.index + 1: sent.index + 1 + count]):
        out.append(Sentence(text, sent.passage, sent.score, sent.sim, sent.index + 1 + i, heading))
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
    return [Sentence(found[sent.index - 1][0], sent.passage, sent.score, sent.sim, sent.index - 1, False)]


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
    # a heading or a question ranks first: its section answers (a field line heads no section)
    if (lead is not top or lead.heading) and not _FIELD.match(lead.text):
        section = _following(lead, 2, to_sentence=True)
        rest = sorted(chosen[int(lead is top):], key=lambda c: c is not must)  # ``must`` stays
        chosen = ([lead] if lead is top else []) + section + rest[: params.answer_sentences - 1]
    elif not top.text.endswith(":"):  # a statement goes on in the sentence after it
        rest = sorted((c for c in chosen if c is not top), key=lambda c: c is not must)  # ``must`` stays
        before = _preceding(top)
        after = [s for s in _following(top, 1) if _quotable(s)]  # a heading after it starts something else
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
    said = {s.text: s for s in reversed(chosen)}  # a sentence two chunks repeat is quoted once, as first chosen
    return Answer(tuple((s.text, (s.passage.n,)) for s in chosen if said[s.text] is s), supported=True)


def _listed(ranked: list[Sentence], embedded: bool, params: ExtractiveParams, question: str = "") -> Answer | None:
    """A "which notes ...?" question: the titles of the cited chunks whose best sentence clears the bar (at least
    ``min_sim`` similar, or sharing a word without an embedder), each cited, in rank order; where some titles
    hold the question's words (notes are named for what they are: "Which notes are minutes of an AGM?"), only
    the titles that hold the most of them. None when no title clears the bar."""
    best: dict[int, Sentence] = {}
    for sent in ranked:
        best.setdefault(sent.passage.n, sent)
    keep = [s for s in best.values() if s.passage.title and (s.sim >= params.min_sim if embedded else s.score > 0)]
    asked = stems(content_words(question)) - _NOTE_WORDS
    held = {s.passage.n: len(asked & stems(content_words(s.passage.title))) for s in keep}
    most = max(held.values(), default=0)
    keep = [s for s in keep if held[s.passage.n] == most]
    keep.sort(key=lambda s: s.passage.rank)
    parts = tuple((title, tuple(s.passage.n for s in keep if s.passage.title == title))
                  for title in dict.fromkeys(s.passage.title for s in keep))
    return Answer(parts, supported=True) if parts else None
