"""Incremental == full: random add/modify/retitle/rename/delete sequences, then refresh(), equal a fresh index (on
SQLite, and on PostgreSQL for a share of the cases)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from backends import store_settings
from pathweaver.config import Settings
from pathweaver.ingest import synonym_pass
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models.precision import resolve_precision
from pathweaver.store import bm25
from pathweaver.store.backend import open_database
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader

POOL = [
    "Marie Curie was born in Warsaw. She studied physics in Paris with Pierre Curie.",
    "Pierre Curie was a French physicist. Pierre Curie married Marie Curie in 1895.",
    "The Vistula is the longest river in Poland. The Vistula flows through Warsaw and Krakow.",
    "Polonium was discovered by Marie Curie and Pierre Curie in 1898. Polonium is named after Poland.",
    "Radium glows in the dark. Marie Curie isolated radium in Paris.",
    "Krakow was the capital of Poland before Warsaw. Krakow has an old university.",
    "# Paris\n\nParis is the capital of France. The Sorbonne is a university in Paris.",
    "# Nobel Prize\n\nMarie Curie won the Nobel Prize in Physics and the Nobel Prize in Chemistry.",
    "Curie kept radium salts by her bed. ^b1",
]


TITLES = ["Marie Curie", "Warsaw (city)", "Paris", "Pierre Curie", "Polonium"]
# link texts and headings people write (issue 23): names once their target exists, or while no other note shares
# the heading; "here" and one-word or sentence-case headings never are
EXTRAS = ["", "", "\n\nSee [[Marie Curie|Madame Curie]].", "\n\nSee [[Paris|here]] and [[Polonium|Element 84]].",
          "\n\n## Radium Institute\n\nRadium glows.", "\n\n## Early Life\n\nBorn in Warsaw.",
          "\n\n## Usage\n\nA note.", "\n\n## Later years\n\nIn Paris."]


def settings(store: Path | str, entities: str = "statistical") -> Settings:
    s = store_settings(store)
    s.extract.entities = entities
    s.extract.auto_refresh_ratio = 1.0  # never refresh on its own: the final explicit refresh must do the work
    return s


def fresh_graph(folder: Path, store: Path | str, embedder, entities: str = "statistical") -> dict:  # type: ignore[no-untyped-def]
    with open_database(store) as db:
        Indexer(db, settings(store, entities), embedder).index_paths([folder])
        return StoreReader(db).canonical_graph()


def random_step(rng: random.Random, folder: Path) -> tuple[set[Path], set[Path]]:
    """One random change; returns the (changed, removed) sets a watcher would report."""
    files = sorted(folder.iterdir())
    op = rng.choice(["add", "add", "modify", "retitle", "rename", "delete", "embed"]) if files else "add"
    if op == "embed":  # a note that embeds another note, a section or a block of it (issue 37)
        notes = [f.stem for f in files if f.suffix == ".md"] + ["missing"]
        path = folder / f"e{rng.randrange(1000)}.md"
        path.write_text(rng.choice(POOL) + "\n\n![[" + rng.choice(notes) + rng.choice(["", "#Paris", "#^b1"]) + "]]\n",
                        encoding="utf-8")
        return {path}, set()
    if op == "retitle":  # a title added or changed, with aliases added, changed or dropped (issue 23)
        target = folder / rng.choice([f.name for f in files if f.suffix == ".md"] or ["t.md"])
        aliases = rng.sample(["Curie", "Vistula", "Sorbonne", "Radium"], rng.randint(0, 2))
        front = f"---\ntitle: {rng.choice(TITLES)}\n" + (f"aliases: [{', '.join(aliases)}]\n" if aliases else "")
        target.write_text(front + "---\n" + rng.choice(POOL) + rng.choice(EXTRAS), encoding="utf-8")
        return {target}, set()
    if op == "add":
        path = folder / f"n{rng.randrange(1000)}{rng.choice(['.txt', '.md'])}"
        path.write_text(rng.choice(POOL) + "\n\n" + rng.choice(POOL) + rng.choice(EXTRAS), encoding="utf-8")
        return {path}, set()
    target = rng.choice(files)
    if op == "modify":
        target.write_text(rng.choice(POOL) + " " + rng.choice(POOL), encoding="utf-8")
        return {target}, set()
    if op == "rename":
        new = folder / f"r{rng.randrange(1000)}{target.suffix}"
        target.rename(new)
        return {new}, {target}
    target.unlink()
    return set(), {target}


# the statistical graph (AGRAG §III-B) and the named-entity one (spaCy NER entities, sentence relations), on
# SQLite; a share of them on PostgreSQL too (the same store code through store.pg.dialect)
CASES = [(seed, "statistical") for seed in range(8)] + [(seed, "names,ner") for seed in range(4)]
PG_CASES = [(0, "statistical"), (0, "names,ner")]


@pytest.mark.parametrize(("seed", "entities", "backend"), [(*c, "sqlite") for c in CASES] +
                         [(*c, "postgresql") for c in PG_CASES], indirect=["backend"])
def test_incremental_then_refresh_equals_fresh_index(seed: int, entities: str, tmp_path: Path, embedder,  # type: ignore[no-untyped-def]
                                                     backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25, "MAX_POSTINGS", 10)  # both stores keep their BM25 postings, as a large store does
    rng = random.Random(seed)
    folder = tmp_path / "notes"
    folder.mkdir()
    store = backend("store")
    with open_database(store) as db:
        indexer = Indexer(db, settings(store, entities), embedder)
        for _ in range(rng.randint(3, 6)):
            changed, removed = random_step(rng, folder)
            if rng.random() < 0.5:
                indexer.index_paths([folder])
            else:
                indexer.apply_changes(changed, removed)
        indexer.refresh()
        got = StoreReader(db).canonical_graph()
        docs = {d["path"] for d in StoreReader(db).documents()}
    assert docs == {str(p) for p in folder.iterdir()}
    want = fresh_graph(folder, backend("fresh"), embedder, entities)
    assert got["entities"] == want["entities"]
    assert got["relations"] == want["relations"]
    assert got["mentions"] == want["mentions"]
    assert got["synonyms"] == want["synonyms"]
    assert got["chunks"] == want["chunks"] and got["embeds"] == want["embeds"]
    assert got["postings"] == want["postings"] and (got["postings"] or not got["chunks"])
    for key in ("doc_names", "link_names", "name_rows", "name_mentions"):
        assert got[key] == want[key], key
    if any(folder.iterdir()):
        assert got["entities"] and got["mentions"]
    if entities == "names,ner" and got["entities"]:  # names and named entities only, never n-gram phrases
        assert "ngram" not in {kind for _, kind in got["entities"]} and "ner" in {k for _, k in got["entities"]}


@pytest.mark.parametrize("seed", range(3))
def test_watcher_batches_pair_every_new_entity_with_all_current_ones(seed: int, tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """Without a refresh, the synonym pass of each batch (which reuses the entity vectors of the pass before and
    reads only new rows) must leave exactly the pairs an all-pairs search over the current entities finds."""
    from pathweaver.extract.synonyms import synonym_pairs

    rng = random.Random(100 + seed)
    folder = tmp_path / "notes"
    folder.mkdir()
    store = tmp_path / "store"
    s = settings(store)
    s.extract.synonym_phi = 0.6  # plenty of pairs among this small vocabulary
    with Database(store) as db:
        indexer = Indexer(db, s, embedder)
        for step in range(8):
            changed, removed = random_step(rng, folder)
            indexer.apply_changes(changed, removed)
            if step == 3:  # a second indexer (say, the CLI) writes in between: its rows must be read, not assumed
                Indexer(db, s, embedder).apply_changes(*random_step(rng, folder))
            if step == 5:  # a refresh re-derives every entity: the batches after it start from its vectors
                indexer.refresh()
        last = folder / "last.txt"
        last.write_text(POOL[0] + "\n\n" + POOL[1], encoding="utf-8")
        indexer.apply_changes({last}, set())
        snap = StoreReader(db).snapshot()
        got = {(a, b) for a, b in db.conn.execute("SELECT a_id, b_id FROM synonyms").fetchall()}
    want = {(a, b) for a, b, _ in synonym_pairs(snap.entity_ids, snap.entity_vecs, 0.6)}
    assert want and got == want


def test_auto_refresh_when_enough_chunks_changed(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "notes"
    folder.mkdir()
    for i, text in enumerate(POOL):
        (folder / f"n{i}.txt").write_text(text, encoding="utf-8")
    s = Settings(store_dir=tmp_path / "store")
    s.extract.auto_refresh_ratio = 0.2
    with Database(s.store_dir) as db:
        indexer = Indexer(db, s, embedder)
        assert indexer.index_paths([folder]).refreshed  # a first index always ends with the refresh computation
        (folder / "n0.txt").write_text(POOL[0] + " Warsaw is big.", encoding="utf-8")
        small = indexer.index_paths([folder])  # 2 changed chunks (1 out, 1 in) of 8: 25 % > 20 %
        assert small.updated == 1 and small.refreshed
        assert db.get_meta("changed_chunks") == "0"


@pytest.mark.parametrize("seed", range(3))
def test_snapshot_reusing_vectors_equals_a_cold_read(
    seed: int, tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    """Each new store version reuses the vectors of unchanged entities, chunks and triples from the snapshot it
    replaces; after random changes (ids freed by deletes get reused) that must equal reading everything."""
    from pathweaver.store import reads

    reused: list[int] = []
    real = reads._vectors

    def spy(conn, table, ids, dim, reuse=None):  # type: ignore[no-untyped-def]
        if reuse is not None:
            reused.append(int((reuse[0] >= 0).sum()))
        return real(conn, table, ids, dim, reuse)

    monkeypatch.setattr(reads, "_vectors", spy)
    rng = random.Random(100 + seed)
    folder = tmp_path / "notes"
    folder.mkdir()
    store = tmp_path / "store"
    with Database(store) as db:
        indexer = Indexer(db, settings(store), embedder)
        reader = StoreReader(db)
        reader.cache.clear()
        versions = set()
        for _ in range(6):
            changed, removed = random_step(rng, folder)
            indexer.apply_changes(changed, removed)
            if rng.random() < 0.3:
                indexer.refresh()
            versions.add(reader.snapshot().version)
        warm = reader.snapshot()
        cold = reader._build_snapshot(None)
    assert len(versions) > 1 and warm.version == cold.version
    assert sum(reused) > 0  # later versions did take rows from the snapshot they replaced
    assert warm.entity_names == cold.entity_names and warm.chunk_texts == cold.chunk_texts
    for name in ("entity_vecs", "rel_vecs", "chunk_vecs"):
        assert getattr(warm, name).shape == getattr(cold, name).shape
        assert (getattr(warm, name) == getattr(cold, name)).all(), name


def test_changing_vector_settings_remakes_every_vector(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """A store indexed with ``entity_vectors = encoded`` that is opened with ``composed`` re-makes its entity and
    relation vectors on the next index call, and then equals a fresh index made with ``composed``."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for i, text in enumerate(POOL):
        (folder / f"n{i}.txt").write_text(text, encoding="utf-8")
    store = tmp_path / "store"

    def entity_vectors(db: Database) -> dict[str, bytes]:
        StoreReader(db).cache.clear()  # this test's stores share a path: a snapshot of the other must not serve
        snap = StoreReader(db).snapshot()
        return {n: snap.entity_vecs[i].tobytes() for i, n in enumerate(snap.entity_names)}

    encoded = settings(store)
    encoded.extract.entity_vectors = "encoded"
    auto = resolve_precision("auto", embedder.batch_invariant)
    precision = "" if auto == "float32" else ",precision:bfloat16"  # recorded unless float32
    with Database(store) as db:
        Indexer(db, encoded, embedder).index_paths([folder])
        assert db.get_meta("vector_settings") == "entities:encoded,triples:composed,phi:0.9,passes:fixed" + precision
        before = entity_vectors(db)
        report = Indexer(db, settings(store), embedder).index_paths([folder])  # nothing changed on disk
        assert report.refreshed
        assert db.get_meta("vector_settings") == "entities:composed,triples:composed,phi:0.9,passes:fixed" + precision
        after = entity_vectors(db)
        got = StoreReader(db).canonical_graph()
    multi = [n for n in before if " " in n]
    assert multi and all(before[n] != after[n] for n in multi)  # composed, not the encoded vectors kept
    want_store = tmp_path / "fresh"
    want = fresh_graph(folder, want_store, embedder)
    with Database(want_store) as db:
        fresh = entity_vectors(db)
    assert fresh == after  # batch-invariant vectors: the same bits, made in other batches in another store
    assert got == want


def test_a_snapshot_is_carried_forward_over_a_batch_synonym_pass(  # type: ignore[no-untyped-def]
        tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """A watcher batch commits its file, then its synonym pass. A reader that built the snapshot in between gets
    the next one carried forward with the new synonym rows, equal to a read of the store; a pass that adds no
    pair moves no version."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for i, text in enumerate(POOL[:4]):
        (folder / f"n{i}.txt").write_text(text, encoding="utf-8")
    s = settings(tmp_path / "store")
    s.extract.synonym_phi = 0.6
    with Database(s.store_dir) as db:
        indexer = Indexer(db, s, embedder)
        indexer.index_paths([folder])
        reader = StoreReader(db)
        reader.snapshot()
        real_pass = indexer.synonyms.run
        between: list[int] = []

        def read_then_pair() -> int:
            between.append(reader.snapshot().version)  # what a query landing between the two commits builds
            return real_pass()

        indexer.synonyms.run = read_then_pair  # type: ignore[method-assign]
        patched = reader.cache.patched
        (folder / "new.txt").write_text(POOL[4] + " " + POOL[6], encoding="utf-8")
        indexer.apply_changes({folder / "new.txt"}, set())
        assert db.version() == between[-1] + 1, "the synonym pass found pairs and made one more version"
        carried = reader.snapshot()
        assert reader.cache.patched == patched + 1 and carried.version == db.version()
        cold = reader._build_snapshot(None)
        for name in ("syn_a", "syn_b", "syn_cos", "entity_ids", "rel_src", "rel_dst"):
            assert np.array_equal(getattr(carried, name), getattr(cold, name)), name
        assert (carried.adjacency != cold.adjacency).nnz == 0
        assert (carried.edge_relation != cold.edge_relation).nnz == 0
        assert len(carried.syn_a) > len(between) and carried.entity_vecs is not None

        monkeypatch.setattr(synonym_pass, "synonym_pairs_for", lambda *args, **kwargs: [])  # new entities, no pair passes
        before, n_synonyms = db.version(), len(carried.syn_a)
        (folder / "other.txt").write_text("Zanzibar exports cloves. Zanzibar lies off Tanzania.", encoding="utf-8")
        indexer.apply_changes({folder / "other.txt"}, set())
        after = reader._build_snapshot(None)
        assert db.version() == before + 1, "the file moved the version; the empty synonym pass did not"
        assert len(after.syn_a) == n_synonyms and int(db.get_meta("synonym_watermark")) == int(after.entity_ids.max())
        assert after.entity_ids.max() > cold.entity_ids.max()


def test_dense_and_hybrid_search_run_on_the_chunks_without_the_graph(tmp_path: Path, backend) -> None:  # type: ignore[no-untyped-def]
    """``search`` in dense and hybrid mode reads the chunks alone: right after a change it finds the new file
    without building the graph snapshot, and on an unchanged store it returns what the retrieval methods do."""
    from pathweaver.service import Pathweaver

    folder = tmp_path / "notes"
    folder.mkdir()
    for i, text in enumerate(POOL):
        (folder / f"n{i}.txt").write_text(text, encoding="utf-8")
    with Pathweaver.open(backend("store")) as pw:
        pw.index([folder])
        for mode in ("dense", "hybrid"):
            assert pw.search("Where was Marie Curie born?", mode, 3) == \
                pw.retrieve_json("Where was Marie Curie born?", mode, 3)["chunks"]
        builds = pw.reader.cache.builds
        (folder / "quokka.txt").write_text("The quokka is a small marsupial on Rottnest Island.", encoding="utf-8")
        pw.apply_changes({folder / "quokka.txt"}, set())
        for mode in ("dense", "hybrid"):
            hits = pw.search("quokka marsupial Rottnest", mode, 2)
            assert hits[0]["doc"] == str(folder / "quokka.txt") and "quokka" in hits[0]["text"]
        (folder / "quokka.txt").unlink()
        pw.apply_changes(set(), {folder / "quokka.txt"})
        assert all(h["doc"] != str(folder / "quokka.txt") for h in pw.search("quokka marsupial", "dense", 8))
        assert pw.reader.cache.builds == builds, "search built the graph snapshot"
        assert pw.search("quokka", "dense", 8) == pw.retrieve_json("quokka", "dense", 8)["chunks"]

