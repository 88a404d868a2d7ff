"""Chapters 02 (masking) and 07 (BPE) graded in the sandbox with trusted verdicts: a few
students each, every CSV row exact.

See ``tests/helpers/adversarial/masking_class.py`` and
``tests/helpers/adversarial/bpe_class.py`` for the students and what each must get. Both
classes are graded in one ``course-grade`` run (``--assignment 02_masking 07_bpe``, the same
limits as each alone): each student hands in its own chapter's notebook only, so its rows of
the other chapter say the notebook was not handed in, and each chapter's tests read that
chapter's rows.
"""

from __future__ import annotations

import pytest

from autograder.grading.status import Kind, row_kind

from helpers.adversarial.bpe_class import BpeClassBuilder
from helpers.adversarial.graded import (
    assert_graded_in_sandbox,
    assert_rows_exact,
    feedback_page,
    graded_once,
    need_bwrap,
)
from helpers.adversarial.masking_class import MaskingClassBuilder

CLASSES = {
    "02_masking": (MaskingClassBuilder, ["different", "mistakes", "thread_sdpa"]),
    "07_bpe": (BpeClassBuilder, ["given_redefined", "reference"]),
}
ROWS = [(a, s) for a, (_, students) in CLASSES.items() for s in students]
ARGS = ("--workers", "2", "--cell-timeout", "60", "--timeout", "600", "--memory", "3072",
        "--assignment", *sorted(CLASSES))


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    need_bwrap()

    def build(info, root):
        expected = {}
        for assignment, (make, _) in CLASSES.items():
            rows = make(info[assignment][0]).build_attacks(root / "class")
            assert not set(rows) & set(expected), "a student in both classes"
            expected.update(rows)
        return expected

    whole = graded_once(tmp_path_factory, "verdict-class-02-07", sorted(CLASSES), build, ARGS)

    def get(assignment):
        """The run's record with ``rows``: the CSV rows of ``assignment``'s notebook (every
        student's), ``all_rows``: the whole CSV."""
        return dict(whole, all_rows=whole["rows"],
                    rows=[r for r in whole["rows"] if r["notebook"] == assignment])

    return get


@pytest.mark.parametrize("assignment", sorted(CLASSES))
def test_class_graded_in_the_sandbox(graded, assignment):
    result = graded(assignment)
    assert_graded_in_sandbox(result)
    # the CSV holds both classes' students, no other; of this chapter's notebook only this
    # class's students handed one in (the others' rows: not handed in)
    assert {r["student"] for r in result["all_rows"]} == {s for _, s in ROWS}
    assert {r["student"] for r in result["rows"] if row_kind(r) is not Kind.NOT_SUBMITTED} == \
        set(CLASSES[assignment][1])


@pytest.mark.parametrize("assignment,student", ROWS)
def test_every_row_exact(graded, assignment, student):
    assert_rows_exact(graded(assignment), student)


def test_feedback_shows_the_trusted_verdict(graded):
    page = feedback_page(graded("02_masking"), "mistakes", "02_masking")
    assert "decided outside your notebook" in page
    assert "Likely mistake: mask applied after the softmax" in page
