"""The graded notebook is rebuilt from the release (``parent/rebuild.py``, issue 47 item 2).

What is not a notebook of this chapter, and where a deleted cell goes back. The fuzz test of
the rebuild is tests/slow/test_rebuild_fuzz.py; files graded end to end,
tests/grading/test_odd_files.py.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from autograder.checks import table
from autograder.grading.cells import grade_id, nbg
from autograder.grading.parent.rebuild import NotANotebook, rebuild

from helpers.rebuild01 import ANSWERS, MASK, OTHERS, RELEASE


@pytest.mark.parametrize("text, why", [
    (b"\xff\xfe", "invalid notebook file (not valid JSON)"),
    (b"[1, 2]", "invalid notebook file (not an object with a list of cells)"),
    (b'{"cells": {}}', "invalid notebook file (not an object with a list of cells)"),
    (b'{"cells": []}', "this file is not 01_attention (none of its graded cells)"),
    (json.dumps({"cells": [{"cell_type": "code", "source": "", "metadata": {"nbgrader": {
        "grade_id": MASK, "grade": True}}}]}).encode(),
     "this file holds 02_masking, not 01_attention"),
])
def test_what_is_not_this_notebook(text, why):
    with pytest.raises(NotANotebook) as e:
        rebuild(text, RELEASE, ANSWERS, "01_attention", OTHERS)
    assert str(e.value) == why


def test_a_student_cell_keeps_its_place_and_a_deleted_test_goes_before_the_next_exercise():
    doc = json.loads(nbformat.writes(RELEASE))
    first_test = next(i for i, c in enumerate(doc["cells"]) if nbg(c).get("grade"))
    gid = grade_id(doc["cells"][first_test])
    helper = {"cell_type": "code", "source": "def helper(): pass", "metadata": {},
              "outputs": [], "execution_count": None}
    doc["cells"][first_test] = helper  # the test deleted, a cell of the student's in its place
    got = rebuild(json.dumps(doc).encode(), RELEASE, ANSWERS, "01_attention", OTHERS)
    cells = got.notebook.cells
    at = [c.source for c in cells].index("def helper(): pass")
    test = [grade_id(c) for c in cells].index(gid)
    # after the student's cell and the plain cells that followed it, just before the next
    # exercise's answer cell
    assert at < test and grade_id(cells[test + 1]) == table.rows("01_attention")[
        "softmax"].solution_id
    assert not any(nbg(c) for c in cells[at:test])
    assert got.restored == {gid: "deleted"} and got.missing == [] and got.absent == []
