"""Notebook 02 (masking) through the real grading path, once per test session.

One ``course-grade`` run grades three submissions of the chapter together: the student
release with every solution cell filled in from the source (must score full marks), the
release as handed out (must run end to end, score 0, every check "not implemented yet"), and
the filled-in release with one catalogued mistake (its exercise scores 0 and the feedback
names the mistake). The committed release must equal a fresh generation
(tests/test_release.py checks every chapter's in one generation).

``graded_chapter`` and the assertions are shared with notebooks 03's and 07's tests (imported
there): its one ``course-grade`` run grades the three chapters (``CHAPTERS``) together.
"""

from __future__ import annotations

import fcntl
import html
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from synthetic_class.shared import REPO, read_csv, shared_dir

from autograder.checks import table
from autograder.grading.cells import nbg as _nbg

EX = table.rows("02_masking")  # {function: exercise row} of the chapter

NAME = "02_masking"
SOURCE = REPO / "solutions"
# the wrong submission: (solution cell, text replaced, replacement, exercise, mistake named)
WRONG = (
    EX["masked_attention"].solution_id,
    "    scores = scores + mask  # the encoder-decoder survey: + M\n",
    "    scores = scores + mask  # the encoder-decoder survey: + M\n    return "
    "torch.softmax(scores, dim=-1) @ v\n",
    EX["masked_attention"].grade_id,
    "-inf producing NaN rows",
)



def filled_release(name: str) -> nbformat.NotebookNode:
    """The release notebook with each solution cell replaced by the source's (a perfect student)."""
    src = nbformat.read(SOURCE / name / f"{name}.ipynb", as_version=4)
    answers = {_nbg(c)["grade_id"]: c.source for c in src.cells if _nbg(c).get("solution")}
    nb = nbformat.read(REPO / "notebooks" / name / f"{name}.ipynb", as_version=4)
    for c in nb.cells:
        if _nbg(c).get("solution"):
            c.source = answers[_nbg(c)["grade_id"]]
    return nb


# The chapters whose tests share one ``course-grade`` run: each chapter's test module holds
# its catalogued mistake (WRONG).
CHAPTERS = {"02_masking": "test_notebook02", "03_multihead_attention": "test_notebook03",
            "07_bpe": "test_notebook07"}


def graded_chapter(tmp_path_factory, name: str, wrong: tuple) -> dict:
    """Grade solution / release / wrong of every chapter in ``CHAPTERS`` once (file lock across
    workers; each student hands in every chapter, ``wrong`` with each chapter's own mistake);
    ``rows`` holds chapter ``name``'s rows."""
    import importlib

    wrongs = {n: importlib.import_module(m).WRONG for n, m in CHAPTERS.items()}
    assert wrongs[name] == wrong, f"{name}: its WRONG is what CHAPTERS reads"
    root = shared_dir(tmp_path_factory) / ("chapters-" + "-".join(n[:2] for n in CHAPTERS))
    root.mkdir(parents=True, exist_ok=True)
    done = root / "result.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            subs = root / "subs"
            for student in ("solution", "release", "wrong"):
                (subs / student).mkdir(parents=True, exist_ok=True)
            for n, w in wrongs.items():
                cell_id, old, new = w[:3]
                nbformat.write(filled_release(n), subs / "solution" / f"{n}.ipynb")
                nbformat.write(
                    nbformat.read(REPO / "notebooks" / n / f"{n}.ipynb", as_version=4),
                    subs / "release" / f"{n}.ipynb",
                )
                nb = filled_release(n)
                (cell,) = [c for c in nb.cells if _nbg(c).get("grade_id") == cell_id]
                assert old in cell.source, f"{cell_id} no longer contains the text to replace"
                cell.source = cell.source.replace(old, new)
                nbformat.write(nb, subs / "wrong" / f"{n}.ipynb")
            t0 = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "autograder.grade", str(subs), "--out", str(root / "out"),
                 "--source", str(SOURCE), "--no-progress", "--workers", "2",
                 "--cell-timeout", "60", "--timeout", "600"],
                cwd=REPO, capture_output=True, text=True,
            )
            done.write_text(json.dumps({
                "returncode": proc.returncode, "stderr": proc.stderr[-5000:],
                "seconds": time.monotonic() - t0,
            }))
    result = json.loads(done.read_text())
    out = root / "out"
    result["out"] = out
    result["rows"] = [r for r in read_csv(out / "grades.csv") if r["notebook"] == name] \
        if result["returncode"] == 0 else []
    return result


def feedback_text(out: Path, student: str, name: str) -> str:
    text = html.unescape((out / "feedback" / student / name / f"{name}.html").read_text())
    return re.sub(r"<[^>]+>", "", text)


def autograded_notebook(out: Path, student: str, name: str) -> nbformat.NotebookNode:
    (path,) = out.glob(f".work/students/{student}/autograded/{student}/{name}/{name}.ipynb")
    return nbformat.read(path, as_version=4)


def assert_chapter_graded_correctly(result: dict, name: str, wrong: tuple) -> None:
    assert result["returncode"] == 0, result["stderr"]
    rows = result["rows"]
    by = {s: {r["exercise"]: r for r in rows if r["student"] == s}
          for s in ("solution", "release", "wrong")}
    src = nbformat.read(SOURCE / name / f"{name}.ipynb", as_version=4)
    tests = {
        _nbg(c)["grade_id"]: float(_nbg(c)["points"]) for c in src.cells if _nbg(c).get("grade")
    }
    for student, got in by.items():
        assert sorted(got) == sorted(tests), (student, sorted(got))
        assert all(r["status"] == "graded" for r in got.values()), (student, got)
    # the solution scores full marks, the release 0
    assert {ex: float(r["points"]) for ex, r in by["solution"].items()} == tests
    assert all(float(r["points"]) == 0 for r in by["release"].values())
    # the wrong submission loses exactly that exercise, and the feedback names the mistake
    exercise, mistake = wrong[3:]
    lost = {ex for ex, r in by["wrong"].items() if float(r["points"]) < tests[ex]}
    assert lost == {exercise}, lost
    text = feedback_text(result["out"], "wrong", name)
    assert f"Likely mistake: {mistake}." in text
    assert "_hidden_check(" not in text  # feedback hides the hidden tests
    from test_notebook04 import assert_demo_cells_not_run  # grading skips demonstration cells

    assert_demo_cells_not_run({s: autograded_notebook(result["out"], s, name) for s in by}, name)


def assert_release_runs_end_to_end(out: Path, name: str) -> None:
    """Every error of the executed release is a graded check saying "not implemented yet"."""
    nb = autograded_notebook(out, "release", name)
    graded = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if _nbg(cell).get("grade"):
            graded += 1
            assert len(errors) == 1 and errors[0].ename == "NotImplementedYet", cell.source
            assert "is not implemented yet" in errors[0].evalue
        else:
            assert not errors, (cell.source, errors)
    assert graded and graded == sum(1 for c in nb.cells if _nbg(c).get("grade"))
    shown = feedback_text(out, "release", name)
    assert shown.count("is not implemented yet") == graded


def assert_fast(out: Path) -> None:
    """The filled-in notebooks run (autograde + feedback, the whole grading) in under 2 min:
    every chapter of ``CHAPTERS`` together."""
    seconds = json.loads((out / "results" / "solution.json").read_text())["seconds"]
    assert seconds < 120, seconds


@pytest.fixture(scope="session")
def chapter02(tmp_path_factory):
    return graded_chapter(tmp_path_factory, NAME, WRONG)


@pytest.mark.slow
def test_solution_full_marks_release_zero_and_mistake_named(chapter02):
    assert_chapter_graded_correctly(chapter02, NAME, WRONG)


@pytest.mark.slow
def test_release_executes_end_to_end_saying_not_implemented_yet(chapter02):
    assert chapter02["returncode"] == 0, chapter02["stderr"]
    assert_release_runs_end_to_end(chapter02["out"], NAME)


@pytest.mark.slow
def test_notebook_runs_in_under_two_minutes(chapter02):
    assert chapter02["returncode"] == 0, chapter02["stderr"]
    assert_fast(chapter02["out"])
