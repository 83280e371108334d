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
):
    os.environ.setdefault(_key, _value)

CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of tests/corpus (six short notes about the Curies, Warsaw and the Vistula)."""
    target = tmp_path_factory.mktemp("corpus") / "notes"
    shutil.copytree(CORPUS, target)
    return target


@pytest.fixture(scope="session")
def indexed(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A ``Pathweaver`` over a store that indexed the corpus copy (read-only use by tests, please)."""
    from pathweaver.service import Pathweaver

    store = tmp_path_factory.mktemp("store")
    pw = Pathweaver.open(store, overrides={"models": {"llm_backend": "none"}})
    pw.index([corpus_dir])
    yield pw
    pw.close()
