"""Formgrader on course-grade's output, in a real browser: the instructor's review survives.

Grades a two-student class of the small fixture assignment, starts JupyterLab headless on the
output folder (started there, as ``bootstrap lab --instructor OUT`` does, so formgrader reads
its nbgrader_config.py), and with the system's Chromium (Playwright):

* the Manage Assignments and Manage Submissions pages list the assignment and both students;
* on the manual grading page of one student, sets a manual score on a test cell and a comment
  on an answer cell (typed into formgrader's inputs, saved by formgrader itself);
* reruns course-grade with ``--regrade`` of that student, and sees the score and the comment
  kept: in the gradebook, in grades.csv and on the reloaded formgrader page.

Skipped, with the reason, only where no Chromium executable can be found.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from autograder.grading import mathjax

from helpers.browser import CHROMIUM_CANDIDATES, CHROMIUM_FLAGS, LabServer, find_chromium
from helpers.synthetic_class import ClassBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, notebook_info, read_csv

SOURCE = REPO / "tests" / "fixtures" / "solutions"
ASSIGNMENT = "99_fixture"



def _chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("no Chromium to drive: looked for $COURSE_CHROMIUM, "
                    + ", ".join(CHROMIUM_CANDIDATES) + " and `chromium` on PATH")
    return path


def _grade(classdir: Path, out: Path, *extra: str) -> None:
    from autograder.grading.sandbox import bwrap_path

    sandbox = () if bwrap_path() else ("--unsandboxed",)
    proc = subprocess.run(grade_cmd(classdir, out, SOURCE, "--workers", "1", "--cell-timeout",
                                    "10", *sandbox, *extra),
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


def _manual(out: Path, grade_id: str, answer_id: str) -> tuple:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        grade = gb.find_grade(grade_id, ASSIGNMENT, ASSIGNMENT, "wrong")
        comment = gb.find_comment(answer_id, ASSIGNMENT, ASSIGNMENT, "wrong")
        return grade.manual_score, comment.manual_comment, \
            gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "wrong").id


def _wait_for(fn, want, seconds=90.0):
    deadline = time.monotonic() + seconds
    while (got := fn()) != want and time.monotonic() < deadline:
        time.sleep(0.3)
    return got


def test_formgrader_manual_score_survives_course_grade(tmp_path, tmp_path_factory):
    chromium = _chromium()
    from playwright.sync_api import sync_playwright

    info = notebook_info(tmp_path_factory, SOURCE, [ASSIGNMENT])
    nb = info[ASSIGNMENT][0]
    builder = ClassBuilder(nb)
    classdir, out = tmp_path / "class", tmp_path / "out"
    for student, notebook in (("correct", builder.answered()), ("wrong", builder.wrong())):
        (classdir / student).mkdir(parents=True)
        nbformat.write(notebook, classdir / student / f"{ASSIGNMENT}.ipynb")
    _grade(classdir, out)
    test = nb.grade_cells[0]
    grade_id, answer_id = test.grade_id, test.solution_ids[0]
    assert _manual(out, grade_id, answer_id)[:2] == (None, None)
    submission = _manual(out, grade_id, answer_id)[2]
    score_box = f'input.score[id="{grade_id}"]'
    comment_box = f'textarea.comment[id="{answer_id}-comment"]'

    for scratch in ("lab1", "lab2"):
        (tmp_path / scratch).mkdir()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            with LabServer(out, tmp_path / "lab1", view="instructor") as lab:
                page = browser.new_page()
                page.goto(lab.url("formgrader/manage_assignments"))
                page.locator("td", has_text=ASSIGNMENT).first.wait_for(timeout=60_000)
                page.goto(lab.url(f"formgrader/manage_submissions/{ASSIGNMENT}"))
                for student in ("correct", "wrong"):
                    page.locator("td", has_text=student).first.wait_for(timeout=60_000)
                page.goto(lab.url(f"formgrader/submissions/{submission}/"))
                page.locator(score_box).wait_for(timeout=60_000)
                # the boxes are in the HTML before formgrader's script has fetched the grade
                # models and bound its 'change' handlers: a score typed earlier is never saved
                page.wait_for_load_state("networkidle", timeout=60_000)
                # maths rendered offline: MathJax from the server's own copy (issue 31)
                assert f'src="{mathjax.SERVER_URL}"' in page.content()
                assert str(page.evaluate("() => window.MathJax && MathJax.version"))[:3] == "2.7"
                page.locator(score_box).fill("0.5")
                page.locator(score_box).press("Tab")  # formgrader saves on 'change'
                assert _wait_for(lambda: _manual(out, grade_id, answer_id)[0], 0.5) == 0.5, \
                    lab.log()
                page.locator(comment_box).fill("see the hint on shapes")
                page.locator(comment_box).press("Tab")
                got = _wait_for(lambda: _manual(out, grade_id, answer_id)[:2],
                                (0.5, "see the hint on shapes"))
                assert got == (0.5, "see the hint on shapes"), lab.log()
                page.close()

            _grade(classdir, out, "--regrade", "wrong")

            assert _manual(out, grade_id, answer_id)[:2] == (0.5, "see the hint on shapes")
            row = next(r for r in read_csv(out / "grades.csv")
                       if (r["student"], r["exercise"]) == ("wrong", grade_id))
            assert (row["points"], row["manual_points"], row["comment"]) == \
                ("0.5", "0.5", "see the hint on shapes")
            with LabServer(out, tmp_path / "lab2", view="instructor") as lab:
                page = browser.new_page()
                page.goto(lab.url("formgrader/manage_assignments"))  # logs in (the token)
                page.locator("td", has_text=ASSIGNMENT).first.wait_for(timeout=60_000)
                page.goto(lab.url(f"formgrader/submissions/{submission}/"))
                page.locator(score_box).wait_for(timeout=60_000)
                # formgrader fills each box when its own model arrives: wait for both
                page.wait_for_function(
                    f"() => document.querySelector('{score_box}').value === '0.5'",
                    timeout=30_000)
                page.wait_for_function(
                    f"() => document.querySelector('{comment_box}').value !== ''",
                    timeout=30_000)
                assert page.locator(comment_box).input_value() == "see the hint on shapes"
        finally:
            browser.close()
