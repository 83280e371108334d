"""``pathweaver connect``: each client's entry, printed and merged into sample configuration files in each client's
documented format (other servers, other keys, comments, trailing commas), through the real CLI in a subprocess
whose HOME and data directories are temporary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pathweaver import connect
from pathweaver.jsonc import JsoncError, loads, strip

# (client, the file under HOME on Linux, the servers key, whether entries name "type": "stdio")
LAYOUT = [
    ("claude-desktop", ".config/Claude/claude_desktop_config.json", "mcpServers", False),
    ("claude-code", ".claude.json", "mcpServers", True),
    ("cursor", ".cursor/mcp.json", "mcpServers", False),
    ("vscode", ".config/Code/User/mcp.json", "servers", True),
    ("windsurf", ".codeium/windsurf/mcp_config.json", "mcpServers", False),
]
OTHER = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sample paths are Linux's")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    (h / "notes").mkdir(parents=True)
    return h


def run(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "PATHWEAVER_"))}
    env.update(HOME=str(home))
    proc = subprocess.run(
        [sys.executable, "-m", "pathweaver.cli", "connect", *args], capture_output=True, text=True, env=env,
        timeout=120,
    )
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".*.bak"))


@pytest.mark.parametrize(("client", "rel", "key", "typed"), LAYOUT, ids=[row[0] for row in LAYOUT])
def test_print_then_write_keeps_other_servers_and_is_idempotent(
    home: Path, client: str, rel: str, key: str, typed: bool
) -> None:
    notes = home / "notes"
    printed = json.loads(run(home, client, "--watch", str(notes)).stdout)
    server = printed[key]["pathweaver"]
    assert Path(server["command"]).is_absolute() and Path(server["command"]).exists()
    assert server.get("type") == ("stdio" if typed else None)
    args = server["args"]
    assert args[-3:] == ["serve", "--watch", str(notes)]
    store = Path(args[args.index("--store") + 1])
    assert store.parent == home / ".local/share/pathweaver/stores" and store.name.startswith("notes-")

    config = home / rel
    config.parent.mkdir(parents=True, exist_ok=True)
    sample: dict[str, Any] = {key: {"files": OTHER}, "theme": "dark"}
    if client == "vscode":
        sample["inputs"] = [{"type": "promptString", "id": "token", "password": True}]
    config.write_text(json.dumps(sample, indent=4), encoding="utf-8")

    out = run(home, client, "--watch", str(notes), "--write").stdout
    assert "'pathweaver' added, 1 other server(s) kept" in out
    written = json.loads(config.read_text(encoding="utf-8"))
    assert written[key] == {"files": OTHER, "pathweaver": server}
    assert {k: v for k, v in written.items() if k != key} == {k: v for k, v in sample.items() if k != key}
    [bak] = backups(config)
    assert json.loads(bak.read_text(encoding="utf-8")) == sample

    before = config.read_bytes()
    again = run(home, client, "--watch", str(notes), "--write").stdout
    assert "nothing written" in again
    assert config.read_bytes() == before and backups(config) == [bak]


def test_write_creates_a_missing_file_and_folder(home: Path) -> None:
    out = run(home, "cursor", "--watch", str(home / "notes"), "--write").stdout
    config = home / ".cursor/mcp.json"
    assert "added" in out and list(json.loads(config.read_text())["mcpServers"]) == ["pathweaver"]
    assert backups(config) == []


def test_vscode_jsonc_with_comments_is_merged_and_the_loss_of_comments_is_said(home: Path) -> None:
    config = home / ".config/Code/User/mcp.json"
    config.parent.mkdir(parents=True)
    text = """// my MCP servers
{
  "servers": {
    /* the files server */
    "files": {"type": "stdio", "command": "npx", "args": ["-y", "srv", "http://localhost:1/x"],},
    "web": {"type": "http", "url": "https://example.com/mcp // not a comment"},
  },
  "inputs": [],
}
"""
    config.write_text(text, encoding="utf-8")
    out = run(home, "vscode", "--watch", str(home / "notes"), "--write").stdout
    assert "not kept by this rewrite" in out
    written = json.loads(config.read_text(encoding="utf-8"))
    assert written["servers"]["files"]["args"][-1] == "http://localhost:1/x"
    assert written["servers"]["web"]["url"] == "https://example.com/mcp // not a comment"
    assert written["servers"]["pathweaver"]["type"] == "stdio" and written["inputs"] == []
    [bak] = backups(config)
    assert bak.read_text(encoding="utf-8") == text


def test_an_unparseable_file_is_an_error_and_nothing_is_written(home: Path) -> None:
    config = home / ".cursor/mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"mcpServers": {"files": ', encoding="utf-8")
    proc = run(home, "cursor", "--watch", str(home / "notes"), "--write", ok=False)
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr and "nothing was written" in proc.stderr
    assert config.read_text(encoding="utf-8") == '{"mcpServers": {"files": ' and backups(config) == []
    config.write_text('{"mcpServers": ["files"]}', encoding="utf-8")
    proc = run(home, "cursor", "--write", ok=False)
    assert "'mcpServers' is not an object" in proc.stderr


def test_an_explicit_store_config_and_name_are_used_and_a_changed_entry_is_updated(home: Path) -> None:
    config = home / "elsewhere.json"
    store = home / "stores" / "work"
    run(home, "windsurf", "--watch", str(home / "notes"), "--config", str(config), "--write", "--name", "pw")
    out = run(home, "windsurf", "--watch", str(home / "notes"), "--store", str(store), "--config", str(config),
              "--write", "--name", "pw").stdout
    assert "'pw' updated" in out and len(backups(config)) == 1
    args = json.loads(config.read_text())["mcpServers"]["pw"]["args"]
    assert args[args.index("--store") + 1] == str(store)


def test_a_missing_watch_folder_is_warned_about(home: Path) -> None:
    proc = run(home, "claude-desktop", "--watch", str(home / "absent"))
    assert "is not a folder" in proc.stderr and json.loads(proc.stdout)["mcpServers"]["pathweaver"]


def test_the_command_is_this_install() -> None:
    command = connect.server_command()
    assert Path(command[0]).is_absolute() and Path(command[0]).exists()
    assert command[1:] in ([], ["-m", "pathweaver.cli"])


def test_jsonc_keeps_strings_and_drops_comments_and_trailing_commas() -> None:
    text = '{"a": "x // y", "b": "/* z */", "c": "q\\"//", // c\n "d": [1, 2, /* x */ ], }'
    plain, removed = strip(text)
    assert removed and json.loads(plain) == {"a": "x // y", "b": "/* z */", "c": 'q"//', "d": [1, 2]}
    assert loads('{"a": [1, 2]}') == ({"a": [1, 2]}, False)
    with pytest.raises(JsoncError, match="line 2"):
        loads('{"a": 1,\n "b": }')
    with pytest.raises(JsoncError, match="never closed"):
        loads('{"a": 1 /* open')
