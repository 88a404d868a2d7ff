"""Issue 14's attacks on chapters 03, 05 and 06, graded once in the sandbox with trusted
verdicts (see ``tests/helpers/adversarial/modules_class.py`` for the students and their rows)."""

from __future__ import annotations

import pytest

from autograder.grading.sandbox import bwrap_path

from helpers.adversarial.graded import graded_once, mismatch
from helpers.adversarial.modules_class import ASSIGNMENTS, ModulesAttackBuilder, Row


@pytest.fixture(scope="session")
def modules_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    args = ("--workers", "2", "--cell-timeout", "120", "--timeout", "900",
            "--memory", "3072", "--assignment", *ASSIGNMENTS)
    return graded_once(
        tmp_path_factory, "verdict-modules-class", list(ASSIGNMENTS),
        lambda info, root: ModulesAttackBuilder({a: info[a][0] for a in ASSIGNMENTS}).build(
            root / "class"),
        args, row=Row)


def test_class_graded_in_the_sandbox(modules_class):
    assert modules_class["returncode"] == 0, modules_class["stderr"]
    assert "runner: bubblewrap sandbox" in modules_class["stderr"]


@pytest.mark.parametrize("student", ["attacker"])
def test_every_row_exact(modules_class, student):
    rows = {r["exercise"]: r for r in modules_class["rows"] if r["student"] == student}
    expected = modules_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


def test_feedback_names_the_reference(modules_class):
    html = (modules_class["out"] / "feedback" / "attacker" / "06_transformer" /
            "06_transformer.html").read_text()
    assert "decided outside your notebook" in html
    # sinusoidal_encoding called the reference: the kernel's copy has no code for it
    assert "reference implementation, which the graded kernel does not have" in html
    assert "compute it from its parts" in html
