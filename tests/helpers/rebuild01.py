"""Notebook 01 as the rebuild's tests use it (tests/unit/test_rebuild.py and
tests/slow/test_rebuild_fuzz.py): the release, the solution, the release's graded cells,
each test's answer cells, and a test id of another chapter."""

from __future__ import annotations

import nbformat

from autograder.checks import table
from autograder.grading.cells import grade_id, nbg
from autograder.grading.parent.course import describe

from .chapters import REPO

RELEASE = nbformat.read(REPO / "notebooks" / "01_attention" / "01_attention.ipynb", 4)
SOLVED = nbformat.read(REPO / "solutions" / "01_attention" / "01_attention.ipynb", 4)
GRADED = [c for c in RELEASE.cells if nbg(c)]
IDS = [grade_id(c) for c in GRADED]
ANSWERS = {g.grade_id: g.solution_ids
           for g in describe("01_attention", "01_attention", SOLVED, RELEASE).grade_cells}
MASK = table.rows("02_masking")["causal_mask"].grade_id  # a test of another chapter
OTHERS = {"02_masking": {MASK}}
