"""Without --store or PATHWEAVER_STORE the store lives in the user data directory, named after the folders, so a
client's sessions find the same store from any working directory (the data directory is temporary here); a
postgresql:// URL from the flag, the environment or pathweaver.toml names a PostgreSQL store instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pathweaver.config import ConfigError, load_settings, resolve_store_dir, url_store_dir
from pathweaver.locations import (
    StoreChoiceError,
    default_store,
    existing_stores,
    folder_store,
    resolve_store,
    stores_root,
)
from pathweaver.store.db import StoreError


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.delenv("PATHWEAVER_STORE", raising=False)
    return home


def make_store(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "pathweaver.db").touch()
    return path


def test_a_folder_store_is_named_after_its_folders_in_any_order(data_home: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    notes, work = tmp_path / "My Notes", tmp_path / "work"
    store = folder_store([notes, work])
    assert store.parent == data_home / "pathweaver" / "stores" == stores_root()
    assert store.name.startswith("my-notes-") and len(store.name) == len("my-notes-") + 8
    assert folder_store([work, notes, notes]) == store
    monkeypatch.chdir(tmp_path)
    assert folder_store(["work", "My Notes"]) == store  # relative paths mean the same folders
    assert folder_store([notes]) != store and folder_store([work]) != store


def test_explicit_store_and_variable_come_first(data_home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    assert resolve_store(str(tmp_path / "s"), [notes]) == tmp_path / "s"
    assert resolve_store(None, [notes], {"PATHWEAVER_STORE": str(tmp_path / "e")}) == tmp_path / "e"
    assert resolve_store(None, [notes], {}) == folder_store([notes])
    assert resolve_store_dir(None, {}, folders=[notes]) == folder_store([notes])
    assert load_settings(None, environ={}).store_dir == stores_root() / "default"


def test_a_command_without_folders_uses_the_only_store_or_says_which_exist(data_home: Path) -> None:
    assert existing_stores() == [] and default_store() == stores_root() / "default"
    only = make_store(stores_root() / "notes-12345678")
    (stores_root() / "empty-folder").mkdir()  # no database: not a store
    assert default_store() == only
    other = make_store(stores_root() / "work-87654321")
    with pytest.raises(StoreChoiceError, match="several stores") as caught:
        default_store()
    assert str(only) in str(caught.value) and str(other) in str(caught.value) and "--store" in str(caught.value)


def cli(args: list[str], cwd: Path, data: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PATHWEAVER_STORE"}
    env["XDG_DATA_HOME"] = str(data)
    return subprocess.run([sys.executable, "-m", "pathweaver.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


def in_process(args: list[str], cwd: Path, data: Path, monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess[str]:
    """``cli`` through ``main`` in this process (the same working directory and data directory): no Python and
    torch start of its own."""
    from pathweaver.cli import main

    with monkeypatch.context() as m:
        m.chdir(cwd)
        m.setenv("XDG_DATA_HOME", str(data))
        m.delenv("PATHWEAVER_STORE", raising=False)
        capsys.readouterr()
        code = main(args)
        out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def test_index_then_stats_from_elsewhere_find_the_same_store(corpus_dir: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The index runs as a process of its own; the commands after it, from another directory, in this one."""
    data, here, there = tmp_path / "data", tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    report = cli(["index", str(corpus_dir), "--json"], here, data)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["added"] == 6
    assert not (here / ".pathweaver").exists()
    [store] = (data / "pathweaver" / "stores").iterdir()
    assert store.name.startswith("notes-") and (store / "pathweaver.db").is_file()

    def run(args: list[str], cwd: Path, data: Path) -> subprocess.CompletedProcess[str]:
        return in_process(args, cwd, data, monkeypatch, capsys)

    stats = run(["stats", "--json"], there, data)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["documents"] == 6
    doctor = json.loads(run(["doctor", "--json"], there, data).stdout)["store"]
    assert doctor["path"] == str(store) and doctor["exists"] and doctor["stores"] == [str(store)]
    watched = json.loads(run(["doctor", "--watch", str(corpus_dir), "--json"], there, data).stdout)["store"]
    assert watched["path"] == str(store)

    make_store(data / "pathweaver" / "stores" / "work-00000000")
    refused = run(["stats", "--json"], there, data)
    assert refused.returncode == 2 and "several stores" in refused.stderr and str(store) in refused.stderr
    doctor = run(["doctor"], there, data)
    assert doctor.returncode == 0 and doctor.stdout.startswith("store:        several stores")


URL = "postgresql://team:s3cret@db.example:5432/notes"


def test_a_postgres_url_is_read_from_the_flag_the_environment_and_the_config(tmp_path: Path) -> None:
    assert load_settings(URL, environ={}).store_url == URL
    assert load_settings(None, environ={"PATHWEAVER_STORE": URL}).store_url == URL
    assert resolve_store_dir(URL, environ={}) == url_store_dir(URL)
    assert url_store_dir(URL) == url_store_dir(URL.replace("s3cret", "other")) != url_store_dir(URL + "2")
    store = tmp_path / "s"
    store.mkdir()
    (store / "pathweaver.toml").write_text(f'[store]\nurl = "{URL}"\n', encoding="utf-8")
    assert load_settings(store, environ={}).store_url == URL
    assert load_settings(tmp_path / "other", environ={}).store_url == ""
    assert load_settings(tmp_path / "other", environ={}).store_dir == tmp_path / "other"


@pytest.mark.parametrize("body", ['[store]\nurl = "mysql://x/y"\n', '[store]\npath = "x"\n', 'store = "x"\n'])
def test_a_bad_store_table_is_a_config_error(tmp_path: Path, body: str) -> None:
    (tmp_path / "pathweaver.toml").write_text(body, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[store\]"):
        load_settings(tmp_path, environ={})


def test_an_unreachable_postgres_store_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    from pathweaver.service import Pathweaver

    with pytest.raises(StoreError, match="cannot reach PostgreSQL") as err:
        Pathweaver.open(URL, overrides={"models": {"llm_backend": "none"}})
    assert "s3cret" not in str(err.value)
