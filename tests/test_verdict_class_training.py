"""Notebook 08's attacks graded once in the sandbox with trusted verdicts (drivers in the
kernel, verdicts in the grader). See ``tests/adversarial/training_class.py`` for the students
and what each row must show: exact points and status, the start of the diagnosis, and the
``flagged`` column.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import time

import pytest
from adversarial.training_class import TrainingAttackBuilder
from adversarial.verdict_class import Row
from synthetic_class.shared import REPO, grade_cmd, read_csv, shared_dir
from test_verdict_class import _mismatch

from autograder.grading.sandbox import bwrap_path

pytestmark = pytest.mark.slow
ASSIGNMENT = "08_training"
SOURCE = REPO / "solutions"
STUDENTS = ["correct", "reference"]


@pytest.fixture(scope="session")
def training_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    root = shared_dir(tmp_path_factory) / "verdict-class-08"
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _, info = build_template(SOURCE, [ASSIGNMENT], root / "template-work",
                                     GradeConfig(cell_timeout=120))
            expected = TrainingAttackBuilder(info[ASSIGNMENT][0]).build_attacks(root / "class")
            args = ("--workers", "2", "--cell-timeout", "300", "--timeout", "900",
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


def test_class_graded_in_the_sandbox(training_class):
    assert training_class["returncode"] == 0, training_class["stderr"]
    assert "runner: bubblewrap sandbox" in training_class["stderr"]
    assert {r["student"] for r in training_class["rows"]} == set(STUDENTS)


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(training_class, student):
    rows = {r["exercise"]: r for r in training_class["rows"] if r["student"] == student}
    expected = training_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := _mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


def test_feedback_shows_the_trusted_verdict(training_class):
    out = training_class["out"] / "feedback"
    page = (out / "reference" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "decided outside your notebook" in page
    assert "reference implementation ran while" in page
    assert "different random generators" in page
