"""What is kept of a notebook whose run stopped, for its feedback page (issue 48 item 6):
``autograde.stopped.keep``, as the grading process calls it where the kernel died. The whole
path (the page, formgrader's submission) runs in tests/grading/test_grade_class.py (os_exit).
"""

from __future__ import annotations

import nbformat

from autograder.grading.autograde.preprocessors import LimitOutputSize
from autograder.grading.autograde.stopped import ENDED, keep, note, partial_path


def _ran() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    first = nbformat.v4.new_code_cell("x = 1\nprint(x)", execution_count=1)
    first.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                            text="1\n" + "y" * 100_000)]
    nb.cells = [first,
                nbformat.v4.new_code_cell("SEALED: the kernel's text, with its seal"),
                nbformat.v4.new_code_cell("never ran")]
    return nb


def test_keep_writes_what_ran_with_the_cells_own_source_and_a_note(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nb = _ran()
    resources = {"nbgrader": {"assignment": "01_attention", "notebook": "01_attention"}}
    path = keep(nb, resources, 1, "import os\nos._exit(1)", "ended the kernel",
                cut=(LimitOutputSize(),))
    assert path == partial_path(tmp_path, "01_attention", "01_attention")
    kept = nbformat.read(path, as_version=4)
    assert [c.source for c in kept.cells] == ["x = 1\nprint(x)", "import os\nos._exit(1)",
                                              "never ran"]  # never the sealed text
    assert kept.cells[0].outputs[0].text.startswith("1\n")
    assert len(kept.cells[0].outputs[0].text) < LimitOutputSize.max_chars + 200  # cut
    [error] = kept.cells[1].outputs
    assert (error.output_type, error.ename) == ("error", ENDED)
    assert error.evalue == note(1, "ended the kernel")
    assert error.evalue.startswith("Your code ended the kernel in cell 2: no cell after it ran")
    assert not kept.cells[2].get("outputs")
    assert nb.cells[1].source.startswith("SEALED") and not nb.cells[1].get("outputs")


def test_keep_without_the_notebooks_name_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert keep(_ran(), {}, 1, "x", "ended the kernel") is None
    assert not any(tmp_path.iterdir())
