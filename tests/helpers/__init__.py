"""What the tests share: class builders, graded classes, answers written as a student would."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def session_dir(tmp_path_factory) -> Path:
    """A folder every xdist worker of this test session sees (the session's caches)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "run")
        base = base.parent / f"shared-{run}"
    base.mkdir(parents=True, exist_ok=True)
    return base


# The session's class templates (``synthetic_class.shared.template``); tests/conftest.py sets it.
TEMPLATES: Path | None = None
