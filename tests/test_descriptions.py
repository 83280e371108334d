"""Relation descriptions stored only where they are not derivable (schema 8): every write keeps what each
relation's description reads as, so a store reads exactly as one that stores every description as text."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from backends import sqlite_before_machines
from pathweaver.ingest.pipeline import Indexer
from pathweaver.store import graph_writes as gw
from pathweaver.store import schema
from pathweaver.store import writes as w
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader
from pathweaver.store.records import RELATION_ROWS
from test_incremental import random_step, settings
from twin_vectors import TwinVectors

CORPUS = Path(__file__).parent / "corpus"


def descriptions(db: Database) -> dict[tuple[str, str, str], str]:
    """{(subject, object, label): description as read} of every relation, by SQL and by the snapshot."""
    by_sql = dict(((a, b, label), d) for a, b, label, d in db.conn.execute(
        f"SELECT s.name, t.name, r.label, r.description FROM {RELATION_ROWS} r JOIN entities s ON s.id = r.src_id "
        "JOIN entities t ON t.id = r.dst_id"))
    snap = StoreReader(db).snapshot()
    by_snapshot = {(snap.entity_names[a], snap.entity_names[b], label): d for a, b, label, d in zip(
        snap.rel_src.tolist(), snap.rel_dst.tolist(), snap.rel_labels, snap.rel_descriptions, strict=True)}
    assert by_sql == by_snapshot
    return by_sql


def stored_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``ensure_relations`` store every new description as text (what every write did before schema 8):
    its sources are inserted after it, by ``insert_relation_sources``."""
    original = gw.ensure_relations

    def ensure(conn, rows, sources=()):  # type: ignore[no-untyped-def]
        ids = original(conn, rows)
        gw.insert_relation_sources(conn, [(ids[key], cid, start, end) for key, cid, start, end in sources])
        return ids

    monkeypatch.setattr(gw, "ensure_relations", ensure)


CASES = [(seed, "statistical") for seed in range(6)] + [(seed, "names,ner") for seed in range(3)]


@pytest.mark.parametrize(("seed", "entities"), CASES)
def test_descriptions_read_as_if_every_one_were_stored(seed: int, entities: str, tmp_path: Path, embedder,  # type: ignore[no-untyped-def]
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Random adds, edits, retitles, renames, deletes and refreshes, applied to a store and to one that stores
    every description as text: after each step both read the same description for every relation."""
    rng = random.Random(1000 + seed)
    folder = tmp_path / "notes"
    folder.mkdir()
    derived_db, text_db = Database(tmp_path / "derived"), Database(tmp_path / "text")
    twins = TwinVectors(embedder)  # the text store's model calls repeat the derived store's: one pass for both
    derived = Indexer(derived_db, settings(tmp_path / "derived", entities), twins)
    text = Indexer(text_db, settings(tmp_path / "text", entities), twins)
    nulls = seen = 0
    try:
        for _ in range(rng.randint(5, 9)):
            changed, removed = random_step(rng, folder)
            how = rng.random()
            for indexer in (derived, text):
                with monkeypatch.context() as m:
                    if indexer is text:
                        stored_as_text(m)
                    if how < 0.4:
                        indexer.index_paths([folder])
                    else:
                        indexer.apply_changes(changed, removed)
                    if how > 0.8:
                        indexer.refresh()
            want = descriptions(text_db)
            assert descriptions(derived_db) == want
            assert text_db.conn.execute("SELECT count(*) FROM relations WHERE description IS NULL").fetchone()[0] == 0
            nulls += derived_db.conn.execute("SELECT count(*) FROM relations WHERE description IS NULL").fetchone()[0]
            seen += len(want)
    finally:
        derived_db.close()
        text_db.close()
    assert nulls > 0 or not seen  # the derived store did derive


def test_a_source_in_a_lower_chunk_or_a_lost_first_source_keeps_the_description(tmp_path: Path) -> None:
    """The write functions themselves: a NULL description reads its lowest source's sentence; a source added in a
    lower chunk, or the lowest source's chunk deleted, leave it reading the sentence it was inserted with."""
    texts = ["Curie worked in Paris.", "Marie Curie lived in Paris.", "Paris was home to Marie Curie."]
    with Database(tmp_path / "store") as db:
        db.ensure_embedding("test-model", 4)
        with db.write() as conn:
            docs = [w.upsert_document(conn, f"/n/{i}.md", title=str(i)) for i in range(3)]
            cids = [w.insert_chunks(conn, doc, str(i), [w.ChunkRow(0, 0, len(t), 5, t, "", {}, 5)],
                                    np.eye(4, dtype=np.float32)[i : i + 1])[0]
                    for i, (doc, t) in enumerate(zip(docs, texts, strict=True))]
            ids = gw.ensure_entities(conn, {"marie curie": "ngram", "paris": "ngram"}, {})
            one, two = (ids["marie curie"], ids["paris"], "lived in"), (ids["paris"], ids["marie curie"], "home to")
            gw.ensure_relations(conn, [(one, "cooccur", texts[1]), (two, "cooccur", texts[1])],
                               [(one, cids[1], 0, len(texts[1])), (two, cids[1], 0, len(texts[1])),
                                (two, cids[2], 0, len(texts[2]))])
            assert conn.execute("SELECT count(*) FROM relations WHERE description IS NULL").fetchone()[0] == 2
        assert descriptions(db) == {("marie curie", "paris", "lived in"): texts[1], ("paris", "marie curie", "home to"):
                                    texts[1]}
        with db.write() as conn:  # a source in a lower chunk than the first: "lived in" would read texts[0]
            gw.insert_relation_sources(conn, [(gw.ensure_relations(conn, [(one, "cooccur", "")])[one], cids[0], 0,
                                              len(texts[0]))])
            w.delete_document_chunks(conn, docs[1])  # the first source of "home to" goes: it would read texts[2]
        assert descriptions(db) == {("marie curie", "paris", "lived in"): texts[1], ("paris", "marie curie", "home to"):
                                    texts[1]}
        with db.write() as conn:  # a new relation whose first row is not its lowest source's sentence keeps its text
            three = (ids["paris"], ids["marie curie"], "in")
            gw.ensure_relations(conn, [(three, "cooccur", "other")], [(three, cids[0], 0, len(texts[0]))])
        assert descriptions(db)[("paris", "marie curie", "in")] == "other"


def test_migration_keeps_every_description_and_shrinks_the_file(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """A schema-7 store (every description stored as text, the triple-text index written) migrates to NULL where
    the description is derivable and reads the same descriptions and snapshot; VACUUM shrinks the file."""
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    path = tmp_path / "store"
    with Database(path) as db:
        Indexer(db, settings(path), embedder).index_paths([notes])
        assert db.conn.execute("SELECT count(*) FROM relations WHERE description IS NULL").fetchone()[0] > 0
        with db.write() as conn:  # what schema 7 kept: every description as text, and relations_fts
            conn.execute(f"UPDATE relations AS r SET description = {schema.DESCRIPTION} WHERE r.description IS NULL")
            conn.execute("UPDATE relations SET description = 'not the sentence' WHERE id = (SELECT min(id) "
                         "FROM relations WHERE kind = 'cooccur')")
            conn.execute("CREATE VIRTUAL TABLE relations_fts USING fts5(text, content='', contentless_delete=1)")
            for big in range(30):  # enough text that dropping it frees pages
                conn.execute("INSERT INTO relations_fts(rowid, text) SELECT id + ?, description FROM relations",
                             (10**6 * big,))
            conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
        want = descriptions(db)
        assert "not the sentence" in want.values()
        with db.write(bump_version=False) as conn:  # and without schema 11's tables, read above
            conn.execute("DROP TABLE embeds")
            conn.execute("ALTER TABLE chunks DROP COLUMN cite_doc")
    sqlite_before_machines(path / "pathweaver.db", 7)  # and schema 12's machine key
    size = (path / "pathweaver.db").stat().st_size
    with Database(path) as db:  # migrates
        assert db.get_meta("schema_version") == str(schema.SCHEMA_VERSION)
        assert db.conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE 'relations_fts%'").fetchone()[0] == 0
        assert descriptions(db) == want
        kept = db.conn.execute("SELECT description FROM relations WHERE description IS NOT NULL").fetchall()
        assert kept == [("not the sentence",)]
    assert (path / "pathweaver.db").stat().st_size < size
