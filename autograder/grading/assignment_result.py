"""One assignment's result: what the grading process found, typed, in one file the parent reads.

The grading process (``nbgrader_main``) writes ``.grader/results/<assignment>.json`` once the
assignment is graded (or its run stopped), in the student's course folder, where no kernel can
reach it (the sandbox mounts none of ``.grader/`` but the probe's read-only inputs). It holds
only plain data: the points the gradebook has after the trusted verdict, the verdicts, the test
cells' error names (for the diagnosis), and the grader's own evidence of how the notebook's run
went (``records.Seal``: cells nbclient interrupted at the cell timeout, the cell where the run
stopped and why, records sent where they must not be). Nothing in it was parsed out of text a
student's cell printed. The parent (``student.py``) reads nothing else about the assignment: a
missing or unreadable file is itself evidence (the grading process was killed, or failed).

Example: ``AssignmentResult("01_attention", "ok").write(root)`` then
``AssignmentResult.read(root, "01_attention").autograde == "ok"``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .cells import is_answer, is_locked, is_test, nbg


@dataclass
class NotebookResult:
    """One notebook of the assignment (plain data); keyed by test grade_id."""

    graded: bool = False  # nbgrader's autograde finished and scored it
    scores: dict[str, float] = field(default_factory=dict)  # as the gradebook holds them
    # the trusted verdicts (``verdict.decide``; after a stop ``verdict.judge_records``)
    verdicts: dict[str, dict] = field(default_factory=dict)
    # [[ename, evalue], ...] of a test cell's errors: a diagnosis, never a status
    errors: dict[str, list] = field(default_factory=dict)
    timeouts: list[str] = field(default_factory=list)  # its test cell hit the cell timeout
    student_timeouts: list[str] = field(default_factory=list)  # a cell the student wrote did
    stopped: dict | None = None  # {"cell", "why", "course_cell"}: where the run stopped
    tampered: list[dict] = field(default_factory=list)  # ``records.Seal``'s


@dataclass
class AssignmentResult:
    """``autograde``: ``"ok"`` or ``"failed"``; ``error``: the grader's own error (nbgrader's,
    or this package's), "" when none; ``notebooks``: {notebook name: :class:`NotebookResult`}."""

    assignment: str
    autograde: str = "failed"
    error: str = ""
    notebooks: dict[str, NotebookResult] = field(default_factory=dict)

    def write(self, root: Path) -> Path:
        path = result_path(root, self.assignment)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(path)
        return path

    @classmethod
    def read(cls, root: Path, assignment: str) -> AssignmentResult | None:
        """The result the grading process wrote, or None (none written, or not readable)."""
        try:
            data = json.loads(result_path(root, assignment).read_text())
            notebooks = {name: NotebookResult(**nb) for name, nb in data.pop("notebooks").items()}
            return cls(**data, notebooks=notebooks)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None


def timeouts_of(cells: list, indices) -> tuple[list[str], list[str]]:
    """(the exercises whose course cell, and those whose student-written cell, was interrupted
    at the cell timeout), from the seal's cell indexes: a test or locked cell is the course's;
    an answer cell or a cell the student added is the student's.

    >>> T, A = {"grade": True, "locked": True}, {"solution": True}
    >>> def c(meta, gid=None):
    ...     return {"cell_type": "code", "metadata": {"nbgrader": {**meta, "grade_id": gid}}}
    >>> nb = [c(A), c(T, "t1"), c(A), c({}), c(T, "t2")]
    >>> timeouts_of(nb, [1, 3]), timeouts_of(nb, [0, 99, "x"])
    ((['t1'], ['t2']), ([], ['t1']))
    """
    over = [i for i in indices if type(i) is int and 0 <= i < len(cells)]
    course = [i for i in over if is_locked(cells[i])]
    return exercises_of(cells, course), exercises_of(cells, [i for i in over if i not in course])


def result_path(root: Path, assignment: str) -> Path:
    return Path(root) / ".grader" / "results" / f"{assignment}.json"


def exercises_of(cells: list, indices) -> list[str]:
    """The test grade_ids of the exercises the cells at ``indices`` belong to: a cell belongs
    to the exercise of the next test cells (an exercise ends after its test cells, when the
    next answer cell comes).

    >>> def c(kind, gid=None):
    ...     meta = {"grade": True} if kind == "test" else {"solution": True} if kind == "ans" \\
    ...         else {}
    ...     return {"cell_type": "code", "metadata": {"nbgrader": {**meta, "grade_id": gid}}}
    >>> nb = [c("ans"), c("test", "t1"), c("test", "t1b"), c("ans"), c(""), c("test", "t2")]
    >>> exercises_of(nb, [0]), exercises_of(nb, [4]), exercises_of(nb, [])
    (['t1', 't1b'], ['t2'], [])
    """
    wanted = set(indices)
    found, current, after_test = [], False, False
    for i, cell in enumerate(cells):
        if is_answer(cell) and after_test:
            current, after_test = False, False  # a new exercise starts
        current = current or i in wanted
        if is_test(cell):
            after_test = True
            if current:
                found.append(nbg(cell)["grade_id"])
    return found
