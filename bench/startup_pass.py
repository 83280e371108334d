"""The server's start-up pass over indexed documents (``ingest.documents.withhold_outdated``): one stat per document,
a hash of those whose mtime or size moved, and the deletion of those gone or changed, before the first tool call
is answered.

Times it on an indexed store (e.g. the 2wiki eval store, 6,119 passage files) as it is, where nothing changed (the
stat pass alone, repeated), and on a scratch copy of the store in which ``--gone`` documents are moved to paths
that do not exist (``writes.rename_document``), so the pass deletes them with their graph, and ``--touched``
documents get a stored mtime and size that no longer match their file, so the pass hashes them (the same bytes:
it only records their new stat; a changed hash would be deleted as the gone ones are).

    python bench/startup_pass.py --store .pathweaver/eval/2wikimultihopqa/store [--repeat 15] [--gone 10] [--touched 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pathweaver.ingest.documents import withhold_outdated
from pathweaver.store import writes as w
from pathweaver.store.db import Database
from pathweaver.store.reads import indexed_paths


def _timed(db: Database) -> tuple[float, int, int]:
    start = time.perf_counter()
    found = withhold_outdated(db)
    return time.perf_counter() - start, len(found.gone), len(found.changed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="an indexed store folder")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--gone", type=int, default=10, help="documents made missing in the scratch copy")
    parser.add_argument("--touched", type=int, default=10, help="documents whose stored stat is made stale")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "store"
        copy.mkdir()
        with Database(args.store) as db, Database(copy) as out:
            db.conn.backup(out.conn)  # a consistent copy, WAL included: the pass may write (stat updates)
        with Database(copy) as db:
            n_docs = len(indexed_paths(db.conn))
            _timed(db)  # the first pass reads the documents table into the page cache
            runs = [_timed(db) for _ in range(args.repeat)]
            assert all(g == c == 0 for _, g, c in runs), "the store has documents gone or changed; pass a current store"
            seconds = sorted(s for s, _, _ in runs)
            print(f"{n_docs} indexed documents, none changed: median {statistics.median(seconds) * 1000:.1f} ms, "
                  f"min {seconds[0] * 1000:.1f}, max {seconds[-1] * 1000:.1f} over {args.repeat} passes")
            docs = indexed_paths(db.conn)[: args.gone + args.touched]
            with db.write() as conn:
                for doc_id, path in docs[: args.gone]:
                    w.rename_document(conn, doc_id, f"{path}.gone", 0.0, 0, "", [], [])
                for doc_id, _ in docs[args.gone:]:
                    w.update_document_stat(conn, doc_id, 0.0, 1)
            took, gone, changed = _timed(db)
        assert changed == 0
        print(f"{gone} of {args.gone} documents gone and {len(docs) - args.gone} touched: {took * 1000:.1f} ms "
              f"(stat pass, hashes, deletions and stat updates, one run)")


if __name__ == "__main__":
    main()
