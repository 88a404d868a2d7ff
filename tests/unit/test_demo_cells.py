"""Demonstration cells (``autograder/grading/autograde/demo.py``): tagged ``demo`` in the
chapters, they define nothing a later cell uses (a static check over every chapter), and
grading replaces them with a no-op before the kernel runs (``SkipDemoCells``), unless the
student edited them.

The graded chapters' tests (``test_notebook0N``) check the same on real graded copies.
"""

from __future__ import annotations

import copy

import nbformat
import pytest

from autograder import release
from autograder.checks import table
from autograder.grading.autograde.demo import NOT_RUN, SkipDemoCells, demo_problems, is_demo

EX = table.rows("08_training")  # {function: exercise row} of the chapter

CHAPTERS = sorted(p.name for p in release.SOURCE.iterdir() if (p / f"{p.name}.py").exists())


def _book(base, name):
    return nbformat.read(base / name / f"{name}.ipynb", as_version=4)


@pytest.mark.parametrize("name", CHAPTERS)
def test_demo_cells_define_nothing_a_later_cell_uses(name):
    src = _book(release.SOURCE, name)
    demos = [c for c in src.cells if is_demo(c)]
    assert demos, name
    assert demo_problems(src.cells) == []
    # the student release carries the same demonstration cells, tag and source
    rel = _book(release.RELEASE, name)
    assert [c.source for c in rel.cells if is_demo(c)] == [c.source for c in demos]


def test_the_static_check_rejects_a_demo_cell_whose_names_a_later_cell_uses():
    src = _book(release.SOURCE, "08_training")
    cells = copy.deepcopy(src.cells)
    answer = next(c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id")
                  == EX["get_batch"].solution_id)  # defines get_batch, which its test cell uses
    answer.metadata["tags"] = ["demo"]
    problems = demo_problems(cells)
    assert any("is an nbgrader cell" in p for p in problems), problems
    assert any("binds 'get_batch'" in p for p in problems), problems
    # a plain cell that binds a name a later test uses, and one changing it in place
    cells = [nbformat.v4.new_code_cell("data = load()", metadata={"tags": ["demo"]}),
             nbformat.v4.new_code_cell("cfg.device = 'cpu'", metadata={"tags": ["demo"]}),
             nbformat.v4.new_code_cell("def f(x):\n    return x + 1"),
             nbformat.v4.new_code_cell("check(f, data, cfg)")]
    assert demo_problems(cells) == ["cell 0 (demo) binds 'data', which cell 3 uses",
                                    "cell 1 (demo) binds 'cfg', which cell 3 uses"]
    # a later cell that binds the name itself before reading it does not use the demo's
    cells[3].source = "data = 2\ncfg = {}\ncheck(f, data, cfg)"
    assert demo_problems(cells) == []


def test_grading_replaces_unedited_demo_cells_with_a_no_op(tmp_path):
    name = "01_attention"
    (tmp_path / name).mkdir()
    nbformat.write(_book(release.SOURCE, name), tmp_path / name / f"{name}.ipynb")
    submitted = _book(release.RELEASE, name)
    for c in submitted.cells:
        c.metadata.pop("tags", None)  # the submission's tags decide nothing
    before = copy.deepcopy(submitted)
    code = [i for i, c in enumerate(before.cells) if c.cell_type == "code"]
    demos = [i for i in code if is_demo(_book(release.RELEASE, name).cells[i])]
    edited = demos[0]
    submitted.cells[edited].source += "\nprint('mine')"  # a demo the student changed runs
    pp = SkipDemoCells(source_root=str(tmp_path))
    nb, _ = pp.preprocess(submitted, {"nbgrader": {"assignment": name, "notebook": name}})
    skipped = [i for i in code if nb.cells[i].source == NOT_RUN]
    assert skipped == [i for i in demos if i != edited] and len(skipped) >= 5
    for i in code:
        if i not in skipped:
            assert nb.cells[i].source == (submitted.cells[i].source), i
    # another notebook's name, or no course copy: nothing is skipped
    other = copy.deepcopy(before)
    pp.preprocess(other, {"nbgrader": {"assignment": name, "notebook": "other"}})
    assert other == before
