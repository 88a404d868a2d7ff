"""An instructor's term on course-grade's output: an nbgrader course directory whose gradebook
keeps what the instructor entered.

- unit level (no grading, a few seconds): the class gradebook and grades.csv from stored
  results: display names in three scripts and LMS ids, a late submission and nbgrader's
  penalty, "not graded" kept apart from 0 in ``nbgrader export``; a review of a changed
  autograded score under a manual score stays until formgrader resolves it; work never
  handed in is no submission (formgrader's counts, ``nbgrader export``);
- end to end (the small fixture assignment, two students, six course-grade runs): OUT is a
  course directory nbgrader reads; a manual score, extra credit and a comment (set through
  nbgrader's Gradebook API, as formgrader does) survive a rerun, ``--regrade`` and a regrade
  that changes the autograded score, which the run reports, and still reports after
  ``--force``, until the instructor resolves it in formgrader. The late policy (issue 48,
  item 3: 10%/day, a floor, a grace period) and an extension given later: the same penalty in
  the gradebook, grades.csv and ``nbgrader export``, kept in settings.json for the runs that
  leave the options out, and each penalty change in changes.csv with its cause.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from autograder.grading.config import GradeConfig
from autograder.grading.parent.results import ResultStore, parse_due, write_course_config
from autograder.grading.parent.times import UNKNOWN, WITHIN_GRACE, Timing

from helpers.synthetic_class import ClassBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, read_csv
from helpers.synthetic_class.shared import template as shared_template

SOURCE = REPO / "tests" / "fixtures" / "solutions"
ASSIGNMENT = "99_fixture"
DUE = datetime(2026, 12, 1, 23, 59, tzinfo=timezone(timedelta(hours=1)))


@pytest.fixture(scope="module")
def fixture_template():
    """The session's template of the fixture assignment at the cell limit of :func:`_grade`'s
    runs (``shared.template``: built once, and the one those runs start from); read only."""
    template, info = shared_template(SOURCE, [ASSIGNMENT], 10)
    return template, info[ASSIGNMENT][0]


def _gradebook(out: Path):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{out / 'gradebook.db'}")


def _nbgrader(out: Path, *args: str) -> subprocess.CompletedProcess:
    """Stock nbgrader, started in OUT (it reads OUT's nbgrader_config.py)."""
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=out,
                          capture_output=True, text=True, timeout=120)


def _then_export(code: str, folder: Path | None = None) -> str:
    """Python code: ``code``, then stock ``nbgrader export`` in the same interpreter, started
    in ``folder`` if given (else where ``code`` ran): what ``python -m nbgrader export`` runs
    (nbgrader/__main__.py: its app's ``main``, which reads the folder's nbgrader_config.py),
    without a second interpreter's start and import of nbgrader (~3 s of CPU)."""
    cd = f"import os; os.chdir({str(folder)!r})\n" if folder is not None else ""
    return (f"{code}\nimport sys\n{cd}sys.stdout.flush(); sys.argv = ['nbgrader', 'export']\n"
            "from nbgrader.apps.nbgraderapp import main\nmain()\n")


def _api_then_export(cwd: Path, expr: str, folder: Path | None = None, setup: str = ""):
    """Ask formgrader's API (``api``, in ``cwd``'s course; after ``setup``) for ``expr``, then
    run stock ``nbgrader export`` in the same interpreter (:func:`_then_export`, in
    ``folder``): (the finished process, the values of ``expr`` printed, JSON-decoded)."""
    code = ("import json; from nbgrader.apps import NbGraderAPI;"
            "from nbgrader.apps.baseapp import NbGrader; app = NbGrader(); app.initialize([]);"
            f"api = NbGraderAPI(config=app.config); {setup}print('API', json.dumps({expr}))")
    proc = subprocess.run([sys.executable, "-c", _then_export(code, folder)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    return proc, [json.loads(line[4:]) for line in proc.stdout.splitlines()
                  if line.startswith("API ")]


def _formgrader_save(out: Path, cell: str, nb: str, student: str, manual_score,
                     extra_credit=None) -> None:
    """What formgrader writes when the instructor saves a score or presses Resolve (its
    GradeHandler.put): both scores, and ``needs_manual_grade`` cleared unless nothing scores
    the cell."""
    with _gradebook(out) as gb:
        grade = gb.find_grade(cell, nb, ASSIGNMENT, student)
        grade.manual_score, grade.extra_credit = manual_score, extra_credit
        grade.needs_manual_grade = manual_score is None and grade.auto_score is None
        gb.db.commit()


# ---- unit level: results -> gradebook and CSV -------------------------------------------------
STUDENTS = {  # id: (display name, LMS id, submitted, not graded)
    "jose_nunez": ("José Núñez", "1002", DUE - timedelta(hours=2), False),
    "maria_ivanova": ("Мария Иванова", "1003", DUE + timedelta(days=1, minutes=30), False),
    "li_na": ("李娜", "1004", None, True),
}


def _store_class(out: Path, nb) -> tuple[ResultStore, dict]:
    store = ResultStore(out)
    subs = {}
    for sid, (name, lms_id, when, ungraded) in STUDENTS.items():
        rows = [{"student": sid, "notebook": nb.name, "exercise": g.grade_id,
                 "points": "" if ungraded else f"{g.max_points:g}",
                 "max_points": f"{g.max_points:g}",
                 "status": "not graded: the kernel died" if ungraded else "graded"}
                for g in nb.grade_cells]
        result = {"student": sid, "fingerprint": "x", "rows": rows, "seconds": 1.0,
                  "feedback": [], "notes": [], "name": name, "lms_id": lms_id}
        store.save(json.dumps(result), sid, {ASSIGNMENT: Timing(when)})  # as course-grade does
        subs[sid] = SimpleNamespace(student=sid, name=name, lms_id=lms_id)
    return store, subs


def test_names_lms_ids_and_late_penalty_in_gradebook_and_csv(fixture_template, tmp_path):
    template, nb = fixture_template
    out = tmp_path / "out"
    store, subs = _store_class(out, nb)
    store.write_gradebook(template, list(STUDENTS), subs=subs,
                          due=parse_due([f"{ASSIGNMENT}={DUE.isoformat()}"]),
                          late_penalty="zero")
    rows = read_csv(store.write_csv(list(STUDENTS), assignment_of={nb.name: ASSIGNMENT}))
    total = sum(g.max_points for g in nb.grade_cells)
    with _gradebook(out) as gb:
        for sid, (name, lms_id, _, _) in STUDENTS.items():
            st = gb.find_student(sid)
            assert (st.last_name, st.lms_user_id) == (name, lms_id)
        late = gb.find_submission_notebook(nb.name, ASSIGNMENT, "maria_ivanova")
        on_time = gb.find_submission_notebook(nb.name, ASSIGNMENT, "jose_nunez")
        assert late.late_submission_penalty == pytest.approx(total)  # 'zero': penalty = score
        assert on_time.late_submission_penalty is None
    by_student = {}
    for r in rows:
        by_student.setdefault(r["student"], []).append(r)
    for sid, (name, lms_id, when, _) in STUDENTS.items():
        assert {(r["name"], r["lms_id"]) for r in by_student[sid]} == {(name, lms_id)}
        assert {r["submitted_at"] for r in by_student[sid]} == {when.isoformat() if when else ""}
    assert {(r["late_by"], r["late_penalty"]) for r in by_student["maria_ivanova"]} == \
        {("1 day, 0:30:00", f"{total:g}")}
    assert {(r["late_by"], r["late_penalty"]) for r in by_student["jose_nunez"]} == {("", "")}
    # no trusted time: no penalty, and the row says why
    assert {(r["late_by"], r["late_penalty"]) for r in by_student["li_na"]} == {(UNKNOWN, "")}
    assert {r["due"] for r in rows} == {"2026-12-01T22:59:00+00:00"}


@pytest.fixture(scope="module")
def export_and_formgrader(fixture_template, tmp_path_factory):
    """The two courses of the next two tests (an OUT each, as each test describes), and one
    interpreter that asks formgrader's API in the second, then runs ``nbgrader export`` in
    the first (:func:`_then_export`): (export's OUT, formgrader's OUT, the API's answer)."""
    from autograder.grading.parent.results import publish_student

    template, nb = fixture_template
    root = tmp_path_factory.mktemp("export-and-formgrader")
    # nbgrader export's course: the due date and a late penalty
    out = root / "export" / "out"
    store, subs = _store_class(out, nb)
    write_course_config(out, GradeConfig(cell_timeout=10), "zero")
    store.write_gradebook(template, list(STUDENTS), subs=subs,
                          due={ASSIGNMENT: DUE}, late_penalty="zero")
    # formgrader's course: every student's grading folder published
    fg = root / "formgrader" / "out"
    store, subs = _store_class(fg, nb)
    write_course_config(fg, GradeConfig(cell_timeout=10), "zero")
    for sid in STUDENTS:  # what a student's grading folder holds after nbgrader ran
        work = root / "formgrader" / "work" / sid
        for kind in ("submitted", "autograded"):
            path = work / kind / sid / ASSIGNMENT / f"{nb.name}.ipynb"
            path.parent.mkdir(parents=True)
            nbformat.write(nb.release, path)
        publish_student(work, fg, sid, [ASSIGNMENT])
    store.write_gradebook(template, list(STUDENTS), subs=subs)  # and timestamp.txt with it
    proc, answer = _api_then_export(fg, f"sorted(api.get_autograded_students({ASSIGNMENT!r}))",
                                    out)
    return out, fg, proc, answer


def test_nbgrader_export_keeps_not_graded_apart_from_zero(fixture_template,
                                                          export_and_formgrader):
    """Stock ``nbgrader export`` in OUT (its config names our plugin): the student whose
    kernel died has an empty score and needs_manual_grade, the late one 0 after penalty."""
    _, nb = fixture_template
    out, _, proc, _ = export_and_formgrader
    assert proc.returncode == 0, proc.stderr
    rows = {r["student_id"]: r for r in read_csv(out / "export.csv")}
    total = f"{sum(g.max_points for g in nb.grade_cells):g}"
    assert (rows["li_na"]["score"], rows["li_na"]["needs_manual_grade"]) == ("", "True")
    assert rows["li_na"]["last_name"] == "李娜"
    assert (rows["maria_ivanova"]["raw_score"], rows["maria_ivanova"]["score"],
            rows["maria_ivanova"]["late_submission_penalty"]) == (total, "0", total)
    assert (rows["jose_nunez"]["score"], rows["jose_nunez"]["needs_manual_grade"]) == \
        (total, "False")
    assert not (out / "grades.csv").exists()  # nbgrader's default name is not ours to take


def test_formgrader_counts_every_published_student_as_autograded(export_and_formgrader):
    """Formgrader lists a submission as autograded only when submitted/.../timestamp.txt
    matches the gradebook's submission time; with and without a known time."""
    _, out, proc, answer = export_and_formgrader
    stamps = {sid: (out / "submitted" / sid / ASSIGNMENT / "timestamp.txt") for sid in STUDENTS}
    assert {sid: p.is_file() for sid, p in stamps.items()} == {
        sid: when is not None for sid, (_, _, when, _) in STUDENTS.items()}
    assert answer == [sorted(STUDENTS)], proc.stderr


def test_rewriting_the_gradebook_keeps_manual_scores_and_comments(fixture_template, tmp_path):
    template, nb = fixture_template
    out = tmp_path / "out"
    store, subs = _store_class(out, nb)
    store.write_gradebook(template, list(STUDENTS), subs=subs)
    g0, g1 = nb.grade_cells[0].grade_id, nb.grade_cells[1].grade_id
    answer = nb.grade_cells[0].solution_ids[0]
    with _gradebook(out) as gb:
        gb.find_grade(g0, nb.name, ASSIGNMENT, "jose_nunez").manual_score = 0.5
        gb.find_grade(g1, nb.name, ASSIGNMENT, "jose_nunez").extra_credit = 1.0
        gb.find_comment(answer, nb.name, ASSIGNMENT, "jose_nunez").manual_comment = "see me"
        gb.db.commit()
    # the autograder now gives jose 0 on g0: the manual score stays, the change is reported
    r = json.loads((out / "results" / "jose_nunez.json").read_text())
    r["rows"][0]["points"] = "0"
    store.save(json.dumps(r), "jose_nunez")
    messages = store.write_gradebook(template, list(STUDENTS), subs=subs)
    assert len(messages) == 1 and messages[0].startswith(f"jose_nunez {nb.name} {g0}: "), messages
    with _gradebook(out) as gb:
        grade = gb.find_grade(g0, nb.name, ASSIGNMENT, "jose_nunez")
        assert (grade.auto_score, grade.manual_score) == (0.0, 0.5)
        assert gb.find_grade(g1, nb.name, ASSIGNMENT, "jose_nunez").extra_credit == 1.0
        assert gb.find_comment(answer, nb.name, ASSIGNMENT,
                               "jose_nunez").manual_comment == "see me"
    rows = {r["exercise"]: r for r in read_csv(store.write_csv(
        ["jose_nunez"], {(nb.name, g0): [answer]})) if r["student"] == "jose_nunez"}
    mx1 = nb.grade_cells[1].max_points
    assert (rows[g0]["points"], rows[g0]["auto_points"], rows[g0]["manual_points"],
            rows[g0]["comment"]) == ("0.5", "0", "0.5", "see me")
    assert "changed 1 -> 0 under manual score 0.5" in rows[g0]["review"].replace(".0", "")
    assert (rows[g1]["points"], rows[g1]["extra_credit"]) == (f"{mx1 + 1:g}", "1")


def test_review_stays_until_the_instructor_resolves_it_in_formgrader(fixture_template,
                                                                    tmp_path):
    """A changed autograded score under a manual score: flagged in the gradebook (formgrader
    shows "needs manual grade") and reviewed in grades.csv on every run, the result rebuilt
    by a regrade included, until formgrader saves the score (Resolve) or the manual score
    changes; a regrade that changes nothing raises none."""
    template, nb = fixture_template
    out = tmp_path / "out"
    store, subs = _store_class(out, nb)
    store.write_gradebook(template, list(STUDENTS), subs=subs)
    g0, full = nb.grade_cells[0].grade_id, f"{nb.grade_cells[0].max_points:g}"
    sid = "jose_nunez"

    def regrade(points: str) -> tuple[list[str], str, bool]:
        """jose's result rebuilt from scratch, as ``--force`` does, with ``points`` on g0;
        then the run's end: (messages, g0's review in grades.csv, g0's flag)."""
        rows = [{"student": sid, "notebook": nb.name, "exercise": g.grade_id,
                 "points": points if g.grade_id == g0 else f"{g.max_points:g}",
                 "max_points": f"{g.max_points:g}", "status": "graded"}
                for g in nb.grade_cells]
        store.save(json.dumps({"student": sid, "fingerprint": "x", "rows": rows, "seconds": 1,
                               "feedback": [], "notes": []}), sid)
        messages = store.write_gradebook(template, list(STUDENTS), subs=subs)
        review = next(r["review"] for r in read_csv(store.write_csv(list(STUDENTS)))
                      if (r["student"], r["exercise"]) == (sid, g0))
        with _gradebook(out) as gb:
            return messages, review, gb.find_grade(g0, nb.name, ASSIGNMENT,
                                                   sid).needs_manual_grade

    _formgrader_save(out, g0, nb.name, sid, 0.5)
    assert regrade(full) == ([], "", False)  # nothing changed: nothing to review
    messages, review, flagged = regrade("0")
    assert flagged and review.startswith("autograded score changed 1 -> 0 under manual score "
                                         "0.5: review it"), review
    assert messages == [f"{sid} {nb.name} {g0}: {review}"]
    with _gradebook(out) as gb:  # what formgrader lists for the submission
        assert gb.find_submission(ASSIGNMENT, sid).needs_manual_grade
    assert regrade("0") == (messages, review, True)  # --force: still there
    _formgrader_save(out, g0, nb.name, sid, 0.5)  # Resolve: the same score, confirmed
    assert regrade("0") == ([], "", False)

    _, review, flagged = regrade(full)  # changed again, and again before any review
    assert flagged and "changed 0 -> 1 under" in review
    _, review, flagged = regrade("0.5")
    assert flagged and "changed 0 -> 1 -> 0.5 under manual score 0.5" in review
    with _gradebook(out) as gb:  # another manual score (here not through formgrader)
        gb.find_grade(g0, nb.name, ASSIGNMENT, sid).manual_score = 0.75
        gb.db.commit()
    assert regrade("0.5") == ([], "", False)
    assert json.loads((out / "reviews.json").read_text()) == []
    with _gradebook(out) as gb:
        assert gb.find_grade(g0, nb.name, ASSIGNMENT, sid).manual_score == 0.75

    _, review, _ = regrade(full)
    assert review
    assert store.prune([sid]) == [] and json.loads((out / "reviews.json").read_text()) == []


# ---- unit level: work never handed in ---------------------------------------------------------
PAIR = "98_pair"  # an assignment of two notebooks


@pytest.fixture(scope="module")
def pair_template(tmp_path_factory):
    """The fixture assignment and ``98_pair`` (two copies of its notebook)."""
    import shutil

    from autograder.grading.parent.course import build_template

    work = tmp_path_factory.mktemp("pair-template")
    source = work / "source"
    shutil.copytree(SOURCE / ASSIGNMENT, source / ASSIGNMENT)
    for name in ("98_first", "98_second"):
        (source / PAIR).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                        source / PAIR / f"{name}.ipynb")
    template, info = build_template(source, [ASSIGNMENT, PAIR], work,
                                    GradeConfig(cell_timeout=10))
    return template, info


def test_work_never_handed_in_is_no_submission(pair_template, tmp_path):
    """bob handed in only the fixture, cy only 98_first, dee the fixture, which the grader
    failed on: no submission where nothing was handed in (the gradebook's and formgrader's
    counts, nbgrader export's empty raw_score, needs_manual_grade False); 98_second of cy has
    no score and needs no grading; dee's stays 'not graded' (needs manual grading)."""
    from autograder.grading.parent import ledger
    from autograder.grading.parent.results import publish_source, publish_student
    from autograder.grading.parent.submissions import Submission, find_notebook
    from autograder.grading.status import Facts, Kind, row_status

    template, info = pair_template
    notebooks = {nb.name: (a, nb) for a, nbs in info.items() for nb in nbs}
    (tmp_path / "handed").mkdir()
    handed = {"ada": set(notebooks), "bob": {ASSIGNMENT}, "cy": {"98_first"},
              "dee": {ASSIGNMENT}}
    out, work = tmp_path / "out", tmp_path / "work"
    store = ResultStore(out)
    write_course_config(out, GradeConfig(cell_timeout=10), "none")
    publish_source(template, out, list(info))

    def hand_in(sid: str, names: set[str]) -> None:
        """What course-grade leaves of ``sid`` handing in ``names``: its grading folder
        published (grade_student makes every assignment's submitted/ folder), its result."""
        sub = Submission(student=sid, path=tmp_path / "handed", origin=tmp_path / "handed")
        rows = []
        for name, (a, nb) in notebooks.items():
            for kind in ("submitted", "autograded"):
                folder = work / sid / kind / sid / a
                folder.mkdir(parents=True, exist_ok=True)
                if name in names:
                    nbformat.write(nb.release, folder / f"{name}.ipynb")
            if name not in names:
                status = row_status(Facts(problem=find_notebook(sub, name)[1],
                                          problem_kind=Kind.NOT_SUBMITTED))[0]
            elif sid == "dee":
                status = row_status(Facts(problem="grader error (boom)"))[0]
            else:
                status = "graded"
            rows += [{"student": sid, "notebook": name, "exercise": g.grade_id,
                      "points": f"{g.max_points:g}" if status == "graded" else "",
                      "max_points": f"{g.max_points:g}", "status": status}
                     for g in nb.grade_cells]
        publish_student(work / sid, work / "staged", sid, list(info))  # as course-grade:
        ledger.publish(work / "staged", out, sid, list(info))  # staged, then into OUT
        store.save(json.dumps({"student": sid, "fingerprint": "x", "rows": rows, "seconds": 1,
                               "feedback": [], "notes": []}), sid,
                   {a: Timing(DUE + timedelta(days=1)) for a in info})

    hand_in("bob", set(notebooks))  # an earlier run: bob had handed in everything
    store.write_gradebook(template, ["bob"], due={a: DUE for a in info})
    for sid, names in handed.items():
        hand_in(sid, names)
    store.write_gradebook(template, list(handed))

    total = {a: f"{sum(g.max_points for nb in nbs for g in nb.grade_cells):g}"
             for a, nbs in info.items()}
    first = f"{sum(g.max_points for g in notebooks['98_first'][1].grade_cells):g}"
    submitted = {ASSIGNMENT: ["ada", "bob", "dee"], PAIR: ["ada", "cy"]}
    with _gradebook(out) as gb:
        for a, who in submitted.items():
            assert gb.find_assignment(a).num_submissions == len(who)
            assert sorted(s.student.id for s in gb.find_assignment(a).submissions) == who
        for g in notebooks["98_second"][1].grade_cells:  # cy: handed in 98_first only
            grade = gb.find_grade(g.grade_id, "98_second", PAIR, "cy")
            assert (grade.auto_score, grade.manual_score, grade.needs_manual_grade) == \
                (None, None, False)
        assert not gb.find_submission(PAIR, "cy").needs_manual_grade
        assert gb.find_submission(ASSIGNMENT, "dee").needs_manual_grade
    # formgrader's own counts: submitted/ folders, and each student's submissions
    # and stock nbgrader export in the same interpreter, after it
    proc, printed = _api_then_export(out, (
        "[{a: api.get_assignment(a)['num_submissions'] for a in api.get_source_assignments()},"
        "{a: sorted(s['student'] for s in api.get_submissions(a))"
        " for a in api.get_source_assignments()},"
        "{s: {x['name']: x['submitted'] for x in api.get_student_submissions(s)}"
        " for s in ('bob', 'cy')}]"))
    assert proc.returncode == 0, proc.stderr
    counts, listed, per_student = printed[0]
    assert counts == {a: len(who) for a, who in submitted.items()}
    assert listed == submitted
    assert per_student == {"bob": {ASSIGNMENT: True, PAIR: False},
                           "cy": {ASSIGNMENT: False, PAIR: True}}

    rows = {(r["assignment"], r["student_id"]): (r["raw_score"], r["score"],
                                                 r["needs_manual_grade"])
            for r in read_csv(out / "export.csv")}
    assert rows == {
        (ASSIGNMENT, "ada"): (total[ASSIGNMENT], total[ASSIGNMENT], "False"),
        (PAIR, "ada"): (total[PAIR], total[PAIR], "False"),
        (ASSIGNMENT, "bob"): (total[ASSIGNMENT], total[ASSIGNMENT], "False"),
        (PAIR, "bob"): ("", "", "False"),  # handed in nothing of it (an earlier run had)
        (ASSIGNMENT, "cy"): ("", "", "False"),
        (PAIR, "cy"): (first, first, "False"),  # 98_second adds nothing, needs nothing
        (ASSIGNMENT, "dee"): ("0", "", "True"),  # handed in, not graded: as before
        (PAIR, "dee"): ("", "", "False"),
    }
    # grades.csv: not graded, and no submission time nor lateness for what was not handed in
    csv_rows = read_csv(store.write_csv(list(handed), assignment_of={
        name: a for name, (a, _) in notebooks.items()}))
    late = {(r["student"], r["notebook"]): (r["status"].split(":")[0], r["late_by"])
            for r in csv_rows}
    assert late[("bob", ASSIGNMENT)] == ("graded", "1 day, 0:00:00")
    assert late[("bob", "98_first")] == late[("cy", "98_second")] == ("not graded", "")
    assert late[("dee", ASSIGNMENT)] == ("not graded", "1 day, 0:00:00")
    assert {(r["student"], r["notebook"]) for r in csv_rows if r["submitted_at"] == ""} == {
        (s, n) for s, names in handed.items() for n in notebooks if n not in names}


# ---- end to end: course-grade runs on a small class -------------------------------------------
# Moodle's "download submissions in folders": the display name and participant id come from
# the folder name (intake), the student id is made from both.
RIGHT = ("李娜", "2003", "李娜_2003")
WRONG = ("Мария Иванова", "2002", "Мария_Иванова_2002")


def _folder(who) -> str:
    return f"{who[0]}_{who[1]}_assignsubmission_file_"


@pytest.fixture(scope="module")
def term_class(tmp_path_factory, fixture_template):
    _, nb = fixture_template
    root = tmp_path_factory.mktemp("term-class")
    builder = ClassBuilder(nb)
    for who, notebook in ((RIGHT, builder.answered()), (WRONG, builder.wrong())):
        path = root / "class" / _folder(who) / f"{ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(notebook, path)
    return root, nb, builder


def _grade(root: Path, *extra: str) -> subprocess.CompletedProcess:
    from autograder.grading.sandbox import bwrap_path

    sandbox = () if bwrap_path() else ("--unsandboxed",)
    args = ("--workers", "1", "--cell-timeout", "10", "--timeout", "120", *sandbox, *extra)
    proc = subprocess.run(grade_cmd(root / "class", root / "out", SOURCE, *args), cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


def _run_ids(out: Path) -> dict[str, str]:
    return {p.stem: json.loads(p.read_text())["notes"][-1]
            for p in (out / "results").glob("*.json")}


def _late_rows(out: Path) -> dict[str, tuple[str, str, str]]:
    """{student: (due, late_by, late_penalty)} of grades.csv (one notebook: the same on each
    of a student's rows)."""
    return {r["student"]: (r["due"], r["late_by"], r["late_penalty"])
            for r in read_csv(out / "grades.csv")}


def test_a_term_manual_scores_survive_reruns_and_regrades(term_class):
    root, nb, builder = term_class
    out = root / "out"
    times = root / "times.csv"  # RIGHT 1 day 1 h late (two started days), WRONG 10 min (grace)
    times.write_text(f"student,submitted_at\n{RIGHT[2]},2026-12-03T00:00Z\n"
                     f"{WRONG[2]},2026-12-01T23:09Z\n")
    _grade(root, "--due", f"{ASSIGNMENT}=2026-12-01T23:59+01:00", "--submitted-at", str(times),
           "--late-penalty", "10%/day", "--late-floor", "50%", "--grace", "15m")
    full = sum(float(r["points"]) for r in read_csv(out / "grades.csv")
               if r["student"] == RIGHT[2])
    late = {RIGHT[2]: ("2026-12-01T22:59:00+00:00", "1 day, 1:01:00", f"{full * 0.2:g}"),
            WRONG[2]: ("2026-12-01T22:59:00+00:00", f"0:10:00 {WITHIN_GRACE}", "")}
    assert _late_rows(out) == late
    with _gradebook(out) as gb:  # what formgrader and nbgrader export read
        assert gb.find_submission_notebook(nb.name, ASSIGNMENT, RIGHT[2]) \
            .late_submission_penalty == pytest.approx(full * 0.2)
        assert gb.find_submission_notebook(nb.name, ASSIGNMENT, WRONG[2]) \
            .late_submission_penalty is None
    # OUT is nbgrader's course directory
    for path in ("nbgrader_config.py", f"source/{ASSIGNMENT}/{ASSIGNMENT}.ipynb",
                 f"autograded/{WRONG[2]}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb",
                 f"feedback/{WRONG[2]}/{ASSIGNMENT}/{ASSIGNMENT}.html"):
        assert (out / path).is_file(), path
    # names in Cyrillic and Chinese: in the CSV, the gradebook, return/ and Moodle's zip
    rows = read_csv(out / "grades.csv")
    for name, lms_id, sid in (RIGHT, WRONG):
        assert {(r["name"], r["lms_id"]) for r in rows if r["student"] == sid} == {(name, lms_id)}
        with _gradebook(out) as gb:
            assert (gb.find_student(sid).last_name, gb.find_student(sid).lms_user_id) == \
                (name, lms_id)
        assert (out / "return" / f"{name} ({sid})" / ASSIGNMENT / f"{ASSIGNMENT}.html").is_file()
    with zipfile.ZipFile(out / "return" / "moodle" / f"{ASSIGNMENT}.zip") as z:
        assert sorted(z.namelist()) == sorted(
            f"{name}_{lms_id}_assignfeedback_file/{ASSIGNMENT}.html" for name, lms_id, _ in
            (RIGHT, WRONG))
    listed = _nbgrader(out, "list", "--inbound")  # OUT's config: its exchange, inside OUT
    assert listed.returncode == 0 and "No nbgrader_config.py" not in listed.stderr, listed.stderr
    # the instructor's review (formgrader writes these same gradebook fields)
    g0 = nb.grade_cells[0]
    answer = g0.solution_ids[0]
    with _gradebook(out) as gb:
        gb.find_grade(g0.grade_id, nb.name, ASSIGNMENT, WRONG[2]).manual_score = 0.5
        gb.find_comment(answer, nb.name, ASSIGNMENT, WRONG[2]).manual_comment = "partly right"
        gb.db.commit()

    def kept():
        with _gradebook(out) as gb:
            grade = gb.find_grade(g0.grade_id, nb.name, ASSIGNMENT, WRONG[2])
            comment = gb.find_comment(answer, nb.name, ASSIGNMENT, WRONG[2]).manual_comment
            return grade.auto_score, grade.manual_score, comment

    def row():
        return next(r for r in read_csv(out / "grades.csv")
                    if (r["student"], r["exercise"]) == (WRONG[2], g0.grade_id))

    assert kept() == (0.0, 0.5, "partly right")
    before = _run_ids(out)
    proc = _grade(root)  # graded nobody: the run that erased everything
    assert kept() == (0.0, 0.5, "partly right") and _run_ids(out) == before
    # the late policy and the times given once are the class's: the same penalty
    assert "course-grade: --late-penalty 10%/day: kept from an earlier run" in proc.stderr
    assert _late_rows(out) == late
    # the due date given once is the assignment's, in the gradebook, for every later run
    assert {r["due"] for r in read_csv(out / "grades.csv")} == {"2026-12-01T22:59:00+00:00"}
    assert (row()["points"], row()["auto_points"], row()["manual_points"], row()["comment"]) == \
        ("0.5", "0", "0.5", "partly right")
    # formgrader's lists (its API), then stock nbgrader export, in one interpreter
    export, printed = _api_then_export(out, (
        "[[x['score'] for x in api.get_submissions(a) if x['student'] == s], "
        "[x['score'] for x in api.get_students() if x['id'] == s], "
        "[x['score'] for x in api.get_student_submissions(s)], "
        "[x['score'] for x in api.get_notebook_submissions(a, a) if x['student'] == s]]"),
        setup=f"a, s = {ASSIGNMENT!r}, {RIGHT[2]!r}; ")
    assert export.returncode == 0, export.stderr
    shown = printed[0]
    assert shown == [[pytest.approx(full * 0.8)]] * 4  # formgrader: the penalised total
    wrong = next(r for r in read_csv(out / "export.csv") if r["student_id"] == WRONG[2])
    assert float(wrong["score"]) == 0.5  # the manual score counts in nbgrader's export
    right = next(r for r in read_csv(out / "export.csv") if r["student_id"] == RIGHT[2])
    assert (float(right["late_submission_penalty"]), float(right["score"])) == \
        pytest.approx((full * 0.2, full * 0.8))  # the late policy's penalty
    # and in Moodle's grading worksheet (a Moodle class: no Canvas file), by participant
    lms = {r["Identifier"]: r["Grade"] for r in
           read_csv(out / "exports" / f"{ASSIGNMENT}.moodle.csv")}
    assert float(lms[f"Participant {WRONG[1]}"]) == 0.5, lms
    assert sorted((out / "exports").iterdir()) == [out / "exports" / f"{ASSIGNMENT}.moodle.csv"]

    extensions = root / "extensions.csv"  # RIGHT's extension, given after the grading
    extensions.write_text(f"student,assignment,due\n{RIGHT[2]},*,+2d\n")
    _grade(root, "--regrade", WRONG[2], "--extensions", str(extensions))
    assert _late_rows(out)[RIGHT[2]] == ("2026-12-03T22:59:00+00:00", "", "")
    assert _changes_of_last_run(out) == [("extension", RIGHT[2], ASSIGNMENT, "total",
                                          f"{full * 0.8:g}", f"{full:g}")]
    with _gradebook(out) as gb:
        assert gb.find_submission(ASSIGNMENT, RIGHT[2]).extension == timedelta(days=2)
    after = _run_ids(out)
    assert after[RIGHT[2]] == before[RIGHT[2]] and after[WRONG[2]] != before[WRONG[2]]
    assert kept() == (0.0, 0.5, "partly right") and row()["review"] == ""

    # the student resubmits a right answer: the autograded part changes under the manual score
    nbformat.write(builder.answered(), root / "class" / _folder(WRONG) / f"{ASSIGNMENT}.ipynb")
    proc = _grade(root)
    full = g0.max_points
    assert kept() == (full, 0.5, "partly right")
    assert f"{WRONG[2]} {nb.name} {g0.grade_id}: autograded score changed 0 -> {full:g}" \
        in proc.stderr
    assert row()["points"] == "0.5" and "under manual score 0.5" in row()["review"]

    # regrading everyone again rebuilds the results: the review stays, until the instructor
    # resolves it in formgrader
    review = row()["review"]
    proc = _grade(root, "--force")
    assert _run_ids(out)[WRONG[2]] != after[WRONG[2]]
    assert row()["review"] == review and f"{WRONG[2]} {nb.name} {g0.grade_id}: {review}" \
        in proc.stderr
    _formgrader_save(out, g0.grade_id, nb.name, WRONG[2], 0.5)
    proc = _grade(root)
    assert kept() == (full, 0.5, "partly right") and row()["review"] == ""
    assert "review it" not in proc.stderr


# ---- end to end: Canvas downloads one assignment at a time (issue 48, item 1) --------------
COPY = "98_copy"  # a second assignment: the fixture's notebook under another name


def _changes_of_last_run(out: Path) -> list[tuple]:
    from autograder.grading.parent.ledger import last_run

    return sorted((c["cause"], c["student"], c["assignment"], c["exercise"], c["old"],
                   c["new"]) for c in last_run(out))


def test_canvas_downloads_one_assignment_at_a_time_keep_every_earlier_grade(fixture_template,
                                                                           tmp_path):
    """Canvas's download of the fixture (Ada right, Babbage wrong), then of 98_copy (Ada's
    only), then ``--force --assignment 98_copy`` on it: every row of the first download stays
    as it was graded (Babbage's result file byte for byte), with its feedback page, its
    Canvas re-upload zip and its exports; each run appends its own grade changes to
    changes.csv (the second: Ada's 98_copy; the third: none). Then a result graded with
    checks since fixed is graded again from the notebook OUT keeps (issue 48, item 4), and
    so is a student ``--regrade`` names who is not in the folder."""
    import shutil

    from autograder.grading.sandbox import bwrap_path

    _, nb = fixture_template
    source = tmp_path / "source"
    shutil.copytree(SOURCE / ASSIGNMENT, source / ASSIGNMENT)
    (source / COPY).mkdir()
    shutil.copyfile(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", source / COPY / f"{COPY}.ipynb")
    builder = ClassBuilder(nb)
    ada, babbage = "lovelaceada_1001", "babbagecharles_1002"
    downloads = {  # Canvas's file names: <name>_<user id>_<submission id>_<file>
        ASSIGNMENT: {f"lovelaceada_1001_5000_{ASSIGNMENT}.ipynb": builder.answered(),
                     f"babbagecharles_1002_5001_{ASSIGNMENT}.ipynb": builder.wrong()},
        COPY: {f"lovelaceada_1001_6000_{COPY}.ipynb": builder.answered()}}
    for a, files in downloads.items():
        (tmp_path / a).mkdir()
        for name, notebook in files.items():
            nbformat.write(notebook, tmp_path / a / name)
    out = tmp_path / "out"
    sandbox = () if bwrap_path() else ("--unsandboxed",)

    def run(a: str, *extra: str) -> str:
        args = ("--workers", "1", "--cell-timeout", "10", "--timeout", "120", *sandbox, *extra)
        proc = subprocess.run(grade_cmd(tmp_path / a, out, source, *args), cwd=REPO,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr

    def rows() -> list[tuple]:
        return [(r["student"], r["notebook"], r["exercise"], r["points"], r["kind"])
                for r in read_csv(out / "grades.csv")]

    def graded(student: str, notebook: str, right: bool) -> list[tuple]:
        return [(student, notebook, g.grade_id, f"{g.max_points:g}" if right else "0",
                 "graded") for g in nb.grade_cells]

    def first_assignment() -> dict[str, bytes]:  # what the second run must leave as it is
        return {p: (out / p).read_bytes() for p in (
            f"return/canvas/{ASSIGNMENT}.zip", f"exports/{ASSIGNMENT}.canvas.csv",
            f"feedback/{ada}/{ASSIGNMENT}/{ASSIGNMENT}.html",
            f"feedback/{babbage}/{ASSIGNMENT}/{ASSIGNMENT}.html", f"results/{babbage}.json")}

    total = f"{sum(g.max_points for g in nb.grade_cells):g}"
    run(ASSIGNMENT)
    first = graded(babbage, ASSIGNMENT, False) + graded(ada, ASSIGNMENT, True)
    assert rows() == first
    assert _changes_of_last_run(out) == sorted(
        [("new submission", s, ASSIGNMENT, ex, "", p) for s, _, ex, p, _ in first]
        + [("new submission", babbage, ASSIGNMENT, "total", "", "0"),
           ("new submission", ada, ASSIGNMENT, "total", "", total)])
    kept = first_assignment()
    assert sorted(p.name for p in (out / "exports").iterdir()) == [
        f"{ASSIGNMENT}.canvas.csv"]  # a Canvas class: no Moodle file
    log = (out / "changes.csv").read_bytes()
    assert json.loads((out / "settings.json").read_text()) == {}  # no option given: none kept
    with zipfile.ZipFile(out / "return" / "canvas" / f"{ASSIGNMENT}.zip") as z:
        assert sorted(z.namelist()) == [f"babbagecharles_1002_5001_{ASSIGNMENT}.html",
                                        f"lovelaceada_1001_5000_{ASSIGNMENT}.html"]

    err = run(COPY)
    assert rows() == first[:len(nb.grade_cells)] + graded(ada, COPY, True) + \
        graded(ada, ASSIGNMENT, True)  # not "not graded: no 99_fixture.ipynb"
    assert f"kept 1 student(s) graded earlier whose submissions are not in this folder " \
        f"({babbage})" in err and "kept 1 earlier result(s) of notebooks not in this" in err
    assert first_assignment() == kept
    assert (out / "changes.csv").read_bytes().startswith(log)  # appended, never rewritten
    assert _changes_of_last_run(out) == sorted(
        [("new submission", ada, COPY, g.grade_id, "", f"{g.max_points:g}")
         for g in nb.grade_cells] + [("new submission", ada, COPY, "total", "", total)])
    with zipfile.ZipFile(out / "return" / "canvas" / f"{COPY}.zip") as z:
        assert z.namelist() == [f"lovelaceada_1001_6000_{COPY}.html"]
    assert read_csv(out / "exports" / f"{COPY}.canvas.csv")[0][COPY] == total

    log = (out / "changes.csv").read_bytes()
    ada_result = json.loads((out / "results" / f"{ada}.json").read_text())
    err = run(COPY, "--force", "--assignment", COPY)
    assert rows() == first[:len(nb.grade_cells)] + graded(ada, COPY, True) + \
        graded(ada, ASSIGNMENT, True)
    assert first_assignment() == kept and (out / "changes.csv").read_bytes() == log
    assert "0 grade change(s) appended" in err
    again = json.loads((out / "results" / f"{ada}.json").read_text())
    assert again["notes"] != ada_result["notes"]  # graded again (a new run id) ...
    assert again["ledger"][ASSIGNMENT] == ada_result["ledger"][ASSIGNMENT]  # ... 98_copy only
    assert [r for r in again["rows"] if r["notebook"] == ASSIGNMENT] == \
        [r for r in ada_result["rows"] if r["notebook"] == ASSIGNMENT]

    # a check fixed after week 1 (Babbage's result says its checks passed his wrong answer
    # to the first exercise): week 2's folder again, which holds nothing of his; his kept
    # notebook (OUT/submitted/) is graded again with today's checks, and the log says why
    path = out / "results" / f"{babbage}.json"
    stale = json.loads(path.read_text())
    stale["ledger"][ASSIGNMENT]["grader"] = "the checks before the fix"
    g0 = nb.grade_cells[0]
    stale["rows"][0]["points"] = f"{g0.max_points:g}"
    path.write_text(json.dumps(stale))
    err = run(COPY)
    assert "1 result(s) graded with other checks or another release: graded again" in err
    assert rows() == first[:len(nb.grade_cells)] + graded(ada, COPY, True) + \
        graded(ada, ASSIGNMENT, True)
    assert _changes_of_last_run(out) == [
        ("between runs (formgrader: manual score, extra credit)", babbage, ASSIGNMENT,
         g0.grade_id, "0", f"{g0.max_points:g}"),
        ("between runs (formgrader: manual score, extra credit)", babbage, ASSIGNMENT,
         "total", "0", f"{g0.max_points:g}"),
        ("checks changed", babbage, ASSIGNMENT, g0.grade_id, f"{g0.max_points:g}", "0"),
        ("checks changed", babbage, ASSIGNMENT, "total", f"{g0.max_points:g}", "0")]
    fixed = json.loads(path.read_text())
    assert fixed["ledger"][ASSIGNMENT] == {**stale["ledger"][ASSIGNMENT],
                                           "grader": again["ledger"][ASSIGNMENT]["grader"]}
    assert fixed["canvas"] == stale["canvas"] and fixed["notes"] != stale["notes"]
    with zipfile.ZipFile(out / "return" / "canvas" / f"{ASSIGNMENT}.zip") as z:
        assert sorted(z.namelist()) == [f"babbagecharles_1002_5001_{ASSIGNMENT}.html",
                                        f"lovelaceada_1001_5000_{ASSIGNMENT}.html"]

    # --regrade Babbage, who is not in week 2's folder: his kept notebook, graded again;
    # no row of 98_copy made up for him
    err = run(COPY, "--regrade", babbage)
    assert f"--regrade {babbage}: not in this folder; graded again from the notebooks " \
        "OUT_DIR keeps" in err
    assert rows() == first[:len(nb.grade_cells)] + graded(ada, COPY, True) + \
        graded(ada, ASSIGNMENT, True)
    assert json.loads(path.read_text())["notes"] != fixed["notes"]


def test_regrade_of_an_unknown_student_is_refused(term_class, capsys):
    # course-grade's main in this process: the refusal comes at intake, before any grading
    # (the command's exit status is main's: tests/grading/test_canvas_roster.py runs it)
    import autograder.grade as grade

    root, _, _ = term_class
    code = grade.main([str(root / "class"), "--out", str(root / "out-unknown"), "--source",
                       str(SOURCE), "--no-progress", "--unsandboxed", "--regrade", "nobody"])
    assert code == 2 and "no such student: nobody" in capsys.readouterr().err


def test_feedback_returned_by_name_and_as_moodle_zip(tmp_path):
    """return/<name> (<id>)/... for everyone; Moodle's feedback zip for those with a
    participant id, in the folder names Moodle's importer parses (name_id_plugintype_name)."""
    from autograder.grading.parent.results import write_returns

    out = tmp_path / "out"
    results = {}
    for sid, name, lms_id in (("jose", "José Núñez", "1002"), ("maria", "Мария_Иванова", "1003"),
                              ("li", "李娜", ""), ("anon", "", "")):
        rel = f"feedback/{sid}/{ASSIGNMENT}/{ASSIGNMENT}.html"
        (out / rel).parent.mkdir(parents=True)
        (out / rel).write_text(f"feedback for {sid}")
        results[sid] = {"student": sid, "name": name, "lms_id": lms_id, "feedback": [rel]}
    root = write_returns(out, results, list(results))
    page = Path(ASSIGNMENT) / f"{ASSIGNMENT}.html"
    for folder, sid in (("José Núñez (jose)", "jose"), ("Мария_Иванова (maria)", "maria"),
                        ("李娜 (li)", "li"), ("anon", "anon")):
        assert (root / folder / page).read_text() == f"feedback for {sid}"
    with zipfile.ZipFile(root / "moodle" / f"{ASSIGNMENT}.zip") as z:
        assert sorted(z.namelist()) == [
            f"José Núñez_1002_assignfeedback_file/{ASSIGNMENT}.html",
            f"Мария Иванова_1003_assignfeedback_file/{ASSIGNMENT}.html"]
        assert z.read(f"José Núñez_1002_assignfeedback_file/{ASSIGNMENT}.html") == \
            b"feedback for jose"


def test_lab_instructor_starts_jupyterlab_in_the_course_folder(tmp_path, monkeypatch):
    """`bootstrap lab --instructor OUT` runs JupyterLab on OUT, started in OUT (formgrader
    reads the nbgrader_config.py of its working folder); a folder course-grade did not write
    is refused with what to do."""
    from autograder import bootstrap

    calls = []
    monkeypatch.setattr(bootstrap, "setup", lambda force=False: None)
    # the server's runner (a real one would start JupyterLab and wait on it)
    monkeypatch.setattr(bootstrap, "serve",
                        lambda cmd, env, cwd, token: calls.append((cmd, cwd)) or 0)
    assert bootstrap.main(["lab", "--instructor", str(tmp_path)]) == 2 and calls == []
    write_course_config(tmp_path, GradeConfig(cell_timeout=10), "none")
    assert bootstrap.main(["lab", "--instructor", str(tmp_path)]) == 0
    (cmd, cwd), = calls
    assert cwd == tmp_path.resolve() and f"--notebook-dir={tmp_path.resolve()}" in cmd
    assert cmd[1] == "lab" and str(tmp_path) not in cmd[2:] and "--instructor" not in cmd
