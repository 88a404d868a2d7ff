"""Issue 47's notebook-01 files that nbgrader's own pipeline used to turn into "not graded".

Every student but ``another_chapter`` hands in notebook 01 with the solution answers, in a
file the student's editor (or the student) made odd. (Each oddity of ``answer_meta`` alone
made a notebook "not graded"; they share a student to keep the run short, and
tests/slow/test_rebuild_fuzz.py mixes them on 300 files.) The grader grades a notebook rebuilt
from the release (``autograder/grading/parent/rebuild.py``), so each is graded on its answers.
Issue 47 reports ``answer_meta``'s oddities, ``v3_duplicate`` and ``mimebundle`` as "not
graded" on all 8 rows at 77cec29, and ``interleaved``'s kind of notebook as 659 MB under OUT.

=================  ==========================================================  ================
student            the file                                                    expected
=================  ==========================================================  ================
answer_meta        every answer cell carries nbgrader's test flags             full, graded
                   (``"grade": true, "points": 1``), every code cell a stored
                   output nbformat rejects (``{"text/plain": 5}``), every
                   cell an id that is invalid or another cell's
v3_duplicate       saved as nbformat 3, the first test cell duplicated         full, graded
mimebundle         the first answer cell's last value has a                    full, flagged
                   ``_repr_mimebundle_`` returning ``{"text/plain": 5}``:      (the output is
                   nbformat rejects the output while the kernel runs           dropped)
missing_exercise   the cells of Exercise 4.1 (answer and test) deleted         4.1: 0, "not in
                                                                               this notebook";
                                                                               rest full
another_chapter    notebook 02's release under 01's name                       not graded:
                                                                               holds 02_masking
history            a last cell prints every entry of the kernel's input        full, flagged
                   history that holds a hidden check (``In``): none does       (reads the
                   (test cells are not stored there)                           history)
interleaved        50 added cells, each printing 3,000 lines to stdout and     full, graded;
                   stderr in turn (a new output at every switch)               its share of
                                                                               OUT at most
                                                                               5 MB + twice
                                                                               its size
zipped_outputs     a zip (``zipped_outputs.zip``, ~0.2 MB) of the notebook     full, graded;
                   with 300,000 empty outputs in its last code cell (17 MB)    its share of
                   and a 20 MB data file (not a notebook: never unpacked)      OUT at most
                                                                               5 MB + twice
                                                                               its size
=================  ==========================================================  ================
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path

import nbformat

from autograder.checks import table

from .dodge_class import Row
from helpers.synthetic_class import ClassBuilder, _nbg

REPO = Path(__file__).resolve().parents[3]
EX = table.rows("01_attention")
BAD_OUTPUT = {"output_type": "display_data", "data": {"text/plain": 5}, "metadata": {}}
ODD_BUNDLE = '''

class _Odd:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": 5}


_Odd()
'''
DROPPED = "displayed an output that is not a valid notebook output (dropped)"
INTERLEAVED = ("import sys\nfor _i in range(3000):\n    print('o' * 60)\n"
               "    print('e' * 60, file=sys.stderr)\n")
PEEK = ("marks = ['_hidden' + '_check', 'BEGIN ' + 'HIDDEN']  # not in this cell's own text\n"
        "print('HISTORY', [s for s in In if any(m in s for m in marks)])")
OUTPUT_SLACK = 5 * 2**20  # what a submission may leave in OUT, besides twice its own size


class OddFileBuilder(ClassBuilder):
    def build_attacks(self, dest: Path) -> dict[str, dict[str, Row]]:
        """Write the class to ``dest``; return {student: {exercise: Row}}."""
        name = self.nb.name
        full = self.full_marks(Row, "", "")
        expected: dict[str, dict[str, Row]] = {}

        write = self.writer(dest)

        def put(student, nb, rows):
            write(student, nb)
            expected[student] = rows

        meta = json.loads(nbformat.writes(self.answered()))
        for k, cell in enumerate(meta["cells"]):
            if _nbg(cell).get("solution"):
                cell["metadata"]["nbgrader"].update(grade=True, points=1)
            if cell["cell_type"] == "code":
                cell["outputs"] = [BAD_OUTPUT]
            cell["id"] = "same" if k % 2 else "not a valid id!"
        put("answer_meta", json.dumps(meta), dict(full))

        v3 = self.answered()
        first = next(i for i, c in enumerate(v3.cells) if _nbg(c).get("grade"))
        v3.cells.insert(first + 1, copy.deepcopy(v3.cells[first]))
        for cell in v3.cells:
            cell.pop("id", None)
        v3.nbformat_minor = 4
        put("v3_duplicate", json.dumps(nbformat.v3.convert.downgrade(v3)), dict(full))

        bundle = self.answered()
        answer = next(c for c in bundle.cells if _nbg(c).get("solution"))
        answer.source += ODD_BUNDLE
        put("mimebundle", bundle, {g: Row(r.points, r.status, "", DROPPED)
                                   for g, r in full.items()})

        gone = EX["score_variance"]
        missing = self.answered()
        missing.cells = [c for c in missing.cells
                         if _nbg(c).get("grade_id") not in (gone.grade_id, gone.solution_id)]
        rows = dict(full)
        rows[gone.grade_id] = Row(
            "0", "graded (not in this notebook: Exercise 4.1; an earlier release of the "
            "chapter, or its cells deleted)", "earlier release", "")
        put("missing_exercise", missing, rows)

        peek = self.answered()
        peek.cells.append(nbformat.v4.new_code_cell(PEEK))
        put("history", peek, {g: Row(r.points, r.status, "", "reads the kernel's input history")
                              for g, r in full.items()})

        loud = self.answered()
        loud.cells += [nbformat.v4.new_code_cell(INTERLEAVED) for _ in range(50)]
        put("interleaved", loud, dict(full))

        zipped = json.loads(nbformat.writes(self.answered()))
        last = [c for c in zipped["cells"] if c["cell_type"] == "code"][-1]
        last["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ""}] * 300_000
        with zipfile.ZipFile(dest / "zipped_outputs.zip", "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(f"{name}.ipynb", json.dumps(zipped))
            zf.writestr("data.bin", b"\0" * (20 * 2**20))
        expected["zipped_outputs"] = dict(full)

        other = nbformat.read(REPO / "notebooks" / "02_masking" / "02_masking.ipynb", 4)
        put("another_chapter", other,
            {g: Row("", "not graded: this file holds 02_masking, not 01_attention",
                    "invalid notebook", "") for g in full})
        return expected
