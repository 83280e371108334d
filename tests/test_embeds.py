"""Obsidian embeds (issue 37): ``![[Note]]``, ``![[Note#Heading]]`` and ``![[Note#^block]]`` are searchable in
the note that shows them, cited to the embedded file and span, and follow the embedded note's edits, renames and
deletion exactly as a fresh index of the folder would."""

from __future__ import annotations

from pathlib import Path

import pytest

from fresh_graph import equals_fresh
from pathweaver.ingest.parsers import parse_file
from pathweaver.service import Pathweaver

REGIONS = """---
aliases: [Regions]
---
# Data regions

Intro line about where data lives.

## Europe

Frankfurt hosts every European vault. ^eu

## Americas

Oregon hosts the American vaults.

### Backups

Backups stay in Ohio. ^bk
"""
REFUNDS = "# Refunds\n\nA refund is paid within 14 days of the request. ^refund-rule\n\nOther text.\n"
SYNC = "# Sync guide\n\nHow syncing works.\n\n![[regions]]\n"
ONBOARD = "# Onboarding\n\nWhere is my data?\n\n![[Regions#Americas]]\n\nMoney back: ![[refunds#^refund-rule]]\n"


def test_parser_records_embeds_headings_levels_and_blocks() -> None:
    doc = parse_file(Path("regions.md"), REGIONS.encode())
    assert doc.heading_levels == [1, 2, 2, 3]
    start, end = doc.blocks["eu"]
    assert doc.text[start:end] == "Frankfurt hosts every European vault."
    assert "^eu" not in doc.text and "^bk" not in doc.text
    onboard = parse_file(Path("onboarding.md"), ONBOARD.encode())
    assert [(name, frag) for _, name, frag in onboard.embeds] == [("Regions", "Americas"), ("refunds", "^refund-rule")]
    for offset, name, _ in onboard.embeds:
        assert onboard.text[offset:offset + len(name)] == name


def chunks_of(pw: Pathweaver, name: str) -> list[dict]:
    path = next(d["path"] for d in pw.reader.documents() if d["path"].endswith(name))
    return [pw.reader.chunk(c["chunk_id"]) for c in pw.reader.document_chunks(path)]


def embedded(pw: Pathweaver, name: str) -> list[tuple[str, str]]:
    """(cited file name, text) of the chunks of note ``name`` that cite another file."""
    return [(Path(c["doc"]).name, c["text"]) for c in chunks_of(pw, name) if not c["doc"].endswith(name)]


@pytest.fixture()
def vault(tmp_path: Path) -> Path:
    notes = tmp_path / "vault"
    notes.mkdir()
    for name, text in {"regions.md": REGIONS, "refunds.md": REFUNDS, "sync.md": SYNC,
                       "onboarding.md": ONBOARD}.items():
        (notes / name).write_text(text, "utf-8")
    return notes


def test_embeds_are_searchable_cited_and_follow_their_notes(vault: Path, tmp_path: Path) -> None:
    pw = Pathweaver.open(tmp_path / "store", overrides={"models": {"llm_backend": "none"}})
    try:
        pw.index([vault])
        # a whole note, a section (with its subsection) and a block
        whole = embedded(pw, "sync.md")
        assert whole and all(f == "regions.md" for f, _ in whole) and "Frankfurt" in " ".join(t for _, t in whole)
        shown = dict(embedded(pw, "onboarding.md"))
        assert "Oregon hosts" in shown["regions.md"] and "Backups stay in Ohio" in shown["regions.md"]
        assert "Frankfurt" not in shown["regions.md"]
        assert shown["refunds.md"] == "A refund is paid within 14 days of the request."
        # cited to the embedded file's own span
        source = (vault / "refunds.md").read_text("utf-8")
        card = next(c for c in chunks_of(pw, "onboarding.md") if c["doc"].endswith("refunds.md"))
        start, end = card["span"][:2]
        assert source[start:end] == "A refund is paid within 14 days of the request."
        # found where it is shown: the onboarding note answers a refund question through its embed
        hits = pw.search("refund paid within how many days", mode="bm25", k=5)
        assert any(h["title"] == "Onboarding" and h["doc"].endswith("refunds.md") for h in hits)
        out = pw.retrieve_json("Which city hosts the American vaults?", method="hybrid", top_k=5)
        assert any(c["doc"].endswith("regions.md") for c in out["chunks"])
        equals_fresh(pw, vault, tmp_path, "first")

        # the embedded note changes: its embedders show the new text at once
        (vault / "regions.md").write_text(REGIONS.replace("Oregon", "Virginia"), "utf-8")
        pw.index([vault])
        assert "Virginia hosts" in dict(embedded(pw, "onboarding.md"))["regions.md"]
        assert all("Oregon" not in t for _, t in embedded(pw, "sync.md"))
        equals_fresh(pw, vault, tmp_path, "edit")

        # a block id moves away: the block embed shows nothing; the note is deleted: no embed shows it
        (vault / "refunds.md").write_text(REFUNDS.replace(" ^refund-rule", ""), "utf-8")
        pw.index([vault])
        assert [f for f, _ in embedded(pw, "onboarding.md")] == ["regions.md"]
        equals_fresh(pw, vault, tmp_path, "block")
        (vault / "regions.md").unlink()
        pw.index([vault])
        assert embedded(pw, "sync.md") == [] and embedded(pw, "onboarding.md") == []
        equals_fresh(pw, vault, tmp_path, "delete")

        # the note comes back under another folder: the embeds resolve to it again (watcher batch)
        (vault / "sub").mkdir()
        (vault / "sub" / "regions.md").write_text(REGIONS, "utf-8")
        pw.apply_changes({vault / "sub" / "regions.md"}, set())
        assert {f for f, _ in embedded(pw, "sync.md")} == {"regions.md"}
        assert next(c for c in chunks_of(pw, "sync.md") if "Frankfurt" in c["text"])["doc"].endswith(
            "sub/regions.md")
        equals_fresh(pw, vault, tmp_path, "back")
    finally:
        pw.close()
