"""A PostgreSQL store served over MCP and written by other processes at once (issue 39): a real ``ClientSession``
spawns ``pathweaver --store postgresql://... serve --watch DIR``; two CLI ``index`` processes write the database at
once; the server's next answer sees their commits and never cites a deleted document; a writer killed by
SIGKILL mid-transaction leaves the database whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from pathweaver.store.backend import open_database
from test_server_stdio import OFFLINE_ENV, mcp_client, server_env, stdio_session, write_notes

OTHER = {"Quokka.md": "# Quokka\n\nThe quokka lighthouse stands on Rottnest Island, west of Perth.\n"}


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``pathweaver --store URL ARGS`` in a process of its own."""
    return subprocess.run([sys.executable, "-m", "pathweaver.cli", "--store", url, "--set",
                           "models.llm_backend=none", *args], capture_output=True, text=True,
                          env=server_env(**OFFLINE_ENV), timeout=600)


def test_a_server_on_postgres_answers_and_sees_two_other_writers_and_a_delete(pg_url: str,
                                                                                tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "notes")
    other = write_notes(tmp_path / "other", OTHER)
    with open(tmp_path / "server.log", "w") as errlog, \
            mcp_client(stdio_session(pg_url, [notes], errlog)) as c:  # type: ignore[arg-type]
        status = c.wait_indexed()
        assert status["stats"]["documents"] == 3 and status["stats"]["entities"] > 0
        for mode in ("dense", "bm25", "hybrid"):
            hits = c.ok("search", {"query": "Bernoulli numbers", "mode": mode, "k": 3})["results"]
            assert hits and hits[0]["doc"].endswith("Ada Lovelace.md"), mode
        paths = c.ok("retrieve_paths", {"question": "How is Ada Lovelace related to the Analytical Engine?"})
        assert paths["method"]["name"] == "pathrag" and paths["chunks"]
        mcmi = c.ok("build_mcmi", {"question": "Who designed the Analytical Engine?", "k_triples": 3,
                                   "k_chunks": 2})
        assert mcmi["subgraph"] is not None and mcmi["triples"]
        assert c.ok("get_entity", {"name": "Charles Babbage"})

        # two other processes (teammates' CLIs) index their own folders into the same database at once, while
        # the server holds it open: the store's write lock takes their transactions in turn
        third = write_notes(tmp_path / "third", {f"t{j}.md": f"# Engine {j}\n\nCharles Babbage built engine {j} "
                                                  f"in London.\n" for j in range(4)})
        writers = [subprocess.Popen([sys.executable, "-m", "pathweaver.cli", "--store", pg_url, "--set",
                                     "models.llm_backend=none", "index", "--keep-others", str(f)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=server_env(**OFFLINE_ENV)) for f in (other, third)]
        for p in writers:
            _, err = p.communicate(timeout=600)
            assert p.returncode == 0, err
        assert c.found("quokka lighthouse")  # the next answer, no waiting: it reads the store's version
        with open_database(pg_url) as db:  # nothing lost, nothing twice
            paths = [r[0] for r in db.conn.execute("SELECT path FROM documents ORDER BY path")]
            assert paths == sorted(str(p) for f in (notes, other, third) for p in f.iterdir())
        gone = other / "Quokka.md"
        gone.unlink()
        done = cli(pg_url, "index", "--keep-others", str(other))
        assert done.returncode == 0, done.stderr
        hits: list[dict[str, Any]] = []
        for mode in ("bm25", "dense", "hybrid"):
            hits += c.ok("search", {"query": "quokka lighthouse Rottnest", "mode": mode, "k": 8})["results"]
        assert hits and all(h["doc"] != str(gone) for h in hits)
        assert c.ok("index_status")["stats"]["documents"] == 3 + 4


def test_a_writer_killed_mid_transaction_leaves_the_database_consistent(pg_url: str, tmp_path: Path) -> None:
    """kill -9 of an ``index`` while it holds the store's write transaction: PostgreSQL rolls the transaction
    back, every document in the database has its chunks, postings and vectors, and the next run finishes."""
    import os
    import signal
    import time

    import psycopg

    from pathweaver.store.pg.dialect import WRITE_LOCK

    folder = write_notes(tmp_path / "f", {f"n{j}.md": f"# Note {j}\n\nAda Lovelace wrote note {j} about the "
                                          f"Analytical Engine and Charles Babbage in London.\n" for j in range(30)})
    proc = subprocess.Popen([sys.executable, "-m", "pathweaver.cli", "--store", pg_url, "--set",
                             "models.llm_backend=none", "index", str(folder)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=server_env(**OFFLINE_ENV))
    caught = False
    with psycopg.connect(pg_url, autocommit=True) as watch:
        while proc.poll() is None and not caught:
            # a write transaction after some documents were committed (not the store's creation)
            caught = bool(watch.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = %s AND "
                "to_regclass('pathweaver.documents') IS NOT NULL", (WRITE_LOCK,)).fetchone()[0]) and bool(
                watch.execute("SELECT count(*) FROM pathweaver.documents").fetchone()[0])
            if caught:
                os.kill(proc.pid, signal.SIGKILL)
            else:
                time.sleep(0.01)
    proc.wait(timeout=60)
    assert caught, "the index finished before its write transaction was seen"
    with open_database(pg_url) as db:
        assert db.integrity_ok()
        kept = db.conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        assert kept > 0  # what was committed before the kill stays
        rows = db.conn.execute("SELECT d.id, count(c.id), count(v.id) FROM documents d LEFT JOIN chunks c "
                               "ON c.doc_id = d.id LEFT JOIN chunk_vec v ON v.id = c.id WHERE d.status = 'indexed' "
                               "GROUP BY d.id").fetchall() if db.get_meta("embedding_dim") else []
        assert all(n > 0 and n == v for _, n, v in rows)  # no document half-written
    done = cli(pg_url, "index", str(folder))
    assert done.returncode == 0, done.stderr
    with open_database(pg_url) as db:
        paths = sorted(r[0] for r in db.conn.execute("SELECT path FROM documents"))
        assert paths == sorted(str(p) for p in folder.iterdir()) and db.integrity_ok()
        assert db.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == \
            db.conn.execute("SELECT count(*) FROM chunk_vec").fetchone()[0] >= 30
        assert db.conn.execute("SELECT count(*) FROM entities").fetchone()[0] > 0
        assert db.get_meta("refresh_pending") in (None, "0")
