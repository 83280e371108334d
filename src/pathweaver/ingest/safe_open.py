"""Opening a document file without ever blocking on it, and refusing what is not a plain regular file.

Every path that reads a document's bytes goes through ``open_regular``: it opens with ``O_NONBLOCK`` (a FIFO or
device swapped in after the scan's stat cannot block the indexing thread), then checks the opened file itself
(``fstat``: no race between check and read) for a regular file and, unless allowed, a single name. A hard link's
other names may lie outside every watched folder, and no path check can see them (docs/security.md).
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

NOT_REGULAR_REASON = "not a regular file"
HARD_LINK_PREFIX = "hard link"


class RefusedFile(OSError):
    """A file that is not read: its ``reason`` is the skip reason stored for it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def hard_link_reason(n_links: int) -> str:
    return f"{HARD_LINK_PREFIX} ({n_links} names; set ingest.allow_hard_links = true to index it)"


def stat_reason(st: os.stat_result, allow_hard_links: bool) -> str | None:
    """Why a file with this (followed) stat is not read, or None."""
    if not stat.S_ISREG(st.st_mode):
        return NOT_REGULAR_REASON
    if st.st_nlink > 1 and not allow_hard_links:
        return hard_link_reason(st.st_nlink)
    return None


def open_regular(path: str | os.PathLike[str], allow_hard_links: bool = True) -> BinaryIO:
    """``path`` opened for binary reading; raises ``RefusedFile`` for a FIFO, socket, device or directory, and for
    a hard-linked file unless ``allow_hard_links`` (other ``OSError`` as ``open`` does)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        reason = stat_reason(os.fstat(fd), allow_hard_links)
        if reason is not None:
            raise RefusedFile(reason)
        os.set_blocking(fd, True)  # a regular file: reads are plain reads again
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
