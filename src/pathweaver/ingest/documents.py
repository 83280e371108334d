"""Writing one document (or removing it) in one transaction, its graph with it when it is derived at once."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pathweaver.extract.graph import (
    KIND_RANK,
    ChunkInput,
    DocGraph,
    ExtractParams,
    Structure,
    derive_document,
)
from pathweaver.ingest.embeds import embedded_targets
from pathweaver.ingest.graph_inputs import GraphInputs
from pathweaver.ingest.linking import NO_NAMES, DocNames, LinkerCache, apply_names, names_of, names_to_prepare
from pathweaver.ingest.parsed import ParseError
from pathweaver.ingest.parsers import parse_file
from pathweaver.ingest.prepare import Prepared
from pathweaver.ingest.safe_open import open_regular
from pathweaver.ingest.scanner import FileEntry, KnownDoc, file_hash, under
from pathweaver.store import graph_writes as gw
from pathweaver.store import indexing as ix
from pathweaver.store import machines
from pathweaver.store import writes as w
from pathweaver.store.changes import document_change
from pathweaver.store.db import Connection, Database
from pathweaver.store.machine import this_machine
from pathweaver.store.meta import set_meta
from pathweaver.store.reads import entity_ids_of, gram_df


def delete_documents(conn: Connection, doc_ids: Sequence[int], ensure: Callable[[Mapping[str, str]], object] | None = None,
                     linker: LinkerCache | None = None) -> None:
    """Delete documents with their chunks and the graph only they supported (inside the caller's transaction)."""
    if doc_ids:  # their names go first: what only they named is re-linked where it occurred
        apply_names(conn, {d: NO_NAMES for d in doc_ids}, [], ensure or (lambda kinds: None), linker or LinkerCache())
    with document_change(conn, doc_ids) as change:
        for doc_id in doc_ids:
            change.count_chunks(w.delete_document(conn, doc_id))


@dataclass
class StartupPass:
    """What ``withhold_outdated`` found: paths deleted on disk, and paths whose text changed (withheld until the
    scan indexes them again)."""

    gone: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def withhold_outdated(db: Database) -> StartupPass:
    """Delete the indexed documents whose file is gone or whose text changed since it was indexed, so that a file
    deleted or edited while no process watched is never served: one stat each; a file whose mtime or size moved is
    hashed, and one with the same bytes only gets its new stat. A changed file's document comes back when the next
    scan indexes it (the server scans its folders at once). Documents under an indexed root that is itself missing
    (an unmounted drive) stay, as the folder scan keeps them."""
    me = this_machine().id  # another machine's files are not there to stat
    absent = [r for r in machines.stored_roots(db.conn, me) if not os.path.isdir(r)]
    out = StartupPass()
    drop: list[int] = []
    touched: list[tuple[int, float, int]] = []
    for doc_id, path, content_hash, mtime, size, status, _ in ix.known_documents(db.conn, me):
        if status != "indexed":
            continue
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if not under(path, absent):
                drop.append(doc_id)
                out.gone.append(path)
            continue
        except OSError:
            continue  # there but unreadable now: the next scan gives it its reason
        if st.st_mtime == mtime and st.st_size == size:
            continue
        try:
            same = file_hash(path) == content_hash
        except OSError:
            same = False  # not a regular file any more, or unreadable: not served until the scan says why
        if same:
            touched.append((doc_id, st.st_mtime, st.st_size))
        else:
            drop.append(doc_id)
            out.changed.append(path)
    if drop or touched:
        with db.write() as conn:
            for doc_id, new_mtime, new_size in touched:
                w.update_document_stat(conn, doc_id, new_mtime, new_size)
            delete_documents(conn, drop)
    return out


RENAME_BATCH = 500  # renames settled per transaction: bounds the derived graphs held at once


@dataclass
class _Rename:
    """One planned rename: the document, its new entry, what its file now says, and its graph when re-derived."""

    doc: KnownDoc
    entry: FileEntry
    title: str
    headings: list[tuple[int, str]]
    links: list[str]
    names: DocNames
    same: bool
    graph: DocGraph | None
    keys: dict[int, int]


class DocumentWriter:
    """Writes (or removes) one document at a time, each in one transaction, never split: its own, or a batch's,
    in which it runs in a savepoint. Its graph is derived and written with it unless the write is ``deferred``
    to the refresh that is then due; a rename keeps the chunks and their vectors."""

    def __init__(self, db: Database, params: ExtractParams, inputs: GraphInputs, linker: LinkerCache,
                 machine_id: str) -> None:
        self.db = db
        self.machine_id = machine_id  # whose files it writes (``store.machine``)
        self.params = params
        self.inputs = inputs
        self._linker = linker

    @contextlib.contextmanager
    def batch_transaction(self, bulk: bool) -> Iterator[Connection | None]:
        """One transaction for a whole batch of files when ``bulk`` (a deferred index writes chunks only, and a
        commit per file would dirty the same gram_df pages again and again), else None: each file then commits
        on its own (its graph is derived from the statistics the file before it committed). No file ever spans
        two transactions, so a crash leaves each file fully old or fully new."""
        if not bulk:
            yield None
            return
        with self.db.write() as conn:
            yield conn

    @contextlib.contextmanager
    def _writing(self, conn: Connection | None) -> Iterator[Connection]:
        """``conn`` when a batch transaction is open, else a transaction of its own."""
        if conn is not None:
            yield conn
            return
        with self.db.write() as own:
            yield own

    def write_skipped(self, entry: FileEntry, known: KnownDoc | None, batch: Connection | None = None) -> None:
        with self._writing(batch) as conn, document_change(conn, [known.id] if known else []) as change:
            doc_id = w.upsert_document(conn, entry.path, machine_id=self.machine_id, title=Path(entry.path).name,
                                       mtime=entry.mtime, size=entry.size, status="skipped",
                                       reason=entry.reason or "unknown", indexed_at=time.time())
            apply_names(conn, {doc_id: NO_NAMES}, [], self._no_new_names, self._linker)
            w.set_embeds(conn, doc_id, [])
            change.count_chunks(w.delete_document_chunks(conn, doc_id))

    def delete(self, doc: KnownDoc) -> None:
        with self.db.write() as conn:
            delete_documents(conn, [doc.id], self._no_new_names, self._linker)

    def delete_in(self, conn: Connection, doc_ids: Sequence[int]) -> None:
        """Delete documents by id inside the caller's write transaction (another machine's, whose files are not
        here to scan)."""
        delete_documents(conn, doc_ids, self._no_new_names, self._linker)

    def _name_entities(self, names: Iterable[str]) -> Callable[[Mapping[str, str]], None]:
        """What ``apply_names`` calls to make entity rows for a document's names new to the store, inside the
        caller's transaction (a stronger kind replaces a weaker one). The words their vectors are made of are cached
        now, before that transaction: a word new to the embedding cache is written in a transaction of its own."""
        self.inputs.graph_vectors(list(names), [])

        def ensure(kinds: Mapping[str, str]) -> None:
            if kinds:
                gw.ensure_entities(self.db.conn, dict(kinds), KIND_RANK)

        return ensure

    def _no_new_names(self, kinds: Mapping[str, str]) -> None:
        """What a removal may add: only a heading it un-shares, whose entity its own document's graph already
        holds; no vector is made (``apply_names`` marks a refresh for one whose entity is missing)."""
        have = entity_ids_of(self.db.conn, kinds)
        if have:
            gw.ensure_entities(self.db.conn, {n: kinds[n] for n in have}, KIND_RANK)

    def write_file(self, prep: Prepared, known: KnownDoc | None, deferred: bool,
                   batch: Connection | None = None) -> None:
        graph = None if deferred else self._file_graph(prep, known)
        doc = prep.doc
        names = names_of(doc.title, doc.aliases, doc.headings, doc.link_texts)
        ensure = self._no_new_names if deferred else self._name_entities(
            names_to_prepare(self.db.conn, known.id if known else None, names))
        with self._writing(batch) as conn, document_change(conn, [known.id] if known else []) as change:
            doc_id = w.upsert_document(
                conn, prep.entry.path, machine_id=self.machine_id, title=doc.title, content_hash=prep.content_hash,
                mtime=prep.entry.mtime, size=prep.entry.size, status="indexed", reason="", indexed_at=time.time(),
                headings=doc.headings, links=doc.links,
            )
            removed = w.delete_document_chunks(conn, doc_id)
            w.set_embeds(conn, doc_id, embedded_targets(doc, prep.found))
            # in a batch transaction (no graph derived in it) the batch adds every file's gram_df at its end
            ids = w.insert_chunks(conn, doc_id, doc.title, prep.rows, prep.vecs, count_grams=batch is None)
            if graph is None:
                gw.set_doc_names(conn, doc_id, names.names, names.links)  # the refresh that is due links every chunk
                set_meta(conn, "refresh_pending", "1")
            else:
                self._write_graph(conn, graph, dict(enumerate(ids)))
                apply_names(conn, {doc_id: names}, ids, ensure, self._linker)
            change.count_chunks(removed + len(ids))

    def _file_graph(self, prep: Prepared, known: KnownDoc | None) -> DocGraph:
        """The file's graph with current statistics including its own new chunks (read before the write), the
        vectors its names and triples are made from cached."""
        conn = self.db.conn
        old_grams: dict[str, int] = {}
        n_old = 0
        if known is not None:
            for grams in ix.document_chunk_grams(conn, known.id):
                n_old += 1
                for g in grams:
                    old_grams[g] = old_grams.get(g, 0) + 1
        new_grams: dict[str, int] = {}
        for r in prep.rows:
            for g in r.grams:
                new_grams[g] = new_grams.get(g, 0) + 1
        df = gram_df(conn, list(new_grams))
        for g, n in new_grams.items():
            df[g] = df.get(g, 0) - old_grams.get(g, 0) + n
        n_chunks = ix.row_count(conn, "chunks") - n_old + len(prep.rows)
        chunks = self.inputs.with_ner([ChunkInput(i, r.start, r.end, r.text, r.grams, r.n_words)
                                 for i, r in enumerate(prep.rows)])
        structure = Structure(prep.doc.title, prep.doc.headings, prep.doc.links)
        graph = derive_document(chunks, structure, n_chunks, df, self.params)
        self.inputs.doc_graph_vectors(graph)
        return graph

    @staticmethod
    def _write_graph(conn: Connection, graph: DocGraph, chunk_ids: dict[int, int]) -> None:
        ids = gw.ensure_entities(conn, graph.kinds, KIND_RANK)
        gw.insert_mentions(conn, [(ids[n], chunk_ids[k], c, s) for (n, k), (c, s) in graph.mentions.items()])
        keys = [(ids[r.src], ids[r.dst], r.label) for r in graph.relations]
        gw.ensure_relations(conn, [(k, r.kind, r.sentence) for k, r in zip(keys, graph.relations, strict=True)],
                           [(k, chunk_ids[r.chunk], r.start, r.end) for k, r in zip(keys, graph.relations, strict=True)])

    def rename_many(self, moves: Sequence[tuple[KnownDoc, FileEntry]], deferred: bool) -> list[tuple[KnownDoc, FileEntry]]:
        """Move each document to its entry's path without re-embedding, ``RENAME_BATCH`` at a time, each batch in
        one transaction whose name layer is settled once (``apply_names`` of all its documents: the vocabulary is
        read twice a batch, not twice a file, and the result is the same). Returns the moves whose content changed
        meanwhile (not renamed)."""
        stale: list[tuple[KnownDoc, FileEntry]] = []
        for i in range(0, len(moves), RENAME_BATCH):
            batch = moves[i:i + RENAME_BATCH]
            plans = [self._plan_rename(doc, entry, deferred) for doc, entry in batch]
            stale += [m for m, plan in zip(batch, plans, strict=True) if plan is None]
            self._write_renames([p for p in plans if p is not None], deferred)
        return stale

    def _plan_rename(self, doc: KnownDoc, entry: FileEntry, deferred: bool) -> _Rename | None:
        """What renaming ``doc`` writes, read and derived before the transaction; None if its content changed."""
        try:
            with open_regular(entry.path) as f:
                data = f.read()
            parsed = parse_file(Path(entry.path), data)
        except (OSError, ParseError):
            return None
        if hashlib.sha1(data).hexdigest() != doc.content_hash:
            return None
        same = ix.document_structure(self.db.conn, doc.id) == (
            parsed.title, [list(h) for h in parsed.headings], list(parsed.links))
        graph, keys = None, {}
        if not same and not deferred:
            chunks = self.inputs.with_ner(self._stored_chunks(doc.id))
            n_chunks = ix.row_count(self.db.conn, "chunks")
            df = gram_df(self.db.conn, sorted({g for c in chunks for g in c.grams}))
            graph = derive_document(chunks, Structure(parsed.title, parsed.headings, parsed.links), n_chunks, df,
                                    self.params)
            keys = {c.key: c.key for c in chunks}
            self.inputs.doc_graph_vectors(graph)  # caches what the snapshot makes their vectors from
        names = names_of(parsed.title, parsed.aliases, parsed.headings, parsed.link_texts)
        return _Rename(doc, entry, parsed.title, parsed.headings, parsed.links, names, same, graph, keys)

    def _write_renames(self, plans: Sequence[_Rename], deferred: bool) -> None:
        if not plans:
            return
        ensure = None
        if not deferred:  # the union of each file's superset is a superset of what the batch may add
            prepare: set[str] = set()
            for p in plans:
                prepare |= names_to_prepare(self.db.conn, p.doc.id, p.names)
            ensure = self._name_entities(prepare)
        with self.db.write() as conn:
            for p in plans:
                w.rename_document(conn, p.doc.id, p.entry.path, p.entry.mtime, p.entry.size, p.title, p.headings,
                                  p.links)
                if ensure is None:
                    gw.set_doc_names(conn, p.doc.id, p.names.names, p.names.links)
            if ensure is not None:
                apply_names(conn, {p.doc.id: p.names for p in plans}, [], ensure, self._linker)
            for p in plans:
                if p.same:
                    continue
                with document_change(conn, [p.doc.id]):
                    gw.clear_chunk_derived(conn, list(p.keys) or ix.document_chunk_ids(conn, p.doc.id))
                    if p.graph is None:
                        set_meta(conn, "refresh_pending", "1")
                    else:
                        self._write_graph(conn, p.graph, p.keys)

    def _stored_chunks(self, doc_id: int) -> list[ChunkInput]:
        return [ChunkInput(*row) for _, row in ix.stored_chunks(self.db.conn, doc_id)]
