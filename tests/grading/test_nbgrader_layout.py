"""Issue 47, fact 10: in an nbgrader course's ``submitted/``, assignment A's notebook comes only
from ``submitted/<student>/A/``, whose ``timestamp.txt`` is A's time
(``helpers.adversarial.nbgrader_layout``: the class, its exact rows and console lines). One
course-grade run of the course folder, four students, two copies of the fixture assignment.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from helpers.adversarial.dodge_class import mismatch
from helpers.adversarial.nbgrader_layout import DUE, EARLY, LATER, LayoutBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, read_csv
from helpers.synthetic_class.shared import template as shared_template

FIXTURES = REPO / "tests" / "fixtures" / "solutions"
FIXTURE = "99_fixture"
STUDENTS = ["absent", "moved", "nested", "ontime"]


@pytest.fixture(scope="module")
def layout_class(tmp_path_factory):
    from autograder.grading.sandbox import bwrap_path

    root = tmp_path_factory.mktemp("nbgrader_layout")
    _, info = shared_template(FIXTURES, [FIXTURE], 10)
    source = root / "source"
    for a in (EARLY, LATER):
        (source / a).mkdir(parents=True)
        shutil.copyfile(FIXTURES / FIXTURE / f"{FIXTURE}.ipynb", source / a / f"{a}.ipynb")
    expected, console = LayoutBuilder(info[FIXTURE][0]).build_course(root / "course")
    sandbox = () if bwrap_path() else ("--unsandboxed",)
    proc = subprocess.run(
        grade_cmd(root / "course" / "submitted", root / "out", source, "--workers", "2",
                  "--cell-timeout", "10", "--timeout", "300", "--due", f"{EARLY}={DUE}",
                  f"{LATER}={DUE}", *sandbox),
        cwd=REPO, capture_output=True, text=True, timeout=900)
    rows = read_csv(root / "out" / "grades.csv") if proc.returncode == 0 else []
    return {"proc": proc, "rows": rows, "expected": expected, "console": console}


def test_the_class_is_graded(layout_class):
    proc = layout_class["proc"]
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert sorted({r["student"] for r in layout_class["rows"]}) == STUDENTS


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(layout_class, student):
    """Points, status, diagnosis, flag and ``late_by`` of each row: ``moved``'s EARLY rows are
    ``absent``'s (the notebook put into LATER's folder is not graded for EARLY), and
    ``nested``'s EARLY rows are its own late, wrong notebook's."""
    rows = {(r["notebook"], r["exercise"]): r for r in layout_class["rows"]
            if r["student"] == student}
    expected = layout_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {key: m for key, (exp, late_by) in expected.items()
             if (m := mismatch(rows[key], exp)) or rows[key]["late_by"] != late_by}
    assert not wrong, {k: (rows[k]["late_by"], m) for k, m in wrong.items()}


def test_moved_reads_as_absent(layout_class):
    """Fact 10's student: a row for the assignment it missed is what it would be without the
    notebook it moved (every column but the student's own)."""
    def early(student):
        return [{k: v for k, v in r.items() if k not in ("student", "name")}
                for r in layout_class["rows"] if r["student"] == student and
                r["notebook"] == EARLY]

    assert early("moved") == early("absent") != []


def test_the_console_names_each_stray_notebook(layout_class):
    stderr = layout_class["proc"].stderr.splitlines()
    for line in layout_class["console"]:
        assert line in stderr, (line, layout_class["proc"].stderr[-3000:])
    assert sum("is not in" in line for line in stderr) == len(layout_class["console"])
