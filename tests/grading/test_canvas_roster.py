"""Canvas classes (issue 31, item 13) on real Canvas "Download Submissions" layouts, without
running course-grade: intake (``submissions.discover``), ``--roster`` (``roster.py``: the
gradebook export's names and SIS ids), then the stored results (``results.ResultStore``),
grades.csv, the exports and ``return/`` (``write_returns``: Canvas's re-upload zip, and no Moodle
zip for a Canvas class).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.grading.parent import settings
from autograder.grading.parent.exports import write_exports
from autograder.grading.parent.results import ResultStore, write_returns
from autograder.grading.parent.roster import (
    apply_roster,
    parse_roster,
    read_columns,
    read_roster,
)
from autograder.grading.parent.submissions import discover, intake_facts
from autograder.grading.parent.times import timings

from helpers.downloads import download, tiny_notebook

REPO = Path(__file__).resolve().parents[2]
A1, A2 = "01_attention", "02_masking"
NOTEBOOKS = {A1: [A1], A2: [A2]}
# Canvas's download of two assignments unpacked into one folder: the second number is the
# file's own id, so it differs per assignment; Babbage was LATE on 02 and re-uploaded 01 (-1);
# Hopper (1003) is not in the roster
FILES = [
    "lovelaceada_1001_5000_01_attention.ipynb",
    "lovelaceada_1001_6000_02_masking.ipynb",
    "babbagecharles_1002_5001_01_attention.ipynb",
    "babbagecharles_1002_5001_01_attention-1.ipynb",
    "babbagecharles_LATE_1002_6001_02_masking.ipynb",
    "hoppergrace_1003_5002_01_attention.ipynb",
]
# Canvas's gradebook export: a byte-order mark, the "Points Possible" row, a test student
ROSTER = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,01_attention (88)\n"
    "    Points Possible,,,,,16.00\n"
    '"Lovelace, Ada",1001,S-1001,ada@uni.edu,CS101 A,\n'
    '"Babbage, Charles",1002,S-1002,charles@uni.edu,CS101 B,\n'
    '"Student, Test",1999,,,CS101 A,\n'
)
ADA, CHARLES, GRACE = "lovelaceada_1001", "babbagecharles_1002", "hoppergrace_1003"


def _canvas(dest: Path) -> Path:
    return download(dest, {name: name for name in FILES})


def _store(out: Path, subs, feedback: bool = True) -> ResultStore:
    """Every student's results stored as course-grade stores them (one row per notebook
    handed in, full marks), with this intake's facts, and a feedback page per notebook."""
    store = ResultStore(out)
    store.assignment_of = {nb: a for a, nbs in NOTEBOOKS.items() for nb in nbs}
    store.people = intake_facts(subs, NOTEBOOKS)
    timing = timings(subs, NOTEBOOKS)
    for s in subs:
        handed_in = [a for a in NOTEBOOKS if any(f.startswith(s.student.split("_")[0])
                                                 and a in f for f in FILES)]
        rows = [{"student": s.student, "notebook": a, "exercise": "ex1", "points": "4",
                 "max_points": "4", "status": "graded"} for a in handed_in]
        pages = []
        for a in handed_in if feedback else []:
            rel = f"feedback/{s.student}/{a}/{a}.html"
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text(f"feedback {s.student} {a}")
            pages.append(rel)
        store.save(json.dumps({"student": s.student, "fingerprint": "x", "rows": rows,
                               "seconds": 1.0, "name": s.name, "lms_id": s.lms_id,
                               "feedback": pages}), s.student, timing[s.student])
    return store


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_roster_gives_names_and_sis_ids_in_grades_csv_and_the_exports(tmp_path):
    subs, _ = discover(_canvas(tmp_path / "canvas"), tmp_path / "u")
    assert [(s.student, s.lms, s.name) for s in subs] == [
        (CHARLES, "canvas", "babbagecharles"), (GRACE, "canvas", "hoppergrace"),
        (ADA, "canvas", "lovelaceada")]
    roster = parse_roster(ROSTER)
    assert sorted(roster) == ["1001", "1002", "1999"]  # not "Points Possible"
    assert apply_roster(roster, subs) == [
        f"--roster: Canvas user 1003 (hoppergrace, {GRACE}) is not in the roster; its "
        "download name is kept",
        "--roster: 1 student of the roster has no submission in this folder: Student, Test "
        "(1999)"]  # issue 48 item 10: Canvas's test student, here
    store = _store(tmp_path / "out", subs)
    path = store.write_csv([s.student for s in subs])
    got = {(r["student"], r["name"], r["lms_id"], r["sis_id"]) for r in _csv(path)}
    assert got == {(ADA, "Lovelace, Ada", "1001", "S-1001"),  # the id does not change
                   (CHARLES, "Babbage, Charles", "1002", "S-1002"),
                   (GRACE, "hoppergrace", "1003", "")}
    rows = store.final_rows()
    results: dict[str, dict] = {}
    for row in rows:  # as course-grade passes grades.csv's rows to the exports
        results.setdefault(row["student"], {"rows": [], "name": row["name"],
                                            "lms_id": row["lms_id"]})["rows"].append(row)
    # the roster kept as the class's setting (as course-grade keeps --roster) names the
    # assignment's Canvas column: the export's header, "Name (id)"; 02 has no column
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    settings.write(tmp_path / "out", {"roster": str(tmp_path / "roster.csv")})
    assert read_columns(tmp_path / "roster.csv", [A1, A2]) == ({A1: "01_attention (88)"}, [
        f"--roster: no column of the roster is the assignment {A2} (Canvas's header "
        f"'Name (id)'): its Canvas export's header is '{A2}', which Canvas imports as a new "
        "assignment"])
    write_exports(tmp_path / "out", NOTEBOOKS, results)
    canvas = _csv(tmp_path / "out" / "exports" / f"{A1}.canvas.csv")
    assert [list(r.items()) for r in canvas][0][-1] == ("01_attention (88)", "4")
    assert [list(r.values()) for r in canvas] == [
        ["Babbage, Charles", "1002", "S-1002", "charles@uni.edu", "CS101 B", "4"],
        ["hoppergrace", "1003", "", "", "", "4"],
        ["Lovelace, Ada", "1001", "S-1001", "ada@uni.edu", "CS101 A", "4"]]
    assert list(_csv(tmp_path / "out" / "exports" / f"{A2}.canvas.csv")[0])[-1] == A2
    # a Canvas class: Canvas's files only
    assert sorted(p.name for p in (tmp_path / "out" / "exports").iterdir()) == [
        f"{A1}.canvas.csv", f"{A2}.canvas.csv"]


def test_a_roster_given_on_a_later_run_renames_students_graded_before(tmp_path):
    out = tmp_path / "out"
    subs, _ = discover(_canvas(tmp_path / "canvas"), tmp_path / "u")
    _store(out, subs)  # the first run: no roster
    assert {r["name"] for r in ResultStore(out).final_rows() if r["student"] == ADA} == {
        "lovelaceada"}
    apply_roster(parse_roster(ROSTER), subs)  # the next run: nothing graded again
    store = ResultStore(out)
    store.people = intake_facts(subs, NOTEBOOKS)
    store.record_timing(timings(subs, NOTEBOOKS))
    assert {(r["name"], r["sis_id"]) for r in store.final_rows() if r["student"] == ADA} == {
        ("Lovelace, Ada", "S-1001")}


def test_feedback_goes_back_as_canvas_reupload_zips_and_no_moodle_zip(tmp_path):
    """Each page named as Canvas named that student's file for the assignment in its download
    (the re-uploaded file's prefix, LATE kept); a Moodle zip only for a Moodle class."""
    out = tmp_path / "out"
    subs, _ = discover(_canvas(tmp_path / "canvas"), tmp_path / "u")
    apply_roster(parse_roster(ROSTER), subs)
    store = _store(out, subs)
    root = write_returns(out, store.load(), [s.student for s in subs])
    assert sorted(p.name for p in root.iterdir()) == [
        f"Babbage, Charles ({CHARLES})", "Lovelace, Ada (lovelaceada_1001)", "canvas",
        f"hoppergrace ({GRACE})"]  # no "moodle"
    names = {}
    for a in NOTEBOOKS:
        with zipfile.ZipFile(root / "canvas" / f"{a}.zip") as z:
            names[a] = sorted(z.namelist())
            assert all(z.read(n).decode().startswith("feedback ") for n in names[a])
    assert names == {
        A1: ["babbagecharles_1002_5001_01_attention.html",
             "hoppergrace_1003_5002_01_attention.html",
             "lovelaceada_1001_5000_01_attention.html"],
        A2: ["babbagecharles_LATE_1002_6001_02_masking.html",
             "lovelaceada_1001_6000_02_masking.html"]}
    with zipfile.ZipFile(root / "canvas" / f"{A2}.zip") as z:
        assert z.read("lovelaceada_1001_6000_02_masking.html") == \
            f"feedback {ADA} {A2}".encode()


def test_a_moodle_class_gets_the_moodle_zip_and_no_canvas_zip(tmp_path):
    folder = tmp_path / "moodle"
    for i, name in enumerate(["José Núñez", "Мария Иванова"]):
        d = folder / f"{name}_{2001 + i}_assignsubmission_file_"
        d.mkdir(parents=True)
        (d / f"{A1}.ipynb").write_text(tiny_notebook(name))
    subs, _ = discover(folder, tmp_path / "u")
    assert {s.lms for s in subs} == {"moodle"}
    out = tmp_path / "out"
    store = ResultStore(out)
    store.people = intake_facts(subs, NOTEBOOKS)
    for s in subs:
        rel = f"feedback/{s.student}/{A1}/{A1}.html"
        (out / rel).parent.mkdir(parents=True)
        (out / rel).write_text("x")
        store.save(json.dumps({"student": s.student, "rows": [], "feedback": [rel]}), s.student)
    root = write_returns(out, store.load(), [s.student for s in subs])
    assert not (root / "canvas").exists()
    with zipfile.ZipFile(root / "moodle" / f"{A1}.zip") as z:
        assert sorted(z.namelist()) == [f"José Núñez_2001_assignfeedback_file/{A1}.html",
                                        f"Мария Иванова_2002_assignfeedback_file/{A1}.html"]


@pytest.mark.parametrize("text", ["Name,User\nAda,1\n", ""])
def test_a_file_that_is_not_a_canvas_gradebook_export_is_refused(text, tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match="not a Canvas gradebook export .* Student, ID, SIS"):
        read_roster(path)


def test_course_grade_dry_run_lists_roster_names_and_stops_on_a_bad_roster(tmp_path):
    subs = _canvas(tmp_path / "canvas")
    (tmp_path / "roster.csv").write_text(ROSTER)
    # (an LMS download is one assignment's: --assignment grades 02 too, of the same folder)
    run = [sys.executable, "-m", "autograder.grade", str(subs), "--dry-run", "--assignment",
           A1, A2, "--roster"]
    proc = subprocess.run([*run, str(tmp_path / "roster.csv")], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Lovelace, Ada" in proc.stdout and "Canvas user 1003" in proc.stderr
    # the Canvas export's headers: 02 has no column in this roster, and the run says so
    assert f"--roster: no column of the roster is the assignment {A2} " in proc.stderr
    assert f"assignment {A1} " not in proc.stderr
    (tmp_path / "bad.csv").write_text("Name\nAda\n")
    proc = subprocess.run([*run, str(tmp_path / "bad.csv")], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2 and "not a Canvas gradebook export" in proc.stderr
