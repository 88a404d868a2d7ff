"""A two-notebook assignment of which one notebook ends its kernel (issue 48, item 6): the
other notebook is graded and gets its feedback page all the same.

nbgrader's autograde stops at the first notebook whose kernel dies and removes what it had
autograded of the assignment; course-grade autogrades a multi-notebook assignment one
notebook at a time (``nbgrader_main._autograde``), so ada, whose first notebook ends its
kernel, still has her second graded, and bob, whose second one does, keeps his first's page.
One course-grade run, two students (Canvas file names).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import nbformat

from autograder.grading.status import STOPPED_NO_RESULT, STOPPED_RECORDED

from helpers.synthetic_class import EXIT, ClassBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, read_csv
from helpers.synthetic_class.shared import template as shared_template

SOURCE = REPO / "tests" / "fixtures" / "solutions"
FIXTURE = "99_fixture"
PAIR, FIRST, SECOND = "98_pair", "98_first", "98_second"


def test_a_notebook_that_ends_its_kernel_costs_the_other_notebook_nothing(tmp_path):
    from autograder.grading.sandbox import bwrap_path

    _, info = shared_template(SOURCE, [FIXTURE], 10)
    builder = ClassBuilder(info[FIXTURE][0])  # both notebooks are copies of the fixture's
    source = tmp_path / "source"
    for name in (FIRST, SECOND):
        (source / PAIR).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOURCE / FIXTURE / f"{FIXTURE}.ipynb", source / PAIR / f"{name}.ipynb")
    ends = builder.answered(lambda gid, src: EXIT + src if gid == builder.last else src)
    students = {"lovelaceada_1001": {FIRST: ends, SECOND: builder.answered()},
                "babbagecharles_1002": {FIRST: builder.answered(), SECOND: ends}}
    (tmp_path / "class").mkdir()
    for n, (sid, notebooks) in enumerate(students.items()):
        for name, nb in notebooks.items():
            nbformat.write(nb, tmp_path / "class" / f"{sid}_{5000 + n}_{name}.ipynb")
    sandbox = () if bwrap_path() else ("--unsandboxed",)
    out = tmp_path / "out"
    proc = subprocess.run(
        grade_cmd(tmp_path / "class", out, source, "--workers", "1", "--cell-timeout", "10",
                  "--timeout", "300", *sandbox), cwd=REPO, capture_output=True, text=True,
        timeout=900)
    assert proc.returncode == 0, proc.stderr
    rows = read_csv(out / "grades.csv")
    full = {g.grade_id: f"{g.max_points:g}" for g in builder.nb.grade_cells}
    for sid, notebooks in students.items():
        stopped = next(name for name, nb in notebooks.items() if nb is ends)
        clean = next(name for name in notebooks if name != stopped)
        mine = {(r["notebook"], r["exercise"]): r for r in rows if r["student"] == sid}
        # the clean notebook: graded as if alone
        assert {ex: (mine[(clean, ex)]["points"], mine[(clean, ex)]["kind"])
                for ex in full} == {ex: (p, "graded") for ex, p in full.items()}, (sid, mine)
        # the one that ended its kernel: its exercises from their records, or 0, said so
        said = [mine[(stopped, ex)]["status"] for ex in full]
        assert all(s.startswith(f"{STOPPED_NO_RESULT}ended the kernel in cell") or
                   s == STOPPED_RECORDED for s in said), said
        assert mine[(stopped, builder.grade_ids[-1])]["points"] == "0"
        # both pages, in the result and in return/
        result = json.loads((out / "results" / f"{sid}.json").read_text())
        assert sorted(result["feedback"]) == [f"feedback/{sid}/{PAIR}/{FIRST}.html",
                                              f"feedback/{sid}/{PAIR}/{SECOND}.html"], result
        page = (out / "feedback" / sid / PAIR / f"{clean}.html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))
        assert "ended the kernel" not in text
        total = sum(float(p) for p in full.values())
        assert f"Score: {total:.1f} / {total:.1f}" in text, text[:500]
        stop_page = html.unescape(re.sub(r"<[^>]+>", "", (
            out / "feedback" / sid / PAIR / f"{stopped}.html").read_text()))
        assert "This notebook stopped." in stop_page
