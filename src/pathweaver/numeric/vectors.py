"""How the vectors of graph elements are made from model vectors, without a model pass of their own.

The embedder mean-pools token vectors, so the normalised sum of the parts' unit vectors approximates the vector
of the whole text. Two uses (``extract.entity_vectors`` and ``extract.triple_vectors``):
- a phrase (entity name, relation label) from the vectors of its words: an n-gram entity costs one model pass
  per distinct word of the corpus instead of one per distinct name (far fewer tokens);
- a relation ("subject label object") from the vectors of its subject, label and object.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

VECTOR_MODES = ("composed", "encoded")
# Rows composed at a time: 8,192 rows of 384 float32 are 12.6 MB, so a block's gathers, sums and norms stay in the
# CPU's cache, where whole-array passes over 10^5 triples run at memory speed; every step is per row, so the bits
# are the same.
BLOCK_ROWS = 8192


class VectorTable(Mapping[str, np.ndarray]):
    """Vectors of texts as the rows of one float32 matrix, with a text -> row index: a graph's 10^5 names and
    triples without one small array each (stacking those dominated composing them)."""

    def __init__(self, index: dict[str, int], matrix: np.ndarray) -> None:
        self.index = index
        self.matrix = matrix

    @classmethod
    def of(cls, vectors: Mapping[str, np.ndarray]) -> VectorTable:
        """``vectors`` as a table (itself when it is one)."""
        if isinstance(vectors, VectorTable):
            return vectors
        texts = list(vectors)
        dim = len(next(iter(vectors.values()))) if texts else 0
        matrix = np.stack([vectors[t] for t in texts]).astype(np.float32, copy=False) if texts else \
            np.zeros((0, dim), dtype=np.float32)
        return cls({t: i for i, t in enumerate(texts)}, matrix)

    @property
    def dim(self) -> int:
        """The vectors' width (0 for an empty table made without one)."""
        return int(self.matrix.shape[1]) if self.matrix.ndim == 2 else 0

    def rows(self, texts: Iterable[str]) -> np.ndarray:
        """The vectors of ``texts`` as one ``(n, dim)`` array, in order."""
        return self.matrix[self.at(texts)]

    def at(self, texts: Iterable[str]) -> np.ndarray:
        """The row numbers of ``texts``, in order."""
        return np.fromiter((self.index[t] for t in texts), dtype=np.int64)

    def __getitem__(self, text: str) -> np.ndarray:
        return self.matrix[self.index[text]]

    def __contains__(self, text: object) -> bool:
        return text in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


class LayeredVectors(Mapping[str, np.ndarray]):
    """Several tables read as one, a text taking its vector from the first table that has it (names and labels
    over triple texts, without copying either matrix)."""

    def __init__(self, *tables: VectorTable) -> None:
        self.tables = tables

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts`` as one ``(n, dim)`` array, in order: one gather per table."""
        which = np.full(len(texts), -1, dtype=np.int64)
        at = np.zeros(len(texts), dtype=np.int64)
        for k, text in enumerate(texts):
            for t, table in enumerate(self.tables):
                row = table.index.get(text)
                if row is not None:
                    which[k], at[k] = t, row
                    break
            else:
                raise KeyError(text)
        dim = max((t.dim for t in self.tables), default=0)
        out = np.empty((len(texts), dim), dtype=np.float32)
        for t, table in enumerate(self.tables):
            mine = which == t
            if mine.any():
                out[mine] = table.matrix[at[mine]]
        return out

    def __getitem__(self, text: str) -> np.ndarray:
        for table in self.tables:
            at = table.index.get(text)
            if at is not None:
                return table.matrix[at]
        raise KeyError(text)

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for table in self.tables:
            for text in table.index:
                if text not in seen:
                    seen.add(text)
                    yield text

    def __len__(self) -> int:
        return sum(1 for _ in self)


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
    table = VectorTable.of(base)
    if not triples:
        return np.zeros((0, table.dim), dtype=np.float32)
    at = [table.at(t[i] for t in triples) for i in range(3)]
    out = np.empty((len(triples), table.dim), dtype=np.float32)
    for lo in range(0, len(triples), BLOCK_ROWS):
        part = slice(lo, lo + BLOCK_ROWS)
        out[part] = normalise_rows(table.matrix[at[0][part]] + table.matrix[at[1][part]] + table.matrix[at[2][part]])
    return out


def phrase_words(phrase: str) -> list[str]:
    """The words a phrase vector is composed of (names are already case- and space-normalised)."""
    return phrase.split()


def compose_phrases(phrases: Sequence[str], word_vecs: Mapping[str, np.ndarray]) -> VectorTable:
    """Each phrase's vector: the normalised sum of its words' vectors (a repeated word counts each time); a
    one-word phrase keeps its word's model vector as it is (already unit length: normalising it again in numpy
    could move its last bit).

    Words are added in phrase order, so a phrase gets the same bits whatever else is composed in the same call
    (incremental indexing and refresh must agree on synonym edges). ``word_vecs`` must hold every word; a phrase
    without words gets a zero vector.
    """
    unique = list(dict.fromkeys(phrases))
    words = VectorTable.of(word_vecs)
    if not unique:
        return VectorTable({}, np.zeros((0, words.dim), np.float32))
    split = [phrase_words(p) for p in unique]
    vocab = list(dict.fromkeys(w for ws in split for w in ws))
    missing = [w for w in vocab if w not in words]
    if missing:
        raise KeyError(f"no vector for the words {missing[:5]}")
    table = words.rows(vocab)
    index = {w: i for i, w in enumerate(vocab)}
    counts = np.fromiter((len(ws) for ws in split), dtype=np.int64, count=len(split))
    flat = np.fromiter((index[w] for ws in split for w in ws), dtype=np.int64, count=int(counts.sum()))
    starts = np.cumsum(counts) - counts
    out = np.zeros((len(unique), words.dim), dtype=np.float32)  # a phrase without words keeps zeros
    # phrases of one length at a time, so no pass adds padding; each row's sum is 0 + w1 + w2 + ... in word order
    # as before (0 + w1 turns a -0.0 into +0.0, so the sum starts from it), the same bits at any batch
    for length in np.unique(counts).tolist():
        rows = np.flatnonzero(counts == length)
        if length == 0:
            continue
        if length == 1:
            out[rows] = table[flat[starts[rows]]]
            continue
        for lo in range(0, rows.shape[0], BLOCK_ROWS):
            block = rows[lo : lo + BLOCK_ROWS]
            first = starts[block]
            acc = table[flat[first]] + np.float32(0.0)
            for j in range(1, length):
                acc += table[flat[first + j]]
            out[block] = normalise_rows(acc)
    return VectorTable({p: i for i, p in enumerate(unique)}, out)
