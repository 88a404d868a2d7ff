"""Helpers for nbgrader's gradebook that every process of the grading wing may import (a leaf:
it imports nothing of the course's)."""

from __future__ import annotations

import contextlib
import warnings


@contextlib.contextmanager
def quiet_sqlalchemy():
    """Silence SQLAlchemy's autoflush warnings that nbgrader's own gradebook code triggers."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module="nbgrader")
        warnings.filterwarnings("ignore", message=".*not in session.*")
        yield
