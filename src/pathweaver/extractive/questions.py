"""Question analysis: the expected answer type from the question's cues, and the options of a choice question."""

from __future__ import annotations

import re

from pathweaver.text import NOTE_NOUNS, asks_for_notes

ANSWER_TYPES = ("yesno", "choice", "list", "date", "number", "place", "person", "name", "other")
# The types answered by a short span when the evidence states one; the others by the best sentences.
SPAN_TYPES = ("date", "number", "place", "person", "name")


def _word_list(text: str) -> list[str]:
    return text.split()


# days and times of day: "Christmas Eve" or "Monday Morning" names a when, never a who
_TIMES = set(_word_list("eve day night morning evening afternoon noon midnight monday tuesday wednesday thursday friday "
                        "saturday sunday"))
_MONTHS = _word_list(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_NOT_PERSON = set(_MONTHS) | _TIMES
_MONTH_NUM = {m: (i % 12) + 1 for i, m in enumerate(_MONTHS[:12])} | {
    m: n for m, n in zip(_MONTHS[12:], (1, 2, 3, 4, 6, 7, 8, 9, 9, 10, 11, 12), strict=True)
}
_MONTH_RE = r"(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?"
DATE_RE = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})\s+(?P<m1>{_MONTH_RE})\s*,?\s+(?P<y1>\d{{3,4}})"
    rf"|(?P<m2>{_MONTH_RE})\s+(?P<d2>\d{{1,2}}),?\s+(?P<y2>\d{{3,4}})"
    rf"|(?P<m3>{_MONTH_RE})\s+(?P<y3>\d{{4}})"
    rf"|(?P<y4>1\d{{3}}|20\d{{2}})(?:s\b)?)\b"
)
# the units of time, and those a length is given in (a distance, a text, a series): what "how long" is answered in
TIME_UNIT = r"(?:ms|seconds?|minutes?|hours?|days?|weeks?|fortnights?|months?|quarters?|years?)"
LONG_UNIT = (rf"(?:{TIME_UNIT}|miles?|mi|km|kilometres?|kilometers?|metres?|meters?|feet|ft|characters?|words?|lines?|"
             r"episodes?|pages?)")
NUMBER_RE = re.compile(
    r"(?:\b(?:about |approximately |over |nearly |some )|(?<![\w$€£¥])(?=[$€£¥]))?[$€£¥]?\b\d[\d,]*(?:\.\d+)?(?:\s*(?:million|billion|thousand|hundred))?"
    rf"(?:\s*(?:square\s+)?(?:{LONG_UNIT}|people|inhabitants|members|seats?|books?|copies|acres|hectares|percent|%|"
    r"[KMGT]i?B|bytes|times|users?|files?|items?|euros?|dollars?|cents?)(?!\w))?"
)
_SMALL = r"(?:of|the|de|del|della|des|du|la|le|van|von|der|den|da|di|y|al|bin|ibn|and|&)"
_NAMEWORD = r"(?:[A-Z][\w'’\-.]*[\w.]|[A-Z]|\d+(?:st|nd|rd|th)?)"
CAPSPAN_RE = re.compile(rf"{_NAMEWORD}(?:\s+(?:{_SMALL}\s+){{0,2}}{_NAMEWORD})*")
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)

_YESNO_START = re.compile(r"^(?:are|is|was|were|do|does|did|can|could|has|have|had|will|would|should)\b", re.I)
_CHOICE = re.compile(
    r"(?:,|:|\bbetween\b|\bout of\b|\bfirst\b|\blater\b|\bolder\b|\byounger\b)\s*(?P<a>[^,:?]+?)\s*,?\s+(?:or|and)\s+"
    r"(?P<b>[^,:?]+?)\s*(?:,|\?|$)"
)
_YEAR_Q = re.compile(r"\b(?:what|which)\s+year\b", re.I)
_EARLIER = re.compile(r"\b(?:first|earlier|earliest|older|oldest|before|elder|sooner)\b", re.I)
_LATER = re.compile(r"\b(?:later|last|latest|younger|youngest|after|recent|recently|newer|newest)\b", re.I)
_LONGER = re.compile(r"\blived longer|lived the longest|longer life|died (?:at|when) (?:an )?older\b", re.I)
_DEATH = re.compile(r"\b(?:die|died|death|dies|pass(?:ed)? away)\b", re.I)
_BIRTH = re.compile(r"\b(?:born|birth|older|younger|oldest|youngest|age)\b", re.I)
_PLACE_NOUNS = {"city", "town", "country", "state", "county", "region", "village", "province", "island", "continent",
                "neighborhood", "neighbourhood", "location", "borough", "district", "capital", "nation"}
_PERSON_NOUNS = {"person", "man", "woman", "actor", "actress", "writer", "screenwriter", "director", "singer", "author",
                 "player", "driver", "pilot", "president", "politician", "musician", "composer", "producer",
                 "artist", "king", "queen", "emperor", "leader", "poet", "novelist", "footballer", "coach",
                 "manager", "physicist", "scientist", "philosopher", "painter", "rapper", "comedian", "journalist"}
_PERSON_STOP = {
    "the", "he", "she", "it", "they", "his", "her", "in", "on", "at", "a", "an", "this", "that", "born", "after",
    "before", "during", "its", "their", "there", "although", "however", "when", "while", "as", "by", "for", "from",
}
_WH = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "did", "does", "do", "is", "was",
       "are", "were", "name"}


# the noun that asks for notes, with the verb that says what a note does with its topic ("notes cover X"): neither
# is what the notes must hold
NOTE_WORD_RE = re.compile(rf"\b(?:{'|'.join(NOTE_NOUNS)})s?\b(?:\s+(?:cover|explain|mention|discuss|describe|"
                          r"document|deal with|talk about|go over)s?\b)?", re.I)
# "when" asks for a time where it opens the question ("When was X born?") or ends it ("... ended when?"); inside a
# question it joins a clause ("What matters when the plugin ranks tasks?"), and an opening "When X happens, what
# ...?" is a clause too
_WHEN = re.compile(r"^when\b(?![^?]*,\s*(?:what|which|who|how|why|where|do|does|should|can)\b)|\bwhen\s*\??$")


# a question that asks for an amount: "how many / how much", or "what was the (total) cost / average / ..."
AMOUNT = re.compile(r"\bhow (?:many|much)\b|\bwhat (?:is|was|are|were) (?:the|my|our|your|its|their) (?:[\w\-]+ ){0,2}?"
                    r"(?:total|average|cost|price|budget|fee|amount)\b", re.I)


# "What GPU did I use ...?", "Which CI service do we rely on ...?": the noun phrase between the wh-word opening a
# sentence and its auxiliary is the kind of thing asked for (its last word the head noun)
_ASKED_HEAD = re.compile(r"(?:^|[.!?]\s+)(?:what|which)\s+(?P<np>(?:[a-z][\w\-]*\s+){0,3}?[a-z][\w\-]*)\s+"
                         r"(?:did|do|does|is|was|are|were|should|can|could|will|would|has|have|had)\b")
_PRONOUNS = {"i", "you", "he", "she", "it", "we", "they", "this", "that", "these", "those", "there"}
_GENERIC_HEADS = {"kind", "kinds", "type", "types", "sort", "sorts", "thing", "things", "one", "ones", "part", "way"}


def asked_head(question: str) -> str | None:
    """The head noun of a "what/which X did/is/... ?" question ("GPU" in "What GPU did I use ...?"), lower-case;
    None when the question asks no such X or only a generic one ("what kind", "which one")."""
    m = _ASKED_HEAD.search(" ".join(question.split()).lower())
    if not m:
        return None
    words = m.group("np").split()
    if any(w in _WH or w in _PRONOUNS for w in words):  # "What do I do ...?", "What did you ...?"
        return None
    return None if words[-1] in _GENERIC_HEADS else words[-1]


# a statement that ends before a capital: the context a user writes before asking ("I turned on the API. Which ...")
_STATEMENT_END = re.compile(r"(?<=[a-z0-9)\"'”’])[.!]\s+(?=[A-Z])")


def split_lead(question: str) -> tuple[str, str]:
    """(the statements before the question, the question): "I can't find whiteboards in my sidebar." and
    "Where do I switch them on?"; ("", question) when it opens by asking."""
    cut = 0
    for m in _STATEMENT_END.finditer(question):
        if "?" in question[: m.start()]:
            break
        cut = m.end()
    return question[:cut].strip(), question[cut:].strip()


# a question that opens by asking how to do something ("How do I ...", "How can we ...") asks for a way, whatever
# wh-clause follows ("... how many times it was referenced"); "Where do I open X?" asks for the steps, not a place
HOW_TO = re.compile(r"^how\s+(?:can|could|do|does|should|would|will|to|might|may)\b|"
                    r"^where\s+(?:can|could|do|should|would|will|might|may)\s+(?:i|we|you)\b")


_AUX = r"(?:can|could|do|did|does|are|were|have|had|will|would|should|might|may|must)"
_PLURAL = r"[a-z][\w\-]*[^\Wsu]s"  # "formats", "tools"; not "process", "status", "analysis"
# "Which formats can I export to?", "Which plugins ...?", "Which sync services do ...?": a plural head noun first,
# or second before an auxiliary, asks for several things (a noun then a verb, "Which plugin lets ...", does not)
_WHICH_PLURAL = re.compile(rf"^which\s+(?:{_PLURAL}\b(?<!\bwas\b)(?<!\bhas\b)(?<!\bdoes\b)(?<!\bis\b)"
                           rf"|[a-z][\w\-]*\s+{_PLURAL}\s+{_AUX}\b)")


def asks_several(question: str) -> bool:
    """Whether a "which X ...?" question asks for several Xs (its head noun is plural): one name cannot answer it."""
    return bool(_WHICH_PLURAL.match(" ".join(question.split()).lower()))


def answer_type(question: str) -> str:
    """The expected answer type of ``question`` (one of ``ANSWER_TYPES``), from its wh-word and head noun."""
    q = " ".join(question.split())
    low = q.lower()
    if options(q):
        return "choice"
    if _YESNO_START.match(low):
        return "yesno"
    if asks_for_notes(low):
        return "list"
    if _WHEN.search(low) or re.search(
        r"\b(?:what year|which year|what date|in what year|date of|year of|what decade|what century|"
        r"how far back|how long ago|since when)\b", low
    ):  # a capitalised "When" inside the question starts a title ("When The Stars Go Blue"); "how far back" and
        # "how long ago" ask for a point in time, not a distance or a duration
        return "date"
    if HOW_TO.match(low):  # "How can I tell how many times ...?" asks how to find it out, not for a number
        return "other"
    if AMOUNT.search(low) or re.search(r"\b(?:how long|how far|how tall|how high|how big|how large|how old|"
                                       r"what percentage|what number)\b", low):
        return "number"
    if re.search(r"^where\b|\b(?:what|which|in what) (?:city|town|country|state|region|county|island|place)\b|"
                 r"\bplace of (?:birth|death)\b|\bbirthplace\b", low):
        return "place"
    if re.search(r"^(?:who|whom|whose)\b|\b(?:who|whom)\b", low):
        return "person"
    # the head noun follows the copula and article ("What is the city ..."), which are skipped
    m = re.search(r"\b(?:what|which)\s+(?:(?:is|was|are|were|the|a|an)\s+)*(?P<n>[a-z]+)\b", low)
    if m and m.group("n") in _PLACE_NOUNS:
        return "place"
    if m and m.group("n") in _PERSON_NOUNS:
        return "person"
    if re.search(r"\bwhat (?:is|was|are|were) (?:the )?names? of\b|\bwhat (?:is|was|are|were) .+ called\b", low) or (
            re.match(r"^which\s+[a-z]+\b", low) and not asks_several(low)):
        return "name"
    return "other"


# "the difference between A and B" asks how two things relate, not which of them is something
_RELATION = re.compile(r"\b(?:differen(?:ce|ces|t)|similarit(?:y|ies)|relationship|relation|connection|distinction|"
                       r"link|gap|overlap|trade-?offs?)\s*(?:,|:|\bbetween)?\s*$", re.I)


def options(question: str) -> list[str]:
    """The two compared items of a choice question ("Which came first, A or B?", "Who was born first out of A
    and B?"), else []."""
    q = " ".join(question.split())
    if not re.match(r"^(?:which|who|what|whose)\b", q, re.I):
        return []
    m = re.search(r"(?:,|:|\bout of\b|\bbetween\b)\s*(?P<rest>.+)$", q)
    if not m or _RELATION.search(q[: m.start()]):
        return []
    rest = m.group("rest").rstrip(" ?")
    joiner = " and " if re.search(r"\b(?:out of|between)\s*$", q[: m.start("rest")]) else " or "
    if joiner not in rest:
        return []
    a, b = rest.rsplit(joiner, 1)
    b = re.split(r",\s+(?=[a-z])", b)[0]  # "Screaming Trees, had more members"
    a, b = _clean_option(a), _clean_option(b)
    if a and b and len(a.split()) <= 14 and len(b.split()) <= 14:
        return [a, b]
    return []


def _clean_option(text: str) -> str:
    text = re.sub(r"^(?:out of|between|the|a|an)\s+", "", text.strip(" ,.;:?\"'“”"), flags=re.I)
    return text.strip()
