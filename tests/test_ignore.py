"""Ignore rules and the folder walk: hidden paths, .gitignore/.pathweaverignore, size, type, symlink loops."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pathweaver.config import ConfigError
from pathweaver.ingest.ignore import TEXT_SUFFIXES, IgnoreRules, iter_files, looks_binary


def _write(path: Path, data: bytes | str = "text") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    _write(root / ".gitignore", "# comment\nbuild/\n*.log.md\n!keep.log.md\n")
    _write(root / ".pathweaverignore", "drafts/secret*.md\n")
    _write(root / "a.md")
    _write(root / "sub" / "b.txt")
    _write(root / "sub" / "deep" / "c.html", "<p>x</p>")
    _write(root / "build" / "out.md")
    _write(root / "x.log.md")
    _write(root / "keep.log.md")
    _write(root / "drafts" / "secret-plan.md")
    _write(root / "drafts" / "public.md")
    _write(root / ".obsidian" / "workspace.md")
    _write(root / ".hidden.md")
    _write(root / "image.png", b"\x89PNG")
    _write(root / "big.md", "x" * 2000)
    return root


def test_reason_rules(tree: Path) -> None:
    rules = IgnoreRules(tree, patterns=["*.tmp.md"], max_bytes=1000)
    assert rules.reason(tree / "a.md") is None
    assert rules.reason(tree / "sub" / "b.txt") is None
    assert rules.reason(tree / ".hidden.md") == "hidden"
    assert rules.reason(tree / ".obsidian" / "workspace.md") == "hidden"
    assert rules.reason(tree / "build" / "out.md") == "ignored by pattern 'build/'"
    assert rules.reason(tree / "x.log.md") == "ignored by pattern '*.log.md'"
    assert rules.reason(tree / "keep.log.md") is None  # negated pattern re-includes it
    assert rules.reason(tree / "drafts" / "secret-plan.md") == "ignored by pattern 'drafts/secret*.md'"
    assert rules.reason(tree / "z.tmp.md") == "ignored by pattern '*.tmp.md'"  # extra patterns argument
    assert rules.reason(tree / "image.png") == "unsupported type .png"
    assert rules.reason(tree / "big.md") == "too large (2000 bytes > 1000)"
    assert rules.reason(tree / "a.md", size=5000) == "too large (5000 bytes > 1000)"
    assert rules.reason(tree.parent / "elsewhere.md") == "outside root"
    with pytest.raises(ConfigError):
        IgnoreRules(tree, max_bytes=0)


def test_iter_files(tree: Path) -> None:
    rules = IgnoreRules(tree, max_bytes=1000)
    got = {p.relative_to(tree).as_posix(): r for p, r in iter_files(tree, rules)}
    assert got == {
        ".hidden.md": "hidden",  # a supported file that is skipped gets its reason
        "a.md": None,
        "big.md": "too large (2000 bytes > 1000)",
        "drafts/public.md": None,
        "drafts/secret-plan.md": "ignored by pattern 'drafts/secret*.md'",
        "keep.log.md": None,
        "sub/b.txt": None,
        "sub/deep/c.html": None,
        "x.log.md": "ignored by pattern '*.log.md'",
    }  # build/ and .obsidian/ not entered, image.png and .gitignore passed over silently
    assert list(iter_files(tree, rules)) == list(iter_files(tree, rules))  # stable order


def test_symlink_loop_and_links(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(root / "d" / "note.md")
    os.symlink(root, root / "d" / "back")  # directory loop
    os.symlink(root / "self.md", root / "self.md")  # a link to itself
    os.symlink(root / "missing.md", root / "broken.md")
    os.symlink(root / "d", root / "alias")  # a second name for a folder already scanned
    os.symlink(root / "d" / "note.md", root / "linked.md")  # a file link is a normal file
    got = {p.relative_to(root).as_posix(): r for p, r in iter_files(root, IgnoreRules(root))}
    assert got["d/back"] == "symlink loop"
    assert got["self.md"] == "symlink loop"
    assert got["broken.md"] == "broken symlink"
    assert got["linked.md"] is None and got["d/note.md"] is None
    assert got["alias"] == "symlink to a folder already scanned"  # d itself was walked, under its real name
    assert not any(k.startswith(("d/back/", "alias/")) for k in got)
    outside = tmp_path / "outside"
    _write(outside / "o.md")
    os.symlink(outside, root / "ext")  # a folder outside the root is followed once
    got = {p.relative_to(root).as_posix(): r for p, r in iter_files(root, IgnoreRules(root))}
    assert got["ext/o.md"] is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read files without permission bits")
def test_unreadable(tmp_path: Path) -> None:
    root = tmp_path / "r"
    f = _write(root / "locked.md")
    f.chmod(0)
    try:
        got = dict(iter_files(root, IgnoreRules(root)))
        assert got[f].startswith("unreadable: ")
    finally:
        f.chmod(0o644)


def test_looks_binary() -> None:
    assert looks_binary(b"abc\x00def")
    assert not looks_binary("Zażółć gęślą jaźń".encode())
    assert not looks_binary(b"a" * 9000 + b"\x00")  # only the first 8 KB are sniffed
    assert ".md" in TEXT_SUFFIXES and ".pdf" not in TEXT_SUFFIXES and ".docx" not in TEXT_SUFFIXES
