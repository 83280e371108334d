"""Keeping the name layer exact: each document's names (``doc_names``) and every chunk's name mentions.

A chunk's name mentions depend only on its text and on the set of all names (the vocabulary), so after any change
only these chunks can link differently, and only they are re-linked:
- the chunks just written;
- chunks holding a name the change added (found through the full-text index, ``names.fts_query``: a superset,
  which the automaton then settles; a longer new name may also take over a shorter one's occurrences there);
- chunks that had a mention of a name the change removed (a shorter name may now match there instead).
A refresh re-links every chunk with the same function, so an incremental store equals a fresh one. The vocabulary
is read through the store's ``name_rows`` (headings no other document shares, link texts whose target exists), so a
change to one document may add or remove names another wrote (a note titled Target makes every ``[[Target|text]]``
a name); the diff of the whole vocabulary before and after catches those too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pathweaver.extract.graph import KIND_RANK
from pathweaver.extract.names import (
    ALIAS,
    HEADING,
    TITLE,
    NameLinker,
    document_names,
    fts_query,
    link_names,
    linkable,
)
from pathweaver.store import graph_writes as gw
from pathweaver.store import reads as r
from pathweaver.store.db import Connection
from pathweaver.store.meta import set_meta

EnsureFn = Callable[[Mapping[str, str]], object]  # creates entity rows (with vectors) for {name: kind}


class LinkerCache:
    """The automaton of the latest vocabulary, rebuilt only when the vocabulary changes."""

    def __init__(self) -> None:
        self._names: frozenset[str] | None = None
        self._linker: NameLinker | None = None

    def get(self, names: Iterable[str]) -> NameLinker:
        key = frozenset(names)
        if self._linker is None or key != self._names:
            self._linker, self._names = NameLinker.build(key), key
        return self._linker


@dataclass(frozen=True)
class DocNames:
    """What one document says about names: its own ({name: kind}) and its link texts ((target, name) pairs)."""

    names: Mapping[str, str] = field(default_factory=dict)
    links: frozenset[tuple[str, str]] = frozenset()

    def texts(self) -> set[str]:
        return set(self.names) | {n for _, n in self.links}


NO_NAMES = DocNames()


def names_of(title: str, aliases: Iterable[str], headings: Sequence[tuple[int, str]] = (),
             link_texts: Sequence[tuple[str, str, bool]] = ()) -> DocNames:
    return DocNames(document_names(title, list(aliases), [h for _, h in headings]),
                    frozenset(link_names(list(link_texts))))


def names_to_prepare(conn: Connection, doc_id: int | None, new: DocNames) -> set[str]:
    """Every name that writing ``new`` for ``doc_id`` may add to the vocabulary (a superset), so its entity vector
    can be made before the write transaction: its own names and link texts, the link texts others wrote for its
    titles and aliases, and its old headings (one it drops may become another document's unshared heading)."""
    own = [n for n, k in new.names.items() if k in (TITLE, ALIAS)]
    old = r.doc_names_of(conn, doc_id) if doc_id is not None else {}
    return new.texts() | r.link_names_to(conn, own) | {n for n, k in old.items() if k == HEADING}


def apply_names(conn: Connection, changes: Mapping[int, DocNames], new_chunks: Iterable[int],
                ensure: EnsureFn, cache: LinkerCache) -> None:
    """Give documents their names ({doc id: DocNames}; ``NO_NAMES`` for a document that goes) and re-link exactly
    the chunks whose name mentions can change (module docstring), inside the caller's transaction. A name added
    without an entity row (``ensure`` could not make one: a removal that un-shares a heading whose entity is not
    there) sets ``refresh_pending``, whose refresh links it."""
    before = r.vocabulary(conn, KIND_RANK)
    for doc_id, names in changes.items():
        gw.set_doc_names(conn, doc_id, names.names, names.links)
    after = r.vocabulary(conn, KIND_RANK)
    added = sorted(n for n in after if n not in before)
    removed = sorted(n for n in before if n not in after)
    stronger = {n: k for n, k in after.items() if n in before and KIND_RANK.get(k, 9) < KIND_RANK.get(before[n], 9)}
    if added or stronger:
        ensure({**{n: after[n] for n in added}, **stronger})
    affected = set(new_chunks) | r.name_mention_chunks(conn, removed)
    for name in added:
        query = fts_query(name)
        if linkable(name) and query:
            affected |= r.fts_chunk_ids(conn, query)
    removed_ids = set(r.entity_ids_of(conn, removed).values())
    if added and len(r.entity_ids_of(conn, added)) < len(added):
        set_meta(conn, "refresh_pending", "1")
    if affected:
        relink(conn, affected, cache.get(after))
    if removed_ids:
        gw.collect_garbage(conn, removed_ids, set())


def relink(conn: Connection, chunk_ids: Iterable[int] | None, linker: NameLinker) -> int:
    """Replace the name mentions of ``chunk_ids`` (None: all chunks) by what ``linker`` finds; returns how many."""
    texts = r.chunk_texts(conn, chunk_ids)
    found = linker.link_many(texts)
    ids = r.entity_ids_of(conn, {n for names in found.values() for n in names})
    rows = [(ids[n], cid, count) for cid, names in found.items() for n, count in names.items() if n in ids]
    gw.replace_name_mentions(conn, sorted(texts), rows)
    return len(rows)
