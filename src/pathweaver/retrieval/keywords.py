"""Statistical query keywords, the no-LLM stand-in for PathRAG's LLM keyword extraction (PathRAG §Node Retrieval).

The query's candidate n-grams (the same extractor that builds the entity vocabulary, AGRAG §III-B) that name a
known entity come first, longest and most query-similar first; the embedding-nearest entities fill the rest.
Every keyword returned is an entity name, so its vector is already in the snapshot.
"""

from __future__ import annotations

import numpy as np

from pathweaver.extract.entities import candidate_grams, word_spans
from pathweaver.extract.names import NameLinker
from pathweaver.retrieval.graphs import cached
from pathweaver.retrieval.seeds import top_entities
from pathweaver.retrieval.types import RetrievalEnv
from pathweaver.store.snapshot import GraphSnapshot
from pathweaver.text import STOPWORDS

DEFAULT_KEYWORDS = 8  # ours: the paper's LLM picks a handful of keywords; not a paper parameter
DEFAULT_NGRAM_MAX = 3  # b, AGRAG §III-B: n-grams up to 3 words


def matched_entities(snapshot: GraphSnapshot, text: str, ngram_max: int = DEFAULT_NGRAM_MAX) -> list[int]:
    """Entity indices named by the query's candidate n-grams, in first-seen gram order."""
    out: list[int] = []
    for gram in candidate_grams(text, ngram_max):
        ent = snapshot.entity_index.get(gram)
        if ent is not None and ent not in out:
            out.append(ent)
    return out


def name_linker(snapshot: GraphSnapshot) -> NameLinker:
    """The automaton over the snapshot's document names (entities tied to a document), built once per snapshot."""

    def build() -> NameLinker:
        assert snapshot.ties is not None  # set in GraphSnapshot.__post_init__
        named = np.unique(snapshot.ties.tocoo().col)
        return NameLinker.build(snapshot.entity_names[int(e)] for e in named)

    return cached(snapshot, ("name_linker",), build, synonym_free=True)


def linked_entities(snapshot: GraphSnapshot, text: str) -> list[int]:
    """Entity indices of the document names ``text`` mentions (the indexer's automaton and rules), in name order."""
    if snapshot.ties is None or not snapshot.ties.nnz:
        return []
    found = name_linker(snapshot).link(text)
    return [snapshot.entity_index[n] for n in sorted(found) if n in snapshot.entity_index]


NAME_PARTS = 3  # default ``name_parts`` of the methods: a last word ending more names than this links none
PART_MIN_CHARS = 3  # a name part shorter than this ("Al", "Jr") identifies nobody
PART_MAX_WORDS = 3  # names longer than this are titles of works and events, not people called by a surname
# what a name must be to be called by its last word: a document's title or alias (a heading such as "Use Homebrew"
# names a section, and a Homebrew note writing "Homebrew" alone means the program, not that section)
PART_KINDS = frozenset({"title", "alias"})


def _surnames(snapshot: GraphSnapshot) -> dict[str, list[int]]:
    """{last word: the document titles and aliases of two to ``PART_MAX_WORDS`` words ending in it}, once per
    snapshot."""

    def build() -> dict[str, list[int]]:
        assert snapshot.ties is not None
        kinds = snapshot.entity_kinds
        parts: dict[str, list[int]] = {}
        for e in np.unique(snapshot.ties.tocoo().col).tolist():
            if kinds and kinds[e] not in PART_KINDS:
                continue
            words = [s.word for s in word_spans(snapshot.entity_names[e])]
            if 2 <= len(words) <= PART_MAX_WORDS and len(words[-1]) >= PART_MIN_CHARS \
                    and all(w.isalpha() and w not in STOPWORDS for w in words):
                parts.setdefault(words[-1], []).append(e)
        return parts

    return cached(snapshot, ("name_surnames",), build, synonym_free=True)


def partly_named_entities(snapshot: GraphSnapshot, text: str, max_names: int) -> list[int]:
    """Names of two or three plain words whose last word ``text`` writes alone and capitalised, past its first
    word ("Scrooge" -> "ebenezer scrooge"), as people call someone by a surname; a capitalised word next to
    another is part of some other name ("the American Revolution"), and a word that ends more than ``max_names``
    names is too vague to link."""
    if snapshot.ties is None or not snapshot.ties.nnz or max_names < 1:
        return []
    surnames = _surnames(snapshot)
    spans = word_spans(text)
    capital = [text[s.start].isupper() for s in spans]
    out: list[int] = []
    for i, span in enumerate(spans):
        alone = i > 0 and not capital[i - 1] and not (i + 1 < len(spans) and capital[i + 1])
        owners = surnames.get(span.word, [])
        if capital[i] and alone and 0 < len(owners) <= max_names:
            out.extend(e for e in owners if e not in out)
    return out


def question_names(snapshot: GraphSnapshot, text: str, name_parts: int = NAME_PARTS) -> list[int]:
    """The document names a question mentions (``linked_entities``), or, when it names none in full, those it
    calls by their last word (``partly_named_entities``; ``name_parts`` 0 turns that off)."""
    if not text:
        return []
    return linked_entities(snapshot, text) or partly_named_entities(snapshot, text, name_parts)


def query_names(env: RetrievalEnv, text: str, name_parts: int = NAME_PARTS) -> list[int]:
    """``question_names``, then the entities spaCy finds in the question (``env.question_ner``, a store indexed
    with ``ner``) that the graph holds under exactly that name; no fuzzy match. NER adds to the automaton's names
    and never replaces the surname rule, and the longest name wins as in the automaton: a span inside a name
    already found ("Maurice" in "Maurice, Prince of Orange", "Come Dance with Me" in "Come Dance with Me (song)")
    is dropped."""
    named = question_names(env.snapshot, text, name_parts)
    if env.question_ner is None or not text:
        return named
    snap = env.snapshot
    covered = [tuple(s.word for s in word_spans(snap.entity_names[e])) for e in named]
    found = [snap.entity_index[n] for n in env.question_ner(text)
             if n in snap.entity_index and not any(_inside(tuple(s.word for s in word_spans(n)), c) for c in covered)]
    return list(dict.fromkeys(named + found))


def _inside(words: tuple[str, ...], name: tuple[str, ...]) -> bool:
    """Whether ``words`` occur contiguously in ``name``."""
    n = len(words)
    return 0 < n <= len(name) and any(name[i:i + n] == words for i in range(len(name) - n + 1))


def statistical_keywords(
    snapshot: GraphSnapshot,
    text: str,
    qvec: np.ndarray | None,
    n: int = DEFAULT_KEYWORDS,
    ngram_max: int = DEFAULT_NGRAM_MAX,
) -> list[str]:
    """Up to ``n`` keywords (entity names) for ``text``: exact n-gram matches against the entity vocabulary, ranked
    by word count then cosine with ``qvec``, then the entities nearest to ``qvec`` for the remaining slots."""
    if n <= 0 or snapshot.n_entities == 0:
        return []
    matched = list(dict.fromkeys(linked_entities(snapshot, text) + matched_entities(snapshot, text, ngram_max)))
    have_vecs = qvec is not None and snapshot.vector_dim("entity_vecs") > 0
    cos = (snapshot.vector_rows("entity_vecs", matched) @ qvec) if have_vecs and matched else np.zeros(len(matched))
    ranked = sorted(
        range(len(matched)),
        key=lambda i: (-len(snapshot.entity_names[matched[i]].split()), -float(cos[i]), i),
    )
    chosen = [matched[i] for i in ranked][:n]
    if have_vecs and len(chosen) < n:
        assert qvec is not None
        for ent, _ in top_entities(snapshot, qvec, n + len(chosen)):
            if ent not in chosen:
                chosen.append(ent)
            if len(chosen) >= n:
                break
    return [snapshot.entity_names[e] for e in chosen]
