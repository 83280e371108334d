"""Path confinement: '..', symlinks pointing out and absolute paths outside the roots are refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pathweaver.config import ConfigError, load_settings
from pathweaver.server.roots import Roots, RootsError, allowed_roots


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "root"
    (root / "notes" / "deep").mkdir(parents=True)
    (root / "notes" / "a.md").write_text("# A\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret\n")
    (root / "link-out").symlink_to(outside)
    (root / "link-file-out.md").symlink_to(outside / "secret.md")
    (root / "link-in").symlink_to(root / "notes")
    return {"root": root, "outside": outside}


def test_paths_inside_are_resolved(tree: dict[str, Path]) -> None:
    roots = Roots([tree["root"]])
    root = tree["root"].resolve()
    assert roots.resolve(str(root / "notes" / "a.md")) == root / "notes" / "a.md"
    assert roots.resolve("notes/deep") == root / "notes" / "deep"  # relative to the root
    assert roots.resolve(str(root)) == root
    assert roots.resolve("link-in") == root / "notes"  # a symlink that stays inside is fine
    assert str(root / "notes") in roots
    assert str(tree["outside"]) not in roots


@pytest.mark.parametrize("path", ["../outside", "notes/../../outside/secret.md", "notes/.."])
def test_dotdot_is_refused(tree: dict[str, Path], path: str) -> None:
    with pytest.raises(RootsError, match=r"'\.\.' is not allowed"):
        Roots([tree["root"]]).resolve(path)


def test_dotdot_in_absolute_path_is_refused(tree: dict[str, Path]) -> None:
    with pytest.raises(RootsError, match=r"'\.\.'"):
        Roots([tree["root"]]).resolve(f"{tree['root']}/../outside")


@pytest.mark.parametrize("name", ["link-out", "link-out/secret.md", "link-file-out.md"])
def test_symlinks_pointing_out_are_refused(tree: dict[str, Path], name: str) -> None:
    with pytest.raises(RootsError, match="symlink"):
        Roots([tree["root"]]).resolve(name)


def test_absolute_paths_outside_are_refused(tree: dict[str, Path]) -> None:
    roots = Roots([tree["root"]])
    for path in (str(tree["outside"]), "/etc/passwd", str(tree["outside"] / "secret.md")):
        with pytest.raises(RootsError, match="outside the allowed folders"):
            roots.resolve(path)


def test_sibling_with_common_prefix_is_outside(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes-private").mkdir()
    with pytest.raises(RootsError, match="outside"):
        Roots([tmp_path / "notes"]).resolve(str(tmp_path / "notes-private"))


def test_no_roots_and_empty_path(tree: dict[str, Path]) -> None:
    with pytest.raises(RootsError, match="no folders are allowed"):
        Roots([]).resolve(str(tree["root"]))
    with pytest.raises(RootsError, match="empty"):
        Roots([tree["root"]]).resolve("  ")
    assert issubclass(RootsError, ConfigError)  # the CLI prints it as one line


def test_allowed_roots_merge_settings_and_watch(tmp_path: Path, tree: dict[str, Path]) -> None:
    settings = load_settings(tmp_path / "store", {"server": {"folders": [str(tree["root"])]}}, environ={})
    roots = allowed_roots(settings, [tree["outside"], tree["root"] / "link-in"])
    assert roots == [tree["root"].resolve(), tree["outside"].resolve(), (tree["root"] / "notes").resolve()]
    assert os.path.realpath(tree["root"] / "link-in") == str(roots[2])
