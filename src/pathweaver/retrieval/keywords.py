"""Statistical query keywords, the no-LLM stand-in for PathRAG's LLM keyword extraction (PathRAG §Node Retrieval).

The query's candidate n-grams (the same extractor that builds the entity vocabulary, AGRAG §III-B) that name a
known entity come first, longest and most query-similar first; the embedding-nearest entities fill the rest.
Every keyword returned is an entity name, so its vector is already in the snapshot.
"""

from __future__ import annotations

import numpy as np

from pathweaver.extract.entities import candidate_grams
from pathweaver.extract.names import NameLinker
from pathweaver.retrieval.graphs import cached
from pathweaver.retrieval.seeds import top_entities
from pathweaver.store.snapshot import GraphSnapshot

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
    have_vecs = (
        qvec is not None
        and snapshot.entity_vecs.shape[0] == snapshot.n_entities
        and snapshot.entity_vecs.size
    )
    cos = (snapshot.entity_vecs[matched] @ qvec) if have_vecs and matched else np.zeros(len(matched))
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
