"""Submission times come only from trusted sources (issue 31, item 2), on real LMS layouts made
here: intake (``submissions.discover``), the times (``times.py``), then grades.csv's rows, the
gradebook's late penalty, the LMS exports and report.html from hand-made results
(``results.ResultStore``), without running course-grade, except one run that stops at a
malformed ``--submitted-at`` file.

- a Canvas download unpacked today, due date past: no time, no penalty, ``submission time
  unknown``; Canvas's ``LATE`` mark: the penalty, in the gradebook, grades.csv, the exports and
  the report alike;
- a zip's entry times, a file's mtime and a ``timestamp.txt`` a student uploaded: ignored;
- nbgrader's own collect (a course's ``submitted/``): its ``timestamp.txt`` is used;
- the instructor's ``--submitted-at`` CSV: used; a malformed line is named with the format.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from autograder.grading.parent.exports import write_exports
from autograder.grading.parent.report import render
from autograder.grading.parent.results import ResultStore, parse_due
from autograder.grading.parent.submissions import discover
from autograder.grading.parent.times import (
    MARKED,
    NOT_PENALISED,
    UNKNOWN,
    Timing,
    apply_submitted_at,
    from_nbgrader,
    late_summary,
    lateness,
    parse_submitted_at,
    timings,
)

from helpers.downloads import download, tiny_notebook

REPO = Path(__file__).resolve().parents[2]
A = "01_attention"  # one assignment, one notebook of the same name, two exercises of 8 points
EXERCISES = ("ex1", "ex2")
DUE = datetime(2026, 11, 20, 23, 59, tzinfo=UTC)  # days before the download is unpacked
NOTEBOOKS = {A: [A]}
# Canvas's "Download Submissions": José on time, Мария marked LATE, 李娜 re-uploaded (on time)
CANVAS = {
    "nunezjose_1001_5000_01_attention.ipynb": "José",
    "ивановамария_LATE_1002_5001_01_attention.ipynb": "Мария",
    "李娜_1003_5002_01_attention.ipynb": "old",
    "李娜_1003_5002_01_attention-1.ipynb": "李娜",
}


def _canvas(dest: Path) -> Path:
    """The Canvas folder, as unpacked now (every file's mtime is today, after DUE)."""
    return download(dest, CANVAS)


@pytest.fixture(scope="module", autouse=True)
def _schema_head():
    """The gradebook schema's head as course-grade passes it to what it starts
    (``nbgrader_patches.ensure_cached_head``), for this module only: without it nbgrader runs
    the ``alembic`` command (a second of CPU) for every gradebook made here."""
    import nbgrader.api

    from autograder.grading.nbgrader_patches import HEAD_VAR, schema_head

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(HEAD_VAR, schema_head())
        # use_cached_head (below, and the ResultStore's) replaces it: put nbgrader's back after
        mp.setattr(nbgrader.api, "get_alembic_version", nbgrader.api.get_alembic_version)
        yield


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A template course's gradebook: assignment A, notebook A, EXERCISES of 8 points each."""
    from nbgrader.api import Gradebook

    from autograder.grading.nbgrader_patches import use_cached_head

    use_cached_head()
    root = tmp_path_factory.mktemp("template")
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        for ex in EXERCISES:
            gb.add_grade_cell(ex, A, A, max_score=8, cell_type="code")
            gb.add_solution_cell(f"{ex}_answer", A, A)
    return root


def _grade_all(out: Path, subs, template: Path, penalty: str = "zero",
               due: dict | None = None, not_graded: tuple[str, ...] = ()) -> list[dict]:
    """Every student full marks (ex2 of the students in ``not_graded`` not graded), stored as
    course-grade stores them; then the gradebook and grades.csv's rows, as at the end of a
    run."""
    store = ResultStore(out)
    store.assignment_of = {A: A}
    timing = timings(subs, NOTEBOOKS)
    for s in subs:
        rows = [{"student": s.student, "notebook": A, "exercise": ex, "points": "8",
                 "max_points": "8", "status": "graded"} for ex in EXERCISES]
        if s.student in not_graded:
            rows[1].update(points="", status="not graded: a cell of this exercise ran over 30 s")
        store.save(json.dumps({"student": s.student, "fingerprint": "x", "rows": rows,
                               "seconds": 1.0, "name": s.name, "lms_id": s.lms_id,
                               "lms": s.lms}),
                   s.student, timing[s.student])
    students = [s.student for s in subs]
    store.write_gradebook(template, students, subs={s.student: s for s in subs},
                          due=parse_due([f"{A}={DUE.isoformat()}"]) if due is None else due,
                          late_penalty=penalty)
    return store.final_rows(students)


def _by_student(rows: list[dict]) -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for r in rows:
        found.setdefault(r["student"], set()).add((r["late_by"], r["late_penalty"]))
    return found


def _gradebook(out: Path):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{out / 'gradebook.db'}")


# ---- Canvas: no times, and its LATE mark ------------------------------------------------------


def test_canvas_unpacked_today_due_past_only_the_late_mark_is_penalised(tmp_path, template):
    subs, _ = discover(_canvas(tmp_path / "canvas"), tmp_path / "unpacked")
    assert all(not s.times and not s.time_source for s in subs)  # mtimes are not times
    out = tmp_path / "out"
    rows = _grade_all(out, subs, template)
    assert _by_student(rows) == {
        "nunezjose_1001": {(UNKNOWN, "")},  # on time as far as anyone knows: no penalty
        "李娜_1003": {(UNKNOWN, "")},
        "ивановамария_1002": {(MARKED, "16")},  # Canvas said late: 'zero' takes the 16 points
    }
    assert {r["submitted_at"] for r in rows} == {""}
    assert {r["due"] for r in rows} == {DUE.isoformat()}
    with _gradebook(out) as gb:  # what nbgrader's export and formgrader read
        for sid, penalty in (("nunezjose_1001", None), ("ивановамария_1002", 16.0)):
            s = gb.find_submission(A, sid)
            assert (s.timestamp, s.notebooks[0].late_submission_penalty) == (None, penalty)
    results = {sid: {"rows": [r for r in rows if r["student"] == sid], "lms_id": sid[-4:]}
               for sid in {r["student"] for r in rows}}
    write_exports(out, NOTEBOOKS, results)
    with open(out / "exports" / f"{A}.canvas.csv", encoding="utf-8") as f:
        totals = {line.split(",")[1]: line.rstrip("\n").split(",")[-1] for line in f}
    assert totals == {"ID": A, "1001": "16", "1002": "0", "1003": "16"}
    assert late_summary(rows) == [
        "1 student late (1 marked by Canvas, time unknown); late penalty applied to 1",
        f"2 students: {UNKNOWN}; {NOT_PENALISED}"]


def test_the_report_shows_the_penalty_the_exports_apply(tmp_path, template):
    """report.html agrees with grades.csv and the exports: the student zeroed by the late
    penalty reads 16 -> 0, and the page does not say that nobody lost points."""
    subs, _ = discover(_canvas(tmp_path / "canvas"), tmp_path / "unpacked")
    out = tmp_path / "out"
    rows = _grade_all(out, subs, template)
    results = {s.student: {"student": s.student, "seconds": 1, "name": s.name} for s in subs}
    page = render(results, rows=rows)  # as course-grade passes grades.csv's rows
    late = re.search(r"<table class=late>(.*?)</table>", page, re.S).group(1)
    assert re.findall(r"<tr><td>(\w+)", late) == ["ивановамария_1002"]
    assert "late (marked by Canvas)</td><td class=n>16</td><td class=n>16</td>" \
        "<td class=n>0</td>" in late
    assert "No graded exercise lost points.</p>" not in page
    assert "Points were lost to the late penalty" in page
    assert f"2 students: submission time unknown; {NOT_PENALISED}." in page


def test_the_reports_totals_table_agrees_with_the_exports(tmp_path, template):
    """report.html's totals (issue 31, item 14): one row per student with the total the Canvas
    export gives, on a class with a manual score (1001: ex1 scored 5 by hand), a late student
    (1002: marked LATE, zeroed) and a not-graded exercise (1003: "not graded", never 0)."""
    subs, _ = discover(_canvas(tmp_path / "canvas"), tmp_path / "unpacked")
    out = tmp_path / "out"
    _grade_all(out, subs, template, not_graded=("李娜_1003",))
    with _gradebook(out) as gb:  # what formgrader saves for a manual score
        gb.find_grade("ex1", A, A, "nunezjose_1001").manual_score = 5.0
        gb.db.commit()
    store = ResultStore(out)
    store.assignment_of = {A: A}
    rows = store.final_rows([s.student for s in subs])  # grades.csv's rows, as passed
    results = {s.student: {"student": s.student, "seconds": 1, "name": s.name,
                           "lms_id": s.lms_id, "rows": [r for r in rows if r["student"] ==
                                                         s.student]} for s in subs}
    write_exports(out, NOTEBOOKS, results)
    with open(out / "exports" / f"{A}.canvas.csv", encoding="utf-8") as f:
        exported = {line.split(",")[1]: line.rstrip("\n").split(",")[-1] for line in f}
    assert exported == {"ID": A, "1001": "13", "1002": "0", "1003": ""}

    page = render(results, rows=rows, notebooks=NOTEBOOKS)
    table = re.search(r"<table class=totals>(.*?)</table>", page, re.S).group(1)
    header = re.findall(r"<th>(.*?)</th>", table)
    assert header == ["student", "id", "SIS / LMS id", A, "total", "lateness"]
    shown = {cells[2]: cells for cells in (re.findall(r"<td[^>]*>(.*?)</td>", tr)
                                           for tr in re.findall(r"<tr><td.*?</tr>", table))}
    assert shown == {
        "1001": ["nunezjose", "nunezjose_1001", "1001", "13", "13",
                 f"{A}: time unknown, no penalty"],
        "1002": ["ивановамария", "ивановамария_1002", "1002", "0", "0",
                 f"{A}: marked late by Canvas, penalty 16"],
        "1003": ["李娜", "李娜_1003", "1003", "not graded", "not graded",
                 f"{A}: time unknown, no penalty"],
    }
    for lms_id, cells in shown.items():  # the report's total is the export's, cell for cell
        assert cells[3] == (exported[lms_id] or "not graded")


def test_a_per_day_policy_with_grace_floor_and_extension_is_the_same_everywhere(tmp_path,
                                                                                template):
    """Issue 48, item 3: 10%/day, at most half, 15 minutes' grace. José 10 min late (grace:
    none), 李娜 1 day 1 h late (two started days: 3.2 of 16), Мария marked LATE by Canvas
    (no time: the most, 8); then Мария's extension: Canvas's mark is against the class's due
    date, so no penalty. The gradebook (nbgrader's extension and late_submission_penalty),
    grades.csv, the Canvas export and the report agree."""
    from autograder.grading.gradebook import LatePolicy
    from autograder.grading.parent.times import EXTENDED_MARK, WITHIN_GRACE, parse_extensions

    subs, _ = discover(_canvas(tmp_path / "canvas"), tmp_path / "unpacked")
    apply_submitted_at(parse_submitted_at(
        f"student,submitted_at\nnunezjose_1001,{(DUE + timedelta(minutes=10)).isoformat()}\n"
        f"李娜_1003,{(DUE + timedelta(days=1, hours=1)).isoformat()}\n"), subs)
    policy = LatePolicy.parse("10%/day", floor="50%", grace="15m")
    out = tmp_path / "out"
    rows = _grade_all(out, subs, template, penalty=policy)

    def agree(rows, expected):
        assert _by_student(rows) == {sid: {(by, p)} for sid, (by, p, _) in expected.items()}
        with _gradebook(out) as gb:
            assert {sid: gb.find_submission(A, sid).notebooks[0].late_submission_penalty
                    for sid in expected} == {sid: float(p) if p else None
                                             for sid, (_, p, _) in expected.items()}
        results = {sid: {"rows": [r for r in rows if r["student"] == sid], "lms_id": sid[-4:]}
                   for sid in expected}
        write_exports(out, NOTEBOOKS, results)
        with open(out / "exports" / f"{A}.canvas.csv", encoding="utf-8") as f:
            totals = {line.split(",")[1]: line.rstrip("\n").split(",")[-1] for line in f}
        assert {k: v for k, v in totals.items() if k != "ID"} == \
            {sid[-4:]: total for sid, (_, _, total) in expected.items()}
        page = render({sid: {"student": sid, "seconds": 1} for sid in expected}, rows=rows)
        late = re.search(r"<table class=late>(.*?)</table>", page, re.S).group(1)
        for sid, (by, p, total) in expected.items():  # the report: 16 before, the export after
            if p:
                assert f"{by}</td><td class=n>{p}</td><td class=n>16</td><td class=n>{total}" \
                    in late, sid

    agree(rows, {"nunezjose_1001": ("0:10:00", "", "16"),  # within the grace
                 "李娜_1003": ("1 day, 1:00:00", "3.2", "12.8"),
                 "ивановамария_1002": (MARKED, "8", "8")})  # the floor: half kept

    extensions = parse_extensions("student,assignment,due\nивановамария_1002,*,+3d\n")
    store = ResultStore(out)
    store.assignment_of = {A: A}
    store.grace = policy.grace  # as course-grade sets it: grades.csv says why José is on time
    students = [s.student for s in subs]
    store.write_gradebook(template, students, subs={s.student: s for s in subs},
                          late_penalty=policy,
                          extensions=lambda sid, a, due: extensions[0].delta(due)
                          if sid == "ивановамария_1002" else None)
    rows = store.final_rows(students)
    with _gradebook(out) as gb:  # nbgrader's own extension: formgrader and export see it
        assert gb.find_submission(A, "ивановамария_1002").extension == timedelta(days=3)
    assert {r["due"] for r in rows if r["student"] == "ивановамария_1002"} == \
        {(DUE + timedelta(days=3)).isoformat()}
    agree(rows, {"nunezjose_1001": (f"0:10:00 {WITHIN_GRACE}", "", "16"),
                 "李娜_1003": ("1 day, 1:00:00", "3.2", "12.8"),
                 "ивановамария_1002": (EXTENDED_MARK, "", "16")})
    assert late_summary(rows) == [
        "1 student late; late penalty applied to 1",
        f"1 student late {WITHIN_GRACE}: not penalised",
        f"1 student: {UNKNOWN}; {NOT_PENALISED}"]


def test_late_mark_applies_without_a_due_date_and_none_only_shows_it(tmp_path, template):
    subs, _ = discover(_canvas(tmp_path / "canvas"), tmp_path / "unpacked")
    rows = _grade_all(tmp_path / "out", subs, template, due={})
    assert _by_student(rows)["ивановамария_1002"] == {(MARKED, "16")}
    assert _by_student(rows)["nunezjose_1001"] == {("", "")}  # no due date: nothing to say
    rows = _grade_all(tmp_path / "out-none", subs, template, penalty="none")
    assert _by_student(rows)["ивановамария_1002"] == {(MARKED, "")}  # shown, not taken


def test_a_late_mark_counts_for_the_assignment_of_its_file_only(tmp_path):
    """Two Canvas downloads in one folder: LATE on the 02 file marks 02, not 01."""
    folder = tmp_path / "canvas"
    folder.mkdir()
    (folder / "nunezjose_1001_5000_01_attention.ipynb").write_text(tiny_notebook("01"))
    (folder / "nunezjose_LATE_1001_6000_02_masking.ipynb").write_text(tiny_notebook("02"))
    with zipfile.ZipFile(folder / "nunezjose_LATE_1001_6001_hw3.zip", "w") as zf:
        zf.writestr("hw/03_feed_forward.ipynb", tiny_notebook("03"))
    (sub,), _ = discover(folder, tmp_path / "u")
    assert sub.late_marked and sub.late_files == {"02_masking.ipynb", "hw3"}
    got = timings([sub], {"01_attention": ["01_attention"], "02_masking": ["02_masking"],
                          "03_feed_forward": ["03_feed_forward"]})
    assert {a: t.marked_late for a, t in got["nunezjose_1001"].items()} == {
        "01_attention": False, "02_masking": True, "03_feed_forward": True}


# ---- what is never a submission time -------------------------------------------------------


def test_zip_times_mtimes_and_uploaded_timestamps_are_ignored(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for sid, when in (("old", (2020, 1, 1, 0, 0, 0)), ("new", (2030, 1, 1, 0, 0, 0))):
        with zipfile.ZipFile(subs / f"{sid}.zip", "w") as zf:  # the student sets these
            zf.writestr(zipfile.ZipInfo(f"hw/{A}.ipynb", when), tiny_notebook(sid))
            zf.writestr(zipfile.ZipInfo("timestamp.txt", when), "2020-01-01 00:00:00 UTC")
    own = subs / "own"  # a folder with the student's own timestamp.txt, and an old mtime
    (own / A).mkdir(parents=True)
    (own / f"{A}.ipynb").write_text(tiny_notebook("own"))
    os.utime(own / f"{A}.ipynb", (1_600_000_000, 1_600_000_000))
    (own / "timestamp.txt").write_text("2020-01-01 00:00:00 UTC")
    (own / A / "timestamp.txt").write_text("2020-01-01 00:00:00 UTC")  # nbgrader's place
    moodle = subs / "Ann Lee_2001_assignsubmission_file_"
    (moodle / A).mkdir(parents=True)
    (moodle / A / f"{A}.ipynb").write_text(tiny_notebook("ann"))
    (moodle / A / "timestamp.txt").write_text("2020-01-01 00:00:00 UTC")
    with zipfile.ZipFile(subs / "bo_1001_5000_hw.zip", "w") as zf:  # a Canvas file: a zip
        zf.writestr(f"{A}/{A}.ipynb", tiny_notebook("bo"))
        zf.writestr(f"{A}/timestamp.txt", "2020-01-01 00:00:00 UTC")
    found, msgs = discover(subs, tmp_path / "u")
    assert msgs == [] and len(found) == 5
    assert from_nbgrader(subs, found) == 0  # not an nbgrader course's submitted/
    for s in found:
        assert (s.times, s.time_source, s.late_marked) == ({}, "", False), s.student
    got = timings(found, NOTEBOOKS)
    assert {sid: t[A] for sid, t in got.items()} == dict.fromkeys(got, Timing())
    assert {lateness(t[A], DUE)[0] for t in got.values()} == {UNKNOWN}


# ---- nbgrader's own collect ------------------------------------------------------------------


def _nbgrader_course(root: Path) -> Path:
    """An nbgrader course after ``nbgrader collect``: submitted/<student>/<assignment>/."""
    (root / "nbgrader_config.py").parent.mkdir(parents=True)
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    for sid, stamp in (("ann", "2026-11-20 22:00:00.500000 UTC"),
                       ("bob", "2026-11-21 08:30:00 UTC"), ("cy", None)):
        folder = root / "submitted" / sid / A
        folder.mkdir(parents=True)
        (folder / f"{A}.ipynb").write_text(tiny_notebook(sid))
        if stamp:
            (folder / "timestamp.txt").write_text(stamp)
    # not nbgrader's: one level deeper, a link to another folder, a zip
    (root / "submitted" / "cy" / A / "old").mkdir()
    (root / "submitted" / "cy" / A / "old" / "timestamp.txt").write_text("2020-01-01")
    os.symlink(root / "submitted" / "ann" / A, root / "submitted" / "cy" / "02_masking")
    with zipfile.ZipFile(root / "submitted" / "dee.zip", "w") as zf:
        zf.writestr(f"{A}/{A}.ipynb", tiny_notebook("dee"))
        zf.writestr(f"{A}/timestamp.txt", "2020-01-01 00:00:00 UTC")
    return root / "submitted"


def test_nbgrader_collected_timestamps_are_used(tmp_path, template):
    submitted = _nbgrader_course(tmp_path / "course")
    subs, _ = discover(submitted, tmp_path / "u")
    assert from_nbgrader(submitted, subs) == 2
    by_id = {s.student: s for s in subs}
    assert by_id["ann"].times == {A: datetime(2026, 11, 20, 22, 0, 0, 500000, tzinfo=UTC)}
    assert by_id["ann"].time_source == "nbgrader timestamp.txt"
    assert by_id["cy"].times == by_id["dee"].times == {}
    out = tmp_path / "out"
    rows = _grade_all(out, subs, template)
    assert _by_student(rows) == {"ann": {("", "")}, "bob": {("8:31:00", "16")},
                                 "cy": {(UNKNOWN, "")}, "dee": {(UNKNOWN, "")}}
    with _gradebook(out) as gb:
        assert gb.find_submission(A, "bob").timestamp == datetime(2026, 11, 21, 8, 30)


def test_in_nbgrader_layout_a_notebook_comes_only_from_its_assignments_folder(tmp_path):
    """Issue 47: a student who missed 01 put 01_attention.ipynb into their on-time 02
    submission; it was graded 16/16 with 'submission time unknown'. In nbgrader's
    submitted/, assignment A's notebook is taken only from <student>/A/ (whose timestamp.txt
    is A's time); the same folders elsewhere are a student's own and searched as before."""
    from autograder.grading.parent.submissions import find_notebook, strays

    for course in (True, False):
        root = tmp_path / f"course{course}"
        late = root / "submitted" / "ann" / "02_masking"
        late.mkdir(parents=True)
        if course:
            (root / "nbgrader_config.py").write_text("")
        (late / "timestamp.txt").write_text("2026-11-20 22:00:00 UTC")
        for nb in (A, "02_masking"):
            (late / f"{nb}.ipynb").write_text(tiny_notebook("ann"))
        subs, _ = discover(root / "submitted", tmp_path / f"u{course}")
        from_nbgrader(root / "submitted", subs)
        (ann,) = subs
        assert ann.per_assignment is course
        assert find_notebook(ann, "02_masking", "02_masking")[0] == ann.path / "02_masking" / \
            "02_masking.ipynb"
        found, note = find_notebook(ann, A, A)
        assert (found is None) is course, (found, note)
        if course:
            assert note == f"no {A}.ipynb in the submission"
        # the console names the file not graded (and none in its own folder)
        nested = late / A
        nested.mkdir()
        (nested / f"{A} (1).ipynb").write_text(tiny_notebook("ann"))
        said = strays(ann, {A: [A], "02_masking": ["02_masking"]})
        assert said == ([f"ann: 02_masking/{A}.ipynb is not in {A}'s folder: not graded",
                         f"ann: 02_masking/{A}/{A} (1).ipynb is not in {A}'s folder: not "
                         "graded"] if course else []), said


def test_a_copy_of_submitted_outside_a_course_is_not_trusted(tmp_path):
    submitted = _nbgrader_course(tmp_path / "course")
    (tmp_path / "course" / "nbgrader_config.py").unlink()  # a folder named so, no course
    subs, _ = discover(submitted, tmp_path / "u")
    assert from_nbgrader(submitted, subs) == 0 and all(not s.times for s in subs)


# ---- the instructor's CSV --------------------------------------------------------------------


def test_submitted_at_csv_by_id_lms_id_or_name_and_per_assignment(tmp_path, template):
    subs, _ = discover(_canvas(tmp_path / "canvas"), tmp_path / "unpacked")
    text = ("\ufeffStudent,Submitted_At,Assignment\n"  # a spreadsheet's BOM and capitals
            "nunezjose_1001,2026-11-20T23:00:00+01:00,\n"
            "1002,2026-11-20T20:00:00Z,01_attention\n"  # Canvas's user id
            "\n"
            "李娜,2026-11-21 00:00,01_attention\n"  # the name Canvas lists; no zone: UTC
            "nobody,2026-11-20T20:00:00Z,\n")
    stated = parse_submitted_at(text, "--submitted-at times.csv")
    assert [(s.line, s.who) for s in stated] == [
        (2, "nunezjose_1001"), (3, "1002"), (5, "李娜"), (6, "nobody")]
    msgs = apply_submitted_at(stated, subs, "--submitted-at times.csv")
    assert msgs == ["--submitted-at times.csv line 6: no student 'nobody' in the submissions "
                    "(skipped)"]
    rows = _grade_all(tmp_path / "out", subs, template)
    # José on time; Мария's time (on time) wins over Canvas's mark; 李娜 0:01 late
    assert _by_student(rows) == {"nunezjose_1001": {("", "")}, "ивановамария_1002": {("", "")},
                                 "李娜_1003": {("0:01:00", "16")}}
    assert {r["submitted_at"] for r in rows if r["student"] == "nunezjose_1001"} == {
        "2026-11-20T22:00:00+00:00"}


def test_submitted_at_wins_over_nbgrader_and_a_later_run_updates_stored_results(tmp_path):
    submitted = _nbgrader_course(tmp_path / "course")
    subs, _ = discover(submitted, tmp_path / "u")
    from_nbgrader(submitted, subs)
    store = ResultStore(tmp_path / "out")
    store.assignment_of = {A: A}
    for s in subs:  # graded in a first run, without the CSV
        rows = [{"student": s.student, "notebook": A, "exercise": "ex1", "points": "8",
                 "max_points": "8", "status": "graded"}]
        store.save(json.dumps({"student": s.student, "rows": rows}), s.student,
                   timings(subs, NOTEBOOKS)[s.student])
    apply_submitted_at(parse_submitted_at("student,submitted_at\nbob,2026-11-20T12:00Z\n"),
                       subs)
    assert {s.student: s.time_source for s in subs}["bob"] == "--submitted-at"
    store.record_timing(timings([s for s in subs if s.student != "ann"], NOTEBOOKS))
    stored = {sid: r["timing"][A]["at"] for sid, r in store.load().items()}
    assert stored == {"ann": "2026-11-20T22:00:00.500000+00:00",  # absent: kept
                      "bob": "2026-11-20T12:00:00+00:00", "cy": "", "dee": ""}


@pytest.mark.parametrize("text, line, what", [
    ("student,submitted_at\nann,2026-11-20T12:00Z\nbob,yesterday\n", 3, "'yesterday' is not"),
    ("student,submitted_at\nann\n", 2, "1 fields, the header has 2"),
    ("name,time\nann,2026-11-20T12:00Z\n", 1, "the header names no student"),
    ("student,submitted_at\n,2026-11-20T12:00Z\n", 2, "no student"),
])
def test_a_malformed_submitted_at_line_is_named_with_the_format(text, line, what):
    with pytest.raises(ValueError) as e:
        parse_submitted_at(text, "--submitted-at t.csv")
    assert f"--submitted-at t.csv line {line}: " in str(e.value) and what in str(e.value)
    assert "ISO 8601" in str(e.value) and "student and submitted_at" in str(e.value)


def test_a_name_two_students_share_or_a_second_time_is_refused(tmp_path):
    folder = tmp_path / "moodle"
    for uid in (2001, 2002):
        (folder / f"Ann Lee_{uid}_assignsubmission_file_").mkdir(parents=True)
        (folder / f"Ann Lee_{uid}_assignsubmission_file_" / f"{A}.ipynb").write_text(
            tiny_notebook("a"))
    subs, _ = discover(folder, tmp_path / "u")
    with pytest.raises(ValueError, match=r"line 2: 'Ann Lee' names 2 students"):
        apply_submitted_at(parse_submitted_at("student,submitted_at\nAnn Lee,2026-11-20\n"),
                           subs)
    twice = "student,submitted_at\n2001,2026-11-20\nAnn_Lee_2001,2026-11-21\n"
    with pytest.raises(ValueError, match=r"line 3: a second time for Ann_Lee_2001"):
        apply_submitted_at(parse_submitted_at(twice), subs)


def test_course_grade_stops_on_a_malformed_submitted_at_file(tmp_path):
    """The command line: exit 2 before anything is graded, naming the file's line."""
    subs = _canvas(tmp_path / "canvas")
    bad = tmp_path / "times.csv"
    bad.write_text("student,submitted_at\nnunezjose_1001,2026-13-01T00:00\n")
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.grade", str(subs), "--out", str(tmp_path / "out"),
         "--unsandboxed", "--no-progress", "--submitted-at", str(bad)],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "--submitted-at times.csv line 2: '2026-13-01T00:00' is not an ISO 8601 time" \
        in proc.stderr and "expected a CSV file with a header line" in proc.stderr
    assert not (tmp_path / "out" / "results").exists()


def test_lateness_rules():
    due = DUE
    at = due + timedelta(hours=2)
    assert lateness(Timing(at), due) == ("2:00:00", 7200.0)
    assert lateness(Timing(due - timedelta(seconds=1), marked_late=True), due) == ("", 0.0)
    assert lateness(Timing(at, marked_late=True), None) == (MARKED, float("inf"))
    assert lateness(Timing(at), None) == ("", 0.0)
    assert lateness(Timing(), due) == (UNKNOWN, 0.0)
