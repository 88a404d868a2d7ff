"""The contributor guide's "Adding an exercise (worked example)", followed in a temporary copy of
the course.

The code the guide shows is taken from its page itself (``docs/contributing/
adding-an-exercise.md``; its ```python blocks, in order: the
check, the table row, the notebook cells) and put where the guide says; then the copy's own
release command runs and its ``course-grade`` grades a right and a wrong submission of the
chapter. If the guide goes stale (a step missing, a block that no longer works), this fails.
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat

from autograder.grading.cells import nbg

from helpers.synthetic_class.shared import read_csv

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "04_layer_norm"
GUIDE = ROOT / "docs" / "contributing" / "adding-an-exercise.md"
HEADING = "# Adding an exercise (worked example)"


def guide_blocks() -> list[str]:
    """The guide's ```python blocks, dedented, in order."""
    section = GUIDE.read_text().split(HEADING + "\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```$", section, re.M | re.S)
    return [textwrap.dedent(body) for _, body in blocks]


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: the guide's anchor {old!r} is gone"
    path.write_text(text.replace(old, new))


def _answered(release: nbformat.NotebookNode, answers: dict) -> nbformat.NotebookNode:
    nb = nbformat.from_dict(release)
    for cell in nb.cells:
        if nbg(cell).get("grade_id") in answers:
            cell.source = answers[nbg(cell)["grade_id"]]
    return nb


def _run(cmd, course: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(course)}  # the copy's autograder, not this one
    proc = subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_the_add_an_exercise_guide_works_in_a_copy_of_the_course(tmp_path):
    check_code, table_row, cells = guide_blocks()
    course = tmp_path / "course"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "autograder", course / "autograder", ignore=skip)
    shutil.copytree(ROOT / "solutions" / CHAPTER, course / "solutions" / CHAPTER)
    shutil.copy(ROOT / "solutions" / "jupytext.toml", course / "solutions")

    # 1. the check, at the end of the chapter's check module, and its name in __all__
    module = course / "autograder" / "checks" / "layer_norm.py"
    module.write_text(module.read_text() + "\n\n" + check_code)
    _replace_once(module, "__all__ = [\n", '__all__ = [\n    "check_mean_square",\n')
    # 2. the table row, after 4.1
    rms = '            Exercise("4.1", "RMSNorm", "rms_norm", 1, 5),\n'
    _replace_once(course / "autograder" / "checks" / "table.py", rms, rms + " " * 12 + table_row)
    # 3. the notebook: setup import, points summary, heading + answer + empty test cell
    py = course / "solutions" / CHAPTER / f"{CHAPTER}.py"
    _replace_once(py, "    check_rms_norm,\n)", "    check_rms_norm,\n    check_mean_square,\n)")
    _replace_once(py, "4.1 (1).", "4.1 (1), 5.1 (1).")
    py.write_text(py.read_text() + "\n" + cells)
    # 4. release: the notebooks get what the table states; the source is only read
    source = py.read_text()
    _run([sys.executable, "-m", "autograder.release", CHAPTER], course)

    assert py.read_text() == source
    solution = nbformat.read(course / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    text = "\n".join(c.source for c in solution.cells)
    assert "### Exercise 5.1 — the mean square  *(1 point, ~5 min)*" in text
    assert "**Points: 10 in total**" in text
    assert '_hidden_check("layer_norm.mean_square", mean_square)' in text
    release = nbformat.read(course / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    points = {nbg(c)["grade_id"]: nbg(c)["points"] for c in release.cells if nbg(c).get("grade")}
    assert points["ex5_1_mean_square"] == 1 and sum(points.values()) == 10
    assert "(x * x).mean(dim=-1)" not in nbformat.writes(release)  # the answer is not released

    # a right and a wrong submission, graded by the copy's course-grade
    answers = {
        nbg(c)["grade_id"]: c.source
        for c in solution.cells
        if nbg(c).get("solution") and not nbg(c).get("grade")
    }
    wrong = dict(answers, ex5_1_solution="def mean_square(x):\n    return (x * x).sum(dim=-1)")
    subs = tmp_path / "submissions"
    for student, ans in (("right", answers), ("wrong", wrong)):
        (subs / student).mkdir(parents=True)
        nbformat.write(_answered(release, ans), subs / student / f"{CHAPTER}.ipynb")
    out = tmp_path / "grades"
    _run(
        [sys.executable, "-m", "autograder.grade", str(subs), "--out", str(out),
         "--workers", "1", "--no-progress",
         # the sandbox mounts this checkout's package, not the copy's (its tests: test_sandbox)
         "--unsandboxed"],
        course,
    )
    rows = {(r["student"], r["exercise"]): r for r in read_csv(out / "grades.csv")}
    for (student, exercise), r in rows.items():
        assert r["status"] == "graded", r
        if (student, exercise) != ("wrong", "ex5_1_mean_square"):
            assert float(r["points"]) == float(r["max_points"]), r
    assert {e for _, e in rows} == set(points)
    assert float(rows["right", "ex5_1_mean_square"]["points"]) == 1
    bad = rows["wrong", "ex5_1_mean_square"]
    assert float(bad["points"]) == 0 and bad["diagnosis"] == "summed instead of averaged", bad
