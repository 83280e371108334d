"""Incremental indexing: files -> chunks -> vectors -> graph, one transaction per file (or per batch of whole files
in a bulk index).

Incremental rule for corpus statistics (ER, AGRAG §III-B Eq. 2-3, depends on |T_c| and df):
- ``gram_df`` and the chunk count are maintained exactly in every file's (or batch's) transaction.
- A small change (at most ``extract.auto_refresh_ratio`` of the documents) is extracted at once: each new chunk's
  entities are selected with the statistics *including* the new chunks; other chunks keep the selection they had.
- A large change (a first index, a big batch) is written as chunks only, with ``refresh_pending`` set in meta;
  the graph is then derived for the whole corpus by ``refresh()`` at the end of the call.
- ``refresh()`` re-selects every chunk's entities from its stored ``grams`` with current statistics, re-derives
  mentions, relations (and the synonyms of new entities, Eq. 5) and collects garbage in one transaction, without
  re-parsing or re-embedding chunks (entity and triple vectors come from ``embed_cache``). It runs on its own when
  ``refresh_pending`` is set (also after a crash) or when the chunks changed since the last refresh exceed
  ``auto_refresh_ratio`` of all chunks.
Hence any sequence of changes followed by ``refresh()`` ends in exactly the graph of a fresh index of the final
folder (which itself ends with the refresh computation).

Synonyms depend only on the entity set: each entity is paired with all others once, when its id first passes the
``synonym_watermark`` kept in meta (entity ids are never reused), in a pass at the end of each call.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pathweaver.config import ConfigError, Settings
from pathweaver.extract import ner
from pathweaver.extract.graph import (
    KIND_RANK,
    ChunkInput,
    DocGraph,
    ExtractParams,
    Structure,
    chunk_stats,
    derive_document,
    merge_kind,
    triple_text,
)
from pathweaver.extract.synonyms import on_our_pool, synonym_pairs_for
from pathweaver.ingest.chunker import chunk_text
from pathweaver.ingest.confine import Confinement
from pathweaver.ingest.ignore import TEXT_SUFFIXES, IgnoreRules, iter_files, looks_binary
from pathweaver.ingest.linking import NO_NAMES, LinkerCache, apply_names, names_of, names_to_prepare, relink
from pathweaver.ingest.parsers import ParsedDocument, ParseError, parse_file
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
from pathweaver.ingest.spans import file_spans, locator
from pathweaver.models.packing import RECIPE
from pathweaver.numeric.vectors import LayeredVectors, VectorTable, compose_phrases, phrase_words
from pathweaver.store import indexing as ix
from pathweaver.store import writes as w
from pathweaver.store.cache import cache_for
from pathweaver.store.db import Connection, Database
from pathweaver.store.reads import (
    EntityRows,
    entity_ids_of,
    entity_rows,
    folder_states,
    gram_df,
    indexed_paths,
    vocabulary,
)

log = logging.getLogger(__name__)
ProgressFn = Callable[[int, int, str], None]
# Chunks parsed ahead and embedded in one call (and, in a bulk index, written in one transaction): a call packs its
# texts into rows of its own, and larger calls pack fuller rows (docs/benchmarks.md).
BATCH_CHUNKS = 1024
PAIR_WHILE_WRITING_OVER = 20_000  # entities from which a refresh pairs synonyms while another thread writes rows


def cache_space(precision: str) -> str:
    """The ``embed_cache`` key space of graph-text vectors made at ``precision`` by the current recipe
    (``packing.RECIPE``), apart from chunk vectors (key space ""), so that a vector made another way never serves."""
    return RECIPE if precision == "float32" else f"{RECIPE}-{precision}"


def read_capped(path: Path, limit: int) -> bytes:
    """The file's bytes, at most ``limit + 1`` (one more than allowed shows that it is too large). Reads its stat
    size plus one byte, then on only if it grew meanwhile: ``read(limit + 1)`` would allocate the whole limit
    (20 MB) for every small file first."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(min(size, limit) + 1)
        if size < len(data) <= limit:  # it grew after the stat
            data += f.read(limit + 1 - len(data))
    return data


def delete_documents(conn: Connection, doc_ids: Sequence[int], ensure: Callable[[Mapping[str, str]], object] | None = None,
                     linker: LinkerCache | None = None) -> None:
    """Delete documents with their chunks and the graph only they supported (inside the caller's transaction)."""
    if doc_ids:  # their names go first: what only they named is re-linked where it occurred
        apply_names(conn, {d: NO_NAMES for d in doc_ids}, [], ensure or (lambda kinds: None), linker or LinkerCache())
    ents: set[int] = set()
    rels: set[int] = set()
    for doc_id in doc_ids:
        e, r = w.chunk_dependents(conn, doc_id)
        ents |= e
        rels |= r
        w.add_meta_int(conn, "changed_chunks", w.delete_document(conn, doc_id))
    w.collect_garbage(conn, ents, rels)


def prune_missing(db: Database) -> list[str]:
    """Delete the indexed documents whose file is gone (one stat each), so a file deleted while no process watched
    is never served; returns their paths. Documents under an indexed root that is itself missing (an unmounted
    drive) stay, as the folder scan keeps them."""
    roots = json.loads(db.get_meta("roots", "[]") or "[]")
    absent = [r for r in roots if not os.path.isdir(r)]
    gone: list[tuple[int, str]] = []
    for doc_id, path in indexed_paths(db.conn):
        try:
            os.stat(path)
        except FileNotFoundError:
            if not under(path, absent):
                gone.append((doc_id, path))
        except OSError:
            continue  # there but unreadable now: the next scan gives it its reason
    if gone:
        with db.write() as conn:
            delete_documents(conn, [doc_id for doc_id, _ in gone])
    return [path for _, path in gone]


class EmbedderLike(Protocol):
    model_name: str

    @property
    def dim(self) -> int: ...

    def encode(self, texts: list[str], batch_size: int | None = None, precision: str = "float32",
               invariant: bool = False) -> np.ndarray: ...

    def batch_invariant(self, precision: str = "float32") -> bool: ...

    def tokenize(self, text: str) -> list[tuple[int, int]]: ...


@dataclass
class IndexReport:
    """What one ``index_paths``/``apply_changes`` call did."""

    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    skipped: int = 0
    renamed: int = 0
    chunks: int = 0  # chunks written
    embedded: int = 0  # chunk texts that needed the model (the rest came from embed_cache)
    seconds: float = 0.0
    refreshed: bool = False
    errors: list[dict[str, str]] = field(default_factory=list)
    skipped_files: list[dict[str, str]] = field(default_factory=list)  # {path, reason} of each file skipped now

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def note_skipped(self, path: str, reason: str | None) -> None:
        self.skipped += 1
        self.skipped_files.append({"path": path, "reason": reason or "unknown"})

    def note_error(self, path: str, error: str) -> None:
        """A file that failed: it counts as skipped, with the error as its reason."""
        self.errors.append({"path": path, "error": error})
        self.note_skipped(path, error)


@dataclass
class _Prepared:
    entry: FileEntry
    content_hash: str
    doc: ParsedDocument
    rows: list[w.ChunkRow]
    vecs: np.ndarray | None = None


class Indexer:
    """Keeps a store in step with folders; see the module docstring for the incremental rule."""

    def __init__(self, db: Database, settings: Settings, embedder: EmbedderLike) -> None:
        self.db = db
        self.settings = settings
        self.embedder = embedder
        params = ExtractParams.from_settings(settings.extract)
        params.validate()
        if params.uses_ner:  # a missing spaCy or pipeline is named before anything is written
            ner.check_available(params.ner_model)
        if not 0.0 <= settings.extract.auto_refresh_ratio <= 1.0:
            raise ConfigError(f"extract.auto_refresh_ratio must be in [0, 1], got {settings.extract.auto_refresh_ratio}")
        model = getattr(embedder, "model_name", settings.models.embedding_model)
        db.ensure_embedding(model, int(embedder.dim))  # a store of another model is named before the model is probed
        self.params = params.resolved(embedder.batch_invariant)  # "auto" decided here, as the store records it
        if not embedder.batch_invariant(self.params.precision):
            log.warning("vectors at %s depend on their batch on this machine: an incremental index equals a fresh "
                        "one only to rounding (docs/design-notes.md, \"Batch-invariant vectors\")",
                        self.params.precision)
        self.last_refresh: dict[str, Any] | None = None  # the result of the latest refresh()
        self._entities: EntityRows | None = None  # every entity and its vector, as of the last synonym pass
        self._linker = LinkerCache()  # the name automaton of the latest vocabulary
        if self._count("entities") == 0 and db.get_meta("vector_settings") != self.params.vector_settings:
            with db.write(bump_version=False) as conn:  # nothing to re-make yet: record the modes entities get
                w.set_meta(conn, "vector_settings", self.params.vector_settings)
        if self._count("chunks") == 0 and db.get_meta("entity_settings") != self.params.entity_settings:
            with db.write(bump_version=False) as conn:
                w.set_meta(conn, "entity_settings", self.params.entity_settings)

    # -- public API ------------------------------------------------------------------------------------------
    def index_paths(self, paths: list[Path], exact: bool = True, progress: ProgressFn | None = None) -> IndexReport:
        """Index files and folders; with ``exact`` documents not under any of ``paths`` are removed."""
        start = time.perf_counter()
        roots = [Path(os.path.abspath(p)) for p in paths]
        missing = [str(p) for p in roots if not p.exists() and not p.is_symlink()]
        if missing:
            raise ConfigError(f"no such file or folder: {', '.join(missing)}")
        ing = self.settings.ingest
        root_strs = [str(r) for r in roots]
        confine = self._confinement(root_strs if exact else [*self._stored_roots(), *root_strs])
        found = self._admitted(walk(roots, list(ing.ignore), ing.max_file_bytes, confine))
        scan = diff(found, self._known(), (lambda p: True) if exact else (lambda p: under(p, root_strs)))
        report = self._apply(scan, progress)
        with self.db.write() as conn:
            old = self._stored_roots()
            keep = [] if exact else [r for r in old if r not in root_strs]
            w.set_meta(conn, "roots", json.dumps(sorted(keep + [str(r) for r in roots if r.is_dir()])))
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
                rules = IgnoreRules(Path(root) if root else path, list(ing.ignore), ing.max_file_bytes)
                for f, reason in iter_files(path, rules, confine):
                    put_entry(found, entry_for(f, reason))
            elif root:
                rules = IgnoreRules(Path(root), list(ing.ignore), ing.max_file_bytes)
                reason = (confine.reason(path) if path.is_symlink() else None) or rules.reason(path) or file_reason(
                    path, list(ing.ignore), ing.max_file_bytes)
                put_entry(found, entry_for(path, reason))
            else:
                found.update(walk([path], list(ing.ignore), ing.max_file_bytes, confine))
        scope = {store_path(p) for p in removed_s | changed_s}
        scan = diff(self._admitted(found), self._known(), lambda p: under(p, scope))
        report = self._apply(scan, None)
        report.seconds = time.perf_counter() - start
        return report

    def remove_path(self, path: Path) -> int:
        """Remove the documents at or under ``path``; returns how many."""
        target = os.path.abspath(path)
        docs = [d for d in self._known().values() if under(d.path, [target])]
        for doc in docs:
            self._delete(doc)
        self._synonym_pass()
        return len(docs)

    def refresh(self) -> dict[str, Any]:
        """Re-derive the whole graph from stored chunks with current corpus statistics (see module docstring)."""
        start = time.perf_counter()
        for _ in range(3):
            version = self.db.version()
            plan = self._derive_all()
            vectors = self._graph_vectors(plan["kinds"], [(r[0], r[2], r[1]) for r in plan["relations"]])
            with self.db.write() as conn:
                if self.db.version() != version:  # read inside this write transaction
                    continue  # another writer moved the store under us; derive again
                before = w.clear_derived(conn)
                if self._vector_settings_changed():  # drop every entity and relation: all get the new vectors
                    w.collect_garbage(conn, keep_named=False)
                entities = w.plan_entities(conn, plan["kinds"])
                names = sorted(entities.ids, key=entities.ids.__getitem__)
                id_arr = np.array([entities.ids[n] for n in names], dtype=np.int64)
                vec_arr = vectors.rows(names) if names else np.zeros((0, int(self.embedder.dim)), np.float32)
                mark = self._watermark(conn)
                removed, pairs = self._write_plan_and_pair(conn, plan, entities, mark, id_arr, vec_arr)
                relink(conn, None, self._linker.get(plan["names"]))
                w.settle_descriptions(conn, before)
                self._store_pairs(conn, pairs, mark, id_arr)  # after the entities they refer to
                synonyms = len(pairs)
                w.set_meta(conn, "vector_settings", self.params.vector_settings)
                w.set_meta(conn, "entity_settings", self.params.entity_settings)
                self._entities = EntityRows(id_arr, names, vec_arr) if names else None
                w.set_meta(conn, "changed_chunks", "0")
                w.set_meta(conn, "refresh_pending", "0")
                w.set_meta(conn, "last_refresh", str(time.time()))
                counts = {t: ix.row_count(conn, t)
                          for t in ("entities", "relations", "mentions", "synonyms", "name_mentions")}
            self.last_refresh = {**counts, "removed_entities": removed["entities"],
                                 "removed_relations": removed["relations"], "new_synonyms": synonyms,
                                 "seconds": time.perf_counter() - start}
            return self.last_refresh
        raise RuntimeError("refresh: the store kept changing during the refresh; retry when indexing is idle")

    # -- scan application ------------------------------------------------------------------------------------
    def _known(self) -> dict[str, KnownDoc]:
        return {r[1]: KnownDoc(*r) for r in ix.known_documents(self.db.conn)}

    def set_folder(self, path: Path, state: str | None) -> None:
        """Record a folder in the store as 'watched', 'indexed' or 'removed' (None forgets it), for every process on
        the store; adding one again ('watched' or 'indexed') re-admits the removed folders at or under it."""
        key = store_path(os.path.abspath(path))
        with self.db.write(bump_version=False) as conn:
            if state in ("watched", "indexed"):
                w.readmit_folder(conn, key)
            w.set_folder(conn, key, state, time.time())

    def _admitted(self, found: dict[str, FileEntry]) -> dict[str, FileEntry]:
        """``found`` without the files under folders that ``remove_folder`` took out (their documents then go)."""
        removed = [p for p, state in folder_states(self.db.conn).items() if state == "removed"]
        return {p: e for p, e in found.items() if not under(p, removed)} if removed else found

    def _confinement(self, roots: Sequence[str]) -> Confinement:
        return Confinement(roots, self.settings.ingest.follow_symlinks_outside)

    def _stored_roots(self) -> list[str]:
        return list(json.loads(self.db.get_meta("roots", "[]") or "[]"))

    def _root_of(self, path: str) -> str | None:
        roots = self._stored_roots()
        inside = [r for r in roots if under(path, [r])]
        return max(inside, key=len) if inside else None

    def _apply(self, scan: ScanResult, progress: ProgressFn | None) -> IndexReport:
        report = IndexReport(unchanged=len(scan.unchanged) + len(scan.touched))
        known = self._known()
        n_work = len(scan.new) + len(scan.changed)
        n_indexed = sum(1 for d in known.values() if d.status == "indexed") - len(scan.deleted) + len(scan.new)
        first = n_work > 0 and self._count("chunks") == 0
        deferred = first or (n_work > 0 and n_work > self.settings.extract.auto_refresh_ratio * max(1, n_indexed))
        for doc in scan.deleted:
            if self._alone(report, doc.path, self._delete, doc):
                report.deleted += 1
        for entry in scan.skipped:
            if self._alone(report, entry.path, self._write_skipped, entry, known.get(entry.path)):
                report.note_skipped(entry.path, entry.reason)
        if scan.touched:
            with self.db.write() as conn:
                for doc, entry in scan.touched:
                    w.update_document_stat(conn, doc.id, entry.mtime, entry.size)
        for doc, entry in scan.renamed:
            if self._rename(doc, entry, deferred):
                report.renamed += 1
            else:  # the content changed after the scan: a plain delete + add
                self._delete(doc)
                report.deleted += 1
                scan.new.append(entry)
        work = scan.new + scan.changed
        new_paths = {e.path for e in scan.new}
        done = 0
        for batch in self._batches(work, report):
            self._embed_chunks(batch, report)
            with self._batch_transaction(deferred) as conn:
                written: list[_Prepared] = []
                for prep in batch:
                    if isinstance(prep, _Prepared):
                        if self._alone(report, prep.entry.path, self._write_file, prep, known.get(prep.entry.path),
                                       deferred, conn, batch=conn):
                            written.append(prep)
                            report.chunks += len(prep.rows)
                            if prep.entry.path in new_paths:
                                report.added += 1
                            else:
                                report.updated += 1
                    else:
                        entry, reason = prep
                        if self._alone(report, entry.path, self._write_skipped,
                                       FileEntry(entry.path, reason, entry.mtime, entry.size), known.get(entry.path),
                                       conn, batch=conn):
                            report.note_skipped(entry.path, reason)
                    done += 1
                    if progress:
                        progress(done, len(work), prep.entry.path if isinstance(prep, _Prepared) else prep[0].path)
                if conn is not None:  # the batch's gram_df increments, in one pass (``_write_file``)
                    w.add_gram_df(conn, w.gram_counts(r for p in written for r in p.rows))
        if self._needs_refresh():
            self.refresh()
            report.refreshed = True
        else:
            self._synonym_pass()
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
        if self.db.get_meta("refresh_pending", "0") == "1" or self._vector_settings_changed():
            return True
        if self._count("chunks") and self.db.get_meta("entity_settings", "names,statistical") != \
                self.params.entity_settings:  # stores from before the setting were names + statistical
            return True
        changed = int(self.db.get_meta("changed_chunks", "0") or 0)
        total = self._count("chunks")
        return changed > 0 and changed > self.settings.extract.auto_refresh_ratio * max(1, total)

    def _vector_settings_changed(self) -> bool:
        """Whether the store's entity and relation vectors and synonyms were made under other ``extract.*_vectors``
        modes or another ``synonym_phi`` (a store from before these were recorded had encoded names, phi 0.9)."""
        stored = self.db.get_meta("vector_settings", "entities:encoded,triples:composed,phi:0.9")
        return stored != self.params.vector_settings and self._count("entities") > 0

    def _count(self, table: str) -> int:
        return ix.row_count(self.db.conn, table)

    # -- reading and parsing ---------------------------------------------------------------------------------
    def _batches(self, work: list[FileEntry], report: IndexReport) -> Any:
        """Yield lists of prepared files (or (entry, reason) failures) holding about BATCH_CHUNKS chunks."""
        batch: list[_Prepared | tuple[FileEntry, str]] = []
        n = 0
        for entry in work:
            try:
                prep: _Prepared | tuple[FileEntry, str] = self._prepare(entry)
            except Exception as exc:  # a parser bug must not stop the whole run; the file is reported
                prep = (entry, f"error: {type(exc).__name__}: {exc}")
                report.errors.append({"path": entry.path, "error": prep[1]})
            batch.append(prep)
            n += len(prep.rows) if isinstance(prep, _Prepared) else 0
            if n >= BATCH_CHUNKS:
                yield batch
                batch, n = [], 0
        if batch:
            yield batch

    def _prepare(self, entry: FileEntry) -> _Prepared | tuple[FileEntry, str]:
        path = Path(entry.path)
        try:
            data = read_capped(path, self.settings.ingest.max_file_bytes)
        except FileNotFoundError:
            return entry, "vanished before it could be read"
        except PermissionError:
            return entry, "unreadable: permission denied"
        except OSError as exc:
            return entry, f"unreadable: {exc.strerror or exc}"
        if len(data) > self.settings.ingest.max_file_bytes:
            return entry, f"too large (> {self.settings.ingest.max_file_bytes} bytes)"
        if path.suffix.lower() in TEXT_SUFFIXES and looks_binary(data):
            return entry, "binary content"
        try:
            doc = parse_file(path, data)
        except ParseError as exc:
            return entry, str(exc)
        ing = self.settings.ingest
        chunks = chunk_text(doc.text, self.embedder.tokenize(doc.text), ing.chunk_tokens, ing.chunk_overlap,
                            doc.headings)
        if not chunks:
            return entry, "empty document"
        rows = []
        in_file = file_spans(doc.text, doc.source, [(c.start, c.end) for c in chunks]) if doc.source is not None else []
        for i, c in enumerate(chunks):
            grams, n_words = chunk_stats(c.text, self.params.ngram_max)
            file_start, file_end = in_file[i] if in_file else (None, None)
            rows.append(w.ChunkRow(c.ord, c.start, c.end, c.n_tokens, c.text, c.heading, grams, n_words,
                                   file_start, file_end, locator(doc.units, c.start, c.end)))
        return _Prepared(entry, hashlib.sha1(data).hexdigest(), doc, rows)

    def _embed_chunks(self, batch: Sequence[_Prepared | tuple[FileEntry, str]], report: IndexReport) -> None:
        """Vectors for every chunk of the batch, in one model call for the texts not in ``embed_cache``."""
        preps = [p for p in batch if isinstance(p, _Prepared)]
        texts = [r.text for p in preps for r in p.rows]
        cached = w.cache_get(self.db.conn, texts)
        missing = sorted({t for t in texts if t not in cached})
        if missing:
            vecs = self.embedder.encode(missing, batch_size=self.settings.ingest.batch_size)
            fresh = dict(zip(missing, vecs, strict=True))
            with self.db.write(bump_version=False) as conn:  # the cache is not graph state
                w.cache_put(conn, fresh)
            cached.update(fresh)
            report.embedded += len(missing)
        for p in preps:
            p.vecs = np.stack([cached[r.text] for r in p.rows]) if p.rows else None

    def _with_ner(self, chunks: Sequence[ChunkInput]) -> list[ChunkInput]:
        """``chunks`` with their entity spans of ``extract.ner_labels`` (``extract.entities`` with "ner"), from
        ``ner_cache`` or the spaCy pipeline (whose output is then cached)."""
        if not self.params.uses_ner or not chunks:
            return list(chunks)
        space = f"ner:{self.params.ner_model}"
        texts = list(dict.fromkeys(c.text for c in chunks))
        spans = w.ner_cache_get(self.db.conn, texts, space)
        missing = [t for t in texts if t not in spans]
        if missing:
            fresh = dict(zip(missing, ner.entity_spans(missing, self.params.ner_model), strict=True))
            with self.db.write(bump_version=False) as conn:  # the cache is not graph state
                w.ner_cache_put(conn, fresh, space)
            spans.update(fresh)
        labels = set(self.params.ner_labels)
        return [replace(c, ner=tuple(text for label, text in spans[c.text] if label in labels)) for c in chunks]

    def _doc_graph_vectors(self, graph: DocGraph) -> VectorTable:
        return self._graph_vectors(graph.kinds, [(r.src, r.label, r.dst) for r in graph.relations])

    def _graph_vectors(self, names: Iterable[str], triples: Sequence[tuple[str, str, str]]) -> VectorTable:
        """Vectors keyed by text for entity names (``extract.entity_vectors`` decides how; see
        ``numeric/vectors.py``), with what a snapshot makes the triples' vectors from cached (``store.graphvecs``):
        the labels' words or labels (``extract.triple_vectors`` = "composed"), else the triple texts. No triple's
        vector is made here: only a snapshot reads them."""
        names = list(names)
        labels = [label for _, label, _ in triples] if self.params.triple_vectors == "composed" else []
        if self.params.entity_vectors == "composed":
            # one model call for the names' and labels' words, as when the triples were composed here too
            words = self._vectors([w for p in names + labels for w in phrase_words(p)])
            base = compose_phrases(names, words)  # a phrase's bits do not depend on its company
        else:
            base = self._vectors(names + labels)
        if self.params.triple_vectors != "composed":
            self._vectors([triple_text(*t) for t in triples])
        return base

    def _vectors(self, texts: list[str]) -> VectorTable:
        """Model vectors of short texts (words, names, triples) at ``extract.graph_vector_precision``: from
        ``embed_cache``, else embedded and cached."""
        unique = list(dict.fromkeys(texts))
        space = cache_space(self.params.precision)
        cached = VectorTable.of(w.cache_get(self.db.conn, unique, space))
        missing = [t for t in unique if t not in cached]
        if not missing:
            return cached
        vecs = self.embedder.encode(missing, batch_size=self.settings.ingest.batch_size,
                                    precision=self.params.precision, invariant=True)
        fresh = VectorTable({t: i for i, t in enumerate(missing)}, vecs)
        with self.db.write(bump_version=False) as conn:  # the cache is not graph state
            w.cache_put(conn, fresh, space)
        if not len(cached):
            return fresh
        return VectorTable.of(LayeredVectors(fresh, cached))

    # -- per-file writes -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _batch_transaction(self, bulk: bool) -> Iterator[Connection | None]:
        """One transaction for a whole batch of files when ``bulk`` (a deferred index writes chunks only, and a
        commit per file would dirty the same gram_df pages again and again), else None: each file then commits
        on its own (its graph is derived from the statistics the file before it committed). No file ever spans two transactions, so a crash leaves each file fully old or fully new."""
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

    def _write_skipped(self, entry: FileEntry, known: KnownDoc | None, batch: Connection | None = None) -> None:
        with self._writing(batch) as conn:
            ents, rels = w.chunk_dependents(conn, known.id) if known else (set(), set())
            doc_id = w.upsert_document(conn, entry.path, title=Path(entry.path).name, mtime=entry.mtime,
                                       size=entry.size, status="skipped", reason=entry.reason or "unknown",
                                       indexed_at=time.time())
            apply_names(conn, {doc_id: NO_NAMES}, [], self._no_new_names, self._linker)
            removed = w.delete_document_chunks(conn, doc_id)
            w.add_meta_int(conn, "changed_chunks", removed)
            w.collect_garbage(conn, ents, rels)

    def _delete(self, doc: KnownDoc) -> None:
        with self.db.write() as conn:
            delete_documents(conn, [doc.id], self._no_new_names, self._linker)

    def _name_entities(self, names: Iterable[str]) -> Callable[[Mapping[str, str]], None]:
        """What ``apply_names`` calls to make entity rows for a document's names new to the store, inside the
        caller's transaction (a stronger kind replaces a weaker one). The words their vectors are made of are cached
        now, before that transaction: a word new to the embedding cache is written in a transaction of its own."""
        self._graph_vectors(list(names), [])

        def ensure(kinds: Mapping[str, str]) -> None:
            if kinds:
                w.ensure_entities(self.db.conn, dict(kinds), KIND_RANK)

        return ensure

    def _no_new_names(self, kinds: Mapping[str, str]) -> None:
        """What a removal may add: only a heading it un-shares, whose entity its own document's graph already
        holds; no vector is made (``apply_names`` marks a refresh for one whose entity is missing)."""
        have = entity_ids_of(self.db.conn, kinds)
        if have:
            w.ensure_entities(self.db.conn, {n: kinds[n] for n in have}, KIND_RANK)

    def _write_file(self, prep: _Prepared, known: KnownDoc | None, deferred: bool,
                    batch: Connection | None = None) -> None:
        graph = None if deferred else self._file_graph(prep, known)
        doc = prep.doc
        names = names_of(doc.title, doc.aliases, doc.headings, doc.link_texts)
        ensure = self._no_new_names if deferred else self._name_entities(
            names_to_prepare(self.db.conn, known.id if known else None, names))
        with self._writing(batch) as conn:
            ents, rels = w.chunk_dependents(conn, known.id) if known else (set(), set())
            doc_id = w.upsert_document(
                conn, prep.entry.path, title=doc.title, content_hash=prep.content_hash, mtime=prep.entry.mtime,
                size=prep.entry.size, status="indexed", reason="", indexed_at=time.time(), headings=doc.headings,
                links=doc.links,
            )
            removed = w.delete_document_chunks(conn, doc_id)
            # in a batch transaction (no graph derived in it) the batch adds every file's gram_df at its end
            ids = w.insert_chunks(conn, doc_id, doc.title, prep.rows, prep.vecs, count_grams=batch is None)
            if graph is None:
                w.set_doc_names(conn, doc_id, names.names, names.links)  # the refresh that is due links every chunk
                w.set_meta(conn, "refresh_pending", "1")
            else:
                self._write_graph(conn, graph, dict(enumerate(ids)))
                apply_names(conn, {doc_id: names}, ids, ensure, self._linker)
            w.add_meta_int(conn, "changed_chunks", removed + len(ids))
            w.collect_garbage(conn, ents, rels)

    def _file_graph(self, prep: _Prepared, known: KnownDoc | None) -> DocGraph:
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
        n_chunks = self._count("chunks") - n_old + len(prep.rows)
        chunks = self._with_ner([ChunkInput(i, r.start, r.end, r.text, r.grams, r.n_words)
                                 for i, r in enumerate(prep.rows)])
        structure = Structure(prep.doc.title, prep.doc.headings, prep.doc.links)
        graph = derive_document(chunks, structure, n_chunks, df, self.params)
        self._doc_graph_vectors(graph)
        return graph

    @staticmethod
    def _write_graph(conn: Connection, graph: DocGraph, chunk_ids: dict[int, int]) -> None:
        ids = w.ensure_entities(conn, graph.kinds, KIND_RANK)
        w.insert_mentions(conn, [(ids[n], chunk_ids[k], c, s) for (n, k), (c, s) in graph.mentions.items()])
        keys = [(ids[r.src], ids[r.dst], r.label) for r in graph.relations]
        w.ensure_relations(conn, [(k, r.kind, r.sentence) for k, r in zip(keys, graph.relations, strict=True)],
                           [(k, chunk_ids[r.chunk], r.start, r.end) for k, r in zip(keys, graph.relations, strict=True)])

    def _rename(self, doc: KnownDoc, entry: FileEntry, deferred: bool) -> bool:
        """Move ``doc`` to ``entry.path`` without re-embedding; False if the content changed meanwhile."""
        try:
            with open(entry.path, "rb") as f:
                data = f.read()
            parsed = parse_file(Path(entry.path), data)
        except (OSError, ParseError):
            return False
        if hashlib.sha1(data).hexdigest() != doc.content_hash:
            return False
        same = ix.document_structure(self.db.conn, doc.id) == (
            parsed.title, [list(h) for h in parsed.headings], list(parsed.links))
        graph, keys = None, {}
        if not same and not deferred:
            chunks = self._with_ner(self._stored_chunks(doc.id))
            n_chunks = self._count("chunks")
            df = gram_df(self.db.conn, sorted({g for c in chunks for g in c.grams}))
            graph = derive_document(chunks, Structure(parsed.title, parsed.headings, parsed.links), n_chunks, df,
                                    self.params)
            keys = {c.key: c.key for c in chunks}
            self._doc_graph_vectors(graph)  # caches what the snapshot makes their vectors from
        names = names_of(parsed.title, parsed.aliases, parsed.headings, parsed.link_texts)
        ensure = None if deferred else self._name_entities(names_to_prepare(self.db.conn, doc.id, names))
        with self.db.write() as conn:
            w.rename_document(conn, doc.id, entry.path, entry.mtime, entry.size, parsed.title, parsed.headings,
                              parsed.links)
            if ensure is None:
                w.set_doc_names(conn, doc.id, names.names, names.links)
            else:
                apply_names(conn, {doc.id: names}, [], ensure, self._linker)
            if not same:
                ents, rels = w.chunk_dependents(conn, doc.id)
                w.clear_chunk_derived(conn, list(keys) or ix.document_chunk_ids(conn, doc.id))
                if graph is None:
                    w.set_meta(conn, "refresh_pending", "1")
                else:
                    self._write_graph(conn, graph, keys)
                w.collect_garbage(conn, ents, rels)
        return True

    # -- refresh ---------------------------------------------------------------------------------------------
    def _stored_chunks(self, doc_id: int) -> list[ChunkInput]:
        return [ChunkInput(*row) for _, row in ix.stored_chunks(self.db.conn, doc_id)]

    def _derive_all(self) -> dict[str, Any]:
        """The graph every stored chunk supports under current statistics: kinds, mentions, relations."""
        conn = self.db.conn
        n_chunks = self._count("chunks")
        df = ix.all_gram_df(conn)
        docs = ix.indexed_structures(conn)
        by_doc: dict[int, list[ChunkInput]] = {}
        rows = ix.stored_chunks(conn)
        stored = self._with_ner([ChunkInput(*row) for _, row in rows])
        for (doc_id, _), chunk in zip(rows, stored, strict=True):
            by_doc.setdefault(doc_id, []).append(chunk)
        kinds: dict[str, str] = {}
        mentions: dict[tuple[str, int], tuple[int, float]] = {}
        relations: dict[tuple[str, str, str], tuple[str, str]] = {}  # key -> (kind, description)
        sources: list[tuple[tuple[str, str, str], int, int, int, str]] = []
        for doc_id, title, headings, links in docs:
            structure = Structure(title, [tuple(h) for h in json.loads(headings)], json.loads(links))
            g = derive_document(by_doc.get(doc_id, []), structure, n_chunks, df, self.params)
            for name, kind in g.kinds.items():
                kinds[name] = merge_kind(kinds.get(name), kind)
            for key, (count, score) in g.mentions.items():
                c0, s0 = mentions.get(key, (0, 0.0))
                mentions[key] = (max(c0, count), max(s0, score))
            for r in g.relations:
                relations.setdefault((r.src, r.dst, r.label), (r.kind, r.sentence))
                sources.append(((r.src, r.dst, r.label), r.chunk, r.start, r.end, r.sentence))
        names = vocabulary(conn, KIND_RANK)
        for name, kind in names.items():
            kinds[name] = merge_kind(kinds.get(name), kind)
        return {"kinds": kinds, "mentions": mentions, "relations": relations, "sources": sources, "names": names}

    def _write_plan_and_pair(self, conn: Connection, plan: dict[str, Any], entities: w.EntityPlan, mark: int,
                             ids: np.ndarray, vecs: np.ndarray
                             ) -> tuple[dict[str, int], list[tuple[int, int, float]]]:
        """Write ``plan``'s rows and pair the synonyms of its entities; returns what the garbage collection
        removed, and the pairs (not yet stored).

        For a large refresh whose synonym tiles run on our pool (``synonyms.on_our_pool``), the rows are written
        on a thread of their own meanwhile: SQLite has one core, one tile worker the other, and the second worker
        joins when the rows are in (``wide_after``). The search never touches the connection; the writing thread
        is the only one using it until it is done. Tiles on torch's own two threads (the fallback) would only
        slow the writing down, so those two steps then run one after the other."""
        if len(ids) < PAIR_WHILE_WRITING_OVER or not on_our_pool():
            removed = self._apply_plan(conn, plan, entities)
            return removed, self._pairs_since(mark, ids, vecs)
        written = threading.Event()
        with ThreadPoolExecutor(1, thread_name_prefix="pathweaver-refresh") as pool:
            writing = pool.submit(self._apply_plan, conn, plan, entities)
            writing.add_done_callback(lambda _: written.set())
            pairs = self._pairs_since(mark, ids, vecs, written)
            return writing.result(), pairs

    @staticmethod
    def _apply_plan(conn: Connection, plan: dict[str, Any], entities: w.EntityPlan) -> dict[str, int]:
        """Write ``plan`` (mentions and relation sources already cleared) with the entity ids of ``entities``;
        returns what the garbage collection then removed."""
        ids = entities.ids
        w.insert_entities(conn, plan["kinds"], KIND_RANK, entities)
        w.set_entity_kinds(conn, {ids[n]: k for n, k in plan["kinds"].items()})
        w.insert_mentions(conn, [(ids[n], cid, c, s) for (n, cid), (c, s) in plan["mentions"].items()])
        rows = [((ids[src], ids[dst], label), kind, description)
                for (src, dst, label), (kind, description) in plan["relations"].items()]
        w.ensure_relations(conn, rows, [((ids[key[0]], ids[key[1]], key[2]), cid, start, end)
                                        for key, cid, start, end, _ in plan["sources"]])
        return w.collect_garbage(conn)

    # -- synonyms --------------------------------------------------------------------------------------------
    def _synonym_pass(self) -> int:
        mark = int(self.db.get_meta("synonym_watermark", "0") or 0)
        top = ix.max_entity_id(self.db.conn)
        if top is None or top <= mark:
            return 0
        with self.db.write(bump_version=False) as conn:
            pairs = self._synonyms_in(conn)
            if not pairs:
                return 0  # only the watermark moved: nothing a reader sees, so no new store version
            after = self.db.bump_version(conn)
        # the new version is the one before plus these rows: a reader of this process holding that one carries
        # it forward instead of reading the whole graph again (store.cache)
        cache_for(str(self.db.path.resolve())).patch(after - 1, after, lambda snap: snap.with_synonyms(after, pairs))
        return len(pairs)

    def _synonyms_in(self, conn: Connection) -> list[tuple[int, int, float]]:
        """Pair entities newer than the watermark with all entities (cos > phi, AGRAG Eq. 5) and store the pairs
        (which it returns)."""
        mark = self._watermark(conn)
        # the entities as of the last pass (or a reader's snapshot in this process) give every vector that did not
        # change, so a watcher batch reads only its new entities' rows
        previous = self._entities or EntityRows.of(cache_for(str(self.db.path.resolve())).latest())
        self._entities = entity_rows(conn, int(self.db.get_meta("embedding_dim", "0") or 0), previous)
        pairs = self._pairs_since(mark, self._entities.ids, self._entities.vecs)
        self._store_pairs(conn, pairs, mark, self._entities.ids)
        return pairs

    @staticmethod
    def _watermark(conn: Connection) -> int:
        return ix.meta_int(conn, "synonym_watermark")

    def _pairs_since(self, mark: int, ids: np.ndarray, vecs: np.ndarray, wide_after: threading.Event | None = None
                     ) -> list[tuple[int, int, float]]:
        """Synonym pairs (Eq. 5) of the entities with ids above ``mark`` among all of ``ids``/``vecs``."""
        new = ids > mark
        if not new.any():
            return []
        return synonym_pairs_for(ids[new], vecs[new], ids, vecs, self.params.synonym_phi, wide_after=wide_after)

    @staticmethod
    def _store_pairs(conn: Connection, pairs: list[tuple[int, int, float]], mark: int, ids: np.ndarray) -> None:
        """Insert the pairs and move the watermark past every entity in ``ids``."""
        w.insert_synonyms(conn, pairs)
        if len(ids):
            w.set_meta(conn, "synonym_watermark", str(max(mark, int(ids.max()))))
