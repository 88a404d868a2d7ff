"""Kill ``course-grade`` midway, rerun it: the rest is graded, the done ones are not regraded,
no grade is lost or duplicated. Uses the small fixture assignment (plain Python, no torch) and
the class cases the notebook-01 class does not have (missing notebook, deleted answer cell, a
loop that ignores interrupts), plus a student whose wall-time limit runs out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from synthetic_class import ClassBuilder, matches
from synthetic_class.shared import REPO, grade_cmd, read_csv

SOURCE = REPO / "tests" / "fixtures" / "solutions"
ASSIGNMENT = "99_fixture"
KEEP = {"correct", "wrong", "blank", "missing", "deleted_answer", "stubborn_loop"}


@pytest.fixture(scope="module")
def fixture_info(tmp_path_factory):
    from autograder.grading.course import build_template

    work = tmp_path_factory.mktemp("fixture-template")
    template, info = build_template(SOURCE, [ASSIGNMENT], work, 5)
    return template, info[ASSIGNMENT][0], work


def _results(out: Path) -> dict[str, dict]:
    return {
        p.stem: json.loads(p.read_text()) for p in (out / "results").glob("*.json")
    }


def test_kill_and_rerun(fixture_info, tmp_path):
    _, nb, _ = fixture_info
    expected = ClassBuilder(nb).build(tmp_path / "all", extra=("missing", "deleted_answer",
                                                                "stubborn_loop"))
    class_dir = tmp_path / "class"
    class_dir.mkdir()
    for entry in (tmp_path / "all").iterdir():
        if entry.name.removesuffix(".zip") in KEEP:
            entry.rename(class_dir / entry.name)
    out = tmp_path / "out"
    args = ("--workers", "1", "--cell-timeout", "5", "--timeout", "120", "--memory", "2048")
    cmd = grade_cmd(class_dir, out, SOURCE, *args)

    first = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(_results(out)) < 3 and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)  # a crash, not a polite stop
    first.wait()
    before = _results(out)
    assert 3 <= len(before) < len(KEEP), "the kill should land midway"
    partial = read_csv(out / "grades.csv")  # consistent even after a kill: done students only
    assert {r["student"] for r in partial} == set(before)

    second = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert f"{len(before)} student(s) already graded, skipped" in second.stderr
    after = _results(out)
    assert set(after) == KEEP
    for student, result in before.items():  # not regraded: the same result file content
        assert after[student] == result

    rows = read_csv(out / "grades.csv")
    keys = Counter((r["student"], r["exercise"]) for r in rows)
    assert max(keys.values()) == 1 and len(keys) == len(KEEP) * len(nb.grade_cells)
    for student in KEEP:
        got = {r["exercise"]: r for r in rows if r["student"] == student}
        bad = {ex: (got[ex]["points"], got[ex]["status"], e)
               for ex, e in expected[student].items() if not matches(got[ex], e)}
        assert not bad, (student, bad)


def test_wall_time_limit_is_not_graded(fixture_info, tmp_path):
    from autograder.grading.student import Options, grade_student
    from autograder.grading.submissions import Submission

    template, nb, work = fixture_info
    ClassBuilder(nb).build(tmp_path / "class")
    sub = Submission("correct", tmp_path / "class" / "correct", tmp_path / "class" / "correct")
    opts = Options(timeout=1.5, cell_timeout=5, memory_mb=2048, threads=1)
    t0 = time.monotonic()
    r = grade_student(sub, {ASSIGNMENT: [nb]}, template, tmp_path / "work", tmp_path, opts, "x")
    assert time.monotonic() - t0 < 30
    assert [row["status"] for row in r.rows] == ["not graded: time limit of 1.5 s for the "
                                                 "student exceeded"] * len(nb.grade_cells)
    assert all(row["points"] == "" for row in r.rows)
    assert not any(os.path.exists(tmp_path / f) for f in r.feedback)


def test_grader_error_is_reported_and_retried(fixture_info, tmp_path, monkeypatch):
    import autograder.grade as grade

    _, nb, _ = fixture_info
    ClassBuilder(nb).build(tmp_path / "all")
    (tmp_path / "class").mkdir()
    (tmp_path / "all" / "correct").rename(tmp_path / "class" / "correct")
    argv = [str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--source", str(SOURCE),
            "--no-progress", "--workers", "1", "--cell-timeout", "5"]

    class Broken:
        name = "broken"

        def run(self, *a, **k):
            raise OSError("disk full")

    monkeypatch.setattr(grade, "make_runner", lambda student: Broken())
    assert grade.main(argv) == 0
    rows = read_csv(tmp_path / "out" / "grades.csv")
    assert {r["status"] for r in rows} == {"not graded: grader error (OSError: disk full)"}
    monkeypatch.undo()
    assert grade.main(argv) == 0  # the next run grades the student again
    rows = read_csv(tmp_path / "out" / "grades.csv")
    assert [(r["points"], r["status"]) for r in rows] == [
        (f"{g.max_points:g}", "graded") for g in nb.grade_cells
    ]
