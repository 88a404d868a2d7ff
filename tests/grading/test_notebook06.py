"""Notebook 06 (the full Transformer) through the real grading path, once per session.

Solution, release and one catalogued mistake are graded in one ``course-grade`` run (see
``helpers.chapters.graded_chapter_04``; the tests: ``GradedWithChapter04``'s); the committed
release must equal a fresh generation (tests/unit/test_release.py). The reversal training
cell (section 5) is a demonstration cell: grading does not run it, and the solution as
``course-check`` runs it must reach 99% exact match.
"""

from __future__ import annotations

import pytest

from helpers.chapters import (
    CourseCellsQuiet,
    GradedWithChapter04,
    executed_chapter,
)

ASSIGNMENT = "06_transformer"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    return executed_chapter(tmp_path_factory, ASSIGNMENT)


def test_training_cell_reaches_99_percent_in_the_executed_solution(executed):
    cells = [c for c in executed.cells
             if c.cell_type == "code" and "reversal_batch(128)" in c.source]
    assert len(cells) == 1
    text = "".join(o.get("text", "") for o in cells[0].outputs)
    last = [ln for ln in text.splitlines() if "exact match" in ln][-1]
    assert float(last.rsplit(" ", 1)[1].rstrip("%")) >= 99.0, text
    assert "trained in" in text


class TestChapter06(GradedWithChapter04, CourseCellsQuiet):
    ASSIGNMENT = ASSIGNMENT
    ADDED = "2.2"  # the chapter as released before Exercise 2.2 was added (issue 47)
    CHECKS = "transformer"
