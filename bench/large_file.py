"""A large text file beside a small note: peak memory and seconds of `pathweaver index`, and when the note is stored.

Writes a folder with one small note and one text file of ``--mb`` megabytes (varied English-like words, so its
chunks and n-grams are as many as a real text's), then runs `pathweaver index --json` on it in a fresh store as a
child process with ``ingest.max_file_bytes`` and ``ingest.max_text_bytes`` set to ``--limit-mb`` (default: the
built-in limits). It prints the
child's peak RSS, its seconds, when the small note was first readable in the store, and what became of the large
file (indexed, or skipped with its reason).

    python bench/large_file.py --mb 2 [--limit-mb 25] [--timeout 900]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ["river", "forest", "mountain", "valley", "harbour", "castle", "bridge", "market", "garden", "temple", "library", "village", "meadow", "island", "canyon", "glacier", "desert", "lagoon", "orchard", "quarry", "north", "south", "east", "west", "old", "new", "small", "great", "early", "late", "the", "a", "of", "in", "on", "by", "with", "from", "near", "after", "before", "king", "queen", "army", "fleet", "treaty", "war", "peace", "trade", "city", "port", "road"]


def write_text(path: Path, n_bytes: int, seed: int = 40) -> None:
    """About ``n_bytes`` of sentences of words with numbered variants (a vocabulary of a few thousand)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        written = 0
        while written < n_bytes:
            sentence = " ".join(f"{rng.choice(WORDS)}{rng.randrange(100)}" for _ in range(rng.randint(8, 20)))
            line = sentence.capitalize() + ".\n" + ("\n" if rng.random() < 0.2 else "")
            f.write(line)
            written += len(line)


def note_stored_at(db: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            row = conn.execute("SELECT count(*) FROM documents d JOIN chunks c ON c.doc_id = d.id "
                               "WHERE d.path LIKE '%small.md'").fetchone()
            return bool(row and row[0])
    except sqlite3.Error:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, required=True, help="size of the large text file in MB (10^6 bytes)")
    parser.add_argument("--limit-mb", type=float, default=None, help="ingest.max_file_bytes and max_text_bytes in MiB")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        notes = Path(scratch) / "notes"
        notes.mkdir()
        (notes / "small.md").write_text("# Small\n\nThe okapi note beside the large file.\n", encoding="utf-8")
        write_text(notes / "large.txt", int(args.mb * 1e6))
        store = Path(scratch) / "store"
        cmd = [sys.executable, "-m", "pathweaver.cli", "--store", str(store), "index", str(notes), "--json"]
        if args.limit_mb is not None:
            limit = int(args.limit_mb * 1024 * 1024)
            cmd[4:4] = ["--set", f"ingest.max_file_bytes={limit}", "--set", f"ingest.max_text_bytes={limit}"]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        note_at = None
        while proc.poll() is None:
            if note_at is None and note_stored_at(store / "pathweaver.db"):
                note_at = time.perf_counter() - start
            if time.perf_counter() - start > args.timeout:
                proc.kill()
                break
            time.sleep(0.25)
        out, err = proc.communicate()
        seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result: dict[str, object] = {"large_file_mb": args.mb, "limit_mib": args.limit_mb, "exit": proc.returncode,
                                 "seconds": round(seconds, 1), "peak_rss_mb": round(peak_mb),
                                 "small_note_stored_after_s": None if note_at is None else round(note_at, 1)}
    if proc.returncode == 0:
        report = json.loads(out)
        result["large_file"] = next((s["reason"] for s in report["skipped_files"] if s["path"].endswith("large.txt")),
                                    "indexed")
        result["chunks"] = report["chunks"]
    else:
        result["stderr_tail"] = err[-400:]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
