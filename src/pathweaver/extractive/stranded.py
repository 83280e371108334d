"""A question that ends on its preposition ("What is CLAP inspired by?", "What does the next state depend on?")
asks for that preposition's object: the evidence states it where a sentence writes the same word and
preposition followed by something the question does not name ("Inspired by CLIP.")."""

from __future__ import annotations

import re

from pathweaver.extractive.questions import _PRONOUNS, _WH
from pathweaver.extractive.sentences import _tokens, coverage, stem, units
from pathweaver.extractive.types import Answer, ExtractiveParams, Sentence, WordDfFn
from pathweaver.text import STOPWORDS

_PREPOSITIONS = "by|on|upon|with|from|of|to|for|in|into|about|after|as"
_STRANDED = re.compile(rf"\b(?P<w>[a-z][a-z\-]*[a-z])\s+(?P<p>{_PREPOSITIONS})\s*\?\s*$")
# the object runs to the clause's end; a sentence fragment ("Inspired by CLIP.") is read with the one before it
_OBJECT_END = re.compile(r"[.,;:!?()\[\]]|\s(?:and|but|which|because|so|while|where|when)\s")
_MAX_OBJECT_WORDS = 10
_FRAGMENT_WORDS = 6


def _asked(question: str) -> re.Pattern[str] | None:
    """What a sentence writes to state the object asked for: the word before a question's final preposition (any
    form of it, by stem) and the preposition, then the object; None when that word is a wh-word, a pronoun or a
    stop word (``What is it for?`` asks nothing this can answer)."""
    m = _STRANDED.search(" ".join(question.lower().split()))
    if not m:
        return None
    word = m.group("w")
    if word in STOPWORDS or word in _WH or word in _PRONOUNS:
        return None
    return _stating(word, m.group("p"))


def _stating(word: str, prep: str) -> re.Pattern[str]:
    """Any form of ``word`` (by stem), then ``prep``, then the rest of the sentence as the object (``o``)."""
    return re.compile(rf"\b{re.escape(stem(word))}\w*\s+{prep}\s+(?P<o>.+)", re.I)


def _object(text: str, stating: re.Pattern[str], asked: set[str]) -> str | None:
    """What ``text`` writes after the word and preposition ``stating`` finds, up to its clause's end, when it
    holds a word the question does not; None otherwise."""
    m = stating.search(text)
    if not m:
        return None
    end = _OBJECT_END.search(m.group("o"))
    found = (m.group("o")[: end.start()] if end else m.group("o")).strip()
    words = _tokens(found)
    if not words or len(words) > _MAX_OBJECT_WORDS or not set(words) - asked:
        return None
    return found


def stranded_answer(question: str, ranked: list[Sentence], params: ExtractiveParams,
                    word_df: WordDfFn | None = None, n_docs: int = 0) -> Answer | None:
    """The sentence that states the object a stranded-preposition question asks for, best first, in a chunk on
    the question's topic (holding ``params.min_coverage`` of its idf weight), with the sentence before it when it
    is a fragment; None when no sentence states one."""
    stating = _asked(question)
    if stating is None:
        return None
    qwords = set(_tokens(question))
    for sent in ranked:
        if sent.heading or _object(sent.text, stating, qwords) is None:
            continue
        if coverage(question, [sent.passage.text], word_df, n_docs) < params.min_coverage:
            continue
        parts = [(sent.text, (sent.passage.n,))]
        if len(sent.text.split()) <= _FRAGMENT_WORDS and sent.index > 0:
            before = units(sent.passage.text)[sent.index - 1]
            if not before[1]:
                parts.insert(0, (before[0], (sent.passage.n,)))
        return Answer(tuple(parts), supported=True)
    return None
