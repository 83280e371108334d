"""Spans of an expected type in a sentence (dates, numbers, names, places, cued phrases) that the question does
not already name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pathweaver.extractive.questions import (
    _DEATH,
    _MONTH_NUM,
    _MONTHS,
    _NOT_PERSON,
    _PERSON_STOP,
    _SMALL,
    _YEAR_Q,
    CAPSPAN_RE,
    DATE_RE,
    LONG_UNIT,
    NUMBER_RE,
)
from pathweaver.extractive.sentences import _tokens, stem
from pathweaver.text import STOPWORDS


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
        span = re.sub(r"['’]s$", "", " ".join(words))  # "Marley's face": the name is "Marley"
        start = m.start() + m.group(0).find(words[0])
        out.append((start, span))
        joined = re.split(r"\s+(?:and|&)\s+", span)
        if len(joined) > 1:  # "Emperor Lothair I and Ermengarde of Tours": each name alone as well
            for part in joined:
                out.append((start + span.find(part), part))
    return out


def _cued(before: str, question_stems: set[str]) -> float:
    """How well the words just before a span echo the question ("born in" before a place for "Where was X
    born?", "face of" before a name for "Whose face did Scrooge see?"): 1 when the nearest content word before
    it is a question word, 0.5 when the one before that is, else 0. Only lower-case words count: a name the
    question shares is no cue."""
    label = before.rstrip()
    if label.endswith(":"):  # "Storage: 10 GB" (a table row, a "Label: value" line): the label is the cue
        before = label[:-1].lower()
    clause = re.split(r"[()\[\],;:.!?]", before)[-1]  # the cue is in the span's own clause
    words = [w for w in re.findall(r"[^\W\d_]+", clause) if w.islower() and w not in STOPWORDS][-2:]
    if words and stem(words[-1]) in question_stems:
        return 1.0
    return 0.5 if len(words) == 2 and stem(words[0]) in question_stems else 0.0


# a file-system path of two parts or more ("/home/linuxbrew/.linuxbrew", "~/.config/brew"): where a program
# puts or keeps something, which a "where" question asks for as much as a named place
_PATH = re.compile(r"(?<![\w/~.])(?:~|\.{1,2})?(?:/[\w.@+\-]+){2,}/?")
_WHERE = re.compile(r"^\s*where\b", re.I)


def _path_spans(sentence: str, qwords: set[str]) -> list[tuple[int, str, float]]:
    """The paths of ``sentence`` that the question does not write, each as cued as a place after "in"."""
    out = []
    for m in _PATH.finditer(sentence):
        text = m.group(0).rstrip(".")
        if not _in_question(text, qwords):
            out.append((m.start(), text, 1.3))
    return out


def _row_cue(before: str, question_stems: set[str]) -> float:
    """1 when a value follows a label in a row of "Label: value" cells ("Expense: Australia Post (failed attempt);
    AUD: $111.60") and the row's cell before its label shares two of the question's words (names count: a row is
    named by its first cell), else 0."""
    cells = before.split(";")
    if len(cells) < 2 or not cells[-1].rstrip().endswith(":") or len(cells[-1].split()) > 3:
        return 0.0
    words = {stem(w) for w in _tokens(cells[-2]) if w not in STOPWORDS}
    return 1.0 if len(words & question_stems) >= 2 else 0.0


_IN_NAME_AFTER = re.compile(r"\.\w|[@/_]")
_IN_NAME_BEFORE = re.compile(r"(?:\d\.|[@/_~])$")
_LONG_UNITS = re.compile(rf"\b{LONG_UNIT}$", re.I)
_HOW_LONG = re.compile(r"\bhow long\b", re.I)
_MONEY_NOUN = re.compile(r"\b(?:cost|costs|price|prices|budget|fee|fees)\b", re.I)
_MONEY = re.compile(rf"\bhow much\b|{_MONEY_NOUN.pattern}", re.I)
_CURRENCY = re.compile(r"^[$€£¥]|\b(?:euros?|dollars?|cents?)$", re.I)
_HOW_MANY = re.compile(r"\bhow many\s+(?P<n>(?:[\w\-]+\s+){0,2}?[\w\-]+?)(?=\s+(?:does|do|did|is|are|was|were|can|could|"
                       r"will|would|should|has|have|had|of|in|on|for|per|a|an|the)\b|\s*\??$)", re.I)
_WORD_NUMBER = re.compile(r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
                          r"forty|fifty|hundred|a dozen|dozens of|hundreds of|thousands of)\b", re.I)
_COUNTED_AFTER = re.compile(r"^\s*((?:[\w\-]+\s+){0,2}?[\w\-]+)")


# a bound before a number is part of what the sentence states: "no more than five versions" is not "five versions"
_BOUND = re.compile(r"(?:\b(?:no|not)\s+)?\b(?:more|fewer|less)\s+than\s+$|\b(?:at\s+(?:most|least)|up\s+to|under|"
                    r"around|roughly|almost|nearly|about|approximately|over|a\s+(?:maximum|minimum)\s+of)\s+$", re.I)


def _bounded(sentence: str, start: int, text: str) -> tuple[int, str]:
    """The number span ``text`` at ``start`` with the bound the sentence writes just before it, if any."""
    m = _BOUND.search(sentence[max(0, start - 30): start])
    return (start - len(m.group(0)), f"{m.group(0)}{text}") if m else (start, text)


def _number_spans(sentence: str, question: str, qwords: set[str], qstems: set[str]) -> list[tuple[int, str, float]]:
    """Numbers of ``sentence`` for a "how many / how much / how long" question: "How long ...?" asks for an
    amount of time or length, so a bare count ("1.24 million") is no answer to it; "How many N ...?" takes the
    number with its N when the sentence writes one after it ("25 notes"), which is also its cue."""
    counted = _HOW_MANY.search(question)
    nouns = {stem(w) for w in _tokens(counted.group("n"))} if counted else set()
    money = bool(_MONEY_NOUN.search(question)) and not counted and not _HOW_LONG.search(question)
    out: list[tuple[int, str, float]] = []
    for m in NUMBER_RE.finditer(sentence):
        text = m.group(0).strip()
        if not text or _in_question(text, qwords) or re.fullmatch(r"1\d{3}|20\d{2}", text):
            continue
        if _IN_NAME_AFTER.match(sentence, m.end()) or _IN_NAME_BEFORE.search(sentence[: m.start()]):
            continue  # a part of a version or a file name ("Tasks 3.9.0", "foo@1.2.rb") counts nothing
        if _HOW_LONG.search(question) and not _LONG_UNITS.search(text):
            continue
        if money and not _CURRENCY.search(text):  # a cost is money: "4 years" is none
            continue
        bonus = 0.1 * (" " in text) + 0.5 * bool(_MONEY.search(question) and text.startswith(("$", "€", "£", "¥")))
        bonus += 0.5 * bool(_HOW_LONG.search(question))  # it has the unit "how long" asks for
        after = _COUNTED_AFTER.match(sentence[m.end():])
        if nouns and after:
            words = after.group(1).split()
            hit = next((i for i, w in enumerate(words) if stem(w.lower().strip(".,;:")) in nouns), None)
            if hit is not None:  # "25 notes", "9.0 urgency points"
                text = f"{text} {' '.join(words[: hit + 1])}".rstrip(".,;:")
                bonus += 1.0
        cue = max(_cued(sentence[max(0, m.start() - 60): m.start()], qstems), _row_cue(sentence[: m.start()], qstems))
        out.append((*_bounded(sentence, m.start(), text), bonus + cue))
    for m in _WORD_NUMBER.finditer(sentence):  # "no more than five versions": a number word with its N
        after = _COUNTED_AFTER.match(sentence[m.end():])
        words = after.group(1).split() if after else []
        hit = next((i for i, w in enumerate(words) if stem(w.lower().strip(".,;:")) in nouns), None)
        if hit is not None:
            text = f"{m.group(0)} {' '.join(words[: hit + 1])}".rstrip(".,;:")
            out.append((*_bounded(sentence, m.start(), text), 1.0))
    return out


def typed_spans(sentence: str, kind: str, question: str) -> list[tuple[int, str, float]]:
    """Spans of ``sentence`` of the expected ``kind`` that the question does not name: (start, text, bonus)."""
    qwords = set(_tokens(question))
    qstems = {stem(w) for w in qwords if w not in STOPWORDS}
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
            out.append((d.start, text, bonus + _cued(sentence[max(0, d.start - 60): d.start], qstems)))
        return out
    if kind == "number":
        return _number_spans(sentence, question, qwords, qstems)
    if kind == "place" and _WHERE.search(question):
        out += _path_spans(sentence, qwords)
    for start, span in _cap_spans(sentence):
        if _in_question(span, qwords):
            continue
        low_words = {w.lower() for w in span.split()}
        if kind == "person" and (low_words & _NOT_PERSON or any(ch.isdigit() for ch in span)):
            continue
        before = sentence[max(0, start - 60): start]
        bonus = _cued(before, qstems)
        if kind == "place" and re.search(r"\b(?:in|at|from|near|of)\s+$", before):
            bonus += 0.3
        if kind == "person" and re.search(r"\bby\s+$", before):
            bonus += 0.2
        if head and head in low_words:  # "which war" -> "World War II"
            bonus += 0.5
        out.append((start, span, bonus))
    return out
