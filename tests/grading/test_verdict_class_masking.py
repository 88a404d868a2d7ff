"""Chapters 02 (masking) and 07 (BPE) graded in the sandbox with trusted verdicts: a few
students each, every CSV row exact.

See ``tests/helpers/adversarial/masking_class.py`` and
``tests/helpers/adversarial/bpe_class.py`` for the students and what each must get.
"""

from __future__ import annotations

import pytest

from autograder.grading.sandbox import bwrap_path

from helpers.adversarial.bpe_class import BpeClassBuilder
from helpers.adversarial.graded import graded_attack_class, mismatch
from helpers.adversarial.masking_class import MaskingClassBuilder

CLASSES = {
    "02_masking": (MaskingClassBuilder, ["different", "mistakes", "thread_sdpa"]),
    "07_bpe": (BpeClassBuilder, ["given_redefined", "reference"]),
}
ROWS = [(a, s) for a, (_, students) in CLASSES.items() for s in students]


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    done = {}

    def get(assignment):
        if assignment not in done:
            done[assignment] = graded_attack_class(
                tmp_path_factory, f"verdict-class-{assignment}", assignment,
                CLASSES[assignment][0])
        return done[assignment]

    return get


@pytest.mark.parametrize("assignment", sorted(CLASSES))
def test_class_graded_in_the_sandbox(graded, assignment):
    result = graded(assignment)
    assert result["returncode"] == 0, result["stderr"]
    assert "runner: bubblewrap sandbox" in result["stderr"]
    assert {r["student"] for r in result["rows"]} == set(CLASSES[assignment][1])


@pytest.mark.parametrize("assignment,student", ROWS)
def test_every_row_exact(graded, assignment, student):
    result = graded(assignment)
    rows = {r["exercise"]: r for r in result["rows"] if r["student"] == student}
    expected = result["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


def test_feedback_shows_the_trusted_verdict(graded):
    out = graded("02_masking")["out"] / "feedback"
    page = (out / "mistakes" / "02_masking" / "02_masking.html").read_text()
    assert "decided outside your notebook" in page
    assert "Likely mistake: mask applied after the softmax" in page
