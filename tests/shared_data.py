"""Where tests find the shared evaluation data: ``$PATHWEAVER_DATA``, else ``../shared/data`` beside the repository.
Tests that need it skip with ``needs_data``'s reason when neither holds it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PATHWEAVER_DATA") or REPO.parent / "shared" / "data")
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"evaluation data not found at {DATA} (set PATHWEAVER_DATA to its folder)")
