"""Leaf text helpers every layer may use: the canonical form of a name, a compact English stopword list, and
whether a question asks for notes themselves."""

from __future__ import annotations

import re

# Possessive "'s" is removed the same way here and in ``extract.entities.words``, so names from every source meet.
POSSESSIVE_RE = re.compile(r"'s\b")
_SPACE_RE = re.compile(r"\s+")
_EDGE_PUNCT_RE = re.compile(r"^[\W_]+|[\W_]+$")

# the nouns that ask for the notes themselves ("Which notes ...?"), not for what the notes are about
NOTE_NOUNS = ("note", "page", "file", "document")
# the notes themselves are asked for: the head noun after "which"/"what" (or "which of my"), or "notes on/about X"
_ASKS_FOR_NOTES = re.compile(
    rf"^(?:which|what)\s+(?:(?:of\s+)?(?:my|the|our|these|those)\s+)?(?:[\w\-]+\s+){{0,2}}?(?:{'|'.join(NOTE_NOUNS)})s\b"
    r"|^which\b.*\b(?:have|has|wrote|write|written|keep|kept|took|take)\s+(?:a\s+|any\s+)?(?:notes?|pages?)\b")

_WORDS = """
    a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each either else etc ever every few for from further get gets got had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's however i i'd i'll i'm
    i've if in into is isn't it it's its itself just let let's like many may me might more most much must
    mustn't my myself neither no nor not now of off often on once one only or other others otherwise ought
    our ours ourselves out over own per perhaps rather same shall shan't she she'd she'll she's should
    shouldn't since so some such than that that's the their theirs them themselves then there there's
    therefore these they they'd they'll they're they've this those though through thus to too toward towards
    under until up upon us very via was wasn't we we'd we'll we're we've were weren't what what's whatever
    when when's whenever where where's whereas wherever whether which while who who's whoever whom whose why
    why's will with within without won't would wouldn't yet you you'd you'll you're you've your yours
    yourself yourselves
    """
# Possessive stripping in extract.entities turns "he's" into "he", which stays a stopword.
STOPWORDS: frozenset[str] = frozenset(_WORDS.split())


def is_stopword(word: str) -> bool:
    """True when ``word`` (already normalised to lower case) is a stopword."""
    return word in STOPWORDS


def normalize(text: str) -> str:
    """Canonical entity name: casefold, unify apostrophes, drop possessive 's, collapse whitespace, strip
    surrounding punctuation (but not the ")" that closes a parenthesis inside the name)."""
    text = _SPACE_RE.sub(" ", POSSESSIVE_RE.sub("", text.casefold().replace("\u2019", "'"))).strip()
    name = _EDGE_PUNCT_RE.sub("", text)
    if text.endswith(")") and name.count("(") > name.count(")"):  # keep a closing parenthesis: "vice (film)"
        name += ")"
    return name


def asks_for_notes(question: str) -> bool:
    """Whether ``question`` asks for the notes themselves ("Which notes ...?", "Which of my notes ...?", "Which X
    do I have notes on?"), not for what they say."""
    return bool(_ASKS_FOR_NOTES.search(" ".join(question.split()).lower()))
