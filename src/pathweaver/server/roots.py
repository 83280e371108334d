"""Path confinement: every path a client names must resolve inside one of the allowed roots.

The allowed roots are ``settings.server.folders`` plus the ``--watch`` folders. A path is resolved with
``os.path.realpath`` (symlinks followed), so a link inside a root that points outside it is refused, and so are
``..`` components and absolute paths outside every root: the same check (``ingest.confine.resolves_inside``) that
keeps the scanner and the watcher from following such links.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from pathweaver.config import ConfigError, Settings
from pathweaver.ingest.confine import resolves_inside


class RootsError(ConfigError):
    """A path argument lies outside the allowed roots (or no roots are configured)."""


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def allowed_roots(settings: Settings, watch: Iterable[Path] = ()) -> list[Path]:
    """``settings.server.folders`` + ``watch``, resolved, de-duplicated, in order."""
    out: list[Path] = []
    for raw in [*settings.server.folders, *watch]:
        root = _real(Path(raw).expanduser())
        if root not in out:
            out.append(root)
    return out


class Roots:
    """The allowed roots and the check every path argument goes through."""

    def __init__(self, roots: Iterable[Path]) -> None:
        self.roots: list[Path] = []
        for root in roots:
            real = _real(Path(root).expanduser())
            if real not in self.roots:
                self.roots.append(real)
        self._real_roots = [str(r) for r in self.roots]

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str | os.PathLike):
            return False
        return resolves_inside(path, self._real_roots)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real path of ``path`` if it lies inside a root; otherwise a ``RootsError`` saying why.

        A relative path is taken relative to the first root that contains it (the first root when none does).
        """
        text = os.fspath(path).strip()
        if not text:
            raise RootsError("the path is empty")
        if "\x00" in text:
            raise RootsError(f"{text!r} contains a NUL byte, which no file name can hold")
        if not self.roots:
            raise RootsError("no folders are allowed: start the server with --watch DIR or set server.folders")
        raw = Path(text).expanduser()
        if ".." in raw.parts:
            raise RootsError(f"{text!r}: '..' is not allowed in paths; name the path inside an allowed folder")
        if raw.is_absolute():
            candidates = [raw]
        else:
            candidates = [r / raw for r in self.roots]
            existing = [c for c in candidates if c.exists()]
            candidates = existing[:1] or candidates[:1]
        lexical = Path(os.path.abspath(candidates[0]))
        if resolves_inside(lexical, self._real_roots):
            return _real(lexical)
        if any(lexical == r or lexical.is_relative_to(r) for r in self.roots):
            raise RootsError(f"{text!r} is a symlink (or lies under one) that points outside the allowed folders")
        raise RootsError(f"{text!r} is outside the allowed folders: {', '.join(map(str, self.roots))}")
