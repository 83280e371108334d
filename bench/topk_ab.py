"""Top-k selection from a sampled threshold against a full partition, in one process on one store.

    python bench/topk_ab.py STORE [--queries N]

STORE is a synthetic SQLite store as ``bench/scale.py`` builds one (``scale.run_sqlite(n, 39, qvecs, root)`` leaves
it at ``root/sqlite-n``). Each query runs twice per method, once with
``projection.top_candidates`` off (``FAST_TOP_MIN`` out of reach: the partition of every score) and once on, the
order alternating, so the two sides share the host's load. Prints wall and CPU p50 / p95 (ms) per method and side,
and the load average before and after, as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # noqa: E402


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args(argv)
    from pathweaver.numeric import projection
    from pathweaver.service import Pathweaver

    texts, qvecs = scale.queries(39, args.queries)
    embedder = scale.SyntheticEmbedder(texts, qvecs)

    class Synthetic(Pathweaver):
        @property
        def embedder(self) -> scale.SyntheticEmbedder:  # the store's vectors are synthetic: so are the questions'
            return embedder

    pw = Synthetic.open(args.store, overrides={"models": {"embedding_model": "synthetic"}}, readonly=True)
    snap = pw.snapshot()
    pw.bm25_index(snap, wait=True)
    sides = {"off": 10**12, "on": projection.FAST_TOP_MIN}
    out: dict[str, object] = {"passages": snap.n_passages, "load": _load()}
    for method in ("dense", "hybrid", "ppr"):
        pw.retrieve(texts[0], method=method, top_k=10)
        times: dict[str, tuple[list[float], list[float]]] = {side: ([], []) for side in sides}
        for i, question in enumerate(texts):
            for side in ("off", "on") if i % 2 == 0 else ("on", "off"):
                projection.FAST_TOP_MIN = sides[side]
                cpu, wall = time.process_time(), time.perf_counter()
                pw.retrieve(question, method=method, top_k=10)
                times[side][0].append(time.perf_counter() - wall)
                times[side][1].append(time.process_time() - cpu)
        for side, (wall_s, cpu_s) in times.items():
            out[f"{method}_{side}"] = {
                name: [round(float(np.percentile(v, p)) * 1e3, 1) for p in (50, 95)]
                for name, v in (("wall", wall_s), ("cpu", cpu_s))}
    projection.FAST_TOP_MIN = sides["on"]
    pw.close()
    out["load_end"] = _load()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
