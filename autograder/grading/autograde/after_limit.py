"""``python -m autograder.grading.autograde.after_limit STOPS``: the result of assignments whose
grading process a whole-run limit killed while the student's own code ran.

The student's time limit (``--timeout``) ends the grading process, and with it nbgrader's
autograde, so no result file is written. The records the kernel's test cells sealed before
that are on disk (``records.py``: each final when its cell ended). The parent
(``parent/student.py``) finds from the seal's evidence that the limit came while a cell the
student wrote was running (:func:`~autograder.grading.parent.student.limit_stop`) and runs this
in the student's course folder, under the runner's limits: each such notebook's test cells
are judged from their records (``verdict.judge_records``, as after a kernel that died), and
the assignment's result (``assignment_result.py``) says where and why the run stopped. The
rows then score each exercise from its record and 0 where there is none, flagged
(``status.row_status``), instead of "not graded".

``STOPS`` is JSON: ``{assignment: {notebook: {"cell", "why", "course_cell"}}}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def write_results(root: Path, stops: dict[str, dict[str, dict]]) -> None:
    """One result file per assignment of ``stops``, with a :class:`NotebookResult` for each of
    its notebooks named there (its verdicts from the sealed records, its stop, the records
    sent where they must not be)."""
    from ..assignment_result import AssignmentResult, NotebookResult
    from .records import read_evidence
    from .verdict import judge_records

    for assignment, notebooks in stops.items():
        verdicts = judge_records(root, assignment)
        out = AssignmentResult(assignment, error="the student's time limit ended the run")
        for name, stop in notebooks.items():
            evidence = read_evidence(root, assignment, name)
            out.notebooks[name] = NotebookResult(
                verdicts=verdicts.get(name, {}), stopped=stop,
                tampered=list(evidence.get("tampered", [])))
        out.write(root)


if __name__ == "__main__":
    write_results(Path.cwd(), json.loads(sys.argv[1]))
