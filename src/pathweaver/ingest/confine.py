"""Symlink confinement: a path is followed only when its real path lies inside one of the watched roots.

One check for every way a path comes in: the scanner's walk, the watcher's batches (through the indexer) and the
MCP tools' path arguments (``server.roots``). A link whose target resolves outside every root is skipped with
``OUTSIDE_REASON``, so a ``key.txt -> ~/.ssh/id_rsa`` in a cloned repository never reaches the agent; the setting
``ingest.follow_symlinks_outside`` (off by default) lets the indexer follow such links anyway.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

OUTSIDE_REASON = "symlink outside the watched folders"


def real_roots(roots: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The real paths of ``roots`` (symlinks resolved), de-duplicated, in order."""
    out: list[str] = []
    for root in roots:
        real = os.path.realpath(root)
        if real not in out:
            out.append(real)
    return out


def resolves_inside(path: str | os.PathLike[str], roots: Iterable[str]) -> bool:
    """Whether ``path``, every symlink on it followed, is one of the real ``roots`` or lies inside one."""
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


class Confinement:
    """The real roots a walk may reach, and the reason a path outside them is skipped."""

    def __init__(self, roots: Iterable[str | os.PathLike[str]], follow_outside: bool = False) -> None:
        self.roots = real_roots(roots)
        self.follow_outside = follow_outside

    def reason(self, path: Path) -> str | None:
        """``OUTSIDE_REASON`` when ``path`` resolves outside every root (and that is not allowed), else None."""
        if self.follow_outside or resolves_inside(path, self.roots):
            return None
        return OUTSIDE_REASON
