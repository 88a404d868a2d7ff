"""Notebook 08's attacks graded once in the sandbox with trusted verdicts (drivers in the
kernel, verdicts in the grader). See ``tests/helpers/adversarial/training_class.py`` for
the students and what each row must show: exact points and status, the start of the
diagnosis, and the ``flagged`` column.
"""

from __future__ import annotations

import pytest

from helpers.adversarial.graded import (
    assert_graded_in_sandbox,
    assert_rows_exact,
    feedback_page,
    graded_attack_class,
    need_bwrap,
)
from helpers.adversarial.training_class import TrainingAttackBuilder

ASSIGNMENT = "08_training"
STUDENTS = ["correct", "reference"]


@pytest.fixture(scope="session")
def training_class(tmp_path_factory):
    need_bwrap()
    return graded_attack_class(tmp_path_factory, "verdict-class-08", ASSIGNMENT,
                               TrainingAttackBuilder, cell_timeout=300,
                               timeout=900)


def test_class_graded_in_the_sandbox(training_class):
    assert_graded_in_sandbox(training_class)
    assert {r["student"] for r in training_class["rows"]} == set(STUDENTS)


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(training_class, student):
    assert_rows_exact(training_class, student)


def test_feedback_shows_the_trusted_verdict(training_class):
    page = feedback_page(training_class, "reference", ASSIGNMENT)
    assert "decided outside your notebook" in page
    # get_batch called the reference: the kernel's copy has no code for it
    assert "reference implementation, which the graded kernel does not have" in page
    assert "different random generators" in page
