"""Readers on their own read-only connections keep working while an indexer writes (WAL): no "locked" error."""

from __future__ import annotations

import threading
from pathlib import Path

from pathweaver.config import Settings
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models.embedder import get_embedder
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader

TEXTS = [
    "Marie Curie was born in Warsaw and worked in Paris.",
    "The Vistula flows through Krakow and Warsaw.",
    "Pierre Curie studied crystals and magnetism in Paris.",
]


def test_readers_never_see_locked_while_indexing(tmp_path: Path) -> None:
    folder, store = tmp_path / "notes", tmp_path / "store"
    folder.mkdir()
    (folder / "seed.txt").write_text(TEXTS[0], encoding="utf-8")
    writer_db = Database(store)
    indexer = Indexer(writer_db, Settings(store_dir=store), get_embedder())
    indexer.index_paths([folder])
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0, 0]

    def reader(slot: int) -> None:
        try:
            with Database(store, readonly=True) as db:
                r = StoreReader(db)
                while not stop.is_set():
                    snap = r.snapshot()
                    assert snap.n_passages == len(snap.chunk_texts)
                    r.bm25_chunks("Warsaw (Paris)", 5)
                    assert r.stats()["documents"] >= 1
                    reads[slot] += 1
                    stop.wait(0.02)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(8):
            (folder / f"n{i % 4}.txt").write_text(f"{TEXTS[i % 3]} Version {i}.", encoding="utf-8")
            if i % 4 == 3:
                (folder / f"n{(i + 1) % 4}.txt").unlink(missing_ok=True)
            indexer.index_paths([folder])
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        writer_db.close()
    assert not errors, errors
    assert min(reads) > 0
