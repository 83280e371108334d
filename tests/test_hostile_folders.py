"""Hostile folders: file names that are not UTF-8, very long, start with dashes or hold newlines (plus a fuzzed
set), symlinks out of the watched folder, and what must hold across server restarts. Checked through the CLI's
``index --json``, the indexer's watcher batches, and the MCP tools over a real stdio client."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pathweaver.config import Settings
from pathweaver.ingest.confine import OUTSIDE_REASON
from pathweaver.ingest.pipeline import Indexer
from pathweaver.ingest.scanner import NON_UTF8_REASON, store_path
from pathweaver.models.embedder import get_embedder
from pathweaver.server.background import IndexManager
from pathweaver.service import Pathweaver
from pathweaver.store.db import Database
from test_server_stdio import error_text, mcp_client, server_env, stdio_session

NAMES = [
    b"caf\xe9.md",  # Latin-1, not UTF-8
    b"caf\\xe9.md",  # a real name equal to the escaped form of the one above
    b"\xff\xfe bom.txt",
    b"-rf.md",
    b"--help.md",
    b"line\nbreak.md",
    b"tab\tand\rreturn.md",
    b"l" * 250 + b".md",  # 253 bytes: near NAME_MAX
    "naïve café 📚.md".encode(),
    b"quote's \"double\" $(touch pwned).md",
]


def fuzzed_names(n: int = 24, seed: int = 26) -> list[bytes]:
    """Names of random bytes (anything but '/' and NUL), some valid UTF-8, most not."""
    rng = random.Random(seed)
    out: list[bytes] = []
    while len(out) < n:
        alphabet = range(1, 128) if len(out) % 3 == 0 else range(1, 256)
        stem = bytes(rng.choice([b for b in alphabet if b != ord("/")]) for _ in range(rng.randint(1, 40)))
        name = stem + rng.choice([b".md", b".txt"])
        if name not in out and name not in NAMES:
            out.append(name)
    return out


def write_hostile(folder: Path, names: list[bytes]) -> dict[bytes, str]:
    """One file per name, each with its own word (``zebra<i>``); returns name -> word."""
    folder.mkdir(parents=True, exist_ok=True)
    words = {}
    for i, name in enumerate(names):
        words[name] = f"zebra{i}"
        with open(os.path.join(os.fsencode(folder), name), "wb") as f:
            f.write(f"# Note {i}\n\nThe word zebra{i} is written in note {i}.\n".encode())
    return words


def expected(folder: Path, names: list[bytes]) -> dict[str, str | None]:
    """Store path -> skip reason (None: indexed) of each name."""
    out: dict[str, str | None] = {}
    for name in names:
        path = os.fsdecode(os.path.join(os.fsencode(folder), name))
        try:
            name.decode("utf-8")
        except UnicodeDecodeError:
            out.setdefault(store_path(path), NON_UTF8_REASON)  # an escaped key a real file already holds: that one
            continue
        out[path] = "hidden" if name.startswith(b".") else None
    return out


def documents(store: Path) -> dict[str, tuple[str, str]]:
    with Database(store) as db:
        return {p: (s, r) for p, s, r in db.conn.execute("SELECT path, status, reason FROM documents")}


def test_cli_index_json_indexes_or_skips_every_name_with_a_reason(tmp_path: Path) -> None:
    names = NAMES + fuzzed_names()
    folder = tmp_path / "hostile"
    write_hostile(folder, names)
    (folder / "ok.md").write_text("# OK\n\nA plain note.\n", encoding="utf-8")
    store = tmp_path / "store"
    done = subprocess.run([sys.executable, "-m", "pathweaver.cli", "--store", str(store), "index", str(folder),
                           "--json"], capture_output=True, timeout=300, env=server_env())
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    report = json.loads(done.stdout)
    want = expected(folder, names)
    want[str(folder / "ok.md")] = None
    skipped = {s["path"]: s["reason"] for s in report["skipped_files"]}
    assert skipped == {p: r for p, r in want.items() if r is not None}
    assert report["added"] == sum(r is None for r in want.values()) and not report["errors"]
    got = documents(store)
    assert {p: (None if s == "indexed" else r) for p, (s, r) in got.items()} == want
    assert got[str(folder / "caf\\xe9.md")][0] == "indexed"  # the real name won over the escaped one


def test_a_watcher_batch_with_hostile_names_lands_its_other_files(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "first.md").write_text("# First\n\nThe first note.\n", encoding="utf-8")
    with Pathweaver.open(tmp_path / "store") as pw:
        manager = IndexManager(pw, [folder], debounce_seconds=0.2)
        manager.start()
        try:
            assert manager.ready.wait(120)
            names = NAMES + fuzzed_names(12, seed=7)
            write_hostile(folder, names)  # one batch holding every hostile name
            want = expected(folder, [n for n in names if not n.startswith(b".")])  # the watcher ignores hidden names
            start = time.monotonic()
            while missing := want.keys() - documents(tmp_path / "store").keys():
                assert time.monotonic() - start < 120, f"the batch did not land: {sorted(missing)}"
                time.sleep(0.3)
            got = documents(tmp_path / "store")
            assert {p: (None if got[p][0] == "indexed" else got[p][1]) for p in want} == want
            status = manager.snapshot()
            assert status["last_error"] is None and not (status["last_report"] or {}).get("errors")
            hits = pw.search("zebra3", mode="bm25", k=3)
            assert hits and hits[0]["doc"] == str(folder / "-rf.md")
        finally:
            manager.stop()


@pytest.fixture
def linked(tmp_path: Path) -> dict[str, Path]:
    """A watched folder with links out (a file, a folder), a link inside, and a folder it may link to."""
    outside = tmp_path / "home"
    (outside / ".ssh").mkdir(parents=True)
    (outside / ".ssh" / "id_rsa.txt").write_text("PRIVATE KEY walrus-secret\n", encoding="utf-8")
    (outside / "docs").mkdir()
    (outside / "docs" / "leak.md").write_text("# Leak\n\nThe narwhal-secret document.\n", encoding="utf-8")
    notes = tmp_path / "notes"
    (notes / "real").mkdir(parents=True)
    (notes / "real" / "inside.md").write_text("# Inside\n\nThe okapi note.\n", encoding="utf-8")
    (notes / "key.txt").symlink_to(outside / ".ssh" / "id_rsa.txt")
    (notes / "linked-docs").symlink_to(outside / "docs")
    (notes / "up.md").symlink_to(Path("..") / "home" / "docs" / "leak.md")  # out by a relative '..' target
    (notes / "alias.md").symlink_to(notes / "real" / "inside.md")
    return {"notes": notes, "outside": outside}


def test_symlinks_out_of_the_watched_folder_are_skipped(tmp_path: Path, linked: dict[str, Path]) -> None:
    notes = linked["notes"]
    emb = get_embedder()
    with Database(tmp_path / "store") as db:
        report = Indexer(db, Settings(store_dir=tmp_path / "store"), emb).index_paths([notes])
        rows = {p: (s, r) for p, s, r in db.conn.execute("SELECT path, status, reason FROM documents")}
        texts = " ".join(t for (t,) in db.conn.execute("SELECT text FROM chunks"))
    assert rows[str(notes / "key.txt")] == ("skipped", OUTSIDE_REASON)
    assert rows[str(notes / "linked-docs")] == ("skipped", OUTSIDE_REASON)
    assert rows[str(notes / "up.md")] == ("skipped", OUTSIDE_REASON)
    assert rows[str(notes / "alias.md")][0] == "indexed"  # its target is inside the watched folder
    assert "walrus" not in texts and "narwhal" not in texts and "okapi" in texts
    assert {"path": str(notes / "key.txt"), "reason": OUTSIDE_REASON} in report.skipped_files
    # a link made out later, through a watcher batch, is skipped too
    (notes / "later.md").symlink_to(linked["outside"] / "docs" / "leak.md")
    with Database(tmp_path / "store") as db:
        Indexer(db, Settings(store_dir=tmp_path / "store"), emb).apply_changes({notes / "later.md"}, set())
        assert db.conn.execute("SELECT status, reason FROM documents WHERE path = ?",
                               (str(notes / "later.md"),)).fetchone() == ("skipped", OUTSIDE_REASON)
    # the setting lets the indexer follow them
    allow = Settings(store_dir=tmp_path / "allow")
    allow.ingest.follow_symlinks_outside = True
    with Database(tmp_path / "allow") as db:
        Indexer(db, allow, emb).index_paths([notes])
        texts = " ".join(t for (t,) in db.conn.execute("SELECT text FROM chunks"))
    assert "walrus" in texts and "narwhal" in texts


def test_tools_on_a_hostile_folder_and_across_restarts(tmp_path: Path, linked: dict[str, Path]) -> None:
    """Over a real stdio client: hostile names and links out in index_status, reindex answering, a NUL byte
    refused with a message; then remove_folder on a subfolder and a file deleted while the server is stopped,
    both holding from the first call of the next server on the store."""
    notes = linked["notes"]
    write_hostile(notes, NAMES)
    (notes / "sub").mkdir()
    (notes / "sub" / "gone-later.md").write_text("# Sub\n\nThe axolotl note.\n", encoding="utf-8")
    (notes / "doomed.md").write_text("# Doomed\n\nThe pangolin note.\n", encoding="utf-8")
    store = tmp_path / "store"
    with open(tmp_path / "server.log", "w") as errlog, mcp_client(stdio_session(store, [notes], errlog)) as c:
        status = c.wait_indexed()
        skipped = {s["path"]: s["reason"] for s in status["skipped"]}
        assert skipped[store_path(os.fsdecode(os.path.join(os.fsencode(notes), b"\xff\xfe bom.txt")))] == NON_UTF8_REASON
        assert skipped[str(notes / "key.txt")] == OUTSIDE_REASON and status["last_error"] is None
        report = c.ok("reindex")["report"]
        assert not report["errors"] and status["stats"]["documents"] >= 8
        assert c.found("zebra3") and c.found("okapi") and not c.found("walrus") and not c.found("narwhal")
        nul = c.call("add_folder", {"path": f"{notes}/bad\x00name"})
        assert nul.is_error and "NUL byte" in error_text(nul)
        outside = c.call("reindex", {"path": str(notes / "key.txt")})
        assert outside.is_error and "outside" in error_text(outside)
        assert c.ok("remove_folder", {"path": str(notes / "sub")})["folder"] == str(notes / "sub")
        assert not c.found("axolotl") and c.found("pangolin")
    (notes / "doomed.md").unlink()  # while no server runs
    with open(tmp_path / "server2.log", "w") as errlog, mcp_client(stdio_session(store, [notes], errlog)) as c:
        assert not c.found("pangolin")  # the first call: the deleted file is already gone
        status: dict[str, Any] = c.ok("index_status")
        assert status["excluded"] == [str(notes / "sub")]
        c.wait_indexed()
        assert not c.found("axolotl") and c.found("okapi")  # the removed subfolder stayed out after the restart
    with Pathweaver.open(store) as pw:  # and the CLI's view of the store agrees
        assert pw.folders() == {str(notes): "watched", str(notes / "sub"): "removed"}
        pw.index([notes], exact=False)
        assert not pw.search("axolotl", mode="bm25", k=3)


def test_a_server_takes_the_recorded_folders_within_its_own_roots(tmp_path: Path) -> None:
    """Folders recorded by another process: those inside this server's folders apply (a removed subfolder stays out,
    an added unwatched one is indexed), those elsewhere stay out of its hands (its tools could not remove them)."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    for folder in (mine / "sub", mine / "extra", other):
        folder.mkdir(parents=True)
    with Pathweaver.open(tmp_path / "store") as pw:
        pw.set_folder(other, "watched")
        pw.set_folder(mine / "sub", "removed")
        pw.set_folder(mine / "extra", "indexed")
        manager = IndexManager(pw, [mine])
        status = manager.snapshot()
        assert status["folders"] == [str(mine), str(mine / "extra")] and status["watched"] == [str(mine)]
        assert status["excluded"] == [str(mine / "sub")]
        pw.set_folder(mine, "watched")  # adding a folder again re-admits what was removed below it
        assert pw.folders() == {str(other): "watched", str(mine): "watched", str(mine / "extra"): "indexed"}
