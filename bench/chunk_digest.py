"""A digest of what the indexer's parse and chunk steps make of folders: every (path, ord, start, end, text, heading)
with the configured chunk size, hashed per folder. Run it with two checkouts on the same folders to show that a
change leaves chunk texts (and so retrieval figures) as they were.

    PYTHONPATH=src python bench/chunk_digest.py FOLDER [FOLDER ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from pathweaver.config import Settings
from pathweaver.ingest.chunker import chunk_text
from pathweaver.ingest.parsed import SUPPORTED_SUFFIXES, ParseError
from pathweaver.ingest.parsers import parse_file
from pathweaver.models.embedder import get_embedder


def digest(folder: Path, chunk_tokens: int, overlap: int) -> tuple[int, int, str]:
    """(files, chunks, sha256) of ``folder``'s supported files, in path order."""
    emb = get_embedder()
    h = hashlib.sha256()
    n_files = n_chunks = 0
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.suffix.lower() not in SUPPORTED_SUFFIXES:
            continue
        n_files += 1
        try:
            doc = parse_file(path, path.read_bytes())
        except ParseError as exc:
            h.update(json.dumps([str(path), "error", str(exc)]).encode())
            continue
        for c in chunk_text(doc.text, emb.tokenize(doc.text), chunk_tokens, overlap, doc.headings):
            n_chunks += 1
            h.update(json.dumps([str(path), c.ord, c.start, c.end, c.text, c.heading]).encode())
    return n_files, n_chunks, h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    ing = Settings().ingest
    for folder in args.folders:
        n_files, n_chunks, hexdigest = digest(folder, ing.chunk_tokens, ing.chunk_overlap)
        print(f"{folder} {n_files} files {n_chunks} chunks {hexdigest}")


if __name__ == "__main__":
    main()
