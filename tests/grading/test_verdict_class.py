"""Issue 14's notebook-01 attacks, graded once in the sandbox with trusted verdicts.

See ``tests/helpers/adversarial/verdict_class.py`` for the students and what each must get. Every
CSV row is checked for its exact points and status, the start of its diagnosis, and its
``flagged`` column; the feedback shows the grader's verdict, not the kernel's. The class is
graded in one run with test_dodge_class.py's students (``helpers.adversarial.attention_attacks``:
the same notebook and limits); these tests read this class's rows.
"""

from __future__ import annotations

import pytest

from autograder.grading.sandbox import bwrap_path

from helpers.adversarial.attention_attacks import graded_attention_attacks
from helpers.adversarial.graded import mismatch

ASSIGNMENT = "01_attention"
STUDENTS = ["correct", "time_transformer", "getattr_alias", "hex_exec", "torch_library",
            "frames", "above_setup", "thread_builtin", "near_miss", "flags_changed"]


@pytest.fixture(scope="session")
def verdict_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    return graded_attention_attacks(tmp_path_factory)


def test_class_graded_in_the_sandbox(verdict_class):
    assert verdict_class["returncode"] == 0, verdict_class["stderr"]
    assert "runner: bubblewrap sandbox" in verdict_class["stderr"]
    assert verdict_class["classes"]["verdict"] == sorted(STUDENTS)
    # the CSV holds every student of the run (this class's and test_dodge_class's), no other
    assert set(STUDENTS) <= set(verdict_class["expected"])
    assert {r["student"] for r in verdict_class["rows"]} == set(verdict_class["expected"])


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(verdict_class, student):
    rows = {r["exercise"]: r for r in verdict_class["rows"] if r["student"] == student}
    expected = verdict_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


def test_feedback_shows_the_trusted_verdict(verdict_class):
    out = verdict_class["out"] / "feedback"
    near = (out / "near_miss" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "decided outside your notebook" in near
    assert "different random generators" in near  # d_k * 1.001 is not a measurement
    thread = (out / "thread_builtin" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "in any" in thread and "softmax" in thread
    correct = (out / "correct" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "all 14 cases match the reference (5 of them hidden)" in correct
