"""Issue 14's notebook-01 attacks, graded once in the sandbox with trusted verdicts.

See ``tests/helpers/adversarial/verdict_class.py`` for the students and what each must get. Every
CSV row is checked for its exact points and status, the start of its diagnosis, and its
``flagged`` column; the feedback shows the grader's verdict, not the kernel's. The class is
graded in one run with test_dodge_class.py's students (``helpers.adversarial.attention_attacks``:
the same notebook and limits); these tests read this class's rows.
"""

from __future__ import annotations

import pytest

from helpers.adversarial.attention_attacks import assert_class_in_the_run, graded_attention_attacks
from helpers.adversarial.graded import assert_rows_exact, feedback_page

ASSIGNMENT = "01_attention"
STUDENTS = ["correct", "time_transformer", "getattr_alias", "hex_exec", "torch_library",
            "frames", "above_setup", "thread_builtin", "near_miss", "flags_changed"]


@pytest.fixture(scope="session")
def verdict_class(tmp_path_factory):
    return graded_attention_attacks(tmp_path_factory)


def test_class_graded_in_the_sandbox(verdict_class):
    assert_class_in_the_run(verdict_class, "verdict", STUDENTS)


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(verdict_class, student):
    assert_rows_exact(verdict_class, student)


def test_feedback_shows_the_trusted_verdict(verdict_class):
    near = feedback_page(verdict_class, "near_miss", ASSIGNMENT)
    assert "decided outside your notebook" in near
    assert "different random generators" in near  # d_k * 1.001 is not a measurement
    thread = feedback_page(verdict_class, "thread_builtin", ASSIGNMENT)
    assert "in any" in thread and "softmax" in thread
    correct = feedback_page(verdict_class, "correct", ASSIGNMENT)
    assert "all 14 cases match the reference (5 of them hidden)" in correct
