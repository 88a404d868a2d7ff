"""Issue 14's notebook-01 attacks, graded once in the sandbox with trusted verdicts.

See ``tests/adversarial/verdict_class.py`` for the students and what each must get. Every
CSV row is checked for its exact points and status, the start of its diagnosis, and its
``flagged`` column; the feedback shows the grader's verdict, not the kernel's.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import time

import pytest
from adversarial.verdict_class import Row, VerdictAttackBuilder
from synthetic_class.shared import REPO, grade_cmd, read_csv, shared_dir

from autograder.grading.sandbox import bwrap_path

pytestmark = pytest.mark.slow
ASSIGNMENT = "01_attention"
SOURCE = REPO / "solutions"
STUDENTS = ["correct", "time_transformer", "getattr_alias", "hex_exec", "torch_library",
            "frames", "above_setup", "thread_builtin", "near_miss", "flags_changed"]


@pytest.fixture(scope="session")
def verdict_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    root = shared_dir(tmp_path_factory) / "verdict-class"
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _, info = build_template(SOURCE, [ASSIGNMENT], root / "template-work",
                                     GradeConfig(cell_timeout=60))
            expected = VerdictAttackBuilder(info[ASSIGNMENT][0]).build_attacks(root / "class")
            args = ("--workers", "2", "--cell-timeout", "60", "--timeout", "600",
                    "--memory", "3072", "--assignment", ASSIGNMENT)
            t0 = time.monotonic()
            proc = subprocess.run(grade_cmd(root / "class", root / "out", SOURCE, *args),
                                  cwd=REPO, capture_output=True, text=True)
            done.write_text(json.dumps({
                "returncode": proc.returncode, "stderr": proc.stderr[-5000:],
                "seconds": time.monotonic() - t0,
                "expected": {s: {k: v.__dict__ for k, v in e.items()}
                             for s, e in expected.items()},
            }))
    result = json.loads(done.read_text())
    result["expected"] = {s: {k: Row(**v) for k, v in e.items()}
                          for s, e in result["expected"].items()}
    result["out"] = root / "out"
    result["rows"] = read_csv(root / "out" / "grades.csv") if result["returncode"] == 0 else []
    return result


def test_class_graded_in_the_sandbox(verdict_class):
    assert verdict_class["returncode"] == 0, verdict_class["stderr"]
    assert "runner: bubblewrap sandbox" in verdict_class["stderr"]
    assert sorted(verdict_class["expected"]) == sorted(STUDENTS)
    assert {r["student"] for r in verdict_class["rows"]} == set(STUDENTS)


def _mismatch(row: dict, exp: Row):
    got = (row["points"], row["status"], row["diagnosis"], row["flagged"])
    ok = row["points"] == exp.points and row["status"] == exp.status
    if exp.diagnosis is not None:
        ok &= row["diagnosis"].startswith(exp.diagnosis) if exp.diagnosis else \
            row["diagnosis"] == ""
    ok &= (exp.flagged in row["flagged"] and row["flagged"].startswith("flagged: ")) \
        if exp.flagged else row["flagged"] == ""
    return None if ok else (got, exp)


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(verdict_class, student):
    rows = {r["exercise"]: r for r in verdict_class["rows"] if r["student"] == student}
    expected = verdict_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := _mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


def test_feedback_shows_the_trusted_verdict(verdict_class):
    out = verdict_class["out"] / "feedback"
    near = (out / "near_miss" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "decided outside your notebook" in near
    assert "different random generators" in near  # d_k * 1.001 is not a measurement
    thread = (out / "thread_builtin" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "in any" in thread and "softmax" in thread
    correct = (out / "correct" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "all 14 cases match the reference (5 of them hidden)" in correct
