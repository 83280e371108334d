"""Reading, parsing, chunking and embedding files, in batches of about ``BATCH_CHUNKS`` chunks."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pathweaver.config import Settings
from pathweaver.extract.graph import ExtractParams, chunk_stats
from pathweaver.ingest.chunk_precision import cache_space
from pathweaver.ingest.chunker import chunk_text
from pathweaver.ingest.embeds import NoteIndex
from pathweaver.ingest.ignore import TEXT_SUFFIXES, looks_binary
from pathweaver.ingest.logseq import block_uuid
from pathweaver.ingest.parsed import ParsedDocument, ParseError
from pathweaver.ingest.parsers import parse_file
from pathweaver.ingest.safe_open import RefusedFile, open_regular
from pathweaver.ingest.scanner import FileEntry
from pathweaver.ingest.spans import file_spans, locator
from pathweaver.ingest.types import EmbedderLike, IndexReport
from pathweaver.store import writes as w
from pathweaver.store.db import Database

# Chunks parsed ahead and embedded in one call (and, in a bulk index, written in one transaction): a call packs its
# texts into rows of its own, and larger calls pack fuller rows (docs/benchmarks.md).
BATCH_CHUNKS = 1024
# Files from this size go last, each in a batch of its own: one large file is read, chunked and embedded only
# after every smaller file of the run is stored, so it never holds them up (docs/benchmarks.md, "Hostile input").
OWN_BATCH_BYTES = 256 * 1024


def in_batch_order(work: list[FileEntry]) -> list[FileEntry]:
    """``work`` with the files of ``OWN_BATCH_BYTES`` and more moved to the end, smallest first (a stable order:
    an incremental index and a fresh one write the same files in the same order)."""
    large = sorted((e for e in work if e.size >= OWN_BATCH_BYTES), key=lambda e: (e.size, e.path))
    return [e for e in work if e.size < OWN_BATCH_BYTES] + large


def read_capped(path: Path, limit: int, allow_hard_links: bool = True) -> bytes:
    """The file's bytes, at most ``limit + 1`` (one more than allowed shows that it is too large). Reads its stat
    size plus one byte, then on only if it grew meanwhile: ``read(limit + 1)`` would allocate the whole limit
    for every small file first. Raises ``RefusedFile`` for what is not a regular file (``safe_open``)."""
    with open_regular(path, allow_hard_links) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(min(size, limit) + 1)
        if size < len(data) <= limit:  # it grew after the stat
            data += f.read(limit + 1 - len(data))
    return data


@dataclass
class Prepared:
    """A file read, parsed and chunked (``vecs``: its chunks' vectors, once embedded)."""

    entry: FileEntry
    content_hash: str
    doc: ParsedDocument
    rows: list[w.ChunkRow]
    vecs: np.ndarray | None = None
    found: list[str] = field(default_factory=list)  # the notes its Logseq block embeds were found in (``embeds``)

Failed = tuple[FileEntry, str]  # a file that could not be prepared, with the reason it is skipped


class Preparer:
    """Files to chunk rows with their vectors, a batch at a time (chunk vectors from ``embed_cache`` when there)."""

    def __init__(self, db: Database, settings: Settings, embedder: EmbedderLike, params: ExtractParams,
                 chunk_precision: str = "float32") -> None:
        self.db = db
        self.settings = settings
        self.embedder = embedder
        self.params = params
        self.chunk_precision = chunk_precision  # the store's (``ingest.chunk_precision``)
        self.notes: NoteIndex | None = None  # the notes embeds resolve to (``pipeline`` sets it per scan)

    def batches(self, work: list[FileEntry], report: IndexReport) -> Iterator[list[Prepared | Failed]]:
        """Yield lists of prepared files (or (entry, reason) failures) holding about BATCH_CHUNKS chunks; a file of
        ``OWN_BATCH_BYTES`` or more is read only once the batch before it is yielded, and has a batch of its own."""
        batch: list[Prepared | Failed] = []
        n = 0
        for entry in work:
            if entry.size >= OWN_BATCH_BYTES and batch:
                yield batch
                batch, n = [], 0
            try:
                prep: Prepared | Failed = self.prepare(entry)
            except Exception as exc:  # a parser bug must not stop the whole run; the file is reported
                prep = (entry, f"error: {type(exc).__name__}: {exc}")
                report.errors.append({"path": entry.path, "error": prep[1]})
            batch.append(prep)
            n += len(prep.rows) if isinstance(prep, Prepared) else 0
            if n >= BATCH_CHUNKS or entry.size >= OWN_BATCH_BYTES:
                yield batch
                batch, n = [], 0
        if batch:
            yield batch

    def prepare(self, entry: FileEntry) -> Prepared | Failed:
        path = Path(entry.path)
        ing = self.settings.ingest
        text = path.suffix.lower() in TEXT_SUFFIXES
        limit = min(ing.max_file_bytes, ing.max_text_bytes) if text else ing.max_file_bytes
        try:
            data = read_capped(path, limit, ing.allow_hard_links)
        except RefusedFile as exc:
            return entry, exc.reason
        except FileNotFoundError:
            return entry, "vanished before it could be read"
        except PermissionError:
            return entry, "unreadable: permission denied"
        except OSError as exc:
            return entry, f"unreadable: {exc.strerror or exc}"
        if len(data) > limit:  # it grew after the walk
            return entry, f"too large (> {limit} bytes)"
        if text and looks_binary(data):
            return entry, "binary content"
        try:
            doc = parse_file(path, data)
        except ParseError as exc:
            return entry, str(exc)
        chunks = chunk_text(doc.text, self.embedder.tokenize(doc.text), ing.chunk_tokens, ing.chunk_overlap,
                            doc.headings)
        if not chunks:
            return entry, "empty document"
        rows = []
        spans = [(c.start, c.end) for c in chunks]
        in_file = file_spans(doc.text, doc.source, spans, doc.hidden, doc.copied) if doc.source is not None else []
        for i, c in enumerate(chunks):
            grams, n_words = chunk_stats(c.text, self.params.ngram_max)
            file_start, file_end = in_file[i] if in_file else (None, None)
            rows.append(w.ChunkRow(c.ord, c.start, c.end, c.n_tokens, c.text, c.heading, grams, n_words,
                                   file_start, file_end, locator(doc.units, c.start, c.end)))
        found: list[str] = []
        rows += self._embedded_rows(doc, entry.path, len(rows), found)
        return Prepared(entry, hashlib.sha1(data).hexdigest(), doc, rows, found=found)

    def _embedded_rows(self, doc: ParsedDocument, path: str, first_ord: int, found: list[str]) -> list[w.ChunkRow]:
        """Chunks of the text ``doc``'s embeds show (``ingest.embeds``), after its own: placed at the embed in its
        text, cited to the embedded file and the span there; the notes Logseq block embeds resolve to go to
        ``found``."""
        rows: list[w.ChunkRow] = []
        if self.notes is None:
            return rows
        ing = self.settings.ingest
        for offset, name, fragment in doc.embeds:
            shown = self.notes.resolve(name, fragment, path)
            holder = self.notes.path(name) if block_uuid(name) is not None else None
            if holder is not None:  # that note changing re-indexes this one, whether its block is shown or not
                found.append(holder)
            if shown is None:
                continue
            part = shown.doc.text[shown.start:shown.end]
            heads = [(o - shown.start, h) for o, h in shown.doc.headings if shown.start <= o < shown.end]
            pieces = chunk_text(part, self.embedder.tokenize(part), ing.chunk_tokens, ing.chunk_overlap, heads)
            spans = file_spans(shown.doc.text, shown.doc.source or "",
                               [(shown.start + c.start, shown.start + c.end) for c in pieces],
                               shown.doc.hidden, shown.doc.copied)
            for c, (file_start, file_end) in zip(pieces, spans, strict=True):
                grams, n_words = chunk_stats(c.text, self.params.ngram_max)
                rows.append(w.ChunkRow(first_ord + len(rows), offset, offset + len(c.text), c.n_tokens, c.text,
                                       c.heading or shown.title, grams, n_words, file_start, file_end,
                                       cite_doc=shown.path))
        return rows

    def embed_chunks(self, batch: Sequence[Prepared | Failed], report: IndexReport) -> None:
        """Vectors for every chunk of the batch, in one model call for the texts not in ``embed_cache``; below
        float32, in fixed-shape passes (each chunk's vector the same bits whatever shares its call)."""
        preps = [p for p in batch if isinstance(p, Prepared)]
        texts = [r.text for p in preps for r in p.rows]
        space = cache_space(self.chunk_precision)
        cached = w.cache_get(self.db.conn, texts, space)
        missing = sorted({t for t in texts if t not in cached})
        if missing:
            vecs = self.embedder.encode(missing, batch_size=self.settings.ingest.batch_size,
                                        precision=self.chunk_precision, invariant=self.chunk_precision != "float32")
            fresh = dict(zip(missing, vecs, strict=True))
            with self.db.write(bump_version=False) as conn:  # the cache is not graph state
                w.cache_put(conn, fresh, space)
            cached.update(fresh)
            report.embedded += len(missing)
        for p in preps:
            p.vecs = np.stack([cached[r.text] for r in p.rows]) if p.rows else None
