"""Where a store lives: a directory (SQLite, the default) or a postgresql:// URL from the flag, the environment or
pathweaver.toml; a command the PostgreSQL backend cannot run yet says so before anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from pathweaver.config import ConfigError, load_settings, resolve_store_dir
from pathweaver.store.db import StoreError

URL = "postgresql://team:s3cret@db.example:5432/notes"


def test_a_postgres_url_is_read_from_the_flag_the_environment_and_the_config(tmp_path: Path) -> None:
    assert load_settings(URL, environ={}).store_url == URL
    assert load_settings(None, environ={"PATHWEAVER_STORE": URL}).store_url == URL
    assert resolve_store_dir(URL, environ={}) == Path(".pathweaver")
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


def test_commands_not_ported_to_postgres_refuse_before_opening_and_hide_the_password(tmp_path: Path) -> None:
    from pathweaver.service import Pathweaver

    with pytest.raises(StoreError, match="not ported|SQLite only") as err:
        Pathweaver.open(URL, overrides={"models": {"llm_backend": "none"}})
    assert "s3cret" not in str(err.value)


def test_eval_on_a_postgres_url_refuses_instead_of_using_the_default_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pathweaver.cli import main

    assert main(["--store", URL, "eval", str(tmp_path), "--split", "dev"]) != 0
    err = capsys.readouterr().err
    assert "not ported" in err and "s3cret" not in err
