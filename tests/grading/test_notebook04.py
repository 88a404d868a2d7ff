"""Notebook 04 (layer norm) through the real grading path, once per test session.

One ``course-grade`` run grades three submissions built from the committed notebooks: the
solution (full marks), the student release as handed out (0 points, every check "not
implemented yet"), and the solution with one catalogued mistake (less than full marks on that
exercise, and the feedback names the mistake). The committed release must equal a fresh
generation (tests/unit/test_release.py, every chapter). ``graded_chapter`` is shared with the tests
of notebooks 05, 06 and 08: that one run grades all four chapters (``CHAPTERS``).

Grading does not run demonstration cells (``autograder/grading/autograde/demo.py``): what
they show is proven on the notebook as ``course-check`` runs it (``executed_chapter``).
"""

from __future__ import annotations

import nbformat
import pytest

from helpers.chapters import (
    MISTAKES,
    SOURCE,
    check_chapter,
    check_earlier_release,
    graded_chapter_04,
)

ASSIGNMENT = "04_layer_norm"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return graded_chapter_04(tmp_path_factory, ASSIGNMENT)


def test_grading_path_proofs(graded):
    check_chapter(graded, MISTAKES[ASSIGNMENT])


def test_first_release_graded_with_full_marks(graded):
    """The chapter as a student fetched it from its first release, answered (issue 47): its
    exercises never changed, so full marks, and its rows say nothing about an edit."""
    check_earlier_release(graded)


def test_points_in_the_title_cell_add_up():
    nb = nbformat.read(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    points = [c.metadata.nbgrader["points"] for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")]
    assert f"Points: {sum(points):g} in total" in nb.cells[0].source


def test_every_check_is_called_with_its_hidden_key_in_the_source():
    from autograder.checks import layer_norm
    from autograder.checks._core import registered

    nb = nbformat.read(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    keys = [k for k in registered() if k.startswith("layer_norm.")]
    assert len(keys) == len(layer_norm.__all__)
    for k in keys:
        assert f'_hidden_check("{k}"' in text, k
