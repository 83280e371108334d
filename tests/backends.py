"""Settings for a store location that the ``backend`` fixture (conftest.py) gives: a directory or a postgresql://
URL."""

from __future__ import annotations

from pathlib import Path

from pathweaver.config import Settings


def store_settings(location: Path | str, settings: Settings | None = None) -> Settings:
    """``settings`` (new ones by default) pointed at the store ``location``."""
    s = settings if settings is not None else Settings()
    if str(location).startswith("postgresql://"):
        s.store_url = str(location)
    else:
        s.store_dir = Path(location)
    return s


def is_pg(location: Path | str) -> bool:
    return str(location).startswith("postgresql://")
