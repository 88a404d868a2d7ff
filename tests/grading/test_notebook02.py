"""Notebook 02 (masking) through the real grading path, once per test session.

One ``course-grade`` run grades three submissions of the chapter together: the student
release with every solution cell filled in from the source (must score full marks), the
release as handed out (must run end to end, score 0, every check "not implemented yet"), and
the filled-in release with one catalogued mistake (its exercise scores 0 and the feedback
names the mistake). The committed release must equal a fresh generation
(tests/unit/test_release.py checks every chapter's in one generation).

The run and the assertions are shared with notebooks 03's and 07's tests
(``helpers.chapters.graded_chapter_02``: one ``course-grade`` run grades the three chapters).
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

NAME = "02_masking"



@pytest.fixture(scope="session")
def chapter02(tmp_path_factory):
    return graded_chapter_02(tmp_path_factory, NAME)


def test_solution_full_marks_release_zero_and_mistake_named(chapter02):
    assert_chapter_graded_correctly(chapter02, NAME, MISTAKES[NAME])


def test_first_release_graded_with_full_marks(chapter02):
    """The chapter as a student fetched it from its first release, answered (issue 47): its
    exercises never changed, so full marks, and its rows say nothing about an edit."""
    check_earlier_release(chapter02)


def test_release_executes_end_to_end_saying_not_implemented_yet(chapter02):
    assert chapter02["returncode"] == 0, chapter02["stderr"]
    assert_release_runs_end_to_end(chapter02["out"], NAME)


def test_notebook_runs_in_under_two_minutes(chapter02):
    assert chapter02["returncode"] == 0, chapter02["stderr"]
    assert_fast(chapter02["out"])
