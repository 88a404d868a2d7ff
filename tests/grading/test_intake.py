"""Intake: every entry of the submissions folder becomes exactly one Submission.

Student ids in any script (distinct, stable, safe), the LMS layouts (Canvas, Moodle, folders,
zips) giving the same students and notebooks, each bad entry with its exact problem, links and
special files never followed, and the parent's bounded reading of notebooks. All fixtures are
made here with zipfile/os. Fast, except the one marked slow (a real course-grade run).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import nbformat
import pytest

import autograder.grading.parent.submissions as intake
from autograder.grading.parent import sent
from autograder.grading.parent.rebuild import read_cells
from autograder.grading.parent.submissions import (
    IntakeProblem,
    discover,
    find_notebook,
    student_id,
)
from autograder.grading.parent.times import parse_timestamp

REPO = Path(__file__).resolve().parents[2]
NAMES = ["José Núñez", "Мария Иванова", "李娜", "王伟", "Zoë", "Zoé"]
NOTEBOOKS = ["01_attention", "02_masking"]


def _nb_text(student: str, notebook: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(f"# {student} {notebook}", id="c1"))
    return nbformat.writes(nb)


def _found(subs) -> dict[str, dict[str, str]]:
    """{display name: {notebook: its text}} as find_notebook sees each submission."""
    out = {}
    for s in subs:
        assert not s.problem, (s.student, s.problem)
        out[s.name] = {n: find_notebook(s, n)[0].read_text() for n in NOTEBOOKS}
    return out


# ---- ids -------------------------------------------------------------------------------------


def test_ids_keep_unicode_letters_distinct_and_stable(tmp_path):
    subs = tmp_path / "subs"
    for name in NAMES + ["Zoe\u0308 NFD"]:  # the last one is written decomposed (macOS)
        (subs / name).mkdir(parents=True)
        (subs / name / "01_attention.ipynb").write_text("{}")
    first, msgs = discover(subs, tmp_path / "u1")
    second, _ = discover(subs, tmp_path / "u2")
    ids = [s.student for s in first]
    assert ids == [s.student for s in second]  # stable across runs
    assert sorted(ids) == sorted(["José_Núñez", "Мария_Иванова", "李娜", "王伟", "Zoë", "Zoé",
                                  "Zoë_NFD"])
    assert "Zoë_NFD" in ids and "Zoe\u0308_NFD" not in ids  # NFC
    assert {s.name for s in first} >= set(NAMES)
    assert msgs == []


def test_hidden_entries_are_students_and_os_debris_is_not(tmp_path):
    subs = tmp_path / "subs"
    (subs / ".ann").mkdir(parents=True)
    (subs / ".ann" / "01_attention.ipynb").write_text("{}")
    (subs / ".bob.zip").write_bytes(b"junk")
    for debris in [".DS_Store", "Thumbs.db", "desktop.ini"]:
        (subs / debris).write_text("x")
    (subs / "__MACOSX" / ".ann").mkdir(parents=True)
    (subs / ".git").mkdir()
    found, msgs = discover(subs, tmp_path / "u")
    assert [(s.student, s.problem) for s in found] == [
        ("ann", ""), ("bob", "not a zip file, or a damaged one")]
    assert msgs == [".bob.zip: not a zip file, or a damaged one"]


def test_names_from_undecodable_or_control_bytes_are_safe_to_write(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    raw = os.fsencode(subs) + b"/b\xffad\x1bname"  # not UTF-8, with an escape character
    os.mkdir(raw)
    (sub,), _ = discover(subs, tmp_path / "u")
    assert (sub.student, sub.name) == ("b_ad_name", "b\ufffdadname")
    sub.name.encode("utf-8")  # a CSV or gradebook can take it


def test_student_id_is_path_and_nbgrader_safe():
    for raw in ["a/b", "../../etc", ".hidden", "x\x00y\x1bz", "*?[ab],c", "  ", "1003",
                "José" * 40, "tab\tnew\nline", "٣٤", "Ω≈ç√"]:
        sid = student_id(raw)
        assert sid and len(sid) <= intake.MAX_ID_CHARS, raw
        assert not sid.startswith(".") and not sid.isdigit(), raw
        assert not set(sid) & set("/\\*?[],\t\n\x00\x1b "), raw
        assert student_id(raw) == sid  # a function of the name alone
    assert student_id("José" * 40) != student_id("José" * 41)  # cut names keep a hash
    assert student_id("1003") == "s1003"


def test_collisions_are_disambiguated_never_dropped_and_stable(tmp_path):
    subs = tmp_path / "subs"
    for name in ["Ann Lee", "Ann_Lee", "ann lee"]:
        (subs / name).mkdir(parents=True)
        (subs / name / "01_attention.ipynb").write_text(name)
    with zipfile.ZipFile(subs / "Ann Lee.zip", "w") as zf:
        zf.writestr("01_attention.ipynb", "zip")
    found, _ = discover(subs, tmp_path / "u1")
    assert len(found) == 4 and len({s.student for s in found}) == 4
    by_origin = {s.origin.name: s.student for s in found}
    assert by_origin["Ann_Lee"] == "Ann_Lee"  # the folder named like the id keeps it
    assert by_origin["Ann Lee"].startswith("Ann_Lee_") and by_origin["Ann Lee.zip"].startswith(
        "Ann_Lee_") and by_origin["ann lee"].startswith("ann_lee_")
    # same ids from a copy of the folder elsewhere: nothing depends on where it lies
    moved = tmp_path / "elsewhere" / "subs"
    shutil.copytree(subs, moved)
    again, _ = discover(moved, tmp_path / "u2")
    assert {s.origin.name: s.student for s in again} == by_origin
    texts = {s.student: find_notebook(s, "01_attention")[0].read_text() for s in found}
    assert sorted(texts.values()) == sorted(["Ann Lee", "Ann_Lee", "ann lee", "zip"])


# ---- layouts ---------------------------------------------------------------------------------

CANVAS_NAMES = {"José Núñez": "nunezjose", "Мария Иванова": "ивановамария", "李娜": "李娜"}


def _folder_layout(dest: Path) -> None:
    for name in CANVAS_NAMES:
        for nb in NOTEBOOKS:
            p = dest / name / "hw" / f"{nb}.ipynb"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(_nb_text(name, nb))


def _zip_layout(dest: Path) -> None:
    dest.mkdir(parents=True)
    for name in CANVAS_NAMES:
        with zipfile.ZipFile(dest / f"{name}.zip", "w") as zf:
            for nb in NOTEBOOKS:
                zf.writestr(f"{name}/{nb}.ipynb", _nb_text(name, nb))


def _canvas_files(dest: Path) -> dict[str, str]:
    """{file name: text} of a Canvas download; Мария's was late, José re-uploaded 01."""
    files = {}
    for i, (name, cname) in enumerate(CANVAS_NAMES.items()):
        uid, late = 1001 + i, "LATE_" if name == "Мария Иванова" else ""
        for nb in NOTEBOOKS:
            files[f"{cname}_{late}{uid}_{5000 + i}_{nb}.ipynb"] = _nb_text(name, nb)
    first = "nunezjose_1001_5000_01_attention.ipynb"
    files["nunezjose_1001_5000_01_attention-1.ipynb"] = files[first]  # Canvas's re-upload name
    files[first] = "an older upload"
    return files


def _canvas_layout(dest: Path) -> None:
    dest.mkdir(parents=True)
    for fname, text in _canvas_files(dest).items():
        (dest / fname).write_text(text)


def _canvas_zip_layout(dest: Path) -> None:
    dest.mkdir(parents=True)
    with zipfile.ZipFile(dest / "submissions.zip", "w") as zf:
        for fname, text in _canvas_files(dest).items():
            zf.writestr(fname, text)


def _moodle_layout(dest: Path, zipped: bool = False) -> None:
    dest.mkdir(parents=True)
    entries = {}
    for i, name in enumerate(CANVAS_NAMES):
        folder = f"{name}_{2001 + i}_assignsubmission_file_"
        for nb in NOTEBOOKS:
            entries[f"{folder}/{nb}.ipynb"] = _nb_text(name, nb)
        entries[f"{name}_{2001 + i}_assignsubmission_onlinetext_/onlinetext.html"] = "<p>hi</p>"
    if zipped:
        with zipfile.ZipFile(dest / "Course-Assignment 1-123.zip", "w") as zf:
            for rel, text in entries.items():
                zf.writestr(rel, text)
    else:
        for rel, text in entries.items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_text(text)


def _moodle_flat_layout(dest: Path) -> None:
    """Moodle's download without the folders option: ``<name>_<id>_assignsubmission_file_<f>``."""
    dest.mkdir(parents=True)
    for i, name in enumerate(CANVAS_NAMES):
        for nb in NOTEBOOKS:
            (dest / f"{name}_{2001 + i}_assignsubmission_file_{nb}.ipynb").write_text(
                _nb_text(name, nb))


def _canvas_student_zips(dest: Path) -> None:
    """Canvas files that are the students' own zips of their notebooks."""
    dest.mkdir(parents=True)
    for i, (name, cname) in enumerate(CANVAS_NAMES.items()):
        with zipfile.ZipFile(dest / f"{cname}_{1001 + i}_{5000 + i}_homework.zip", "w") as zf:
            for nb in NOTEBOOKS:
                zf.writestr(f"homework/{nb}.ipynb", _nb_text(name, nb))


def _moodle_student_zips(dest: Path) -> None:
    """Moodle folders that hold the students' own zips (and a link, not followed)."""
    dest.mkdir(parents=True)
    for i, name in enumerate(CANVAS_NAMES):
        folder = dest / f"{name}_{2001 + i}_assignsubmission_file_"
        folder.mkdir()
        with zipfile.ZipFile(folder / "my homework.zip", "w") as zf:
            for nb in NOTEBOOKS:
                zf.writestr(f"{nb}.ipynb", _nb_text(name, nb))
        os.symlink("/etc/passwd", folder / "passwd")


LAYOUTS = {
    "folders": _folder_layout,
    "moodle_student_zips": _moodle_student_zips,
    "moodle_flat": _moodle_flat_layout,
    "canvas_student_zips": _canvas_student_zips,
    "zips": _zip_layout,
    "canvas": _canvas_layout,
    "canvas_zip": _canvas_zip_layout,
    "moodle": _moodle_layout,
    "moodle_zip": lambda d: _moodle_layout(d, zipped=True),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_layouts_give_the_same_students_and_notebooks(tmp_path, layout):
    _folder_layout(tmp_path / "ref")
    reference = _found(discover(tmp_path / "ref", tmp_path / "u0")[0])
    LAYOUTS[layout](tmp_path / "subs")
    subs, msgs = discover(tmp_path / "subs", tmp_path / "u1")
    assert msgs == []
    got = _found(subs)
    if layout.startswith("canvas"):  # Canvas gives its sortable login-style name only
        reference = {CANVAS_NAMES[k]: v for k, v in reference.items()}
    assert got == reference
    ids = [s.student for s in subs]
    assert ids == [s.student for s in discover(tmp_path / "subs", tmp_path / "u2")[0]]
    by_name = {s.name: s for s in subs}
    if layout.startswith("canvas"):
        assert {s.name: s.lms_id for s in subs} == {
            "nunezjose": "1001", "ивановамария": "1002", "李娜": "1003"}
        assert by_name["nunezjose"].student == "nunezjose_1001"
        assert by_name["李娜"].student == "李娜_1003"
        late = [] if layout == "canvas_student_zips" else ["ивановамария"]
        assert [s.name for s in subs if s.late_marked] == late
    elif layout.startswith("moodle"):
        assert {s.name: s.student for s in subs} == {
            "José Núñez": "José_Núñez_2001", "Мария Иванова": "Мария_Иванова_2002",
            "李娜": "李娜_2003"}
        assert {s.lms_id for s in subs} == {"2001", "2002", "2003"}
    else:
        assert sorted(ids) == sorted(["José_Núñez", "Мария_Иванова", "李娜"])
        assert not any(s.lms_id or s.late_marked for s in subs)


# ---- the same submission reached twice (issue 31, item 4) ----------------------------------

DOWNLOADS = {"canvas": (_canvas_zip_layout, "submissions.zip"),
             "moodle": (lambda d: _moodle_layout(d, zipped=True), "Course-Assignment 1-123.zip")}


@pytest.mark.parametrize("lms", sorted(DOWNLOADS))
def test_a_download_next_to_its_unpacked_copy_is_graded_once_under_its_own_ids(tmp_path, lms):
    """A tester left an LMS download's zip next to its unpacked files: each student is one
    Submission, with the id and notebooks it has when the zip is alone, taken from the
    unpacked copy; one message names the copies skipped."""
    unpacked = "next_to_it"
    make, zip_name = DOWNLOADS[lms]
    make(tmp_path / "alone")
    alone, _ = discover(tmp_path / "alone", tmp_path / "u0")
    subs = tmp_path / "subs"
    make(subs)
    into = subs
    with zipfile.ZipFile(subs / zip_name) as zf:
        zf.extractall(into)
    found, msgs = discover(subs, tmp_path / "u1")
    ids = [s.student for s in alone]
    assert [s.student for s in found] == ids  # the ids it had alone
    assert _found(found) == _found(alone)  # the same notebooks (José's re-upload on Canvas)
    assert [s.late_marked for s in found] == [s.late_marked for s in alone]
    assert [s.lms_id for s in found] == [s.lms_id for s in alone]
    assert all(s.origin.is_relative_to(subs) for s in found)  # the unpacked copy
    kept = "the submissions folder" if unpacked == "next_to_it" else f"{into.name}/"
    assert msgs == [f"{zip_name}: skipped 3 student(s) already in {kept} (the same LMS ids, "
                    f"the same files): {', '.join(sorted(ids))}"]
    again, _ = discover(subs, tmp_path / "u2")
    assert [s.student for s in again] == ids  # and on a rerun


def test_last_weeks_download_next_to_two_weeks_unpacked_is_the_same_submission(tmp_path):
    """Week 1's Canvas zip (01 only) left next to the unpacked downloads of weeks 1 and 2
    (issue 48 item 10): each file of the zip is in the unpacked copy, byte for byte, so each
    student is graded once from the copy holding every file, and the zip is said to hold
    nothing else, not "different files"."""
    subs = tmp_path / "subs"
    _canvas_layout(subs)
    week1 = {f: t for f, t in _canvas_files(subs).items() if NOTEBOOKS[0] in f}
    with zipfile.ZipFile(subs / "submissions.zip", "w") as zf:
        for fname, text in week1.items():
            zf.writestr(fname, text)
    found, msgs = discover(subs, tmp_path / "u")
    assert [(s.student, s.problem) for s in found] == [
        ("nunezjose_1001", ""), ("ивановамария_1002", ""), ("李娜_1003", "")]
    assert all(s.origin.is_relative_to(subs) for s in found)  # not the zip's copy (in u/)
    assert all(find_notebook(s, nb)[0] is not None for s in found for nb in NOTEBOOKS)
    assert msgs == ["submissions.zip: skipped 3 student(s) already in the submissions folder "
                    "(the same LMS ids, each of their files the same there): "
                    "nunezjose_1001, ивановамария_1002, 李娜_1003"]


def test_the_same_canvas_user_twice_with_other_files_is_graded_once_from_the_newer_upload(
        tmp_path):
    """A later download's zip next to the unpacked first one: José uploaded again in between
    (a higher Canvas upload number). Two different submissions of one user are never
    resolved silently (issue 47): without --resolve-duplicates neither is graded and the
    console names both; with it he is graded once, from the newer upload, and the console
    says so. The others are the same in both and are taken once."""
    subs = tmp_path / "subs"
    _canvas_layout(subs)
    later = "submissions (1).zip"
    with zipfile.ZipFile(subs / later, "w") as zf:
        for fname, text in _canvas_files(subs).items():
            if not fname.startswith("nunezjose_"):
                zf.writestr(fname, text)
        for nb in NOTEBOOKS:
            zf.writestr(f"nunezjose_1001_5009_{nb}.ipynb", f"newer {nb}")
    found, msgs = discover(subs, tmp_path / "u0")
    assert [s.student for s in found] == ["nunezjose_1001", "ивановамария_1002", "李娜_1003"]
    why = (f"two different submissions of LMS user 1001, in {later} and in the submissions "
           "folder: remove one, or grade the newest with --resolve-duplicates")
    assert (found[0].problem, found[0].path) == (why, None)
    assert not found[1].problem and not found[2].problem
    assert [m for m in msgs if m.endswith(f": {why}")]
    found, msgs = discover(subs, tmp_path / "u", resolve=True)
    assert [s.student for s in found] == ["nunezjose_1001", "ивановамария_1002", "李娜_1003"]
    jose = found[0]
    assert [find_notebook(jose, nb)[0].read_text() for nb in NOTEBOOKS] == [
        "newer 01_attention", "newer 02_masking"]
    assert msgs == [
        f"nunezjose_1001 (LMS id 1001) is in {later} and in the submissions folder with "
        f"different files: graded those in {later} (the newer Canvas upload, "
        "--resolve-duplicates), skipped the others",
        f"{later}: skipped 2 student(s) already in the submissions folder (the same LMS ids, "
        "the same files): ивановамария_1002, 李娜_1003"]


def test_the_same_moodle_user_twice_with_other_files_is_graded_from_the_unpacked_copy(
        tmp_path):
    """Moodle numbers no uploads: of a zip and its unpacked copy that differ (a file edited
    after unpacking), the unpacked one is graded, and the console says so."""
    subs = tmp_path / "subs"
    _moodle_layout(subs, zipped=True)
    zip_name = "Course-Assignment 1-123.zip"
    with zipfile.ZipFile(subs / zip_name) as zf:
        zf.extractall(subs)
    edited = subs / "李娜_2003_assignsubmission_file_" / "01_attention.ipynb"
    edited.write_text("edited")
    assert discover(subs, tmp_path / "u0")[0][2].problem.startswith(
        "two different submissions of LMS user 2003")
    found, msgs = discover(subs, tmp_path / "u", resolve=True)
    assert [s.student for s in found] == ["José_Núñez_2001", "Мария_Иванова_2002", "李娜_2003"]
    assert find_notebook(found[2], "01_attention")[0].read_text() == "edited"
    assert msgs == [
        f"李娜_2003 (LMS id 2003) is in the submissions folder and in {zip_name} with different "
        "files: graded those in the submissions folder (unpacked files before a zip, "
        "--resolve-duplicates), skipped the others",
        f"{zip_name}: skipped 2 student(s) already in the submissions folder (the same LMS "
        "ids, the same files): José_Núñez_2001, Мария_Иванова_2002"]


def test_a_students_folder_or_zip_is_theirs_whatever_its_files_are_called(tmp_path):
    """Issue 47: mallory's folder held ``turingalan_1002_9999_01_attention.ipynb`` (blank) and
    ``mallorym_1003_9999_01_attention.ipynb`` beside a Canvas download where Turing (user
    1002) handed in his work; it was read as a newer Canvas download, Turing's rows came from
    mallory's blank file and mallory had no row. LMS names are read only at the top of
    SUBMISSIONS or in a zip named as the LMS names its download: mallory's folder (or zip) is
    mallory's, and Turing's work is Turing's."""
    for packed in (False, True):
        subs = tmp_path / f"subs{packed}"
        subs.mkdir()
        (subs / "turingalan_1002_5001_01_attention.ipynb").write_text("turing's work")
        fake = {"turingalan_1002_9999_01_attention.ipynb": "blank",
                "mallorym_1003_9999_01_attention.ipynb": "mallory's work"}
        if packed:
            with zipfile.ZipFile(subs / "mallory.zip", "w") as zf:
                for name, text in fake.items():
                    zf.writestr(name, text)
        else:
            (subs / "mallory").mkdir()
            for name, text in fake.items():
                (subs / "mallory" / name).write_text(text)
        found, msgs = discover(subs, tmp_path / f"u{packed}")
        by_id = {s.student: s for s in found}
        assert sorted(by_id) == ["mallory", "turingalan_1002"]
        turing = by_id["turingalan_1002"]
        assert (turing.lms_id, turing.problem) == ("1002", "")
        assert find_notebook(turing, "01_attention")[0].read_text() == "turing's work"
        assert by_id["mallory"].lms_id == "" and not by_id["mallory"].problem
        assert len(msgs) == 1 and msgs[0].startswith("mallory")
        assert "graded as one student's" in msgs[0]


def test_an_unpacked_download_in_a_folder_is_one_folder_and_the_console_says_so(tmp_path):
    """An LMS download unpacked into a folder of SUBMISSIONS is read as one student's folder
    (its names could be anyone's): the console says how to pass it."""
    subs = tmp_path / "subs"
    _canvas_layout(subs / "canvas_01")
    found, msgs = discover(subs, tmp_path / "u")
    assert [s.student for s in found] == ["canvas_01"]
    assert msgs == ["canvas_01/ holds files named as an LMS download names them: graded as one "
                    "student's folder (an LMS download is read only at the top of SUBMISSIONS, "
                    "or as its zip under the LMS's own name)"]


def test_unpacking_never_replaces_the_students_own_files(tmp_path):
    """Issue 47: ``01_attention.ipynb`` beside ``01_attention.ipynb.zip`` in one folder gave 8
    rows "not graded: cannot read (NotADirectoryError)": the zip was unpacked into a folder
    named like the notebook. The zip goes to a folder of a free name; both notebooks stay."""
    subs = tmp_path / "subs"
    (subs / "ann").mkdir(parents=True)
    (subs / "ann" / "01_attention.ipynb").write_text("top")
    with zipfile.ZipFile(subs / "ann" / "01_attention.ipynb.zip", "w") as zf:
        zf.writestr("01_attention.ipynb", "zipped")
    (ann,), msgs = discover(subs, tmp_path / "u")
    assert (ann.problem, msgs) == ("", [])
    assert find_notebook(ann, "01_attention")[0].read_text() == "top"  # the shallowest
    assert (ann.path / "01_attention.ipynb (zip)" / "01_attention.ipynb").read_text() == "zipped"
    canvas = tmp_path / "canvas"  # the same in a Canvas file group
    canvas.mkdir()
    (canvas / "ann_1001_5001_01_attention.ipynb").write_text("top")
    with zipfile.ZipFile(canvas / "ann_1001_5001_01_attention.ipynb.zip", "w") as zf:
        zf.writestr("01_attention.ipynb", "zipped")
    (ann,), _ = discover(canvas, tmp_path / "u2")
    assert ann.problem == "" and find_notebook(ann, "01_attention")[0].read_text() == "top"


def test_ids_do_not_depend_on_what_else_lies_in_the_folder(tmp_path):
    """An LMS user's id is the one it has alone, whatever lies beside it: other students, a
    folder named like its id (that one is told apart instead), a folder of one student's
    Canvas files (still that one student's folder, as before)."""
    _canvas_layout(tmp_path / "alone")
    alone = {s.lms_id: s.student for s in discover(tmp_path / "alone", tmp_path / "u0")[0]}
    subs = tmp_path / "subs"
    _canvas_layout(subs)
    _moodle_layout(tmp_path / "moodle")
    for entry in (tmp_path / "moodle").iterdir():
        entry.rename(subs / entry.name)
    for folder, nb in [("nunezjose_1001", "01_attention.ipynb"), ("Ann Lee", "01_attention.ipynb"),
                       ("Bo", "bo_1009_5009_01_attention.ipynb")]:
        (subs / folder).mkdir()
        (subs / folder / nb).write_text(folder)
    found, msgs = discover(subs, tmp_path / "u1")
    assert msgs == []
    by_origin = {s.origin.name: s.student for s in found}
    assert {s.lms_id: s.student for s in found if s.lms_id.startswith("100")} == alone
    assert {s.lms_id: s.student for s in found if s.lms_id.startswith("200")} == {
        "2001": "José_Núñez_2001", "2002": "Мария_Иванова_2002", "2003": "李娜_2003"}
    assert by_origin["nunezjose_1001"].startswith("nunezjose_1001_")
    assert (by_origin["Ann Lee"], by_origin["Bo"]) == ("Ann_Lee", "Bo")
    bo = [s for s in found if s.student == "Bo"][0]
    assert find_notebook(bo, "01_attention")[0].read_text() == "Bo"


def test_intake_takes_no_submission_time_from_what_a_student_or_unpacking_sets(tmp_path):
    """A timestamp.txt in an upload, a file's mtime and a zip entry's time are never a
    submission time (times.py takes them from trusted sources only; see
    tests/unit/test_submission_times.py)."""
    subs = tmp_path / "subs"
    for name, stamp in [("a", "2026-11-20 14:03:00.250000 UTC"),
                        ("b", "2026-11-20T15:03:00+01:00"), ("c", None), ("d", "garbage")]:
        (subs / name).mkdir(parents=True)
        nb = subs / name / "01_attention.ipynb"
        nb.write_text("{}")
        os.utime(nb, (1_700_000_000, 1_700_000_000))
        if stamp:
            (subs / name / "timestamp.txt").write_text(stamp + "\n")
    with zipfile.ZipFile(subs / "e.zip", "w") as zf:
        zf.writestr(zipfile.ZipInfo("hw/01_attention.ipynb", (2026, 11, 20, 14, 3, 0)), "{}")
    found = {s.student: s for s in discover(subs, tmp_path / "u")[0]}
    assert sorted(found) == ["a", "b", "c", "d", "e"]
    for s in found.values():
        assert (s.times, s.time_source) == ({}, ""), s.student
    # nbgrader's own format, read where nbgrader wrote it (times.from_nbgrader)
    t = datetime(2026, 11, 20, 14, 3, tzinfo=UTC)
    assert parse_timestamp("2026-11-20 14:03:00.250000 UTC") == t.replace(microsecond=250000)
    assert parse_timestamp("2026-11-20T15:03:00+01:00") == t
    assert parse_timestamp("2026-11-20 14:03:00") == t  # no zone: UTC, as nbgrader reads it
    assert parse_timestamp("garbage") is None


# ---- bad entries: exactly one Submission each, with its problem -----------------------------


def _patch_zip(path: Path, *, flag: int | None = None, method: int | None = None) -> None:
    """Rewrite the local and central headers' flag bits / compression method in place."""
    data = bytearray(path.read_bytes())
    for sig, flag_at, method_at in ((b"PK\x03\x04", 6, 8), (b"PK\x01\x02", 8, 10)):
        at = data.find(sig)
        while at != -1:
            if flag is not None:
                old = struct.unpack_from("<H", data, at + flag_at)[0]
                struct.pack_into("<H", data, at + flag_at, old | flag)
            if method is not None:
                struct.pack_into("<H", data, at + method_at, method)
            at = data.find(sig, at + 4)
    path.write_bytes(bytes(data))


def _zip(path: Path, method=zipfile.ZIP_STORED, text="x" * 2000) -> None:
    with zipfile.ZipFile(path, "w", compression=method) as zf:
        zf.writestr("01_attention.ipynb", text)


def _encrypted(p):
    _zip(p)
    _patch_zip(p, flag=0x1)


def _encrypted_by_zip_tool(p):
    if not shutil.which("zip"):
        pytest.skip("no zip tool here (the forged case covers this)")
    src = p.parent / "plain"
    src.mkdir()
    (src / "01_attention.ipynb").write_text("{}")
    subprocess.run(["zip", "-q", "-P", "secret", str(p), "01_attention.ipynb"], cwd=src,
                   check=True)
    shutil.rmtree(src)


def _unsupported(p):
    _zip(p)
    _patch_zip(p, method=98)  # PPMd


def _crc(p):
    _zip(p)
    data = bytearray(p.read_bytes())
    at = data.find(b"x" * 100)
    data[at] = ord("y")
    p.write_bytes(bytes(data))


def _damaged_stream(p):
    _zip(p, zipfile.ZIP_DEFLATED, text=os.urandom(3000).hex())
    data = bytearray(p.read_bytes())
    for i in range(60, 200):
        data[i] ^= 0x5A
    p.write_bytes(bytes(data))


def _bomb(p):
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("01_attention.ipynb", b"\0" * (3 * 2**20))


BAD = {
    "encrypted.zip": (_encrypted, "encrypted zip (password-protected)"),
    "zip_P.zip": (_encrypted_by_zip_tool, "encrypted zip (password-protected)"),
    "ppmd.zip": (_unsupported, "zip uses an unsupported compression method"),
    "crc.zip": (_crc, "corrupt zip (CRC error)"),
    "stream.zip": (_damaged_stream, "corrupt zip (damaged compressed data)"),
    "notazip.zip": (lambda p: p.write_bytes(b"PK\x03\x04 not really"),
                    "not a zip file, or a damaged one"),
    "bomb.zip": (_bomb, "the submission's zips unpack to more than 2 MB of notebooks (zip bomb?)"),
    "link": (lambda p: os.symlink("/etc", p), "link is a symbolic link (not followed)"),
    "kmsg": (lambda p: os.symlink("/proc/kmsg", p), "kmsg is a symbolic link (not followed)"),
    "fifo": (os.mkfifo, "fifo is a FIFO"),
    "notes.txt": (lambda p: p.write_text("hi"), "neither a folder nor a .zip"),
}


@pytest.mark.parametrize("entry", sorted(BAD))
def test_bad_entry_is_one_submission_with_its_problem(tmp_path, monkeypatch, entry):
    monkeypatch.setattr(intake, "MAX_SUBMISSION_BYTES", 2 * 2**20)
    subs = tmp_path / "subs"
    (subs / "good").mkdir(parents=True)
    (subs / "good" / "01_attention.ipynb").write_text("{}")
    make, problem = BAD[entry]
    make(subs / entry)
    for run in ("first", "rerun"):  # a rerun behaves the same
        found, msgs = discover(subs, tmp_path / "unpacked")
        bad = [s for s in found if s.origin.name == entry]
        assert len(found) == 2 and len(bad) == 1, run
        assert bad[0].problem == problem and bad[0].path is None, run
        assert msgs == [f"{entry}: {problem}"], run
        assert find_notebook(bad[0], "01_attention") == (None, problem)
        good = [s for s in found if s.student == "good"][0]
        assert not good.problem and find_notebook(good, "01_attention")[0] is not None


def test_a_submissions_zips_unpack_their_notebooks_only_within_one_budget(tmp_path,
                                                                          monkeypatch):
    """Issue 47 item 7: the zip limit was per zip, and every zip beside the notebook was
    unpacked and kept. Now only a zip's notebooks are unpacked (a 3 MB data file is not), all
    of one submission's zips share one budget (two zips of 1 MB of notebooks each pass
    alone, not together), and a notebook over the size cap is never unpacked (a sparse file
    of its size stands for it, refused by its size)."""
    monkeypatch.setattr(intake, "MAX_SUBMISSION_BYTES", 2 * 2**20)
    monkeypatch.setattr(intake, "MAX_NOTEBOOK_BYTES", 2**20 + 100)
    subs = tmp_path / "subs"
    for who, zips in {"ann": 1, "bob": 2}.items():
        (subs / who).mkdir(parents=True)
        for k in range(zips):
            with zipfile.ZipFile(subs / who / f"part{k}.zip", "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr(f"{k:02d}_nb.ipynb", b" " * (2**20 + 50))
                zf.writestr(f"{k:02d}_data.bin", b"\0" * (3 * 2**20))
                zf.writestr("big.ipynb", b" " * (2**20 + 200))
    found, _ = discover(subs, tmp_path / "u")
    ann, bob = sorted(found, key=lambda s: s.student)
    assert not ann.problem
    unpacked = sorted(p.relative_to(ann.path).as_posix() for p in ann.path.rglob("*")
                      if p.is_file())
    assert unpacked == ["part0/00_nb.ipynb", "part0/big.ipynb"]
    big = ann.path / "part0" / "big.ipynb"
    assert big.stat().st_size == 2**20 + 200 and big.stat().st_blocks == 0  # sparse
    with pytest.raises(intake.IntakeProblem, match="larger than"):
        intake.open_bounded(big, intake.MAX_NOTEBOOK_BYTES)  # read_cells's first step
    assert bob.problem == ("the submission's zips unpack to more than 2 MB of notebooks "
                           "(zip bomb?)")


def test_zip_of_too_many_entries_is_refused_before_unpacking(tmp_path, monkeypatch):
    monkeypatch.setattr(intake, "MAX_ZIP_ENTRIES", 5)
    subs = tmp_path / "subs"
    subs.mkdir()
    with zipfile.ZipFile(subs / "many.zip", "w") as zf:
        for i in range(6):
            zf.writestr(f"f{i}.txt", "")
    (sub,), _ = discover(subs, tmp_path / "u")
    assert sub.problem == "zip holds more than 5 entries"
    assert not any((tmp_path / "u" / "many").glob("*"))


def test_grading_parent_turns_a_problem_into_not_graded_rows(tmp_path):
    from autograder.grading.parent.course import describe
    from autograder.grading.parent.student import grade_student

    fixture = REPO / "tests" / "fixtures" / "solutions" / "99_fixture" / "99_fixture.ipynb"
    src = nbformat.read(fixture, as_version=4)
    nb = describe("99_fixture", "99_fixture", src, src)
    subs = tmp_path / "subs"
    subs.mkdir()
    _encrypted(subs / "李娜.zip")
    (sub,), _ = discover(subs, tmp_path / "u")

    class NoRun:
        def grade(self, *a, **k):
            raise AssertionError("nothing may run for an entry intake refused")

    r = grade_student(sub, {"99_fixture": [nb]}, tmp_path / "no-template", tmp_path / "work",
                      tmp_path / "out", None, "fp", NoRun())
    assert r.student == "李娜"
    assert [(row["exercise"], row["points"], row["status"]) for row in r.rows] == [
        (g.grade_id, "", "not graded: encrypted zip (password-protected)")
        for g in nb.grade_cells]


# ---- links and special files inside a submission ---------------------------------------------


def test_notebook_links_and_special_files_are_not_followed(tmp_path):
    subs = tmp_path / "subs"
    solution = tmp_path / "solutions" / "01_attention.ipynb"
    solution.parent.mkdir()
    solution.write_text("THE SOLUTIONS")
    (subs / "honest").mkdir(parents=True)
    (subs / "honest" / "01_attention.ipynb").write_text("mine")
    (subs / "to_solutions").mkdir()
    os.symlink(solution, subs / "to_solutions" / "01_attention.ipynb")
    (subs / "to_other" / "hw").mkdir(parents=True)
    os.symlink("../../honest/01_attention.ipynb", subs / "to_other" / "hw" / "01_attention.ipynb")
    (subs / "fifo").mkdir()
    os.mkfifo(subs / "fifo" / "01_attention.ipynb")
    (subs / "dirlink").mkdir()
    os.symlink(solution.parent, subs / "dirlink" / "sol")  # a folder link is not walked
    with zipfile.ZipFile(subs / "ziplink.zip", "w") as zf:
        info = zipfile.ZipInfo("hw/01_attention.ipynb")
        info.external_attr = (0o120777 << 16)  # a symlink entry, as zip -y stores it
        zf.writestr(info, str(solution))
    found = {s.student: s for s in discover(subs, tmp_path / "u")[0]}
    assert len(found) == 6 and not any(s.problem for s in found.values())
    got = {sid: find_notebook(s, "01_attention") for sid, s in found.items()}
    assert got["honest"][0].read_text() == "mine"
    assert got["to_solutions"] == (None, "01_attention.ipynb is a symbolic link (not followed)")
    assert got["to_other"] == (None, "hw/01_attention.ipynb is a symbolic link (not followed)")
    assert got["fifo"] == (None, "01_attention.ipynb is a FIFO")
    assert got["dirlink"] == (None, "no 01_attention.ipynb in the submission")
    assert got["ziplink"] == (
        None, "hw/01_attention.ipynb is a symbolic link in the zip (not followed)")
    assert not (tmp_path / "u" / "ziplink" / "hw" / "01_attention.ipynb").exists()


def test_canvas_links_and_fifos_stay_what_they_are(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    secret = tmp_path / "secret.ipynb"
    secret.write_text("THE SOLUTIONS")
    os.symlink(secret, subs / "leeann_1001_5001_01_attention.ipynb")
    os.mkfifo(subs / "wangbo_1002_5002_01_attention.ipynb")
    found = {s.lms_id: s for s in discover(subs, tmp_path / "u")[0]}
    assert find_notebook(found["1001"], "01_attention") == (
        None, "01_attention.ipynb is a symbolic link (not followed)")
    assert find_notebook(found["1002"], "01_attention") == (None, "01_attention.ipynb is a FIFO")


# ---- the parent's bounded reader -------------------------------------------------------------


class _CountingRead:
    def __init__(self, monkeypatch):
        self.bytes = 0
        real = os.read

        def read(fd, n):
            data = real(fd, n)
            self.bytes += len(data)
            return data

        monkeypatch.setattr(intake.os, "read", read)


def _parses(monkeypatch) -> list:
    calls = []
    real = sent.too_deep
    monkeypatch.setattr(sent, "too_deep", lambda d, n: calls.append(len(d)) or real(d, n))
    return calls


def test_sparse_100_gb_notebook_is_refused_without_reading(tmp_path, monkeypatch):
    p = tmp_path / "01_attention.ipynb"
    with open(p, "wb") as f:
        f.truncate(100 * 2**30)  # sparse: no disk used
    reads = _CountingRead(monkeypatch)
    with pytest.raises(IntakeProblem) as e:
        read_cells(p)
    assert str(e.value) == "01_attention.ipynb is larger than 32 MB"
    assert reads.bytes == 0


def test_million_cell_notebook_is_refused_before_parsing(tmp_path, monkeypatch):
    cell = b'{"cell_type": "raw", "metadata": {}, "source": ""}'
    p = tmp_path / "big.ipynb"
    p.write_bytes(b'{"cells": [' + b",".join([cell] * 1_000_000)
                  + b'], "metadata": {}, "nbformat": 4, "nbformat_minor": 4}')
    reads, scans = _CountingRead(monkeypatch), _parses(monkeypatch)
    with pytest.raises(IntakeProblem) as e:
        read_cells(p)
    assert str(e.value) == "big.ipynb is larger than 32 MB"  # 51 MB: refused by lstat
    assert reads.bytes == 0 and scans == []
    # under the size cap but over the cell cap: refused by counting, before anything else
    p.write_bytes(b'{"cells": [' + b",".join([cell] * (intake.MAX_CELLS + 1))
                  + b'], "metadata": {}, "nbformat": 4, "nbformat_minor": 4}')
    with pytest.raises(IntakeProblem) as e:
        read_cells(p)
    assert str(e.value) == f"big.ipynb has more than {intake.MAX_CELLS} cells"
    caps = {"bytes": intake.MAX_NOTEBOOK_BYTES, "cells": intake.MAX_CELLS, "nesting": 64}
    assert sent.read(p.read_bytes(), caps)["kind"] == "over a cap"  # the same, in-process
    assert scans == []
    # at the cap it is read
    p.write_bytes(b'{"cells": [' + b",".join([cell] * intake.MAX_CELLS)
                  + b'], "metadata": {}, "nbformat": 4, "nbformat_minor": 4}')
    assert len(read_cells(p)) == 2000


def test_deep_nesting_is_refused_and_strings_do_not_count(tmp_path):
    p = tmp_path / "deep.ipynb"
    deep = "[" * 5000 + "]" * 5000  # json.loads would raise RecursionError on far less
    p.write_text('{"cells": [], "metadata": {"x": ' + deep + '}, "nbformat": 4, '
                 '"nbformat_minor": 5}')
    with pytest.raises(IntakeProblem) as e:
        read_cells(p)
    assert str(e.value) == "deep.ipynb nests deeper than 64 levels"
    p.write_text('{"cells": [], "metadata": {"x": "' + deep + '"}, "nbformat": 4, '
                 '"nbformat_minor": 5}')
    assert read_cells(p) == []  # inside a string: text, not nesting


def test_precheck_uses_the_bounded_reader(tmp_path):
    from autograder.grading.parent.course import describe
    from autograder.grading.parent.student import precheck

    fixture = REPO / "tests" / "fixtures" / "solutions" / "99_fixture" / "99_fixture.ipynb"
    src = nbformat.read(fixture, as_version=4)
    nb = describe("99_fixture", "99_fixture", src, src)
    sparse = tmp_path / "99_fixture.ipynb"
    with open(sparse, "wb") as f:
        f.truncate(100 * 2**30)
    assert precheck(sparse, nb) == ("99_fixture.ipynb is larger than 32 MB", None)
    link = tmp_path / "link.ipynb"
    os.symlink(fixture, link)
    assert precheck(link, nb) == ("link.ipynb is a symbolic link (not followed)", None)
    fifo = tmp_path / "fifo.ipynb"
    os.mkfifo(fifo)
    assert precheck(fifo, nb) == ("fifo.ipynb is a FIFO", None)  # and it did not hang


# ---- end to end: the layouts grade to the same rows ------------------------------------------


def test_lms_layouts_grade_to_the_same_rows_as_folders(tmp_path):
    """One course-grade run over a class mixing the layouts: the same notebook as a folder,
    Canvas files and a Moodle folder gives the same rows; a wrong one re-uploaded late to
    Canvas is the one graded; an encrypted zip and a notebook linked to another student's
    are 'not graded' with their reasons. The download was unpacked today, after the due date:
    no time is known, so only Canvas's LATE mark is penalised, in grades.csv, the exports and
    the report alike (issue 31, item 2). (4 students graded, 2 workers.)"""
    from autograder.grading.config import GradeConfig
    from autograder.grading.parent.course import build_template

    from helpers.synthetic_class import ClassBuilder
    from helpers.synthetic_class.shared import grade_cmd, read_csv

    source = REPO / "tests" / "fixtures" / "solutions"
    _, info = build_template(source, ["99_fixture"], tmp_path / "template",
                             GradeConfig(cell_timeout=5))
    nb = info["99_fixture"][0]
    builder = ClassBuilder(nb)
    right, wrong = nbformat.writes(builder.answered()), nbformat.writes(builder.wrong())
    c = tmp_path / "class"
    files = {
        "José Núñez/hw/99_fixture.ipynb": right,
        "李娜_1001_5001_99_fixture.ipynb": right,
        "Мария Иванова_2001_assignsubmission_file_/99_fixture.ipynb": right,
        "wangbo_LATE_1002_5002_99_fixture.ipynb": right,  # the first upload ...
        "wangbo_LATE_1002_5002_99_fixture-1.ipynb": wrong,  # ... and the re-upload
    }
    for rel, text in files.items():
        (c / rel).parent.mkdir(parents=True, exist_ok=True)
        (c / rel).write_text(text)
    _encrypted(c / "Zoë.zip")
    (c / "Zoé").mkdir()
    os.symlink("../José Núñez/hw/99_fixture.ipynb", c / "Zoé" / "99_fixture.ipynb")
    out = tmp_path / "out"
    proc = subprocess.run(grade_cmd(c, out, source, "--workers", "2", "--cell-timeout", "10",
                                    "--due", "99_fixture=2026-01-01T00:00Z"),
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows: dict[str, list] = {}
    for r in read_csv(out / "grades.csv"):
        rows.setdefault(r["student"], []).append((r["exercise"], r["points"], r["status"]))
    right_ids = ["José_Núñez", "李娜_1001", "Мария_Иванова_2001"]  # three scripts
    assert sorted(rows) == sorted([*right_ids, "wangbo_1002", "Zoë", "Zoé"])
    assert rows["José_Núñez"] == rows["李娜_1001"] == rows["Мария_Иванова_2001"]
    tests = [g.grade_id for g in nb.grade_cells]
    assert rows["José_Núñez"] == [(t, f"{g.max_points:g}", "graded")
                               for t, g in zip(tests, nb.grade_cells)]
    assert [p for _, p, _ in rows["wangbo_1002"]] == ["0"] * len(tests)
    assert rows["Zoë"] == [(t, "", "not graded: encrypted zip (password-protected)")
                          for t in tests]
    assert rows["Zoé"] == [
        (t, "", "not graded: 99_fixture.ipynb is a symbolic link (not followed)") for t in tests]
    assert "Zoë.zip: encrypted zip (password-protected)" in proc.stderr
    # nbgrader's paths and the sqlite gradebook take the Unicode ids
    for sid in right_ids:
        assert (out / "feedback" / sid / "99_fixture" / "99_fixture.html").is_file(), sid
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        assert {s.id for s in gb.students} == set(rows)
        assert gb.find_submission("99_fixture", "Мария_Иванова_2001").score == sum(
            g.max_points for g in nb.grade_cells)
    # each LMS's file has the students of its download, by the ids the layouts gave: Canvas's
    # by user id, Moodle's grading worksheet by participant, dated by the change log; the
    # plain folders (José, Zoë, Zoé) are in neither
    full = f"{sum(g.max_points for g in nb.grade_cells):g}"
    canvas = read_csv(out / "exports" / "99_fixture.canvas.csv")
    assert list(canvas[0]) == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                               "99_fixture"]
    assert {r["ID"]: r["99_fixture"] for r in canvas} == {"1001": full, "1002": "0"}
    when = {r["student"]: r["when"] for r in read_csv(out / "changes.csv")
            if r["exercise"] == "total"}
    assert read_csv(out / "exports" / "99_fixture.moodle.csv") == [
        {"Identifier": "Participant 2001", "Full name": "Мария Иванова", "Grade": full,
         "Maximum Grade": full, "Last modified (grade)": when["Мария_Иванова_2001"]}]
    # lateness: the files' times are today's, yet only the LATE mark counts
    from autograder.grading.parent.times import MARKED, NOT_PENALISED, UNKNOWN

    late = {(r["student"], r["late_by"], r["late_penalty"]) for r in read_csv(out / "grades.csv")}
    assert late == {*((sid, UNKNOWN, "") for sid in [*right_ids, "Zoë", "Zoé"]),
                    ("wangbo_1002", MARKED, "0")}
    summary = ["1 student late (1 marked by Canvas, time unknown); late penalty applied to 1",
               f"5 students: {UNKNOWN}; {NOT_PENALISED}"]
    assert proc.stderr.splitlines()[-2:] == [f"course-grade: {line}" for line in summary]
    report = (out / "report.html").read_text()
    assert all(f"{line}." in report for line in summary)
