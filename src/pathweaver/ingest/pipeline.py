"""Incremental indexing: files -> chunks -> vectors -> graph, one transaction per file (or per batch of whole files
in a bulk index).

Incremental rule for corpus statistics (ER, AGRAG §III-B Eq. 2-3, depends on |T_c| and df):
- ``gram_df`` and the chunk count are maintained exactly in every file's (or batch's) transaction.
- A small change (at most ``extract.auto_refresh_ratio`` of the documents) is extracted at once: each new chunk's
  entities are selected with the statistics *including* the new chunks; other chunks keep the selection they had.
- A large change (a first index, a big batch) is written as chunks only, with ``refresh_pending`` set in meta;
  the graph is then derived for the whole corpus by ``refresh()`` at the end of the call.
- ``refresh()`` (``ingest.refresh``) re-derives the whole graph from the stored chunks with current statistics. It
  runs on its own when ``refresh_pending`` is set (also after a crash) or when the chunks changed since the last
  refresh exceed ``auto_refresh_ratio`` of all chunks.
Hence any sequence of changes followed by ``refresh()`` ends in exactly the graph of a fresh index of the final
folder (which itself ends with the refresh computation). Each call ends with the synonym pass
(``ingest.synonym_pass``) unless it refreshed.

The steps, one module each: scan (``scanner``), read, parse, chunk and embed (``prepare``), write one document
(``documents``, its graph's model inputs from ``graph_inputs``), refresh, synonym pass; this module decides which
runs when.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pathweaver.config import ConfigError, Settings
from pathweaver.extract import ner
from pathweaver.extract.graph import ExtractParams
from pathweaver.ingest.chunk_precision import store_chunk_precision
from pathweaver.ingest.confine import Confinement
from pathweaver.ingest.documents import DocumentWriter
from pathweaver.ingest.embeds import NoteIndex, note_keys
from pathweaver.ingest.graph_inputs import GraphInputs
from pathweaver.ingest.ignore import IgnoreRules, iter_files
from pathweaver.ingest.invariance import recorded_invariance
from pathweaver.ingest.linking import LinkerCache
from pathweaver.ingest.logseq import uuid_key
from pathweaver.ingest.parsers import PARSE_RULES
from pathweaver.ingest.prepare import Prepared, Preparer, in_batch_order
from pathweaver.ingest.refresh import Refresher, vector_settings_changed
from pathweaver.ingest.scanner import (
    FileEntry,
    KnownDoc,
    ScanResult,
    diff,
    entry_for,
    file_reason,
    put_entry,
    store_path,
    under,
    walk,
)
from pathweaver.ingest.synonym_pass import SynonymPass
from pathweaver.ingest.types import EmbedderLike, IndexReport, ProgressFn
from pathweaver.models.precision import check_precision
from pathweaver.results import RefreshOut
from pathweaver.store import indexing as ix
from pathweaver.store import machines
from pathweaver.store import writes as w
from pathweaver.store.bm25_terms import keep_postings, wants_postings
from pathweaver.store.db import Connection, Database
from pathweaver.store.machine import this_machine
from pathweaver.store.meta import set_meta
from pathweaver.store.reads import folder_states
from pathweaver.store.servers import live_servers

log = logging.getLogger(__name__)


class Indexer:
    """Keeps a store in step with folders; see the module docstring for the incremental rule."""

    def __init__(self, db: Database, settings: Settings, embedder: EmbedderLike) -> None:
        self.db = db
        self.settings = settings
        self.embedder = embedder
        params = ExtractParams.from_settings(settings.extract)
        params.validate()
        check_precision(settings.ingest.chunk_vector_precision, "ingest.chunk_vector_precision")  # before a probe
        if params.uses_ner:  # a missing spaCy or pipeline is named before anything is written
            ner.check_available(params.ner_model)
        if not 0.0 <= settings.extract.auto_refresh_ratio <= 1.0:
            raise ConfigError(f"extract.auto_refresh_ratio must be in [0, 1], got {settings.extract.auto_refresh_ratio}")
        model = getattr(embedder, "model_name", settings.models.embedding_model)
        db.ensure_embedding(model, int(embedder.dim))  # a store of another model is named before the model is probed
        invariant = recorded_invariance(db, embedder, model)  # the probe loads the full model: once per machine
        self.params = params.resolved(invariant)  # "auto" decided here, as the store records it
        # float32's fixed-shape passes hold their bits on every ISA tests/test_isa_matrix.py caps, and probing
        # them costs ~20 s of CPU, a fifth of a first index: ``pathweaver doctor --probe`` measures it instead
        if self.params.precision != "float32" and not invariant(self.params.precision):
            log.warning("vectors at %s depend on their batch on this machine: an incremental index equals a fresh "
                        "one only to rounding (docs/design-notes.md, \"Batch-invariant vectors\")",
                        self.params.precision)
        self.chunk_precision = store_chunk_precision(db, settings.ingest.chunk_vector_precision, invariant,
                                                     self._count("chunks") > 0)
        # the graph's warning above already names its own precision
        if self.chunk_precision not in ("float32", self.params.precision) and not invariant(self.chunk_precision):
            log.warning("chunk vectors at %s depend on their batch on this machine: an incremental index equals a "
                        "fresh one only to rounding", self.chunk_precision)
        self.last_refresh: RefreshOut | None = None  # the result of the latest refresh()
        linker = LinkerCache()  # the name automaton of the latest vocabulary
        self.inputs = GraphInputs(db, settings, embedder, self.params)
        self.synonyms = SynonymPass(db, self.params)
        self._preparer = Preparer(db, settings, embedder, self.params, self.chunk_precision)
        self.machine = this_machine()  # documents and folders are this machine's (``store.machine``)
        if not machines.is_registered(db.conn, self.machine):
            with db.write(bump_version=False) as conn:
                machines.register(conn, self.machine, time.time())
        self._writer = DocumentWriter(db, self.params, self.inputs, linker, self.machine.id)
        self._refresher = Refresher(db, self.params, self.inputs, self.synonyms, linker)
        if self._count("entities") == 0 and db.get_meta("vector_settings") != self.params.vector_settings:
            with db.write(bump_version=False) as conn:  # nothing to re-make yet: record the modes entities get
                set_meta(conn, "vector_settings", self.params.vector_settings)
        if self._count("chunks") == 0 and db.get_meta("entity_settings") != self.params.entity_settings:
            with db.write(bump_version=False) as conn:
                set_meta(conn, "entity_settings", self.params.entity_settings)

    # -- public API ------------------------------------------------------------------------------------------
    def index_paths(self, paths: list[Path], exact: bool = True, progress: ProgressFn | None = None,
                    force: bool = False) -> IndexReport:
        """Index files and folders; with ``exact`` documents not under any of ``paths`` are removed, but never those
        of a running server's folders unless ``force`` (``ConfigError`` naming the server, before any change)."""
        start = time.perf_counter()
        roots = [Path(os.path.abspath(p)) for p in paths]
        missing = [str(p) for p in roots if not p.exists() and not p.is_symlink()]
        if missing:
            raise ConfigError(f"no such file or folder: {', '.join(missing)}")
        ing = self.settings.ingest
        root_strs = [str(r) for r in roots]
        confine = self._confinement(root_strs if exact else [*self._stored_roots(), *root_strs])
        found = self._admitted(walk(roots, ing, confine))
        retry = self.db.get_meta("parse_rules") != str(PARSE_RULES)
        scan = diff(found, self._known(), (lambda p: True) if exact else (lambda p: under(p, root_strs)),
                    reread=retry)
        if not force:
            self._spare_live_servers(scan.deleted)
        report = self._apply(scan, progress)
        with self.db.write() as conn:
            old = self._stored_roots()
            keep = [] if exact else [r for r in old if r not in root_strs]
            machines.set_roots(conn, self.machine.id, sorted(keep + [str(r) for r in roots if r.is_dir()]))
            if retry:
                set_meta(conn, "parse_rules", str(PARSE_RULES))
        report.seconds = time.perf_counter() - start
        return report

    def apply_changes(self, changed: set[Path], removed: set[Path]) -> IndexReport:
        """Apply one watcher batch: ``removed`` paths (files or folders) go, ``changed`` ones are re-scanned."""
        start = time.perf_counter()
        changed_s = {os.path.abspath(p) for p in changed}
        removed_s = {os.path.abspath(p) for p in removed} - changed_s
        found: dict[str, FileEntry] = {}
        ing = self.settings.ingest
        confine = self._confinement(self._stored_roots())
        for p in sorted(changed_s):
            path = Path(p)
            if not path.exists():
                removed_s.add(p)
                continue
            root = self._root_of(p)
            if path.is_dir():
                rules = self._rules(Path(root) if root else path)
                for f, reason in iter_files(path, rules, confine):
                    put_entry(found, entry_for(f, reason))
            elif root:
                reason = (confine.reason(path) if path.is_symlink() else None) or self._rules(Path(root)).reason(
                    path) or file_reason(path, self._rules(path.parent))
                put_entry(found, entry_for(path, reason))
            else:
                found.update(walk([path], ing, confine))
        scope = {store_path(p) for p in removed_s | changed_s}
        scan = diff(self._admitted(found), self._known(), lambda p: under(p, scope))
        report = self._apply(scan, None)
        report.seconds = time.perf_counter() - start
        return report

    def _spare_live_servers(self, deleted: list[KnownDoc]) -> None:
        """Refuse to delete documents under the folders of a server running on this store (``store.servers``)."""
        if not deleted:
            return
        for server in live_servers(self.db.store_dir):
            theirs = [d for d in deleted if under(d.path, server.folders)]
            if theirs:
                raise ConfigError(
                    f"a running server (pid {server.pid}) serves {', '.join(server.folders)}: this index would "
                    f"delete {len(theirs)} of its documents there (e.g. {theirs[0].path}). Pass --keep-others to "
                    f"keep them, or --force to delete them anyway")

    def remove_path(self, path: Path) -> int:
        """Remove the documents at or under ``path``; returns how many."""
        target = os.path.abspath(path)
        docs = [d for d in self._known().values() if under(d.path, [target])]
        for doc in docs:
            self._writer.delete(doc)
        self.synonyms.run()
        return len(docs)

    def take_over(self, name: str) -> int:
        """This machine takes machine ``name``'s documents, folders and roots (a new computer, a container whose
        machine id changed); where both have a document at a path, this machine's stays. Returns how many it took."""
        other = self._other_machine(name)
        with self.db.write() as conn:
            self._writer.delete_in(conn, machines.documents_of(conn, other, clashing_with=self.machine.id))
            taken = machines.hand_over(conn, other, self.machine.id)
        self.synonyms.run()
        return taken

    def forget(self, name: str) -> int:
        """Delete machine ``name``'s documents, folders and roots (a teammate's machine that is gone); returns how
        many documents went."""
        other = self._other_machine(name)
        with self.db.write() as conn:
            gone = machines.documents_of(conn, other)
            self._writer.delete_in(conn, gone)
            machines.forget(conn, other)
        self.synonyms.run()
        return len(gone)

    def _other_machine(self, name: str) -> str:
        found = machines.machine_named(self.db.conn, name)
        if found is None:
            raise ConfigError(f"no machine named {name!r} in this store; `pathweaver machines` lists them")
        if found == self.machine.id:
            raise ConfigError(f"{name!r} is this machine")
        return found

    def refresh(self) -> RefreshOut:
        """Re-derive the whole graph from stored chunks with current corpus statistics (``ingest.refresh``)."""
        self.last_refresh = self._refresher.run()
        return self.last_refresh

    # -- scan application ------------------------------------------------------------------------------------
    def _known(self) -> dict[str, KnownDoc]:
        return {r[1]: KnownDoc(*r) for r in ix.known_documents(self.db.conn, self.machine.id)}

    def set_folder(self, path: Path, state: str | None) -> None:
        """Record a folder in the store as 'watched', 'indexed' or 'removed' (None forgets it), for every process on
        the store; adding one again ('watched' or 'indexed') re-admits the removed folders at or under it."""
        key = store_path(os.path.abspath(path))
        with self.db.write(bump_version=False) as conn:
            if state in ("watched", "indexed"):
                w.readmit_folder(conn, self.machine.id, key)
            w.set_folder(conn, self.machine.id, key, state, time.time())

    def _admitted(self, found: dict[str, FileEntry]) -> dict[str, FileEntry]:
        """``found`` without the files under folders that ``remove_folder`` took out (their documents then go)."""
        removed = [p for p, state in folder_states(self.db.conn, self.machine.id).items() if state == "removed"]
        return {p: e for p, e in found.items() if not under(p, removed)} if removed else found

    def _rules(self, root: Path) -> IgnoreRules:
        return IgnoreRules.of(root, self.settings.ingest)

    def _confinement(self, roots: Sequence[str]) -> Confinement:
        return Confinement(roots, self.settings.ingest.follow_symlinks_outside)

    def _stored_roots(self) -> list[str]:
        return machines.stored_roots(self.db.conn, self.machine.id)

    def _root_of(self, path: str) -> str | None:
        roots = self._stored_roots()
        inside = [r for r in roots if under(path, [r])]
        return max(inside, key=len) if inside else None

    def _with_embedders(self, scan: ScanResult, known: dict[str, KnownDoc]) -> None:
        """Point embeds at the notes as they are after ``scan`` (``ingest.embeds``), and re-index the notes that
        embed a note the scan adds, changes, renames or removes: their chunks hold its text."""
        gone = {d.path for d in scan.deleted} | {d.path for d, _ in scan.renamed} | {e.path for e in scan.skipped}
        notes = {p for p, d in known.items() if d.status == "indexed"} - gone
        notes |= {e.path for e in scan.new + scan.changed} | {e.path for _, e in scan.renamed}
        index = self._preparer.notes = NoteIndex(notes, self.settings.ingest.max_file_bytes)
        moved = [e.path for e in scan.new + scan.changed] + [p for p in gone]
        keys = {k for p in moved for k in note_keys(p)}
        # a Logseq block id a note now gives may be what another note's {{embed ((uuid))}} waited for
        keys |= {uuid_key(u) for e in scan.new + scan.changed for u in index.ids_in(e.path)}
        keys = sorted(keys)
        work = {e.path for e in scan.new + scan.changed} | gone
        redo = [p for p in ix.embedders_of(self.db.conn, keys, self.machine.id) if p not in work]
        if redo:
            again = set(redo)
            scan.unchanged = [e for e in scan.unchanged if e.path not in again]
            scan.changed += [entry_for(Path(p), None) for p in redo]

    def _apply(self, scan: ScanResult, progress: ProgressFn | None) -> IndexReport:
        report = IndexReport(unchanged=len(scan.unchanged) + len(scan.touched))
        known = self._known()
        self._with_embedders(scan, known)
        n_work = len(scan.new) + len(scan.changed)
        n_indexed = sum(1 for d in known.values() if d.status == "indexed") - len(scan.deleted) + len(scan.new)
        first = n_work > 0 and self._count("chunks") == 0
        deferred = first or (n_work > 0 and n_work > self.settings.extract.auto_refresh_ratio * max(1, n_indexed))
        for doc in scan.deleted:  # a skipped file's row goes too, but it was never a document: not counted
            if self._alone(report, doc.path, self._writer.delete, doc) and doc.status == "indexed":
                report.deleted += 1
        for entry in scan.skipped:
            if self._alone(report, entry.path, self._writer.write_skipped, entry, known.get(entry.path)):
                report.note_skipped(entry.path, entry.reason)
        if scan.touched:
            with self.db.write() as conn:
                for doc, entry in scan.touched:
                    w.update_document_stat(conn, doc.id, entry.mtime, entry.size)
        stale = self._writer.rename_many(scan.renamed, deferred)
        report.renamed += len(scan.renamed) - len(stale)
        for doc, entry in stale:  # the content changed after the scan: a plain delete + add
            self._writer.delete(doc)
            report.deleted += 1
            scan.new.append(entry)
        work = in_batch_order(scan.new + scan.changed)
        new_paths = {e.path for e in scan.new}
        done = 0
        for batch in self._preparer.batches(work, report):
            self._preparer.embed_chunks(batch, report)
            with self._writer.batch_transaction(deferred) as conn:
                written: list[Prepared] = []
                for prep in batch:
                    if isinstance(prep, Prepared):
                        if self._alone(report, prep.entry.path, self._writer.write_file, prep, known.get(prep.entry.path),
                                       deferred, conn, batch=conn):
                            written.append(prep)
                            report.chunks += len(prep.rows)
                            if prep.entry.path in new_paths:
                                report.added += 1
                            else:
                                report.updated += 1
                    else:
                        entry, reason = prep
                        if self._alone(report, entry.path, self._writer.write_skipped,
                                       FileEntry(entry.path, reason, entry.mtime, entry.size), known.get(entry.path),
                                       conn, batch=conn):
                            report.note_skipped(entry.path, reason)
                    done += 1
                    if progress:
                        progress(done, len(work), prep.entry.path if isinstance(prep, Prepared) else prep[0].path)
                if conn is not None:  # the batch's gram_df increments, in one pass (``DocumentWriter.write_file``)
                    w.add_gram_df(conn, w.gram_counts(r for p in written for r in p.rows))
        if report.chunks and wants_postings(self.db.conn):  # past the in-memory postings: kept in the store
            with self.db.write() as conn:
                keep_postings(conn)
        if self._needs_refresh():
            self.refresh()
            report.refreshed = True
        else:
            self.synonyms.run()
        if first and report.chunks:
            self.db.vacuum("a first index")
        return report

    def _alone(self, report: IndexReport, path: str, step: Callable[..., Any], *args: Any,
               batch: Connection | None = None) -> bool:
        """Run one file's ``step`` so that its failure is its own: inside a batch transaction it runs in a savepoint,
        and an error is logged and reported for ``path`` instead of stopping the other files. False if it failed."""
        try:
            with w.savepoint(batch) if batch is not None else contextlib.nullcontext():
                step(*args)
            return True
        except Exception as exc:
            log.exception("indexing %s failed", path)
            report.note_error(path, f"error: {type(exc).__name__}: {exc}")
            return False

    def _needs_refresh(self) -> bool:
        if self.db.get_meta("refresh_pending", "0") == "1" or vector_settings_changed(self.db, self.params):
            return True
        if self._count("chunks") and self.db.get_meta("entity_settings", "names,statistical") != \
                self.params.entity_settings:  # stores from before the setting were names + statistical
            return True
        changed = int(self.db.get_meta("changed_chunks", "0") or 0)
        total = self._count("chunks")
        return changed > 0 and changed > self.settings.extract.auto_refresh_ratio * max(1, total)

    def _count(self, table: str) -> int:
        return ix.row_count(self.db.conn, table)
