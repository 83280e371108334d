"""Seconds to embed a corpus's distinct words two ways, alternating in one process: the packed passes (fast,
shaped by the call) and the fixed-shape passes the graph's vectors use (``encode(..., invariant=True)``).

    python bench/invariant_passes.py [--corpus PATH] [--words N] [--rounds R] [--precision float32|bfloat16]

Prints the median seconds of each and their ratio (fixed / packed), as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "2wikimultihopqa" / "corpus.json"


def words_of(corpus: Path, limit: int) -> list[str]:
    """The first ``limit`` distinct lower-cased words of the corpus passages, in order of appearance."""
    seen: dict[str, None] = {}
    for passage in json.loads(corpus.read_text(encoding="utf-8")):
        for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9'-]*", passage["text"]):
            seen.setdefault(word.lower(), None)
            if len(seen) >= limit:
                return list(seen)
    return list(seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--words", type=int, default=8000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from pathweaver.models.embedder import configure_threads, get_embedder

    configure_threads()
    emb = get_embedder()
    words = words_of(args.corpus, args.words)
    emb.encode(words[:64], precision=args.precision)  # load and warm the model
    times: dict[str, list[float]] = {"packed": [], "fixed": []}
    for _ in range(args.rounds):
        for name, invariant in (("packed", False), ("fixed", True)):
            start = time.perf_counter()
            emb.encode(words, precision=args.precision, invariant=invariant)
            times[name].append(time.perf_counter() - start)
    out = {"words": len(words), "precision": args.precision, "rounds": args.rounds,
           **{f"{k}_s": round(statistics.median(v), 3) for k, v in times.items()},
           "ratio": round(statistics.median(times["fixed"]) / statistics.median(times["packed"]), 3)}
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))


if __name__ == "__main__":
    main()
