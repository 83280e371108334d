"""Which server processes have a store open and which folders each serves: one locked file per server.

A server holds an exclusive ``flock`` on ``servers/<pid>.json`` in the store folder for as long as it runs; the
file names its pid and folders. The kernel drops the lock when the process ends, however it ends (kill -9
included), so a file whose lock can be taken belongs to no live process and is removed. A pid alone could be
reused by an unrelated process; the lock cannot.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; no server is ever reported there
    fcntl = None  # type: ignore[assignment]

SERVERS_DIR = "servers"


@dataclass(frozen=True)
class LiveServer:
    """A running server on the store: its pid and the folders it indexes and watches."""

    pid: int
    folders: tuple[str, ...]


class ServerLease:
    """This process's record as a live server of ``store_dir`` (``update`` rewrites its folders)."""

    def __init__(self, store_dir: Path, folders: list[str]) -> None:
        self.path: Path | None = None
        self._fd: int | None = None
        if fcntl is None:
            return
        directory = Path(store_dir) / SERVERS_DIR
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{os.getpid()}.json"
        partial = directory / f".{os.getpid()}.partial"  # locked before it has the name a reader looks for
        self._fd = os.open(partial, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.update(folders)
        os.replace(partial, self.path)

    def update(self, folders: list[str]) -> None:
        if self._fd is None:
            return
        data = json.dumps({"pid": os.getpid(), "folders": sorted(folders)}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def close(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            assert self.path is not None
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


def live_servers(store_dir: Path) -> list[LiveServer]:
    """The servers running on ``store_dir`` other than this process; stale records are removed."""
    directory = Path(store_dir) / SERVERS_DIR
    if fcntl is None or not directory.is_dir():
        return []
    out: list[LiveServer] = []
    for path in sorted(directory.glob("*.json")):
        if path.stem == str(os.getpid()):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # held: its server runs
                out.append(_record(fd, path))
                continue
            with contextlib.suppress(OSError):
                path.unlink()  # nobody holds it: the server ended without removing it
        finally:
            os.close(fd)
    return out


def _record(fd: int, path: Path) -> LiveServer:
    try:
        data = json.loads(os.pread(fd, 1 << 20, 0) or b"{}")
        return LiveServer(int(data.get("pid", path.stem)), tuple(data.get("folders", [])))
    except (ValueError, OSError):  # caught mid-rewrite: the pid is in the name
        return LiveServer(int(path.stem) if path.stem.isdigit() else -1, ())
