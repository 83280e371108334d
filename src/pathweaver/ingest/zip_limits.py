"""Limits on what a zip-based document (DOCX) may decompress to, checked on its central directory before any part
is read.

Python's ``zipfile`` never yields more than an entry's declared size (a part whose data inflates past it fails its
CRC), so the declared sizes bound what the parser can read: a zip bomb is skipped with a reason in the time and
memory of reading its directory. XML parts are limited more tightly than the whole, as a parser holds a tree many
times their size (a 60 MB document.xml took 1.9 GB).
"""

from __future__ import annotations

import io
import zipfile

from pathweaver.ingest.parsed import ParseError

MAX_UNZIPPED_BYTES = 64 * 1024 * 1024  # every part together (images are stored, not inflated, in real files)
MAX_XML_BYTES = 16 * 1024 * 1024  # XML parts together: about 2,000 pages of text
MAX_ENTRIES = 10_000
_XML_SUFFIXES = (".xml", ".rels")


def check_zip(data: bytes, kind: str) -> None:
    """Raise ``ParseError`` (the skip reason) when the ``kind`` zip in ``data`` is unreadable or would decompress
    past the limits."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ParseError(f"invalid {kind}: {exc}") from None
    if len(infos) > MAX_ENTRIES:
        raise ParseError(f"{kind} has {len(infos)} parts (> {MAX_ENTRIES}): skipped as a possible zip bomb")
    total = sum(i.file_size for i in infos)
    xml = sum(i.file_size for i in infos if i.filename.lower().endswith(_XML_SUFFIXES))
    if total > MAX_UNZIPPED_BYTES or xml > MAX_XML_BYTES:
        what, size, limit = ("XML", xml, MAX_XML_BYTES) if xml > MAX_XML_BYTES else ("parts", total, MAX_UNZIPPED_BYTES)
        raise ParseError(f"{kind} decompresses to {size} bytes of {what} (> {limit}): skipped as a possible zip bomb")
