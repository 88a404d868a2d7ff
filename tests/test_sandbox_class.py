"""The adversarial class on notebook 01, graded once in the sandbox (see ``adversarial``).

Every student's every CSV row has its expected points and status; the class run itself
finishes (no cheat stops it); no process a student started is left; the feedback of a
cheating cell says why it did not run.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from adversarial import MARKER, AdversarialBuilder
from synthetic_class import Expected, matches
from synthetic_class.shared import REPO, grade_cmd, read_csv, shared_dir

from autograder.grading.sandbox import bwrap_path

ASSIGNMENT = "01_attention"
SOURCE = REPO / "solutions"
STUDENTS = ["correct", "patcher", "test_cells", "exits", "os_exit", "readers", "kill_parent",
            "background"]
BOMBER = "zz_fork_bomb"
pytestmark = [
    pytest.mark.skipif(not (SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists(),
                       reason="notebook 01 not there"),
]


def _marked_processes() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and MARKER.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


@pytest.fixture(scope="session")
def adversarial_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it (apt-get install "
                    "bubblewrap); course-grade refuses to grade without it")
    from autograder.grading.course import build_template

    root = shared_dir(tmp_path_factory) / "adversarial-class"
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _, info = build_template(SOURCE, [ASSIGNMENT], root / "template-work", 60)
            out = root / "out"
            expected = AdversarialBuilder(info[ASSIGNMENT][0]).build_adversarial(
                root / "class", out, REPO)
            args = ("--workers", "2", "--cell-timeout", "30", "--timeout", "400",
                    "--memory", "3072")
            t0 = time.monotonic()
            proc = subprocess.run(grade_cmd(root / "class", out, SOURCE, *args), cwd=REPO,
                                  capture_output=True, text=True)
            seconds = time.monotonic() - t0
            done.write_text(json.dumps({
                "returncode": proc.returncode, "stderr": proc.stderr[-5000:],
                "seconds": seconds, "left": _marked_processes(),
                "expected": {s: {k: v.__dict__ for k, v in e.items()}
                             for s, e in expected.items()},
            }))
    result = json.loads(done.read_text())
    result["expected"] = {s: {k: Expected(**v) for k, v in e.items()}
                          for s, e in result["expected"].items()}
    result["out"] = root / "out"
    result["rows"] = read_csv(root / "out" / "grades.csv") if result["returncode"] == 0 else []
    return result


def test_class_graded_without_error(adversarial_class):
    assert adversarial_class["returncode"] == 0, adversarial_class["stderr"]
    assert "runner: bubblewrap sandbox" in adversarial_class["stderr"]
    assert sorted(adversarial_class["expected"]) == sorted(STUDENTS)
    assert {r["student"] for r in adversarial_class["rows"]} == {*STUDENTS, BOMBER}


@pytest.mark.parametrize("student", STUDENTS)
def test_student_scores_and_statuses(adversarial_class, student):
    rows = {r["exercise"]: r for r in adversarial_class["rows"] if r["student"] == student}
    expected = adversarial_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: (rows[ex]["points"], rows[ex]["status"], exp) for ex, exp in expected.items()
             if not matches(rows[ex], exp)}
    assert not wrong, wrong


def test_fork_bomb_gains_nothing(adversarial_class):
    """The bomb's exercise never scores; its processes are gone (test_no_process_...)."""
    rows = [r for r in adversarial_class["rows"] if r["student"] == BOMBER]
    assert len(rows) == 8 and rows[-1]["exercise"].startswith("ex8")
    assert rows[-1]["points"] in ("", "0")


def test_each_row_once_with_the_source_max_points(adversarial_class):
    rows = adversarial_class["rows"]
    keys = Counter((r["student"], r["exercise"]) for r in rows)
    assert keys and max(keys.values()) == 1
    max_points = {(r["exercise"], r["max_points"]) for r in rows}
    assert len(max_points) == len({r["exercise"] for r in rows})  # 100 claimed points: ignored


def test_no_process_outlives_grading(adversarial_class):
    assert adversarial_class["left"] == []  # right after the run
    assert _marked_processes() == []


def test_cheating_cells_are_not_run_and_feedback_says_why(adversarial_class):
    fb = (adversarial_class["out"] / "feedback" / "patcher" / f"{ASSIGNMENT}.html").read_text()
    assert fb.count("course-grade did not run this cell") >= 8
    for reason in ("get_ipython", "imports `builtins`", "__import__", "assigns to `np"):
        assert reason in fb, reason
