"""glibc's malloc thresholds: large blocks mapped on their own for queries, reused from the heap in model passes.

glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB), so after a snapshot read
frees its multi-MB column strings the next arrays of that size come from the heap, which never shrinks, and a cold
query's peak memory grows (docs/design-notes.md, "Heap growth"); ``fix_mmap_threshold`` (the CLI calls it first)
fixes it at 1 MiB. A model pass, though, frees and allocates activations of 6-25 MB at every layer: each of them
mapped afresh is page-faulted and zeroed by the kernel again, 4.2 million faults and 6 s of system time in the first
index of the demo notes. ``model_pass`` lets such blocks come from the heap during a pass (and keeps freed memory
at its top), then fixes the threshold again and gives the freed pages back (``malloc_trim``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
import threading
from collections.abc import Iterator
from typing import Any

M_TRIM_THRESHOLD = -1  # malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20  # bytes: blocks from this size get their own mapping, outside model passes
TRIM_THRESHOLD = 128 << 10  # glibc's default: free memory above it at the heap's top goes back at once
PASS_MMAP_THRESHOLD = 32 << 20  # the largest glibc accepts on 64-bit: a pass's activations come from the heap
PASS_TRIM_THRESHOLD = 64 << 20  # ... and stay there between its layers

_state: dict[str, Any] = {"libc": None, "depth": 0}
_lock = threading.Lock()


def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def fix_mmap_threshold() -> bool:
    """Blocks of ``MMAP_THRESHOLD`` and more get their own mappings, given back when freed (glibc only; elsewhere
    nothing, and False). From now on ``model_pass`` raises it for the length of a pass."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = _libc()
        if not libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD):  # fixing it turns the adjustment off
            return False
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return False
    _state["libc"] = libc
    return True


@contextlib.contextmanager
def model_pass() -> Iterator[None]:
    """Within: large blocks come from the heap and freed ones stay there; after the outermost exit, the fixed
    thresholds again and the free pages returned. Nothing where ``fix_mmap_threshold`` did not fix them."""
    libc = _state["libc"]
    if libc is None:
        yield
        return
    with _lock:
        _state["depth"] += 1
        if _state["depth"] == 1:
            libc.mallopt(M_MMAP_THRESHOLD, PASS_MMAP_THRESHOLD)
            libc.mallopt(M_TRIM_THRESHOLD, PASS_TRIM_THRESHOLD)
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
                libc.malloc_trim(0)
