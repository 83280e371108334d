"""Incremental == fresh for the tests that change a watched folder: a store's canonical graph against a fresh index
of the same folder."""

from __future__ import annotations

from pathlib import Path

from pathweaver.service import Pathweaver

GRAPH_KEYS = ("chunks", "embeds", "entities", "relations", "mentions", "doc_names", "name_mentions")


def equals_fresh(pw: Pathweaver, folder: Path, tmp_path: Path, tag: str) -> None:
    """Assert that ``pw``'s graph equals a fresh store's over ``folder`` (``tag`` names the step that failed)."""
    fresh = Pathweaver.open(tmp_path / f"fresh-{tag}", overrides={"models": {"llm_backend": "none"}})
    try:
        fresh.index([folder])
        got, want = pw.reader.canonical_graph(), fresh.reader.canonical_graph()
        for key in GRAPH_KEYS:
            assert got[key] == want[key], (tag, key)
    finally:
        fresh.close()
