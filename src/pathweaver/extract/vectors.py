"""How the vectors of graph elements are made from model vectors, without a model pass of their own.

The embedder mean-pools token vectors, so the normalised sum of the parts' unit vectors approximates the vector
of the whole text. Two uses (``extract.entity_vectors`` and ``extract.triple_vectors``):
- a phrase (entity name, relation label) from the vectors of its words: an n-gram entity costs one model pass
  per distinct word of the corpus instead of one per distinct name (2wiki dev: 35k words for 156k names and
  labels, a fifth of the tokens);
- a relation ("subject label object") from the vectors of its subject, label and object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

VECTOR_MODES = ("composed", "encoded")


def normalise_rows(m: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms > 0, norms, 1.0)


def compose_triple_vector(src: np.ndarray, label: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """A relation vector: the normalised sum of its subject, label and object unit vectors."""
    return normalise_rows((src + label + dst)[None, :])[0]


def compose_triples(triples: Sequence[tuple[str, str, str]], base: Mapping[str, np.ndarray]) -> np.ndarray:
    """``compose_triple_vector`` for many (subject, label, object) texts at once: one row per triple, in order."""
    if not triples:
        return np.zeros((0, 0), dtype=np.float32)
    parts = [np.stack([base[t[i]] for t in triples]) for i in range(3)]
    return normalise_rows(parts[0] + parts[1] + parts[2])


def phrase_words(phrase: str) -> list[str]:
    """The words a phrase vector is composed of (names are already case- and space-normalised)."""
    return phrase.split()


def compose_phrases(phrases: Sequence[str], word_vecs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each phrase's vector: the normalised sum of its words' vectors (a repeated word counts each time).

    Words are added in phrase order, so a phrase gets the same bits whatever else is composed in the same call
    (incremental indexing and refresh must agree on synonym edges). ``word_vecs`` must hold every word; a phrase
    without words gets a zero vector.
    """
    unique = list(dict.fromkeys(phrases))
    if not unique:
        return {}
    split = [phrase_words(p) for p in unique]
    vocab = list(dict.fromkeys(w for ws in split for w in ws))
    missing = [w for w in vocab if w not in word_vecs]
    if missing:
        raise KeyError(f"no vector for the words {missing[:5]}")
    dim = len(next(iter(word_vecs.values()))) if word_vecs else 0
    table = np.zeros((len(vocab) + 1, dim), dtype=np.float32)  # row 0: the zero vector pads short phrases
    index = {w: i + 1 for i, w in enumerate(vocab)}
    for w, i in index.items():
        table[i] = word_vecs[w]
    width = max((len(ws) for ws in split), default=0)
    pos = np.zeros((len(unique), width), dtype=np.int64)
    for r, ws in enumerate(split):
        pos[r, : len(ws)] = [index[w] for w in ws]
    acc = np.zeros((len(unique), dim), dtype=np.float32)
    for j in range(width):
        acc += table[pos[:, j]]
    return dict(zip(unique, normalise_rows(acc), strict=True))
