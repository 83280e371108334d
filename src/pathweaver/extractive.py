"""Extractive answers without a language model: the shortest span (else the sentence) of the cited chunks that
answers a question, with its citation.

The question's expected answer type comes from its cues (who -> a name, when -> a date, where -> a place, how
many -> a number, "Are both ...?" -> yes/no, "Which came first, A or B?" -> one of the options, decided by the
dates the chunks give for each). Sentences are scored by their similarity to the question (the embedder, when
given) and their idf-weighted word overlap with it; the best-scoring sentences are searched for spans of the
expected type that the question does not already name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pathweaver.extract.names import without_disambiguator
from pathweaver.retrieval.context import Context, sentences
from pathweaver.retrieval.types import EncodeFn
from pathweaver.text import STOPWORDS

WordDfFn = Callable[[list[str]], dict[str, int]]
ANSWER_TYPES = ("yesno", "choice", "date", "number", "place", "person", "nationality", "relation", "other")
# "What had Marley been to Scrooge?": the answer is the role a sentence gives one of them ("the business partner")
_RELATION_Q = re.compile(r"^(?:what|who)\s+(?:had|has|was|is|were)\s+.+?\s+(?:been\s+)?to\s+.+$", re.I)
_ROLE = re.compile(r"\b(?:was|were|is|had been)\s+(?P<np>(?:the|his|her|their|a|an)\s+(?:sole\s+)?(?:[a-z\-]+\s+){0,3}?"
                   r"[a-z\-]+)(?=\s+(?:of|to|for|in|at|with)\b|\s*[,.;])")


@dataclass(frozen=True)
class ExtractiveParams:
    """Weights of the sentence and span scores; ours, tuned on the dev splits (docs/benchmarks.md)."""

    max_chunks: int = 5  # chunks searched, best first
    max_sentences: int = 4  # best sentences searched for a typed span
    embed_weight: float = 1.0  # cosine(question, sentence)
    overlap_weight: float = 1.0  # share of the question's idf weight the sentence holds
    rank_decay: float = 0.05  # score lost per chunk rank
    title_bonus: float = 0.0  # a sentence of a chunk whose title the question names (the passage about it)
    cue_bonus: float = 1.0  # times a span's cue score (introduced by "born in", "directed by", ...)
    chain: bool = True  # answer a nested question hop by hop over the same chunks (heuristic plan)
    span_sentence: bool = False  # answer "other" questions with the whole sentence rather than a span


@dataclass(frozen=True)
class Passage:
    text: str
    n: int  # citation number
    title: str = ""
    rank: int = 0


@dataclass(frozen=True)
class Sentence:
    text: str
    passage: Passage
    score: float


ChunksLike = Context | Sequence[Any]
# Chunks retrieved for one hop's rephrased question ("Where was Paul Thomas Anderson born?"), as a chain answer's
# later hops search them.
HopChunks = Callable[[str], ChunksLike]

# -- question analysis ---------------------------------------------------------------------------------------
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
NUMBER_RE = re.compile(
    r"\b(?:about |approximately |over |nearly |some )?\d[\d,]*(?:\.\d+)?(?:\s*(?:million|billion|thousand|hundred))?"
    r"(?:\s+(?:square\s+)?(?:miles?|mi|km|kilometres?|kilometers?|metres?|meters?|feet|ft|years?|people|inhabitants|"
    r"members|seats?|episodes?|books?|copies|acres|hectares|percent|%))?"
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
ROLES = {
    "director": r"direct(?:ed|or)",
    "composer": r"(?:compos(?:ed|er)|music (?:was )?(?:by|composed by)|score (?:by|composed by))",
    "performer": r"(?:perform(?:ed|er)|recorded|sung|by (?:american|english|british|canadian) (?:singer|band|rapper))",
    "producer": r"produc(?:ed|er)",
    "author": r"(?:writ(?:ten|er)|author(?:ed)?)",
    "writer": r"(?:writ(?:ten|er)|author(?:ed)?)",
    "creator": r"creat(?:ed|or)",
}
# Relation cues of the question -> words that introduce the answer in a sentence.
_CUES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:born|birth|birthplace)\b", re.I), r"(?:born|birth)\b[^.;]*?\b(?:in|at)\s+$"),
    (re.compile(r"\b(?:die|died|death)\b", re.I), r"(?:died|death)\b[^.;]*?\b(?:in|at)\s+$"),
    (re.compile(r"\b(?:study|studied|educated|graduate|attend)", re.I), r"(?:stud|educat|graduat|attend)\w*\b[^.;]*?\b(?:at|from|in)\s+$"),
    (re.compile(r"\bwork", re.I), r"(?:work|taught|professor|employ)\w*\b[^.;]*?\b(?:at|for|in)\s+$"),
    (re.compile(r"\bdirect", re.I), r"direct\w*\s+by\s+$"),
    (re.compile(r"\bcompos", re.I), r"(?:compos\w*|music)\s+by\s+$"),
    (re.compile(r"\bperform", re.I), r"(?:perform\w*|recorded|sung|released)\s+by\s+$"),
    (re.compile(r"\bproduc", re.I), r"produc\w*\s+by\s+$"),
    (re.compile(r"\b(?:writ|author)", re.I), r"(?:written|authored)\s+by\s+$"),
    (re.compile(r"\blocated\b", re.I), r"\blocated\b[^.;]*?\b(?:in|at|on|near)\s+$"),
    (re.compile(r"\b(?:spouse|wife|husband|married)\b", re.I), r"marri\w*\s+(?:to\s+)?$|(?:wife|husband|spouse),?\s+$"),
    (re.compile(r"\b(?:father|mother|son|daughter|child|parent)\b", re.I), r"(?:son|daughter|child|father|mother) of\s+$"),
]
_NATIONALITY = _word_list(
    "Afghan Albanian Algerian American Argentine Argentinian Armenian Australian Austrian Azerbaijani Bangladeshi "
    "Belarusian Belgian Bolivian Bosnian Brazilian British Bulgarian Burmese Cambodian Cameroonian Canadian "
    "Chilean Chinese Colombian Croatian Cuban Czech Danish Dutch Ecuadorian Egyptian English Estonian Ethiopian "
    "Filipino Finnish French Georgian German Ghanaian Greek Guatemalan Haitian Hungarian Icelandic Indian "
    "Indonesian Iranian Iraqi Irish Israeli Italian Jamaican Japanese Jordanian Kazakh Kenyan Korean Kurdish "
    "Latvian Lebanese Libyan Lithuanian Malaysian Maltese Mexican Moldovan Mongolian Moroccan Nepalese Nigerian "
    "Norwegian Pakistani Palestinian Peruvian Polish Portuguese Romanian Russian Saudi Scottish Serbian "
    "Singaporean Slovak Slovenian Somali Spanish Sri Swedish Swiss Syrian Taiwanese Thai Tunisian Turkish Ukrainian "
    "Uruguayan Uzbek Venezuelan Vietnamese Welsh Yemeni Zimbabwean Soviet Yugoslav Prussian Ottoman Persian"
)
_COUNTRY_OF = {
    "American": "United States", "British": "United Kingdom", "English": "England", "Scottish": "Scotland",
    "Welsh": "Wales", "Dutch": "Netherlands", "French": "France", "German": "Germany", "Italian": "Italy",
    "Spanish": "Spain", "Chinese": "China", "Japanese": "Japan", "Indian": "India", "Russian": "Russia",
    "Soviet": "Soviet Union", "Canadian": "Canada", "Australian": "Australia", "Mexican": "Mexico",
    "Polish": "Poland", "Swedish": "Sweden", "Danish": "Denmark", "Norwegian": "Norway", "Finnish": "Finland",
    "Irish": "Ireland", "Greek": "Greece", "Turkish": "Turkey", "Iranian": "Iran", "Brazilian": "Brazil",
    "Argentine": "Argentina", "Argentinian": "Argentina", "Egyptian": "Egypt", "Korean": "Korea",
    "Filipino": "Philippines", "Swiss": "Switzerland", "Austrian": "Austria", "Hungarian": "Hungary",
    "Czech": "Czech Republic", "Portuguese": "Portugal", "Belgian": "Belgium", "Ukrainian": "Ukraine",
    "Pakistani": "Pakistan", "Bangladeshi": "Bangladesh", "Thai": "Thailand", "Vietnamese": "Vietnam",
    "Nigerian": "Nigeria", "Romanian": "Romania", "Bulgarian": "Bulgaria", "Serbian": "Serbia",
    "Croatian": "Croatia", "Israeli": "Israel", "Chilean": "Chile", "Colombian": "Colombia", "Peruvian": "Peru",
    "Cuban": "Cuba", "Georgian": "Georgia", "Armenian": "Armenia", "Estonian": "Estonia", "Latvian": "Latvia",
    "Lithuanian": "Lithuania", "Slovak": "Slovakia", "Slovenian": "Slovenia", "Icelandic": "Iceland",
    "Indonesian": "Indonesia", "Malaysian": "Malaysia", "Taiwanese": "Taiwan", "Venezuelan": "Venezuela",
    "Persian": "Iran", "Prussian": "Prussia", "Yugoslav": "Yugoslavia", "Ottoman": "Ottoman Empire",
}
_COUNTRY_ALIASES = {
    "United States": ("United States", "U.S.", "USA", "America"),
    "United Kingdom": ("United Kingdom", "UK", "Britain", "England", "Scotland", "Wales"),
    "England": ("England", "United Kingdom", "Britain"),
}
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


def answer_type(question: str) -> str:
    """The expected answer type of ``question`` (one of ``ANSWER_TYPES``), from its wording."""
    q = " ".join(question.split())
    low = q.lower()
    if options(q):
        return "choice"
    if _YESNO_START.match(low):
        return "yesno"
    if _RELATION_Q.match(q.rstrip("?")):
        return "relation"
    if re.search(r"\bnationality\b", low):
        return "nationality"
    if re.match(r"when\b", low) or re.search(r"(?-i:\bwhen\b)", q) or re.search(
        r"\b(?:what year|which year|what date|what time|in what year|date of|year of|what decade|what century|"
        r"how old)\b", low
    ):  # a capitalised "When" inside the question starts a title ("When The Stars Go Blue")
        return "date"
    if re.search(r"\b(?:how many|how much|how long|how far|how tall|how high|how big|what percentage|"
                 r"what population|population of|how large|seat how many|what number)\b", low):
        return "number"
    if re.search(r"\bnationality\b|\bwhat country is\b.*\bfrom\b", low):
        return "nationality"
    if re.search(r"\b(?:where|what city|which city|what town|which town|what country|which country|what state|"
                 r"which state|what place|place of birth|place of death|birthplace|what region|which region|"
                 r"what county|which county|what island|what river|located in what|in what city)\b", low):
        return "place"
    if re.search(r"^(?:who|whom|whose)\b|\b(?:who|whom)\b", low):
        return "person"
    m = re.search(r"\b(?:what|which)\s+(?:[\w\-']+\s+){0,3}?(?P<n>[a-z]+)\b", low)
    if m and m.group("n") in _PLACE_NOUNS:
        return "place"
    if m and m.group("n") in _PERSON_NOUNS:
        return "person"
    return "other"


def options(question: str) -> list[str]:
    """The two compared items of a choice question ("Which came first, A or B?", "Who was born first out of A
    and B?"), else []."""
    q = " ".join(question.split())
    if not re.match(r"^(?:which|who|what|whose)\b", q, re.I):
        return []
    m = re.search(r"(?:,|:|\bout of\b|\bbetween\b)\s*(?P<rest>.+)$", q)
    if not m:
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


# -- passages and sentences ----------------------------------------------------------------------------------
def passages_of(chunks: ChunksLike, max_chunks: int) -> list[Passage]:
    """Chunk texts with their citation numbers from a ``Context`` (its chunk items), or from a sequence of
    strings (cited 1, 2, ...), ``(text, n)``/``(text, n, title)`` tuples or objects with ``text`` and ``n``."""
    items = [i for i in chunks.items if i.kind == "chunk"] if isinstance(chunks, Context) else list(chunks)
    out: list[Passage] = []
    for rank, item in enumerate(items[:max_chunks]):
        if isinstance(item, str):
            out.append(Passage(item, rank + 1, "", rank))
        elif isinstance(item, tuple):
            out.append(Passage(str(item[0]), int(item[1]), str(item[2]) if len(item) > 2 else "", rank))
        else:
            out.append(Passage(str(item.text), int(getattr(item, "n", rank + 1)), str(getattr(item, "title", "")),
                               rank))
    return out


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; a line break also ends one (a title line stays apart)."""
    out = []
    for line in text.splitlines():
        for a, b in sentences(line):
            s = " ".join(line[a:b].split())
            if len(s) > 3:
                out.append(s)
    return out


def _tokens(text: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(text)]


def content_words(text: str) -> set[str]:
    return {w for w in _tokens(text) if w not in STOPWORDS and w not in _WH and len(w) > 1}


def _weights(words: set[str], word_df: WordDfFn | None, n_docs: int) -> dict[str, float]:
    if word_df is None or n_docs <= 0:
        return dict.fromkeys(words, 1.0)
    df = word_df(sorted(words))
    return {w: math.log(1.0 + (n_docs - min(df.get(w, 0), n_docs) + 0.5) / (df.get(w, 0) + 0.5)) for w in words}


def _title_named(passage: Passage, asked: set[str]) -> bool:
    """The question names the passage's title (or, without one, its short first line)."""
    for title in (passage.title, passage.text.split("\n", 1)[0]):
        words = [w for w in _tokens(title) if w not in STOPWORDS and not w.isdigit()]
        if 0 < len(words) <= 12 and all(w in asked for w in words):
            return True
    return False


def rank_sentences(
    question: str,
    passages: list[Passage],
    encode: EncodeFn | None,
    params: ExtractiveParams,
    word_df: WordDfFn | None = None,
    n_docs: int = 0,
) -> list[Sentence]:
    """Every sentence of ``passages``, best first: embed_weight * cosine + overlap_weight * the share of the
    question's idf weight it holds - rank_decay * chunk rank + title_bonus when the question names the chunk's
    title."""
    cands = [(s, p) for p in passages for s in split_sentences(p.text)]
    if not cands:
        return []
    asked = content_words(question)
    weight = _weights(asked, word_df, n_docs)
    total = sum(weight.values()) or 1.0
    overlap = np.array([sum(weight[w] for w in asked & content_words(s)) / total for s, _ in cands])
    sims = np.zeros(len(cands))
    if encode is not None and params.embed_weight:
        vecs = np.asarray(encode([s for s, _ in cands]))
        qv = np.asarray(encode([question]))[0]
        sims = vecs @ qv
    score = params.embed_weight * sims + params.overlap_weight * overlap
    score -= params.rank_decay * np.array([p.rank for _, p in cands])
    asked_all = set(_tokens(question))
    named = {p.n: _title_named(p, asked_all) for p in passages}
    score += params.title_bonus * np.array([named[p.n] for _, p in cands])
    order = np.argsort(-score, kind="stable")
    return [Sentence(cands[i][0], cands[i][1], float(score[i])) for i in order]


# -- spans ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Date:
    text: str
    start: int
    key: tuple[int, int, int]  # (year, month, day); 0 where unknown


def dates_in(text: str) -> list[Date]:
    """Dates and years of ``text`` in reading order, with a sortable key."""
    out = []
    for m in DATE_RE.finditer(text):
        g = m.groupdict()
        year = int(g["y1"] or g["y2"] or g["y3"] or g["y4"])
        month_word = (g["m1"] or g["m2"] or g["m3"] or "").rstrip(".").lower()
        day = int(g["d1"] or g["d2"] or 0)
        out.append(Date(m.group(0), m.start(), (year, _MONTH_NUM.get(month_word, 0), day)))
    return out


def _in_question(span: str, question_words: set[str]) -> bool:
    words = [w for w in _tokens(span) if w not in STOPWORDS]
    return bool(words) and all(w in question_words for w in words)


def _cap_spans(sentence: str) -> list[tuple[int, str]]:
    out = []
    for m in CAPSPAN_RE.finditer(sentence):
        text = m.group(0).rstrip(".")
        words = text.split()
        while words and (words[0].lower() in _PERSON_STOP or words[0].lower() in STOPWORDS
                         or words[0].lower() in _MONTHS):
            words = words[1:]
        while words and (re.fullmatch(_SMALL, words[-1]) or (len(words) > 1 and words[-1].isdigit())):
            words = words[:-1]
        if not words or (len(words) == 1 and words[0].isdigit()):
            continue
        span = " ".join(words)
        out.append((m.start() + m.group(0).find(words[0]), span))
    return out


def _cue_pattern(question: str) -> list[str]:
    return [cue for trigger, cue in _CUES if trigger.search(question)]


def typed_spans(sentence: str, kind: str, question: str) -> list[tuple[int, str, float]]:
    """Spans of ``sentence`` of the expected ``kind`` that the question does not name: (start, text, bonus)."""
    qwords = set(_tokens(question))
    cues = _cue_pattern(question)
    asked = re.search(r"\b(?:what|which)\s+(?:[\w\-']+\s+){0,5}?(?P<n>[a-z]+)\b(?=\s+(?:is|was|were|are|did|does|do|has|had|"
                      r"can|could|that|which|who|of|in|to|for|with|by|from)\b|\s*\??$)", question.lower())
    head = asked.group("n") if asked and asked.group("n") not in STOPWORDS else ""
    out: list[tuple[int, str, float]] = []
    if kind == "date":
        found = dates_in(sentence)
        died = bool(_DEATH.search(question))
        year_only = bool(_YEAR_Q.search(question))
        for i, d in enumerate(found):
            if _in_question(d.text, qwords):
                continue
            bonus = 0.1 * (d.key[1] > 0) + 0.1 * (d.key[2] > 0)
            before = sentence[max(0, d.start - 40): d.start].lower()
            if died and (re.search(r"(?:died|death|d\.|–|-)\s*(?:on|in)?\s*$", before) or (i > 0 and "(" in before)):
                bonus += 0.3
            if not died and re.search(r"\b(?:born|b\.)\s*(?:on|in)?\s*$|\(\s*$", before):
                bonus += 0.2
            text = str(d.key[0]) if year_only and d.key[1] else d.text  # "What year ...?" asks for the year alone
            out.append((d.start, text, bonus))
        return out
    if kind == "number":
        for m in NUMBER_RE.finditer(sentence):
            text = m.group(0).strip()
            if text and not _in_question(text, qwords) and not re.fullmatch(r"1\d{3}|20\d{2}", text):
                out.append((m.start(), text, 0.1 * (" " in text)))
        return out
    if kind == "nationality":
        for m in re.finditer(r"\b(?:" + "|".join(_NATIONALITY) + r")\b", sentence):
            out.append((m.start(), m.group(0), 0.2))
    for start, span in _cap_spans(sentence):
        if _in_question(span, qwords):
            continue
        low_words = {w.lower() for w in span.split()}
        if kind == "person" and (low_words & _NOT_PERSON or any(ch.isdigit() for ch in span)
                                 or span in _COUNTRY_OF or span in _NATIONALITY):  # "Canadian" names no one
            continue
        before = sentence[max(0, start - 60): start]
        bonus = 0.0
        if any(re.search(c, before, re.I) for c in cues):
            bonus += 1.0
        if kind == "place":
            if span in _COUNTRY_OF or span in _NATIONALITY:
                continue
            if re.search(r"\b(?:in|at|from|near|of)\s+$", before):
                bonus += 0.3
        if kind == "person" and re.search(r"\bby\s+$", before):
            bonus += 0.2
        if head and head in low_words:  # "which war" -> "World War II"
            bonus += 0.5
        out.append((start, span, bonus))
    return out


# -- choice and yes/no ---------------------------------------------------------------------------------------
def _mentions(option: str, passages: list[Passage]) -> list[Passage]:
    """Passages about ``option``: its title first, then texts that name it."""
    low = option.lower()
    exact = [p for p in passages if p.title.lower().strip() == low or p.text.lower().lstrip().startswith(low)]
    named = [p for p in passages if p not in exact and low in p.text.lower()]
    if not exact and not named:
        want = content_words(option)
        named = [p for p in passages if want and len(want & content_words(p.text)) >= max(1, len(want) - 1)]
    return exact + named


def _role(question: str) -> str | None:
    for role in ROLES:
        if re.search(rf"\b{role}s?\b", question, re.I):
            return role
    return None


def _person_of(option: str, role: str, passages: list[Passage]) -> str | None:
    """The person who holds ``role`` for the work ``option``, read from its passage ("directed by NAME")."""
    verb = ROLES[role]
    for p in _mentions(option, passages):
        m = re.search(rf"{verb}\w*\s+(?:and\s+\w+\s+)?by\s+({CAPSPAN_RE.pattern})", p.text) or re.search(
            rf"\b{role}\s+({CAPSPAN_RE.pattern})", p.text
        )
        if m:
            return m.group(1)
    return None


def _life_dates(subject: str, passages: list[Passage]) -> tuple[Date | None, Date | None]:
    """(birth, death) of ``subject``: from "(birth – death)" or "born ... / died ..." in its passage."""
    for p in _mentions(subject, passages):
        text = p.text
        found = dates_in(text[:600])
        if not found:
            continue
        birth = death = None
        for d in found:
            before = text[max(0, d.start - 30): d.start].lower()
            if death is None and re.search(r"(?:died|death|d\.)\s*(?:on|in)?\s*$|[–-]\s*$", before):
                death = d
            elif birth is None and re.search(r"(?:born|b\.)\s*(?:on|in)?\s*$|\(\s*$", before):
                birth = d
        if birth is None and death is None:
            birth = found[0]
            death = found[1] if len(found) > 1 else None
        return birth, death
    return None, None


def _first_date(subject: str, passages: list[Passage]) -> Date | None:
    for p in _mentions(subject, passages):
        found = dates_in(p.text)
        if found:
            return found[0]
    return None


def _date_value(value: str) -> tuple[int, int, int] | None:
    found = dates_in(value)
    return found[0].key if found else None


def choose_option(question: str, opts: list[str], passages: list[Passage],
                  resolved: Mapping[str, str] | None = None) -> tuple[str, list[int]]:
    """The option a comparison question asks for, by the dates the passages (or resolved sub-answers) give each;
    the last option when the passages do not decide."""
    died = bool(_DEATH.search(question))
    born = bool(_BIRTH.search(question))
    longer = bool(_LONGER.search(question))
    later = bool(_LATER.search(question)) and not _EARLIER.search(question)
    if re.search(r"\byounger\b|\byoungest\b", question, re.I):
        later = True
    role = _role(question)
    values: list[tuple[float, ...] | None] = []
    cites: list[list[int]] = []
    res = list((resolved or {}).values())
    for i, opt in enumerate(opts):
        subject = opt
        if role:
            subject = _person_of(opt, role, passages) or opt
        key: tuple[float, ...] | None = None
        if len(res) == len(opts) and _date_value(res[i]):
            key = _date_value(res[i])
        elif longer:
            b, d = _life_dates(subject, passages)
            if b and d:
                key = (float(d.key[0] - b.key[0]) + (d.key[1] - b.key[1]) / 12.0,)
        elif died or born:
            b, d = _life_dates(subject, passages)
            chosen = d if died else b
            key = chosen.key if chosen else None
        else:
            first = _first_date(subject, passages)
            key = first.key if first else None
        values.append(key)
        about = _mentions(subject, passages) or _mentions(opt, passages)
        cites.append([about[0].n] if about else [])
    known = [(v, i) for i, v in enumerate(values) if v is not None]
    if len(known) == len(opts):
        pick = max(known)[1] if (later or longer) else min(known)[1]
        if len({v for v, _ in known}) > 1:
            return opts[pick], cites[pick]
    return opts[-1], cites[-1]


def _countries(text: str) -> set[str]:
    found = set()
    for m in re.finditer(r"\b(?:" + "|".join(_NATIONALITY) + r")\b", text):
        found.add(_COUNTRY_OF.get(m.group(0), m.group(0)))
    for country, aliases in _COUNTRY_ALIASES.items():
        if any(re.search(rf"\b{re.escape(a)}\b", text) for a in aliases):
            found.add(country)
    for country in set(_COUNTRY_OF.values()):
        if re.search(rf"\b{re.escape(country)}\b", text):
            found.add(country)
    return found


def yes_no(question: str, passages: list[Passage]) -> tuple[str, list[int]]:
    """"Are A and B both X?" / "Were A and B of the same nationality?": yes when the passages about each item
    agree (same country or nationality, or both name X), else no; "yes" when an item has no passage."""
    q = " ".join(question.split())
    m = re.match(r"^(?:are|is|was|were|do|does|did)\s+(?:both\s+)?(?:the\s+)?(?:\w+\s+){0,2}?(?P<a>.+?)\s+and\s+"
                 r"(?P<b>.+?)(?:,)?\s+(?P<rest>(?:both|of the same|from the same|in the same|have the same|"
                 r"located|the same|share|same|from|in|of|born|described|used|types?|american|british)\b.*?)\??$",
                 q, re.I)
    if not m:
        return "yes", [passages[0].n] if passages else []
    a, b, rest = _clean_option(m.group("a")), _clean_option(m.group("b")), m.group("rest")
    role = _role(q)
    items = [(_person_of(x, role, passages) or x) if role else x for x in (a, b)]
    about = [_mentions(x, passages) for x in items]
    cites = [ps[0].n for ps in about if ps]
    if not all(about):
        return "yes", cites
    if re.search(r"\bsame\b", rest, re.I) or re.search(r"\bboth\b.*\bfrom\b", rest, re.I):
        first = [_countries(ps[0].text[:400]) for ps in about]
        if all(first):
            return ("yes" if first[0] & first[1] else "no"), cites
        return "yes", cites
    wanted = content_words(re.sub(r"\b(?:both|located|described|used|types?)\b", " ", rest))
    if not wanted:
        return "yes", cites
    have = [len(wanted & content_words(ps[0].text)) / len(wanted) for ps in about]
    return ("yes" if min(have) >= 0.5 else "no"), cites


# -- the answer ---------------------------------------------------------------------------------------------
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
