"""Every INSERT/UPDATE/DELETE of the store, as small functions called inside ``Database.write()``.

FTS5 and vec0 virtual tables do not follow foreign keys, so every function that removes a chunk or entity also
removes its FTS and vector rows (rowid = owning row id). A relation's description is stored only where it is not
its lowest-chunk-id source's sentence (``schema.DESCRIPTION``); every function that adds or removes sources keeps
what it reads as. ``collect_garbage`` removes what lost its
support (relations without sources, entities without mentions or relations) in the caller's transaction, so no
orphan row survives a commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pathweaver.store.db import Connection
from pathweaver.store.schema import FIRST_SOURCE_SENTENCE, span_sentence

_CHUNK_BATCH = 500
_JSON_ROWS = 100_000  # texts per json_each statement


@dataclass(frozen=True)
class ChunkRow:
    """One chunk to insert; ``grams`` are candidate n-gram counts, ``n_words`` is |t| (AGRAG Eq. 2); ``start``/``end``
    index the parsed text, ``file_start``/``file_end`` the decoded file (None: see ``locator``)."""

    ord: int
    start: int
    end: int
    n_tokens: int
    text: str
    heading: str
    grams: Mapping[str, int]
    n_words: int
    file_start: int | None = None
    file_end: int | None = None
    locator: str = ""


def text_hash(text: str, space: str = "") -> str:
    """Key of ``embed_cache``: sha1 of the UTF-8 text, or of ``space``, a 0x1f byte and the text for vectors made
    another way than float32 model passes (``space`` = "bfloat16": a bfloat16 word vector never serves as a chunk's)."""
    return hashlib.sha1((f"{space}\x1f{text}" if space else text).encode("utf-8")).hexdigest()


def _blob(vec: np.ndarray) -> bytes:
    return np.ascontiguousarray(vec, dtype=np.float32).tobytes()


def _chunks(items: Sequence[object], size: int = _CHUNK_BATCH) -> Iterable[Sequence[object]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _insert_texts(conn: Connection, table: str, column: str, first: int, texts: Sequence[str]) -> None:
    """FTS rows ``(first + k, texts[k])`` in one statement per block over ``json_each``: no Python per row, and the
    GIL is free while SQLite works (a refresh writes its rows while another thread pairs synonyms). Rows with
    several columns stay with ``executemany``: reading each column back out of a JSON row costs more than
    binding it."""
    for lo in range(0, len(texts), _JSON_ROWS):
        conn.execute(f"INSERT INTO {table}(rowid, {column}) SELECT ?1 + key, value FROM json_each(?2)",
                     (first + lo, json.dumps(list(texts[lo : lo + _JSON_ROWS]), ensure_ascii=False)))


# -- meta ----------------------------------------------------------------------------------------------------
def set_meta(conn: Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value)
    )


def add_meta_int(conn: Connection, key: str, delta: int) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + CAST(excluded.value AS INTEGER)",
        (key, str(delta)),
    )


# -- embed cache ---------------------------------------------------------------------------------------------
def _cached_by_text(conn: Connection, table: str, column: str, texts: Iterable[str], space: str) -> dict[str, Any]:
    """``column`` of the rows of a cache ``table`` keyed by ``text_hash(text, space)``, for the texts that have one."""
    by_hash = {text_hash(t, space): t for t in texts}
    out: dict[str, Any] = {}
    keys = list(by_hash)
    for part in _chunks(keys):
        marks = ",".join("?" * len(part))
        for h, value in conn.execute(f"SELECT text_hash, {column} FROM {table} WHERE text_hash IN ({marks})", part):
            out[by_hash[h]] = value
    return out


def cache_get(conn: Connection, texts: Iterable[str], space: str = "") -> dict[str, np.ndarray]:
    """Cached vectors for those of ``texts`` that have one (in key space ``space``, see ``text_hash``)."""
    blobs = _cached_by_text(conn, "embed_cache", "vector", texts, space)
    return {t: np.frombuffer(blob, dtype=np.float32) for t, blob in blobs.items()}


def cache_put(conn: Connection, vectors: Mapping[str, np.ndarray], space: str = "") -> None:
    """Cache vectors by text (in key space ``space``), in key order: the rows then go to the table's B-tree in
    its own order instead of at random."""
    conn.executemany(
        "INSERT OR IGNORE INTO embed_cache(text_hash, vector) VALUES (?, ?)",
        sorted((text_hash(t, space), _blob(v)) for t, v in vectors.items()),
    )


def ner_cache_get(conn: Connection, texts: Iterable[str], space: str) -> dict[str, list[tuple[str, str]]]:
    """Cached entity spans [(label, text)] for those of ``texts`` that have them (``space`` = "ner:<model>")."""
    found = _cached_by_text(conn, "ner_cache", "spans", texts, space)
    return {t: [(label, text) for label, text in json.loads(spans)] for t, spans in found.items()}


def ner_cache_put(conn: Connection, spans: Mapping[str, Sequence[tuple[str, str]]], space: str) -> None:
    """Cache entity spans by text, in key order (as ``cache_put``)."""
    conn.executemany(
        "INSERT OR IGNORE INTO ner_cache(text_hash, spans) VALUES (?, ?)",
        sorted((text_hash(t, space), json.dumps([list(x) for x in v], ensure_ascii=False)) for t, v in spans.items()),
    )


@contextlib.contextmanager
def savepoint(conn: Connection) -> Iterator[None]:
    """A transaction nested in the open one: when the block raises, what it wrote is undone and the rest stays."""
    conn.execute("SAVEPOINT pathweaver_one")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO pathweaver_one")
        conn.execute("RELEASE pathweaver_one")
        raise
    conn.execute("RELEASE pathweaver_one")


# -- folders -------------------------------------------------------------------------------------------------
def set_folder(conn: Connection, path: str, state: str | None, now: float) -> None:
    """Record ``path`` as 'watched', 'indexed' or 'removed'; None forgets it."""
    if state is None:
        conn.execute("DELETE FROM folders WHERE path = ?", (path,))
        return
    conn.execute("INSERT INTO folders(path, state, changed_at) VALUES (?, ?, ?) ON CONFLICT(path) DO UPDATE SET "
                 "state = excluded.state, changed_at = excluded.changed_at", (path, state, now))


def readmit_folder(conn: Connection, path: str) -> None:
    """Forget every 'removed' folder at or under ``path`` (it is being added again)."""
    conn.execute("DELETE FROM folders WHERE state = 'removed' AND (path = ? OR substr(path, 1, length(?) + 1) = ?)",
                 (path, path, path.rstrip("/") + "/"))


# -- documents -----------------------------------------------------------------------------------------------
def upsert_document(
    conn: Connection,
    path: str,
    *,
    title: str = "",
    content_hash: str = "",
    mtime: float = 0.0,
    size: int = 0,
    status: str = "indexed",
    reason: str = "",
    indexed_at: float = 0.0,
    headings: Sequence[tuple[int, str]] = (),
    links: Sequence[str] = (),
) -> int:
    """Insert or update the row of ``path``; returns its id (kept across updates)."""
    conn.execute(
        "INSERT INTO documents(path, title, content_hash, mtime, size, status, reason, indexed_at, headings, links) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET title = excluded.title, "
        "content_hash = excluded.content_hash, mtime = excluded.mtime, size = excluded.size, "
        "status = excluded.status, reason = excluded.reason, indexed_at = excluded.indexed_at, "
        "headings = excluded.headings, links = excluded.links",
        (path, title, content_hash, mtime, size, status, reason, indexed_at,
         json.dumps([list(h) for h in headings]), json.dumps(list(links))),
    )
    return int(conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()[0])


def update_document_stat(conn: Connection, doc_id: int, mtime: float, size: int) -> None:
    conn.execute("UPDATE documents SET mtime = ?, size = ? WHERE id = ?", (mtime, size, doc_id))


def rename_document(conn: Connection, doc_id: int, new_path: str, mtime: float, size: int, title: str,
                    headings: Sequence[tuple[int, str]], links: Sequence[str]) -> None:
    """Move a document row to ``new_path`` in place: chunk ids, chunk vectors and mentions stay."""
    conn.execute(
        "UPDATE documents SET path = ?, mtime = ?, size = ?, title = ?, headings = ?, links = ? WHERE id = ?",
        (new_path, mtime, size, title, json.dumps([list(h) for h in headings]), json.dumps(list(links)), doc_id),
    )
    rows = conn.execute("SELECT id, text FROM chunks WHERE doc_id = ?", (doc_id,)).fetchall()
    conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", [(cid,) for cid, _ in rows])
    conn.executemany(
        "INSERT INTO chunks_fts(rowid, text, title) VALUES (?, ?, ?)", [(cid, text, title) for cid, text in rows]
    )


def delete_document(conn: Connection, doc_id: int) -> int:
    """Remove a document, its chunks and everything hanging off them; returns the number of chunks removed."""
    n = delete_document_chunks(conn, doc_id)
    conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
    return n


# -- chunks --------------------------------------------------------------------------------------------------
def insert_chunks(conn: Connection, doc_id: int, title: str, rows: Sequence[ChunkRow], vecs: np.ndarray,
                  count_grams: bool = True) -> list[int]:
    """Insert chunks with their FTS row, vector row and (unless ``count_grams`` is False: the caller adds a whole
    batch's with ``add_gram_df``) gram_df increments; returns the new chunk ids."""
    ids: list[int] = []
    for row, vec in zip(rows, vecs, strict=True):
        cur = conn.execute(
            "INSERT INTO chunks(doc_id, ord, start, end, n_tokens, text, heading, grams, n_words, file_start, file_end, "
            "locator) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (doc_id, row.ord, row.start, row.end, row.n_tokens, row.text, row.heading,
             json.dumps(dict(row.grams), ensure_ascii=False, sort_keys=True), row.n_words, row.file_start,
             row.file_end, row.locator),
        )
        cid = int(cur.lastrowid)
        ids.append(cid)
        conn.execute("INSERT INTO chunks_fts(rowid, text, title) VALUES (?, ?, ?)", (cid, row.text, title))
        conn.execute("INSERT INTO chunk_vec(rowid, embedding) VALUES (?, ?)", (cid, _blob(vec)))
    if count_grams:
        add_gram_df(conn, gram_counts(rows))
    return ids


def gram_counts(rows: Iterable[ChunkRow]) -> Counter[str]:
    """In how many of ``rows`` each gram occurs (their gram_df increments)."""
    counts: Counter[str] = Counter()
    for row in rows:
        counts.update(row.grams.keys())
    return counts


def add_gram_df(conn: Connection, counts: Mapping[str, int]) -> None:
    """Add ``counts`` to gram_df, in key order: one upsert per gram, not per chunk and gram, and the B-tree
    visited in its own order."""
    conn.executemany("INSERT INTO gram_df(gram, df) VALUES (?, ?) ON CONFLICT(gram) DO UPDATE SET df = df + excluded.df",
                     sorted(counts.items()))


def delete_document_chunks(conn: Connection, doc_id: int) -> int:
    """Remove a document's chunks (mentions and relation sources cascade), their FTS/vector rows and their df."""
    rows = conn.execute("SELECT id, grams FROM chunks WHERE doc_id = ?", (doc_id,)).fetchall()
    _store_descriptions_of(conn, [cid for cid, _ in rows])
    for cid, grams_json in rows:
        grams = [(g,) for g in json.loads(grams_json)]
        conn.executemany("UPDATE gram_df SET df = df - 1 WHERE gram = ?", grams)
        conn.executemany("DELETE FROM gram_df WHERE gram = ? AND df <= 0", grams)
        conn.execute("DELETE FROM chunks_fts WHERE rowid = ?", (cid,))
        conn.execute("DELETE FROM chunk_vec WHERE rowid = ?", (cid,))
    conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
    return len(rows)


# -- entities and relations ----------------------------------------------------------------------------------
def ensure_entities(conn: Connection, kinds: Mapping[str, str], rank: Mapping[str, int]) -> dict[str, int]:
    """Ids of the named entities, inserting missing ones (with FTS rows) in ``kinds`` order; a stronger kind
    (lower ``rank``) replaces a weaker one. Their vectors are made from ``embed_cache`` when read
    (``store.graphvecs``): the caller has cached what they need."""
    planned = plan_entities(conn, kinds)
    insert_entities(conn, kinds, rank, planned)
    return planned.ids


@dataclass(frozen=True)
class EntityPlan:
    """The ids named entities have or will get: ``ids`` for all, ``existing`` (id, kind) for those already
    stored, ``new`` the others in insertion order."""

    ids: dict[str, int]
    existing: dict[str, tuple[int, str]]
    new: list[str]


def plan_entities(conn: Connection, names: Iterable[str]) -> EntityPlan:
    """Look the names up and give the missing ones the ids their inserts will get (``_next_ids``), without
    writing: a refresh pairs synonyms by id while another thread writes the rows."""
    names = list(names)
    existing: dict[str, tuple[int, str]] = {}
    for part in _chunks(names):
        marks = ",".join("?" * len(part))
        for eid, name, kind in conn.execute(f"SELECT id, name, kind FROM entities WHERE name IN ({marks})", part):
            existing[name] = (int(eid), kind)
    ids = {name: eid for name, (eid, _) in existing.items()}
    new = [n for n in names if n not in existing]
    ids.update(zip(new, _next_ids(conn, "entities", len(new)), strict=True))
    return EntityPlan({n: ids[n] for n in names}, existing, new)


def insert_entities(conn: Connection, kinds: Mapping[str, str], rank: Mapping[str, int], plan: EntityPlan) -> None:
    """Insert ``plan``'s new entities with their ids and FTS rows (one ``executemany`` each, not one insert per
    row); a stronger kind (lower ``rank``) replaces an existing entity's weaker one."""
    ids = plan.ids
    conn.executemany("INSERT INTO entities(id, name, kind) VALUES (?, ?, ?)", [(ids[n], n, kinds[n]) for n in plan.new])
    if plan.new:  # the new ids are one run (``_next_ids``)
        _insert_texts(conn, "entities_fts", "name", ids[plan.new[0]], plan.new)
    conn.executemany("UPDATE entities SET kind = ? WHERE id = ?",
                     [(kinds[n], eid) for n, (eid, old) in plan.existing.items()
                      if rank.get(kinds[n], 9) < rank.get(old, 9)])


def set_entity_kinds(conn: Connection, kinds: Mapping[int, str]) -> None:
    conn.executemany("UPDATE entities SET kind = ? WHERE id = ? AND kind <> ?", [(k, i, k) for i, k in kinds.items()])


def insert_mentions(conn: Connection, rows: Iterable[tuple[int, int, int, float]]) -> None:
    """(entity_id, chunk_id, count, score) rows; an existing mention keeps the larger count and score."""
    conn.executemany(
        "INSERT INTO mentions(entity_id, chunk_id, count, score) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(entity_id, chunk_id) DO UPDATE SET count = max(count, excluded.count), "
        "score = max(score, excluded.score)",
        list(rows),
    )


RelationKey = tuple[int, int, str]  # (src_id, dst_id, label)
SCAN_RELATIONS_OVER = 2000  # look keys up in one scan of the table beyond this many (a refresh), else one by one


SourceRow = tuple[RelationKey, int, int, int]  # (relation key, chunk_id, start, end)
FirstSource = tuple[int, int, int]  # (chunk_id, start, end) of a relation's lowest-chunk-id source


def ensure_relations(conn: Connection, rows: Sequence[tuple[RelationKey, str, str]],
                     sources: Sequence[SourceRow] = ()) -> dict[RelationKey, int]:
    """Ids of relations given as (key, kind, description); missing ones are inserted in order, with the ids SQLite
    would give them, then ``sources`` (``insert_relation_sources``) by key. A key given twice keeps its first kind
    and description. A new relation's description is stored NULL when it is the sentence of its lowest-chunk-id
    source among ``sources`` (``schema.DESCRIPTION`` reads it back from there), else as text."""
    wanted = list(dict.fromkeys(r[0] for r in rows))
    ids: dict[RelationKey, int] = {}
    if len(wanted) > SCAN_RELATIONS_OVER:
        want = set(wanted)
        for rid, a, b, label in conn.execute("SELECT id, src_id, dst_id, label FROM relations"):
            if (a, b, label) in want:
                ids[(a, b, label)] = int(rid)
    else:
        for key in wanted:
            row = conn.execute("SELECT id FROM relations WHERE src_id = ? AND dst_id = ? AND label = ?", key).fetchone()
            if row is not None:
                ids[key] = int(row[0])
    fresh: dict[RelationKey, tuple[RelationKey, str, str]] = {}
    for row in rows:
        if row[0] not in ids and row[0] not in fresh:
            fresh[row[0]] = row
    ids.update(zip(fresh, _next_ids(conn, "relations", len(fresh)), strict=True))
    first: dict[RelationKey, FirstSource] = {}
    for key, cid, start, end in sources:  # the row INSERT OR IGNORE keeps in the lowest chunk
        if key in fresh and (key not in first or cid < first[key][0]):
            first[key] = (cid, start, end)
    conn.executemany(
        "INSERT INTO relations(id, src_id, dst_id, label, kind, description) VALUES (?1, ?2, ?3, ?4, ?5, "
        f"CASE WHEN ?6 = (SELECT {span_sentence('?8', '?9')} FROM chunks c WHERE c.id = ?7) "
        "THEN NULL ELSE ?6 END)",
        [(ids[key], *key, kind, description, *first.get(key, (None, None, None)))
         for key, kind, description in fresh.values()])
    if sources:
        insert_relation_sources(conn, [(ids[key], cid, start, end) for key, cid, start, end in sources])
    return ids


def _next_ids(conn: Connection, table: str, n: int) -> range:
    """The ``n`` ids SQLite would give the next rows of ``table`` (above every id in it and, for an
    AUTOINCREMENT table, every id it ever gave), so that rows can be inserted in bulk with explicit ids."""
    top = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
    seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    start = max(int(top), int(seq[0]) if seq else 0) + 1
    return range(start, start + n)


def insert_relation_sources(conn: Connection, rows: Iterable[tuple[int, int, int, int]]) -> None:
    """Provenance of relations as (relation_id, chunk_id, start, end): the span of the supporting sentence in the
    document's parsed text (``schema.SOURCE_SENTENCE`` cuts it from the chunk); a chunk's first sentence that
    supports a relation is kept. A relation whose NULL description is its lowest source's sentence gets that
    sentence stored first when a row comes in a lower chunk."""
    rows = list(rows)
    lowest: dict[int, int] = {}
    rel_ids = sorted({r[0] for r in rows})
    for part in _chunks(rel_ids):
        marks = ",".join("?" * len(part))
        lowest.update(conn.execute(
            "SELECT s.relation_id, min(s.chunk_id) FROM relation_sources s JOIN relations r ON r.id = s.relation_id "
            f"WHERE r.description IS NULL AND s.relation_id IN ({marks}) GROUP BY s.relation_id", part).fetchall())
    lowered = sorted({rid for rid, cid, _, _ in rows if rid in lowest and cid < lowest[rid]})
    conn.executemany(f"UPDATE relations AS r SET description = {FIRST_SOURCE_SENTENCE} WHERE r.id = ?",
                     [(rid,) for rid in lowered])
    conn.executemany("INSERT OR IGNORE INTO relation_sources(relation_id, chunk_id, start, end) VALUES (?, ?, ?, ?)",
                     rows)


def _store_descriptions_of(conn: Connection, chunk_ids: Sequence[int]) -> None:
    """Before the sources in ``chunk_ids`` go: store the description of each relation that reads it from one of
    them (NULL, lowest source among them), so that it keeps reading the same."""
    for part in _chunks(list(chunk_ids)):
        marks = ",".join("?" * len(part))
        conn.execute(
            f"UPDATE relations AS r SET description = {FIRST_SOURCE_SENTENCE} WHERE r.description IS NULL "
            f"AND r.id IN (SELECT relation_id FROM relation_sources WHERE chunk_id IN ({marks})) "
            f"AND (SELECT min(chunk_id) FROM relation_sources WHERE relation_id = r.id) IN ({marks})",
            [*part, *part])


def first_sources(conn: Connection) -> dict[int, FirstSource]:
    """The lowest-chunk-id source of every relation whose description is NULL (what it reads as)."""
    out: dict[int, FirstSource] = {}
    for rid, cid, start, end in conn.execute(
            "SELECT s.relation_id, s.chunk_id, s.start, s.end FROM relation_sources s JOIN relations r "
            "ON r.id = s.relation_id WHERE r.description IS NULL ORDER BY s.relation_id DESC, s.chunk_id DESC"):
        out[rid] = (cid, start, end)  # the last row of a relation is its lowest chunk's
    return out


def settle_descriptions(conn: Connection, before: Mapping[int, FirstSource]) -> int:
    """After a relation's sources were replaced (``clear_derived``, then rows written again), store the
    description of each relation of ``before`` whose lowest source moved: the sentence at its old one, which it
    read as. The chunks of ``before`` must still exist (a refresh deletes none). Returns how many were stored."""
    now = first_sources(conn)
    moved = [(*source, rid) for rid, source in before.items() if now.get(rid) != source]
    conn.executemany(f"UPDATE relations SET description = (SELECT {span_sentence('?2', '?3')} "
                     "FROM chunks c WHERE c.id = ?1) WHERE id = ?4 AND description IS NULL", moved)
    return len(moved)


def insert_synonyms(conn: Connection, pairs: Iterable[tuple[int, int, float]]) -> None:
    """Synonym edges (a_id < b_id, cos), AGRAG Eq. 5."""
    conn.executemany(
        "INSERT INTO synonyms(a_id, b_id, cos) VALUES (?, ?, ?) ON CONFLICT(a_id, b_id) DO UPDATE SET cos = excluded.cos",
        [(min(a, b), max(a, b), c) for a, b, c in pairs if a != b],
    )


def clear_derived(conn: Connection) -> dict[int, FirstSource]:
    """Drop all mentions, name mentions and relation sources (refresh re-derives them in the same transaction);
    returns ``first_sources`` as they were, for ``settle_descriptions`` once the sources are written again."""
    before = first_sources(conn)
    conn.execute("DELETE FROM mentions")
    conn.execute("DELETE FROM name_mentions")
    conn.execute("DELETE FROM relation_sources")
    return before


# -- names (extract/names.py) --------------------------------------------------------------------------------
def set_doc_names(conn: Connection, doc_id: int, names: Mapping[str, str],
                  links: Iterable[tuple[str, str]] = ()) -> None:
    """Replace a document's names ({entity name: kind}) and the link texts it writes ((target, name) pairs)."""
    conn.execute("DELETE FROM doc_names WHERE doc_id = ?", (doc_id,))
    conn.executemany("INSERT INTO doc_names(doc_id, name, kind) VALUES (?, ?, ?)",
                     [(doc_id, n, k) for n, k in sorted(names.items())])
    conn.execute("DELETE FROM link_names WHERE doc_id = ?", (doc_id,))
    conn.executemany("INSERT INTO link_names(doc_id, target, name) VALUES (?, ?, ?)",
                     [(doc_id, t, n) for t, n in sorted(set(links))])


def replace_name_mentions(conn: Connection, chunk_ids: Sequence[int], rows: Iterable[tuple[int, int, int]]) -> None:
    """Drop the name mentions of ``chunk_ids`` and insert (entity_id, chunk_id, count) ``rows``."""
    conn.executemany("DELETE FROM name_mentions WHERE chunk_id = ?", [(c,) for c in chunk_ids])
    conn.executemany("INSERT INTO name_mentions(entity_id, chunk_id, count) VALUES (?, ?, ?)", sorted(rows))


def clear_chunk_derived(conn: Connection, chunk_ids: Sequence[int]) -> None:
    """Drop the mentions and relation sources of some chunks (a renamed document's graph is re-derived)."""
    _store_descriptions_of(conn, chunk_ids)
    conn.executemany("DELETE FROM mentions WHERE chunk_id = ?", [(c,) for c in chunk_ids])
    conn.executemany("DELETE FROM relation_sources WHERE chunk_id = ?", [(c,) for c in chunk_ids])


# -- garbage collection --------------------------------------------------------------------------------------
def chunk_dependents(conn: Connection, doc_id: int) -> tuple[set[int], set[int]]:
    """Entity and relation ids that a document's chunks support (the GC candidates when they go)."""
    ents = {r[0] for r in conn.execute(
        "SELECT DISTINCT m.entity_id FROM mentions m JOIN chunks c ON c.id = m.chunk_id WHERE c.doc_id = ?", (doc_id,)
    )}
    rels = {r[0] for r in conn.execute(
        "SELECT DISTINCT s.relation_id FROM relation_sources s JOIN chunks c ON c.id = s.chunk_id WHERE c.doc_id = ?",
        (doc_id,),
    )}
    return ents, rels


def collect_garbage(conn: Connection, entity_ids: Iterable[int] | None = None,
                    relation_ids: Iterable[int] | None = None, keep_named: bool = True) -> dict[str, int]:
    """Remove relations without sources, then entities with neither mentions nor relations (their synonyms
    cascade), with their FTS rows; an entity some document names (``name_rows``) stays unless
    ``keep_named`` is False. With candidate ids only those are checked (plus the endpoints of
    removed relations); with None, the whole store. Returns how many of each were removed."""
    if entity_ids is not None and relation_ids is not None and not entity_ids and not relation_ids:
        return {"relations": 0, "entities": 0}  # a new file's write: nothing lost its support
    rel_sql = "SELECT id, src_id, dst_id FROM relations r WHERE NOT EXISTS " \
              "(SELECT 1 FROM relation_sources s WHERE s.relation_id = r.id)"
    ent_sql = "SELECT id FROM entities e WHERE NOT EXISTS (SELECT 1 FROM mentions m WHERE m.entity_id = e.id) " \
              "AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.src_id = e.id) " \
              "AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.dst_id = e.id)"
    if keep_named:
        ent_sql += " AND NOT EXISTS (SELECT 1 FROM name_rows n WHERE n.name = e.name)"
    if relation_ids is None:
        dead_rels = conn.execute(rel_sql).fetchall()
    else:
        dead_rels = [row for rid in sorted(set(relation_ids))
                     for row in conn.execute(rel_sql + " AND r.id = ?", (rid,)).fetchall()]
    delete_relations(conn, [r[0] for r in dead_rels])
    if entity_ids is None and relation_ids is None:
        dead_ents = [r[0] for r in conn.execute(ent_sql)]
    else:
        cands = set(entity_ids or ()) | {e for r in dead_rels for e in (r[1], r[2])}
        dead_ents = [row[0] for eid in sorted(cands) for row in conn.execute(ent_sql + " AND e.id = ?", (eid,))]
    delete_entities(conn, dead_ents)
    return {"relations": len(dead_rels), "entities": len(dead_ents)}


def delete_relations(conn: Connection, ids: Sequence[int]) -> None:
    conn.executemany("DELETE FROM relations WHERE id = ?", [(i,) for i in ids])


def delete_entities(conn: Connection, ids: Sequence[int]) -> None:
    """Remove entities; their relations (with FTS rows), mentions and synonyms go too."""
    params = [(i,) for i in ids]
    rel_ids: list[int] = []
    for (eid,) in params:
        rel_ids += [r[0] for r in conn.execute("SELECT id FROM relations WHERE src_id = ? OR dst_id = ?", (eid, eid))]
    delete_relations(conn, sorted(set(rel_ids)))
    conn.executemany("DELETE FROM entities_fts WHERE rowid = ?", params)
    conn.executemany("DELETE FROM entities WHERE id = ?", params)
