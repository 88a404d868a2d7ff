"""Issue 47 item 7: the parent never parses a student's notebook (``parent/sent.py``). The cells
are read once, by a limited process of their own, counted before anything else, and only
their types, sources and nbgrader metadata come back: the parent's CPU for a notebook of
300,000 outputs (17 MB; 2 s of the parent's CPU before) is that of a plain one."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import nbformat
import pytest

from autograder.grading.parent import student
from autograder.grading.parent.course import describe
from autograder.grading.parent.rebuild import read_cells
from autograder.grading.parent.sent import NotANotebook, student_cells
from autograder.grading.parent.submissions import MAX_CELLS, IntakeProblem

REPO = Path(__file__).resolve().parents[2]
RELEASE = REPO / "notebooks" / "01_attention" / "01_attention.ipynb"


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sent")
    nb = nbformat.read(RELEASE, as_version=4)
    plain = folder / "plain" / "01_attention.ipynb"
    plain.parent.mkdir()
    nbformat.write(nb, plain)
    loud = copy.deepcopy(nb)
    cell = [c for c in loud.cells if c.cell_type == "code"][-1]
    cell.outputs = [{"output_type": "stream", "name": "stdout", "text": ""}] * 300_000
    big = folder / "big" / "01_attention.ipynb"
    big.parent.mkdir()
    big.write_text(json.dumps(loud))
    return nb, plain, big


def _parent_cpu(f) -> tuple[float, float]:
    """(this process's CPU seconds, its children's) while ``f`` runs."""
    t0 = os.times()
    f()
    t1 = os.times()
    return (t1.user + t1.system - t0.user - t0.system,
            t1.children_user + t1.children_system - t0.children_user - t0.children_system)


def test_the_parents_cpu_does_not_grow_with_the_outputs(notebooks):
    nb, plain, big = notebooks
    note = describe("01_attention", "01_attention", nb, nb)
    assert student.precheck(plain, note)[0] is None  # warm: imports done
    best = {}
    for path in (plain, big):
        runs = [_parent_cpu(lambda p=path: student.precheck(p, note)) for _ in range(3)]
        best[path.parent.name] = min(r[0] for r in runs), min(r[1] for r in runs)
        reason, rebuilt = student.precheck(path, note)
        assert reason is None and not any(c.get("outputs") for c in rebuilt.notebook.cells)
    assert big.stat().st_size > 15 * 2**20
    # the reading process parsed the 17 MB (its CPU), the parent did not
    assert best["big"][1] > best["plain"][1] + 0.1, best
    assert best["big"][0] < best["plain"][0] + 0.05, best


def test_the_cells_read_are_those_the_parent_would_read(notebooks):
    _, plain, big = notebooks
    assert read_cells(big) == read_cells(plain) == student_cells(plain.read_bytes())
    cells = read_cells(big)
    assert all(set(c) == {"cell_type", "source", "metadata"} for c in cells)
    assert all(set(c["metadata"]) <= {"nbgrader"} for c in cells)


@pytest.mark.parametrize("text, problem", [
    ('{"cells": [' + ", ".join(['{"cell_type": "raw", "source": ""}'] * (MAX_CELLS + 1)) + "]}",
     f"01_attention.ipynb has more than {MAX_CELLS} cells"),
    ("[" * 100_000 + "]" * 100_000, "01_attention.ipynb nests deeper than 64 levels"),
    ("not json", "invalid notebook file (not valid JSON)"),
    ('{"cells": {}}', "invalid notebook file (not an object with a list of cells)"),
])
def test_refusals_name_the_file(tmp_path, text, problem):
    p = tmp_path / "01_attention.ipynb"
    p.write_text(text)
    with pytest.raises((IntakeProblem, NotANotebook)) as e:
        read_cells(p)
    assert str(e.value) == problem


def test_a_link_is_never_opened(tmp_path):
    (tmp_path / "01_attention.ipynb").symlink_to("/etc/passwd")
    with pytest.raises(IntakeProblem, match="symbolic link"):
        read_cells(tmp_path / "01_attention.ipynb")
