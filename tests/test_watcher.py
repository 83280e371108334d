"""FolderWatcher on a real temp folder (inotify): debounced batches with the right changed/removed sets."""

from __future__ import annotations

import queue
import time
from pathlib import Path

import pytest

from pathweaver.config import ConfigError
from pathweaver.ingest.watcher import FolderWatcher, is_temp_name

WAIT = 10.0  # generous upper bound for a batch to arrive on a loaded machine


class Collector:
    def __init__(self) -> None:
        self.batches: queue.Queue[tuple[set[Path], set[Path]]] = queue.Queue()

    def __call__(self, changed: set[Path], removed: set[Path]) -> None:
        self.batches.put((set(changed), set(removed)))

    def until(self, changed: set[Path], removed: set[Path]) -> tuple[set[Path], set[Path]]:
        """Merge batches (last one wins per path) until the expected sets are reached or WAIT passes."""
        state: dict[Path, bool] = {}
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                c, r = self.batches.get(timeout=0.2)
            except queue.Empty:
                continue
            for p in r:
                state[p] = False
            for p in c:
                state[p] = True
            got = ({p for p, v in state.items() if v}, {p for p, v in state.items() if not v})
            if got == (changed, removed):
                return got
        return {p for p, v in state.items() if v}, {p for p, v in state.items() if not v}


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    d = tmp_path / "watched"
    d.mkdir()
    return d


def test_create_modify_move_delete(root: Path) -> None:
    got = Collector()
    with FolderWatcher([root], got, debounce_seconds=0.2):
        a = root / "a.md"
        a.write_text("one")
        a.write_text("two")
        (root / ".hidden.md").write_text("x")
        (root / "a.md.swp").write_text("x")
        (root / "notes.md~").write_text("x")
        assert got.until({a}, set()) == ({a}, set())

        b = root / "b.md"
        a.rename(b)
        assert got.until({b}, {a}) == ({b}, {a})

        b.unlink()
        assert got.until(set(), {b}) == (set(), {b})


def test_batch_merging_rules(root: Path) -> None:
    got = Collector()
    with FolderWatcher([root], got, debounce_seconds=0.5):
        gone = root / "gone.md"
        gone.write_text("x")
        gone.unlink()  # changed then removed in one batch -> removed only
        back = root / "back.md"
        back.write_text("x")
        time.sleep(0.05)
        back.unlink()
        back.write_text("again")  # removed then re-created -> changed
        changed, removed = got.until({back}, {gone})
    assert (changed, removed) == ({back}, {gone})


def test_directory_moved_in_and_removed(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "n.md").write_text("x")
    got = Collector()
    with FolderWatcher([root], got, debounce_seconds=0.2):
        moved = root / "sub"
        outside.joinpath("sub").rename(moved)
        # the folder is reported (the indexer scans it); watchdog also reports its files
        assert got.until({moved, moved / "n.md"}, set()) == ({moved, moved / "n.md"}, set())
        (moved / "n.md").unlink()
        moved.rmdir()
        # a removed folder absorbs the pending removals below it
        assert got.until(set(), {moved}) == (set(), {moved})


def test_on_batch_errors_do_not_kill_the_thread(root: Path) -> None:
    got = Collector()
    calls = {"n": 0}

    def flaky(changed: set[Path], removed: set[Path]) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("indexer blew up")
        got(changed, removed)

    with FolderWatcher([root], flaky, debounce_seconds=0.1):
        (root / "first.md").write_text("x")
        deadline = time.monotonic() + WAIT
        while calls["n"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        second = root / "second.md"
        second.write_text("x")
        assert second in got.until({second}, set())[0]


def test_ignore_callback_stop_flushes_and_errors(root: Path) -> None:
    got = Collector()
    watcher = FolderWatcher([root], got, debounce_seconds=30, ignore=lambda p: p.suffix == ".log")
    watcher.start()
    (root / "x.log").write_text("x")
    kept = root / "kept.md"
    kept.write_text("x")
    time.sleep(0.5)  # let inotify deliver; the 30 s debounce has not passed
    assert got.batches.empty()
    watcher.stop()  # delivers what is pending
    assert got.batches.get(timeout=1) == ({kept}, set())
    with pytest.raises(FileNotFoundError):
        FolderWatcher([root / "nope"], got).start()
    with pytest.raises(ConfigError):
        FolderWatcher([root], got, debounce_seconds=-1)


def test_temp_names() -> None:
    assert all(is_temp_name(n) for n in ["a.md.swp", ".a.md.swx", "a.md~", ".#a.md", "4913", "#a.md#"])
    assert not any(is_temp_name(n) for n in ["a.md", "swap.md", "4913.md"])
