"""Notebook 04 (layer norm) through the real grading path, once per test session.

One ``course-grade`` run grades three submissions built from the committed notebooks: the
solution (full marks), the student release as handed out (0 points, every check "not
implemented yet"), and the solution with one catalogued mistake (less than full marks on that
exercise, and the feedback names the mistake). The committed release must equal a fresh
generation (tests/test_release.py, every chapter). ``graded_chapter`` is shared with the tests
of notebooks 05, 06 and 08: that one run grades all four chapters (``CHAPTERS``).

Grading does not run demonstration cells (``autograder/grading/demo.py``): what they show is
proven on the notebook as ``course-check`` runs it (``executed_chapter``).
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import time

import nbformat
import pytest
from synthetic_class import ClassBuilder
from synthetic_class.shared import REPO, grade_cmd, notebook_info, read_csv, shared_dir

from autograder.checks import table

EX = table.rows("04_layer_norm")  # {function: exercise row} of the chapter

SOURCE = REPO / "solutions"
ASSIGNMENT = "04_layer_norm"
# one catalogued mistake, fed through the grading path: (answer cell, old, new, exercise, name)
MISTAKE = (
    EX["layer_norm"].solution_id,
    "((x - mu) ** 2).mean(dim=-1, keepdim=True)",
    "x.var(dim=-1, keepdim=True)",
    EX["layer_norm"].grade_id,
    "unbiased variance (divided by d - 1)",
)


def _edit(gid, old, new):
    def f(g, src):
        if g != gid:
            return src
        assert old in src, f"{old!r} not in answer cell {gid}"
        return src.replace(old, new)

    return f


# The chapters whose tests share one ``course-grade`` run (one template, one class): each
# chapter's test module holds its catalogued MISTAKE.
CHAPTERS = {"04_layer_norm": "test_notebook04", "05_feed_forward_blocks": "test_notebook05",
            "06_transformer": "test_notebook06", "08_training": "test_notebook08"}
STUDENTS = ("solution", "release", "mistake")


def graded_chapter(tmp_path_factory, assignment: str, mistake: tuple) -> dict:
    """Grade solution, release and one mistake of every chapter in ``CHAPTERS`` once (the
    first chapter to ask grades them all: each student hands in every chapter, the ``mistake``
    student with each chapter's own mistake); return what ``assignment``'s tests need.

    Returns {"returncode", "stderr", "rows" {student: {exercise: row}} (this chapter's rows),
    "seconds" {student: s} (the student's whole grading, every chapter), "feedback"
    {student: html}, "autograded" {student: notebook}, "grade_cells" [...]}.
    """
    import importlib

    mistakes = {a: importlib.import_module(m).MISTAKE for a, m in CHAPTERS.items()}
    assert mistakes[assignment] == mistake, f"{assignment}: its MISTAKE is what CHAPTERS reads"
    root = shared_dir(tmp_path_factory) / ("chapters-" + "-".join(a[:2] for a in CHAPTERS))
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            info = notebook_info(tmp_path_factory, SOURCE, list(CHAPTERS))
            cls = root / "class"
            names, grade_cells = {}, {}
            for a in CHAPTERS:
                nb = info[a][0]
                names[a], grade_cells[a] = nb.name, [g.grade_id for g in nb.grade_cells]
                builder = ClassBuilder(nb)
                gid, old, new = mistakes[a][:3]
                for student, book in zip(STUDENTS, (builder.answered(), builder.release(),
                                                    builder.answered(_edit(gid, old, new)))):
                    (cls / student).mkdir(parents=True, exist_ok=True)
                    nbformat.write(book, cls / student / f"{nb.name}.ipynb")
            t0 = time.monotonic()
            args = ("--workers", "2", "--cell-timeout", "120", "--timeout", "900")
            proc = subprocess.run(grade_cmd(cls, root / "out", SOURCE, *args), cwd=REPO,
                                  capture_output=True, text=True)
            done.write_text(json.dumps({
                "returncode": proc.returncode, "stderr": proc.stderr[-5000:],
                "seconds_total": time.monotonic() - t0, "names": names,
                "grade_cells": grade_cells,
            }))
    whole = json.loads(done.read_text())
    name = whole["names"][assignment]
    result = {"returncode": whole["returncode"], "stderr": whole["stderr"],
              "seconds_total": whole["seconds_total"], "name": name,
              "grade_cells": whole["grade_cells"][assignment], "assignment": assignment}
    out = root / "out"
    result["rows"], result["seconds"], result["feedback"], result["autograded"] = {}, {}, {}, {}
    if result["returncode"] == 0:
        for r in read_csv(out / "grades.csv"):
            if r["notebook"] == name:
                result["rows"].setdefault(r["student"], {})[r["exercise"]] = r
        for s in STUDENTS:
            res = json.loads((out / "results" / f"{s}.json").read_text())
            result["seconds"][s] = res["seconds"]
            page = out / "feedback" / s / assignment / f"{name}.html"
            result["feedback"][s] = page.read_text() if page.exists() else ""
            book = (out / ".work" / "students" / s / "autograded" / s / assignment
                    / f"{name}.ipynb")
            result["autograded"][s] = nbformat.read(book, as_version=4)
    return result


def assert_demo_cells_not_run(autograded: dict, assignment: str) -> None:
    """Every demonstration cell of the chapter is in each graded copy, not run (its source
    replaced, no output); every other code cell of the source is there as it was."""
    from autograder.grading.demo import NOT_RUN, is_demo

    src = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
    demos = [c.source for c in src.cells if is_demo(c)]
    assert demos, f"{assignment} has no demonstration cells"
    for student, book in autograded.items():
        code = [c for c in book.cells if c.cell_type == "code"]
        skipped = [c for c in code if c.source == NOT_RUN]
        assert len(skipped) == len(demos), (student, len(skipped), len(demos))
        assert all(not c.outputs for c in skipped), student
        assert not any(c.source in demos for c in code), student  # none of them ran


def executed_chapter(tmp_path_factory, assignment: str, which: str = "solution"):
    """The chapter's ``solutions/`` (``which="solution"``) or ``notebooks/`` (``"release"``)
    notebook executed as ``course-check`` runs it (``selfcheck.execute``: a fresh kernel,
    demonstration cells included, a training notebook at its smoke size), once per session."""
    from autograder import release, selfcheck

    base = SOURCE if which == "solution" else release.RELEASE
    root = shared_dir(tmp_path_factory) / f"executed-{assignment}-{which}"
    root.mkdir(exist_ok=True)
    done = root / f"{assignment}.ipynb"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            nb = selfcheck.execute(base / assignment / f"{assignment}.ipynb")
            nbformat.write(nb, root / "tmp.ipynb")
            (root / "tmp.ipynb").rename(done)
    return nbformat.read(done, as_version=4)


def check_chapter(result: dict, mistake: tuple, max_seconds: float = 120.0) -> None:
    """The standard's CI proofs on a ``graded_chapter`` result (one assert per claim)."""
    assert result["returncode"] == 0, result["stderr"]
    rows = result["rows"]
    # the solution scores full marks on every exercise
    for r in rows["solution"].values():
        assert (r["status"], r["points"]) == ("graded", r["max_points"]), r
    # the release runs end to end, scores 0, and every check says "not implemented yet"
    for r in rows["release"].values():
        assert (r["status"], r["points"]) == ("graded", "0"), r
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c
             for c in result["autograded"]["release"].cells}
    for gid in result["grade_cells"]:
        errors = [o for o in cells[gid].outputs if o.output_type == "error"]
        assert len(errors) == 1 and errors[0].ename == "NotImplementedYet", (gid, errors)
        assert "is not implemented yet" in errors[0].evalue, errors[0].evalue
    assert_demo_cells_not_run(result["autograded"], result["assignment"])
    # one catalogued mistake: less than full marks there, full elsewhere; feedback names it
    exercise, name = mistake[3], mistake[4]
    for ex, r in rows["mistake"].items():
        if ex == exercise:
            assert r["status"] == "graded" and float(r["points"]) < float(r["max_points"]), r
        else:
            assert r["points"] == r["max_points"], r
    assert f"Likely mistake: {name}." in result["feedback"]["mistake"]
    # the notebooks execute (and are graded) on CPU in under 2 minutes: every chapter of
    # CHAPTERS together, the solution student's whole grading
    assert result["seconds"]["solution"] < max_seconds, result["seconds"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return graded_chapter(tmp_path_factory, ASSIGNMENT, MISTAKE)


def test_grading_path_proofs(graded):
    check_chapter(graded, MISTAKE)


def test_points_in_the_title_cell_add_up():
    nb = nbformat.read(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    points = [c.metadata.nbgrader["points"] for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")]
    assert f"Points: {sum(points):g} in total" in nb.cells[0].source


def test_every_check_is_called_with_its_hidden_key_in_the_source():
    from autograder.checks import layer_norm
    from autograder.checks._core import registered

    nb = nbformat.read(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    keys = [k for k in registered() if k.startswith("layer_norm.")]
    assert len(keys) == len(layer_norm.__all__)
    for k in keys:
        assert f'_hidden_check("{k}"' in text, k



def warnings_in_course_cells(book) -> list[str]:
    """Warning text in the outputs of a graded notebook's course cells (not the test cells,
    where a failed check may legitimately print): every student's feedback would carry it."""
    found = []
    for i, cell in enumerate(book.cells):
        if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("grade"):
            continue
        for out in cell.outputs:
            text = out.get("text", "") if out.get("output_type") == "stream" else ""
            if "Warning" in text or "warnings.warn" in text:
                found.append(f"cell {i}: {text[:300]}")
    return found
