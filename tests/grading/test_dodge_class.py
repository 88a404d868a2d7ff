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

from autograder.grading.sandbox import bwrap_path

from helpers.adversarial.attention_attacks import graded_attention_attacks
from helpers.adversarial.dodge_class import FILLER_SLACK, HIDDEN_SECONDS, mismatch

STUDENTS = ["correct", "rewrite_records", "rewrite_mutated", "filler", "fake_log_block",
            "raise_memory", "exit_kernel", "display_flood", "malformed_records",
            "forged_record", "hidden_cells", "jitter_stat"]
# issue 47's routes around the record channel and "from scratch" (helpers.adversarial.route_class)
ROUTE_STUDENTS = ["forged_interrupt", "probe_routes"]


@pytest.fixture(scope="session")
def dodge_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    return graded_attention_attacks(tmp_path_factory)


def test_class_graded_in_the_sandbox(dodge_class):
    assert dodge_class["returncode"] == 0, dodge_class["stderr"]
    assert "runner: bubblewrap sandbox" in dodge_class["stderr"]
    assert dodge_class["classes"]["dodge"] == sorted(STUDENTS)
    assert dodge_class["classes"]["routes"] == sorted(ROUTE_STUDENTS)
    # the CSV holds every student of the run (this class's and test_verdict_class's), no other
    assert set(STUDENTS) <= set(dodge_class["expected"])
    assert {r["student"] for r in dodge_class["rows"]} == set(dodge_class["expected"])


@pytest.mark.parametrize("student", STUDENTS + ROUTE_STUDENTS)
def test_every_row_exact(dodge_class, student):
    rows = {r["exercise"]: r for r in dodge_class["rows"] if r["student"] == student}
    expected = dodge_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


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
