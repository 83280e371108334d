"""Names people wrote (document titles and their aliases) and mention linking with one Aho-Corasick automaton.

A document's names: its title, the title without a trailing parenthetical ("Inherent Vice (film)" -> "Inherent
Vice"), its front-matter ``aliases:``, and its headings that read as names (``heading_names``). Each is an entity
(kind "title", "alias" or "heading") tied to its document's chunks. The display text of a link,
``[[Target|display]]``, is how its writer calls Target: a name (kind "link") of the documents named Target
(``link_names``). Headings and display texts are written for readers, not as names, so they count only in the
form people write names: ``proper_form``. ``NameLinker`` finds every occurrence of every name in a text:
- on whole words: text and names are both cut into ``entities.word_spans`` words and each distinct name word is
  one character of the automaton's alphabet, so a match can only start and end on word boundaries;
- words joined by punctuation or a line break are kept apart by a separator, in names and in texts alike
  ("Paris, Texas" matches "Paris, Texas" but not "Paris Texas"; "Inherent Vice (film)" not "Inherent Vice film");
- longest match first, leftmost, without overlaps (``iter_long``): "Paul Thomas Anderson" wins over "Thomas";
- case-insensitively (names are compared in ``normalize``'d form), except a *strict* name (one word): it matches
  only where the text's word starts with a capital letter, so the title "Music" does not match "music";
- a name whose words are all stopwords or numbers, or a one-letter word, is never linked ("It", "1999").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pathweaver.extract.entities import WordSpan, word_spans
from pathweaver.extract.structure import heading_name
from pathweaver.text import STOPWORDS, normalize

TITLE, ALIAS, HEADING, LINK = "title", "alias", "heading", "link"
_PAREN_RE = re.compile(r"^(.*?\S)\s*\([^()]*\)$")
_SEPARATOR = "\x01"  # between two words not joined by plain spaces
_UNKNOWN = "\x02"  # a text word that is no name's word
_FIRST_WORD_CHAR = 0x100  # name words are characters from here on


def display_name(name: str) -> str:
    """Canonical entity name of a title or alias (``entities.normalize``), '' if it has no letter."""
    name = normalize(name)
    return name if any(ch.isalpha() for ch in name) else ""


def without_disambiguator(title: str) -> str:
    """The title without a trailing "(...)" ("Inherent Vice (film)" -> "Inherent Vice"); '' when it has none."""
    bare = _PAREN_RE.match(title.strip())
    return bare.group(1) if bare else ""


def document_names(title: str, aliases: Sequence[str] = (), headings: Sequence[str] = ()) -> dict[str, str]:
    """{entity name: "title" | "alias" | "heading"} of a document: its title, the title without a trailing "(...)",
    its front-matter aliases and its ``heading_names``; names that can never be linked are still returned (they
    tie to the document)."""
    out: dict[str, str] = {}
    main = display_name(title)
    if main:
        out[main] = TITLE
    bare = without_disambiguator(title)
    candidates = ([bare] if bare else []) + list(aliases)
    for raw in candidates:
        name = display_name(raw)
        if name and name not in out:
            out[name] = ALIAS
    for name in heading_names(headings):
        out.setdefault(name, HEADING)
    return out


def proper_form(text: str) -> bool:
    """Whether ``text`` is written as a name: some word has a letter, and every word with a letter that is not a
    stopword starts with a capital ("Paul Thomas Anderson", "The Lord of the Rings", "Anderson"; not "his film",
    "Early life", "here"). A trailing "(...)" is not looked at ("The Master (2012 film)")."""
    body = without_disambiguator(text) or text
    content = [body[s.start:s.end] for s in word_spans(body)
               if s.word not in STOPWORDS and any(ch.isalpha() for ch in s.word)]
    return bool(content) and all(raw[0].isupper() for raw in content)


def heading_names(headings: Sequence[str]) -> list[str]:
    """The headings that name something: at least two words, in ``proper_form``, linkable, section numbers
    dropped ("2.1 Project Apollo" -> "project apollo"); a one-word heading ("Usage", "Summary") labels a section
    and is left out. Named as ``structure.structural_entities`` names them, so both layers share the entity."""
    out: list[str] = []
    for raw in headings:
        name = heading_name(raw)
        stripped = raw.strip()
        if name and len(word_spans(name)) >= 2 and proper_form(stripped) and linkable(name) and name not in out:
            out.append(name)
    return out


def link_names(link_texts: Sequence[tuple[str, str, bool]]) -> set[tuple[str, str]]:
    """(target name, display name) of each ``[[Target|display]]`` (with whether it was written mid-sentence) whose
    display text differs from its target, is ``linkable`` and ``names_something``."""
    out: set[tuple[str, str]] = set()
    for target, display, mid in link_texts:
        t, d = display_name(target), display_name(display)
        if t and d and d != t and linkable(d) and names_something(display, mid):
            out.add((t, d))
    return out


def names_something(display: str, mid_sentence: bool) -> bool:
    """Whether a link's display text is written as a name: in ``proper_form``, and with two content words or more
    ("Paul Thomas Anderson"), or one written as only names are: capitals past its first letter ("PTA", "GitHub"), or
    a capital inside a sentence ("they love [[Stanley Kubrick|Kubrick]]"). A capitalised word where every text
    starts with one (a list item, a table cell, a button: "List", "Open", "Learn more") says nothing."""
    if not proper_form(display):
        return False
    body = without_disambiguator(display) or display
    content = [body[s.start:s.end] for s in word_spans(body)
               if s.word not in STOPWORDS and any(ch.isalpha() for ch in s.word)]
    if len(content) >= 2:
        return True
    return any(ch.isupper() for ch in content[0][1:]) or mid_sentence


def _key_words(spans: Sequence[WordSpan]) -> list[tuple[str, bool]]:
    return [(s.word, s.joined) for s in spans]


def linkable(name: str) -> bool:
    """Whether occurrences of ``name`` are linked at all (see the module docstring)."""
    return _linkable_words([s.word for s in word_spans(name)])


def _linkable_words(words: list[str]) -> bool:
    if not words:
        return False
    if all(w in STOPWORDS or w.isdigit() for w in words):
        return False
    return not (len(words) == 1 and len(words[0]) < 2)


def _strict(spans: Sequence[WordSpan]) -> bool:
    """A one-word name links only where the text capitalises it."""
    return len(spans) == 1


@dataclass
class NameLinker:
    """One automaton over every linkable name (``build``); ``link`` counts each name's occurrences in a text."""

    automaton: object | None
    alphabet: dict[str, str]  # name word -> its character
    strict_names: frozenset[str]

    @classmethod
    def build(cls, names: Iterable[str]) -> NameLinker:
        import ahocorasick  # pyahocorasick

        alphabet: dict[str, str] = {}
        keys: dict[str, list[str]] = {}
        strict_names = set()
        for name in sorted(set(names)):
            spans = word_spans(name)  # once per name: ``_linkable_words`` and ``_strict`` of these spans
            if not _linkable_words([s.word for s in spans]):
                continue
            parts = []
            for i, (word, joined) in enumerate(_key_words(spans)):
                if i and not joined:
                    parts.append(_SEPARATOR)
                parts.append(alphabet.setdefault(word, chr(_FIRST_WORD_CHAR + len(alphabet))))
            keys.setdefault("".join(parts), []).append(name)
            if _strict(spans):
                strict_names.add(name)
        if not keys:
            return cls(None, alphabet, frozenset())
        automaton = ahocorasick.Automaton()
        for key, found in keys.items():
            automaton.add_word(key, (len(key), tuple(found)))
        automaton.make_automaton()
        return cls(automaton, alphabet, frozenset(strict_names))

    @property
    def empty(self) -> bool:
        return self.automaton is None

    def link(self, text: str) -> Counter[str]:
        """How often each name occurs in ``text`` (longest leftmost matches on word boundaries)."""
        out: Counter[str] = Counter()
        if self.automaton is None:
            return out
        spans = word_spans(text)
        if not spans:
            return out
        chars: list[str] = []
        starts: list[int] = []  # the word (span index) each character position belongs to, -1 for a separator
        for i, s in enumerate(spans):
            if i and not s.joined:
                chars.append(_SEPARATOR)
                starts.append(-1)
            chars.append(self.alphabet.get(s.word, _UNKNOWN))
            starts.append(i)
        for end, (length, names) in self.automaton.iter_long("".join(chars)):  # type: ignore[attr-defined]
            first = spans[starts[end - length + 1]]
            capital = text[first.start].isupper()
            for name in names:
                if capital or name not in self.strict_names:
                    out[name] += 1
        return out

    def link_many(self, texts: Mapping[int, str]) -> dict[int, Counter[str]]:
        """``link`` of each text, keyed as given; texts without any name are left out."""
        found = {key: self.link(text) for key, text in texts.items()}
        return {key: names for key, names in found.items() if names}


def fts_query(name: str) -> str:
    """An FTS5 query that every chunk in which ``NameLinker`` can find ``name`` matches (a superset: the words near
    each other, in any order, within a few tokens; FTS5 splits words at apostrophes and hyphens, which ours keep)."""
    tokens = re.findall(r"[^\W_]+", name.casefold())
    if not tokens:
        return ""
    quoted = " ".join('"' + t.replace('"', '""') + '"' for t in tokens)
    if len(tokens) == 1:
        return f"text : {quoted}"
    return f"text : NEAR({quoted}, {2 * len(tokens)})"
