"""One embedder for two twin stores fed the same changes in lockstep: the real embedder's answer to a call is
remembered, so the twin's identical call gets the very same vectors instead of a second model pass.

For tests whose twins differ in something other than vectors (how they store a column, say): the first store's
vectors are the real model's, and the second gets exactly those bits, which it would also get from the model
(the same texts in the same call)."""

from __future__ import annotations

from typing import Any

import numpy as np


class TwinVectors:
    """The real embedder, answering a repeated ``encode`` call (same texts and arguments) from memory."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.answers: dict[tuple[Any, ...], np.ndarray] = {}
        self.repeats = 0  # calls answered from memory: the twin's share

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode(self, texts: list[str], batch_size: int | None = None, precision: str = "float32",
               invariant: bool = False) -> np.ndarray:
        key = (tuple(texts), batch_size, precision, invariant)
        if key in self.answers:
            self.repeats += 1
        else:
            self.answers[key] = self.inner.encode(texts, batch_size, precision, invariant)
        return self.answers[key].copy()
