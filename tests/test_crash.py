"""SIGKILL an indexing process mid-run: the store stays intact and a re-index ends equal to a fresh index."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pathweaver.config import Settings
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models.embedder import get_embedder
from pathweaver.store.db import DB_FILE, Database
from pathweaver.store.reads import StoreReader

N_FILES = 40
TOPICS = ["Warsaw", "Paris", "Krakow", "Lisbon", "Vienna", "Prague", "Berlin", "Madrid"]

CHILD = """
import sys, time
from pathlib import Path
import pathweaver.ingest.pipeline as pipeline
import pathweaver.ingest.prepare as prepare
from pathweaver.config import Settings
from pathweaver.models.embedder import get_embedder
from pathweaver.store.db import Database
prepare.BATCH_CHUNKS = 2  # small batches: many commits, so the kill lands between them
emb = get_embedder()
real = emb.encode
def slow(texts, *args, **kwargs):
    time.sleep(0.15)
    return real(texts, *args, **kwargs)
emb.encode = slow
store, folder = Path(sys.argv[1]), Path(sys.argv[2])
db = Database(store)
pipeline.Indexer(db, Settings(store_dir=store), emb).index_paths([folder])
print("finished")
"""


def make_corpus(folder: Path) -> None:
    folder.mkdir()
    for i in range(N_FILES):
        a, b = TOPICS[i % len(TOPICS)], TOPICS[(i * 3 + 1) % len(TOPICS)]
        (folder / f"note{i:02d}.txt").write_text(
            f"Note {i} says {a} trades with {b}. The river of {a} is wide. Engineer {i} built a bridge in {b}.",
            encoding="utf-8",
        )


def committed_documents(store: Path) -> int:
    if not (store / DB_FILE).exists():
        return 0
    try:
        with Database(store, readonly=True) as db:
            return int(db.conn.execute("SELECT count(*) FROM documents").fetchone()[0])
    except Exception:  # tables not created yet
        return 0


def test_sigkill_mid_index_then_reindex(tmp_path: Path) -> None:
    folder, store = tmp_path / "notes", tmp_path / "store"
    make_corpus(folder)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(store), str(folder)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    seen = 0
    while time.monotonic() < deadline and child.poll() is None:
        seen = committed_documents(store)
        if seen >= 5:
            break
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert 5 <= seen < N_FILES, f"the kill should land mid-run (saw {seen} documents)"

    with Database(store) as db:
        assert db.integrity_ok()
        indexer = Indexer(db, Settings(store_dir=store), get_embedder())
        report = indexer.index_paths([folder])
        assert report.refreshed  # the interrupted run left refresh_pending set
        stats = StoreReader(db).stats()
        assert stats["documents"] == N_FILES and stats["skipped"] == []
        assert stats["chunks"] == db.conn.execute("SELECT count(*) FROM chunk_vec").fetchone()[0]
        got = StoreReader(db).canonical_graph()
    with Database(tmp_path / "fresh") as fresh:
        Indexer(fresh, Settings(store_dir=tmp_path / "fresh"), get_embedder()).index_paths([folder])
        want = StoreReader(fresh).canonical_graph()
    assert got == want and want["entities"]


RELINK_CHILD = """
import sys, time
from pathlib import Path
from pathweaver.config import Settings
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models.embedder import get_embedder
from pathweaver.store import graph_writes
from pathweaver.store import writes
from pathweaver.store.db import Database
store, folder, marker = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
real = graph_writes.replace_name_mentions
def stall(conn, chunk_ids, rows):  # the re-link is written, its transaction not yet committed
    real(conn, chunk_ids, rows)
    marker.write_text(str(len(chunk_ids)))
    time.sleep(300)
graph_writes.replace_name_mentions = stall
settings = Settings(store_dir=store)
settings.extract.auto_refresh_ratio = 1.0
Indexer(Database(store), settings, get_embedder()).index_paths([folder])
"""


def test_sigkill_during_a_relink_leaves_the_store_as_before(tmp_path: Path) -> None:
    """A note titled with a name that old chunks hold re-links them (ingest/linking.py) in the transaction that
    writes the note; killed in the middle of it, the store is what it was before, and a re-index completes it."""
    folder, store = tmp_path / "notes", tmp_path / "store"
    make_corpus(folder)
    settings = Settings(store_dir=store)
    settings.extract.auto_refresh_ratio = 1.0
    with Database(store) as db:
        Indexer(db, settings, get_embedder()).index_paths([folder])
        before = {**StoreReader(db).canonical_graph(), **StoreReader(db).canonical_names()}
    assert not any(name == "warsaw" for name, _, _ in before["name_mentions"])
    (folder / "warsaw.md").write_text("---\ntitle: Warsaw\n---\n# Warsaw\n\nThe capital of Poland.\n", "utf-8")
    marker = tmp_path / "relinking"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    child = subprocess.Popen([sys.executable, "-c", RELINK_CHILD, str(store), str(folder), str(marker)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and child.poll() is None and not marker.exists():
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert marker.exists(), child.stderr.read().decode()[-2000:] if child.stderr else "no marker"
    assert int(marker.read_text()) > 1  # the old chunks that say "Warsaw" were being re-linked

    with Database(store) as db:
        assert db.integrity_ok()
        after_kill = {**StoreReader(db).canonical_graph(), **StoreReader(db).canonical_names()}
        assert after_kill == before  # nothing of the note or of its re-link was half-written
        Indexer(db, settings, get_embedder()).index_paths([folder])
        got = StoreReader(db).canonical_names()
    assert {doc for name, doc, _ in got["name_mentions"] if name == "warsaw"}
    with Database(tmp_path / "fresh") as fresh:
        Indexer(fresh, Settings(store_dir=tmp_path / "fresh"), get_embedder()).index_paths([folder])
        assert got == StoreReader(fresh).canonical_names()
