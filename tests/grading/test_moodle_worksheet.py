"""Moodle downloaded one assignment at a time (issue 48, item 5): the same student has another
participant id in each assignment's download; ``--roster`` with each assignment's grading
worksheet makes them one student (their email's id), and each assignment's Moodle file is its
worksheet as Moodle wrote it, only the graded students' Grade, Feedback comments and Last
modified (grade) filled in, so that "Upload grading worksheet" takes it back."""

from __future__ import annotations

import csv
import shutil
import subprocess
import zipfile

import nbformat

from helpers.synthetic_class import ClassBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, read_csv
from helpers.synthetic_class.shared import template as shared_template

SOURCE = REPO / "tests" / "fixtures" / "solutions"
FIXTURE, COPY = "99_fixture", "98_copy"
# Moodle's worksheet columns (Assignment > View all submissions > Download grading worksheet)
HEADER = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
          "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
          "Feedback comments"]
PEOPLE = [("Ada Lovelace", "ada@uni.edu"), ("Grace Hopper", "grace@uni.edu"),
          ("Charles Babbage", "charles@uni.edu")]
PARTICIPANTS = {FIXTURE: ["123456", "123457", "123458"], COPY: ["223456", "223457", "223458"]}
SUBMITTED = {FIXTURE: ("Ada Lovelace", "Grace Hopper"), COPY: ("Ada Lovelace",)}


def _sheet(assignment: str) -> list[list[str]]:
    rows = [HEADER]
    for (name, email), pid in zip(PEOPLE, PARTICIPANTS[assignment]):
        handed = name in SUBMITTED[assignment]
        rows.append([f"Participant {pid}", name, email,
                     "Submitted for grading" if handed else "No submission", "", "100.00",
                     "Yes", "Tuesday, 1 December 2026, 9:00 AM" if handed else "-", "-", ""])
    return rows


def test_moodle_downloads_one_assignment_at_a_time_with_worksheets(tmp_path):
    from autograder.grading.sandbox import bwrap_path

    _, info = shared_template(SOURCE, [FIXTURE], 10)
    nb = info[FIXTURE][0]
    source = tmp_path / "source"
    shutil.copytree(SOURCE / FIXTURE, source / FIXTURE)
    (source / COPY).mkdir()
    shutil.copyfile(SOURCE / FIXTURE / f"{FIXTURE}.ipynb", source / COPY / f"{COPY}.ipynb")
    builder = ClassBuilder(nb)
    for a in (FIXTURE, COPY):  # "Download submissions in folders", one assignment at a time
        for name, pid in zip([p[0] for p in PEOPLE], PARTICIPANTS[a]):
            if name in SUBMITTED[a]:
                path = tmp_path / a / f"{name}_{pid}_assignsubmission_file_" / f"{a}.ipynb"
                path.parent.mkdir(parents=True)
                nbformat.write(builder.answered() if name == "Ada Lovelace"
                               else builder.wrong(), path)
        with open(tmp_path / f"Grades-CS101-{a}-77.csv", "w", encoding="utf-8",
                  newline="") as f:
            f.write("\ufeff")  # Moodle's CSV starts with a byte order mark
            csv.writer(f).writerows(_sheet(a))
    out = tmp_path / "out"
    sandbox = () if bwrap_path() else ("--unsandboxed",)

    def run(a: str, *extra: str) -> subprocess.CompletedProcess:
        args = ("--workers", "1", "--cell-timeout", "10", "--timeout", "120", *sandbox, *extra)
        proc = subprocess.run(grade_cmd(tmp_path / a, out, source, *args), cwd=REPO,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc

    # without a roster: each participant id is a student of that assignment only, and the
    # run says so, naming them
    err = run(COPY, "--dry-run").stderr
    assert "Moodle's download names each student by a participant id of this assignment " \
        "only (Ada Lovelace (223456))" in err and "Give --roster" in err, err

    for a in (FIXTURE, COPY):
        run(a, "--roster", str(tmp_path / f"Grades-CS101-{a}-77.csv"))
    grades = read_csv(out / "grades.csv")
    # one student per person, the same in both assignments: its email's id
    assert sorted({(r["student"], r["notebook"]) for r in grades}) == [
        ("ada_uni.edu", COPY), ("ada_uni.edu", FIXTURE), ("grace_uni.edu", FIXTURE)]
    # each row names the participant id of its own assignment's download, and so does
    # Moodle's feedback zip of each assignment, the first's still after the second's run
    assert sorted({(r["student"], r["notebook"], r["lms_id"]) for r in grades}) == [
        ("ada_uni.edu", COPY, "223456"), ("ada_uni.edu", FIXTURE, "123456"),
        ("grace_uni.edu", FIXTURE, "123457")]
    for a, names in ((FIXTURE, ["Ada Lovelace_123456", "Grace Hopper_123457"]),
                     (COPY, ["Ada Lovelace_223456"])):
        with zipfile.ZipFile(out / "return" / "moodle" / f"{a}.zip") as z:
            assert sorted(z.namelist()) == [f"{n}_assignfeedback_file/{a}.html" for n in names]
    total = f"{sum(g.max_points for g in nb.grade_cells):g}"
    when = {(c["student"], c["assignment"]): c["when"] for c in read_csv(out / "changes.csv")
            if c["exercise"] == "total"}

    def comments(right: bool) -> str:
        return "; ".join(f"{g.grade_id} {g.max_points if right else 0:g}/{g.max_points:g}"
                         for g in nb.grade_cells)

    def filled(a: str, who: int, grade: str, right: bool) -> list[str]:
        row = list(_sheet(a)[1 + who])
        student = PEOPLE[who][1].replace("@", "_")
        points = sum(g.max_points for g in nb.grade_cells)  # the worksheet's maximum is 100
        scaled = f"{float(grade) * 100 / points:.2f}"
        row[4], row[8] = scaled, when[(student, a)]
        row[9] = f"{comments(right)} (total {grade}/{points:g} points, {scaled} of Moodle's 100)"
        return row

    for a, expected in (
            (FIXTURE, [HEADER, filled(FIXTURE, 0, total, True), filled(FIXTURE, 1, "0", False),
                       _sheet(FIXTURE)[3]]),  # Charles: no submission, his row as it was
            (COPY, [HEADER, filled(COPY, 0, total, True), *_sheet(COPY)[2:]])):
        text = (out / "exports" / f"{a}.moodle.csv").read_text(encoding="utf-8")
        assert text.startswith("\ufeff")
        assert list(csv.reader(text[1:].splitlines())) == expected
    assert all(v for v in when.values())  # each total's change time, ISO 8601
    # a Moodle class: no Canvas file
    assert sorted(p.name for p in (out / "exports").iterdir()) == [
        f"{COPY}.moodle.csv", f"{FIXTURE}.moodle.csv"]
