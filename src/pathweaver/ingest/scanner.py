"""Diff folders against the ``documents`` table: new, changed, unchanged, deleted and renamed files.

mtime + size is the fast pre-check; a file is hashed only when they differ from the stored row (or when it may be
the new name of a deleted document of the same size). A deleted path and a new path with the same content hash
are a rename: the row moves in place and keeps its chunks, vectors and graph.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pathweaver.config import IngestSettings
from pathweaver.ingest.confine import Confinement
from pathweaver.ingest.ignore import IgnoreRules, file_stat_reason, iter_files
from pathweaver.ingest.safe_open import HARD_LINK_PREFIX, open_regular

# Skip reasons that come from the walk (not from reading the file): they are re-checked on every scan.
WALK_REASONS = ("too large", "hidden", "ignored by", "unsupported", "symlink", "broken symlink", "not a regular",
                "outside root", "unreadable", "file name", HARD_LINK_PREFIX)
NON_UTF8_REASON = "file name is not valid UTF-8 (rename the file to index it)"


@dataclass(frozen=True)
class FileEntry:
    """A file found on disk; ``reason`` is why it is skipped without reading it (None = index it)."""

    path: str
    reason: str | None
    mtime: float = 0.0
    size: int = 0


@dataclass(frozen=True)
class KnownDoc:
    """A row of the documents table."""

    id: int
    path: str
    content_hash: str
    mtime: float
    size: int
    status: str
    reason: str


@dataclass
class ScanResult:
    new: list[FileEntry] = field(default_factory=list)
    changed: list[FileEntry] = field(default_factory=list)
    unchanged: list[FileEntry] = field(default_factory=list)
    touched: list[tuple[KnownDoc, FileEntry]] = field(default_factory=list)  # same content, new mtime
    skipped: list[FileEntry] = field(default_factory=list)  # walk reason, row to (re)write
    deleted: list[KnownDoc] = field(default_factory=list)
    renamed: list[tuple[KnownDoc, FileEntry]] = field(default_factory=list)


def file_hash(path: str | Path) -> str:
    """sha1 of the file's bytes (streamed; never blocks on a FIFO: ``safe_open``)."""
    h = hashlib.sha1()
    with open_regular(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def store_path(path: str) -> str:
    """``path`` as the store keys it: itself when it is valid UTF-8, else its bytes with each undecodable one written
    ``\\xNN`` (POSIX names are bytes; SQLite text and JSON are UTF-8). Only skipped files get such a key."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")


def entry_for(path: Path, reason: str | None) -> FileEntry:
    """``FileEntry`` with the current mtime and size (zeros when the file cannot be stat'ed); a name that is not
    valid UTF-8 is skipped under its ``store_path``."""
    key = store_path(str(path))
    if key != str(path):
        reason = NON_UTF8_REASON
    try:
        st = os.stat(path)
        return FileEntry(key, reason, st.st_mtime, st.st_size)
    except OSError:
        return FileEntry(key, reason)


def put_entry(found: dict[str, FileEntry], entry: FileEntry) -> None:
    """Add ``entry`` under its path; a file whose real name is its key wins over an undecodable name escaped to it."""
    if entry.reason != NON_UTF8_REASON or entry.path not in found:
        found[entry.path] = entry


def walk(paths: Iterable[Path], ing: IngestSettings, confine: Confinement | None = None) -> dict[str, FileEntry]:
    """Every supported file under ``paths`` (folders or files) with its walk-time skip reason under the ``[ingest]``
    settings ``ing``; symlinks out of ``confine``'s roots are skipped."""
    found: dict[str, FileEntry] = {}
    for p in paths:
        p = Path(os.path.abspath(p))
        if p.is_dir():
            for path, reason in iter_files(p, IgnoreRules.of(p, ing), confine):
                put_entry(found, entry_for(path, reason))
        else:
            put_entry(found, entry_for(p, file_reason(p, IgnoreRules.of(p.parent, ing))))
    return found


def file_reason(path: Path, rules: IgnoreRules) -> str | None:
    """Skip reason of one named file under ``rules``: theirs, then not a regular file, a hard link or unreadable
    (the same checks as a folder walk: a FIFO named by a watcher event is skipped, never opened)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return rules.reason(path)  # gone: the caller's diff deletes it
    except OSError as exc:
        return rules.reason(path) or f"unreadable: {exc.strerror or exc}"
    return file_stat_reason(path, rules, st)


def under(path: str, roots: Iterable[str]) -> bool:
    """True when ``path`` is one of ``roots`` or inside one of them."""
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _safe_hash(path: str) -> str | None:
    try:
        return file_hash(path)
    except OSError:
        return None


def diff(found: dict[str, FileEntry], known: dict[str, KnownDoc], in_scope: Callable[[str], bool],
         hasher: Callable[[str], str | None] = _safe_hash, reread: bool = False) -> ScanResult:
    """Classify ``found`` files against ``known`` rows; known rows ``in_scope`` but not found are deleted. With
    ``reread`` every file is read again, indexed or skipped before (the parsers changed since)."""
    out = ScanResult()
    for path in sorted(found):
        entry = found[path]
        doc = known.get(path)
        same_stat = doc is not None and doc.mtime == entry.mtime and doc.size == entry.size
        if entry.reason is not None:
            if same_stat and doc is not None and doc.status == "skipped" and doc.reason == entry.reason:
                out.unchanged.append(entry)
            else:
                out.skipped.append(entry)
        elif doc is None:
            out.new.append(entry)
        elif doc.status == "skipped":
            walk_reason = doc.reason.startswith(WALK_REASONS)
            (out.unchanged if same_stat and not walk_reason and not reread else out.changed).append(entry)
        elif reread:
            out.changed.append(entry)
        elif same_stat:
            out.unchanged.append(entry)
        else:
            digest = hasher(path)
            if digest is not None and digest == doc.content_hash:
                out.touched.append((doc, entry))
            else:
                out.changed.append(entry)
    gone = [doc for path, doc in sorted(known.items()) if path not in found and in_scope(path)]
    if reread:  # a moved file is read again too: a rename would keep its old parse
        out.deleted.extend(gone)
    else:
        _match_renames(out, gone, hasher)
    return out


def _match_renames(out: ScanResult, gone: list[KnownDoc], hasher: Callable[[str], str | None]) -> None:
    """Pair deleted indexed documents with new files of the same size and content hash."""
    by_size: dict[int, list[KnownDoc]] = {}
    for doc in gone:
        if doc.status == "indexed" and doc.content_hash:
            by_size.setdefault(doc.size, []).append(doc)
    still_new: list[FileEntry] = []
    for entry in out.new:
        candidates = by_size.get(entry.size)
        digest = hasher(entry.path) if candidates else None
        match = next((d for d in candidates or [] if d.content_hash == digest), None)
        if match is None:
            still_new.append(entry)
            continue
        candidates.remove(match)  # type: ignore[union-attr]
        gone.remove(match)
        out.renamed.append((match, entry))
    out.new = still_new
    out.deleted = gone
