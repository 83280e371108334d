"""Hostile files and a careless user, round two (issue 40): a FIFO in a watched folder, a hard link to a file
outside it, a DOCX zip bomb, a text file near the old size limit, an edit made while no server ran, a CLI index
over a running server's store, and Ctrl-C / SIGTERM during a long first index. Each goes through the real
interface: the CLI as a process, the MCP SDK client over stdio."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pathweaver.ingest.safe_open import NOT_REGULAR_REASON
from pathweaver.store.servers import live_servers
from test_server_stdio import Client, mcp_client, serve_args, server_env, stdio_session

pytestmark = pytest.mark.timeout(2400)  # processes that load the model, on a machine that may be busy
STOP_S = 5.0  # Ctrl-C and SIGTERM must end a process within this (a behaviour bound, generous on a busy machine)
WAIT_S = 900.0  # a loaded machine (the model probe alone took 200 s at load 30); waits end when met


def cli(*args: str, timeout: float = WAIT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pathweaver.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=server_env())


def index_json(store: Path, *args: str, settings: tuple[str, ...] = (), timeout: float = WAIT_S) -> dict[str, Any]:
    proc = cli("--store", str(store), *settings, "index", *args, "--json", timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def wait_indexed(c: Client) -> dict[str, Any]:
    status: dict[str, Any] = {}

    def done() -> bool:
        status.update(c.ok("index_status"))
        return bool(status["ready"]) and not status["indexing"]

    c.wait_for(done, "the background index", timeout=WAIT_S)
    return status


def skipped(report: dict[str, Any]) -> dict[str, str]:
    return {s["path"]: s["reason"] for s in report["skipped_files"]}


def stored_texts(store: Path) -> str:
    with sqlite3.connect(store / "pathweaver.db") as conn:
        return " ".join(t for (t,) in conn.execute("SELECT text FROM chunks"))


def docx_bomb(path: Path, xml_bytes: int) -> None:
    """A well-formed DOCX whose document.xml inflates to ``xml_bytes`` of empty paragraphs (a few KB on disk)."""
    ns = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    head, tail = f'<?xml version="1.0"?><w:document {ns}><w:body>', "</w:body></w:document>"
    para = "<w:p/>"
    body = para * ((xml_bytes - len(head) - len(tail)) // len(para))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml",
                    '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                    '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
                    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
                    "</Types>")
        zf.writestr("_rels/.rels",
                    '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
                    'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
                    '2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
        zf.writestr("word/document.xml", head + body + tail)


def test_hard_links_and_zip_bombs_are_skipped_with_a_reason(tmp_path: Path) -> None:
    """`index --json`: a hard link to a file outside the folder is skipped (its other name cannot be seen by a path
    check) unless ingest.allow_hard_links is set; a DOCX inflating to 24 MB of XML is skipped as a zip bomb from
    its directory alone; the note beside them is indexed."""
    notes, outside = tmp_path / "notes", tmp_path / "outside"
    notes.mkdir()
    outside.mkdir()
    (notes / "okapi.md").write_text("# Okapi\n\nThe okapi lives in the Ituri forest.\n", encoding="utf-8")
    (outside / "secret.md").write_text("# Secret\n\nThe narwhal password is swordfish.\n", encoding="utf-8")
    os.link(outside / "secret.md", notes / "linked.md")
    docx_bomb(notes / "bomb.docx", 24 * 1024 * 1024)
    assert (notes / "bomb.docx").stat().st_size < 200_000
    store = tmp_path / "store"
    report = index_json(store, str(notes))
    reasons = skipped(report)
    assert reasons[str(notes / "linked.md")].startswith("hard link (2 names")
    assert "zip bomb" in reasons[str(notes / "bomb.docx")]
    texts = stored_texts(store)
    assert "okapi" in texts and "narwhal" not in texts
    report = index_json(store, str(notes), settings=("--set", "ingest.allow_hard_links=true"))
    assert str(notes / "linked.md") not in skipped(report) and "narwhal" in stored_texts(store)


def test_a_text_file_near_the_old_limit_does_not_hold_up_its_folder(tmp_path: Path) -> None:
    """A 19.5 MB text file (under the old 20 MiB limit, which took 480 s and 5 GB without storing anything) is
    skipped by its size before it is read, and the note beside it is indexed in the same run."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "okapi.md").write_text("# Okapi\n\nThe okapi lives in the Ituri forest.\n", encoding="utf-8")
    line = "The quick brown fox jumps over the lazy dog near the river bank at dawn.\n"
    (notes / "huge.txt").write_text(line * (19_500_000 // len(line)), encoding="utf-8")
    store = tmp_path / "store"
    report = index_json(store, str(notes), timeout=WAIT_S)
    assert report["added"] == 1 and skipped(report)[str(notes / "huge.txt")].startswith("too large")
    assert "okapi" in stored_texts(store)


def test_a_fifo_in_a_watched_folder_does_not_stop_live_indexing(tmp_path: Path) -> None:
    """Over a real stdio client: a FIFO created in the watched folder is reported skipped, and a note written after
    it is indexed by the live watcher (the change-applying thread used to block opening the FIFO)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "okapi.md").write_text("# Okapi\n\nThe okapi lives in the Ituri forest.\n", encoding="utf-8")
    with open(tmp_path / "server.log", "w") as errlog, \
            mcp_client(stdio_session(tmp_path / "store", [notes], errlog)) as c:
        wait_indexed(c)
        os.mkfifo(notes / "pipe.md")
        time.sleep(1.5)  # its own watcher batch, then the note in the next one
        (notes / "later.md").write_text("# Later\n\nThe pangolin note came after the pipe.\n", encoding="utf-8")
        c.wait_for(lambda: c.found("pangolin"), "the note written after the FIFO", timeout=WAIT_S)
        status = c.ok("index_status")
        assert {s["path"]: s["reason"] for s in status["skipped"]}[str(notes / "pipe.md")] == NOT_REGULAR_REASON
        assert status["last_error"] is None


def test_an_edit_made_while_no_server_ran_is_never_served(tmp_path: Path) -> None:
    """Over a real stdio client: a note edited while no server ran is not served in its old text by the next
    server's first answer (it is withheld until re-indexed), and its new text is served once indexed."""
    notes = tmp_path / "notes"
    notes.mkdir()
    note = notes / "animal.md"
    note.write_text("# Animal\n\nThe walrus sleeps on the ice.\n", encoding="utf-8")
    (notes / "okapi.md").write_text("# Okapi\n\nThe okapi lives in the Ituri forest.\n", encoding="utf-8")
    store = tmp_path / "store"
    with open(tmp_path / "server.log", "w") as errlog, mcp_client(stdio_session(store, [notes], errlog)) as c:
        wait_indexed(c)
        assert c.found("walrus")
    note.write_text("# Animal\n\nThe axolotl swims in the lake, and the walrus is gone.\n", encoding="utf-8")
    with open(tmp_path / "server2.log", "w") as errlog, mcp_client(stdio_session(store, [notes], errlog)) as c:
        hits = c.ok("search", {"query": "walrus", "mode": "bm25", "k": 5})["results"]
        assert not any("sleeps on the ice" in h["text"] for h in hits)  # the first answer: never the old text
        wait_indexed(c)
        assert c.found("axolotl") and c.found("okapi")


def start_server(store: Path, folder: Path, log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *serve_args(store, [folder])], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=log, env=server_env())


def wait_documents(store: Path, n: int, proc: subprocess.Popen[Any], timeout: float = WAIT_S) -> None:
    """Until the store holds ``n`` indexed documents (read with the stdlib, as another process would)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the process ended ({proc.returncode}) before {n} documents were stored"
        try:
            with sqlite3.connect(f"file:{store / 'pathweaver.db'}?mode=ro", uri=True) as conn:
                if conn.execute("SELECT count(*) FROM documents WHERE status = 'indexed'").fetchone()[0] >= n:
                    return
        except sqlite3.Error:
            pass
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {n} documents")


def test_cli_index_refuses_to_delete_a_running_servers_documents(tmp_path: Path) -> None:
    """A server watches notes/; `pathweaver index other/` on its store would delete the server's documents: it
    is refused naming the server's pid and folder, nothing is deleted, and --force deletes them."""
    notes, other = tmp_path / "notes", tmp_path / "other"
    notes.mkdir()
    other.mkdir()
    (notes / "okapi.md").write_text("# Okapi\n\nThe okapi lives in the Ituri forest.\n", encoding="utf-8")
    (other / "tapir.md").write_text("# Tapir\n\nThe tapir has a short trunk.\n", encoding="utf-8")
    store = tmp_path / "store"
    with open(tmp_path / "server.log", "w") as log:
        server = start_server(store, notes, log)
        try:
            wait_documents(store, 1, server)
            refused = cli("--store", str(store), "index", str(other), "--json")
            assert refused.returncode == 2
            assert f"pid {server.pid}" in refused.stderr and str(notes) in refused.stderr
            assert "--force" in refused.stderr and "okapi" in stored_texts(store) and "tapir" not in stored_texts(store)
            assert [s.pid for s in live_servers(store)] == [server.pid]
            forced = index_json(store, str(other), "--force")
            assert forced["deleted"] == 1 and forced["added"] == 1 and "okapi" not in stored_texts(store)
        finally:
            server.kill()  # no clean exit: its record must still stop counting
            server.wait()
    assert live_servers(store) == [] and not list((store / "servers").glob("*.json"))


def long_corpus(folder: Path, n: int = 60, paragraphs: int = 12) -> Path:
    """Notes enough for a first index of well over ten seconds (about five chunks each)."""
    folder.mkdir()
    words = ["river", "forest", "mountain", "valley", "harbour", "castle", "bridge", "market", "garden", "temple", "library", "village", "meadow", "island", "canyon", "glacier", "desert", "lagoon", "orchard", "quarry"]
    for i in range(n):
        body = "\n\n".join(
            " ".join(f"{words[(i * 7 + j * 3 + k) % len(words)]}{(i + j + k) % 97}" for k in range(60)) + "."
            for j in range(paragraphs))
        (folder / f"note{i:03d}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")
    return folder


def assert_store_intact(store: Path) -> None:
    with sqlite3.connect(store / "pathweaver.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        orphans = conn.execute("SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)")
        assert orphans.fetchone()[0] == 0
    stats = cli("--store", str(store), "stats", "--json")
    assert stats.returncode == 0, stats.stderr


def stopped_within(proc: subprocess.Popen[Any], sig: int) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"still running {STOP_S} s after signal {sig}") from None


def wait_working(store: Path, proc: subprocess.Popen[Any], after_s: float = 3.0) -> None:
    """Until the process has opened ``store`` (its imports done), then ``after_s`` more: the model is loading or
    embedding, with torch's threads running."""
    deadline = time.monotonic() + WAIT_S
    while not (store / "pathweaver.db").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the process never opened the store"
        time.sleep(0.2)
    time.sleep(after_s)
    assert proc.poll() is None, "the index ended before the signal: give it a larger corpus"


def test_index_stops_promptly_on_ctrl_c_and_leaves_the_store_intact(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) in the middle of a long first index: the process ends within seconds with 130, not after
    30 s with an abort, and the store opens and is consistent."""
    notes = long_corpus(tmp_path / "notes")
    store = tmp_path / "store"
    with open(tmp_path / "index.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "pathweaver.cli", "--store", str(store), "index", str(notes)],
                                stdout=subprocess.DEVNULL, stderr=log, env=server_env())
        wait_working(store, proc)
        assert stopped_within(proc, signal.SIGINT) == 130
    assert "terminate called" not in (tmp_path / "index.log").read_text()
    assert_store_intact(store)


def test_serve_stops_promptly_on_sigterm_during_its_first_index(tmp_path: Path) -> None:
    """A stdio server in its first index gets SIGTERM: it ends within seconds with 0 and the store is intact."""
    notes = long_corpus(tmp_path / "notes")
    store = tmp_path / "store"
    with open(tmp_path / "server.log", "w") as log:
        server = start_server(store, notes, log)
        wait_working(store, server)
        assert stopped_within(server, signal.SIGTERM) in (0, 130)
    assert "terminate called" not in (tmp_path / "server.log").read_text()
    assert not list((store / "servers").glob("*.json"))  # its live-server record went with it
    assert_store_intact(store)
