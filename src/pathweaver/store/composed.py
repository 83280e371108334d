"""Nearest entities and relations to a query without making their vector tables (composed relation vectors).

A composed vector is u = s/|s|, s the sum of its parts (``numeric.vectors``), so u·q = (Σ part·q)/|s|: an
entity's score is its words' scores over its norm, a relation's its subject's, label's and object's scores over
its norm. With the norms (stored in ``entity_norms`` / ``relation_norms``, keyed to ``meta.vector_settings``
through ``meta.norm_settings``) one product with the ~36k word vectors scores every row to within a rounding
bound; the rows whose bound reaches the k-th are then made exactly as ``store.graphvecs`` makes them and scored
by ``numeric.projection.row_scores``, so the top k and their scores are those of the full tables
(docs/design-notes.md, "Factorised scans").

With encoded entity vectors (``extract.entity_vectors`` = "encoded", and stores that recorded no settings) each
name and label is its own "word": its cached vector, norm 1 (0 where none is cached), so one product with the
float16 copies of those vectors scores every entity, and every composed relation through its parts, the same way.

Norms missing for some rows (rows written since, or a store that never had them) are computed at load from the
word vectors, block by block, and written back when the store can be written without waiting.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pathweaver.numeric.projection import half_mv, half_mv_holds, kth_highest, row_scores, top_stable
from pathweaver.numeric.vectors import BLOCK_ROWS, VectorTable, compose_phrases, normalise_rows
from pathweaver.store.db import Connection, OperationalError, SharedReader, connect
from pathweaver.store.graphvecs import recipe_of
from pathweaver.store.meta import meta_value
from pathweaver.store.writes import text_hash

log = logging.getLogger(__name__)
# Bound on |estimate - exact| per unit of a row's parts (float32 dot products of 384 terms round by at most
# 384 · 2^-24 ≈ 2.3e-5 of |a||b|; four times that covers the composition's and the norms' rounding too).
ERR = 1e-4
HALF = 1.1 * 2.0**-11  # float16's relative rounding, with room for subnormal components
# a float16 product (``projection.half_mv``) rounds the query and the result to float16 too: 2 · HALF more per |w|
HALF_PRODUCT = 2 * HALF
FETCH = 500  # cache keys per "IN (...)" query
NORM_ROW = np.dtype([("id", np.int64), ("norm", np.float64)])
NORM_ROWS = 1024  # rows per block where norms are taken (a float64 block of 384 columns is 3 MB)
SEP = "\x00"  # a word between phrases split together (a phrase with it as a word is split alone)
SCAN_SHARE = 2  # read the whole vocabulary by scanning ``embed_cache`` unless it holds over twice as many rows


def _phrase_words(phrases: Sequence[str], index: dict[str, int]) -> sp.csr_matrix:
    """(n, words) counts of each phrase's words (``numeric.vectors.phrase_words``), new words added to ``index``
    in order of first use. The phrases are split as one text with a separator token between them (one ``split``
    call and one dict lookup per word, instead of a ``split`` and a list per phrase)."""
    n = len(phrases)
    words = f" {SEP} ".join(phrases).split()
    if n and words.count(SEP) != n - 1:  # some phrase holds the separator as a word of its own
        return _phrase_words_apart(phrases, index)
    for w in dict.fromkeys(words):
        if w != SEP and w not in index:
            index[w] = len(index)
    look = {**index, SEP: -1}
    ids = np.fromiter(map(look.__getitem__, words), dtype=np.int64, count=len(words))
    ends = np.flatnonzero(ids < 0)
    counts = np.diff(np.concatenate(([-1], ends, [ids.shape[0]]))) - 1 if n else np.zeros(0, dtype=np.int64)
    cols = ids[ids >= 0]
    indptr = np.concatenate(([0], np.cumsum(counts)))
    return sp.csr_matrix((np.ones(cols.shape[0], dtype=np.float32), cols, indptr), shape=(n, len(index)))


def _phrase_words_apart(phrases: Sequence[str], index: dict[str, int]) -> sp.csr_matrix:
    """``_phrase_words`` one phrase at a time (the same matrix and ``index``)."""
    split = [p.split() for p in phrases]
    cols = np.fromiter((index.setdefault(w, len(index)) for ws in split for w in ws), dtype=np.int64)
    indptr = np.concatenate(([0], np.cumsum([len(ws) for ws in split], dtype=np.int64)))
    return sp.csr_matrix((np.ones(cols.shape[0], dtype=np.float32), cols, indptr),
                         shape=(len(phrases), len(index)))


def _phrase_ids(phrases: Sequence[str], index: dict[str, int]) -> sp.csr_matrix:
    """(n, words) with a 1 at each phrase's own column: encoded names and labels are one "word" each (new ones
    added to ``index`` in order of first use)."""
    cols = np.fromiter((index.setdefault(p, len(index)) for p in phrases), dtype=np.int64, count=len(phrases))
    return sp.csr_matrix((np.ones(len(phrases), dtype=np.float32), cols, np.arange(len(phrases) + 1)),
                         shape=(len(phrases), len(index)))


def _word_vectors(conn: Connection, words: Sequence[str], space: str, dim: int, dtype: type = np.float32
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The cached vectors of ``words`` as rows of ``dtype`` (zeros where none) and a mask of those found, filled
    batch by batch (no second copy of every blob)."""
    out = np.zeros((len(words), dim), dtype=dtype)
    have = np.zeros(len(words), dtype=bool)
    keys = [text_hash(w, space) for w in words]
    at = {k: i for i, k in enumerate(keys)}
    for lo in range(0, len(keys), FETCH):
        part = keys[lo : lo + FETCH]
        marks = ",".join("?" * len(part))
        rows = [(at[key], blob) for key, blob in conn.execute(
            f"SELECT text_hash, vector FROM embed_cache WHERE text_hash IN ({marks})", part) if len(blob) == 4 * dim]
        if rows:
            pos = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            out[pos] = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dim)
            have[pos] = True
    return out, have


def _all_word_vectors(conn: Connection, words: Sequence[str], space: str, dim: int, exact: np.ndarray | None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``_word_vectors`` of a whole vocabulary as float16 rows, the mask of those found, and float32 rows of the
    words in ``exact`` (ascending positions; None for none), from one pass over ``embed_cache`` when the
    vocabulary is most of it (one sequential scan instead of a key lookup per word), batch by batch."""
    cached = conn.execute("SELECT count(*) FROM embed_cache").fetchone()[0]
    if len(words) * SCAN_SHARE < cached:
        half, have = _word_vectors(conn, words, space, dim, np.float16)
        rows = None if exact is None else _word_vectors(conn, [words[i] for i in exact.tolist()], space, dim)[0]
        return half, have, rows
    half = np.zeros((len(words), dim), dtype=np.float16)
    have = np.zeros(len(words), dtype=bool)
    full = None if exact is None else np.zeros((exact.shape[0], dim), dtype=np.float32)
    slot = np.full(len(words), -1, dtype=np.int64)
    if exact is not None:
        slot[exact] = np.arange(exact.shape[0])
    at = {text_hash(w, space): i for i, w in enumerate(words)}
    pos: list[int] = []
    blobs: list[bytes] = []

    def flush() -> None:
        if not pos:
            return
        rows = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(pos), dim)
        idx = np.asarray(pos, dtype=np.int64)
        half[idx] = rows
        have[idx] = True
        if full is not None:
            keep = slot[idx] >= 0
            full[slot[idx[keep]]] = rows[keep]
        pos.clear()
        blobs.clear()

    for key, blob in conn.execute("SELECT text_hash, vector FROM embed_cache"):
        i = at.get(key)
        if i is not None and len(blob) == 4 * dim:
            pos.append(i)
            blobs.append(blob)
            if len(pos) == FETCH:
                flush()
    flush()
    return half, have, full


class WordRows:
    """Exact (float32) word vectors read from ``embed_cache`` when a row is made, over the store's shared reader
    (``db.SharedReader``; a cached vector never changes)."""

    def __init__(self, reader: SharedReader, space: str, dim: int) -> None:
        self.reader, self.space, self.dim = reader, space, dim

    def __call__(self, words: Sequence[str]) -> np.ndarray:
        with self.reader.use() as conn:
            return _word_vectors(conn, words, self.space, self.dim)[0]


@dataclass
class ComposedSearch:
    """Word vectors, which words make each entity and label, and every row's norm: what scoring and making the
    rows of a snapshot's composed entity and relation tables needs."""

    words: np.ndarray  # (W, d) float16 copies of the word vectors (zero rows where none is cached), for estimates
    vocab: list[str]  # the word of each row
    exact: WordRows  # the float32 vectors, for the rows that are made
    entity_words: sp.csr_matrix  # (E, W) word counts
    entity_norm: np.ndarray  # (E,) |s| (0: a zero vector)
    entity_err: np.ndarray  # (E,) bound on |estimate - exact| of u·q for a unit q
    label_words: sp.csr_matrix
    label_norm: np.ndarray
    label_err: np.ndarray
    rel_label: np.ndarray  # (R,) row of each relation's label in ``label_words``
    rel_src: np.ndarray
    rel_dst: np.ndarray
    rel_norm: np.ndarray
    rel_err: np.ndarray
    names: list[str]
    labels: list[str]  # distinct labels
    lost_words: np.ndarray  # (W,) float32 1 where a word has no cached vector
    encoded: bool = False  # each entity and label is one "word" whose cached vector is its row, not normalised
    half_product: bool = False  # word scores by ``projection.half_mv`` (checked at build: ``half_mv_holds``)

    # -- scores ------------------------------------------------------------------------------------------------
    def _estimates(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = q.astype(np.float32, copy=False)
        if self.half_product:
            ws = half_mv(self.words, q).astype(np.float64)
        else:
            ws = np.empty(self.words.shape[0], dtype=np.float64)
            for lo in range(0, ws.shape[0], BLOCK_ROWS):
                ws[lo : lo + BLOCK_ROWS] = self.words[lo : lo + BLOCK_ROWS].astype(np.float32) @ q
        return _over(self.entity_words @ ws, self.entity_norm), _over(self.label_words @ ws, self.label_norm)

    def top_entities(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices and scores of the ``k`` entities nearest ``q``, best first (ties by lower index)."""
        est, _ = self._estimates(q)
        cand = _candidates(est, self.entity_err, k)
        scores = row_scores(self.entity_rows(cand), q)
        pick = top_stable(scores, k)
        return cand[pick], scores[pick]

    def top_relations(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices and scores of the ``k`` relations nearest ``q``, best first (ties by lower index)."""
        ent, lab = self._estimates(q)
        est = _over(ent[self.rel_src] + lab[self.rel_label] + ent[self.rel_dst], self.rel_norm)
        cand = _candidates(est, self.rel_err, k)
        scores = row_scores(self.relation_rows(cand), q)
        pick = top_stable(scores, k)
        return cand[pick], scores[pick]

    # -- rows --------------------------------------------------------------------------------------------------
    def _phrase_rows(self, phrases: list[str], words: sp.csr_matrix, rows: np.ndarray) -> np.ndarray:
        """``graphvecs.phrase_vectors`` of ``phrases`` (rows ``rows`` of ``words``): the same operations, so the
        same bits; a phrase with a word that has no cached vector is a zero row."""
        if not phrases:
            return np.zeros((0, self.words.shape[1]), dtype=np.float32)
        if self.encoded:  # ``graphvecs.phrase_vectors``' cached rows, zeros where none is cached
            unique = list(dict.fromkeys(phrases))
            return VectorTable({p: i for i, p in enumerate(unique)}, self.exact(unique)).rows(phrases)
        vocab = [self.vocab[i] for i in np.unique(words[rows].indices).tolist()]
        known = VectorTable({w: i for i, w in enumerate(vocab)}, self.exact(vocab))
        table = compose_phrases(phrases, known).rows(phrases)
        table[np.asarray(words[rows] @ self.lost_words > 0).ravel()] = 0.0
        return table

    def entity_rows(self, idx: np.ndarray) -> np.ndarray:
        """Entity vectors ``idx``, as ``graphvecs.phrase_vectors`` makes them."""
        return self._phrase_rows([self.names[i] for i in idx.tolist()], self.entity_words, idx)

    def relation_rows(self, idx: np.ndarray) -> np.ndarray:
        """Relation vectors ``idx``, as ``graphvecs.relation_vectors`` makes them."""
        ents, at = np.unique(np.concatenate([self.rel_src[idx], self.rel_dst[idx]]), return_inverse=True)
        labs, lat = np.unique(self.rel_label[idx], return_inverse=True)
        ev = self.entity_rows(ents)
        lv = self._phrase_rows([self.labels[i] for i in labs.tolist()], self.label_words, labs)
        n = idx.shape[0]
        return normalise_rows(ev[at[:n]] + lv[lat] + ev[at[n:]])


def _over(dots: np.ndarray, norms: np.ndarray) -> np.ndarray:
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def _candidates(est: np.ndarray, err: np.ndarray, k: int) -> np.ndarray:
    """Rows (ascending) whose score may be among the top ``k``: upper bound at least the k-th lower bound."""
    k = min(k, est.shape[0])
    kth = kth_highest(est - err, k)
    return np.flatnonzero(est + err >= kth)


def _sum_norms(words: sp.csr_matrix, vecs: np.ndarray, lost: np.ndarray) -> np.ndarray:
    """|Σ word vectors| of every row of ``words`` (0 where a word is missing), block by block."""
    out = np.zeros(words.shape[0], dtype=np.float64)
    for lo in range(0, words.shape[0], NORM_ROWS):
        s = np.asarray(words[lo : lo + NORM_ROWS] @ vecs)
        out[lo : lo + NORM_ROWS] = np.linalg.norm(s.astype(np.float64), axis=1)
    out[lost] = 0.0
    return out


def _relation_norms(search: ComposedSearch, idx: np.ndarray, words: np.ndarray) -> np.ndarray:
    """|u_src + u_label + u_dst| of relations ``idx`` from the unit vectors' float64 estimates, block by block."""
    out = np.zeros(idx.shape[0], dtype=np.float64)

    def unit(words_of: sp.csr_matrix, norms: np.ndarray, rows: np.ndarray) -> np.ndarray:
        s = np.asarray(words_of[rows] @ words, dtype=np.float64)
        return s / np.where(norms[rows] > 0, norms[rows], np.inf)[:, None]

    for lo in range(0, idx.shape[0], NORM_ROWS):
        part = idx[lo : lo + NORM_ROWS]
        s = (unit(search.entity_words, search.entity_norm, search.rel_src[part])
             + unit(search.label_words, search.label_norm, search.rel_label[part])
             + unit(search.entity_words, search.entity_norm, search.rel_dst[part]))
        out[lo : lo + NORM_ROWS] = np.linalg.norm(s, axis=1)
    return out


def _stored_norms(conn: Connection, table: str, ids: np.ndarray) -> np.ndarray:
    """The stored norms of ``ids`` (ascending), NaN where none (rows read straight into a structured array)."""
    out = np.full(ids.shape[0], np.nan)
    pairs = np.fromiter(conn.execute(f"SELECT id, norm FROM {table}"), dtype=NORM_ROW)
    if pairs.shape[0] and ids.shape[0]:
        got, vals = pairs["id"], pairs["norm"]
        pos = np.minimum(np.searchsorted(ids, got), ids.shape[0] - 1)
        hit = ids[pos] == got
        out[pos[hit]] = vals[hit]
    return out


def _write_norms(path: Path, settings: str | None, tables: dict[str, tuple[np.ndarray, np.ndarray]],
                 replace: bool) -> None:
    """Store norms (table -> (ids, norms)) computed for ``settings``, unless another writer holds the store or
    the settings moved meanwhile: they are derived data, and the next reader computes them again."""
    with contextlib.suppress(OperationalError), contextlib.closing(connect(path)) as conn:
        conn.execute("PRAGMA busy_timeout=0")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if meta_value(conn, "vector_settings") == settings:
                for table, (ids, norms) in tables.items():
                    if replace:
                        conn.execute(f"DELETE FROM {table}")
                    conn.executemany(f"INSERT OR REPLACE INTO {table}(id, norm) VALUES (?, ?)",
                                     zip(ids.tolist(), norms.tolist(), strict=True))
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('norm_settings', ?)", (settings or "",))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def composed_search(reader: SharedReader, dim: int, entity_ids: np.ndarray, names: list[str], rel_ids: np.ndarray,
                    rel_src: np.ndarray, rel_dst: np.ndarray, labels: list[str]) -> ComposedSearch | None:
    """The search over a snapshot's entities and relations, read over a connection of its own, or None when the
    relation vectors are encoded (``meta.vector_settings``: an encoded triple's vector is a function of nothing
    held here) or the store has no norm tables. Rows made later read their words over ``reader``."""
    path = reader.path
    if not dim:
        return None
    with contextlib.closing(connect(path, readonly=True)) as conn:
        conn.execute("BEGIN")
        try:
            recipe = recipe_of(conn)
            if recipe.triples != "composed":
                return None
            encoded = recipe.entities != "composed"
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'relation_norms'").fetchone() is None:
                return None
            settings = meta_value(conn, "vector_settings")
            fresh = meta_value(conn, "norm_settings") == (settings or "")
            # an encoded entity's norm is 1 (its row is not normalised), or 0 with no cached vector: set below
            ent_norm = np.ones(len(names)) if encoded else _stored_norms(conn, "entity_norms", entity_ids) if fresh \
                else np.full(len(names), np.nan)
            rel_norm = _stored_norms(conn, "relation_norms", rel_ids) if fresh else np.full(len(labels), np.nan)
            index: dict[str, int] = {}
            split = _phrase_ids if encoded else _phrase_words
            entity_words = split(names, index)
            distinct = list(dict.fromkeys(labels))
            at = {label: i for i, label in enumerate(distinct)}
            label_words = split(distinct, index)
            vocab = list(index)
            del index
            # the sums' norms of rows the store has none for come from the exact word vectors
            every = bool(np.isnan(ent_norm).any() or np.isnan(rel_norm).any())
            label_cols = np.unique(label_words.indices)
            words, have, full = _all_word_vectors(conn, vocab, recipe.space, dim,
                                                  np.arange(len(vocab)) if every else None if encoded else label_cols)
            exact = full if every else None
            label_exact = full[label_cols] if every else full
        finally:
            conn.execute("COMMIT")
    shape = (entity_words.shape[0], len(vocab))
    entity_words = sp.csr_matrix((entity_words.data, entity_words.indices, entity_words.indptr), shape=shape)
    label_words = sp.csr_matrix((label_words.data, label_words.indices, label_words.indptr),
                                shape=(len(distinct), len(vocab)))
    missing = (~have).astype(np.float32)
    ent_lost = np.asarray(entity_words @ missing > 0).ravel()
    lab_lost = np.asarray(label_words @ missing > 0).ravel()
    rel_label = np.fromiter((at[label] for label in labels), dtype=np.int64, count=len(labels))
    if encoded:
        ent_norm[ent_lost] = 0.0
    new_ent = np.flatnonzero(np.isnan(ent_norm))
    if new_ent.size:
        ent_norm[new_ent] = _sum_norms(entity_words[new_ent], exact, ent_lost[new_ent])
    label_norm = (~lab_lost).astype(np.float64) if encoded else \
        _sum_norms(label_words[:, label_cols], label_exact, lab_lost)
    search = ComposedSearch(words, vocab, WordRows(reader, recipe.space, dim), entity_words, ent_norm, np.zeros(0),
                            label_words, label_norm, np.zeros(0), rel_label,
                            np.asarray(rel_src, dtype=np.int64), np.asarray(rel_dst, dtype=np.int64), rel_norm,
                            np.zeros(0), names, distinct, missing, encoded)
    new_rel = np.flatnonzero(np.isnan(rel_norm))
    if new_rel.size:
        rel_norm[new_rel] = _relation_norms(search, new_rel, exact)
    del exact
    # per word: float16's rounding (2^-11 of |w|, for a unit q), the float32 product's, and a float16 product's
    longest = max((float(np.linalg.norm(words[lo : lo + NORM_ROWS].astype(np.float32), axis=1).max())
                   for lo in range(0, words.shape[0], NORM_ROWS)), default=0.0)
    search.half_product = half_mv_holds(words[:NORM_ROWS], ERR + HALF_PRODUCT * longest)  # as HALF_PRODUCT assumes
    per_word = ERR + (HALF + (HALF_PRODUCT if search.half_product else 0.0)) * longest
    lengths = np.diff(entity_words.indptr).astype(np.float64)
    search.entity_err = ERR + per_word * _over(lengths, ent_norm)
    search.label_err = ERR + per_word * _over(np.diff(label_words.indptr).astype(np.float64), search.label_norm)
    parts = search.entity_err[search.rel_src] + search.label_err[rel_label] + search.entity_err[search.rel_dst]
    search.rel_err = ERR + _over(parts + 3 * ERR, rel_norm)
    if new_ent.size or new_rel.size:
        _write_norms(path, settings, {"entity_norms": (entity_ids[new_ent], ent_norm[new_ent]),
                                      "relation_norms": (rel_ids[new_rel], rel_norm[new_rel])}, replace=not fresh)
    return search
