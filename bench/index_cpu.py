"""Where a first index's CPU goes: process CPU seconds per stage, and a digest of the stored chunk vectors.

    PYTHONPATH=src python bench/index_cpu.py FOLDER [--store DIR]

Runs ``pathweaver --store DIR index FOLDER`` in this process on a fresh store (a temporary one unless ``--store``)
and charges the process's user + system CPU (``resource.getrusage``, all threads, so torch's pool counts) to the
stage that was running: CPU time, unlike wall time, holds on a machine other work loads. A nested stage is
charged to itself and to the stage around it (the model loads inside the probe where the probe runs; its "calls"
count every read of ``Embedder.model``). torch loads inside the command, after the CLI set its environment
(``OMP_WAIT_POLICY=PASSIVE`` among it). Then prints the chunk texts' token counts and packed rows (how full
``packing.rows_for`` fills them) and a SHA-256 over every stored chunk vector by text: two checkouts that print the
same digest stored the same bits. A machine that probed batch invariance before answers from the user data
directory (``ingest.invariance.machine_file``): delete that file to time a machine's first index.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import resource
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (every thread)."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


class StageClock:
    """CPU seconds and calls per stage, charged by wrapping the functions that run each stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._open: set[str] = set()

    def wrap(self, owner: Any, name: str, stage: str) -> None:
        """Charge every call of ``owner.name`` to ``stage`` (a recursive call only once)."""
        setattr(owner, name, self.timed(getattr(owner, name), stage))

    def timed(self, inner: Callable[..., Any], stage: str) -> Callable[..., Any]:
        """``inner``, charging its calls to ``stage``."""
        self.seconds[stage] = 0.0  # stages print in the order they were wrapped

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if stage in self._open:
                return inner(*args, **kwargs)
            self._open.add(stage)
            start = cpu_seconds()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[stage] += cpu_seconds() - start
                self.calls[stage] += 1
                self._open.discard(stage)

        return timed


def instrument(clock: StageClock) -> None:
    """Wrap the stages of a first index (``ingest.pipeline`` runs them in this order)."""
    from pathweaver.ingest import documents, graph_inputs, pipeline, prepare, refresh, synonym_pass
    from pathweaver.models import embedder
    from pathweaver.store import db

    clock.wrap(pipeline.Indexer, "__init__", "indexer setup (model load, invariance probe)")
    clock.wrap(embedder.Embedder, "batch_invariant", "  batch-invariance probe")
    # the first use of ``Embedder.model`` imports sentence-transformers and loads the model (later uses cost nothing)
    embedder.Embedder.model = property(clock.timed(embedder.Embedder.model.fget, "  model import and load"))
    clock.wrap(prepare.Preparer, "prepare", "read, parse, chunk")
    clock.wrap(prepare.Preparer, "embed_chunks", "chunk vectors")
    clock.wrap(documents.DocumentWriter, "write_file", "write chunks")
    clock.wrap(refresh.Refresher, "run", "refresh (graph)")
    clock.wrap(refresh, "derive_corpus", "  derive graph")
    clock.wrap(graph_inputs.GraphInputs, "vectors", "  graph-text vectors")
    clock.wrap(synonym_pass.SynonymPass, "pairs_since", "  synonym pairs")
    clock.wrap(db.Database, "vacuum", "vacuum")


def chunk_report(store: Path) -> list[str]:
    """Token counts and packed rows of the stored chunk texts, and the digest of their stored vectors."""
    from pathweaver.ingest.chunk_precision import META_KEY, cache_space
    from pathweaver.models.embedder import get_embedder
    from pathweaver.models.packing import rows_for
    from pathweaver.models.tokens import token_ids
    from pathweaver.store import writes as w
    from pathweaver.store.db import Database
    from pathweaver.store.indexing import stored_chunks

    with Database(store) as db:
        texts = sorted({row[3] for _, row in stored_chunks(db.conn)})  # (id, start, end, text, ...)
        vecs = w.cache_get(db.conn, texts, cache_space(db.get_meta(META_KEY) or "float32"))
    model = get_embedder().model
    limit = int(model.max_seq_length)
    lengths = np.array([len(t) for t in token_ids(model.tokenizer, texts, limit)], dtype=np.int64)
    rows = rows_for(lengths, limit)
    digest = hashlib.sha256()
    for text in texts:
        digest.update(hashlib.sha256(text.encode()).digest() + vecs[text].tobytes())
    return [
        f"chunk texts {len(texts)}, tokens {int(lengths.sum())} (mean {lengths.mean():.0f}, at the {limit}-token "
        f"limit {int((lengths >= limit).sum())}), rows of {limit}: {len(rows)}, filled "
        f"{lengths.sum() / (len(rows) * limit):.1%} (at least {-(-int(lengths.sum()) // limit)} rows)",
        f"chunk vectors stored {len(vecs)}, sha256 {digest.hexdigest()[:16]}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--store", type=Path, default=None, help="a fresh store folder (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pw-index-cpu-") as tmp:
        store = args.store or Path(tmp) / "store"
        if store.exists() and any(store.iterdir()):
            parser.error(f"{store} is not empty: a first index needs a fresh store")
        clock = StageClock()
        start = cpu_seconds()
        from pathweaver.cli import main as cli

        instrument(clock)
        code = cli(["--store", str(store), "index", str(args.folder)])
        total = cpu_seconds()
        print(f"CPU {total:.1f} s in all ({total - start:.1f} s after start-up), stages:")
        for stage, seconds in clock.seconds.items():
            print(f"  {stage:48s} {seconds:6.1f} s  {seconds / total:4.0%}  ({clock.calls[stage]} calls)")
        for line in chunk_report(store):
            print(line)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
