"""Where an index run spends its time: cProfile of ``Indexer.index_paths`` on a fresh store.

    python bench/profile_index.py ultradomain|2wiki [--limit N] [--top 40]

Writes the corpus as ``bench/index_throughput.py`` does, indexes it once under the profiler and prints the total,
the refresh figures, and pathweaver's functions by cumulative time. cProfile slows Python-heavy stages more than
the model's forward passes, so read shares, not seconds.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from index_throughput import write_corpus  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", choices=["ultradomain", "2wiki"])
    parser.add_argument("--limit", type=int, default=None, help="index only the first N documents")
    parser.add_argument("--top", type=int, default=40, help="functions to print")
    args = parser.parse_args(argv)
    from pathweaver.config import Settings
    from pathweaver.ingest.pipeline import Indexer
    from pathweaver.models.embedder import configure_threads, get_embedder
    from pathweaver.store.db import Database

    configure_threads()
    with tempfile.TemporaryDirectory(prefix="pw-profile-") as tmp:
        folder, store = Path(tmp) / "files", Path(tmp) / "store"
        write_corpus(args.corpus, folder, args.limit)
        emb = get_embedder()
        emb.encode(["warm up", "the model"])
        with Database(store) as db:
            indexer = Indexer(db, Settings(store_dir=store), emb)
            profile = cProfile.Profile()
            start = time.perf_counter()
            profile.enable()
            indexer.index_paths([folder])
            profile.disable()
            print(f"total {time.perf_counter() - start:.1f} s; refresh {indexer.last_refresh}")
    pstats.Stats(profile).sort_stats("cumulative").print_stats("pathweaver", args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
