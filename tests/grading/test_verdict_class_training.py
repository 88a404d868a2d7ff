"""Notebook 08's attacks graded once in the sandbox with trusted verdicts (drivers in the
kernel, verdicts in the grader). See ``tests/helpers/adversarial/training_class.py`` for
the students and what each row must show: exact points and status, the start of the
diagnosis, and the ``flagged`` column.
"""

from __future__ import annotations

import pytest

from autograder.grading.sandbox import bwrap_path

from helpers.adversarial.graded import graded_attack_class, mismatch
from helpers.adversarial.training_class import TrainingAttackBuilder

ASSIGNMENT = "08_training"
STUDENTS = ["correct", "reference"]


@pytest.fixture(scope="session")
def training_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    return graded_attack_class(tmp_path_factory, "verdict-class-08", ASSIGNMENT,
                               TrainingAttackBuilder, cell_timeout=300,
                               timeout=900)


def test_class_graded_in_the_sandbox(training_class):
    assert training_class["returncode"] == 0, training_class["stderr"]
    assert "runner: bubblewrap sandbox" in training_class["stderr"]
    assert {r["student"] for r in training_class["rows"]} == set(STUDENTS)


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(training_class, student):
    rows = {r["exercise"]: r for r in training_class["rows"] if r["student"] == student}
    expected = training_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


def test_feedback_shows_the_trusted_verdict(training_class):
    out = training_class["out"] / "feedback"
    page = (out / "reference" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "decided outside your notebook" in page
    # get_batch called the reference: the kernel's copy has no code for it
    assert "reference implementation, which the graded kernel does not have" in page
    assert "different random generators" in page
