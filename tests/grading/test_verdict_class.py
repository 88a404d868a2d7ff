"""Issue 14's notebook-01 attacks, graded once in the sandbox with trusted verdicts.

See ``tests/helpers/adversarial/verdict_class.py`` for the students and what each must get. Every
CSV row is checked for its exact points and status, the start of its diagnosis, and its
``flagged`` column; the feedback shows the grader's verdict, not the kernel's.
"""

from __future__ import annotations

import pytest

from autograder.grading.sandbox import bwrap_path

from helpers.adversarial.graded import graded_attack_class, mismatch
from helpers.adversarial.verdict_class import VerdictAttackBuilder

ASSIGNMENT = "01_attention"
STUDENTS = ["correct", "time_transformer", "getattr_alias", "hex_exec", "torch_library",
            "frames", "above_setup", "thread_builtin", "near_miss", "flags_changed"]


@pytest.fixture(scope="session")
def verdict_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    return graded_attack_class(tmp_path_factory, "verdict-class", ASSIGNMENT,
                               VerdictAttackBuilder)


def test_class_graded_in_the_sandbox(verdict_class):
    assert verdict_class["returncode"] == 0, verdict_class["stderr"]
    assert "runner: bubblewrap sandbox" in verdict_class["stderr"]
    assert sorted(verdict_class["expected"]) == sorted(STUDENTS)
    assert {r["student"] for r in verdict_class["rows"]} == set(STUDENTS)


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
