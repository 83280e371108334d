"""The indexer's ports and report: what an embedder must offer it, and what one call did."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

ProgressFn = Callable[[int, int, str], None]


class EmbedderLike(Protocol):
    model_name: str

    @property
    def dim(self) -> int: ...

    def encode(self, texts: list[str], batch_size: int | None = None, precision: str = "float32",
               invariant: bool = False) -> np.ndarray: ...

    def batch_invariant(self, precision: str = "float32") -> bool: ...

    def tokenize(self, text: str) -> list[tuple[int, int]]: ...


@dataclass
class IndexReport:
    """What one ``index_paths``/``apply_changes`` call did."""

    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    skipped: int = 0
    renamed: int = 0
    chunks: int = 0  # chunks written
    embedded: int = 0  # chunk texts that needed the model (the rest came from embed_cache)
    seconds: float = 0.0
    refreshed: bool = False
    errors: list[dict[str, str]] = field(default_factory=list)
    skipped_files: list[dict[str, str]] = field(default_factory=list)  # {path, reason} of each file skipped now

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def note_skipped(self, path: str, reason: str | None) -> None:
        self.skipped += 1
        self.skipped_files.append({"path": path, "reason": reason or "unknown"})

    def note_error(self, path: str, error: str) -> None:
        """A file that failed: it counts as skipped, with the error as its reason."""
        self.errors.append({"path": path, "error": error})
        self.note_skipped(path, error)
