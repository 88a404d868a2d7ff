"""The exercise table as the grader reads it: which checks are judged outside the kernel.

Every process of the grading wing asks the same questions of ``autograder/checks/table.py``:
which check modules are converted (judged by the grader from the kernel's records), which
registry keys a test cell calls, which test cells of a notebook are judged that way, what the
graded kernel imports ahead. This module answers them, and reads the table without importing
the check library where that is not loaded yet (:func:`converted`).

Example: ``converted_keys(nbformat.read("source/01_attention/01_attention.ipynb", 4))``
gives ``{"test_softmax": ["attention.softmax"], ...}``.
"""

from __future__ import annotations

import importlib
import re
import sys
import threading
from pathlib import Path

from .cells import nbg as _nbg

HIDDEN_CALL = re.compile(r"""_?hidden_check\(\s*["']([\w.]+)["']""")
PACKAGE = Path(__file__).resolve().parent.parent  # the real autograder package


def converted() -> frozenset[str]:
    """The check modules judged this way: every chapter of the exercise table."""
    return frozenset(ch.module for ch in _table().TABLES.values())


# The check library in one thread at a time: a check module computes its expected values when
# imported, and some draw from torch's global generator, so two threads importing chapters
# together interleave their draws (a right answer read "output differs"). Importing, writing
# case inputs and judging hold this lock (a grading process imports in a thread while judging).
CHECKS = threading.RLock()


def chapter_tests() -> dict[str, frozenset[str]]:
    """{chapter: the grade ids of its test cells}, from the exercise table: which chapter a
    file holds (a test's id names its function, so no two chapters share one).

    >>> "ex2_1_softmax" in chapter_tests()["01_attention"]
    True
    """
    return {name: frozenset(e.grade_id for e in ch.exercises)
            for name, ch in _table().TABLES.items()}


def label(grade_id: str) -> str:
    """The exercise a test cell grades, as the chapter names it ("Exercise 2.2").

    >>> label("ex2_2_apply_rope"), label("weird")
    ('Exercise 2.2', 'the exercise weird')
    """
    m = re.fullmatch(r"ex(\d+)_(\d+)_\w+", grade_id)
    return f"Exercise {m[1]}.{m[2]}" if m else f"the exercise {grade_id}"


def _table():
    """``autograder/checks/table.py``: imported as ``autograder.checks.table`` it runs the check
    package first (torch and chapter 01's expected values, 2 s), so where that is not loaded
    yet the file is read on its own, under a private name, once (students start in threads)."""
    global _TABLE
    with _TABLE_LOCK:
        if _TABLE is None:
            _TABLE = sys.modules.get("autograder.checks.table") or _read_table()
        return _TABLE


_TABLE, _TABLE_LOCK = None, threading.Lock()


def _read_table():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "autograder._exercise_table", PACKAGE / "checks" / "table.py")
    table = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = table  # dataclasses look their module up while defining
    try:
        spec.loader.exec_module(table)
    finally:
        sys.modules.pop(spec.name, None)
    return table


def keys_in(source: str) -> list[str]:
    """Registry keys of the hidden checks a test cell calls.

    >>> keys_in('_hidden_check("attention.softmax", softmax)')
    ['attention.softmax']
    """
    return HIDDEN_CALL.findall(source)


def test_cells(nb) -> list:
    """The code cells of ``nb`` nbgrader grades (``grade: true``)."""
    return [c for c in nb.cells if _nbg(c).get("grade") and c.cell_type == "code"]


def converted_keys(nb) -> dict[str, list[str]]:
    """{grade_id: [keys]} of the test cells of source notebook ``nb`` judged outside the kernel:
    every one that calls a hidden check."""
    return {_nbg(c)["grade_id"]: keys for c in test_cells(nb) if (keys := keys_in(c.source))}


def get_check(key: str):
    """The check of registry key ``key`` (its chapter's module imported: hold :data:`CHECKS`)."""
    chapter = key.split(".")[0]
    importlib.import_module(f"autograder.checks.{chapter}")
    from autograder.checks._core import get_check as registered

    return registered(key)
