"""Entity and relation vectors, made when a snapshot first needs them from the vectors ``embed_cache`` holds.

With ``extract.entity_vectors`` / ``extract.triple_vectors`` = "composed" every such vector is a pure function of
word vectors (``numeric.vectors``), and with "encoded" it is the name's or triple's own cached vector, so the store
keeps those and not a second copy of every row (docs/design-notes.md, "Store"). The
recipe is the store's ``meta.vector_settings``: the modes, and the key space of the cached vectors.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pathweaver.numeric.vectors import (
    BLOCK_ROWS,
    VectorTable,
    compose_phrases,
    normalise_rows,
    phrase_words,
)
from pathweaver.store.db import Connection
from pathweaver.store.meta import meta_value
from pathweaver.store.writes import cache_get

log = logging.getLogger(__name__)
# What stores that recorded no settings were made with (``ingest.refresh.vector_settings_changed``).
UNRECORDED = "entities:encoded,triples:composed,phi:0.9"


@dataclass(frozen=True)
class VectorRecipe:
    """How a store's entity and relation vectors are made: the two modes and the ``embed_cache`` key space."""

    entities: str = "composed"
    triples: str = "composed"
    space: str = ""

    @classmethod
    def parse(cls, settings: str | None) -> VectorRecipe:
        """The recipe ``meta.vector_settings`` records ("entities:composed,triples:composed,phi:0.9,passes:fixed,
        precision:bfloat16"; the key space is ``ingest.graph_inputs.cache_space`` of the passes and precision)."""
        fields = dict(p.split(":", 1) for p in (settings or UNRECORDED).split(",") if ":" in p)
        passes, precision = fields.get("passes", ""), fields.get("precision", "float32")
        space = passes if precision == "float32" or not passes else f"{passes}-{precision}"
        return cls(fields.get("entities", "encoded"), fields.get("triples", "composed"), space)


def recipe_of(conn: Connection) -> VectorRecipe:
    return VectorRecipe.parse(meta_value(conn, "vector_settings"))


def _cached(conn: Connection, texts: Sequence[str], space: str, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The cached vectors of ``texts`` as rows (zeros where none is cached) and a mask of those found."""
    found = cache_get(conn, texts, space)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    have = np.fromiter((t in found for t in texts), dtype=bool, count=len(texts))
    for i in np.flatnonzero(have).tolist():
        out[i] = found[texts[i]]
    return out, have


def _warn_missing(what: str, texts: Sequence[str], have: np.ndarray) -> None:
    if not have.all():
        missing = [t for t, h in zip(texts, have.tolist(), strict=True) if not h]
        log.warning("%d %s have no cached vector (first: %s); they score 0 until `pathweaver refresh`",
                    len(missing), what, missing[:3])


def phrase_vectors(conn: Connection, recipe: VectorRecipe, phrases: Sequence[str], dim: int) -> np.ndarray:
    """Vectors of entity names or relation labels, in order: composed from their words' cached vectors, or their
    own cached vectors ("encoded"). A phrase with a word (or, encoded, itself) not cached gets zeros."""
    if not phrases:
        return np.zeros((0, dim), dtype=np.float32)
    if recipe.entities != "composed":
        out, have = _cached(conn, phrases, recipe.space, dim)
        _warn_missing("names", phrases, have)
        return out
    unique = list(dict.fromkeys(phrases))
    vocab = list(dict.fromkeys(w for p in unique for w in phrase_words(p)))
    words, have = _cached(conn, vocab, recipe.space, dim)
    _warn_missing("words", vocab, have)
    table = compose_phrases(unique, VectorTable({w: i for i, w in enumerate(vocab)}, words))
    if not have.all():
        lost = set(np.asarray(vocab, dtype=object)[~have].tolist())
        bad = [i for i, p in enumerate(unique) if any(w in lost for w in phrase_words(p))]
        table.matrix[bad] = 0.0
    return table.matrix if len(unique) == len(phrases) and unique == list(phrases) else table.rows(phrases)


def relation_vectors(conn: Connection, recipe: VectorRecipe, entity_vecs: np.ndarray, names: Sequence[str],
                     src: np.ndarray, dst: np.ndarray, labels: Sequence[str], dim: int) -> np.ndarray:
    """Vectors of relations (subject index ``src``, ``labels``, object index ``dst``), in order: the normalised
    sum of the subject's, label's and object's vectors (``numeric.vectors.compose_triples``, the same operations
    in the same order, so the same bits), or the cached vector of the triple text ("encoded")."""
    n = len(labels)
    if not n:
        return np.zeros((0, dim), dtype=np.float32)
    if recipe.triples != "composed":
        # ``extract.graph.triple_text``
        texts = [f"{names[a]} {label} {names[b]}" for a, b, label in zip(src.tolist(), dst.tolist(), labels,
                                                                          strict=True)]
        out, have = _cached(conn, texts, recipe.space, dim)
        _warn_missing("triples", texts, have)
        return out
    unique = list(dict.fromkeys(labels))
    at = {label: i for i, label in enumerate(unique)}
    label_vecs = phrase_vectors(conn, recipe, unique, dim)
    label_at = np.fromiter((at[label] for label in labels), dtype=np.int64, count=n)
    out = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, BLOCK_ROWS):
        part = slice(lo, lo + BLOCK_ROWS)
        out[part] = normalise_rows(entity_vecs[src[part]] + label_vecs[label_at[part]] + entity_vecs[dst[part]])
    return out
