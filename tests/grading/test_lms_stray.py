"""An LMS download is one assignment's (issue 47, fact 10): Canvas's download of 98_copy in
which a student also uploads a changed 99_fixture notebook. The instructor's weekly runs
(``course-grade canvas_99/ --out grades/``, then ``course-grade canvas_98/ --out grades/``)
leave that student's 99_fixture rows as the first week graded them: the stray is named on the
console, not graded, and changes.csv records no change of it."""

from __future__ import annotations

import shutil
import subprocess

import nbformat

from helpers.synthetic_class import ClassBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, read_csv
from helpers.synthetic_class.shared import template as shared_template

SOURCE = REPO / "tests" / "fixtures" / "solutions"
FIXTURE, COPY = "99_fixture", "98_copy"
ADA, BABBAGE = "lovelaceada_1001", "babbagecharles_1002"


def test_a_first_assignment_notebook_in_the_second_download_is_not_graded(tmp_path):
    from autograder.grading.parent.ledger import last_run
    from autograder.grading.sandbox import bwrap_path

    nb = shared_template(SOURCE, [FIXTURE], 10)[1][FIXTURE][0]
    source = tmp_path / "source"  # the fixture assignment and a copy of it, 98_copy
    shutil.copytree(SOURCE / FIXTURE, source / FIXTURE)
    (source / COPY).mkdir()
    shutil.copy(SOURCE / FIXTURE / f"{FIXTURE}.ipynb", source / COPY / f"{COPY}.ipynb")
    builder = ClassBuilder(nb)
    right, wrong = builder.answered(), builder.wrong()
    # Canvas's names, <name>_<user id>_<submission id>_<file>, one download per assignment
    for where, name, notebook in (
            (FIXTURE, f"lovelaceada_LATE_1001_5000_{FIXTURE}", wrong),
            (FIXTURE, f"{BABBAGE}_5001_{FIXTURE}", right),
            (COPY, f"{ADA}_6000_{COPY}", right),
            (COPY, f"{ADA}_6000_{FIXTURE}", right),  # the stray: a better 99_fixture
            (COPY, f"{BABBAGE}_6001_{COPY}", right)):
        (tmp_path / where).mkdir(exist_ok=True)
        nbformat.write(notebook, tmp_path / where / f"{name}.ipynb")
    out = tmp_path / "out"
    sandbox = () if bwrap_path() else ("--unsandboxed",)

    def run(a: str) -> str:
        args = ("--workers", "1", "--cell-timeout", "10", "--timeout", "120", *sandbox,
                "--due", f"{FIXTURE}=2026-01-05T12:00Z")
        proc = subprocess.run(grade_cmd(tmp_path / a, out, source, *args), cwd=REPO,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr

    def rows(student: str, notebook: str) -> list[tuple]:
        return [(r["exercise"], r["points"], r["kind"], r["due"], r["late_by"],
                 r["late_penalty"]) for r in read_csv(out / "grades.csv")
                if r["student"] == student and r["notebook"] == notebook]

    run(FIXTURE)
    week1 = rows(ADA, FIXTURE)
    assert week1 == [(g.grade_id, "0", "graded", "2026-01-05T12:00:00+00:00",
                      "late (marked by Canvas)", "0") for g in nb.grade_cells]

    err = run(COPY)
    assert f"canvas: {ADA}_6000_{FIXTURE}.ipynb is in {COPY}'s download: not graded for " \
        f"{FIXTURE}" in err, err
    assert rows(ADA, FIXTURE) == week1  # points, late_by: as week 1 graded them
    assert [r[:3] for r in rows(ADA, COPY)] == [(g.grade_id, f"{g.max_points:g}", "graded")
                                                for g in nb.grade_cells]
    changed = {(c["student"], c["assignment"]) for c in last_run(out)}
    assert changed == {(ADA, COPY), (BABBAGE, COPY)}  # none of 99_fixture


def test_one_canvas_assignment_for_several_notebooks_is_graded_once_per_notebook(tmp_path):
    """A class that hands in both notebooks to one Canvas assignment: with no --assignment the
    download is a tie and nothing of it is graded (said on the console); graded once per
    notebook, each run naming it, the instructor guide's way, both are graded and the second
    run keeps the first's rows."""
    from autograder.grading.sandbox import bwrap_path

    nb = shared_template(SOURCE, [FIXTURE], 10)[1][FIXTURE][0]
    source = tmp_path / "source"
    shutil.copytree(SOURCE / FIXTURE, source / FIXTURE)
    (source / COPY).mkdir()
    shutil.copy(SOURCE / FIXTURE / f"{FIXTURE}.ipynb", source / COPY / f"{COPY}.ipynb")
    right = ClassBuilder(nb).answered()
    (tmp_path / "canvas_all").mkdir()
    for who in (ADA, BABBAGE):
        for a in (FIXTURE, COPY):
            nbformat.write(right, tmp_path / "canvas_all" / f"{who}_7000_{a}.ipynb")
    out = tmp_path / "out"
    sandbox = () if bwrap_path() else ("--unsandboxed",)

    def run(*args: str, rc: int = 0) -> str:
        proc = subprocess.run(grade_cmd(tmp_path / "canvas_all", out, source, "--workers", "1",
                                        "--cell-timeout", "10", "--timeout", "120", *sandbox,
                                        *args),
                              cwd=REPO, capture_output=True, text=True, timeout=600)
        assert proc.returncode == rc, proc.stderr
        return proc.stderr

    def graded() -> set[tuple]:
        return {(r["student"], r["notebook"]) for r in read_csv(out / "grades.csv")
                if r["kind"] == "graded" and r["points"] == r["max_points"]}

    err = run(rc=2)  # nothing to grade: a usage error, nothing written
    assert "the submissions folder: an LMS download is one assignment's, and as many of its " \
        f"students handed in {COPY} and {FIXTURE}: nothing of it graded; name its assignment " \
        "with --assignment" in err, err
    assert not (out / "grades.csv").exists()
    run("--assignment", FIXTURE)
    assert graded() == {(ADA, FIXTURE), (BABBAGE, FIXTURE)}
    run("--assignment", COPY)
    assert graded() == {(s, a) for s in (ADA, BABBAGE) for a in (FIXTURE, COPY)}
