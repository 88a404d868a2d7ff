"""Flags instead of refusals for notebooks judged outside the kernel (issue 14, item 3/4).

``flags.flags`` puts what it finds on the exercise it concerns (the tests that grade the
answer cell it is in) and only what cannot be tied to one exercise on every row, saying
``notebook-wide``. The source policy (``sandbox.policy``) refuses no cell: its findings
become flags. Code cells above the locked setup cell run after it.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder.checks import table
from autograder.grading.config import GradeConfig
from autograder.grading.parent import flags as source_flags
from autograder.grading.parent.course import build_template
from autograder.grading.sandbox.policy import Policy, trusted_cells

from helpers.adversarial import AdversarialBuilder
from helpers.synthetic_class import _nbg

EX = table.rows("07_bpe")  # {function: exercise row} of the chapter

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("flags")
    work, info = build_template(REPO / "solutions", ["01_attention", "07_bpe"], root,
                                GradeConfig(cell_timeout=60))
    return work, {a: info[a][0] for a in info}


def _bytes(nb) -> bytes:
    return nbformat.writes(nb).encode()


def _restored(nb, cells):
    """``nb`` as nbgrader's OverwriteCells leaves it before execution: locked and test cells
    hold the course source's text (hidden tests included)."""
    by_id = {c["grade_id"]: c["source"] for c in cells}
    for c in nb.cells:
        if _nbg(c).get("locked") and _nbg(c).get("grade_id") in by_id:
            c.source = by_id[_nbg(c)["grade_id"]]
    return nb


def test_each_cheat_is_flagged_on_its_own_exercise(course, tmp_path):
    _, nbs = course
    nb = nbs["01_attention"]
    builder = AdversarialBuilder(nb)
    builder.build_adversarial(tmp_path / "class", tmp_path / "out", REPO)
    patcher = nbformat.read(tmp_path / "class" / "patcher" / "01_attention.ipynb", as_version=4)
    got = source_flags.flags(_bytes(patcher), nb)
    assert sorted(got) == sorted(g.grade_id for g in nb.grade_cells)  # 8 answers, 8 cheats
    assert not any("notebook-wide" in f for f in got.values()), got
    first, fourth = nb.grade_cells[0].grade_id, nb.grade_cells[3].grade_id
    assert "reaches into the grader: assigns to `np...`" in got[first]
    assert "rebinds `check_self_attention_unscaled`" in got[fourth]
    assert "rebinds" not in got[first]
    # the control: nothing to flag
    assert source_flags.flags(_bytes(builder.answered()), nb) == {}


def test_added_and_above_setup_cells_are_flagged_notebook_wide(course):
    _, nbs = course
    nb = nbs["01_attention"]
    sub = AdversarialBuilder(nb).answered()
    setup = next(i for i, c in enumerate(sub.cells) if _nbg(c).get("grade_id") == "setup")
    sub.cells.insert(setup, new_code_cell("import torch\ntorch.isclose = None"))
    sub.cells.append(new_code_cell("import inspect"))
    got = source_flags.flags(_bytes(sub), nb)
    assert sorted(got) == sorted(g.grade_id for g in nb.grade_cells)
    for f in got.values():
        assert f.startswith("flagged: notebook-wide: a code cell above the setup cell (run "
                            "after it)"), f
        assert "introspection of frames (in a cell the student added)" in f


def test_redefining_a_given_helper_is_neither_refused_nor_flagged(course):
    work, nbs = course
    nb = nbs["07_bpe"]
    sub = AdversarialBuilder(nb).answered(
        lambda gid, src: src + "\n\ndef merge_ids(word, a, b, new):\n    return tuple(word)\n"
        if gid == EX["train_bpe_naive"].solution_id else src)
    assert source_flags.flags(_bytes(sub), nb) == {}
    cells = trusted_cells(work)
    trusted = ([c["source"] for c in cells], [c["grade_id"] for c in cells])
    sub = _restored(sub, cells)
    answer = next(c for c in sub.cells
                  if _nbg(c).get("grade_id") == EX["train_bpe_naive"].solution_id)
    before = answer.source
    Policy(*trusted).on_notebook_start(sub)
    assert answer.source == before  # judged outside the kernel: runs as written


def test_cells_above_setup_run_after_it(course):
    work, nbs = course
    sub = AdversarialBuilder(nbs["01_attention"]).answered()
    patch = new_code_cell("import torch\ntorch.isclose = None")
    sub.cells.insert(0, patch)
    cells = trusted_cells(work)
    sub = _restored(sub, cells)
    Policy([c["source"] for c in cells], [c["grade_id"] for c in cells]).on_notebook_start(sub)
    code = [c for c in sub.cells if c.cell_type == "code"]
    assert _nbg(code[0]).get("grade_id") == "setup" and code[1] is patch
