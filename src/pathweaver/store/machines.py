"""The machines a store's documents come from (``store.machine``): their rows, each machine's indexed roots, the
rows a store made before machines gets on migration, and how another machine's document path reads.

A document is keyed by (machine id, absolute path): the same as (folder identity, path in the folder), where a
folder's identity is (machine, root), but it also holds for nested roots and single files given to ``index``.
"""

from __future__ import annotations

import json
from typing import Any

from pathweaver.store.machine import Machine, checked_id
from pathweaver.store.meta import delete_meta, meta_value, set_meta

SEPARATOR = ":"  # between a machine's name and a path of its, as ``scp`` writes a remote file


def roots_key(machine_id: str) -> str:
    """The meta key of the folders ``index`` was last given on machine ``machine_id`` (JSON list)."""
    return f"roots:{machine_id}"


def stored_roots(conn: Any, machine_id: str) -> list[str]:
    """The indexed root folders of machine ``machine_id``."""
    return list(json.loads(meta_value(conn, roots_key(machine_id)) or "[]"))


def set_roots(conn: Any, machine_id: str, roots: list[str]) -> None:
    """Record machine ``machine_id``'s indexed root folders (inside the caller's write transaction)."""
    set_meta(conn, roots_key(machine_id), json.dumps(roots))


def is_registered(conn: Any, machine: Machine) -> bool:
    return conn.execute("SELECT 1 FROM machines WHERE id = ?", (machine.id,)).fetchone() is not None


def register(conn: Any, machine: Machine, now: float) -> None:
    """Add ``machine`` to the store (inside a write transaction); a name another machine has gets this one's id
    appended, so every document path shown (``doc_path``) names one machine."""
    if is_registered(conn, machine):
        return
    taken = {r[0] for r in conn.execute("SELECT name FROM machines")}
    name = machine.name
    for width in (4, 8, 16):
        if name not in taken:
            break
        name = f"{machine.name}-{machine.id[:width]}"
    conn.execute("INSERT INTO machines(id, name, first_seen) VALUES (?, ?, ?)", (machine.id, name, now))


def claim(conn: Any, machine: Machine, now: float) -> None:
    """Give ``machine`` the documents, folders and roots of a store made before documents had a machine (its
    migration): one person's store is written by the machine that holds it."""
    register(conn, machine, now)
    conn.execute("UPDATE documents SET machine = ? WHERE machine = ''", (machine.id,))
    conn.execute("UPDATE folders SET machine = ? WHERE machine = ''", (machine.id,))
    roots = meta_value(conn, "roots")
    if roots is not None:
        set_roots(conn, machine.id, list(json.loads(roots or "[]")))
        delete_meta(conn, "roots")


def doc_path(machine_id: str, column: str = "d.path") -> str:
    """SQL for the path a reader on machine ``machine_id`` is shown for ``column`` of the document row ``d``: the
    path itself for its own documents, ``name:path`` for another machine's (whose file it cannot open, and whose
    path may equal one of its own)."""
    me = checked_id(machine_id)
    return (f"(CASE WHEN d.machine = '{me}' THEN {column} ELSE coalesce((SELECT m.name FROM machines m WHERE "
            f"m.id = d.machine), d.machine) || '{SEPARATOR}' || {column} END)")


def machine_counts(conn: Any) -> list[tuple[str, str, int]]:
    """(id, name, indexed documents) of every machine the store knows, by name."""
    return [(str(r[0]), str(r[1]), int(r[2])) for r in conn.execute(
        "SELECT m.id, m.name, (SELECT count(*) FROM documents d WHERE d.machine = m.id AND d.status = 'indexed') "
        "FROM machines m ORDER BY m.name")]


def machine_named(conn: Any, name: str) -> str | None:
    """The id of the machine the store shows as ``name``, None when there is none."""
    row = conn.execute("SELECT id FROM machines WHERE name = ?", (name,)).fetchone()
    return str(row[0]) if row else None


def documents_of(conn: Any, machine_id: str, clashing_with: str | None = None) -> list[int]:
    """The ids of machine ``machine_id``'s documents; with ``clashing_with``, only those whose path that machine
    has a document at too."""
    if clashing_with is None:
        return [int(r[0]) for r in conn.execute("SELECT id FROM documents WHERE machine = ? ORDER BY id",
                                                (machine_id,))]
    return [int(r[0]) for r in conn.execute(
        "SELECT d.id FROM documents d WHERE d.machine = ? AND EXISTS (SELECT 1 FROM documents o WHERE "
        "o.machine = ? AND o.path = d.path) ORDER BY d.id", (machine_id, clashing_with))]


def hand_over(conn: Any, from_id: str, to_id: str) -> int:
    """Give machine ``from_id``'s documents, folders and roots to ``to_id`` and forget ``from_id`` (inside a write
    transaction, after the documents both have a path for are gone); returns the documents handed over."""
    n = int(conn.execute("SELECT count(*) FROM documents WHERE machine = ?", (from_id,)).fetchone()[0])
    conn.execute("UPDATE documents SET machine = ? WHERE machine = ?", (to_id, from_id))
    conn.execute("DELETE FROM folders WHERE machine = ? AND path IN (SELECT path FROM folders WHERE machine = ?)",
                 (from_id, to_id))
    conn.execute("UPDATE folders SET machine = ? WHERE machine = ?", (to_id, from_id))
    set_roots(conn, to_id, sorted(set(stored_roots(conn, to_id)) | set(stored_roots(conn, from_id))))
    forget(conn, from_id)
    return n


def forget(conn: Any, machine_id: str) -> None:
    """Remove machine ``machine_id``'s folders, roots and row (inside a write transaction, its documents gone)."""
    conn.execute("DELETE FROM folders WHERE machine = ?", (machine_id,))
    delete_meta(conn, roots_key(machine_id))
    conn.execute("DELETE FROM machines WHERE id = ?", (machine_id,))
