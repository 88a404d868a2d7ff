"""Kill ``course-grade`` midway, rerun it: the rest is graded, the done ones are not regraded,
no grade is lost or duplicated. Uses the small fixture assignment (plain Python, no torch) and
the class cases the notebook-01 class does not have (missing notebook, deleted answer cell, a
loop that ignores interrupts), plus a student whose wall-time limit runs out. The kill lands
after 3 students (1 worker) and at a seeded random moment (2 workers); after it no process of
the killed run is left and grades.csv names no student without a result file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from helpers.synthetic_class import ClassBuilder, matches
from helpers.synthetic_class.shared import REPO, grade_cmd, read_csv
from helpers.synthetic_class.shared import template as shared_template

SOURCE = REPO / "tests" / "fixtures" / "solutions"
ASSIGNMENT = "99_fixture"
KEEP = {"correct", "wrong", "blank", "missing", "deleted_answer", "stubborn_loop"}


@pytest.fixture(scope="module")
def fixture_info(tmp_path_factory):
    """The session's template of the fixture assignment at this module's cell limit (5 s):
    built once (``shared.template``), the one this module's course-grade runs start from
    (``grade_cmd``: the session's template cache); read only."""
    template, info = shared_template(SOURCE, [ASSIGNMENT], 5)
    return template, info[ASSIGNMENT][0], tmp_path_factory.mktemp("fixture-work")


def _results(out: Path) -> dict[str, dict]:
    return {
        p.stem: json.loads(p.read_text()) for p in (out / "results").glob("*.json")
    }


def _leftover_processes(out: Path) -> list[int]:
    """Processes whose command line or environment names ``out`` (nbgrader, bwrap, ...)."""
    needle, found = str(out).encode(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            proc = Path("/proc") / entry
            if needle in proc.joinpath("cmdline").read_bytes() + \
                    proc.joinpath("environ").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def _describe(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        return f"state {stat[0]} ppid {stat[1]}: {cmd[:300].decode(errors='replace')}"
    except OSError:
        return "gone"


def _kill_then_rerun(nb, expected, class_dir: Path, out: Path, keep: set[str], workers: int,
                     kill_when) -> tuple[dict, dict]:
    """Grade ``class_dir``, SIGKILL the run when ``kill_when(results, seconds)`` says so, check
    what the kill left, rerun; check the rerun's results and CSV. (results before, after)."""
    args = ("--workers", str(workers), "--cell-timeout", "5", "--timeout", "120",
            "--memory", "2048")
    cmd = grade_cmd(class_dir, out, SOURCE, *args)
    first = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    while first.poll() is None and time.monotonic() - t0 < 300 \
            and not kill_when(_results(out), time.monotonic() - t0):
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)  # a crash, not a polite stop
    first.wait()
    before = _results(out)
    # the children die with it (PDEATHSIG, --die-with-parent). CI rehearsals on a loaded
    # 2-core machine saw the newest job's process (still `limits`, joining its cgroup) there
    # after 15 s in state D and after 45 s in state R; limits.py now sets PDEATHSIG before the
    # join, so a wait a fatal signal interrupts ends at once, but one in state D only when
    # the kernel call returns: 45 s
    deadline = time.monotonic() + 45
    while _leftover_processes(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {p: _describe(p) for p in _leftover_processes(out)}
    assert left == {}
    if (out / "grades.csv").exists():
        # the CSV never names a student without a result file; a kill between a student's
        # result file and the CSV rewrite leaves it behind by at most one student a worker
        partial = read_csv(out / "grades.csv")
        in_csv = {r["student"] for r in partial}
        assert in_csv <= set(before) and len(before) - len(in_csv) <= workers
        core = ("student", "notebook", "exercise", "points", "max_points", "status")
        for r in partial:  # (the CSV's other columns come from the gradebook, empty here)
            assert {k: r[k] for k in core} in [
                {k: x[k] for k in core} for x in before[r["student"]]["rows"]]

    second = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    if before:
        assert f"{len(before)} student(s) already graded, skipped" in second.stderr
    after = _results(out)
    assert set(after) == keep
    for student, result in before.items():  # not regraded: the same result (and run id)
        assert after[student] == result

    rows = read_csv(out / "grades.csv")
    keys = Counter((r["student"], r["exercise"]) for r in rows)
    assert max(keys.values()) == 1 and len(keys) == len(keep) * len(nb.grade_cells)
    for student in keep:
        got = {r["exercise"]: r for r in rows if r["student"] == student}
        bad = {ex: (got[ex]["points"], got[ex]["status"], e)
               for ex, e in expected[student].items() if not matches(got[ex], e)}
        assert not bad, (student, bad)
    return before, after


def _class(nb, tmp_path: Path, keep: set[str]) -> tuple[dict, Path]:
    expected = ClassBuilder(nb).build(tmp_path / "all", extra=("missing", "deleted_answer",
                                                                "stubborn_loop"))
    class_dir = tmp_path / "class"
    class_dir.mkdir()
    for entry in (tmp_path / "all").iterdir():
        if entry.name.removesuffix(".zip") in keep:
            entry.rename(class_dir / entry.name)
    return expected, class_dir


def test_kill_and_rerun(fixture_info, tmp_path):
    _, nb, _ = fixture_info
    expected, class_dir = _class(nb, tmp_path, KEEP)
    before, _ = _kill_then_rerun(nb, expected, class_dir, tmp_path / "out", KEEP, 1,
                                 lambda results, seconds: len(results) >= 3)
    assert 3 <= len(before) < len(KEEP), "the kill should land midway"


KILL_SEED = 20261123
RANDOM_KEEP = {"correct", "wrong", "blank", "missing", "deleted_answer"}


def test_kill_at_a_random_moment_and_rerun(fixture_info, tmp_path):
    """SIGKILL after a seeded random delay, anywhere from start-up (template, unpacking) to
    the last student (this class grades in ~15-30 s on 2 workers), then a rerun."""
    import random

    _, nb, _ = fixture_info
    delay = random.Random(KILL_SEED).uniform(0.5, 20.0)
    expected, class_dir = _class(nb, tmp_path, RANDOM_KEEP)
    out = tmp_path / "out"
    _kill_then_rerun(nb, expected, class_dir, out, RANDOM_KEEP, 2,
                     lambda results, seconds: seconds >= delay)


def test_rerun_rebuilds_a_csv_left_behind_by_a_kill(fixture_info, tmp_path):
    """A kill between ``store.save`` and ``store.write_csv`` leaves a result file whose
    student is not in grades.csv (seen once in CI); the rerun writes the CSV from all result
    files first, grades nobody again, and the student is there."""
    _, nb, _ = fixture_info
    keep = {"correct", "missing"}
    expected, class_dir = _class(nb, tmp_path, keep)
    out = tmp_path / "out"
    cmd = grade_cmd(class_dir, out, SOURCE, "--workers", "1", "--cell-timeout", "5")
    assert subprocess.run(cmd, cwd=REPO, capture_output=True).returncode == 0
    results = _results(out)
    rows = read_csv(out / "grades.csv")
    (out / "grades.csv").write_text(  # as the kill left it: the last student missing
        ",".join(rows[0]) + "\n"
        + "".join(",".join(r.values()) + "\n" for r in rows if r["student"] != "missing"))
    second = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert "2 student(s) already graded, skipped" in second.stderr
    assert _results(out) == results
    assert read_csv(out / "grades.csv") == rows


def test_wall_time_limit_in_the_students_own_code_scores_from_the_records(fixture_info,
                                                                          tmp_path):
    """Issue 47 item 3: the student's time limit reached while their own answer cell runs is
    the student's doing: each exercise scores from its sealed record, 0 where there is none
    (the fixture's checks run in the kernel: no record), flagged; not "not graded". (A limit
    hit in a test cell or in the grader's own work stays "not graded": tests/unit/
    test_after_limit.py.)"""
    from autograder.grading.config import GradeConfig
    from autograder.grading.parent.student import grade_student
    from autograder.grading.parent.submissions import Submission
    from autograder.grading.status import STOPPED_NO_RESULT

    template, nb, work = fixture_info
    builder = ClassBuilder(nb)
    builder.build(tmp_path / "class")
    # a student whose first answer sleeps far past the limit (not past the cell limit): the
    # limit is reached in that cell, the kernel's start and the setup long done even on a
    # loaded machine (with 1.5 s, under load, the limit fell in the setup: "not graded")
    slow = builder.answered(lambda gid, src: ("import time\ntime.sleep(120)\n" + src
                                              if gid == builder.first else src))
    nbformat.write(slow, tmp_path / "class" / "correct" / f"{nb.name}.ipynb")
    sub = Submission("correct", tmp_path / "class" / "correct", tmp_path / "class" / "correct")
    config = GradeConfig(timeout=20, cell_timeout=150, memory_mb=2048)
    t0 = time.monotonic()
    r = grade_student(sub, {ASSIGNMENT: [nb]}, template, tmp_path / "work", tmp_path, config,
                      "x")
    assert time.monotonic() - t0 < 150  # the limit, then at most the judging's own limit
    said = f"{STOPPED_NO_RESULT}ran past the time limit of 20 s in cell "
    assert [row["status"][:len(said)] for row in r.rows] == [said] * len(nb.grade_cells), r.rows
    assert all(row["points"] == "0" for row in r.rows), r.rows
    assert all(row["flagged"] for row in r.rows), r.rows
    # the stopped notebook's page (issue 47): what ran, and the cell the limit stopped
    pages = [tmp_path / f for f in r.feedback]
    assert pages and all(p.is_file() for p in pages), r.feedback
    html = pages[0].read_text()
    assert "This notebook stopped." in html
    assert "Your code ran past the time limit of 20 s in cell " in html


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

        def grade(self, *a, **k):
            raise OSError("disk full")

    monkeypatch.setattr(grade, "make_runner", lambda config: Broken())
    assert grade.main(argv) == 0
    rows = read_csv(tmp_path / "out" / "grades.csv")
    assert {r["status"] for r in rows} == {"not graded: grader error (OSError: disk full)"}
    monkeypatch.undo()
    assert grade.main(argv) == 0  # the next run grades the student again
    rows = read_csv(tmp_path / "out" / "grades.csv")
    assert [(r["points"], r["status"]) for r in rows] == [
        (f"{g.max_points:g}", "graded") for g in nb.grade_cells
    ]


def test_a_partial_folder_keeps_the_class_and_prune_removes_on_purpose(fixture_info, tmp_path,
                                                                      capsys):
    """OUT_DIR is the class's ledger (issue 31, item 3; issue 48, item 1): a rerun on a folder
    holding one late student's one notebook keeps every other student's rows, exports,
    returns and gradebook entries, and that student's other notebook (graded before, not in
    this folder), with the same template (nothing rebuilt), grading nothing; it says how many
    students and results it kept. ``--prune --dry-run`` lists what ``--prune`` removes, which
    then removes them on purpose: the absent student, and the late one's other notebook
    (now "not submitted"), each logged in changes.csv."""
    import shutil

    from nbgrader.api import Gradebook

    import autograder.grade as grade

    _, nb, _ = fixture_info
    source = tmp_path / "source"  # two assignments: the fixture and a copy of it
    shutil.copytree(SOURCE / ASSIGNMENT, source / ASSIGNMENT)
    shutil.copytree(SOURCE / ASSIGNMENT, source / "98_copy")
    (source / "98_copy" / f"{ASSIGNMENT}.ipynb").rename(source / "98_copy" / "98_copy.ipynb")
    ClassBuilder(nb).build(tmp_path / "all")
    full, late = tmp_path / "class", tmp_path / "late"
    for name in ("correct", "wrong"):  # one notebook each, under its plain name
        (full / name).mkdir(parents=True)
        found = next((tmp_path / "all" / name).glob(f"{ASSIGNMENT}*.ipynb"))
        shutil.copyfile(found, full / name / f"{ASSIGNMENT}.ipynb")
        shutil.copyfile(found, full / name / "98_copy.ipynb")
    out = tmp_path / "out"

    def run(folder: Path, *extra: str) -> tuple[list[dict], str, str]:
        capsys.readouterr()
        assert grade.main([str(folder), "--out", str(out), "--source", str(source),
                           "--no-progress", "--workers", "2", "--cell-timeout", "5",
                           *extra]) == 0
        stdout, stderr = capsys.readouterr()
        if "--dry-run" in extra:
            return [], stdout, stderr
        return read_csv(out / "grades.csv"), stdout, stderr

    def table(rows):
        return {(r["student"], r["notebook"], r["exercise"]): (r["points"], r["status"])
                for r in rows}

    rows, _, _ = run(full)
    assert {(r["student"], r["notebook"]) for r in rows} == {
        (s, n) for s in ("correct", "wrong") for n in ("98_copy", ASSIGNMENT)}
    before = table(rows)
    results = _results(out)
    templates = sorted(p.name for p in (out / ".work").glob("template-*"))
    late.mkdir()  # the late one, downloaded on its own: one notebook
    (late / "wrong").mkdir()
    (full / "wrong" / f"{ASSIGNMENT}.ipynb").rename(late / "wrong" / f"{ASSIGNMENT}.ipynb")
    rows, _, err = run(late)
    assert table(rows) == before and _results(out) == results  # nothing graded, nothing lost
    assert "kept 1 student(s) graded earlier whose submissions are not in this folder " \
        "(correct); --prune removes them" in err
    assert "kept 1 earlier result(s) of notebooks not in this folder" in err
    assert sorted(p.name for p in (out / ".work").glob("template-*")) == templates
    assert (out / "feedback" / "correct").is_dir()
    assert (out / "feedback" / "wrong" / "98_copy" / "98_copy.html").is_file()
    assert any(p.name.endswith("(correct)") or p.name == "correct"
               for p in (out / "return").iterdir())
    log = (out / "changes.csv").read_bytes()
    _, stdout, _ = run(late, "--prune", "--dry-run")
    assert stdout.splitlines()[-3:] == [f"--prune would remove from {out}: 2 result(s)",
                                        "  correct (every result)", "  wrong 98_copy"]
    rows, _, err = run(late, "--prune")
    assert {r["student"] for r in rows} == {"wrong"}
    assert "--prune: removed 1 student(s) not in this folder: correct" in err
    assert {v[1] for k, v in table(rows).items() if k[:2] == ("wrong", "98_copy")} == {
        "not graded: no 98_copy.ipynb in the submission"}
    assert not (out / "feedback" / "wrong" / "98_copy").exists()
    assert not (out / "results" / "correct.json").exists()
    assert not (out / "feedback" / "correct").exists()
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        assert [s.id for s in gb.students] == ["wrong"]
    text = (out / "changes.csv").read_bytes()
    assert text.startswith(log)  # appended to, never rewritten
    pruned = [line for line in read_csv(out / "changes.csv")[log.count(b"\n") - 1:]
              if line["exercise"] == "total"]
    assert sorted((c["student"], c["assignment"], c["cause"], c["new"]) for c in pruned) == [
        ("correct", "98_copy", "option --prune", ""),
        ("correct", ASSIGNMENT, "option --prune", ""),
        ("wrong", "98_copy", "option --prune", "none")]
