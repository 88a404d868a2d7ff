"""Issue 14's attacks on chapters 03, 05 and 06, graded once in the sandbox with trusted
verdicts (see ``tests/helpers/adversarial/modules_class.py`` for the students and their rows)."""

from __future__ import annotations

import pytest

from helpers.adversarial.graded import (
    assert_graded_in_sandbox,
    assert_rows_exact,
    feedback_page,
    graded_once,
    need_bwrap,
)
from helpers.adversarial.modules_class import ASSIGNMENTS, ModulesAttackBuilder, Row


@pytest.fixture(scope="session")
def modules_class(tmp_path_factory):
    need_bwrap()
    args = ("--workers", "2", "--cell-timeout", "120", "--timeout", "900",
            "--memory", "3072", "--assignment", *ASSIGNMENTS)
    return graded_once(
        tmp_path_factory, "verdict-modules-class", list(ASSIGNMENTS),
        lambda info, root: ModulesAttackBuilder({a: info[a][0] for a in ASSIGNMENTS}).build(
            root / "class"),
        args, row=Row)


def test_class_graded_in_the_sandbox(modules_class):
    assert_graded_in_sandbox(modules_class)


@pytest.mark.parametrize("student", ["attacker"])
def test_every_row_exact(modules_class, student):
    assert_rows_exact(modules_class, student)


def test_feedback_names_the_reference(modules_class):
    html = feedback_page(modules_class, "attacker", "06_transformer")
    assert "decided outside your notebook" in html
    # sinusoidal_encoding called the reference: the kernel's copy has no code for it
    assert "reference implementation, which the graded kernel does not have" in html
    assert "compute it from its parts" in html
