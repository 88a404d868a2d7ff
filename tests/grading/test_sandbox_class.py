"""The adversarial classes, each graded once in the sandbox.

- notebook 01 (``adversarial``): cheats on the checks, exits, reads, kills, bombs;
- the small fixture assignment (``adversarial.fixture_class``): attacks that need no
  transformer code (an import that loops, huge output, network, corrupted files, old
  nbformat versions, extra / renamed / missing notebooks), a plain-Python class that grades
  in about a minute on 2 workers.

Every student's every CSV row has its expected points and status; the class run itself
finishes (no cheat stops it); no process a student started is left; the feedback of a
cheating cell says why it did not run.
"""

from __future__ import annotations

import os
import re
import socket
from collections import Counter
from pathlib import Path

import pytest

from autograder.grading.config import GradeConfig

from helpers.adversarial import MARKER, AdversarialBuilder
from helpers.adversarial.fixture_class import TIME_LIMIT_S, FixtureAttackBuilder
from helpers.adversarial.graded import (
    assert_graded_in_sandbox,
    assert_rows_exact,
    feedback_page,
    graded_once,
    need_bwrap,
)
from helpers.synthetic_class import Expected, unmatched
from helpers.synthetic_class.shared import REPO

ASSIGNMENT = "01_attention"
SOURCE = REPO / "solutions"
STUDENTS = ["correct", "patcher", "test_cells", "exits", "os_exit", "readers", "kill_parent",
            "background"]
BOMBER = "zz_fork_bomb"
FIXTURE_SOURCE = REPO / "tests" / "fixtures" / "solutions"
FIXTURE = "99_fixture"
FIXTURE_STUDENTS = ["correct", "import_loop", "huge_file", "huge_stdout", "wide_stdout", "network",
                    "corrupter",
                    "nbformat3", "nbformat40", "renamed", "other_name", "extra", "missing",
                    "past_time"]


def _marked_processes() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and MARKER.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def _need_bwrap():
    need_bwrap(" (apt-get install bubblewrap); course-grade refuses to grade without it")


@pytest.fixture(scope="session")
def adversarial_class(tmp_path_factory):
    if not (SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists():
        pytest.skip("notebook 01 not there")
    _need_bwrap()
    args = ("--workers", "2", "--cell-timeout", "30", "--timeout", "400", "--memory", "3072")

    def build(info, root):
        return AdversarialBuilder(info[ASSIGNMENT][0]).build_adversarial(
            root / "class", root / "out", REPO)

    def around(run):
        run()
        return {"left": _marked_processes()}  # right after the run

    return graded_once(tmp_path_factory, "adversarial-class", [ASSIGNMENT], build, args,
                       row=Expected, around=around)


def test_class_graded_without_error(adversarial_class):
    assert_graded_in_sandbox(adversarial_class)
    assert sorted(adversarial_class["expected"]) == sorted(STUDENTS)
    assert {r["student"] for r in adversarial_class["rows"]} == {*STUDENTS, BOMBER}


@pytest.mark.parametrize("student", STUDENTS)
def test_student_scores_and_statuses(adversarial_class, student):
    assert_rows_exact(adversarial_class, student, unmatched)


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


def test_cheating_cells_gain_nothing_and_are_flagged_on_their_exercise(adversarial_class):
    # notebook 01 is judged outside the kernel: the source policy refuses no cell (the patches
    # run, gain no point: their own kernel breaks, every row 0, above); what the policy would
    # have refused is flagged, each on the exercise whose answer cell holds it
    rows = [r for r in adversarial_class["rows"] if r["student"] == "patcher"]
    assert rows and all(r["flagged"].startswith("flagged: ") for r in rows), rows
    assert all(r["points"] == "0" for r in rows)
    flagged = " | ".join(r["flagged"] for r in rows)
    assert "notebook-wide" not in flagged
    for reason in ("reaches into IPython", "builtin obtained by name",
                   "reaches into the grader: assigns to `np", "rebinds `check_"):
        assert reason in flagged, reason


# ---- the fixture-assignment class ----------------------------------------------------------
@pytest.fixture(scope="session")
def fixture_attacks(tmp_path_factory):
    _need_bwrap()
    args = ("--workers", "2", "--cell-timeout", "5", "--timeout", str(TIME_LIMIT_S),
            "--memory", "2048")
    # a server on the grader's loopback: a sandboxed kernel must not reach it
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)

    def build(info, root):
        return FixtureAttackBuilder(info[FIXTURE][0]).build_attacks(
            root / "class", server.getsockname()[1])

    def around(run):
        run()
        try:
            server.accept()[0].close()
            return {"accepted": True}
        except BlockingIOError:
            return {"accepted": False}

    try:
        return graded_once(tmp_path_factory, "fixture-attacks", [FIXTURE], build, args,
                           source=FIXTURE_SOURCE, row=Expected,
                           around=around)
    finally:
        server.close()


def test_fixture_class_graded_without_error(fixture_attacks):
    assert_graded_in_sandbox(fixture_attacks)
    assert sorted(fixture_attacks["expected"]) == sorted(FIXTURE_STUDENTS)
    assert {r["student"] for r in fixture_attacks["rows"]} == set(FIXTURE_STUDENTS)
    keys = Counter((r["student"], r["exercise"]) for r in fixture_attacks["rows"])
    assert max(keys.values()) == 1


@pytest.mark.parametrize("student", FIXTURE_STUDENTS)
def test_fixture_student_scores_and_statuses(fixture_attacks, student):
    assert_rows_exact(fixture_attacks, student, unmatched)


def test_the_time_limit_reached_in_the_students_own_cell_is_theirs(fixture_attacks):
    """Issue 47 item 3: cells the student added ran past the student's time limit (75 s).
    Before, every row read "not graded: time limit"; now the run is scored as one that
    stopped: each exercise from its sealed record (the fixture has none: 0), flagged."""
    rows = [r for r in fixture_attacks["rows"] if r["student"] == "past_time"]
    assert rows and all(r["kind"] == "stopped" for r in rows), rows
    assert all(f"your code ran past the time limit of {TIME_LIMIT_S} s in cell" in r["flagged"]
               for r in rows), rows


def test_huge_output_costs_at_most_the_student_and_stays_small(fixture_attacks):
    """400 MB on stdout, right answers: full marks, graded, on any machine. The kernel stops
    sending a cell's output after ``GradeConfig.output_chars`` characters (``outcap``), so the
    cell ends as soon as the strings are built, long before its 5 s, however slowly the
    grader reads (before that cut, nbclient's wait for output or the cell limit decided it,
    and which of them won depended on the machine's load). Never a huge file: the CSV,
    feedback and notebooks stay small."""
    rows = [r for r in fixture_attacks["rows"] if r["student"] == "huge_stdout"]
    assert rows
    assert [(r["points"], r["status"]) for r in rows] == \
        [(r["max_points"], "graded") for r in rows], rows
    fb = feedback_page(fixture_attacks, "huge_stdout", FIXTURE)
    # what reached the grader was cut in the kernel at its cap: the page's cut note (20,000
    # characters shown) counts what the kernel sent, not the 400 MB printed
    cuts = [int(n) for n in re.findall(r"output cut, (\d+) more characters", fb)]
    assert cuts and max(cuts) <= GradeConfig().output_chars, cuts
    out = fixture_attacks["out"]
    assert (out / "grades.csv").stat().st_size < 20_000
    for student in ("huge_stdout", "wide_stdout"):
        for path in (out / "feedback" / student).rglob("*.html"):
            assert path.stat().st_size < 1_000_000, path
        work = out / ".work" / "students" / student / "autograded"
        for path in work.rglob("*.ipynb"):
            assert path.stat().st_size < 1_000_000, path
    fb = feedback_page(fixture_attacks, "wide_stdout", FIXTURE)
    assert "course-grade: output cut" in fb


def test_network_is_unreachable_from_the_sandbox(fixture_attacks):
    """The network student scored full marks only because no connection worked (asserted in
    its rows); the loopback server the test ran never saw a connection."""
    assert fixture_attacks["accepted"] is False
    fb = feedback_page(fixture_attacks, "network", FIXTURE)
    assert "Network is unreachable" in fb


def test_corrupted_files_touch_nothing_outside_the_sandbox(fixture_attacks):
    """The corrupter's own notebook (what it tried to overwrite and delete) is unchanged and
    every other student still graded (asserted in their rows)."""
    import nbformat

    sub = fixture_attacks["class"] / "corrupter" / f"{FIXTURE}.ipynb"
    nbformat.validate(nbformat.read(sub, as_version=4))
    fb = feedback_page(fixture_attacks, "huge_file", FIXTURE)
    assert "File too large" in fb and "Read-only file system" in fb
