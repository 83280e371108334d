"""Choice questions ("Which came first, A or B?") decided by the dates or roles the passages give each option, and
yes/no questions by what the passages say of both."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pathweaver.extractive.questions import (
    _BIRTH,
    _COUNTRY_ALIASES,
    _COUNTRY_OF,
    _DEATH,
    _EARLIER,
    _LATER,
    _LONGER,
    _NATIONALITY,
    CAPSPAN_RE,
    ROLES,
    _clean_option,
)
from pathweaver.extractive.sentences import content_words
from pathweaver.extractive.spans import Date, dates_in
from pathweaver.extractive.types import Passage


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
