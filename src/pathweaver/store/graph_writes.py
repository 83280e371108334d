"""The store's writes of the derived graph: entities, mentions, relations and their sources and descriptions,
synonyms, the name layer's rows, and the garbage collection of what lost its support. Small functions called
inside ``Database.write()``, like ``store.writes``.

A relation's description is stored only where it is not its lowest-chunk-id source's sentence
(``schema.DESCRIPTION``); every function that adds or removes sources keeps what it reads as.
``collect_garbage`` removes what lost its support (relations without sources, entities without mentions or
relations) in the caller's transaction, so no orphan row survives a commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pathweaver.store.bulk import in_batches, insert_texts, next_ids
from pathweaver.store.db import Connection
from pathweaver.store.schema import FIRST_SOURCE_SENTENCE, span_sentence


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
    """Look the names up and give the missing ones the ids their inserts will get (``next_ids``), without
    writing: a refresh pairs synonyms by id while another thread writes the rows."""
    names = list(names)
    existing: dict[str, tuple[int, str]] = {}
    for part in in_batches(names):
        marks = ",".join("?" * len(part))
        for eid, name, kind in conn.execute(f"SELECT id, name, kind FROM entities WHERE name IN ({marks})", part):
            existing[name] = (int(eid), kind)
    ids = {name: eid for name, (eid, _) in existing.items()}
    new = [n for n in names if n not in existing]
    ids.update(zip(new, next_ids(conn, "entities", len(new)), strict=True))
    return EntityPlan({n: ids[n] for n in names}, existing, new)


def insert_entities(conn: Connection, kinds: Mapping[str, str], rank: Mapping[str, int], plan: EntityPlan) -> None:
    """Insert ``plan``'s new entities with their ids and FTS rows (one ``executemany`` each, not one insert per
    row); a stronger kind (lower ``rank``) replaces an existing entity's weaker one."""
    ids = plan.ids
    conn.executemany("INSERT INTO entities(id, name, kind) VALUES (?, ?, ?)", [(ids[n], n, kinds[n]) for n in plan.new])
    if plan.new:  # the new ids are one run (``next_ids``)
        insert_texts(conn, "entities_fts", "name", ids[plan.new[0]], plan.new)
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
    ids.update(zip(fresh, next_ids(conn, "relations", len(fresh)), strict=True))
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




def insert_relation_sources(conn: Connection, rows: Iterable[tuple[int, int, int, int]]) -> None:
    """Provenance of relations as (relation_id, chunk_id, start, end): the span of the supporting sentence in the
    document's parsed text (``schema.SOURCE_SENTENCE`` cuts it from the chunk); a chunk's first sentence that
    supports a relation is kept. A relation whose NULL description is its lowest source's sentence gets that
    sentence stored first when a row comes in a lower chunk."""
    rows = list(rows)
    lowest: dict[int, int] = {}
    rel_ids = sorted({r[0] for r in rows})
    for part in in_batches(rel_ids):
        marks = ",".join("?" * len(part))
        lowest.update(conn.execute(
            "SELECT s.relation_id, min(s.chunk_id) FROM relation_sources s JOIN relations r ON r.id = s.relation_id "
            f"WHERE r.description IS NULL AND s.relation_id IN ({marks}) GROUP BY s.relation_id", part).fetchall())
    lowered = sorted({rid for rid, cid, _, _ in rows if rid in lowest and cid < lowest[rid]})
    conn.executemany(f"UPDATE relations AS r SET description = {FIRST_SOURCE_SENTENCE} WHERE r.id = ?",
                     [(rid,) for rid in lowered])
    conn.executemany("INSERT OR IGNORE INTO relation_sources(relation_id, chunk_id, start, end) VALUES (?, ?, ?, ?)",
                     rows)


def store_descriptions_of(conn: Connection, chunk_ids: Sequence[int]) -> None:
    """Before the sources in ``chunk_ids`` go: store the description of each relation that reads it from one of
    them (NULL, lowest source among them), so that it keeps reading the same."""
    for part in in_batches(list(chunk_ids)):
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
    store_descriptions_of(conn, chunk_ids)
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
    """Remove relations and their stored norms (``store.composed``): a relation id can be given again later."""
    params = [(i,) for i in ids]
    conn.executemany("DELETE FROM relation_norms WHERE id = ?", params)
    conn.executemany("DELETE FROM relations WHERE id = ?", params)


def delete_entities(conn: Connection, ids: Sequence[int]) -> None:
    """Remove entities; their relations (with FTS rows), mentions, synonyms and stored norms go too."""
    params = [(i,) for i in ids]
    rel_ids: list[int] = []
    for (eid,) in params:
        rel_ids += [r[0] for r in conn.execute("SELECT id FROM relations WHERE src_id = ? OR dst_id = ?", (eid, eid))]
    delete_relations(conn, sorted(set(rel_ids)))
    conn.executemany("DELETE FROM entities_fts WHERE rowid = ?", params)
    conn.executemany("DELETE FROM entity_norms WHERE id = ?", params)
    conn.executemany("DELETE FROM entities WHERE id = ?", params)
