"""Notebook 05 (feed-forward and blocks) through the real grading path, once per session.

Solution, release and one catalogued mistake are graded in one ``course-grade`` run (see
``helpers.chapters.graded_chapter_04``); the committed release must equal a fresh generation
(tests/unit/test_release.py).
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

ASSIGNMENT = "05_feed_forward_blocks"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return graded_chapter_04(tmp_path_factory, ASSIGNMENT)


def test_grading_path_proofs(graded):
    check_chapter(graded, MISTAKES[ASSIGNMENT])


def test_first_release_graded_with_full_marks(graded):
    """The chapter as a student fetched it from its first release, answered (issue 47): its
    exercises never changed, so full marks, and its rows say nothing about an edit."""
    check_earlier_release(graded)


def test_points_and_hidden_keys_in_the_source():
    from autograder.checks import feed_forward_blocks
    from autograder.checks._core import registered

    nb = nbformat.read(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    points = [c.metadata.nbgrader["points"] for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")]
    assert f"Points: {sum(points):g} in total" in nb.cells[0].source
    text = "\n".join(c.source for c in nb.cells)
    keys = [k for k in registered() if k.startswith("feed_forward_blocks.")]
    assert len(keys) == len(feed_forward_blocks.__all__)
    for k in keys:
        assert f'_hidden_check("{k}"' in text, k
