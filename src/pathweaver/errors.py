"""The exception types that mean "the user can fix this": printed as one line, never as a traceback."""

from __future__ import annotations

import importlib

from pathweaver.config import ConfigError

# (module, class) pairs, imported lazily so the CLI stays fast and layers stay independent.
_USER_ERRORS = (
    ("pathweaver.store.db", "StoreError"),
    ("pathweaver.planner.decompose", "PlanError"),
)


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception classes whose message is enough for the user (config, store, plan validation, missing files)."""
    found: list[type[BaseException]] = [ConfigError, FileNotFoundError, NotADirectoryError, PermissionError]
    for module_name, cls_name in _USER_ERRORS:
        try:
            found.append(getattr(importlib.import_module(module_name), cls_name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)
