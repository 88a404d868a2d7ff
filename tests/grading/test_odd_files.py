"""Issue 47's odd files for notebook 01 (``helpers.adversarial.odd_files``), graded in the
attention attacks' run: each row exact (points, status, the start of its diagnosis, its flag).
"""

from __future__ import annotations

import nbformat
import pytest

from helpers.adversarial.attention_attacks import graded_attention_attacks
from helpers.adversarial.dodge_class import mismatch
from helpers.adversarial.graded import assert_rows_exact, feedback_page
from helpers.adversarial.odd_files import OUTPUT_SLACK

STUDENTS = ["answer_meta", "v3_duplicate", "mimebundle", "missing_exercise",
            "another_chapter", "interleaved", "history", "zipped_outputs"]


@pytest.fixture(scope="session")
def odd_class(tmp_path_factory):
    return graded_attention_attacks(tmp_path_factory)


def test_the_class_is_these_students(odd_class):
    assert odd_class["returncode"] == 0, odd_class["stderr"]
    assert odd_class["classes"]["odd"] == sorted(STUDENTS)


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(odd_class, student):
    assert_rows_exact(odd_class, student, mismatch)


def test_outputs_are_budgeted_per_notebook(odd_class):
    """Issue 47: fifty cells interleaving stdout and stderr turned a 100 kB notebook into
    659 MB under OUT (132 MB in each copy). A submission leaves at most 5 MB plus twice its
    own size there (all its copies: autograded, feedback, return, the grading folder)."""
    sent = (odd_class["class"] / "interleaved" / "01_attention.ipynb").stat().st_size
    share = odd_class["shares"]["interleaved"]
    assert share <= OUTPUT_SLACK + 2 * sent, f"{share / 2**20:.1f} MB under OUT"


def test_a_zip_leaves_at_most_twice_its_size(odd_class):
    """Issue 47 item 7: a zip's notebooks were unpacked and kept in OUT (and every other file
    of it): a 0.2 MB zip of a notebook with 300,000 empty outputs (17 MB) and a 20 MB data
    file left 37 MB. Only its notebook is unpacked, within the submission's budget, and the
    unpacked copy goes once the run has graded it."""
    sent = (odd_class["class"] / "zipped_outputs.zip").stat().st_size
    share = odd_class["shares"]["zipped_outputs"]
    assert sent < 2**20 and share <= OUTPUT_SLACK + 2 * sent, f"{share / 2**20:.1f} MB under OUT"
    assert not (odd_class["out"] / ".work" / "unpacked").exists()


def test_the_hidden_tests_never_reach_the_kernels_history(odd_class):
    """Issue 47: a last cell that read the kernel's input history printed the restored hidden
    test cells (the given reference implementations included) onto the feedback page. Test
    cells are not stored in the history: the cell finds nothing, and the page holds no hidden
    check."""
    out = odd_class["out"]
    book = nbformat.read(out / "autograded" / "history" / "01_attention" / "01_attention.ipynb",
                         as_version=4)
    printed = "".join(o.get("text", "") for o in book.cells[-1].get("outputs", []))
    assert printed.strip() == "HISTORY []", printed
    page = feedback_page(odd_class, "history", "01_attention")
    assert "_hidden_check" not in page and "BEGIN HIDDEN" not in page


def test_no_grader_error_anywhere(odd_class):
    """Nothing a student's file holds makes nbgrader fail: no row of any of the three
    classes reads "grader error"."""
    assert not [r for r in odd_class["rows"] if "grader error" in r["status"]]
