"""Moving a whole folder: every document is renamed in one pass (names settled per batch, not per file), the store
equals a fresh index of the moved folder, and a note that yields no chunks is recorded as on a first index."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from pathweaver.config import Settings
from pathweaver.ingest import documents
from pathweaver.ingest.pipeline import Indexer
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader

CORPUS = Path(__file__).parent / "corpus"


def settings(store: Path) -> Settings:
    s = Settings(store_dir=store)
    s.extract.auto_refresh_ratio = 1.0  # changes stay incremental: no refresh may repair them
    return s


def canonical(store: Path, folder: Path) -> dict[str, set[tuple[Any, ...]]]:
    """The store's canonical graph with ``folder`` written as ``ROOT`` in paths."""
    db = Database(store)
    try:
        graph = StoreReader(db).canonical_graph()
    finally:
        db.close()
    return {k: {tuple(v.replace(str(folder), "ROOT") if isinstance(v, str) else v for v in row) for row in rows}
            for k, rows in graph.items()}


def records(store: Path, folder: Path) -> set[tuple[str, str, str, int]]:
    """(path under ``folder``, status, reason, chunk count) of every documents row."""
    db = Database(store)
    try:
        return {(str(Path(p).relative_to(folder)), s, r, n) for p, s, r, n in db.conn.execute(
            "SELECT d.path, d.status, d.reason, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id) "
            "FROM documents d")}
    finally:
        db.close()


def index(store: Path, folder: Path, embedder) -> Any:  # type: ignore[no-untyped-def]
    db = Database(store)
    try:
        return Indexer(db, settings(store), embedder).index_paths([folder])
    finally:
        db.close()


def make_vault(vault: Path) -> None:
    """The corpus and two notes, one titled by its file name."""
    shutil.copytree(CORPUS, vault)
    (vault / "lab log.txt").write_text("Readings taken at the Warsaw bench.\n", "utf-8")
    (vault / "bench.md").write_text("# Bench\n\nThe studio notes lie on the Warsaw bench.\n", "utf-8")


@pytest.fixture(scope="module")
def fresh_moved(tmp_path_factory: pytest.TempPathFactory, embedder) -> dict[str, set[tuple[Any, ...]]]:  # type: ignore[no-untyped-def]
    """The canonical graph of a fresh index of the vault as moved (the same for every ``RENAME_BATCH``: a first
    index renames nothing), made once for the module."""
    base = tmp_path_factory.mktemp("fresh-moved")
    moved = base / "moved vault"
    make_vault(moved)
    (moved / "lab log.txt").rename(moved / "studio notes.txt")
    index(base / "fresh", moved, embedder)
    return canonical(base / "fresh", moved)


@pytest.mark.parametrize("batch", [1, 2, 500])
def test_folder_move_renames_every_document_into_the_fresh_store(batch: int, tmp_path: Path, embedder,  # type: ignore[no-untyped-def]
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  fresh_moved: dict[str, set[tuple[Any, ...]]]) -> None:
    monkeypatch.setattr(documents, "RENAME_BATCH", batch)  # 1 is the per-file path; 2 splits the pass in batches
    vault = tmp_path / "vault"
    make_vault(vault)
    store = tmp_path / "store"
    first = index(store, vault, embedder)
    assert first.added == 8 and not first.errors
    moved = tmp_path / "moved vault"
    vault.rename(moved)
    (moved / "lab log.txt").rename(moved / "studio notes.txt")  # its title is its file name: a name changes too
    report = index(store, moved, embedder)
    assert (report.renamed, report.added, report.deleted, report.updated, report.chunks) == (8, 0, 0, 0, 0)
    got = canonical(store, moved)
    assert ("ROOT/studio notes.txt", "studio notes", "title") in got["doc_names"]
    assert not any(row[1] == "lab log" for row in got["doc_names"])
    assert any(name == "studio notes" and "studio notes lie" in text for name, text, _ in got["name_mentions"])
    assert got == fresh_moved


def test_a_note_without_chunks_moves_as_the_first_index_recorded_it(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    vault = tmp_path / "vault"
    (vault / "daily").mkdir(parents=True)
    (vault / "daily" / "stub.md").write_text("---\ntitle: Stub day\ncreated: 2024-01-01\n---\n", "utf-8")
    (vault / "radium.md").write_text((CORPUS / "radium.md").read_text("utf-8"), "utf-8")
    store = tmp_path / "store"
    first = index(store, vault, embedder)
    before = records(store, vault)
    assert ("daily/stub.md", "skipped", "empty document", 0) in before or first.added == 2  # the current rule
    moved = tmp_path / "moved"
    vault.rename(moved)
    report = index(store, moved, embedder)
    assert records(store, moved) == before  # the same record at its new path, nothing lost
    assert report.deleted == 0 and report.added == 0 and report.skipped == first.skipped
    assert [f["reason"] for f in report.skipped_files] == [f["reason"] for f in first.skipped_files]
    fresh = tmp_path / "fresh"
    index(fresh, moved, embedder)
    assert records(fresh, moved) == before and canonical(fresh, moved) == canonical(store, moved)
