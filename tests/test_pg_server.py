"""A PostgreSQL store served over MCP and written by other processes at once (issue 39): a real ``ClientSession``
spawns ``pathweaver --store postgresql://... serve --watch DIR``; a CLI ``index`` in another process and two
concurrent writers share the database; the server's next answer sees their commits and never cites a deleted
document."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from test_server_stdio import OFFLINE_ENV, mcp_client, server_env, stdio_session, write_notes

OTHER = {"Quokka.md": "# Quokka\n\nThe quokka lighthouse stands on Rottnest Island, west of Perth.\n"}


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``pathweaver --store URL ARGS`` in a process of its own."""
    return subprocess.run([sys.executable, "-m", "pathweaver.cli", "--store", url, "--set",
                           "models.llm_backend=none", *args], capture_output=True, text=True,
                          env=server_env(**OFFLINE_ENV), timeout=600)


def test_a_server_on_postgres_answers_and_sees_another_process_write_and_delete(pg_url: str,
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

        # another process (a teammate's CLI) indexes its own folder into the same database
        done = cli(pg_url, "index", "--keep-others", str(other))
        assert done.returncode == 0, done.stderr
        assert c.found("quokka lighthouse")  # the next answer, no waiting: it reads the store's version
        gone = other / "Quokka.md"
        gone.unlink()
        done = cli(pg_url, "index", "--keep-others", str(other))
        assert done.returncode == 0, done.stderr
        hits: list[dict[str, Any]] = []
        for mode in ("bm25", "dense", "hybrid"):
            hits += c.ok("search", {"query": "quokka lighthouse Rottnest", "mode": mode, "k": 8})["results"]
        assert hits and all(h["doc"] != str(gone) for h in hits)
        assert c.ok("index_status")["stats"]["documents"] == 3


def test_two_writers_at_once_lose_nothing_and_duplicate_nothing(pg_url: str, tmp_path: Path) -> None:
    """Two CLI ``index`` processes on two folders write one database at the same time (the store's advisory write
    lock serialises their transactions): both succeed, every document of both is there once, and the graph loads."""
    folders = [write_notes(tmp_path / f"f{i}", {f"n{i}-{j}.md": f"# Note {i} {j}\n\nCharles Babbage met writer "
                                                 f"{i} about engine {j} in London.\n" for j in range(4)})
               for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-m", "pathweaver.cli", "--store", pg_url, "--set",
                               "models.llm_backend=none", "index", "--keep-others", str(f)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=server_env(**OFFLINE_ENV)) for f in folders]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    from pathweaver.store.backend import open_database
    from pathweaver.store.reads import StoreReader

    with open_database(pg_url) as db:
        paths = [r[0] for r in db.conn.execute("SELECT path FROM documents ORDER BY path")]
        assert paths == sorted(str(f / name) for f in folders for name in (p.name for p in f.iterdir()))
        assert db.integrity_ok()
        StoreReader(db).snapshot()  # the graph loads
