"""The official MCP Inspector (CLI mode) can list and call pathweaver's tools over stdio.

The inspector is installed once into a local node_modules (``$PATHWEAVER_INSPECTOR_DIR``, default
``<tmp>/pw-inspector``); the test is skipped, with the reason printed, when npm/npx are missing or the install fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from test_server_stdio import OFFLINE_ENV, serve_args, server_env, write_notes

PACKAGE = "@modelcontextprotocol/inspector"
INSTALL_TIMEOUT_S = 300
CALL_TIMEOUT_S = 180


def inspector_dir() -> Path:
    return Path(os.environ.get("PATHWEAVER_INSPECTOR_DIR", Path(tempfile.gettempdir()) / "pw-inspector"))


def ensure_inspector() -> Path:
    """The folder whose node_modules holds the inspector; installs it there once."""
    if not (shutil.which("npm") and shutil.which("npx")):
        reason = "npm/npx not found; install Node.js to run the MCP Inspector check"
        print(reason)
        pytest.skip(reason)
    folder = inspector_dir()
    if not (folder / "node_modules" / PACKAGE / "package.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), PACKAGE],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
        )
        if done.returncode != 0:
            reason = f"could not install {PACKAGE}: {done.stderr.strip()[-300:]}"
            print(reason)
            pytest.skip(reason)
    return folder


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = ensure_inspector()
    base = tmp_path_factory.mktemp("inspector")
    notes = write_notes(base / "notes")
    return {"cwd": folder, "store": base / "store", "notes": notes}


def inspect(setup: dict[str, Any], *method_args: str) -> dict[str, Any]:
    env_flags = [flag for key, value in OFFLINE_ENV.items() for flag in ("-e", f"{key}={value}")]
    cmd = [
        "npx", "-y", PACKAGE, "--cli", *env_flags,
        sys.executable, *serve_args(setup["store"], [setup["notes"]]),
        *method_args,
    ]
    done = subprocess.run(
        cmd, cwd=setup["cwd"], env=server_env(), capture_output=True, text=True, timeout=CALL_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout[done.stdout.index("{") :])


def test_inspector_lists_tools(setup: dict[str, Any]) -> None:
    out = inspect(setup, "--method", "tools/list")
    tools = {t["name"]: t for t in out["tools"]}
    assert {"decompose_query", "retrieve_paths", "build_mcmi", "answer", "index_status"} <= set(tools)
    assert tools["retrieve_paths"]["inputSchema"]["properties"]["top_nodes"].get("default") is None
    assert "outputSchema" in tools["search"]


def test_inspector_calls_a_tool(setup: dict[str, Any]) -> None:
    out = inspect(setup, "--method", "tools/call", "--tool-name", "index_status")
    assert out["isError"] is False
    status = out["structuredContent"]
    assert status["roots"] == [str(setup["notes"].resolve())]
    assert set(status) >= {"stats", "indexing", "watched", "skipped"}
