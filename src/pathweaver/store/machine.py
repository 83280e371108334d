"""This machine's identity in a store: documents and folders are keyed by (machine, absolute path), so two
machines whose folders have the same path (``/home/me/notes`` on two laptops) never overwrite each other's
documents, and an ``index`` on one never deletes another's.

The id is derived, never looked up on a network: ``PATHWEAVER_MACHINE`` when set (a name of the user's choosing,
for containers whose machine-id changes on every start, or to keep a store's documents after moving to a new
computer), else the OS's machine id (``/etc/machine-id``, ``/var/lib/dbus/machine-id``), else a random id made once
and kept in the user data directory (macOS, Windows). systemd asks that the machine id never be shown as it is, so
the store keeps only a keyed hash of it (16 hex digits). The name shown beside another machine's documents is the
override, else the host name.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import socket
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

MACHINE_ENV = "PATHWEAVER_MACHINE"
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
FALLBACK_FILE = "machine-id"  # in the user data directory, where no OS machine id exists
ID_CHARS = 16
_KEY = b"pathweaver document keys"
_ID = re.compile(r"[0-9a-f]{16}")


@dataclass(frozen=True)
class Machine:
    """A machine as a store records it: ``id`` keys its documents and folders, ``name`` is what users read."""

    id: str
    name: str


def _hashed(secret: str) -> str:
    return hmac.new(_KEY, secret.strip().encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()[:ID_CHARS]


@lru_cache(maxsize=1)
def _os_machine_id() -> str:
    """The OS's machine id, or one made once and kept in the user data directory."""
    for name in MACHINE_ID_FILES:
        try:
            text = Path(name).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            return text
    from pathweaver.locations import data_dir

    kept = data_dir() / FALLBACK_FILE
    try:
        return kept.read_text(encoding="ascii").strip() or _keep_new(kept)
    except OSError:
        return _keep_new(kept)


def _keep_new(kept: Path) -> str:
    made = uuid.uuid4().hex
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(made + "\n", encoding="ascii")
    except OSError:
        pass  # an unwritable data directory: this process's id only, as a read-only home allows
    return made


def this_machine() -> Machine:
    """This process's machine (``PATHWEAVER_MACHINE`` read on every call, so tests and containers can set it)."""
    override = os.environ.get(MACHINE_ENV, "").strip()
    if override:
        return Machine(_hashed("name:" + override), override)
    return Machine(_hashed(_os_machine_id()), socket.gethostname() or "this machine")


def checked_id(machine_id: str) -> str:
    """``machine_id`` when it is one this module makes (16 hex digits), so SQL may hold it as a literal."""
    if not _ID.fullmatch(machine_id):
        raise ValueError(f"not a machine id: {machine_id!r}")
    return machine_id
