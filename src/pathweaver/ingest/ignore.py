"""Which files under a root are documents: hidden paths, .gitignore/.pathweaverignore patterns, size, type.

``IgnoreRules.reason`` explains why one path is skipped; ``iter_files`` walks a root and yields every supported
file with its skip reason (None = index it). Hidden and ignored directories are not entered, unsupported file types
are passed over silently, and symlinked directories are followed once (loops are detected by real path); with a
``Confinement``, a symlink whose target lies outside the watched roots is not followed but yielded with its reason.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pathspec

from pathweaver.config import ConfigError, IngestSettings
from pathweaver.ingest.confine import Confinement
from pathweaver.ingest.parsed import SUPPORTED_SUFFIXES
from pathweaver.ingest.safe_open import open_regular, stat_reason

IGNORE_FILES = (".gitignore", ".pathweaverignore")
TEXT_SUFFIXES: frozenset[str] = frozenset({".md", ".markdown", ".txt", ".rst", ".html", ".htm"})
BINARY_SNIFF_BYTES = 8192
DEFAULT_MAX_BYTES = 20 * 1024 * 1024


def looks_binary(data: bytes) -> bool:
    """True when the first 8 KB hold a NUL byte; call it only for TEXT_SUFFIXES (PDF/DOCX are binary by design)."""
    return b"\x00" in data[:BINARY_SNIFF_BYTES]


class IgnoreRules:
    """Skip rules for one root: hidden paths, gitignore-style patterns, unsupported types and size limits (one for
    every file, a lower one for text files), and whether hard links are read."""

    @classmethod
    def of(cls, root: Path, ing: IngestSettings) -> IgnoreRules:
        """The rules ``ing`` (``[ingest]`` settings) sets, rooted at ``root``."""
        return cls(root, list(ing.ignore), ing.max_file_bytes, ing.allow_hard_links, ing.max_text_bytes)

    def __init__(self, root: Path, patterns: Iterable[str] = (), max_bytes: int = DEFAULT_MAX_BYTES,
                 allow_hard_links: bool = False, max_text_bytes: int | None = None) -> None:
        if max_bytes < 1 or (max_text_bytes is not None and max_text_bytes < 1):
            raise ConfigError(f"max_bytes and max_text_bytes must be >= 1, got {max_bytes} and {max_text_bytes}")
        self.root = Path(os.path.abspath(root))
        self.max_bytes = max_bytes
        self.max_text_bytes = max_bytes if max_text_bytes is None else min(max_bytes, max_text_bytes)
        self.allow_hard_links = allow_hard_links
        lines: list[str] = []
        for name in IGNORE_FILES:
            f = self.root / name
            if f.is_file():
                try:
                    with open_regular(f) as fh:
                        lines += fh.read(1 << 20).decode("utf-8", errors="replace").splitlines()
                except OSError:
                    continue
        lines += list(patterns)
        self._spec = pathspec.GitIgnoreSpec.from_lines(lines)

    def _relative(self, path: Path) -> str | None:
        rel = os.path.relpath(os.path.abspath(path), self.root)
        return None if rel == os.pardir or rel.startswith(os.pardir + os.sep) else Path(rel).as_posix()

    def _pattern(self, rel: str) -> str | None:
        result = self._spec.check_file(rel)
        if result.include and result.index is not None:
            return str(getattr(self._spec.patterns[result.index], "pattern", "") or rel)
        return None

    def dir_reason(self, path: Path) -> str | None:
        """Why a directory is not entered ("hidden", "ignored by pattern 'x'"), or None."""
        rel = self._relative(path)
        if rel is None:
            return "outside root"
        if rel == ".":
            return None
        if any(part.startswith(".") for part in rel.split("/")):
            return "hidden"
        pattern = self._pattern(rel + "/")
        return f"ignored by pattern '{pattern}'" if pattern else None

    def reason(self, path: Path, size: int | None = None) -> str | None:
        """Why ``path`` is skipped, or None to index it. ``size`` is read from disk when not given."""
        rel = self._relative(path)
        if rel is None or rel == ".":
            return "outside root"
        if any(part.startswith(".") for part in rel.split("/")):
            return "hidden"
        pattern = self._pattern(rel)
        if pattern:
            return f"ignored by pattern '{pattern}'"
        suffix = Path(rel).suffix.lower()
        if suffix not in SUPPORTED_SUFFIXES:
            return f"unsupported type {suffix or '(no suffix)'}"
        if size is None:
            try:
                size = os.stat(path).st_size
            except OSError:
                return None  # existence and readability are the caller's business
        limit = self.max_text_bytes if suffix in TEXT_SUFFIXES else self.max_bytes
        if size > limit:
            return f"too large ({size} bytes > {limit})"
        return None


def file_stat_reason(path: Path, rules: IgnoreRules, st: os.stat_result) -> str | None:
    """Why the file ``path`` with the (followed) stat ``st`` is skipped: the rules', then not a regular file or a
    hard link (``safe_open``), then unreadable; None to index it."""
    reason = rules.reason(path, st.st_size) or stat_reason(st, rules.allow_hard_links)
    if reason is None and not os.access(path, os.R_OK):
        return "unreadable: permission denied"
    return reason


def iter_files(root: Path, rules: IgnoreRules, confine: Confinement | None = None
               ) -> Iterator[tuple[Path, str | None]]:
    """Every supported file under ``root`` with its skip reason (None = index it), in a stable order.

    Real folders are walked first (sorted by name); symlinked folders are followed afterwards, once each, unless
    their real path was already walked: then they yield "symlink loop" (the target contains the link) or
    "symlink to a folder already scanned".
    """
    root = Path(os.path.abspath(root))
    visited: set[str] = set()
    deferred: list[Path] = []
    yield from _walk(root, rules, visited, deferred, confine)
    while deferred:
        link = deferred.pop(0)
        real = os.path.realpath(link)
        if real in visited:
            parent = os.path.realpath(link.parent)
            inside = parent == real or parent.startswith(real.rstrip(os.sep) + os.sep)
            yield link, "symlink loop" if inside else "symlink to a folder already scanned"
        else:
            yield from _walk(link, rules, visited, deferred, confine)


def _walk(
    directory: Path, rules: IgnoreRules, visited: set[str], deferred: list[Path], confine: Confinement | None
) -> Iterator[tuple[Path, str | None]]:
    """Walk real subfolders depth-first; symlinked subfolders go to ``deferred``."""
    visited.add(os.path.realpath(directory))
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        yield directory, f"unreadable: {exc.strerror or exc}"
        return
    for entry in entries:
        path = Path(entry.path)
        try:
            is_dir = entry.is_dir(follow_symlinks=True)
            is_file = not is_dir and entry.is_file(follow_symlinks=True)
        except OSError:
            is_dir = is_file = False
        outside = confine.reason(path) if confine is not None and entry.is_symlink() else None
        if is_dir:
            if rules.dir_reason(path) is not None:
                continue
            if outside:
                yield path, outside
            elif entry.is_symlink():
                deferred.append(path)
            else:
                yield from _walk(path, rules, visited, deferred, confine)
            continue
        if path.suffix.lower() not in SUPPORTED_SUFFIXES:
            continue
        if outside:
            yield path, outside
            continue
        if not is_file:
            yield path, _dangling_reason(path)
            continue
        try:
            st = entry.stat(follow_symlinks=True)
        except OSError as exc:
            yield path, f"unreadable: {exc.strerror or exc}"
            continue
        yield path, file_stat_reason(path, rules, st)


def _dangling_reason(path: Path) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        if os.path.islink(path):
            return "broken symlink"
        return f"unreadable: {exc.strerror or exc}"
    return "not a regular file"
