"""Obsidian embeds: ``![[Note]]``, ``![[Note#Heading]]`` and ``![[Note#^block]]`` show another note's text, or a
section or block of it, inside the note that embeds it. That text becomes chunks of the embedding note (so it is
found, and merged per note, where the reader sees it), each cited to the embedded file and its span there.

A name resolves as Obsidian resolves a link: to the Markdown note whose file name (without suffix) it is,
case-insensitively, the shortest path first when several share it. Embedded text is read from the file itself,
never from the store, so a note's chunks do not depend on the order files are indexed in; the store's ``embeds``
rows say which notes embed which names, so a change to an embedded note re-indexes the notes that embed it
(``pipeline``). One level is expanded: an embed inside embedded text stays its name.

Logseq's ``{{embed [[A/B]]}}`` names a page by its page name too (``A___B.md``: ``logseq.page_key_name``), and
``{{embed ((uuid))}}`` a block by the ``id::`` property that names it: the note holding that id is found by reading
the notes for it once per scan; such an embed's rows name the uuid and the note it was found in, so adding the id
to another note, or changing or removing that note, re-indexes the embedder.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pathweaver.ingest.logseq import block_ids, block_uuid, page_key_name
from pathweaver.ingest.parsed import MARKDOWN_SUFFIXES, ParsedDocument, ParseError
from pathweaver.ingest.parsers import parse_file


def embed_key(name: str) -> str:
    """The key a note's file name and an embed's target name meet on."""
    return name.strip().casefold()


def note_keys(path: str) -> list[str]:
    """The ``embed_key``s of the note at ``path``: its file name, and its Logseq page name where that differs
    ("a___b" and "a/b"); none for a file that is not a Markdown note."""
    p = Path(path)
    if p.suffix.lower() not in MARKDOWN_SUFFIXES:
        return []
    return list(dict.fromkeys([embed_key(p.stem), embed_key(page_key_name(p))]))


@dataclass(frozen=True)
class Embedded:
    """The text an embed shows: ``text[start:end]`` of the note at ``path``, and where that is in the file."""

    path: str
    title: str
    doc: ParsedDocument
    start: int
    end: int


class NoteIndex:
    """Markdown notes by ``embed_key`` (the shortest path, then the first in order, for a shared name); reads and
    parses each embedded note once."""

    def __init__(self, paths: Iterable[str], max_bytes: int) -> None:
        best: dict[str, str] = {}
        self._all = sorted(paths)
        for path in self._all:
            for key in note_keys(path):
                if key not in best or len(path) < len(best[key]):
                    best[key] = path
        self._paths = best
        self._max_bytes = max_bytes
        self._parsed: dict[str, ParsedDocument | None] = {}
        self._blocks: dict[str, str] | None = None  # uuid -> the note whose id:: gives it, read when first asked

    def path(self, name: str) -> str | None:
        uuid = block_uuid(name)
        if uuid is None:
            return self._paths.get(embed_key(name))
        if self._blocks is None:
            self._blocks = {}
            for path in self._all:  # sorted: the first note holding an id wins, as in a fresh index
                for u in self.ids_in(path):
                    self._blocks.setdefault(u, path)
        return self._blocks.get(uuid)

    def ids_in(self, path: str) -> list[str]:
        """The Logseq block uuids the Markdown note at ``path`` gives (none when it cannot be read)."""
        if not note_keys(path):
            return []
        try:
            with open(path, "rb") as f:
                data = f.read(self._max_bytes + 1)
        except OSError:
            return []
        return block_ids(data) if len(data) <= self._max_bytes else []

    def _parse(self, path: str) -> ParsedDocument | None:
        if path not in self._parsed:
            try:
                with open(path, "rb") as f:
                    data = f.read(self._max_bytes + 1)
                self._parsed[path] = parse_file(Path(path), data) if len(data) <= self._max_bytes else None
            except (OSError, ParseError):
                self._parsed[path] = None
        return self._parsed[path]

    def resolve(self, name: str, fragment: str, embedder: str) -> Embedded | None:
        """What ``![[name#fragment]]`` in the note at ``embedder`` shows, or None (no such note, heading or block;
        the note itself)."""
        path = self.path(name)
        if path is None or path == embedder:
            return None
        doc = self._parse(path)
        if doc is None or doc.source is None:
            return None
        span = fragment_span(doc, fragment)
        if span is None or not doc.text[span[0]:span[1]].strip():
            return None
        return Embedded(path, doc.title, doc, span[0], span[1])


def fragment_span(doc: ParsedDocument, fragment: str) -> tuple[int, int] | None:
    """The span of ``doc.text`` a fragment names: the whole text, the block ``^id``, or the section under the
    heading (to the next heading of its level or above), matched case-insensitively."""
    if not fragment:
        return 0, len(doc.text)
    if fragment.startswith("^"):
        return doc.blocks.get(fragment[1:])
    want = " ".join(fragment.split()).casefold()
    levels = doc.heading_levels if len(doc.heading_levels) == len(doc.headings) else [1] * len(doc.headings)
    for i, (offset, text) in enumerate(doc.headings):
        if " ".join(text.split()).casefold() == want:
            end = next((o for (o, _), lv in zip(doc.headings[i + 1:], levels[i + 1:], strict=True) if lv <= levels[i]),
                       len(doc.text))
            return offset, end
    return None


def embedded_targets(doc: ParsedDocument, found: Iterable[str] = ()) -> list[str]:
    """The ``embed_key`` of every note ``doc`` embeds, resolved or not (a note added later must re-index it), with
    the keys of the notes its block embeds were ``found`` in (paths)."""
    return sorted({embed_key(name) for _, name, _ in doc.embeds} | {k for p in found for k in note_keys(p)})

