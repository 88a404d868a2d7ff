"""Notebook 06 (the full Transformer) through the real grading path, once per session.

Solution, release and one catalogued mistake are graded in one ``course-grade`` run (see
``helpers.chapters.graded_chapter_04``); the committed release must equal a fresh generation
(tests/unit/test_release.py). The reversal training cell (section 5) is a demonstration cell:
grading does not run it, and the solution as ``course-check`` runs it must reach 99% exact
match.
"""

from __future__ import annotations

import nbformat
import pytest

from helpers.chapters import (
    MISTAKES,
    SOURCE,
    check_chapter,
    check_earlier_release,
    executed_chapter,
    graded_chapter_04,
    warnings_in_course_cells,
)

ASSIGNMENT = "06_transformer"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return graded_chapter_04(tmp_path_factory, ASSIGNMENT)


def test_grading_path_proofs(graded):
    check_chapter(graded, MISTAKES[ASSIGNMENT])


def test_earlier_release_graded_on_its_own_exercises(graded):
    """The chapter as released before Exercise 2.2 was added (issue 47)."""
    check_earlier_release(graded, "2.2")


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    return executed_chapter(tmp_path_factory, ASSIGNMENT)


def test_training_cell_reaches_99_percent_in_the_executed_solution(executed):
    cells = [c for c in executed.cells
             if c.cell_type == "code" and "reversal_batch(128)" in c.source]
    assert len(cells) == 1
    text = "".join(o.get("text", "") for o in cells[0].outputs)
    last = [ln for ln in text.splitlines() if "exact match" in ln][-1]
    assert float(last.rsplit(" ", 1)[1].rstrip("%")) >= 99.0, text
    assert "trained in" in text


def test_points_and_hidden_keys_in_the_source():
    from autograder.checks import transformer
    from autograder.checks._core import registered

    nb = nbformat.read(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    points = [c.metadata.nbgrader["points"] for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")]
    assert f"Points: {sum(points):g} in total" in nb.cells[0].source
    text = "\n".join(c.source for c in nb.cells)
    keys = [k for k in registered() if k.startswith("transformer.")]
    assert len(keys) == len(transformer.__all__)
    for k in keys:
        assert f'_hidden_check("{k}"' in text, k


def test_course_cells_print_no_warnings(graded, executed):
    """Issue 18 trial: a course cell's deprecation warning (06: imshow of a tensor, 08: ax.bar
    of a tensor) lands in every student's feedback (graded) or notebook (executed)."""
    assert warnings_in_course_cells(graded["autograded"]["solution"]) == []
    assert warnings_in_course_cells(executed) == []
