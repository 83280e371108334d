"""Shared fixtures: the offline environment, a copy of the small real corpus, and one indexed store per session."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

for _key, _value in (
    ("HF_HUB_OFFLINE", "1"),
    ("TRANSFORMERS_OFFLINE", "1"),
    ("TOKENIZERS_PARALLELISM", "false"),
    ("OPENBLAS_NUM_THREADS", "1"),
    # auto never finds a model server someone runs on this machine (tests/test_local_model.py starts its own)
    ("PATHWEAVER_MODELS_LOCAL_PROBE_PORTS", ""),
):
    os.environ.setdefault(_key, _value)

CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture(scope="session", autouse=True)
def private_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Stores made without --store (the user data directory's) go to a temporary folder, never the real one."""
    data = tmp_path_factory.mktemp("xdg-data")
    before = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(data)
    yield data
    if before is None:
        os.environ.pop("XDG_DATA_HOME", None)
    else:
        os.environ["XDG_DATA_HOME"] = before


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of tests/corpus (six short notes about the Curies, Warsaw and the Vistula)."""
    target = tmp_path_factory.mktemp("corpus") / "notes"
    shutil.copytree(CORPUS, target)
    return target


@pytest.fixture(scope="session")
def embedder():  # type: ignore[no-untyped-def]
    """The real embedder (all-MiniLM-L6-v2), loaded once."""
    from pathweaver.models.embedder import get_embedder

    return get_embedder()


@pytest.fixture(scope="session")
def indexed(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A ``Pathweaver`` over a store that indexed the corpus copy (read-only use by tests, please)."""
    from pathweaver.service import Pathweaver

    store = tmp_path_factory.mktemp("store")
    pw = Pathweaver.open(store, overrides={"models": {"llm_backend": "none"}})
    pw.index([corpus_dir])
    yield pw
    pw.close()
