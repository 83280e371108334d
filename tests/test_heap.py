"""glibc's malloc thresholds around model passes (``numeric.heap``), in a fresh interpreter as the CLI sets them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")

PROBE = """
import contextlib, json, resource
from pathweaver.models import embedder as embedder_mod
from pathweaver.numeric import heap

assert heap.fix_mmap_threshold()
emb = embedder_mod.Embedder()
texts = [" ".join(f"sentence {j} of note {i} says something about item{i * j}" for j in range(30)) for i in range(48)]
emb.encode(texts[:4])  # the model loaded and its first allocations made

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) // 1024

pass_scope = heap.model_pass

def run(scope):
    heap.model_pass = scope
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    vecs = emb.encode(texts)
    return vecs, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, rss()

mapped, mapped_faults, mapped_rss = run(contextlib.nullcontext)
pooled, pooled_faults, pooled_rss = run(pass_scope)
print(json.dumps({"same": bool((mapped == pooled).all()), "faults": [mapped_faults, pooled_faults],
                  "rss": [mapped_rss, pooled_rss]}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.exists("/proc/self/status"),
                    reason="the thresholds are glibc's (Linux)")
def test_a_model_pass_reuses_its_activations_and_gives_the_memory_back() -> None:
    """With the threshold fixed at 1 MiB (as ``pathweaver`` runs), each of a pass's multi-MB activations was a fresh
    mapping the kernel faults in and zeroes again; within ``model_pass`` they come from the heap, with at most
    half the page faults, the same vectors, and the freed pages given back afterwards (RSS within 32 MB)."""
    run = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, "PYTHONPATH": SRC},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    mapped_faults, pooled_faults = out["faults"]
    assert out["same"]
    assert pooled_faults < mapped_faults / 2, out
    assert out["rss"][1] <= out["rss"][0] + 32, out


def test_without_a_fixed_threshold_a_pass_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that did not fix the threshold (a library user) keeps glibc's own adjustment."""
    from pathweaver.numeric import heap

    monkeypatch.setitem(heap._state, "libc", None)  # as if no CLI ran in this process (one in the suite may have)
    with heap.model_pass(), heap.model_pass():
        assert heap._state["depth"] == 0
