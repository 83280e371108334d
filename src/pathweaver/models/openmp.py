"""One OpenMP thread for the torch ops of a worker thread of ours, without touching anyone else's setting.

torch runs each op on an OpenMP team whose size it takes from the calling thread; ``torch.set_num_threads`` also
changes the process-wide default (new threads and MKL take it up). A worker of our pool (``numeric.parallel``)
runs one block of a job beside the other workers, so a team of its own would put four threads on two cores, whose
barriers then wait for each other. OpenMP's ``omp_set_num_threads`` sets the calling thread's own value; we call
it in the runtime torch loaded, found in this process's memory map, because two such workers beat torch's
two-thread products on the caller's thread (docs/benchmarks.md). Where the runtime cannot be found (no /proc, another platform), callers
keep torch's ops on the caller's thread (``available`` says which).
"""

from __future__ import annotations

import ctypes
import re
import threading
from functools import lru_cache
from typing import Any

_RUNTIME_RE = re.compile(r"/lib(?:g|i)?omp[^/]*\.so[.\d]*$")
_local = threading.local()


@lru_cache(maxsize=1)
def _runtime() -> Any:
    """The OpenMP runtime torch loaded, or None."""
    import torch  # noqa: F401  (loads its OpenMP runtime)

    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = sorted({line.split()[-1] for line in maps if _RUNTIME_RE.search(line.rstrip())})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)  # the loaded library itself: dlopen of a loaded path returns its handle
            lib.omp_set_num_threads.argtypes = [ctypes.c_int]
            return lib
        except (OSError, AttributeError):
            continue
    return None


def available() -> bool:
    """Whether ``single_thread`` can do its job in this process."""
    return _runtime() is not None


def single_thread() -> bool:
    """Run this thread's torch ops on one OpenMP thread from now on (once per thread; cheap after that). Returns
    False where the runtime was not found, and nothing changed."""
    if getattr(_local, "single", False):
        return True
    lib = _runtime()
    if lib is None:
        return False
    import torch

    torch.get_num_threads()  # ATen sets a thread's OpenMP threads at its first use; let it do that first
    lib.omp_set_num_threads(1)
    _local.single = True
    return True
