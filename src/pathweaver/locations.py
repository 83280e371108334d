"""Where a store lives when no ``--store`` and no ``PATHWEAVER_STORE`` name one.

Desktop clients start servers from a working directory of their own choosing, so the default never depends on it:
a store for some folders is ``<user data dir>/pathweaver/stores/<name of the first folder>-<hash of all of them>``
(platformdirs: ``~/.local/share`` or ``$XDG_DATA_HOME`` on Linux, ``~/Library/Application Support`` on macOS,
``%LOCALAPPDATA%`` on Windows), the same for every session that names the same folders in any order. A command
without folders (stats, retrieve, ask, serve without ``--watch``) uses the only store there is, ``stores/default``
when there is none yet, and stops with the list when there are several.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pathweaver.errors import UserError

APP = "pathweaver"
STORE_ENV = "PATHWEAVER_STORE"
DB_FILE = "pathweaver.db"
DEFAULT_NAME = "default"
EVAL_STORE_ROOT = ".pathweaver"  # eval's stores and ledger: a developer's command, run from a checkout
SLUG_CHARS = 40
HASH_CHARS = 8


class StoreChoiceError(UserError, ValueError):
    """No folder names the store and several stores exist."""


def data_dir() -> Path:
    """This platform's user data directory for pathweaver."""
    import platformdirs

    return Path(platformdirs.user_data_dir(APP, appauthor=False))


def stores_root() -> Path:
    return data_dir() / "stores"


def _slug(path: Path) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", path.name.lower()).strip("-")
    return words[:SLUG_CHARS].rstrip("-") or "root"


def folder_store(folders: Sequence[str | os.PathLike[str]]) -> Path:
    """The store named after ``folders``: the same path for the same set of absolute folders, in any order."""
    paths = sorted({str(Path(f).expanduser().resolve()) for f in folders})
    digest = hashlib.sha256("\n".join(paths).encode("utf-8", "surrogateescape")).hexdigest()[:HASH_CHARS]
    return stores_root() / f"{_slug(Path(paths[0]))}-{digest}"


def existing_stores() -> list[Path]:
    """The stores under ``stores_root()`` that hold a database, by name."""
    root = stores_root()
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if (d / DB_FILE).is_file())


def default_store() -> Path:
    """The store of a command that names no folder: the only one, else ``default`` when there is none."""
    stores = existing_stores()
    if len(stores) == 1:
        return stores[0]
    if not stores:
        return stores_root() / DEFAULT_NAME
    listed = "; ".join(str(s) for s in stores)
    raise StoreChoiceError(
        f"several stores, and this command names no folder: pass --store DIR (or set {STORE_ENV}) with one of: "
        f"{listed}"
    )


def explicit_store(cli_value: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """``--store DIR``, else ``$PATHWEAVER_STORE``, else ``None``."""
    env = os.environ if environ is None else environ
    if cli_value:
        return Path(cli_value).expanduser()
    if env.get(STORE_ENV):
        return Path(env[STORE_ENV]).expanduser()
    return None


def resolve_store(
    cli_value: str | os.PathLike[str] | None,
    folders: Sequence[str | os.PathLike[str]] = (),
    environ: Mapping[str, str] | None = None,
) -> Path:
    """``--store DIR``, else ``$PATHWEAVER_STORE``, else the store of ``folders``, else ``default_store()``."""
    explicit = explicit_store(cli_value, environ)
    if explicit is not None:
        return explicit
    return folder_store(folders) if folders else default_store()
