"""``pathweaver connect CLIENT``: the MCP entry that starts this install's server, printed or merged into the
client's own configuration file.

Each client keeps its servers under one key of one JSON file (``CLIENTS``). ``--write`` parses that file (JSON
with comments and trailing commas too), sets one entry, and writes the file again only when the entry changed,
after copying the old file to ``<file>.<timestamp>.bak``; every other key and server is kept. A file that does
not parse is an error and is left as it was.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathweaver.errors import UserError
from pathweaver.jsonc import JsoncError, loads

SERVER_NAME = "pathweaver"


class ConnectError(UserError, ValueError):
    """The client is unknown, or its configuration file cannot be read or merged."""


def _appdata() -> Path:
    return Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")


def _xdg_config() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def _app_config(folder: str, name: str) -> Path:
    """``name`` in an Electron app's per-user folder: macOS Application Support, Windows %APPDATA%, else XDG."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / folder / name
    if sys.platform == "win32":
        return _appdata() / folder / name
    return _xdg_config() / folder / name


@dataclass(frozen=True)
class Client:
    """Where a client keeps its MCP servers, and the shape of one entry."""

    label: str
    key: str  # the top-level object that maps server names to entries
    typed: bool  # whether an entry names its transport ("type": "stdio")
    path: Callable[[], Path]


CLIENTS: dict[str, Client] = {
    "claude-desktop": Client(
        "Claude Desktop", "mcpServers", False, lambda: _app_config("Claude", "claude_desktop_config.json")
    ),
    # user scope, as `claude mcp add --scope user`: the top-level mcpServers of ~/.claude.json
    "claude-code": Client("Claude Code", "mcpServers", True, lambda: Path.home() / ".claude.json"),
    "cursor": Client("Cursor", "mcpServers", False, lambda: Path.home() / ".cursor" / "mcp.json"),
    "vscode": Client("VS Code", "servers", True, lambda: _app_config(str(Path("Code") / "User"), "mcp.json")),
    "windsurf": Client(
        "Windsurf", "mcpServers", False, lambda: Path.home() / ".codeium" / "windsurf" / "mcp_config.json"
    ),
}


def server_command() -> list[str]:
    """The absolute command of this install: its ``pathweaver`` script beside the interpreter, else the
    interpreter with ``-m pathweaver.cli``. The interpreter's path is kept as it is (a venv's ``python`` is a link
    that must not be resolved out of its venv)."""
    python = Path(os.path.abspath(sys.executable))
    script = python.parent / ("pathweaver.exe" if sys.platform == "win32" else "pathweaver")
    if script.is_file():
        return [str(script)]
    return [str(python), "-m", "pathweaver.cli"]


def entry(client: Client, store: Path, watch: Sequence[Path], command: Sequence[str] | None = None) -> dict[str, Any]:
    """The client's entry for a server on ``store`` watching ``watch`` (absolute paths throughout)."""
    cmd = list(command or server_command())
    args = [*cmd[1:], "--store", str(store), "serve"]
    for folder in watch:
        args += ["--watch", str(folder)]
    out: dict[str, Any] = {"type": "stdio"} if client.typed else {}
    out.update(command=cmd[0], args=args)
    return out


def snippet(client: Client, name: str, server: dict[str, Any]) -> str:
    """The JSON a user would paste into the client's file."""
    return json.dumps({client.key: {name: server}}, indent=2)


@dataclass
class WriteResult:
    path: Path
    action: str  # added | updated | unchanged
    backup: Path | None = None
    comments_dropped: bool = False
    others: int = 0  # the other servers kept


def _read(path: Path, client: Client) -> tuple[dict[str, Any], bool]:
    if not path.exists():
        return {}, False
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConnectError(f"cannot read {path}: {exc}") from exc
    if not text.strip():
        return {}, False
    try:
        data, commented = loads(text)
    except JsoncError as exc:
        raise ConnectError(f"{path} is {exc}; fix it or pass --config for another file (nothing was written)") from None
    if not isinstance(data, dict):
        raise ConnectError(f"{path} holds a JSON {type(data).__name__}, not an object (nothing was written)")
    servers = data.get(client.key)
    if servers is not None and not isinstance(servers, dict):
        raise ConnectError(f"{path}: {client.key!r} is not an object (nothing was written)")
    return data, commented


def _backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.{stamp}.bak")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{stamp}-{n}.bak")
    shutil.copy2(path, target)
    return target


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder (never half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write(path: Path, client: Client, name: str, server: dict[str, Any]) -> WriteResult:
    """Merge ``server`` under ``name`` into ``path``: a backup first, every other key kept, no write when equal."""
    data, commented = _read(path, client)
    servers = data.get(client.key) or {}
    others = len([k for k in servers if k != name])
    if servers.get(name) == server:
        return WriteResult(path, "unchanged", others=others)
    action = "updated" if name in servers else "added"
    merged = copy.deepcopy(data)
    merged.setdefault(client.key, {})[name] = server
    backup = _backup(path) if path.exists() else None
    _replace(path, json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    return WriteResult(path, action, backup, commented, others)


def client_named(name: str) -> Client:
    try:
        return CLIENTS[name]
    except KeyError:
        raise ConnectError(f"unknown client {name!r}; use one of {', '.join(CLIENTS)}") from None
