"""Packed encoding against the model's own ``encode``: seconds for the same texts, and the largest difference.

    python bench/packing.py [--words N] [--chunks N] [--repeat R]

Texts from the 2wiki corpus: the distinct words of the passages (as entity names are composed from them) and the
passages themselves (title + text, as indexed). Each way runs ``--repeat`` times, alternating, and the medians are
printed with their ratio; ``models/packing.py`` explains the method.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

DATA = Path("/work/shared/data")


def texts(n_words: int, n_chunks: int) -> tuple[list[str], list[str]]:
    from pathweaver.extract.entities import words

    passages = json.loads((DATA / "2wikimultihopqa" / "corpus.json").read_text(encoding="utf-8"))
    chunks = [f"{p['title']}\n\n{p['text']}" for p in passages]
    vocab = sorted({w for c in chunks for w in words(c)})
    random.Random(0).shuffle(vocab)
    random.Random(1).shuffle(chunks)
    return vocab[:n_words], chunks[:n_chunks]


def timed(fn: Callable[[list[str]], np.ndarray], items: list[str]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    out = fn(items)
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=8000)
    parser.add_argument("--chunks", type=int, default=768)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from pathweaver.models.embedder import configure_threads, get_embedder
    from pathweaver.models.packing import encode_packed

    configure_threads()
    emb = get_embedder()
    emb.encode(["warm up", "the model"])
    ways = {"packed": lambda xs: encode_packed(emb.model, xs), "model encode": lambda xs: emb._plain(xs, None)}
    print(f"{'texts':<8}{'n':>7}{'packed s':>11}{'encode s':>11}{'ratio':>8}{'max |diff|':>13}")
    for label, items in zip(("words", "chunks"), texts(args.words, args.chunks), strict=True):
        seconds: dict[str, list[float]] = {k: [] for k in ways}
        outs: dict[str, np.ndarray] = {}
        for _ in range(args.repeat):
            for name, fn in ways.items():
                s, outs[name] = timed(fn, items)
                seconds[name].append(s)
        packed, plain = statistics.median(seconds["packed"]), statistics.median(seconds["model encode"])
        diff = float(np.abs(outs["packed"] - outs["model encode"]).max())
        print(f"{label:<8}{len(items):>7}{packed:>11.2f}{plain:>11.2f}{plain / packed:>7.2f}x{diff:>13.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
