"""The indexing pipeline on the real test corpus: reports, renames, deletions, the embedding cache, watcher batches
(reports, renames and ``exact=False`` on SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from backends import store_settings
from pathweaver.config import ConfigError, Settings
from pathweaver.ingest import graph_inputs, prepare, refresh
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models.embedder import get_embedder
from pathweaver.store import writes as w
from pathweaver.store.backend import open_database
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader
from twin_vectors import TwinVectors

CORPUS = Path(__file__).parent / "corpus"
UNIQUE = "Zanzibar clove merchants traded saffron with Oslo fjord whalers."
# Every table, including FTS/vec virtual tables, with the SQL that counts rows belonging to a given document id.
DOC_ROWS = {
    "documents": "SELECT count(*) FROM documents WHERE id = :d",
    "chunks": "SELECT count(*) FROM chunks WHERE doc_id = :d",
    "chunks_fts": "SELECT count(*) FROM chunks_fts WHERE rowid IN (:ids)",
    "chunk_vec": "SELECT count(*) FROM chunk_vec WHERE rowid IN (:ids)",
    "mentions": "SELECT count(*) FROM mentions WHERE chunk_id IN (:ids)",
    "relation_sources": "SELECT count(*) FROM relation_sources WHERE chunk_id IN (:ids)",
}


class CountingEmbedder:
    """The real embedder, counting the texts it is asked to encode."""

    def __init__(self) -> None:
        self.inner = get_embedder()
        self.model_name = self.inner.model_name
        self.encoded = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def encode(self, texts: list[str], batch_size: int | None = None, precision: str = "float32",
               invariant: bool = False) -> np.ndarray:
        self.encoded += len(texts)
        return self.inner.encode(texts, batch_size, precision, invariant)

    def batch_invariant(self, precision: str = "float32") -> bool:
        return self.inner.batch_invariant(precision)

    def tokenize(self, text: str) -> list[tuple[int, int]]:
        return self.inner.tokenize(text)


def _setup(tmp_path: Path, store: Path | str):  # type: ignore[no-untyped-def]
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    emb = CountingEmbedder()
    db = open_database(store)
    indexer = Indexer(db, store_settings(store), emb)
    yield notes, db, indexer, emb
    db.close()


@pytest.fixture()
def setup(tmp_path: Path, backend):  # type: ignore[no-untyped-def]
    """The corpus, a store on each backend (conftest ``backend``), its indexer and a counting embedder."""
    yield from _setup(tmp_path, backend("store"))


@pytest.fixture()
def lite_setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``setup`` on SQLite alone: tests that read its FTS5/vec0 tables and pages, or whose code path is the same
    on both (kept off PostgreSQL to keep the suite short)."""
    yield from _setup(tmp_path, tmp_path / "store")


def chunk_ids(db: Database, path: Path) -> list[int]:
    return [r[0] for r in db.conn.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = ? ORDER BY c.ord", (str(path),))]


def test_index_report_and_unchanged_rerun(setup) -> None:  # type: ignore[no-untyped-def]
    notes, db, indexer, emb = setup
    first = indexer.index_paths([notes])
    assert (first.added, first.updated, first.deleted, first.skipped) == (6, 0, 0, 0)
    assert first.refreshed and first.chunks >= 6 and first.to_dict()["added"] == 6
    stats = StoreReader(db).stats()
    assert stats["documents"] == 6 and stats["entities"] > 0 and stats["relations"] > 0
    encoded = emb.encoded
    again = indexer.index_paths([notes])
    assert (again.added, again.updated, again.unchanged) == (0, 0, 6)
    assert emb.encoded == encoded
    assert "marie curie" in StoreReader(db).snapshot().entity_index


def test_rename_costs_no_embedding_and_keeps_chunk_ids(setup) -> None:  # type: ignore[no-untyped-def]
    notes, db, indexer, emb = setup
    indexer.index_paths([notes])
    before = chunk_ids(db, notes / "radium.md")
    graph_before = StoreReader(db).canonical_graph()
    encoded = emb.encoded
    (notes / "radium.md").rename(notes / "element-88.md")
    report = indexer.index_paths([notes])
    assert report.renamed == 1 and report.added == 0 and report.deleted == 0
    assert emb.encoded == encoded
    assert chunk_ids(db, notes / "element-88.md") == before
    assert chunk_ids(db, notes / "radium.md") == []
    got = StoreReader(db).canonical_graph()
    for key in ("doc_names", "name_rows", "chunks", "postings"):  # the same names, chunks, postings, of the moved file
        moved = {tuple(v.replace("element-88.md", "radium.md") if isinstance(v, str) and v.endswith(".md") else v
                       for v in row) for row in got.pop(key)}
        assert moved == graph_before.pop(key)
    assert got == graph_before


def test_watcher_rename_batch_is_a_rename(setup) -> None:  # type: ignore[no-untyped-def]
    notes, db, indexer, emb = setup
    indexer.index_paths([notes])
    before = chunk_ids(db, notes / "polonium.md")
    (notes / "polonium.md").rename(notes / "po.md")
    report = indexer.apply_changes({notes / "po.md"}, {notes / "polonium.md"})
    assert report.renamed == 1 and chunk_ids(db, notes / "po.md") == before


def test_delete_leaves_no_row_and_no_search_hit(lite_setup) -> None:  # type: ignore[no-untyped-def]
    notes, db, indexer, emb = lite_setup
    extra = notes / "zanzibar.txt"
    extra.write_text(UNIQUE + " Zanzibar merchants sailed to Oslo.", encoding="utf-8")
    indexer.index_paths([notes])
    reader = StoreReader(db)
    doc_id = db.conn.execute("SELECT id FROM documents WHERE path = ?", (str(extra),)).fetchone()[0]
    ids = chunk_ids(db, extra)
    assert reader.bm25_chunks("Zanzibar saffron", 3)[0][0] in ids
    assert "zanzibar" in reader.snapshot().entity_index
    extra.unlink()
    report = indexer.index_paths([notes])
    assert report.deleted == 1
    id_list = ",".join(str(i) for i in ids)
    for table, sql in DOC_ROWS.items():
        assert db.conn.execute(sql.replace(":ids", id_list), {"d": doc_id}).fetchone()[0] == 0, table
    reader = StoreReader(db)
    assert all(cid not in ids for cid, _ in reader.bm25_chunks("Zanzibar saffron Oslo", 10))
    snap = reader.snapshot()
    assert "zanzibar" not in snap.entity_index and not any("zanzibar" in n for n in snap.entity_names)
    query = get_embedder().encode_one(UNIQUE)
    best = int(np.argmax(snap.chunk_vecs @ query))
    assert snap.chunk_docs[best] != str(extra) and float(snap.chunk_vecs[best] @ query) < 0.9
    # no orphans anywhere: every FTS/vector row has its owner, every entity has support
    for fts, owner in (("chunks_fts", "chunks"), ("chunk_vec", "chunks"), ("entities_fts", "entities")):
        assert db.conn.execute(f"SELECT count(*) FROM {fts}").fetchone()[0] == \
            db.conn.execute(f"SELECT count(*) FROM {owner}").fetchone()[0], fts
    assert db.conn.execute(
        "SELECT count(*) FROM entities e WHERE NOT EXISTS (SELECT 1 FROM mentions m WHERE m.entity_id = e.id) "
        "AND NOT EXISTS (SELECT 1 FROM relations r WHERE e.id IN (r.src_id, r.dst_id))").fetchone()[0] == 0
    assert db.conn.execute("SELECT count(*) FROM gram_df WHERE gram = 'zanzibar'").fetchone()[0] == 0


def test_modified_file_reuses_cached_chunk_vectors(lite_setup) -> None:  # type: ignore[no-untyped-def]
    notes, db, indexer, emb = lite_setup
    indexer.index_paths([notes])
    vistula = notes / "vistula.txt"
    original = vistula.read_text(encoding="utf-8")
    vistula.write_text(original + "\nThe Vistula freezes in winter.", encoding="utf-8")
    assert indexer.index_paths([notes]).embedded == 1
    vistula.write_text(original, encoding="utf-8")  # back to a text whose vector is cached
    report = indexer.index_paths([notes])
    assert report.updated == 1 and report.embedded == 0


def test_a_first_index_packs_the_file_once(lite_setup, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A first index VACUUMs at its end (its random-order inserts leave B-tree pages part full), so another VACUUM
    gives nothing back; a later change does not VACUUM."""
    notes, db, indexer, emb = lite_setup
    calls: list[str] = []
    vacuum = db.vacuum
    monkeypatch.setattr(db, "vacuum", lambda after: (calls.append(after), vacuum(after)))
    indexer.index_paths([notes])
    assert calls == ["a first index"]
    pages = db.conn.execute("PRAGMA page_count").fetchone()[0]
    assert db.conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    db.conn.execute("VACUUM")
    assert db.conn.execute("PRAGMA page_count").fetchone()[0] == pages
    (notes / "vistula.txt").write_text("The Vistula freezes in winter.", encoding="utf-8")
    indexer.index_paths([notes])
    assert calls == ["a first index"]


def test_exact_false_keeps_other_documents_and_remove_path(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    notes, db, indexer, emb = setup
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("Lisbon is the capital of Portugal.", encoding="utf-8")
    indexer.index_paths([notes])
    report = indexer.index_paths([other], exact=False)
    assert report.added == 1 and StoreReader(db).stats()["documents"] == 7
    assert indexer.remove_path(other) == 1
    assert StoreReader(db).stats()["documents"] == 6


def test_derive_document_structure_and_spans() -> None:
    from pathweaver.extract.graph import ChunkInput, ExtractParams, Structure, chunk_stats, derive_document

    texts = [(10, 0, "Warsaw is in Poland."), (11, 21, "Krakow hosts Jagiellonian University.")]
    chunks = [ChunkInput(k, s, s + len(t), t, *chunk_stats(t, 3)) for k, s, t in texts]
    structure = Structure("Warsaw", [(21, "Krakow")], ["Vistula", "Warsaw"])
    # tau above any ER value: only authored structure remains
    g = derive_document(chunks, structure, 2, {}, ExtractParams(tau=10.0))
    assert g.kinds == {"warsaw": "title", "krakow": "heading", "vistula": "link"}
    assert g.mentions == {("warsaw", 10): (1, 0.0), ("krakow", 11): (1, 0.0)}
    assert [(r.src, r.dst, r.label, r.kind, r.chunk) for r in g.relations] == [
        ("warsaw", "vistula", "links to", "link", 10)]  # the self-link to "Warsaw" is dropped
    # tau = 0: every candidate gram with df < |T_c| is an entity; relation spans are in document coordinates
    g = derive_document(chunks, structure, 2, {}, ExtractParams(tau=0.0))
    assert ("jagiellonian university", 11) in g.mentions and g.kinds["krakow"] == "heading"
    c1 = [r for r in g.relations if r.chunk == 11]
    assert c1 and all(r.start == 21 and r.end == 21 + len(texts[1][2]) for r in c1)


def test_scanner_diff_classifies_by_stat_then_hash() -> None:
    from pathweaver.ingest.scanner import FileEntry, KnownDoc, diff

    known = {
        "/r/same.txt": KnownDoc(1, "/r/same.txt", "h1", 1.0, 10, "indexed", ""),
        "/r/touched.txt": KnownDoc(2, "/r/touched.txt", "h2", 1.0, 10, "indexed", ""),
        "/r/edited.txt": KnownDoc(3, "/r/edited.txt", "h3", 1.0, 10, "indexed", ""),
        "/r/old-name.txt": KnownDoc(4, "/r/old-name.txt", "h4", 1.0, 44, "indexed", ""),
        "/r/gone.txt": KnownDoc(5, "/r/gone.txt", "h5", 1.0, 10, "indexed", ""),
        "/elsewhere/x.txt": KnownDoc(6, "/elsewhere/x.txt", "h6", 1.0, 10, "indexed", ""),
    }
    found = {p: FileEntry(p, None, m, s) for p, m, s in [
        ("/r/same.txt", 1.0, 10), ("/r/touched.txt", 2.0, 10), ("/r/edited.txt", 2.0, 11),
        ("/r/new-name.txt", 3.0, 44), ("/r/brand-new.txt", 3.0, 44)]}
    found["/r/big.txt"] = FileEntry("/r/big.txt", "too large (9 bytes > 1)", 1.0, 9)
    hashes = {"/r/touched.txt": "h2", "/r/edited.txt": "new", "/r/new-name.txt": "h4", "/r/brand-new.txt": "zz"}
    hashed: list[str] = []

    def hasher(path: str) -> str:
        hashed.append(path)
        return hashes[path]

    out = diff(found, known, lambda p: p.startswith("/r/"), hasher)
    assert [e.path for e in out.unchanged] == ["/r/same.txt"]
    assert [(d.id, e.path) for d, e in out.touched] == [(2, "/r/touched.txt")]
    assert [e.path for e in out.changed] == ["/r/edited.txt"]
    assert [(d.id, e.path) for d, e in out.renamed] == [(4, "/r/new-name.txt")]
    assert [e.path for e in out.new] == ["/r/brand-new.txt"]
    assert [d.id for d in out.deleted] == [5]  # /elsewhere is out of scope
    assert [e.path for e in out.skipped] == ["/r/big.txt"]
    assert "/r/same.txt" not in hashed  # equal mtime and size: never hashed


def test_bm25_search_sees_a_commit_without_a_snapshot_rebuild(tmp_path: Path) -> None:
    """``search`` in bm25 mode reads the full-text index and chunk rows directly: a file applied a moment ago is
    found while the snapshot still holds the version before it, with what the ``bm25`` method returns."""
    from pathweaver.service import Pathweaver

    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    with Pathweaver.open(tmp_path / "store") as pw:
        pw.index([notes])
        phrase = "Zanzibar saffron Oslo"
        assert pw.search("Marie Curie radium", "bm25", 3) == pw.retrieve_json("Marie Curie radium", "bm25", 3)["chunks"]
        before = pw.snapshot()
        builds = pw.reader.cache.builds
        extra = notes / "zanzibar.txt"
        extra.write_text(UNIQUE, encoding="utf-8")
        pw.apply_changes({extra}, set())
        hits = pw.search(phrase, "bm25", 3)
        assert hits and hits[0]["doc"] == str(extra) and hits[0]["text"] == UNIQUE
        assert hits[0]["span"] == [0, len(UNIQUE)] and hits[0]["title"]
        assert pw.reader.cache.builds == builds and pw.reader.cache.latest() is before  # no rebuild was needed
        assert hits == pw.retrieve_json(phrase, "bm25", 3)["chunks"]  # the snapshot's path agrees once rebuilt
        extra.unlink()
        pw.apply_changes(set(), {extra})
        assert all(h["doc"] != str(extra) for h in pw.search(phrase, "bm25", 5))
        with pytest.raises(ConfigError):
            pw.search(phrase, "bm25", 0)


def test_graph_vector_precision_keeps_chunks_float32_and_its_own_cache(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``extract.graph_vector_precision``: the words of entity names go through the model at that precision, as
    batch-invariant vectors (the same bits as the word encoded alone), in their own cache key space, so a chunk
    whose text equals a word keeps its own float32 vector; the store records a precision other than float32 (a
    change re-makes the graph's vectors), and a bad value is a clear error. Only bfloat16 runs the
    batch-invariance probe when indexing (float32's costs a fifth of a first index and decides nothing)."""
    from pathweaver.config import ConfigError
    from pathweaver.ingest import invariance
    from pathweaver.models.embedder import get_embedder

    emb = get_embedder()
    probed: list[str] = []
    probe = emb.batch_invariant
    monkeypatch.setattr(emb, "batch_invariant", lambda precision="float32": probed.append(precision) or probe(precision))
    monkeypatch.setattr(invariance, "machine_file", lambda: tmp_path / "machine.json")  # no answers yet
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "word.txt").write_text("polonium", encoding="utf-8")
    (notes / "curie.md").write_text("Marie Curie discovered polonium in Paris.", encoding="utf-8")
    for precision in ("bfloat16", "float32"):
        store = tmp_path / precision
        s = Settings(store_dir=store)
        s.extract.graph_vector_precision = precision
        s.ingest.chunk_vector_precision = "float32"  # tests/test_chunk_precision.py: chunks at bfloat16
        with Database(store) as db:
            Indexer(db, s, emb).index_paths([notes])
            (vec,) = db.conn.execute("SELECT v.embedding FROM chunk_vec v JOIN chunks c ON c.id = v.rowid "
                                     "WHERE c.text = 'polonium'").fetchone()
            chunk = np.frombuffer(vec, np.float32)  # float32 on the fast path: equal to its batch's rounding
            assert np.abs(chunk - emb.encode(["polonium"])[0]).max() < 1e-6
            low = w.cache_get(db.conn, ["polonium", "marie", "curie"], graph_inputs.cache_space("bfloat16"))
            settings_text = db.get_meta("vector_settings")
            snap = StoreReader(db).snapshot()
            entity = snap.entity_vecs[snap.entity_index["marie curie"]].tobytes()
        words = emb.encode(["marie", "curie"], precision=precision, invariant=True)
        want = (words[0] + words[1]) / np.linalg.norm(words[0] + words[1])
        assert np.allclose(np.frombuffer(entity, np.float32), want, atol=1e-6)
        if precision == "bfloat16":
            assert set(low) == {"polonium", "marie", "curie"} and settings_text.endswith(",precision:bfloat16")
            want_low = emb.encode(["polonium"], precision="bfloat16", invariant=True)[0]
            assert low["polonium"].tobytes() == want_low.tobytes() != chunk.tobytes()
        else:
            assert not low and "precision" not in settings_text
    assert probed == ["bfloat16"]
    bad = Settings(store_dir=tmp_path / "bad")
    bad.extract.graph_vector_precision = "half"
    with Database(tmp_path / "bad") as db, pytest.raises(ConfigError, match="graph_vector_precision"):
        Indexer(db, bad, emb)


def test_a_failure_in_a_bulk_batch_is_that_files_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first index writes a batch of whole files per transaction, each file in a savepoint: a file whose write
    fails is rolled back alone and reported with its error, every other file lands whole, and the next index
    completes the job exactly."""
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    monkeypatch.setattr(prepare, "BATCH_CHUNKS", 2)  # the six notes have one or two chunks each
    real, calls = w.insert_chunks, []

    def failing(conn, doc_id, title, rows, vecs, count_grams=True):  # type: ignore[no-untyped-def]
        calls.append(doc_id)
        if len(calls) == 4:
            raise RuntimeError("disk full")
        return real(conn, doc_id, title, rows, vecs, count_grams)

    monkeypatch.setattr(w, "insert_chunks", failing)
    store = tmp_path / "store"
    emb = get_embedder()
    with Database(store) as db:
        report = Indexer(db, Settings(store_dir=store), emb).index_paths([notes])
        assert len(report.errors) == 1 and "RuntimeError: disk full" in report.errors[0]["error"]
        failed = report.errors[0]["path"]
        assert {"path": failed, "reason": report.errors[0]["error"]} in report.skipped_files
        docs = {p for (p,) in db.conn.execute("SELECT path FROM documents")}
        n_files = len([p for p in notes.rglob("*") if p.is_file()])
        assert failed not in docs and len(docs) == n_files - 1  # every other file landed
        chunk_docs = db.conn.execute("SELECT count(DISTINCT doc_id) FROM chunks").fetchone()[0]
        assert len(docs) == chunk_docs  # every stored file has its chunks
        assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        df: Counter[str] = Counter()  # each batch adds its files' gram_df at its end: exactly the stored chunks'
        for (grams,) in db.conn.execute("SELECT grams FROM chunks"):
            df.update(json.loads(grams).keys())
        assert dict(db.conn.execute("SELECT gram, df FROM gram_df").fetchall()) == dict(df) and df
        monkeypatch.setattr(w, "insert_chunks", real)
        Indexer(db, Settings(store_dir=store), emb).index_paths([notes])
        got = StoreReader(db).canonical_graph()
    with Database(tmp_path / "fresh") as db:
        Indexer(db, Settings(store_dir=tmp_path / "fresh"), emb).index_paths([notes])
        assert StoreReader(db).canonical_graph() == got


def test_pairing_synonyms_while_writing_rows_gives_the_same_graph(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A large refresh writes its rows on a second thread while it pairs synonyms; the store ends exactly as when
    the two run one after the other."""
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    emb = TwinVectors(get_embedder())  # the second store's model calls repeat the first's: one pass for both
    graphs = []
    for overlap in (False, True):
        monkeypatch.setattr(refresh, "on_our_pool", lambda overlap=overlap: overlap)
        monkeypatch.setattr(refresh, "PAIR_WHILE_WRITING_OVER", 0)
        store = tmp_path / f"store-{overlap}"
        s = Settings(store_dir=store)
        s.extract.synonym_phi = 0.6  # pairs on this small corpus
        with Database(store) as db:
            report = Indexer(db, s, emb).index_paths([notes])
            assert report.refreshed
            graphs.append(StoreReader(db).canonical_graph())
            assert db.conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert graphs[0]["synonyms"] and graphs[0] == graphs[1]
