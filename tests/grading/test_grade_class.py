"""The synthetic class on notebook 01, graded once through ``course-grade`` (2 workers).

Every student's every CSV row has its expected points and status (see ``synthetic_class``);
the feedback never shows hidden tests; the merged gradebook agrees with the CSV.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from helpers.adversarial.graded import assert_rows_exact, feedback_page
from helpers.synthetic_class import unmatched
from helpers.synthetic_class.shared import REPO, graded_class

ASSIGNMENT = "01_attention"
SOURCE = REPO / "solutions"
STUDENTS = [
    "correct", "blank", "wrong", "infinite_loop", "memory_bomb", "monkeypatch",
    "edited_test", "deleted_test", "os_exit", "invalid_json", "warns", "earlier_release",
]
EXTRA = ("earlier_release",)  # the chapter's first release, answered (issue 47): full marks
pytestmark = [
    pytest.mark.skipif(not (SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists(),
                       reason="notebook 01 not there"),
]


@pytest.fixture(scope="session")
def nb01_class(tmp_path_factory):
    # a cell limit far above what a correct cell needs (a few s), low enough to keep CI short
    args = ("--workers", "2", "--cell-timeout", "30", "--timeout", "400", "--memory", "3072")
    return graded_class(tmp_path_factory, "nb01-class", SOURCE, ASSIGNMENT, args, EXTRA)


def test_class_graded_without_error(nb01_class):
    assert nb01_class["returncode"] == 0, nb01_class["stderr"]
    assert sorted(nb01_class["expected"]) == sorted(STUDENTS)


@pytest.mark.parametrize("student", STUDENTS)
def test_student_scores_and_statuses(nb01_class, student):
    assert_rows_exact(nb01_class, student, unmatched)


def test_each_row_once(nb01_class):
    keys = Counter((r["student"], r["notebook"], r["exercise"]) for r in nb01_class["rows"])
    assert keys and max(keys.values()) == 1
    n_tests = len(next(iter(nb01_class["expected"].values())))
    assert len(keys) == n_tests * len(STUDENTS)


def _hidden_lines() -> list[str]:
    nb = nbformat.read(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    lines = []
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif inside and len(line.strip()) > 12 and not line.strip().startswith("#"):
                lines.append(line.strip())
    return lines


def test_feedback_hides_hidden_tests(nb01_class):
    hidden = _hidden_lines()
    assert hidden, "notebook 01 has hidden tests"
    pages = sorted((nb01_class["out"] / "feedback").rglob("*.html"))
    # every student whose notebook ran has a page (not invalid_json), os_exit's too (what ran
    # before its code ended the kernel); nbgrader's layout: feedback/<student>/<assignment>/
    students = {p.relative_to(nb01_class["out"] / "feedback").parts[0] for p in pages}
    assert students == set(STUDENTS) - {"invalid_json"}
    for page in pages:
        text = html.unescape(page.read_text())
        assert "BEGIN HIDDEN TESTS" not in text, page
        leaked = [line for line in hidden if line in text]
        assert not leaked, (page, leaked[:3])


def test_feedback_explains_a_wrong_answer(nb01_class):
    text = html.unescape(feedback_page(nb01_class, "wrong", ASSIGNMENT))
    assert "CheckFailed" in text or "differs" in text or "expected" in text


def test_a_notebook_that_ended_its_kernel_is_explained_and_in_formgrader(nb01_class):
    """os_exit's code ended its kernel in the last answer (issue 48 item 6): its page shows
    what ran and names the cell that ended the kernel, it goes back to the student, and
    formgrader has its submission as autograded, with the scores grades.csv gives."""
    import re
    import subprocess
    import sys

    out = nb01_class["out"]
    rows = {r["exercise"]: r for r in nb01_class["rows"] if r["student"] == "os_exit"}
    stopped = [r for r in rows.values() if r["kind"] == "stopped"]
    assert stopped and any(r["kind"] == "from record" for r in rows.values())
    cell = re.search(r"ended the kernel in cell (\d+)\)", stopped[0]["status"]).group(1)
    page = html.unescape(feedback_page(nb01_class, "os_exit", ASSIGNMENT))
    said = f"Your code ended the kernel in cell {cell}: no cell after it ran."
    assert "This notebook stopped." in page and f"StoppedHere: {said}" in page
    result = json.loads((out / "results" / "os_exit.json").read_text())
    assert result["feedback"] == [f"feedback/os_exit/{ASSIGNMENT}/{ASSIGNMENT}.html"]
    assert (out / "return" / "os_exit" / ASSIGNMENT / f"{ASSIGNMENT}.html").is_file()
    assert (out / "autograded" / "os_exit" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    # formgrader's own view (nbgrader's API in OUT, as its submissions page reads it)
    code = ("import json; from nbgrader.apps import NbGraderAPI;"
            "from nbgrader.apps.baseapp import NbGrader; app = NbGrader(); app.initialize([]);"
            f"s = NbGraderAPI(config=app.config).get_submission({ASSIGNMENT!r}, 'os_exit');"
            "print('API', json.dumps([s['autograded'], s['score'], s['max_score']]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=out, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    autograded, score, max_score = json.loads(next(
        line[4:] for line in proc.stdout.splitlines() if line.startswith("API ")))
    assert autograded is True
    assert score == pytest.approx(sum(float(r["points"]) for r in rows.values()))
    assert max_score == pytest.approx(sum(float(r["max_points"]) for r in rows.values()))


def test_class_gradebook_matches_csv(nb01_class):
    from nbgrader.api import Gradebook

    from autograder.grading.gradebook import quiet_sqlalchemy
    from autograder.grading.nbgrader_patches import ensure_cached_head

    ensure_cached_head()
    db = nb01_class["out"] / "gradebook.db"
    with quiet_sqlalchemy(), Gradebook(f"sqlite:///{db}") as gb:
        for student in ("correct", "blank", "infinite_loop"):
            csv_total = sum(float(r["points"] or 0) for r in nb01_class["rows"]
                            if r["student"] == student)
            assert gb.find_submission(ASSIGNMENT, student).score == pytest.approx(csv_total)


def test_results_record_each_student_once(nb01_class):
    results = sorted(Path(nb01_class["out"] / "results").glob("*.json"))
    assert [json.loads(p.read_text())["student"] for p in results] == sorted(STUDENTS)
