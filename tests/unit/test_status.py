"""A row's status: one pure function of the grader's evidence (``grading/status.py``),
one test per branch, and the record channel's seal (``grading/autograde/records.py``) that
gathers the evidence."""

from __future__ import annotations

import json

import pytest

from autograder.checks import table
from autograder.grading.assignment_result import AssignmentResult, NotebookResult, exercises_of
from autograder.grading.autograde.records import Seal, read_evidence, records_dir
from autograder.grading.status import (
    STOPPED_NO_RESULT,
    STOPPED_RECORDED,
    Facts,
    Kind,
    row_kind,
    row_status,
)

SOFTMAX = table.check("01_attention", "softmax").key
OTHER = table.check("01_attention", "scaled_dot_product_attention").key
KERNEL_ENDED = {"cell": 6, "why": "ended the kernel", "course_cell": False}
RECORDED = {"points": 2.0, "passed": True, "recorded": True, "stopped": True}
UNRECORDED = {"points": 0.0, "passed": False, "recorded": False, "stopped": True}


@pytest.mark.parametrize(("facts", "want"), [
    # not graded: only the grader's own evidence
    (Facts(problem="no 01_attention.ipynb in the submission", problem_kind=Kind.NOT_SUBMITTED),
     ("not graded: no 01_attention.ipynb in the submission", None, "")),
    (Facts(problem="time limit of 900 s for the student exceeded", graded=True, score=2.0,
           problem_kind=Kind.TIMED_OUT),
     ("not graded: time limit of 900 s for the student exceeded", None, "")),
    (Facts(graded=True, score=2.0, timed_out=True),
     ("not graded: a cell of this exercise ran over 60 s", None, "")),
    # the student's own cell ran over: their doing, scored as the test cell ran, flagged
    (Facts(graded=True, score=0.0, student_timed_out=True),
     ("graded", 0.0, "your code in a cell of this exercise ran over the cell limit of 60 s "
      "and was interrupted")),
    (Facts(graded=False), ("not graded: no grade recorded by nbgrader", None, "")),
    (Facts(graded=True, score=None), ("not graded: no grade recorded by nbgrader", None, "")),
    (Facts(stopped={"cell": 0, "why": "ended the kernel", "course_cell": True}),
     ("not graded: the kernel stopped in the course's own cell 1, before any of the student's "
      "code ran", None, "")),
    # the student's code stopped the notebook: recorded verdicts stay, the rest is 0, flagged
    (Facts(stopped=KERNEL_ENDED, verdict=RECORDED), (STOPPED_RECORDED, 2.0, "")),
    (Facts(stopped=KERNEL_ENDED, verdict=UNRECORDED),
     (f"{STOPPED_NO_RESULT}ended the kernel in cell 7)", 0.0,
      "stopped the notebook: your code ended the kernel in cell 7")),
    # nbgrader failed after the student's code ran (nbgrader_main.stop_of): no cell to name
    (Facts(stopped={"cell": None, "why": "left a notebook nbgrader could not finish (x)"},
           problem="grader error (x)"),
     (f"{STOPPED_NO_RESULT}left a notebook nbgrader could not finish (x))", 0.0,
      "stopped the notebook: your code left a notebook nbgrader could not finish (x)")),
    (Facts(stopped={"cell": 2, "why": "flooded its output"}, problem="nbgrader failed"),
     (f"{STOPPED_NO_RESULT}flooded its output in cell 3)", 0.0,
      "stopped the notebook: your code flooded its output in cell 3")),
    # graded
    (Facts(graded=True, score=0.0, answer_missing="ex2_solution"),
     ("graded (answer cell ex2_solution missing)", 0.0, "")),
    (Facts(graded=True, score=1.0, restored="edited"),
     ("graded (test cell restored: edited)", 1.0, "")),
    (Facts(graded=True, score=2.0), ("graded", 2.0, "")),
])
def test_each_branch(facts, want):
    got = row_status(facts, cell_timeout=60)
    assert got[:3] == want
    # the kind says the same as the words: points exactly where the kind is graded, and read
    # back from the words alone (a result of an older course-grade) it is the same kind
    assert got.kind.graded == (got.points is not None)
    assert row_kind({"status": got.status}) is got.kind


@pytest.mark.parametrize(("facts", "kind"), [
    (Facts(problem="no 01_attention.ipynb in the submission", problem_kind=Kind.NOT_SUBMITTED),
     Kind.NOT_SUBMITTED),
    (Facts(problem="time limit", problem_kind=Kind.TIMED_OUT, graded=True), Kind.TIMED_OUT),
    (Facts(problem="a.ipynb is a FIFO"), Kind.REFUSED),
    (Facts(graded=True, score=0.0, absent="Exercise 2.2"), Kind.NOT_IN_NOTEBOOK),
    (Facts(stopped=KERNEL_ENDED, verdict=RECORDED), Kind.FROM_RECORD),
    (Facts(stopped=KERNEL_ENDED, verdict=UNRECORDED), Kind.STOPPED),
])
def test_the_kind_comes_from_the_facts_not_the_words(facts, kind):
    """A problem's kind is the grader's own (it knows which check found it): a reason whose
    words look like another kind's is still its own kind."""
    assert row_status(facts).kind is kind
    disguised = Facts(problem="no 01_attention.ipynb in the submission")  # e.g. a file's name
    assert row_status(disguised).kind is Kind.REFUSED


def test_no_text_of_the_students_sets_a_status():
    # what a cell raised or printed is not a fact the function takes: a MemoryError, a disk
    # full, a fake "autograde: failed" block are verdicts (0), never a reason not to grade
    assert set(Facts.__dataclass_fields__) == {
        "problem", "problem_kind", "stopped", "verdict", "graded", "score", "timed_out",
        "student_timed_out", "restored", "answer_missing", "absent"}
    assert row_status(Facts(graded=True, score=0.0, verdict={"diagnosis": "raised MemoryError"}))\
        [:3] == ("graded", 0.0, "")


def test_seal_accepts_one_record_per_key_from_its_own_test_cell(tmp_path):
    tmp_path = records_dir(tmp_path, "01_attention")
    seal = Seal(tmp_path, "nb")
    text = json.dumps({"key": SOFTMAX, "cases": []})
    seal.start_cell(0, "setup", [], course=True)
    seal.record(text)  # not a test cell
    seal.end_cell()
    seal.start_cell(3, "answer", [])
    seal.record(text)  # an answer cell
    seal.end_cell()
    assert not (tmp_path / f"{SOFTMAX}.json").exists()
    seal.start_cell(4, "test_softmax", [SOFTMAX])
    seal.record(json.dumps({"key": OTHER, "cases": []}))  # another cell's key
    seal.record(json.dumps({"key": SOFTMAX, "seal": seal.secret, "cases": []}))  # the cell's
    seal.end_cell()
    assert json.loads((tmp_path / f"{SOFTMAX}.json").read_text())["cases"] == []
    seal.start_cell(9, None, [])
    seal.record(json.dumps({"key": SOFTMAX, "cases": ["forged"]}))  # later cell
    seal.end_cell()
    assert json.loads((tmp_path / f"{SOFTMAX}.json").read_text())["cases"] == []
    evidence = read_evidence(tmp_path.parents[2], "01_attention", "nb")
    assert [t["cell"] for t in evidence["tampered"]] == [0, 3, 4, 9]


def test_seal_a_second_record_in_one_cell_makes_the_key_malformed(tmp_path):
    seal = Seal(tmp_path, "nb")
    seal.start_cell(4, "test_softmax", [SOFTMAX])
    seal.record(json.dumps({"key": SOFTMAX, "seal": seal.secret, "cases": ["forged"]}))
    seal.record(json.dumps({"key": SOFTMAX, "seal": seal.secret, "cases": []}))
    seal.end_cell()
    assert json.loads((tmp_path / f"{SOFTMAX}.json").read_text())["malformed"]
    assert "second record" in seal.evidence["tampered"][0]["what"]


def test_seal_stop_in_the_setup_cell_is_the_courses_only_before_student_code(tmp_path):
    first = Seal(tmp_path / "a", "nb")
    first.start_cell(0, "setup", [], course=True)
    first.stopped(0, "ended the kernel")
    assert first.evidence["stopped"] == {"cell": 0, "why": "ended the kernel",
                                         "course_cell": True}
    later = Seal(tmp_path / "b", "nb")
    later.start_cell(1, None, [])  # a cell the student added above the setup cell
    later.end_cell()
    later.start_cell(2, "setup", [], course=True)
    later.stopped(2, "ended the kernel")
    assert later.evidence["stopped"]["course_cell"] is False


def test_assignment_result_round_trip(tmp_path):
    result = AssignmentResult("01_attention", "ok", notebooks={
        "01_attention": NotebookResult(graded=True, scores={"t1": 1.0}, timeouts=["t2"])})
    result.write(tmp_path)
    assert AssignmentResult.read(tmp_path, "01_attention") == result
    (tmp_path / ".grader" / "results" / "01_attention.json").write_text('{"assignment": 3')
    assert AssignmentResult.read(tmp_path, "01_attention") is None
    assert records_dir(tmp_path, "a") == tmp_path / ".grader" / "records" / "a"


def test_exercises_of_cells():
    def cell(meta):
        return {"cell_type": "code", "metadata": {"nbgrader": meta}}
    cells = [cell({"solution": True, "grade_id": "s1"}), cell({"grade": True, "grade_id": "t1"}),
             cell({"solution": True, "grade_id": "s2"}), cell({"grade": True, "grade_id": "t2"})]
    assert exercises_of(cells, [2]) == ["t2"] and exercises_of(cells, [1]) == ["t1"]
