"""Grade one small adversarial class once per test session (on the xdist worker of its tests).

``graded_attack_class(tmp_path_factory, name, assignment, make)``: ``make(notebook)`` returns a
builder whose ``build_attacks(dest)`` writes the class and returns {student: {exercise: Row}}.
``graded_once`` is the general form every adversarial class fixture goes through: its
``build(info, root)`` writes the class under ``root`` and returns the expected rows.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from autograder.grading.sandbox import bwrap_path
from autograder.grading.status import STOPPED_NO_RESULT

from .verdict_class import Row
from helpers.synthetic_class.shared import REPO, grade_cmd, graded_dir, read_csv, run_info

SOURCE = REPO / "solutions"


def graded_once(tmp_path_factory, name: str, assignments: list[str], build: Callable,
                args: tuple[str, ...], *, source: Path = SOURCE, row: type = Row,
                around: Callable | None = None) -> dict:
    """Build and grade the class once (on this worker: its tests run on it).

    ``build(info, root)`` writes the class to ``root / "class"`` (``info``: build_template's
    per-assignment info, from the session's template this run grades with: ``run_info``) and
    returns
    {student: {exercise: row}}; ``args`` go to course-grade.
    ``around(run)``, when given, calls ``run()`` (the grading) and returns extra JSON fields
    measured around it (e.g. a server the class must not reach). Returns the JSON record plus
    ``expected`` (rows as ``row``), ``out``, ``class`` and the CSV ``rows`` ([] on failure).
    """
    root = graded_dir(tmp_path_factory) / name
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    if not done.exists():
        info = run_info(source, assignments, args)
        expected = build(info, root)
        record = {}

        def run():
            t0 = time.monotonic()
            proc = subprocess.run(grade_cmd(root / "class", root / "out", source, *args),
                                  cwd=REPO, capture_output=True, text=True)
            record.update(returncode=proc.returncode, stderr=proc.stderr[-5000:],
                          seconds=time.monotonic() - t0)

        if around is None:
            run()
        else:
            record.update(around(run))
        record["expected"] = {s: {k: v.__dict__ for k, v in e.items()}
                              for s, e in expected.items()}
        done.write_text(json.dumps(record))
    result = json.loads(done.read_text())
    result["expected"] = {s: {k: row(**v) for k, v in e.items()}
                          for s, e in result["expected"].items()}
    result["out"] = root / "out"
    result["class"] = root / "class"
    result["rows"] = read_csv(root / "out" / "grades.csv") if result["returncode"] == 0 else []
    return result


def graded_attack_class(tmp_path_factory, name: str, assignment: str, make, *,
                        cell_timeout: int = 60, timeout: int = 600) -> dict:
    args = ("--workers", "2", "--cell-timeout", str(cell_timeout), "--timeout", str(timeout),
            "--memory", "3072", "--assignment", assignment)
    return graded_once(
        tmp_path_factory, name, [assignment],
        lambda info, root: make(info[assignment][0]).build_attacks(root / "class"),
        args)


def row_mismatch(row: dict, exp, points_and_status: bool) -> tuple | None:
    """None when ``points_and_status`` (the caller's verdict on those two columns) holds and
    the CSV ``row`` has the start of the diagnosis ``exp.diagnosis`` ("" = empty, None: any)
    and a flagged column containing ``exp.flagged`` ("" = empty, None: any); else (what the
    row has, what was expected)."""
    got = (row["points"], row["status"], row["diagnosis"], row["flagged"])
    ok = points_and_status
    if exp.diagnosis is not None:
        ok &= row["diagnosis"].startswith(exp.diagnosis) if exp.diagnosis else \
            row["diagnosis"] == ""
    if exp.flagged is not None:
        ok &= (exp.flagged in row["flagged"] and row["flagged"].startswith("flagged: ")) \
            if exp.flagged else row["flagged"] == ""
    return None if ok else (got, exp)


def mismatch(row: dict, exp) -> tuple | None:
    """None when the CSV ``row`` is what ``exp`` says: exact points and status (a status of a
    stopped run without a result: its start), the diagnosis and flagged columns as
    :func:`row_mismatch` reads them; else (what the row has, what was expected)."""
    return row_mismatch(row, exp, row["points"] == exp.points and (
        row["status"].startswith(exp.status) if exp.status.startswith(STOPPED_NO_RESULT)
        else row["status"] == exp.status))


def feedback_page(result: dict, student: str, assignment: str) -> str:
    """``student``'s feedback page on ``assignment`` in the run's OUT (nbgrader's layout:
    ``feedback/<student>/<assignment>/<assignment>.html``), as written."""
    return (result["out"] / "feedback" / student / assignment / f"{assignment}.html").read_text()


def need_bwrap(why: str = "") -> None:
    """Fail (never skip) where bubblewrap is missing."""
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it" + why)


def assert_graded_in_sandbox(result: dict) -> None:
    """The class's ``course-grade`` run finished, each student in the bubblewrap sandbox."""
    assert result["returncode"] == 0, result["stderr"]
    assert "runner: bubblewrap sandbox" in result["stderr"]


def assert_rows_exact(result: dict, student: str, mismatch=mismatch) -> None:
    """``student``'s CSV rows in ``result`` are the exercises it expects, each as expected:
    ``mismatch(row, expected)`` is None (else it says how the row differs)."""
    rows = {r["exercise"]: r for r in result["rows"] if r["student"] == student}
    expected = result["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong
