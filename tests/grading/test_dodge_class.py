"""Issue 30's notebook-01 attacks, graded once in the sandbox.

See ``tests/helpers/adversarial/dodge_class.py`` for the students and what each must get. Every
CSV row is checked for its exact points and status (a status prefix or pattern where the
builder says so), the start of its diagnosis and its ``flagged`` column; the filler's share of
the output folder and the time the hidden-cells notebook took are measured after grading. The
class is graded in one run with test_verdict_class.py's students
(``helpers.adversarial.attention_attacks``: the same notebook and limits); these tests read this
class's rows.
"""

from __future__ import annotations

import pytest

from helpers.adversarial.attention_attacks import assert_class_in_the_run, graded_attention_attacks
from helpers.adversarial.dodge_class import FILLER_SLACK, HIDDEN_SECONDS, mismatch
from helpers.adversarial.graded import assert_rows_exact

STUDENTS = ["correct", "rewrite_records", "rewrite_mutated", "filler", "fake_log_block",
            "raise_memory", "exit_kernel", "display_flood", "malformed_records",
            "forged_record", "hidden_cells", "jitter_stat"]
# issue 47's routes around the record channel and "from scratch" (helpers.adversarial.route_class)
ROUTE_STUDENTS = ["forged_interrupt", "probe_routes"]


@pytest.fixture(scope="session")
def dodge_class(tmp_path_factory):
    return graded_attention_attacks(tmp_path_factory)


def test_class_graded_in_the_sandbox(dodge_class):
    assert_class_in_the_run(dodge_class, "dodge", STUDENTS)
    assert dodge_class["classes"]["routes"] == sorted(ROUTE_STUDENTS)


@pytest.mark.parametrize("student", STUDENTS + ROUTE_STUDENTS)
def test_every_row_exact(dodge_class, student):
    assert_rows_exact(dodge_class, student, mismatch)


def test_filler_leaves_no_gigabytes(dodge_class):
    """The filler's files (4,000 x 1 MB in the record folder) stay out of OUT: its share of
    OUT (measured after grading) is at most 20 MB over the correct student's."""
    shares = dodge_class["shares"]
    extra = shares["filler"] - shares["correct"]
    assert extra <= FILLER_SLACK, (
        f"the filler's share of OUT is {extra / 2**20:.0f} MB over the correct student's "
        f"({dodge_class['fill']})")


def test_hidden_cells_graded_in_time(dodge_class):
    seconds = dodge_class["student_seconds"]["hidden_cells"]
    assert seconds is not None, "no result for hidden_cells"
    assert seconds < HIDDEN_SECONDS, f"hidden_cells took {seconds:.0f} s"
