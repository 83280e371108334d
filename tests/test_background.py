"""The server's IndexManager on a real folder and store: after the first index and after each watcher batch it
builds the query snapshot of the new store version itself, before any query asks for it."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pathweaver.server.background import IndexManager
from pathweaver.service import Pathweaver

CORPUS = Path(__file__).parent / "corpus"


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_snapshot_is_built_ahead_of_queries(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    with Pathweaver.open(tmp_path / "store") as pw:
        manager = IndexManager(pw, [notes], debounce_seconds=0.2)
        cache = pw.reader.cache

        def current() -> bool:
            latest = cache.latest()
            return latest is not None and latest.version == pw.reader.db.version()

        manager.start()
        try:
            assert manager.ready.wait(120)
            wait_for(current, "the snapshot of the first index")
            before = cache.latest()
            assert before is not None and before.n_passages > 0
            (notes / "fresh.md").write_text("# Fresh\n\nThe quokka lives on Rottnest Island.\n", encoding="utf-8")
            wait_for(lambda: manager.status.batches >= 1 and current(), "the snapshot after the watcher batch")
            after = cache.latest()
            assert after is not None and after.version > before.version
            assert any("quokka" in text for text in after.chunk_texts)
            builds = cache.builds
            hits = pw.search("quokka Rottnest", "hybrid", 3)
            assert hits and "quokka" in hits[0]["text"]
            assert cache.builds == builds, "the query found the snapshot already built"
        finally:
            manager.stop()


def test_an_edit_during_the_first_index_is_applied(tmp_path: Path) -> None:
    """The watcher runs while the first index does: a file rewritten after the scan read it (here from the
    indexer's own progress callback) is applied once the index is done, with no further change to the folder."""
    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    target = sorted(p for p in notes.rglob("*.md"))[0]
    with Pathweaver.open(tmp_path / "store") as pw:
        index = pw.index
        edited: list[bool] = []

        def index_and_edit(paths, exact=True, progress=None):  # type: ignore[no-untyped-def]
            def on_progress(done: int, total: int, message: str) -> None:
                if not edited:
                    target.write_text("# Edited\n\nA wombat named Wilhelmina edited this note.\n", encoding="utf-8")
                    edited.append(True)
                if progress is not None:
                    progress(done, total, message)

            return index(paths, exact=exact, progress=on_progress)

        pw.index = index_and_edit  # type: ignore[method-assign]
        manager = IndexManager(pw, [notes], debounce_seconds=0.2)
        manager.start()
        try:
            assert manager.ready.wait(120) and edited

            def applied() -> bool:
                hits = pw.search("wombat Wilhelmina", "bm25", 3)
                return bool(hits) and hits[0]["doc"] == str(target)

            wait_for(applied, "the edit made during the first index")
        finally:
            manager.stop()


def test_a_slow_snapshot_build_does_not_hold_up_the_next_batch(tmp_path: Path) -> None:
    """The snapshot is built on a thread of its own: while the build for one watcher batch is held up, the next
    batch is still applied."""
    import threading

    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    with Pathweaver.open(tmp_path / "store") as pw:
        build = pw.snapshot
        hold, entered, release = threading.Event(), threading.Event(), threading.Event()

        def held_snapshot():  # type: ignore[no-untyped-def]
            if hold.is_set():
                entered.set()
                release.wait(120)
            return build()

        pw.snapshot = held_snapshot  # type: ignore[method-assign]
        manager = IndexManager(pw, [notes], debounce_seconds=0.2)
        manager.start()
        try:
            assert manager.ready.wait(120)
            wait_for(lambda: manager._warm_wanted.is_set() is False and pw.reader.cache.latest() is not None,
                     "the first snapshot")
            hold.set()
            (notes / "first.md").write_text("# First\n\nA numbat named Norbert.\n", encoding="utf-8")
            assert entered.wait(60), "the first batch asked for its snapshot"
            assert pw.search("numbat Norbert", "bm25", 1)
            (notes / "second.md").write_text("# Second\n\nA bilby named Beatrix.\n", encoding="utf-8")
            wait_for(lambda: bool(pw.search("bilby Beatrix", "bm25", 1)), "the second file while the build is held")
            assert not release.is_set()
        finally:
            release.set()
            manager.stop()


def test_graph_structures_of_queried_methods_are_built_ahead_of_queries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a watcher batch the background thread also builds, on the new snapshot, what the methods queried so
    far build once per snapshot (here ppr's transition matrix and pathrag's pair index); the next query uses them."""
    import pathweaver.service.queries as queries

    # a loaded machine can make a first query slower than the replay limit, which would leave that method out
    monkeypatch.setattr(queries, "WARM_REPLAY_SECONDS", 600.0)
    from pathweaver.retrieval.graphs import _CACHE_ATTR
    from pathweaver.store.snapshot import CARRIED_ATTR

    notes = tmp_path / "notes"
    shutil.copytree(CORPUS, notes)
    with Pathweaver.open(tmp_path / "store") as pw:
        manager = IndexManager(pw, [notes], debounce_seconds=0.2)
        cache = pw.reader.cache

        def built(snapshot: object) -> dict:
            attrs = getattr(snapshot, "__dict__", {})
            return {key[0]: value for attr in (_CACHE_ATTR, CARRIED_ATTR) for key, value in attrs.get(attr, {}).items()}

        manager.start()
        try:
            assert manager.ready.wait(120)
            wait_for(lambda: cache.latest() is not None and cache.latest().version == pw.reader.db.version(),
                     "the first snapshot")
            question = "Which island does the quokka live on?"
            pw.retrieve(question, "ppr", 3)
            pw.retrieve(question, "pathrag", 3)
            before = cache.latest()
            (notes / "fresh.md").write_text("# Fresh\n\nThe quokka lives on Rottnest Island.\n", encoding="utf-8")

            def warmed() -> bool:
                latest = cache.latest()
                names = built(latest)
                return latest is not before and "transition_rows" in names and "pair_relations" in names

            wait_for(warmed, "ppr's and pathrag's structures on the new snapshot")
            after = cache.latest()
            transition = built(after)["transition_rows"]
            result = pw.retrieve(question, "ppr", 3)
            assert cache.latest() is after and built(after)["transition_rows"] is transition
            assert any("quokka" in after.chunk_texts[hit.passage] for hit in result.chunks)
        finally:
            manager.stop()
