"""Moodle's rosters (issue 48, item 5): the participants export matched by full name, what a
roster cannot map, which assignment a worksheet is kept for, and the worksheet written back."""

from __future__ import annotations

from types import SimpleNamespace as S

from autograder.grading.parent.exports import worksheet
from autograder.grading.parent.roster import (
    apply_roster,
    keep_worksheet,
    moodle_ids,
    parse_roster,
    worksheet_path,
)

PARTICIPANTS = "First name,Last name,Email address,Roles\nAda,Lovelace,ada@uni.edu,Student\n" \
    "Alan,Turing,,Student\nGrace,Hopper,grace@uni.edu,Student\n" \
    "Bo,Li,bo@uni.edu,Student\nBo,Li,bo.li@uni.edu,Student\n"  # two of one name
SHEET = "Identifier,Full name,Email address,Grade,Last modified (grade)\n" \
    "Participant 5,Ada Lovelace,ada@uni.edu,,-\nParticipant 6,Alan Turing,alan@uni.edu,,-\n"


def _sub(name: str, pid: str, lms: str = "moodle") -> S:
    return S(lms=lms, lms_id=pid, name=name, student=f"{name.replace(' ', '_')}_{pid}")


def test_the_participants_export_maps_by_full_name_and_says_what_it_cannot():
    subs = [_sub("Ada Lovelace", "5"), _sub("Alan Turing", "6"), _sub("Zoë X", "7"),
            _sub("Ada Lovelace", "8"),  # a second Ada: her id would be the first's
            _sub("Bo Li", "9")]  # the roster has two: neither is matched
    said = apply_roster(parse_roster(PARTICIPANTS), subs)
    assert [s.student for s in subs] == ["ada_uni.edu", "Alan_Turing_6", "Zoë_X_7",
                                         "Ada_Lovelace_8", "Bo_Li_9"]
    assert said == [
        "--roster: Moodle participant 6 (Alan Turing) has no one email in the roster: graded as "
        "Alan_Turing_6, a student of this assignment only",
        "--roster: Moodle participant 7 (Zoë X) has no one email in the roster: graded as "
        "Zoë_X_7, a student of this assignment only",
        "--roster: Moodle participant 8 (Ada Lovelace): ada_uni.edu is another student of "
        "this folder; graded as Ada_Lovelace_8",
        "--roster: Moodle participant 9 (Bo Li) has no one email in the roster: graded as "
        "Bo_Li_9, a student of this assignment only",
        "--roster: 1 student of the roster has no submission in this folder: Grace Hopper "
        "(Grace Hopper)"]


def test_without_a_roster_each_participant_id_is_named():
    said = moodle_ids([_sub("Ada", "5"), _sub("ada", "1", "canvas"), _sub("Bo", "6")], most=1)
    assert said[0].startswith("Moodle's download names each student by a participant id of "
                              "this assignment only (Ada (5) and 1 more)")
    assert moodle_ids([_sub("ada", "1", "canvas")]) == []


def test_a_worksheet_is_kept_for_its_one_assignment_only(tmp_path):
    path = tmp_path / "Grades-CS-a1-9.csv"
    path.write_text(SHEET)
    out = tmp_path / "out"
    assert keep_worksheet(path, out, ["a1"], [_sub("Bo", "77")]) == [
        f"--roster {path.name}: no participant of this download is in it: it is another "
        "assignment's grading worksheet (matched by full name here), so this assignment's "
        "Moodle file is not made from it: give this assignment's worksheet"]
    assert "give --assignment" in keep_worksheet(path, out, ["a1", "a2"], [_sub("Ada", "5")])[0]
    assert not (out / "rosters").exists()
    assert keep_worksheet(path, out, ["a1"], [_sub("Ada", "5")]) == []
    assert worksheet_path(out, "a1").read_text() == SHEET


def test_the_worksheet_written_back_changes_only_the_graded_rows(tmp_path):
    assert worksheet(tmp_path, "a1", [], {}, ["a1"], {}) is None  # no worksheet kept
    worksheet_path(tmp_path, "a1").parent.mkdir()
    worksheet_path(tmp_path, "a1").write_text(SHEET)
    rows = [{"notebook": "a1", "exercise": "e1", "points": "1", "max_points": "2",
             "kind": "graded"},
            {"notebook": "a1", "exercise": "e2", "points": "", "max_points": "1",
             "kind": "grader error"}]  # not decided: an empty grade, never 0
    results = {"ada_uni.edu": {"rows": rows, "lms": "moodle", "lms_id": "9"}}
    text = worksheet(tmp_path, "a1", ["ada_uni.edu"], results, ["a1"], {})
    assert text.splitlines() == [SHEET.splitlines()[0], "Participant 5,Ada Lovelace,"
                                 "ada@uni.edu,,-", SHEET.splitlines()[2]]
    rows[1].update(points="1", kind="graded")
    text = worksheet(tmp_path, "a1", ["ada_uni.edu"], results, ["a1"],
                     {("ada_uni.edu", "a1"): "2026-12-08T01:00:00+00:00"})
    assert text.splitlines()[1] == "Participant 5,Ada Lovelace,ada@uni.edu,2," \
        "2026-12-08T01:00:00+00:00"
    # a student graded without a roster is found by the row's participant id; a student of
    # another assignment only (same email) is not this row's
    alan = [{"notebook": "a1", "exercise": "e1", "points": "1", "max_points": "2",
             "kind": "graded", "lms_id": "6"}]
    results = {"Alan_Turing_6": {"rows": alan, "lms": "moodle", "lms_id": "99"},
               "alan_uni.edu": {"rows": [dict(alan[0], notebook="a2")], "lms": "moodle"}}
    text = worksheet(tmp_path, "a1", sorted(results), results, ["a1"], {})
    assert text.splitlines()[1:] == [SHEET.splitlines()[1], "Participant 6,Alan Turing,"
                                     "alan@uni.edu,1,-"]
    assert worksheet(tmp_path, "a1", [], results, ["a1"], {}) == SHEET  # none of order's


def test_a_grade_is_scaled_to_the_worksheets_maximum(tmp_path):
    worksheet_path(tmp_path, "a1").parent.mkdir()
    worksheet_path(tmp_path, "a1").write_text(
        "Identifier,Full name,Email address,Grade,Maximum Grade,Feedback comments\n"
        "Participant 5,Ada Lovelace,ada@uni.edu,,100.00,\n"
        "Participant 6,Alan Turing,alan@uni.edu,,3,\n")
    rows = [{"notebook": "a1", "exercise": "e1", "points": "1", "max_points": "2",
             "kind": "graded"}, {"notebook": "a1", "exercise": "e2", "points": "1",
                                 "max_points": "1", "kind": "graded"}]
    results = {"ada_uni.edu": {"rows": rows, "lms": "moodle"},
               "alan_uni.edu": {"rows": rows, "lms": "moodle"}}
    text = worksheet(tmp_path, "a1", sorted(results), results, ["a1"], {})
    assert text.splitlines()[1:] == [  # 2 of 3 points is 66.67 of 100; a maximum of 3: as is
        "Participant 5,Ada Lovelace,ada@uni.edu,66.67,100.00,"
        '"e1 1/2; e2 1/1 (total 2/3 points, 66.67 of Moodle\'s 100)"',
        "Participant 6,Alan Turing,alan@uni.edu,2,3,e1 1/2; e2 1/1"]
