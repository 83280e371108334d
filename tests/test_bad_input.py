"""Bad files are skipped with a readable reason in stats()["skipped"]; the good ones are still indexed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pathweaver.config import ConfigError, Settings
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models.embedder import get_embedder
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader

GOOD = "Marie Curie was born in Warsaw. She moved to Paris to study physics."


def reasons(db: Database) -> dict[str, str]:
    return {Path(s["path"]).name: s["reason"] for s in StoreReader(db).stats()["skipped"]}


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    f = tmp_path / "notes"
    f.mkdir()
    (f / "good.txt").write_text(GOOD, encoding="utf-8")
    (f / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR" + bytes(range(256)))
    (f / "latin1.txt").write_bytes("Caf\u00e9 cr\u00e8me".encode("latin-1"))
    (f / "empty.md").write_bytes(b"")
    with open(f / "huge.txt", "wb") as big:  # sparse 50 MB file, above the 20 MB default limit
        big.truncate(50 * 1024 * 1024)
    (f / "loop").symlink_to(f, target_is_directory=True)
    (f / "selfloop.md").symlink_to(f / "selfloop.md")
    return f


def test_bad_files_are_skipped_with_reasons(folder: Path, tmp_path: Path) -> None:
    with Database(tmp_path / "store") as db:
        report = Indexer(db, Settings(store_dir=tmp_path / "store"), get_embedder()).index_paths([folder])
        got = reasons(db)
        stats = StoreReader(db).stats()
    assert report.added == 1 and stats["documents"] == 1
    assert got["binary.txt"] == "binary content"
    assert got["latin1.txt"].startswith("invalid UTF-8")
    assert got["empty.md"] == "empty document"
    assert got["huge.txt"].startswith("too large")
    assert got["loop"] == "symlink loop"
    assert got["selfloop.md"] == "symlink loop"
    assert report.skipped == len(got) == 6


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD, encoding="utf-8")
    secret = folder / "secret.txt"
    secret.write_text("Top secret text about Warsaw.", encoding="utf-8")
    if os.geteuid() == 0:
        print("running as root: chmod 000 does not block reads, so os.open() is made to raise PermissionError")
        real_open = os.open

        def guarded(file, *args, **kwargs):  # type: ignore[no-untyped-def]
            if str(file) == str(secret):
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(os, "open", guarded)
    else:
        secret.chmod(0)
    with Database(tmp_path / "store") as db:
        report = Indexer(db, Settings(store_dir=tmp_path / "store"), get_embedder()).index_paths([folder])
        assert reasons(db)["secret.txt"] == "unreadable: permission denied"
        assert report.added == 1 and StoreReader(db).stats()["documents"] == 1


def test_file_deleted_between_scan_and_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pathweaver.ingest.pipeline as pipeline

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD, encoding="utf-8")
    doomed = folder / "doomed.txt"
    doomed.write_text("This file will vanish before it is read.", encoding="utf-8")
    real_walk = pipeline.walk

    def walk_then_delete(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = real_walk(*args, **kwargs)
        doomed.unlink()
        return found

    monkeypatch.setattr(pipeline, "walk", walk_then_delete)
    with Database(tmp_path / "store") as db:
        report = Indexer(db, Settings(store_dir=tmp_path / "store"), get_embedder()).index_paths([folder])
        assert reasons(db)["doomed.txt"] == "vanished before it could be read"
        assert report.added == 1 and report.skipped == 1


def test_indexed_file_that_turns_bad_loses_its_chunks(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    note = folder / "note.txt"
    note.write_text(GOOD, encoding="utf-8")
    (folder / "other.txt").write_text("The Vistula flows through Krakow.", encoding="utf-8")
    with Database(tmp_path / "store") as db:
        indexer = Indexer(db, Settings(store_dir=tmp_path / "store"), get_embedder())
        indexer.index_paths([folder])
        note.write_bytes(b"\xff\xfe broken")
        report = indexer.index_paths([folder])
        assert report.skipped == 1 and reasons(db)["note.txt"].startswith("invalid UTF-8")
        rows = db.conn.execute("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id "
                               "WHERE d.path = ?", (str(note),)).fetchone()[0]
        assert rows == 0 and "warsaw" not in StoreReader(db).snapshot().entity_index


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with Database(tmp_path / "store") as db, pytest.raises(ConfigError, match="no such file or folder"):
        Indexer(db, Settings(store_dir=tmp_path / "store"), get_embedder()).index_paths([tmp_path / "nope"])


def test_reads_are_capped_one_byte_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file is read whole up to the limit, and one byte further shows that it is too large, also when it is
    larger than its size at the first look (it grew in between)."""
    from pathweaver.ingest.prepare import read_capped

    small, big = tmp_path / "small.txt", tmp_path / "big.txt"
    small.write_bytes(b"x" * 100)
    big.write_bytes(b"y" * 5000)
    assert read_capped(small, 1000) == b"x" * 100 and read_capped(small, 100) == b"x" * 100
    assert read_capped(small, 99) == b"x" * 100  # one past the limit: too large
    assert read_capped(big, 1000) == b"y" * 1001
    assert read_capped(tmp_path / "small.txt", 0) == b"x"
    import pathweaver.ingest.prepare as prepare

    real = os.fstat
    monkeypatch.setattr(prepare.os, "fstat", lambda fd: os.stat_result((*real(fd)[:6], 10, *real(fd)[7:])))
    assert read_capped(big, 10_000) == b"y" * 5000  # stat said 10 bytes: the rest is read on
    assert read_capped(big, 1000) == b"y" * 1001


def test_every_file_is_read_again_after_the_parse_rules_change(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A store made under older parsers reads every file again on its next full scan after an upgrade, and only
    then: a stub note once refused as "empty document" is indexed, and a note the old parser read otherwise (a
    Logseq property left as text) gets the new parse, moved or not; its stat alone would leave both standing."""
    from dataclasses import replace

    from pathweaver.ingest import parsers
    from pathweaver.ingest.parsed import ParseError

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "good.txt").write_text(GOOD, encoding="utf-8")
    (notes / "stub.md").write_text('---\ntitle: "Nautical cartography"\n---\n', encoding="utf-8")
    (notes / "slides.md").write_text("alias:: Deck mode\n\n- Right click the page title to present it.\n", "utf-8")
    real = parsers._PARSERS[".md"]

    def older(path: Path, data: bytes) -> object:
        if path.name == "stub.md":
            raise ParseError("empty document")
        return replace(real(path, data), text="alias:: Deck mode\nRight click the page title to present it.")

    def texts(db: Database, name: str = "slides.md") -> set[str]:
        return {row[2] for row in StoreReader(db).canonical_graph()["chunks"] if row[0].endswith(name)}

    with Database(tmp_path / "store") as db:
        indexer = Indexer(db, Settings(store_dir=tmp_path / "store"), get_embedder())
        with monkeypatch.context() as m:  # the older parser, and the rules it was stamped with
            m.setitem(parsers._PARSERS, ".md", older)
            m.setattr("pathweaver.ingest.pipeline.PARSE_RULES", parsers.PARSE_RULES - 1)
            indexer.index_paths([notes])
        assert reasons(db) == {"stub.md": "empty document"} and any("alias::" in t for t in texts(db))
        (notes / "slides.md").rename(notes / "deck.md")  # moved as well: no rename keeps the old parse
        indexer.index_paths([notes])
        assert reasons(db) == {} and StoreReader(db).stats()["documents"] == 3
        assert not texts(db) and texts(db, "deck.md") and not any("::" in t for t in texts(db, "deck.md"))
        assert db.get_meta("parse_rules") == str(parsers.PARSE_RULES)
        again = indexer.index_paths([notes])
        assert again.added == again.updated == 0 and again.unchanged == 3
