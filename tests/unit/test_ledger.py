"""The output folder as the class's ledger (issue 48, items 1 and 4): what a run grades, keeps
and logs (``grading/parent/ledger.py``), on hand-made results and real Canvas "Download
Submissions" file names downloaded one assignment at a time (no grading: the course-grade run
of the same is in tests/grading/test_grade_term.py)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.grading.exercises import chapter_tests, label
from autograder.grading.parent import ledger
from autograder.grading.parent.report import render
from autograder.grading.parent.results import ResultStore, write_returns
from autograder.grading.parent.submissions import discover, intake_facts
from autograder.grading.parent.times import Timing, timings

from helpers import REPO

A1, A2 = "01_attention", "02_masking"
NOTEBOOKS = {A1: [A1], A2: [A2]}
G = {A1: "g1", A2: "g2"}  # the checks' fingerprints of this run


def _rows(student: str, nb: str, points: dict[str, str], kind: str = "graded") -> list[dict]:
    return [{"student": student, "notebook": nb, "exercise": ex, "points": p,
             "max_points": "2", "status": kind, "kind": kind} for ex, p in points.items()]


def _stored(ledger_: dict, rows: list[dict]) -> dict:
    return {"student": "ada", "fingerprint": "t:x", "rows": rows, "ledger": ledger_}


GRADED_A1 = _stored({A1: {"submission": "h1", "grader": "g1"}},
                    _rows("ada", A1, {"e1": "2", "e2": "0"}))


@pytest.mark.parametrize("present, stored, options, grade, keep", [
    # the first run: what is here is new; what is not here gets its "not submitted" rows
    ({A1: "h1", A2: None}, None, {}, {A1: ledger.NEW, A2: ledger.ABSENT}, []),
    # the Canvas 02 download: 01 graded before and not here is kept, not erased
    ({A1: None, A2: "h2"}, GRADED_A1, {}, {A2: ledger.NEW}, [A1]),
    # ... also with --force (it grades again only what is here) and --regrade
    ({A1: None, A2: "h2"}, GRADED_A1, {"force": True}, {A2: ledger.FORCE}, [A1]),
    ({A1: None, A2: "h2"}, GRADED_A1, {"regrade": True}, {A2: ledger.REGRADE}, [A1]),
    # --prune: what is not here goes back to "not submitted"
    ({A1: None, A2: "h2"}, GRADED_A1, {"prune": True}, {A1: ledger.PRUNE, A2: ledger.NEW},
     []),
    # the same bytes and checks: nothing to do; other bytes or other checks: graded again
    ({A1: "h1"}, GRADED_A1, {}, {}, []),
    ({A1: "h1b"}, GRADED_A1, {}, {A1: ledger.CHANGED}, []),
    ({A1: "h1"}, {**GRADED_A1, "ledger": {A1: {"submission": "h1", "grader": "old"}}}, {},
     {A1: ledger.STALE}, []),
    ({A1: "h1"}, GRADED_A1, {"exercises": frozenset({A1})}, {A1: ledger.EXERCISE}, []),
    # "not submitted" before and still not here: nothing to do
    ({A1: None}, _stored({}, _rows("ada", A1, {"e1": ""}, "not submitted")), {}, {}, []),
    # handed in after it was missing: new
    ({A1: "h1"}, _stored({}, _rows("ada", A1, {"e1": ""}, "not submitted")), {},
     {A1: ledger.NEW}, []),
    # after a grader error no fingerprint is kept: graded again
    ({A1: "h1"}, _stored({}, _rows("ada", A1, {"e1": ""}, "grader error")), {},
     {A1: ledger.CHANGED}, []),
])
def test_plan_grades_what_is_new_changed_stale_or_asked_for_and_keeps_the_rest(
        present, stored, options, grade, keep):
    p = ledger.plan(present, stored, G, notebooks=NOTEBOOKS, **options)
    assert (p.grade, p.keep) == (grade, keep)


def test_results_from_before_fingerprints_are_not_regraded_unless_asked():
    """A result written before per-assignment fingerprints (``legacy``: its whole-submission
    fingerprint matches this folder): unchanged, its checks unknown, said, not regraded."""
    old = {"student": "ada", "fingerprint": "t:x", "rows": _rows("ada", A1, {"e1": "2"})}
    p = ledger.plan({A1: "h1"}, old, G, notebooks=NOTEBOOKS, legacy=True)
    assert (p.grade, p.unknown) == ({}, [A1])
    p = ledger.plan({A1: "h1"}, old, G, notebooks=NOTEBOOKS, legacy=True,
                    exercises=frozenset({A1}))
    assert p.grade == {A1: ledger.EXERCISE}
    p = ledger.plan({A1: "h1"}, old, G, notebooks=NOTEBOOKS)  # it does not match: changed
    assert p.grade == {A1: ledger.CHANGED}


def test_kept_results_graded_with_other_checks_are_said():
    stale = {**GRADED_A1, "ledger": {A1: {"submission": "h1", "grader": "old"}}}
    p = ledger.plan({A1: None, A2: "h2"}, stale, G, notebooks=NOTEBOOKS)
    assert (p.keep, p.stale_kept) == ([A1], [A1])


def test_merge_keeps_the_other_assignments_rows_pages_times_and_canvas_names():
    old = {**GRADED_A1, "feedback": [f"feedback/ada/{A1}/{A1}.html"],
           "timing": {A1: {"at": "2026-12-01T10:00:00+00:00", "marked_late": False}},
           "canvas": {A1: "lovelaceada_1001_5000"}, "notes": ["run r1"]}
    new = {"student": "ada", "fingerprint": "t:y", "seconds": 3.0, "notes": ["run r2"],
           "rows": _rows("ada", A2, {"e1": "1"}), "feedback": [f"feedback/ada/{A2}/{A2}.html"]}
    merged = ledger.merge(old, new, {A2: ledger.NEW}, NOTEBOOKS,
                          {A2: {"submission": "h2", "grader": "g2"}})
    assert [(r["notebook"], r["exercise"], r["points"]) for r in merged["rows"]] == [
        (A1, "e1", "2"), (A1, "e2", "0"), (A2, "e1", "1")]
    assert merged["feedback"] == [f"feedback/ada/{A1}/{A1}.html", f"feedback/ada/{A2}/{A2}.html"]
    assert merged["timing"] == old["timing"] and merged["canvas"] == old["canvas"]
    assert merged["ledger"] == {A1: {"submission": "h1", "grader": "g1"},
                                A2: {"submission": "h2", "grader": "g2"}}
    assert merged["notes"] == ["run r2"] and merged["fingerprint"] == "t:y"
    # the same assignment graded again replaces its own rows, pages and time only
    again = ledger.merge(merged, {**new, "rows": _rows("ada", A2, {"e1": "2"})},
                         {A2: ledger.FORCE}, NOTEBOOKS, {A2: {"submission": "h2",
                                                             "grader": "g2"}})
    assert [r["points"] for r in again["rows"]] == ["2", "0", "2"]


def test_merge_of_one_exercise_takes_only_its_rows():
    new = {"rows": _rows("ada", A1, {"e1": "0", "e2": "2"}), "feedback": []}
    merged = ledger.merge(GRADED_A1, new, {A1: ledger.EXERCISE}, NOTEBOOKS, {},
                          only={A1: {"e2"}})
    assert [(r["exercise"], r["points"]) for r in merged["rows"]] == [("e1", "2"), ("e2", "2")]
    assert merged["ledger"] == GRADED_A1["ledger"]  # the rest was not graded again


def test_a_grader_error_keeps_no_fingerprint():
    new = {"fingerprint": "grader-error", "rows": _rows("ada", A1, {"e1": ""}, "grader error")}
    merged = ledger.merge(GRADED_A1, new, {A1: ledger.CHANGED}, NOTEBOOKS,
                          {A1: {"submission": "h9", "grader": "g1"}})
    assert merged["ledger"] == {}
    assert ledger.plan({A1: "h9"}, merged, G, notebooks=NOTEBOOKS).grade == {A1: ledger.CHANGED}


def test_the_checks_fingerprint_follows_the_notebook_and_the_check_code_it_uses(tmp_path):
    """02_masking's print follows its notebook, its check module, the shared check code
    and its own rows of the exercise table; a fix to chapter 01's checks or rows (or a
    chapter no notebook of it uses) leaves it as it is (issue 48, item 4)."""
    checks = tmp_path / "checks"
    shutil.copytree(ledger.CHECKS, checks, ignore=shutil.ignore_patterns("__pycache__"))
    nb = tmp_path / f"{A2}.ipynb"
    shutil.copyfile(REPO / "solutions" / A2 / f"{A2}.ipynb", nb)
    first = ledger.grader_print([nb], checks)
    assert ledger.grader_print([nb], checks) == first
    (checks / "__pycache__").mkdir(exist_ok=True)
    (checks / "__pycache__" / "x.py").write_text("# not the check code")
    assert ledger.grader_print([nb], checks) == first
    table = checks / "table.py"
    for path, old, new, changes in (
            (checks / "attention.py", "", "\n# a fix of chapter 01\n", False),
            (checks / "bpe.py", "", "\n# a fix of chapter 07\n", False),
            (table, '"dot_product_scores", 1, 5', '"dot_product_scores", 2, 5', False),
            (table, '"causal_mask", 1, 5', '"causal_mask", 2, 5', True),
            (table, "", "\n# a fix of the table's code\n", True),
            (checks / "masking.py", "", "\n# a fix of chapter 02\n", True),
            (checks / "_core.py", "", "\n# a fix of the shared code\n", True),
            (checks / "_judge.py", "", "\n# the verdict's (the grader imports it)\n", True)):
        text = path.read_text()
        assert old in text, old
        path.write_text(text.replace(old, new, 1) if old else text + new)
        assert (ledger.grader_print([nb], checks) != first) is changes, (path.name, new)
        path.write_text(text)
    assert ledger.grader_print([nb], checks) == first
    nb.write_text('{"cells": []}')
    assert ledger.grader_print([nb], checks) != first


def test_an_exercise_is_named_as_the_table_names_it():
    """``--regrade-exercise 02_masking:ex2_1`` (or ``2.1``, ``Exercise 2.1``, the test cell's
    id or the function's name) names one test cell of the exercise table's chapter."""
    ids = sorted(chapter_tests()[A2])
    target = [g for g in ids if label(g) == "Exercise 2.1"]
    assert len(target) == 1
    function = target[0].split("_", 2)[2]
    for name in ("ex2_1", "2.1", "Exercise 2.1", target[0], function):
        assert ledger.exercise_ids(name, ids) == target, name
    assert ledger.exercise_ids("ex9_9", ids) == []


def test_the_change_log_is_appended_and_the_report_shows_the_last_run(tmp_path):
    before = _rows("ada", A1, {"e1": "2", "e2": "0"})
    after = _rows("ada", A1, {"e1": "2", "e2": "2"}) + _rows("bo", A1, {"e1": ""},
                                                              "not submitted")
    cause = {("ada", A1): ledger.STALE, ("bo", A1): ledger.ABSENT}
    lines = ledger.changes(before, after, lambda s, a: cause[s, a], {A1: A1}, "t1", "r1")
    assert [[c[k] for k in ("cause", "student", "exercise", "old", "new")] for c in lines] == [
        [ledger.STALE, "ada", "e2", "0", "2"],
        [ledger.ABSENT, "bo", "e1", "", "not submitted"],
        [ledger.STALE, "ada", "total", "2", "4"],
        [ledger.ABSENT, "bo", "total", "", "none"]]
    ledger.append(tmp_path, lines)
    first = (tmp_path / ledger.CHANGES).read_bytes()
    again = ledger.changes(after, before, lambda s, a: ledger.BETWEEN, {A1: A1}, "t2", "r2")
    ledger.append(tmp_path, again)
    ledger.append(tmp_path, [])  # nothing changed: nothing written
    text = (tmp_path / ledger.CHANGES).read_bytes()
    assert text.startswith(first) and text.count(b"when,run,") == 1  # appended, one header
    assert [c["run"] for c in ledger.read(tmp_path)] == ["r1"] * 4 + ["r2"] * 4
    assert ledger.last_run(tmp_path) == [{k: str(v) for k, v in c.items()} for c in again]
    page = render({}, changes=ledger.last_run(tmp_path))
    assert "Run r2 (t2) changed 4 grade(s)" in page and "2 -&gt; 0" in page


def test_prune_lists_absent_students_and_kept_results_of_the_assignments_graded():
    stored = {"ada": GRADED_A1, "bo": GRADED_A1,
              "cy": _stored({}, _rows("cy", A1, {"e1": ""}, "not submitted"))}
    present = {"bo": {A1: None, A2: "h2"}, "cy": {A1: None, A2: "h"}}
    assert ledger.prune_plan(stored, present, [A1, A2], NOTEBOOKS) == [
        "ada (every result)", f"bo {A1}"]
    assert ledger.prune_plan(stored, present, [A2], NOTEBOOKS) == ["ada (every result)"]


# ---- real Canvas downloads, one assignment at a time ------------------------------------------


def _nb(text: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(f"# {text}", id="c1"))
    return nbformat.writes(nb)


def _download(folder: Path, files: list[str]) -> list:
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_text(_nb(name))
    return discover(folder, folder.parent / f"unpacked-{folder.name}")[0]


def _run(store: ResultStore, subs, graded: dict[str, str], out: Path) -> dict[str, dict]:
    """What course-grade does with one download, each notebook scoring ``graded``'s points:
    plan, merge the new rows and pages into the stored results, save with this intake's
    times and names, write the returns; returns the plans."""
    from autograder.grading.parent.submissions import find_notebook

    store.people = intake_facts(subs, NOTEBOOKS)
    plans = {}
    for s in subs:
        present = {a: ("h" if find_notebook(s, a, a)[0] else None) for a in NOTEBOOKS}
        plans[s.student] = p = ledger.plan(present, store.read(s.student), G,
                                           notebooks=NOTEBOOKS)
        new = {"student": s.student, "fingerprint": "t:x", "rows": [], "feedback": [],
               "name": s.name, "lms_id": s.lms_id}
        for a in p.grade:
            kind = "graded" if present[a] else "not submitted"
            new["rows"] += _rows(s.student, a, {"e1": graded[a] if present[a] else ""}, kind)
            if present[a]:
                rel = f"feedback/{s.student}/{a}/{a}.html"
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                (out / rel).write_text(f"{s.student} {a}")
                new["feedback"].append(rel)
        merged = ledger.merge(store.read(s.student), new, p.grade, NOTEBOOKS, {
            a: {"submission": "h", "grader": G[a]} for a in p.grade if present[a]})
        timing = timings([s], NOTEBOOKS)[s.student]
        store.save(json.dumps(merged), s.student, {a: t for a, t in timing.items()
                                                    if present[a]})
    write_returns(out, store.load(), sorted(store.load()))
    return plans


def test_canvas_downloads_one_assignment_at_a_time_keep_the_earlier_one(tmp_path):
    """Canvas's 01 download (Ada, and Babbage marked LATE), then its 02 download (Ada only):
    Ada's 01 keeps its rows, page, LATE mark and Canvas name (the re-upload zip of 01 still
    holds her page under the 01 download's name), Babbage is kept whole."""
    out = tmp_path / "out"
    store = ResultStore(out)
    first = _download(tmp_path / "canvas_01", ["lovelaceada_1001_5000_01_attention.ipynb",
                                               "babbagecharles_LATE_1002_5001_01_attention.ipynb"])
    plans = _run(store, first, {A1: "2"}, out)
    assert {s: p.grade for s, p in plans.items()} == {
        "babbagecharles_1002": {A1: ledger.NEW, A2: ledger.ABSENT},
        "lovelaceada_1001": {A1: ledger.NEW, A2: ledger.ABSENT}}
    second = _download(tmp_path / "canvas_02", ["lovelaceada_1001_6000_02_masking.ipynb"])
    plans = _run(store, second, {A2: "1"}, out)
    assert (plans["lovelaceada_1001"].grade, plans["lovelaceada_1001"].keep) == (
        {A2: ledger.NEW}, [A1])
    rows = {(r["student"], r["notebook"]): (r["points"], r["late_by"])
            for r in store.final_rows()}
    assert rows == {("babbagecharles_1002", A1): ("2", "late (marked by Canvas)"),
                    ("babbagecharles_1002", A2): ("", ""),
                    ("lovelaceada_1001", A1): ("2", ""), ("lovelaceada_1001", A2): ("1", "")}
    ada = store.read("lovelaceada_1001")
    assert ada["canvas"] == {A1: "lovelaceada_1001_5000", A2: "lovelaceada_1001_6000"}
    assert store.read("babbagecharles_1002")["timing"][A1]["marked_late"] is True
    with zipfile.ZipFile(out / "return" / "canvas" / f"{A1}.zip") as z:
        assert sorted(z.namelist()) == ["babbagecharles_LATE_1002_5001_01_attention.html",
                                        "lovelaceada_1001_5000_01_attention.html"]
    with zipfile.ZipFile(out / "return" / "canvas" / f"{A2}.zip") as z:
        assert z.namelist() == ["lovelaceada_1001_6000_02_masking.html"]
        assert z.read(z.namelist()[0]) == b"lovelaceada_1001 02_masking"


def test_save_keeps_the_times_and_canvas_names_of_assignments_this_run_does_not_name(tmp_path):
    store = ResultStore(tmp_path)
    store.people = {"ada": {"name": "Ada", "canvas": {A1: "ada_1_5"}}}
    store.save(json.dumps({"student": "ada", "rows": []}), "ada", {A1: Timing(None, True)})
    store.people = {"ada": {"name": "Ada L.", "canvas": {A2: "ada_1_6"}}}
    store.save(json.dumps(store.read("ada")), "ada", {A2: Timing()})
    r = store.read("ada")
    assert (r["name"], r["canvas"]) == ("Ada L.", {A1: "ada_1_5", A2: "ada_1_6"})
    assert r["timing"] == {A1: {"at": "", "marked_late": True},
                           A2: {"at": "", "marked_late": False}}


def _week_two(tmp_path: Path, graded: dict) -> tuple:
    """ada, bo and cy graded week 1 (``graded``: their ledger); OUT keeps ada's and bo's
    notebooks (cy's copy is gone); this run's folder holds ada's week 2 only. Returns
    (the stored results, ada's Submission, her notebooks found, her plan)."""
    from autograder.grading.parent.submissions import Submission, find_notebook

    out = tmp_path / "out"
    done = {sid: {**_stored(graded, _rows(sid, A1, {"e1": "2"})), "student": sid,
                  "name": sid.title()} for sid in ("ada", "bo", "cy")}
    for sid in ("ada", "bo"):
        (out / "submitted" / sid / A1).mkdir(parents=True)
        (out / "submitted" / sid / A1 / f"{A1}.ipynb").write_text(_nb(f"{sid} {A1}"))
    week2 = tmp_path / "week2" / "ada"
    week2.mkdir(parents=True)
    (week2 / f"ada_{A2}.ipynb").write_text(_nb(f"ada {A2}"))
    ada = Submission(student="ada", path=week2, origin=week2, name="Ada", lms="canvas")
    found = {"ada": {a: [find_notebook(ada, a, a)] for a in NOTEBOOKS}}
    plans = {"ada": ledger.plan({A1: None, A2: "h2"}, done["ada"], G, notebooks=NOTEBOOKS)}
    return done, ada, found, plans


def test_stale_kept_results_are_graded_again_from_the_notebooks_out_dir_keeps(tmp_path):
    """After a check fix, a run on week 2's download grades again the week-1 notebooks it
    keeps (``OUT_DIR/submitted/``, the grader's own rebuilt copy), each from a folder in
    nbgrader's per-assignment layout, with this folder's notebooks beside them; the kept
    notebooks' fingerprints stay theirs. A student whose copy is gone is said, not graded."""
    from autograder.grading.parent.submissions import find_notebook

    out, work = tmp_path / "out", tmp_path / "out" / ".work"
    done, ada, found, plans = _week_two(tmp_path, {A1: {"submission": "h1", "grader": "old"}})
    assert (plans["ada"].grade, plans["ada"].stale_kept) == ({A2: ledger.NEW}, [A1])
    grading, prints = ledger.regrade_kept(out, work, [ada], ["bo", "cy"], done, plans, found,
                                          NOTEBOOKS, G, {})
    assert sorted(grading) == ["ada", "bo"]
    assert {sid: p.grade for sid, p in plans.items()} == {
        "ada": {A2: ledger.NEW, A1: ledger.STALE}, "bo": {A1: ledger.STALE}, "cy": {}}
    assert prints == {sid: {A1: {"submission": "h1", "grader": "g1"}} for sid in ("ada", "bo")}
    for sid, notebooks in (("ada", [A1, A2]), ("bo", [A1])):
        sub = grading[sid]
        assert (sub.name, sub.per_assignment) == (done[sid]["name"] if sid == "bo" else "Ada",
                                                  True)
        for a in notebooks:
            path, _ = find_notebook(sub, a, a)
            assert path.read_text() == _nb(f"{sid} {a}") and path.parent.name == a
    assert find_notebook(grading["bo"], A2, A2)[0] is None  # no "not submitted" rows for bo
    assert plans["cy"].stale_kept == [A1]
    assert any("1 kept result(s) graded with other checks" in line
               for line in ledger.summary(plans, {"ada"}))


def test_a_kept_assignment_left_out_of_the_run_keeps_its_comments_column(tmp_path):
    """With ``--assignment 02_masking``, 01's rows still get formgrader's comments in
    grades.csv: its test cells and the answer cells they grade are read from the source
    notebook OUT_DIR keeps (``source/01_attention/``)."""
    from autograder.grade import _described

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "solutions" / "99_fixture"
    (tmp_path / "source" / A1).mkdir(parents=True)
    shutil.copyfile(fixture / "99_fixture.ipynb", tmp_path / "source" / A1 / f"{A1}.ipynb")
    nb = nbformat.read(fixture / "99_fixture.ipynb", as_version=4)
    tests = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
             if c.metadata.get("nbgrader", {}).get("grade")]
    (described,) = _described(tmp_path, {A1: [A1], A2: [A2]})[A1]  # no 02 in OUT: none
    assert [g.grade_id for g in described.grade_cells] == tests
    assert all(g.solution_ids for g in described.grade_cells)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_nbgrader_course_folders_source_and_submitted_stay_the_instructors(tmp_path):
    """--out an instructor's nbgrader course folder: its ``source/<a>/`` and the
    ``submitted/<student>/<a>/`` nbgrader collect made are never replaced nor removed
    (publishing a student, the gradebook's timestamp, --prune); the folders course-grade
    makes there (a student it grades from elsewhere) are its own, replaced and removed."""
    from datetime import UTC, datetime

    from autograder.grading.parent.results import _write_timestamp, publish_source

    out, template, staging = tmp_path / "course", tmp_path / "template", tmp_path / "staged"
    (out / "source" / A1).mkdir(parents=True)
    (out / "source" / A1 / f"{A1}.ipynb").write_text("the instructor's source")
    (out / "nbgrader_config.py").write_text("c.CourseDirectory.course_id = 'ml1'\n")
    collected = out / "submitted" / "ann" / A1
    collected.mkdir(parents=True)
    for name, text in ((f"{A1}.ipynb", "ann's notebook"), ("timestamp.txt",
                       "2026-12-01 10:00:00.000000 UTC"), ("submission_secret.txt", "ab" * 64)):
        (collected / name).write_text(text)
    theirs = _tree(out)
    for a in (A1, A2):
        (template / "source" / a).mkdir(parents=True)
        (template / "source" / a / f"{a}.ipynb").write_text("course-grade's source")
    assert publish_source(template, out, [A1, A2]) == [A1]
    for sid in ("ann", "bob"):  # bob's came from a Canvas download: no folder of nbgrader's
        for kind in ("submitted", "autograded", "feedback"):
            (staging / kind / sid / A1).mkdir(parents=True)
            (staging / kind / sid / A1 / "x").write_text("graded copy")
        ledger.publish(staging, out, sid, [A1])
        _write_timestamp(out, sid, A1, datetime(2026, 12, 2, tzinfo=UTC))
    assert {k: v for k, v in _tree(out).items() if k in theirs} == theirs
    assert (out / "submitted" / "bob" / A1 / "x").read_text() == "graded copy"
    assert (out / "submitted" / "bob" / A1 / "timestamp.txt").read_text().startswith("2026-12-02")
    assert (out / "autograded" / "ann" / A1 / "x").is_file()  # nbgrader's output folder
    assert (out / "source" / A2 / f"{A2}.ipynb").read_text() == "course-grade's source"
    assert ledger.created(out) == {f"source/{A2}", f"submitted/bob/{A1}"}
    ResultStore(out).prune(["ann", "bob"])
    assert not (out / "submitted" / "bob").exists()
    assert {k: v for k, v in _tree(out).items() if k in theirs} == theirs
    assert ledger.created(out) == {f"source/{A2}"}


def test_an_older_course_grade_out_dir_made_every_folder_it_holds(tmp_path):
    from autograder.grading.parent.course import MARK

    out = tmp_path / "out"
    (out / "submitted" / "ann" / A1).mkdir(parents=True)
    (out / "source" / A1).mkdir(parents=True)
    (out / "results").mkdir()
    (out / "results" / "ann.json").write_text("{}")
    (out / "nbgrader_config.py").write_text(MARK + "\n")
    assert ledger.ours(out, f"submitted/ann/{A1}") and ledger.ours(out, f"source/{A1}")
    assert json.loads((out / ledger.CREATED).read_text()) == [f"source/{A1}",
                                                              f"submitted/ann/{A1}"]


def test_regrade_of_a_student_absent_from_this_folder_grades_the_notebooks_out_dir_keeps(
        tmp_path):
    """``--regrade bo cy``, neither in this folder (ada's week 2 is): bo's week-1 notebook,
    which OUT_DIR keeps, is graded again (no "not submitted" row of week 2 made up for him);
    cy's copy is gone: her last result stays, said. ada, not named, keeps her checked week 1."""
    from autograder.grading.parent.submissions import find_notebook

    out, work = tmp_path / "out", tmp_path / "out" / ".work"
    done, ada, found, plans = _week_two(tmp_path, {A1: {"submission": "h1", "grader": G[A1]}})
    grading, prints = ledger.regrade_kept(out, work, [ada], ["bo", "cy"], done, plans, found,
                                          NOTEBOOKS, G, {}, frozenset({"bo", "cy"}))
    assert sorted(grading) == ["bo"]
    assert {sid: p.grade for sid, p in plans.items()} == {
        "ada": {A2: ledger.NEW}, "bo": {A1: ledger.REGRADE}, "cy": {}}
    assert prints == {"bo": {A1: {"submission": "h1", "grader": G[A1]}}}
    assert find_notebook(grading["bo"], A2, A2)[0] is None
    assert any("1 kept result(s) graded with other checks (or named by --regrade-exercise or "
               "--regrade) have no notebook" in line for line in ledger.summary(plans, {"ada"}))
