"""Issue 47 item 3: the student's time limit (``--timeout``) reached while their own code runs
is scored from the sealed records (each exercise from its record, 0 where none, flagged), not
"not graded"; a limit reached in the course's code or the grader's stays "not graded".

The parent's side, without a grading run: the seal writes down the running cell as cells
start and end (``records.Seal``), :func:`student.limit_stop` reads whose cell it was, and
``student._after_limit`` has the sealed records judged (``autograde/after_limit.py``,
here with the judging replaced by the verdicts it would give) and takes the notebook out of
the "not graded" ones; its rows come from that result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat

from autograder.grading.assignment_result import AssignmentResult
from autograder.grading.autograde import after_limit, verdict
from autograder.grading.autograde.records import Seal, read_evidence, records_dir
from autograder.grading.config import GradeConfig
from autograder.grading.parent import student
from autograder.grading.parent.course import describe
from autograder.grading.parent.runner import RunResult
from autograder.grading.status import STOPPED_MEMORY, STOPPED_RECORDED, Kind

REPO = Path(__file__).resolve().parents[2]
A = "01_attention"


def test_the_seal_writes_down_the_running_cell(tmp_path):
    seal = Seal(records_dir(tmp_path, A), A)
    seal.start_cell(3, "ex1_solution", [])
    assert read_evidence(tmp_path, A, A)["running"] == 3
    seal.end_cell()
    assert read_evidence(tmp_path, A, A)["running"] is None


class _Run:
    """A runner whose ``run`` does what ``after_limit``'s process does, in this process."""

    def __init__(self):
        self.argv = None

    def run(self, argv, cwd, *, timeout, log_path, env=None):
        self.argv = argv
        assert argv[:4] == [sys.executable, "-m", "autograder.grading.autograde.after_limit",
                            "ann"]
        after_limit.write_results(cwd, json.loads(argv[4]))


def _setup(tmp_path, monkeypatch, running: int | None = None):
    """Notebook 01 rebuilt (a cell added at its end: the student's), its run killed by the
    time limit after the student's code ran, in cell ``running`` (the added one by default);
    the judging gives the first exercise, whose record was sealed, its points."""
    release = nbformat.read(REPO / "notebooks" / A / f"{A}.ipynb", as_version=4)
    nb = describe(A, A, release, release)
    rebuilt = student.rebuild(nbformat.writes(release).encode(), release, {}, A)
    rebuilt.notebook.cells.append(nbformat.v4.new_code_cell("import time; time.sleep(999)"))
    running = len(rebuilt.notebook.cells) - 1 if running is None else running
    seal = Seal(records_dir(tmp_path, A), A)
    seal.start_cell(1, None, [])  # the student's code ran
    seal.end_cell()
    seal.start_cell(running, None, [])  # ... and this cell was running when it was killed
    first = nb.grade_cells[0]
    monkeypatch.setattr(verdict, "judge_records", lambda root, a: {A: {
        first.grade_id: {"recorded": True, "points": first.max_points, "stopped": True}}})
    config = GradeConfig(timeout=600)
    fatal = {A: (f"time limit of {config.timeout:g} s for the student exceeded",
                 Kind.TIMED_OUT)}
    return nb, rebuilt, fatal, config, running


def test_a_limit_in_the_students_cell_scores_from_the_records(tmp_path, monkeypatch):
    nb, rebuilt, fatal, config, added = _setup(tmp_path, monkeypatch)
    runner = _Run()
    why = student.limit_why(RunResult(None, True, 600.0), config)
    student._after_limit(runner, tmp_path, "ann", {A: [nb]}, {A: rebuilt}, fatal, *why, {})
    assert fatal == {} and runner.argv is not None
    assert AssignmentResult.read(tmp_path, A).notebooks[A].stopped["cell"] == added
    first, *rest = student._rows(tmp_path, "ann", A, nb, None, rebuilt, config)
    assert (first["points"], first["status"], first["kind"]) == (
        f"{nb.grade_cells[0].max_points:g}", STOPPED_RECORDED, "from record")
    assert rest and all(r["points"] == "0" and r["kind"] == "stopped" for r in rest)
    assert all(r["status"] == "graded (no result: your code ran past the time limit of 600 s "
               f"in cell {added + 1})" for r in rest), rest[0]
    assert all("ran past the time limit" in r["flagged"] for r in rest)


def test_a_limit_in_the_courses_cell_stays_not_graded(tmp_path, monkeypatch):
    release = nbformat.read(REPO / "notebooks" / A / f"{A}.ipynb", as_version=4)
    test_cell = next(i for i, c in enumerate(release.cells)
                     if c.metadata.get("nbgrader", {}).get("grade"))
    nb, rebuilt, fatal, config, _ = _setup(tmp_path, monkeypatch, running=test_cell)
    runner, before = _Run(), dict(fatal)
    why = student.limit_why(RunResult(None, True, 600.0), config)
    student._after_limit(runner, tmp_path, "ann", {A: [nb]}, {A: rebuilt}, fatal, *why, {})
    assert fatal == before and runner.argv is None
    rows = student._rows(tmp_path, "ann", A, nb, fatal[A], rebuilt, config)
    assert {r["kind"] for r in rows} == {"timed out"}


def test_the_memory_limit_killing_the_grading_process_in_the_students_cell(tmp_path,
                                                                          monkeypatch):
    """The grading process killed (SIGKILL, which the runner sends only at the time limit: the
    OOM killer's, where a cgroup's memory limit holds the job) while the student's own cell
    ran: scored as the time limit is, each exercise from its record, the rest 0, flagged."""
    nb, rebuilt, _, config, added = _setup(tmp_path, monkeypatch)
    ended = RunResult(-9, False, 30.0)
    fatal = {A: student._no_result(ended, config)}
    assert fatal[A][1] is Kind.GRADER_ERROR  # what it read before
    runner = _Run()
    student._after_limit(runner, tmp_path, "ann", {A: [nb]}, {A: rebuilt}, fatal,
                         *student.limit_why(ended, config), {})
    assert fatal == {}
    first, *rest = student._rows(tmp_path, "ann", A, nb, None, rebuilt, config)
    assert (first["status"], first["kind"]) == (STOPPED_RECORDED, "from record")
    assert all(r["status"] == "graded (no result: your code used up the memory limit of "
               f"{config.memory_mb} MB in cell {added + 1})" for r in rest), rest[0]
    assert all(r["points"] == "0" and "used up the memory limit" in r["flagged"] for r in rest)
    assert {r["diagnosis"] for r in rest} == {"memory limit"}


def test_a_grading_process_that_crashed_otherwise_stays_a_grader_error(tmp_path, monkeypatch):
    nb, rebuilt, _, config, _ = _setup(tmp_path, monkeypatch)
    ended = RunResult(-11, False, 30.0)  # SIGSEGV: no limit of the student's
    fatal = {A: student._no_result(ended, config)}
    before, runner = dict(fatal), _Run()
    student._after_limit(runner, tmp_path, "ann", {A: [nb]}, {A: rebuilt}, fatal,
                         *student.limit_why(ended, config), {})
    assert fatal == before and runner.argv is None


def test_the_grading_processs_memory_error_in_a_cell_stops_the_run_there(tmp_path,
                                                                        monkeypatch):
    """The grading process's own memory limit (``RLIMIT_AS``) reached while it took a cell's
    messages (a flood sent past the kernel's output cap): the seal writes the stop down in
    that cell, and the run up to it is kept for the page, without the flood."""
    import pytest
    from nbgrader.preprocessors import Execute

    from autograder.grading.autograde import preprocessors, stopped

    monkeypatch.chdir(tmp_path)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("flood()")])
    ex = preprocessors.SealedExecute()
    ex.seal = Seal(records_dir(tmp_path, A), A)
    ex.nb, ex.resources = nb, {"nbgrader": {"assignment": A, "notebook": A}}

    def flooded(self, cell, resources, index):
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 10_000)]
        raise MemoryError

    monkeypatch.setattr(Execute, "preprocess_cell", flooded)
    with pytest.raises(MemoryError):
        ex.preprocess_cell(nb.cells[1], ex.resources, 1)
    stop = read_evidence(tmp_path, A, A)["stopped"]
    assert stop == {"cell": 1, "why": STOPPED_MEMORY, "course_cell": False}
    kept = nbformat.read(stopped.partial_path(tmp_path, A, A), as_version=4)
    assert [o.get("ename") for o in kept.cells[1].outputs] == [stopped.ENDED]
    assert kept.cells[1].source == "flood()"
