"""The server's start-up pass over indexed documents (``ingest.documents.prune_missing``): one stat per document, and
the deletion of those whose file is gone, before the first tool call is answered.

Times it on an indexed store (the 2wiki eval store, 6,119 passage files) as it is, where nothing is gone (the stat
pass alone, repeated), and on a scratch copy of the store in which ``--gone`` documents are moved to paths that do
not exist (``writes.rename_document``), so the pass also deletes them with their graph.

    python bench/startup_prune.py --store .pathweaver/eval/2wikimultihopqa/store [--repeat 15] [--gone 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pathweaver.ingest.documents import prune_missing
from pathweaver.store import writes as w
from pathweaver.store.db import Database
from pathweaver.store.reads import indexed_paths


def _timed(db: Database) -> tuple[float, int]:
    start = time.perf_counter()
    gone = prune_missing(db)
    return time.perf_counter() - start, len(gone)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="an indexed store folder")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--gone", type=int, default=10, help="documents made missing in the scratch copy")
    args = parser.parse_args()

    with Database(args.store) as db:
        n_docs = len(indexed_paths(db.conn))
        _timed(db)  # the first pass reads the documents table into the page cache
        runs = [_timed(db) for _ in range(args.repeat)]
    assert all(n == 0 for _, n in runs), "the store has documents whose files are gone; pass a current store"
    seconds = sorted(s for s, _ in runs)
    print(f"{n_docs} indexed documents, none gone: median {statistics.median(seconds) * 1000:.1f} ms, "
          f"min {seconds[0] * 1000:.1f}, max {seconds[-1] * 1000:.1f} over {args.repeat} passes")

    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "store"
        copy.mkdir()
        with Database(args.store) as db, Database(copy) as out:
            db.conn.backup(out.conn)  # a consistent copy, WAL included
        with Database(copy) as db:
            docs = indexed_paths(db.conn)[: args.gone]
            with db.write() as conn:
                for doc_id, path in docs:
                    w.rename_document(conn, doc_id, f"{path}.gone", 0.0, 0, "", [], [])
            took, n = _timed(db)
        print(f"{n} of {len(docs)} documents gone: {took * 1000:.1f} ms (stat pass and their deletion, one run)")


if __name__ == "__main__":
    main()
