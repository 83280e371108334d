"""Documents keyed by machine (issue 39): two machines whose folders have the same absolute path share one store
without colliding, a plain ``index`` on one never deletes the other's documents, and stores made before the key
migrate (real SQLite files and a real PostgreSQL: the ``backend`` fixture; machines simulated by
``PATHWEAVER_MACHINE``, the documented override)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from backends import is_pg, sqlite_before_machines, store_settings
from pathweaver.config import Settings
from pathweaver.errors import UserError
from pathweaver.ingest.documents import withhold_outdated
from pathweaver.ingest.pipeline import Indexer
from pathweaver.store.backend import open_database
from pathweaver.store.machine import MACHINE_ENV, this_machine
from pathweaver.store.reads import StoreReader
from pathweaver.store.schema import MACHINES_VERSION

ALPHA = {"a.md": "# Alpha notes\n\nMarie Curie was born in Warsaw and studied in Paris.",
         "same.md": "# Shared name\n\nThe Vistula flows through Warsaw and Krakow."}
BETA = {"b.md": "# Beta notes\n\nPolonium was discovered by Marie Curie in 1898.",
        "same.md": "# Shared name\n\nRadium glows in the dark; Curie kept it by her bed."}


def settings(store: Path | str) -> Settings:
    s = store_settings(store)
    s.extract.entities = "statistical"
    return s


def fill(folder: Path, files: dict[str, str]) -> None:
    """``folder`` holding exactly ``files`` (the same absolute path, another machine's contents)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")


def index_as(machine: str, monkeypatch: pytest.MonkeyPatch, store: Path | str, embedder,  # type: ignore[no-untyped-def]
             paths: list[Path]) -> None:
    monkeypatch.setenv(MACHINE_ENV, machine)
    with open_database(store) as db:
        Indexer(db, settings(store), embedder).index_paths(paths)  # a plain index: exact


def documents_seen_by(machine: str, monkeypatch: pytest.MonkeyPatch, store: Path | str) -> dict[str, str]:
    """{path as ``machine`` is shown it: title} of the indexed documents."""
    monkeypatch.setenv(MACHINE_ENV, machine)
    with open_database(store) as db:
        return {d["path"]: d["title"] for d in StoreReader(db).documents() if d["status"] == "indexed"}


def test_the_override_names_a_stable_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MACHINE_ENV, "alpha")
    alpha = this_machine()
    assert alpha == this_machine() and alpha.name == "alpha" and re.fullmatch(r"[0-9a-f]{16}", alpha.id)
    monkeypatch.setenv(MACHINE_ENV, "beta")
    assert this_machine().id != alpha.id
    monkeypatch.delenv(MACHINE_ENV)
    own = this_machine()
    assert own == this_machine() and re.fullmatch(r"[0-9a-f]{16}", own.id) and own.id != alpha.id


def test_two_machines_with_the_same_folder_path_keep_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          embedder, backend) -> None:  # type: ignore[no-untyped-def]
    store = backend("team")
    notes = tmp_path / "notes"
    fill(notes, ALPHA)
    index_as("alpha", monkeypatch, store, embedder, [notes])
    fill(notes, BETA)
    index_as("beta", monkeypatch, store, embedder, [notes])

    a, b, same = (str(notes / n) for n in ("a.md", "b.md", "same.md"))
    assert documents_seen_by("beta", monkeypatch, store) == {
        b: "Beta notes", same: "Shared name", f"alpha:{a}": "Alpha notes", f"alpha:{same}": "Shared name"}
    assert set(documents_seen_by("alpha", monkeypatch, store)) == {a, same, f"beta:{b}", f"beta:{same}"}
    with open_database(store) as db:
        reader = StoreReader(db)
        stats = reader.stats()
        assert stats["documents"] == 4
        assert {(m["name"], m["documents"], m["this"]) for m in stats["machines"]} == {
            ("alpha", 2, True), ("beta", 2, False)}
        # each same.md keeps its own text, cited under the path its reader is shown
        hits = {row[2]: row[7] for row in reader.bm25_rows("Vistula Radium", 10)}
        assert "Vistula" in hits[same] and "Radium" in hits[f"beta:{same}"]
        assert reader.document_chunks(f"beta:{same}")[0]["text"].count("Radium") == 1
        snap = reader.snapshot()
        assert set(snap.chunk_docs) == {a, same, f"beta:{b}", f"beta:{same}"}


def test_a_plain_index_never_deletes_another_machines_documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                embedder, backend) -> None:  # type: ignore[no-untyped-def]
    store = backend("team")
    notes, other = tmp_path / "notes", tmp_path / "other"
    fill(notes, BETA)
    index_as("beta", monkeypatch, store, embedder, [notes])
    fill(notes, ALPHA)
    fill(other, {"c.md": "# Gamma\n\nKrakow has an old university."})
    index_as("alpha", monkeypatch, store, embedder, [notes])
    index_as("alpha", monkeypatch, store, embedder, [other])  # no --keep-others: alpha's notes go, beta's stay

    assert set(documents_seen_by("beta", monkeypatch, store)) == {
        str(notes / "b.md"), str(notes / "same.md"), f"alpha:{other / 'c.md'}"}
    # alpha's server starts where beta's files do not exist: the startup pass stats alpha's documents only
    shutil.rmtree(notes)
    monkeypatch.setenv(MACHINE_ENV, "alpha")
    with open_database(store) as db:
        assert withhold_outdated(db).gone == []
    assert len(documents_seen_by("beta", monkeypatch, store)) == 3


def _to_pg_schema_2(url: str) -> None:
    """Rewrite a current PostgreSQL store as pg schema 2 wrote it (no machine key), rows kept."""
    import psycopg

    with psycopg.connect(url, autocommit=False) as conn:
        for sql in (
            "SET search_path TO pathweaver, public",
            "ALTER TABLE documents DROP CONSTRAINT documents_machine_path",
            "ALTER TABLE documents DROP COLUMN machine",
            "ALTER TABLE documents ADD CONSTRAINT documents_path_key UNIQUE (path)",
            "ALTER TABLE folders DROP CONSTRAINT folders_pkey",
            "ALTER TABLE folders DROP COLUMN machine",
            "ALTER TABLE folders ADD PRIMARY KEY (path)",
            "DROP TABLE machines",
            "UPDATE meta SET key = 'roots' WHERE key LIKE 'roots:%'",
            "UPDATE meta SET value = '2' WHERE key = 'pg_schema_version'",
            f"UPDATE meta SET value = '{MACHINES_VERSION - 1}' WHERE key = 'schema_version'",
        ):
            conn.execute(sql)
        conn.commit()


def test_a_store_from_before_the_machine_key_becomes_the_opening_machines(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch, embedder,
                                                                        backend) -> None:  # type: ignore[no-untyped-def]
    store = backend("old")
    notes = tmp_path / "notes"
    fill(notes, ALPHA)
    index_as("alpha", monkeypatch, store, embedder, [notes])
    with open_database(store) as db:
        before = StoreReader(db).canonical_graph()
    if is_pg(store):
        _to_pg_schema_2(str(store))
    else:
        sqlite_before_machines(Path(store) / "pathweaver.db")
    monkeypatch.setenv(MACHINE_ENV, "gamma")
    with pytest.raises(UserError, match="compact"):  # a reader may not upgrade it: it names the command that does
        open_database(store, readonly=True)

    # the first machine to open it with this pathweaver owns its documents: its next index changes nothing
    monkeypatch.setenv(MACHINE_ENV, "gamma")
    with open_database(store) as db:
        report = Indexer(db, settings(store), embedder).index_paths([notes])
        assert (report.added, report.deleted, report.unchanged) == (0, 0, len(ALPHA))
        reader = StoreReader(db)
        assert reader.canonical_graph() == before
        assert reader.stats()["schema_version"] >= MACHINES_VERSION
    assert set(documents_seen_by("gamma", monkeypatch, store)) == {str(notes / n) for n in ALPHA}
    fill(notes, BETA)
    index_as("delta", monkeypatch, store, embedder, [notes])  # another machine, the same path: no collision
    assert len(documents_seen_by("delta", monkeypatch, store)) == len(ALPHA) + len(BETA)


def test_a_new_computer_adopts_its_old_documents_and_a_gone_machine_is_forgotten(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder, backend) -> None:  # type: ignore[no-untyped-def]
    store = backend("moved")
    notes, team = tmp_path / "notes", tmp_path / "team"
    fill(notes, ALPHA)
    index_as("old-laptop", monkeypatch, store, embedder, [notes])
    fill(team, BETA)
    index_as("teammate", monkeypatch, store, embedder, [team])
    fill(notes, {"same.md": ALPHA["same.md"] + " Edited on the new laptop.", "new.md": "# New\n\nKrakow."})
    index_as("new-laptop", monkeypatch, store, embedder, [notes])  # before adopting: the old rows stay beside
    assert len(documents_seen_by("new-laptop", monkeypatch, store)) == 2 + 2 + 2

    with open_database(store) as db:
        indexer = Indexer(db, settings(store), embedder)
        with pytest.raises(UserError, match="machines"):
            indexer.take_over("no-such-machine")
        assert indexer.take_over("old-laptop") == 1  # a.md; its same.md clashed with new-laptop's, which stays
        report = indexer.index_paths([notes])  # the adopted a.md is gone from disk: a plain index removes it
        assert report.deleted == 1 and report.unchanged == 2
        assert indexer.forget("teammate") == 2
        reader = StoreReader(db)
        assert {d["path"] for d in reader.documents()} == {str(notes / "same.md"), str(notes / "new.md")}
        assert [m["name"] for m in reader.stats()["machines"]] == ["new-laptop"]
        assert "Edited" in reader.document_chunks(str(notes / "same.md"))[0]["text"]
        assert not reader.bm25_chunks("Polonium", 5)  # the forgotten machine's text is out of the index too


def test_the_machines_command_lists_and_adopts(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    store, notes = tmp_path / "store", tmp_path / "notes"
    fill(notes, ALPHA)

    def cli(machine: str, *args: str) -> dict:
        env = {**os.environ, MACHINE_ENV: machine}
        out = subprocess.run([sys.executable, "-m", "pathweaver.cli", "--store", str(store), *args, "--json"],
                             capture_output=True, text=True, timeout=240, env=env, check=True)
        return json.loads(out.stdout)

    assert cli("old", "index", str(notes))["added"] == 2
    assert cli("new", "machines")["machines"] == [{"name": "old", "documents": 2, "this": False}]
    adopted = cli("new", "machines", "--adopt", "old")
    assert adopted["documents"] == 2 and adopted["machines"] == [{"name": "new", "documents": 2, "this": True}]
    assert cli("new", "index", str(notes))["unchanged"] == 2


def test_two_machines_with_one_host_name_are_shown_apart(backend) -> None:  # type: ignore[no-untyped-def]
    import time

    from pathweaver.store import machines
    from pathweaver.store.machine import Machine

    one, two = Machine("0123456789abcdef", "laptop"), Machine("fedcba9876543210", "laptop")
    with open_database(backend("names")) as db:
        with db.write() as conn:
            for m in (one, two, one):  # registering again changes nothing
                machines.register(conn, m, time.time())
        assert [(name, n) for _, name, n in machines.machine_counts(db.conn)] == [("laptop", 0), ("laptop-fedc", 0)]
