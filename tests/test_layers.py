"""Imports point down the layers of docs/architecture.md: an AST walk over every module of src/pathweaver."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "pathweaver"

# Lowest first; a module may import its own layer and the layers below it (docs/architecture.md, "Layers").
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("config", "text", "numeric", "results", "locations", "jsonc"),
    ("store", "models"),
    ("extract",),
    ("ingest",),
    ("retrieval", "viz"),
    ("planner", "extractive", "answer"),
    ("service", "doctor"),
    ("cli", "cli_output", "server", "eval", "config_template", "export", "demo", "connect"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
# The facade: only the applications on top reach the service.
SERVICE_USERS = ("pathweaver.cli", "pathweaver.server", "pathweaver.eval")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path) -> set[str]:
    """Every pathweaver module ``path`` imports, at the top or inside a function (TYPE_CHECKING included)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "pathweaver" or node.module is None:
                found.update(f"{target}.{alias.name}" for alias in node.names)
            else:
                found.add(target)
    return {m for m in found if m == "pathweaver" or m.startswith("pathweaver.")}


def layer(module: str) -> str:
    """The top-level unit of ``pathweaver.x.y``: ``x``."""
    return module.split(".")[1] if module.count(".") else ""


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_unit_has_a_layer() -> None:
    units = {layer(module_name(path)) for path in MODULES} - {""}
    assert units <= set(RANK), f"add to LAYERS (and docs/architecture.md): {sorted(units - set(RANK))}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_down(path: Path) -> None:
    name = module_name(path)
    unit = layer(name)
    up = []
    for target in sorted(imported(path)):
        other = layer(target)
        if not other or not unit:
            continue
        if RANK[other] > RANK[unit]:
            up.append(f"{target} (layer {RANK[other]} > {RANK[unit]})")
        if other == "service" and unit != "service" and not name.startswith(SERVICE_USERS):
            up.append(f"{target} (only {', '.join(SERVICE_USERS)} use the facade)")
    assert not up, f"{name} imports up: {up}"


def test_the_walk_sees_relative_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    module = PACKAGE / "server" / "app.py"
    assert "pathweaver.service" in imported(module)
    assert any(target.startswith("pathweaver.numeric") for target in imported(PACKAGE / "extract" / "synonyms.py"))
