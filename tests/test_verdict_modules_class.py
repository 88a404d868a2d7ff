"""Issue 14's attacks on chapters 03, 05 and 06, graded once in the sandbox with trusted
verdicts (see ``tests/adversarial/modules_class.py`` for the students and their rows)."""

from __future__ import annotations

import fcntl
import json
import subprocess
import time

import pytest
from adversarial.modules_class import ASSIGNMENTS, ModulesAttackBuilder, Row
from synthetic_class.shared import REPO, grade_cmd, read_csv, shared_dir

from autograder.grading.sandbox import bwrap_path

pytestmark = pytest.mark.slow
SOURCE = REPO / "solutions"


@pytest.fixture(scope="session")
def modules_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    root = shared_dir(tmp_path_factory) / "verdict-modules-class"
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _, info = build_template(SOURCE, list(ASSIGNMENTS), root / "template-work",
                                     GradeConfig(cell_timeout=120))
            expected = ModulesAttackBuilder({a: info[a][0] for a in ASSIGNMENTS}).build(
                root / "class")
            args = ("--workers", "2", "--cell-timeout", "120", "--timeout", "900",
                    "--memory", "3072", "--assignment", *ASSIGNMENTS)
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


def _mismatch(row: dict, exp: Row):
    got = (row["points"], row["status"], row["diagnosis"], row["flagged"])
    ok = row["points"] == exp.points and row["status"] == exp.status
    if exp.diagnosis is not None:
        ok &= row["diagnosis"].startswith(exp.diagnosis) if exp.diagnosis else \
            row["diagnosis"] == ""
    if exp.flagged is not None:
        ok &= (exp.flagged in row["flagged"] and row["flagged"].startswith("flagged: ")) \
            if exp.flagged else row["flagged"] == ""
    return None if ok else (got, exp)


def test_class_graded_in_the_sandbox(modules_class):
    assert modules_class["returncode"] == 0, modules_class["stderr"]
    assert "runner: bubblewrap sandbox" in modules_class["stderr"]


@pytest.mark.parametrize("student", ["attacker"])
def test_every_row_exact(modules_class, student):
    rows = {r["exercise"]: r for r in modules_class["rows"] if r["student"] == student}
    expected = modules_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := _mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


def test_feedback_names_the_reference(modules_class):
    html = (modules_class["out"] / "feedback" / "attacker" / "06_transformer" /
            "06_transformer.html").read_text()
    assert "decided outside your notebook" in html
    assert "reference implementation ran while it was checked" in html
    assert "compute it from its parts" in html
