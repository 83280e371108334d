"""Shorter fixed-shape passes for the suite's in-process stores, only where they give the very same bits.

``packing.fixed_packed`` (the batch-invariant passes behind graph vectors) runs every pass at ``PACK_TOKENS``
(4096) tokens, the last filled up with empty rows, so indexing a note of ten words costs a full pass. The suite
indexes hundreds of small stores, and those passes were most of its time. Here the passes hold ``SHORT_TOKENS``
instead, but only after checking, per model and precision, that texts of every row width come out bit for bit
as at ``PACK_TOKENS`` (a pass's rows are computed alike, whatever their number); where they do not, the passes
stay as shipped. Tests marked ``shipped_passes`` (the pass shapes themselves) always run the shipped passes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

SHORT_TOKENS = 512
# one text per fixed row width the default model uses (32, 64, 128, 256 tokens): each width's kernels are checked
CHECK_TEXTS = ["polonium", "marie curie", *(" ".join(["radium glows in the dark at the institute"] * n)
                                            for n in (4, 12, 28))]


class ShortPasses:
    """A stand-in for ``embedder.fixed_packed``: the real function, run with ``SHORT_TOKENS`` per pass where
    that was checked to give the shipped bits."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.same: dict[tuple[Any, Any], bool] = {}  # (model name, autocast dtype or None) -> short passes allowed
        self.enabled = True

    def __call__(self, model: Any, texts: list[str]) -> np.ndarray:
        if not self.enabled or not self._same_bits(model):
            return self.real(model, texts)
        with pack_tokens(max(SHORT_TOKENS, int(model.max_seq_length))):
            return self.real(model, texts)

    def _same_bits(self, model: Any) -> bool:
        import torch

        # by the weights' name, not the object: a fresh load of the same model (doctor's probe) is not checked again
        name = getattr(getattr(model[0].auto_model, "config", None), "_name_or_path", "") or id(model)
        key = (name, torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None)
        if key not in self.same:
            shipped = self.real(model, CHECK_TEXTS)
            with pack_tokens(max(SHORT_TOKENS, int(model.max_seq_length))):
                short = self.real(model, CHECK_TEXTS)
            self.same[key] = shipped.tobytes() == short.tobytes()
        return self.same[key]


@contextlib.contextmanager
def pack_tokens(n: int) -> Iterator[None]:
    """``packing.PACK_TOKENS`` set to ``n`` for the block (the embedder's lock keeps its passes one at a time)."""
    from pathweaver.models import packing

    before = packing.PACK_TOKENS
    packing.PACK_TOKENS = n
    try:
        yield
    finally:
        packing.PACK_TOKENS = before
