"""Rule-based decomposition, the no-LLM stand-in for PankRAG's planner (§2.2).

Two shapes are recognised:
- parallel: comparisons ("Which film came out first, X or Y?", "Who is older, A or B?"), "Are A and B both ...?"
  and "Were A and B of the same nationality?" become one node per item plus a final node that depends on all of
  them;
- progress: nested descriptions ("the spouse of the director of film X", "the country where Y was born",
  "X's manufacturer") are peeled innermost first into a chain whose later nodes reference earlier answers as
  "#1", "#2" (MuSiQue's decomposition format).
Anything else is a single node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pathweaver.extractive.questions import split_lead
from pathweaver.planner.decompose import Plan, single_plan, validate_plan


@dataclass(frozen=True)
class HeuristicParams:
    max_hops: int = 4  # longest progress chain produced
    max_np_words: int = 4  # words in a relational noun ("the headquarters city of")


# A named thing: a placeholder, a quoted title, or capitalised words (with small joining words inside).
_SMALL = r"(?:of|the|in|de|del|des|la|le|and|for|a|at|on|to|von|van|du|&)"
_CAP = r"(?:[A-Z0-9][\w\-'.&’]*)"
ENTITY = rf"(?:#\d+|\"[^\"]+\"|“[^”]+”|{_CAP}(?:\s+(?:{_SMALL}\s+)*{_CAP})*)"
_PERSON = {
    "actor",
    "actress",
    "author",
    "director",
    "producer",
    "performer",
    "singer",
    "composer",
    "creator",
    "founder",
    "spouse",
    "wife",
    "husband",
    "father",
    "mother",
    "child",
    "son",
    "daughter",
    "sibling",
    "brother",
    "sister",
    "president",
    "leader",
    "writer",
    "star",
    "owner",
    "person",
    "player",
    "artist",
    "designer",
    "inventor",
    "manufacturer",
    "publisher",
    "member",
    "king",
    "queen",
    "ruler",
    "mayor",
}
_GENERIC = {
    "name",
    "names",
    "ranking",
    "rank",
    "number",
    "title",
    "type",
    "kind",
    "version",
    "total",
}  # not hops
_PARTICIPLE = (r"(?:located|based|situated|found|headquartered|born|founded|built|formed|created|made|released|"
               r"produced|directed|written|published|performed|recorded|played|held|named|owned)")
_IRREGULAR = (r"(?:was|is|has|had|fought|won|wrote|made|took|built|sang|gave|led|ran|beat|lost|left|met|saw|began|"
              r"became|bought|sold|chose|drove|flew|held|kept|knew|paid|rode|shot|spoke|stole|struck|taught|threw)")
_BRIDGE_NOUNS = _PERSON | {"body",
    "band", "group", "team", "company", "organization", "organisation", "city", "country", "state", "town",
    "county", "region", "location", "place", "league", "water", "river", "university", "school", "album",
    "film", "movie", "song", "book", "novel", "label", "party", "empire", "army", "station", "network",
    "capital", "birthplace", "people", "character", "man", "woman", "politician", "physicist", "scientist",
}
_RELATIVE = r"(?:where|in which|whose|who|that|which|to whom|under whom|by whom)"
# "What's", "It's", "Let's": after these words "'s" is "is", "has" or "us", never a possessive
_CONTRACTED = {"what", "who", "where", "when", "why", "how", "that", "this", "it", "there", "here", "let", "he",
               "she", "everyone", "someone", "nobody", "i"}
_MODAL = {"will", "would", "shall", "should", "can", "could", "may", "might", "be", "been"}  # "Who will be #1?"
_PREPOSITION = {"about", "above", "across", "after", "against", "along", "among", "around", "before", "behind",
                "below", "beside", "between", "beyond", "during", "except", "inside", "into", "near", "over", "per",
                "since", "than", "through", "toward", "towards", "under", "until", "up", "upon", "via", "within",
                "without"}
_STOP = (
    r"(?:where|when|who|whom|whose|which|that|the|a|an|in|of|by|to|from|with|for|on|at|as|and|or|is|was|were|"
    r"are|be|been|being|has|have|had|did|does|do|located|born|found)"
)
_NOUN = rf"(?:(?!{_STOP}\b)[a-z][\w\-]*)"
_COMPARATIVE = re.compile(
    r"^(?P<head>(?:which|who|what|whose)\b.*?\b(?:first|earlier|later|last|older|younger|oldest|youngest|"
    r"more|less|longer|shorter|larger|smaller|bigger|higher|lower|faster|newer|recently|most|fewest|"
    r"\w+er))\s*,?\s*(?P<a>.+?)\s*,?\s+or\s+(?P<b>.+?)\s*\??$",
    re.I,
)
MAX_ITEM_WORDS = 12  # longest item of a comparison
_SAME = re.compile(
    r"^(?P<verb>are|were|do|did|is|was)\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s+(?P<rest>(?-i:(?:[a-z][\w\-]*\s+){0,3}?)"
    r"(?:of|from|in|at|have|share|had)?\s*the\s+same\s+(?P<n>[a-z][\w\-]*(?:\s+[a-z][\w\-]*)?).*?)\s*\??$",
    re.I,
)
_BOTH = re.compile(
    r"^(?P<verb>are|were|do|did|is|was)\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s+both\s+(?P<rest>.+?)\s*\??$", re.I
)


def _wh(noun: str) -> str:
    return "Who" if noun.split()[-1].lower() in _PERSON else "What"


def _parallel(items: list[str], sub_questions: list[str], final: str) -> Plan:
    nodes = [
        {"id": str(i + 1), "question": q, "depends_on": [], "relation": "parallel"}
        for i, q in enumerate(sub_questions)
    ]
    deps = [str(i + 1) for i in range(len(items))]
    nodes.append({"id": str(len(items) + 1), "question": final, "depends_on": deps, "relation": "parallel"})
    return validate_plan(nodes, source="heuristic")


def _short_items(*items: str) -> bool:
    """Compared items longer than ``MAX_ITEM_WORDS`` words are a mis-split, not names."""
    return all(len(item.split()) <= MAX_ITEM_WORDS for item in items)


def _comparison(question: str) -> Plan | None:
    m = _COMPARATIVE.match(question.strip())
    if m:
        head, a, b = m.group("head"), m.group("a").strip(" ,"), m.group("b").strip(" ,?")
        if _short_items(a, b):
            return _parallel([a, b], [f"{head}: {a}?", f"{head}: {b}?"], question)
    m = _SAME.match(question.strip())  # "Were A and B of the same nationality?": the attribute of each
    if m and _short_items(m.group("a"), m.group("b")):
        a, b, noun = m.group("a"), m.group("b"), m.group("n")
        return _parallel([a, b], [f"{_wh(noun)} is the {noun} of {a}?", f"{_wh(noun)} is the {noun} of {b}?"],
                         question)
    m = _BOTH.match(question.strip())
    if m:
        verb, rest = m.group("verb").lower(), m.group("rest")
        singular = {"are": "Is", "were": "Was", "do": "Does", "did": "Did"}.get(verb, verb.capitalize())
        a, b = m.group("a"), m.group("b")
        return _parallel([a, b], [f"{singular} {a} {rest}?", f"{singular} {b} {rest}?"], question)
    return None


def _modified(text: str, end: int, verb_last: bool) -> bool:
    """Whether the named thing ending at ``end`` modifies the noun after it ("the Lisbon trip", "the Obsidian
    vault"): then the thing asked about is that noun, not the name. In a "did/does ... ?" question the word after
    the subject is its verb ("What did the actress in X win?"); so is a participle or past verb ("the company of X
    based"), and a preposition starts a phrase of its own. The noun phrase ends there, at a stop word or
    punctuation: a run of lower-case words goes on with the name (a title: "Sous les pieds des femmes")."""
    m = re.match(rf"\s+({_NOUN})(?:\s+{_NOUN})?\s*(?:[?,.;:!]|$|\s(?:{_STOP}|{'|'.join(_PREPOSITION)})\b)", text[end:])
    if not m or verb_last:
        return False
    word = m.group(1).lower()
    return not (re.fullmatch(rf"{_PARTICIPLE}|{_IRREGULAR}|\w+ed", word) or word in _MODAL or word in _PREPOSITION)


def _reductions(text: str, max_np_words: int) -> list[tuple[int, int, str]]:
    """Candidate innermost descriptions in ``text``: (start, end, sub-question)."""
    noun = rf"(?:{_NOUN}(?:\s+{_NOUN}){{0,{max_np_words - 1}}})"
    of_entity = re.compile(rf"the\s+(?P<r>{noun})\s+of\s+(?P<e>(?:the\s+)?(?:{_NOUN}\s+)?{ENTITY})")  # "of (film) Jaws"
    prep_entity = re.compile(  # "the actress in My Fair Lady", "the body of water by #1"
        rf"the\s+(?P<n>{noun})\s+(?P<p>in|from|behind|by|near|on|at|for|with)\s+(?P<e>(?:the\s+)?(?:(?:\d+|{_NOUN})\s+){{0,2}}{ENTITY})"
    )
    participle = re.compile(  # "the city located within the county ...", "the film directed by X"
        rf"the\s+(?P<n>{noun})\s+(?P<v>{_PARTICIPLE})\s+(?P<c>(?:in|within|at|on|by|near|from|into|for)\s+[^,?]+)"
    )
    zero_relative = re.compile(  # "the country the U.S. fought during the American Revolution"
        rf"the\s+(?P<n>{noun})\s+(?P<c>(?:the\s+)?{ENTITY}\s+(?:[a-z]+ed|[a-z]+s|{_IRREGULAR})\b[^,?]*)"
    )
    entity_noun = re.compile(rf"the\s+(?P<e>{ENTITY})\s+(?P<r>{_NOUN})\b")
    relative = re.compile(rf"the\s+(?P<n>{noun})\s+(?P<rel>{_RELATIVE})\s+(?P<c>[^,?]+)")
    out: list[tuple[int, int, str]] = []
    verb_last = re.match(r"^\w+\s+(?:did|does|do)\b", text, re.I)  # "Where did X's father study?": study is the verb
    for m in re.finditer(rf"(?P<e>{ENTITY})(?P<s>'s|’s|')\s+(?P<r>{_NOUN}(?:\s+{_NOUN})?)\b", text):  # "E's R"
        if m.group("e").lower() in _CONTRACTED or (m.group("s") == "'" and not m.group("e").endswith("s")):
            continue  # a contraction ("What's"), or a closing quote ("'Notes from May 4' still"), not "the Smiths'"
        r, end = m.group("r"), m.end()
        verb = verb_last and re.fullmatch(r"\s*\??\s*", text[end:])  # "Where did X's father study?"
        if " " in r and (verb or re.fullmatch(rf"{_PARTICIPLE}|\w+ed", r.split()[1])):  # "X's album recorded"
            r = r.split()[0]
            end = m.start("r") + len(r)
        out.append((m.start(), end, f"{_wh(r)} is the {r} of {m.group('e')}?"))
    for the in re.finditer(r"\bthe\b", text):  # every "the", so overlapping descriptions are all seen
        pos = the.start()
        m = of_entity.match(text, pos)  # "the R of E", E a named thing or an earlier answer
        if m and m.group("r").split()[-1].lower() not in _GENERIC and not _modified(text, m.end(), bool(verb_last)):
            out.append((pos, m.end(), f"{_wh(m.group('r'))} is the {m.group('r')} of {m.group('e')}?"))
        m = entity_noun.match(text, pos)  # "the Lovin' All Night performer"
        if m and m.group("r").lower() in _PERSON:
            out.append((pos, m.end(), f"Who is the {m.group('r')} of {m.group('e')}?"))
        m = prep_entity.match(text, pos)
        if m and m.group("n").split()[-1].lower() in _BRIDGE_NOUNS and not _modified(text, m.end(), bool(verb_last)):
            q = f"{_wh(m.group('n'))} is the {m.group('n')} {m.group('p')} {m.group('e')}?"
            out.append((pos, m.end(), q))
        m = participle.match(text, pos)
        if m and len(m.group("c").split()) >= 2:
            clause = m.group("c").strip()
            q = f"{_wh(m.group('n'))} is the {m.group('n')} {m.group('v')} {clause}?"
            out.append((pos, pos + len(m.group(0).rstrip()), q))
        m = zero_relative.match(text, pos)
        if m and m.group("n").split()[-1].lower() in _BRIDGE_NOUNS:
            q = f"{_wh(m.group('n'))} is the {m.group('n')} that {m.group('c').strip()}?"
            out.append((pos, pos + len(m.group(0).rstrip()), q))
        m = relative.match(
            text, pos
        )  # "the N where/who/that <clause naming an entity>", up to a comma or the end
        if m:
            clause = m.group("c").strip()
            noun = m.group("n").split()[-1]
            named = re.search(ENTITY, clause) or noun in _PERSON or (noun in _BRIDGE_NOUNS and len(clause.split()) >= 3)
            if named and len(clause.split()) >= 2:
                q = f"{_wh(m.group('n'))} is the {m.group('n')} {m.group('rel')} {clause}?"
                out.append((pos, pos + len(m.group(0).rstrip()), q))
    return out


def _trivial(rest: str) -> bool:
    """The question left after a reduction only restates the placeholder ("What is #1?"), maybe with an
    apposition that describes it further ("Who was #1, dead seven years?")."""
    rest = re.sub(r"(#\d+)\s*,[^#]*$", r"\1", rest)
    words = re.sub(r"#\d+|[?.,]", " ", rest).lower().split()
    return (
        len([w for w in words if w not in {"what", "who", "which", "is", "was", "are", "were", "the", "name", "of",
                                           "called", *_MODAL}]) == 0
    )


def _chain(question: str, params: HeuristicParams) -> Plan | None:
    text = question.strip()
    subs: list[str] = []
    while len(subs) < params.max_hops - 1:
        cands = [c for c in _reductions(text, params.max_np_words) if not _spans_whole(text, c)]
        if not cands:
            break
        start, end, sub_q = max(cands, key=lambda c: (c[0], -c[1]))  # innermost: rightmost start, shortest
        subs.append(sub_q)
        text = f"{text[:start]}#{len(subs)}{text[end:]}"
        if _trivial(text):
            subs.pop()
            break
    if not subs:
        return None
    nodes = [{"id": "1", "question": subs[0], "depends_on": [], "relation": "parallel"}]
    for i, q in enumerate([*subs[1:], text], start=2):
        refs = sorted({r for r in re.findall(r"#(\d+)", q) if int(r) < i}, key=int)
        nodes.append(
            {"id": str(i), "question": q, "depends_on": refs, "relation": "progress" if refs else "parallel"}
        )
    return validate_plan(nodes, source="heuristic")


def _spans_whole(text: str, cand: tuple[int, int, str]) -> bool:
    """A reduction covering the whole question (after its wh-word) would leave nothing to ask."""
    return _trivial(text[: cand[0]] + " " + text[cand[1] :])


_ASKS = r"(?:who|whom|what|when|where|which|why|how|is|are|was|were|do|does|did|can|could|should|will|would|has|have)"
# the first part may open with a phrase ("With custom statuses, which ...?", "Since which release ...?")
_CONJUNCTION = re.compile(rf"^(?P<a>(?:[^,?]{{1,60}},\s+|(?:since|in|with|for|from|by|on|at|after|before|until|during)\s+)?"
                          rf"{_ASKS}\b.+?),\s+and\s+(?P<b>{_ASKS}\b.+?)\s*\??$", re.I)
_PRONOUN = re.compile(r"\b(?:he|she|they|him|her|them|it)\b", re.I)
# "Whose sister played Susie?" (the noun is the subject); not "Whose face did he see?", where it is the object
_WHOSE = re.compile(r"^whose\s+(?P<n>[a-z][\w\-]*)\s+(?P<rest>(?:was|is|were|are|played|has|had|won|wrote|"
                    r"directed|married|founded|[a-z]+ed)\b.+?)\s*\??$", re.I)


# a clause that asks by itself: an auxiliary first ("Can I ...") or a wh-word and an auxiliary ("where are ..."),
# not a subordinate clause ("When a maintainer has to pick ..., what ...?")
_AUX = r"(?:is|are|was|were|do|does|did|can|could|should|will|would|has|have|may|might)"
_ASKING = re.compile(rf"^(?:{_AUX}|(?:who|whom|what|when|where|which|why|how)(?:['’]s|\s+(?:{_AUX}|many|much|long|"
                     rf"often)))\b", re.I)
_ASKING_FIRST = re.compile(r"^(?P<x>[^,?]{1,80}),\s+(?P<y>\S.+)$")


def _parts(question: str) -> tuple[str, list[str]] | None:
    """The statements before a question that asks two or three things, and its parts ("A, B, and C?" asks three
    when A and B each ask by themselves); None when it asks one thing."""
    lead, asked = split_lead(question.strip())
    m = _CONJUNCTION.match(asked)
    if not m:
        return None
    a, b = m.group("a").strip(" ,"), m.group("b").strip(" ,?")
    first = _ASKING_FIRST.match(a)
    asks = first and _ASKING.match(first.group("x")) and _ASKING.match(first.group("y"))
    heads = [first.group("x"), first.group("y")] if asks else [a]
    return lead, [h.strip(" ,") + "?" for h in heads] + [b + "?"]


def is_conjunction(question: str) -> bool:
    """Whether ``question`` asks two or three things ("Who warned X, and what had he been to X?"): its answer is
    every part's answer, not only the last node's."""
    return _parts(question) is not None


def _conjunction(question: str) -> Plan | None:
    """"Who warned X, and what had he been to X?": one node per part; a pronoun of the last part that stands
    for the first part's answer becomes "#1" (a progress dependency), else the parts are parallel. Statements
    written before the question ("I can't find whiteboards in my sidebar.") stay with its first part."""
    found = _parts(question)
    if found is None:
        return None
    lead, parts = found
    a, b = parts[0], parts[-1]
    first_is_who = len(parts) == 2 and a.lower().startswith(("who", "whom"))
    if first_is_who and _PRONOUN.search(b):
        b = _PRONOUN.sub("#1", b, count=1)
        b = b[0].upper() + b[1:]
        return validate_plan([{"id": "1", "question": f"{lead} {a}".strip(), "depends_on": []},
                              {"id": "2", "question": b, "depends_on": ["1"], "relation": "progress"}],
                             source="heuristic")
    named = [e.group(0) for e in re.finditer(rf"(?<![\w.]){ENTITY}", a[1:])
             if not e.group(0).startswith("#") and e.group(0).lower() not in _CONTRACTED]
    if named and _PRONOUN.search(b):  # "When was Marie Curie born, and where did she die?": she = Marie Curie
        b = _PRONOUN.sub(named[0], b, count=1)
    parts = [f"{lead} {a}".strip(), *parts[1:-1], b]
    return validate_plan([{"id": str(i + 1), "question": p[0].upper() + p[1:], "depends_on": []}
                          for i, p in enumerate(parts)], source="heuristic")


def _whose(question: str, params: HeuristicParams) -> Plan | None:
    """"Whose sister played Susie in X?": who played Susie in X (itself maybe nested), then whose sister is #n."""
    m = _WHOSE.match(question.strip())
    if not m:
        return None
    inner = f"Who {m.group('rest')}?"
    plan = _chain(inner, params) or single_plan(inner)
    nodes = [{"id": n.id, "question": n.question, "depends_on": n.depends_on, "relation": n.relation}
             for n in plan.nodes]
    last = str(len(nodes))
    nodes.append({"id": str(len(nodes) + 1), "question": f"Whose {m.group('n')} is #{last}?", "depends_on": [last],
                  "relation": "progress"})
    if len(nodes) > params.max_hops:
        return None
    return validate_plan(nodes, source="heuristic")


def heuristic_decompose(question: str, params: HeuristicParams | None = None) -> Plan:
    """Parallel nodes for comparisons and "both" questions, two nodes for a conjunction ("X, and what Y?"), a
    progress chain for nested descriptions, else one node."""
    params = params or HeuristicParams()
    question = question.strip()
    return (_comparison(question) or _conjunction(question) or _whose(question, params)
            or _chain(question, params) or single_plan(question))
