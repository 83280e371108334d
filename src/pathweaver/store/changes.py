"""The unit of work of a change to documents: what their chunks supported before it is collected after it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pathweaver.store.db import Connection
from pathweaver.store.graph_writes import chunk_dependents, collect_garbage
from pathweaver.store.meta import add_meta_int


@dataclass
class DocumentChange:
    """The graph rows the changed documents' chunks supported before the change (the garbage collection's
    candidates), and how many chunks the change wrote or removed (None: it counts none)."""

    entity_ids: set[int] = field(default_factory=set)
    relation_ids: set[int] = field(default_factory=set)
    changed_chunks: int | None = None

    def count_chunks(self, n: int) -> None:
        """Add ``n`` chunks written or removed to the ones ``meta.changed_chunks`` gets (its refresh trigger)."""
        self.changed_chunks = (self.changed_chunks or 0) + n


@contextmanager
def document_change(conn: Connection, doc_ids: Iterable[int]) -> Iterator[DocumentChange]:
    """Change documents inside the caller's transaction: notes the entities and relations their chunks support
    first; when the block ends, adds the chunks it counted to ``meta.changed_chunks`` and removes what lost its
    support (``graph_writes.collect_garbage``). Nothing of that runs when the block raises."""
    change = DocumentChange()
    for doc_id in doc_ids:
        ents, rels = chunk_dependents(conn, doc_id)
        change.entity_ids |= ents
        change.relation_ids |= rels
    yield change
    if change.changed_chunks is not None:
        add_meta_int(conn, "changed_chunks", change.changed_chunks)
    collect_garbage(conn, change.entity_ids, change.relation_ids)
