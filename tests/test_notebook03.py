"""Notebook 03 (multi-head attention) through the real grading path, once per test session.

Same proofs as notebook 02 (helpers imported from ``test_notebook02``): the filled-in
release scores full marks, the release runs end to end and scores 0 with every check saying
"not implemented yet", a submission with one catalogued mistake (W_O forgotten) loses that
exercise and its feedback names the mistake, and the notebook grades in under 2 minutes (that
the committed release equals a fresh generation: tests/test_release.py, every chapter).
"""

from __future__ import annotations

import pytest
from test_notebook02 import (
    assert_chapter_graded_correctly,
    assert_fast,
    assert_release_runs_end_to_end,
    graded_chapter,
)

from autograder.checks import table

EX = table.rows("03_multihead_attention")  # {function: exercise row} of the chapter

NAME = "03_multihead_attention"
WRONG = (
    EX["multi_head_attention"].solution_id,
    "    return merge_heads(heads) @ W_O  # (B, T_q, H*d_k) @ (H*d_k, d_model)\n",
    "    return merge_heads(heads)\n",
    EX["multi_head_attention"].grade_id,
    "forgot W_O",
)


@pytest.fixture(scope="session")
def chapter03(tmp_path_factory):
    return graded_chapter(tmp_path_factory, NAME, WRONG)


@pytest.mark.slow
def test_solution_full_marks_release_zero_and_mistake_named(chapter03):
    assert_chapter_graded_correctly(chapter03, NAME, WRONG)


@pytest.mark.slow
def test_release_executes_end_to_end_saying_not_implemented_yet(chapter03):
    assert chapter03["returncode"] == 0, chapter03["stderr"]
    assert_release_runs_end_to_end(chapter03["out"], NAME)


@pytest.mark.slow
def test_notebook_runs_in_under_two_minutes(chapter03):
    assert chapter03["returncode"] == 0, chapter03["stderr"]
    assert_fast(chapter03["out"])
