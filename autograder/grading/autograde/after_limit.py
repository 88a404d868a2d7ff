"""``python -m autograder.grading.autograde.after_limit STUDENT STOPS``: the result and the
feedback page of assignments whose grading process a whole-run limit ended while the student's
own code ran.

Two limits end the grading process itself, and with it nbgrader's autograde, so no result file
is written: the student's time limit (``--timeout``: the runner kills the process) and the
memory limit, when it kills the process (the kernel's OOM killer, where a cgroup's memory limit
holds the job: ``parent/isolation.py``; a ``MemoryError`` the grading process can still
handle is a stop it writes down itself: ``preprocessors.SealedExecute``). The records the
kernel's test cells sealed before that are on disk (``records.py``: each final when its cell
ended). The parent (``parent/student.py``) finds from the seal's evidence that the limit came
while a cell the student wrote was running
(:func:`~autograder.grading.parent.student.limit_stop`) and runs this in the student's course
folder, under the runner's limits:

- each such notebook's test cells are judged from their records (``verdict.judge_records``, as
  after a kernel that died), and the assignment's result (``assignment_result.py``) says where
  and why the run stopped. The rows then score each exercise from its record and 0 where there
  is none, flagged (``status.row_status``), instead of "not graded";
- the notebook gets its feedback page and formgrader submission, as one that ended its own
  kernel (``stopped.py``): the student's notebook as submitted (what ran; its outputs died
  with the process), a note on the cell that was running when the limit hit, the scores from
  the records (:func:`pages`). A page that cannot be made leaves the rows as they are.

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
        out = AssignmentResult(assignment, error="a whole-run limit ended the grading process")
        for name, stop in notebooks.items():
            evidence = read_evidence(root, assignment, name)
            out.notebooks[name] = NotebookResult(
                verdicts=verdicts.get(name, {}), stopped=stop,
                tampered=list(evidence.get("tampered", [])))
        out.write(root)


def pages(root: Path, student: str, stops: dict[str, dict[str, dict]]) -> None:
    """The feedback page of each stopped notebook (after :func:`write_results`): the notebook
    the student's code ran (``submitted/``) kept as the run stopped (``stopped.keep``: the
    note on the running cell), published with its scores (``stopped.autograde``), rendered by
    nbgrader's ``generate_feedback`` as any page (hidden tests removed, outputs sanitised)."""
    import nbformat

    from . import stopped

    published = []
    for assignment, notebooks in stops.items():
        for name, stop in notebooks.items():
            path = root / "submitted" / student / assignment / f"{name}.ipynb"
            index = stop.get("cell")
            try:
                nb = nbformat.read(path, as_version=4)
                source = nb.cells[index].source
            except (OSError, ValueError, IndexError, TypeError, AttributeError):
                continue
            meta = {"nbgrader": {"assignment": assignment, "notebook": name}}
            stopped.keep(nb, meta, index, source, str(stop.get("why", "stopped")))
        if stopped.autograde(root, student, assignment):
            published.append(assignment)
    if not published:
        return
    from nbgrader.apps.baseapp import NbGrader

    from ..nbgrader_patches import use_cached_head
    from .nbgrader_main import _Feedback

    use_cached_head()
    app = NbGrader()
    app.initialize([])
    feedback = _Feedback(app.config)
    for assignment in published:
        feedback.submit(student, assignment)
    feedback.wait()


def main(argv: list[str]) -> None:
    student, stops = argv[0], json.loads(argv[1])
    root = Path.cwd()
    write_results(root, stops)  # the grade first: the page is only a view of it
    pages(root, student, stops)
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
