"""The cap on a submitted notebook's cells (``sent.read``, in the reading process the parent
starts: ``rebuild.read_cells``), counted in the parsed JSON: a key written with escapes
(``"cell\\u005ftype"``, ``"c\\u0065lls"``) is the same key to nbformat, so a count taken in the
bytes let 250,000 cells through (issue 30). The unescaped flood, the size cap and the nesting
cap are in tests/grading/test_intake.py."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

import autograder.grading.parent.submissions as intake
from autograder.grading.parent.course import describe
from autograder.grading.parent.sent import read
from autograder.grading.parent.student import precheck

CELL = '{"cell\\u005ftype": "markdown", "metadata": {}, "source": "a note"}'
TAIL = ', "metadata": {}, "nbformat": 4, "nbformat_minor": 4}'
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHAPE = "invalid notebook file (not an object with a list of cells)"
CAPS = {"bytes": intake.MAX_NOTEBOOK_BYTES, "cells": intake.MAX_CELLS,
        "nesting": intake.MAX_NESTING}
OVER = {"problem": f"the notebook has more than {intake.MAX_CELLS} cells", "kind": "over a cap"}


def _read(p: Path) -> dict:
    return read(p.read_bytes(), CAPS)


def _flood(n: int, cell: str = CELL, key: str = "cells") -> str:
    return '{"' + key + '": [' + ",".join([cell] * n) + "]" + TAIL


def _nbformat_never_reads(monkeypatch):
    def reads(*a, **k):
        raise AssertionError("nbformat read a notebook the cap refuses")

    monkeypatch.setattr(nbformat, "reads", reads)


def test_escaped_cell_type_keys_are_counted(tmp_path, monkeypatch):
    p = tmp_path / "01_attention.ipynb"
    p.write_text(_flood(intake.MAX_CELLS + 1))
    assert b'"cell_type"' not in p.read_bytes()  # what the old count looked for
    _nbformat_never_reads(monkeypatch)
    assert _read(p) == OVER


def test_escaped_cells_key_is_counted(tmp_path):
    p = tmp_path / "nb.ipynb"
    p.write_text(_flood(intake.MAX_CELLS + 1, key="c\\u0065lls"))
    assert len(json.loads(p.read_text())["cells"]) == intake.MAX_CELLS + 1  # nbformat's key
    assert _read(p) == OVER


def test_at_the_cap_escaped_keys_are_read(tmp_path):
    p = tmp_path / "nb.ipynb"
    p.write_text(_flood(intake.MAX_CELLS))
    cells = _read(p)["cells"]
    assert len(cells) == intake.MAX_CELLS and cells[0]["cell_type"] == "markdown"


def test_the_key_outside_cells_is_not_a_cell(tmp_path):
    """A "cell_type" key in metadata is not a cell (the byte count refused this one)."""
    meta = {f"k{i}": {"cell_type": "code"} for i in range(intake.MAX_CELLS + 1)}
    p = tmp_path / "nb.ipynb"
    p.write_text(json.dumps({"cells": [], "metadata": meta, "nbformat": 4,
                             "nbformat_minor": 4}))
    assert _read(p) == {"cells": []}


def test_nbformat_3_cells_are_counted_across_worksheets(tmp_path):
    cell = '{"cell\\u005ftype": "markdown", "metadata": {}, "source": "x"}'
    sheet = '{"cells": [' + ",".join([cell] * (intake.MAX_CELLS // 2 + 1)) + '], "metadata": {}}'
    p = tmp_path / "nb.ipynb"
    p.write_text('{"worksheets": [' + sheet + "," + sheet + '], "metadata": {}, '
                 '"nbformat": 3, "nbformat_minor": 0}')
    assert _read(p) == OVER
    v3 = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(
        cells=[nbformat.v3.new_code_cell(input="x = 1")])])
    p.write_text(nbformat.writes(v3, version=3))  # a small one is still read
    assert [c["source"] for c in _read(p)["cells"]] == ["x = 1"]


@pytest.mark.parametrize("text", [
    "[" + ",".join([CELL] * 3) + "]",  # the cells alone, no notebook around them
    '{"cells": {"0": ' + CELL + "}" + TAIL,
    '{"worksheets": {"0": {"cells": []}}, "metadata": {}, "nbformat": 3, "nbformat_minor": 0}',
    '"a string"',
], ids=["list", "cells-object", "worksheets-object", "string"])
def test_a_top_level_that_is_not_a_notebook_is_refused(tmp_path, monkeypatch, text):
    p = tmp_path / "nb.ipynb"
    p.write_text(text)
    _nbformat_never_reads(monkeypatch)
    assert _read(p) == {"problem": SHAPE, "kind": "not a notebook"}


def test_text_that_is_not_json_is_not_a_notebook(tmp_path):
    p = tmp_path / "nb.ipynb"
    invalid = {"problem": "invalid notebook file (not valid JSON)", "kind": "not a notebook"}
    for text in (_flood(3)[:-5], "\ufeff" + _flood(3)):  # cut short; a byte-order mark
        p.write_text(text)
        assert _read(p) == invalid
    p.write_bytes(b'{"cells": ["\xff"]}')
    assert _read(p) == invalid


def test_precheck_refuses_the_escaped_flood_before_nbformat(tmp_path, monkeypatch):
    fixture = FIXTURES / "solutions" / "99_fixture" / "99_fixture.ipynb"
    src = nbformat.read(fixture, as_version=4)
    nb = describe("99_fixture", "99_fixture", src, src)
    text = nbformat.writes(src)
    # the release notebook, then more cells than the cap, keys escaped
    head, tail = text.split('"cells": [', 1)
    p = tmp_path / "99_fixture.ipynb"
    p.write_text(head + '"cells": [' + ",".join([CELL] * intake.MAX_CELLS) + "," + tail)
    _nbformat_never_reads(monkeypatch)
    assert precheck(p, nb) == (f"99_fixture.ipynb has more than {intake.MAX_CELLS} cells",
                               None)
