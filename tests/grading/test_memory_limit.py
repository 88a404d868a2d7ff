"""Issue 47 item 3: a whole-run limit that ends the grading process itself while the student's
own code runs is the student's doing, and the notebook still gets its feedback page.

One course-grade run of notebook 01, one student, ``memory_killed``, whose fifth answer cell
sleeps far past every limit (``time.sleep(10**6)``; the other answers right). While that cell
runs, the grading process is killed with SIGKILL, as the kernel's OOM killer kills it where a
cgroup's memory limit holds the job (``parent/isolation.py``; on this machine the limit is
``RLIMIT_AS``, which makes an allocation fail and kills nothing, so the test sends the kill
itself, reading the seal's evidence for the moment the cell runs). Before, every row read
"not graded: grader error (the grading process was killed by signal 9)". (The student's time
limit reached in their own cell, and its page: tests/grading/test_grade_resume.py.)

The four exercises whose test cells sealed a record before the stop keep their points
("graded (from its record; the notebook stopped later)"), the other four score 0 with the
reason and the cell, flagged; a feedback page (what ran, the note on the cell that was running,
the scores) and the formgrader submission (``autograded/``, the gradebook's scores).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from html import unescape
from pathlib import Path

import nbformat
import pytest

from autograder.grading.cells import nbg
from autograder.grading.status import STOPPED_NO_RESULT, STOPPED_RECORDED

from helpers.synthetic_class import ClassBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, graded_dir, read_csv, run_info

A = "01_attention"
SOURCE = REPO / "solutions"
TIMEOUT = 400  # s: never reached (the kill comes in the fifth answer)
MEMORY = 2048
ARGS = ("--workers", "2", "--cell-timeout", "400", "--timeout", str(TIMEOUT),
        "--memory", str(MEMORY))
SLEEP = "import time\ntime.sleep(10**6)\n"
STOP_AT = 4  # the fifth answer cell (0-based among the answers)


def _grading_process(root: Path) -> int | None:
    """The pid of the student's grading process (a fork of the warm process, working in the
    student's course folder ``root``), or None."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if b"autograder.grading.autograde.warm" in cmd and Path(cwd) == root:
            return int(entry)
    return None


def _kill_when_running(out: Path, student: str, cell: int, done: threading.Event,
                       killed: dict) -> None:
    """SIGKILL ``student``'s grading process once the seal says ``cell`` runs."""
    root = out / ".work" / "students" / student
    evidence = root / ".grader" / "records" / A / f"{A}.evidence.json"
    while not done.is_set():
        try:
            running = json.loads(evidence.read_text()).get("running")
        except (OSError, ValueError):
            running = None
        if running == cell:
            time.sleep(1)  # well inside the cell (its sleep has begun)
            pid = _grading_process(root)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed["pid"] = pid
                return
        time.sleep(0.3)


@pytest.fixture(scope="session")
def stopped_class(tmp_path_factory):
    root = graded_dir(tmp_path_factory) / "memory-limit"
    root.mkdir(exist_ok=True)
    nb = run_info(SOURCE, [A], ARGS)[A][0]
    builder = ClassBuilder(nb)
    answer = nb.solution_ids[STOP_AT]
    for student in ("memory_killed",):
        sleepy = builder.answered(lambda gid, src: SLEEP + src if gid == answer else src)
        (root / "class" / student).mkdir(parents=True, exist_ok=True)
        nbformat.write(sleepy, root / "class" / student / f"{A}.ipynb")
    cell = next(i for i, c in enumerate(nb.release.cells) if nbg(c).get("grade_id") == answer)
    done, killed = threading.Event(), {}
    watcher = threading.Thread(target=_kill_when_running,
                               args=(root / "out", "memory_killed", cell, done, killed))
    watcher.start()
    try:
        proc = subprocess.run(grade_cmd(root / "class", root / "out", SOURCE, *ARGS), cwd=REPO,
                              capture_output=True, text=True)
    finally:
        done.set()
        watcher.join()
    recorded = {g.grade_id for g in nb.grade_cells
                if set(g.solution_ids) <= set(nb.solution_ids[:STOP_AT])}
    return {"returncode": proc.returncode, "stderr": proc.stderr[-5000:], "killed": killed,
            "out": root / "out", "cell": cell, "nb": nb, "recorded": recorded,
            "rows": read_csv(root / "out" / "grades.csv") if proc.returncode == 0 else []}


WHY = {"memory_killed": f"used up the memory limit of {MEMORY} MB"}
WHAT = {"memory_killed": "memory limit"}  # the rows' diagnosis


def test_the_run_finished_and_the_kill_came_in_the_students_cell(stopped_class):
    assert stopped_class["returncode"] == 0, stopped_class["stderr"]
    assert stopped_class["killed"].get("pid"), "the fifth answer cell never ran"


@pytest.mark.parametrize("student", sorted(WHY))
def test_exact_rows_records_kept_the_rest_zero_flagged(stopped_class, student):
    nb, cell = stopped_class["nb"], stopped_class["cell"]
    rows = {r["exercise"]: r for r in stopped_class["rows"] if r["student"] == student}
    assert sorted(rows) == sorted(g.grade_id for g in nb.grade_cells)
    recorded = stopped_class["recorded"]
    assert 0 < len(recorded) < len(rows)
    stop = f"your code {WHY[student]} in cell {cell + 1}"
    for g in nb.grade_cells:
        row = rows[g.grade_id]
        got = (row["points"], row["status"], row["kind"], row["flagged"])
        if g.grade_id in recorded:
            assert got == (f"{g.max_points:g}", STOPPED_RECORDED, "from record", ""), got
        else:
            assert got == ("0", f"{STOPPED_NO_RESULT}{WHY[student]} in cell {cell + 1})",
                           "stopped", f"flagged: stopped the notebook: {stop}"), got
            assert row["diagnosis"] == WHAT[student]


@pytest.mark.parametrize("student", sorted(WHY))
def test_the_stopped_notebook_gets_its_page_and_submission(stopped_class, student):
    """Issue 48 item 6's page for a notebook a whole-run limit stopped: the student's cells, the
    note on the cell that was running, and formgrader's submission with the rows' scores."""
    from nbgrader.api import Gradebook

    out, cell = stopped_class["out"], stopped_class["cell"]
    page = out / "feedback" / student / A / f"{A}.html"
    assert page.is_file()
    html = page.read_text()
    assert "This notebook stopped." in html
    assert f"Your code {WHY[student]} in cell {cell + 1}: no cell after it ran" in html
    text = unescape(re.sub(r"<[^>]+>", "", html))  # the code as shown (highlighted: spans)
    assert "time.sleep(10**6)" in text  # what ran, as the student wrote it
    course = out / ".work" / "students" / student
    assert (course / "autograded" / student / A / f"{A}.ipynb").is_file()
    rows = {r["exercise"]: float(r["points"]) for r in stopped_class["rows"]
            if r["student"] == student}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {g.name: g.auto_score for g in
                  gb.find_submission_notebook(A, A, student).grades if g.auto_score is not None}
    assert scores == rows
