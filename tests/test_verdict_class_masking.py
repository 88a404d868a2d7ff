"""Chapter 02 (masking) graded in the sandbox with trusted verdicts: a few students, exact rows.

See ``tests/adversarial/masking_class.py`` for the students and what each must get.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import time

import pytest
from adversarial.masking_class import MaskingClassBuilder
from adversarial.verdict_class import Row
from synthetic_class.shared import REPO, grade_cmd, read_csv, shared_dir
from test_verdict_class import _mismatch

from autograder.grading.sandbox import bwrap_path

pytestmark = pytest.mark.slow
ASSIGNMENT = "02_masking"
SOURCE = REPO / "solutions"
STUDENTS = ["different", "mistakes", "thread_sdpa"]


@pytest.fixture(scope="session")
def masking_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    root = shared_dir(tmp_path_factory) / "verdict-masking-class"
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _, info = build_template(SOURCE, [ASSIGNMENT], root / "template-work",
                                     GradeConfig(cell_timeout=60))
            expected = MaskingClassBuilder(info[ASSIGNMENT][0]).build_attacks(root / "class")
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


def test_class_graded_in_the_sandbox(masking_class):
    assert masking_class["returncode"] == 0, masking_class["stderr"]
    assert "runner: bubblewrap sandbox" in masking_class["stderr"]
    assert {r["student"] for r in masking_class["rows"]} == set(STUDENTS)


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(masking_class, student):
    rows = {r["exercise"]: r for r in masking_class["rows"] if r["student"] == student}
    expected = masking_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := _mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


def test_feedback_shows_the_trusted_verdict(masking_class):
    out = masking_class["out"] / "feedback"
    page = (out / "mistakes" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "decided outside your notebook" in page
    assert "Likely mistake: mask applied after the softmax" in page
