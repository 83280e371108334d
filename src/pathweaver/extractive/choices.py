"""Choice questions ("Which came first, A or B?") decided by the dates the passages give each option, and yes/no
questions by a sentence that states what the question asks."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pathweaver.extractive.questions import _BIRTH, _DEATH, _EARLIER, _LATER, _LONGER, _clean_option
from pathweaver.extractive.sentences import content_words, coverage, stems
from pathweaver.extractive.spans import Date, dates_in
from pathweaver.extractive.types import Passage, Sentence, WordDfFn


def _mentions(option: str, passages: list[Passage]) -> list[Passage]:
    """Passages about ``option``: its title first, then texts that name it."""
    low = option.lower()
    exact = [p for p in passages if p.title.lower().strip() == low or p.text.lower().lstrip().startswith(low)]
    named = [p for p in passages if p not in exact and low in p.text.lower()]
    if not exact and not named:
        want = content_words(option)
        named = [p for p in passages if want and len(want & content_words(p.text)) >= max(1, len(want) - 1)]
    return exact + named


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
                  resolved: Mapping[str, str] | None = None) -> tuple[str, list[int]] | None:
    """The option a comparison question asks for, by the dates the passages (or resolved sub-answers) give each;
    None when the passages do not date every option differently (no option is picked by default)."""
    died = bool(_DEATH.search(question))
    born = bool(_BIRTH.search(question))
    longer = bool(_LONGER.search(question))
    later = bool(_LATER.search(question)) and not _EARLIER.search(question)
    if re.search(r"\byounger\b|\byoungest\b", question, re.I):
        later = True
    values: list[tuple[float, ...] | None] = []
    cites: list[list[int]] = []
    res = list((resolved or {}).values())
    for i, opt in enumerate(opts):
        subject = opt
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
        about = _mentions(subject, passages)
        cites.append([about[0].n] if about else [])
    known = [(v, i) for i, v in enumerate(values) if v is not None]
    if len(known) == len(opts) and len({v for v, _ in known}) > 1:
        pick = max(known)[1] if (later or longer) else min(known)[1]
        return opts[pick], cites[pick]
    return None


_NEGATION = re.compile(r"\b(?:not|never|no|none|cannot|neither|nor|without)\b|n['’]t\b", re.I)
_BOTH = re.compile(r"^(?P<verb>are|were|do|did|have|had|can)\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s+both\s+(?P<rest>.+?)\??$",
                   re.I)
_SINGULAR = {"are": "is", "were": "was", "do": "does", "have": "has"}


def _stated(question: str, ranked: list[Sentence], min_sim: float, top: int) -> tuple[bool, Sentence] | None:
    """(the answer is yes, the sentence) when one of the ``top`` best sentences holds every content word of the
    yes/no ``question`` (by stem) and is at least ``min_sim`` similar to it: "no" when that sentence is negated
    and the question is not; None when no sentence states it."""
    asked = stems(content_words(question))
    if not asked:
        return None
    negated_q = bool(_NEGATION.search(question))
    for sent in ranked[:top]:
        if sent.sim >= min_sim and asked <= stems(content_words(sent.text)):
            return (bool(_NEGATION.search(sent.text)) == negated_q), sent
    return None


def yes_no(question: str, ranked: list[Sentence], min_sim: float,
           top: int = 5) -> tuple[str, list[tuple[str, tuple[int, ...]]]] | None:
    """"Yes." or "No." with the sentences that state it, each cited, only when a sentence clearly does
    (``_stated``); "Are A and B both X?" needs a sentence for each. None when the evidence does not decide."""
    q = " ".join(question.split()).rstrip("?")
    m = _BOTH.match(q)
    if m:
        verb = _SINGULAR.get(m.group("verb").lower(), m.group("verb").lower())
        parts = [_stated(f"{verb} {_clean_option(x)} {m.group('rest')}", ranked, min_sim, top)
                 for x in (m.group("a"), m.group("b"))]
        if any(p is None for p in parts):
            return None
        decided = [p for p in parts if p is not None]
        said = list(dict.fromkeys((s.text, (s.passage.n,)) for _, s in decided))
        return ("Yes." if all(y for y, _ in decided) else "No."), said
    found = _stated(q, ranked, min_sim, top)
    if found is None:
        return None
    return ("Yes." if found[0] else "No."), [(found[1].text, (found[1].passage.n,))]


def partly_stated(question: str, ranked: list[Sentence], min_sim: float, share: float = 0.5,
                  word_df: WordDfFn | None = None, n_docs: int = 0) -> Sentence | None:
    """The best sentence when it holds at least ``share`` of the yes/no ``question``'s content-word idf weight (by
    stem; the rare words say what is asked: "email" and "summary" in "Can Logseq email me a daily summary of my
    tasks?", not "Logseq" and "tasks") and is at least ``min_sim`` similar to it: it speaks to the question
    ("Homebrew does not use sudo after installation" for "Does Linuxbrew keep using sudo afterwards?") without
    stating all of it, so it is quoted as the answer, never turned into a "yes" or "no"; None otherwise."""
    if not content_words(question) or not ranked:
        return None
    best = ranked[0]
    return best if best.sim >= min_sim and coverage(question, [best.text], word_df, n_docs) >= share else None
