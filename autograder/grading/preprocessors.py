"""nbgrader preprocessors the grading course adds (registered in ``course.write_config``).

- :class:`StderrIsNotFailure` (autograde, right after execution): nbgrader 0.9.6 gives a test
  cell 0 points when it wrote *anything* to stderr (``utils.determine_grade``), so a correct
  answer whose library prints a warning (PyTorch does) would lose its points. Stderr text of
  test cells becomes ordinary output: still shown in the feedback, no longer a failure. Errors
  (exceptions, failed asserts) still are.
- :class:`HideHiddenTests` (feedback): nbgrader 0.9.6's ``generate_feedback`` renders the
  autograded notebook, whose test cells were restored from the source *with* their hidden
  tests. It removes the hidden region from every test cell, and in a cell that had one keeps
  only the error's name and message: an IPython traceback quotes the failing line, which may be
  a hidden test.
"""

from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor


class StderrIsNotFailure(NbGraderPreprocessor):
    """Turn stderr stream outputs of test cells into stdout (only errors cost points)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if utils.is_grade(cell) and cell.cell_type == "code":
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out["name"] = "stdout"
        return cell, resources


class HideHiddenTests(ClearHiddenTests):
    """Remove hidden-test source and hidden-test tracebacks from test cells (feedback only)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not utils.is_grade(cell):
            return cell, resources  # students' own cells are shown as they wrote them
        try:
            removed = self._remove_hidden_test_region(cell)
        except RuntimeError:  # an unbalanced marker: show nothing of this cell's source
            cell.source = "# (test source not shown)"
            removed = True
        if removed:
            cell.source = cell.source.rstrip("\n") + "\n# (hidden tests not shown)"
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        return cell, resources
