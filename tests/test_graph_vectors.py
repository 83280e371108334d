"""Entity and relation vectors made from ``embed_cache`` when a snapshot needs them (store/graphvecs.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from backends import sqlite_before_machines
from pathweaver.config import Settings
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models.embedder import get_embedder
from pathweaver.numeric.vectors import compose_phrases, compose_triples
from pathweaver.retrieval.seeds import nearest, top_triples
from pathweaver.service import Pathweaver
from pathweaver.store import schema
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader

CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store that indexed a copy of tests/corpus with the default settings (composed vectors)."""
    base = tmp_path_factory.mktemp("graphvecs")
    notes = base / "notes"
    shutil.copytree(CORPUS, notes)
    with Database(base / "store") as db:
        Indexer(db, Settings(store_dir=base / "store"), get_embedder()).index_paths([notes])
    return base / "store", notes


def test_snapshot_vectors_are_the_indexers_vectors(store: tuple[Path, Path]) -> None:
    """The rows a snapshot makes have the bits of the vectors the indexer made for the same names and triples
    (what the ``entity_vec``/``relation_vec`` tables used to hold)."""
    path, _ = store
    with Database(path) as db:
        snap = StoreReader(db).snapshot()
        assert snap.loaded("entity_vecs") is None and snap.loaded("rel_vecs") is None  # nothing made yet
        indexer = Indexer(db, Settings(store_dir=path), get_embedder())
        triples = [(snap.entity_names[a], snap.rel_labels[r], snap.entity_names[b])
                   for r, (a, b) in enumerate(zip(snap.rel_src.tolist(), snap.rel_dst.tolist(), strict=True))]
        # names and labels composed by the indexer, triples composed from them as it did before schema 5
        made = indexer.inputs.graph_vectors(snap.entity_names + list(dict.fromkeys(snap.rel_labels)), [])
        assert snap.n_entities > 20 and snap.n_relations > 20
        assert snap.entity_vecs.tobytes() == made.rows(snap.entity_names).tobytes()
        assert snap.rel_vecs.tobytes() == compose_triples(triples, made).tobytes()


def test_migration_drops_the_stored_vectors_and_keeps_the_snapshot(store: tuple[Path, Path], tmp_path: Path
                                                                   ) -> None:
    """A store of schema 4, with vec0 tables holding every entity and relation vector and a copy of each relation
    source's sentence, migrates to tables without them (VACUUMed: the file shrinks) and gives the same snapshot
    vectors and the same exported sentences."""
    path, _ = store
    old = tmp_path / "old"
    shutil.copytree(path, old)
    with Database(old) as db:
        snap = StoreReader(db).snapshot()
        want_e, want_r = snap.entity_vecs.copy(), snap.rel_vecs.copy()
        with db.write(bump_version=False) as conn:  # what schema 4 kept: the same rows, stored
            for table, ids, vecs in (("entity_vec", snap.entity_ids, want_e), ("relation_vec", snap.rel_ids, want_r)):
                conn.execute(f"CREATE VIRTUAL TABLE {table} USING vec0(embedding float[{vecs.shape[1]}] "
                             "distance_metric=cosine)")
                for big in range(40):  # enough rows that dropping them frees pages
                    conn.executemany(f"INSERT INTO {table}(rowid, embedding) VALUES (?, ?)",
                                     [(int(i) + 10**6 * big, v.tobytes()) for i, v in zip(ids, vecs, strict=True)])
            # and each relation source's sentence, copied
            conn.execute("ALTER TABLE relation_sources ADD COLUMN sentence TEXT NOT NULL DEFAULT ''")
            conn.execute("UPDATE relation_sources AS s SET sentence = (SELECT substr(c.text, s.start - c.start + 1, "
                         "s.end - s.start) FROM chunks c WHERE c.id = s.chunk_id)")
            conn.execute("DROP VIEW name_rows")  # schema 7's, which a schema-4 store lacks
            conn.execute("DROP TABLE link_names")
            conn.execute("DROP TABLE entity_norms")  # and schema 8's
            conn.execute("DROP TABLE relation_norms")
            conn.execute("DROP TABLE embeds")  # and schema 11's
            conn.execute("ALTER TABLE chunks DROP COLUMN cite_doc")
            conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
        sources = db.conn.execute("SELECT relation_id, chunk_id, start, end, sentence FROM relation_sources "
                                  "ORDER BY relation_id, chunk_id").fetchall()
        assert sources and any(row[4] for row in sources)
    sqlite_before_machines(old / "pathweaver.db", 4)  # and schema 12's machine key
    size = (old / "pathweaver.db").stat().st_size
    StoreReader(Database(old)).cache.clear()
    with Database(old) as db:  # migrates
        assert db.get_meta("schema_version") == str(schema.SCHEMA_VERSION)
        names = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master")}
        assert not names & {"entity_vec", "relation_vec"} and "chunk_vec" in names
        assert db.get_meta("refresh_pending") == "0"  # the settings name the key space: nothing to re-derive
        reader = StoreReader(db)
        reader.cache.clear()
        got = reader.snapshot()
        assert got.entity_vecs.tobytes() == want_e.tobytes() and got.rel_vecs.tobytes() == want_r.tobytes()
        columns, rows = reader.table_rows("relation_sources")  # the sentence, now cut from the chunk text
        assert columns == ["relation_id", "chunk_id", "start", "end", "sentence"] and sorted(rows) == sources
    assert (old / "pathweaver.db").stat().st_size < size


def test_a_dense_query_builds_no_graph_vectors(store: tuple[Path, Path]) -> None:
    """``retrieve --method dense`` runs on the chunks' view; ``ppr`` finds its triple through the composed search
    (``store.composed``) and makes neither table either; a method that reads the tables makes them then."""
    path, _ = store
    pw = Pathweaver.open(path, overrides={"models": {"llm_backend": "none"}})
    try:
        pw.reader.cache.clear()
        out = pw.retrieve_json("Where was Marie Curie born?", "dense", 3)
        assert out["chunks"]
        full = pw.reader.cache.latest()
        assert full is None or (full.loaded("entity_vecs") is None and full.loaded("rel_vecs") is None)
        out = pw.retrieve_json("Where was Marie Curie born?", "ppr", 3)
        snap = pw.reader.cache.latest()
        assert out["triples"] and snap is not None
        assert snap.loaded("rel_vecs") is None and snap.loaded("entity_vecs") is None
        q = pw.embedder.encode_one("Where was Marie Curie born?")
        assert top_triples(snap, q, 5) == nearest(snap, snap.rel_vecs, "relation", q, 5)
        assert snap.loaded("rel_vecs") is not None
    finally:
        pw.close()


def test_compose_phrases_by_length_keeps_the_bits() -> None:
    """Phrases composed a length at a time equal the word-by-word sum in phrase order, alone or in company."""
    rng = np.random.default_rng(0)
    words = {f"w{i}": (v / np.linalg.norm(v)).astype(np.float32) for i, v in enumerate(rng.normal(size=(40, 16)))}
    phrases = [" ".join(f"w{j}" for j in rng.integers(0, 40, size=int(n))) for n in rng.integers(1, 7, size=300)]
    together = compose_phrases(phrases, words)
    for p in phrases[:50]:
        acc = np.zeros(16, dtype=np.float32)
        for w in p.split():
            acc += words[w]
        want = words[p] if " " not in p else (acc / np.linalg.norm(acc)).astype(np.float32)
        assert together[p].tobytes() == compose_phrases([p], words)[p].tobytes()
        np.testing.assert_allclose(together[p], want, rtol=1e-6)
