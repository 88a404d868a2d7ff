"""Notebook 03 (multi-head attention) through the real grading path, once per test session.

Same proofs as notebook 02 (the helpers of ``helpers.chapters``): the filled-in
release scores full marks, the release runs end to end and scores 0 with every check saying
"not implemented yet", a submission with one catalogued mistake (W_O forgotten) loses that
exercise and its feedback names the mistake, and the notebook grades in under 2 minutes (that
the committed release equals a fresh generation: tests/unit/test_release.py, every chapter).
"""

from __future__ import annotations

import pytest

from helpers.chapters import (
    MISTAKES,
    assert_chapter_graded_correctly,
    assert_fast,
    assert_release_runs_end_to_end,
    check_earlier_release,
    graded_chapter_02,
)

NAME = "03_multihead_attention"


@pytest.fixture(scope="session")
def chapter03(tmp_path_factory):
    return graded_chapter_02(tmp_path_factory, NAME)


def test_solution_full_marks_release_zero_and_mistake_named(chapter03):
    assert_chapter_graded_correctly(chapter03, NAME, MISTAKES[NAME])


def test_first_release_graded_with_full_marks(chapter03):
    """The chapter as a student fetched it from its first release, answered (issue 47): its
    exercises never changed, so full marks, and its rows say nothing about an edit."""
    check_earlier_release(chapter03)


def test_release_executes_end_to_end_saying_not_implemented_yet(chapter03):
    assert chapter03["returncode"] == 0, chapter03["stderr"]
    assert_release_runs_end_to_end(chapter03["out"], NAME)


def test_notebook_runs_in_under_two_minutes(chapter03):
    assert chapter03["returncode"] == 0, chapter03["stderr"]
    assert_fast(chapter03["out"])
