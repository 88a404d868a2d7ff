"""nbgrader's cell metadata, read the same way everywhere (``cell.metadata.nbgrader``).

nbgrader's own ``nbgrader.utils.is_grade``/``is_locked`` expect a well-formed notebook; these
read submitted notebooks too, where a student may have changed or broken the metadata (a
missing, empty or non-dict ``nbgrader`` entry reads as "an ordinary cell"). Works on
``nbformat`` cells and on plain dicts from ``json.load``; imports nothing heavy (``selfcheck``
runs it in the student's kernel).

>>> cell = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": "t1"}}}
>>> nbg(cell)["grade_id"], is_test(cell), is_locked(cell), is_answer(cell)
('t1', True, True, False)
"""

from __future__ import annotations


def nbg(cell) -> dict:
    """The cell's ``nbgrader`` metadata, ``{}`` when there is none (or it is not a dict)."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    found = meta.get("nbgrader") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def grade_id(cell) -> str | None:
    return nbg(cell).get("grade_id")


def is_test(cell) -> bool:
    """An autograded test cell (``grade: true``)."""
    return bool(nbg(cell).get("grade"))


def is_answer(cell) -> bool:
    """A cell the student writes (``solution: true``) that is not itself graded as a test."""
    meta = nbg(cell)
    return bool(meta.get("solution")) and not meta.get("grade")


def is_locked(cell) -> bool:
    """Source restored from the course by nbgrader: a test or locked cell, not an answer
    (as ``nbgrader.utils.is_locked``)."""
    meta = nbg(cell)
    return bool(meta.get("grade") or meta.get("locked")) and not meta.get("solution")
