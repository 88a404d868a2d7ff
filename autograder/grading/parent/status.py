"""Where a grades row's status comes from: one pure function of the grader's own evidence.

:func:`row_status` turns :class:`Facts` (plain data, gathered by ``student.py`` from the
assignment's result file, ``assignment_result.py``, and the parent's own checks) into the row's
status, points and flag. Every status string of a row is written here.

The rules:

- ``not graded: <reason>`` only from evidence the grader produced itself: the notebook is
  missing, unreadable or over a cap (intake and ``precheck``); the grader failed (its own
  exception, nbgrader's failure, a result it could not read); a limit it enforced (its time
  limit for the student, a cell nbclient interrupted at the cell timeout); or the kernel
  stopped in a cell of the course before any of the student's code ran.
- When the student's code ended, flooded or wedged its own kernel (nbclient saw the kernel
  gone, the output still coming past its wait, or a cell it could not interrupt), the
  exercises judged from the records their test cells sealed before that keep those
  verdicts; the others score 0, say why, and are flagged.
- Text a student's cell printed or raised never sets a status: a ``MemoryError`` or
  ``No space left on device`` the student's code raises is an exception like any other (the
  exercise's verdict), not a limit.
- Otherwise the row is ``graded``, with nbgrader's score (the trusted verdict's, for a cell
  judged outside the kernel); ``graded (test cell restored: ...)`` when nbgrader put the test
  cell back; ``graded (answer cell X missing)`` when the student deleted the answer cell (the
  test still ran: what the function does elsewhere in the notebook is graded).

>>> row_status(Facts(graded=True, score=2.0))
('graded', 2.0, '')
>>> status, points, flag = row_status(Facts(stopped={"cell": 4, "why": "ended the kernel"}))
>>> status, points
('graded (no result: your code ended the kernel in cell 5)', 0.0)
>>> row_status(Facts(graded=True, score=1.0, absent="Exercise 2.2"))[0]
'graded (not in this notebook: Exercise 2.2; an earlier release of the chapter, or its cells deleted)'
"""

from __future__ import annotations

from dataclasses import dataclass

# A notebook whose run stopped keeps the verdicts its test cells recorded before it stopped;
# an exercise without a record scores 0: "graded (no result: your code <why> in cell <n>)"
STOPPED_RECORDED = "graded (from its record; the notebook stopped later)"
STOPPED_NO_RESULT = "graded (no result: your code "
# an exercise of which the file holds no cell: a notebook from an earlier release of its
# chapter (the exercise was added since), or its cells deleted; it scores 0
EARLIER_RELEASE = "graded (not in this notebook: "


@dataclass(frozen=True)
class Facts:
    """What decides one exercise's row.

    - ``problem``: why the notebook could not be graded, as the grader found it ("" if none);
    - ``stopped``: ``NotebookResult.stopped`` (``{"cell", "why", "course_cell"}``) or None;
    - ``verdict``: the exercise's trusted verdict, if it has one;
    - ``graded``: nbgrader scored the notebook; ``score``: the gradebook's points for the
      exercise's test cell (None: nbgrader recorded none);
    - ``timed_out``: a cell of this exercise was interrupted at the cell timeout;
    - ``restored``: ``"edited"``, ``"deleted"`` or ``"flags changed"`` when nbgrader restored
      the test cell; ``answer_missing``: the id of a deleted answer cell of the exercise;
    - ``absent``: the exercise's label when the file holds none of its cells (a notebook from
      an earlier release of the chapter: ``rebuild.Rebuilt.absent``).
    """

    problem: str = ""
    stopped: dict | None = None
    verdict: dict | None = None
    graded: bool = False
    score: float | None = None
    timed_out: bool = False
    restored: str = ""
    answer_missing: str = ""
    absent: str = ""


def row_status(f: Facts, cell_timeout: float = 0) -> tuple[str, float | None, str]:
    """(status, points or None when not graded, flag text or "") of one row.

    >>> row_status(Facts(problem="invalid notebook file (not valid JSON)"))
    ('not graded: invalid notebook file (not valid JSON)', None, '')
    >>> row_status(Facts(graded=True, score=1.0, timed_out=True), cell_timeout=60)
    ('not graded: a cell of this exercise ran over 60 s', None, '')
    """
    stop = f.stopped if isinstance(f.stopped, dict) else None
    if f.problem and not stop:
        return f"not graded: {f.problem}", None, ""
    if f.absent:  # the release's stub stood in for it: nothing of the student's to score
        return (f"{EARLIER_RELEASE}{f.absent}; an earlier release of the chapter, or its "
                "cells deleted)", 0.0, "")
    if stop:
        cell = _cell(stop.get("cell"))
        why = str(stop.get("why", "stopped the kernel"))
        if stop.get("course_cell"):
            return (f"not graded: the kernel stopped in the course's own cell {cell}, before "
                    "any of the student's code ran", None, "")
        if f.verdict and f.verdict.get("recorded") is True:
            return STOPPED_RECORDED, float(f.verdict.get("points", 0.0)), ""
        return (f"{STOPPED_NO_RESULT}{why} in cell {cell})", 0.0,
                f"stopped the notebook: your code {why} in cell {cell}")
    if f.timed_out:
        return f"not graded: a cell of this exercise ran over {cell_timeout:g} s", None, ""
    if not f.graded or f.score is None:
        return "not graded: no grade recorded by nbgrader", None, ""
    if f.answer_missing:
        return f"graded (answer cell {f.answer_missing} missing)", f.score, ""
    if f.restored:
        return f"graded (test cell restored: {f.restored})", f.score, ""
    return "graded", f.score, ""


def not_submitted(status: str) -> bool:
    """The row's notebook was never handed in: intake found no file of its name
    (``submissions.find_notebook``). Nothing to grade, so not a 0 and nothing to grade by hand
    either; a notebook handed in but not graded (unreadable, a grader error) is not this.

    >>> not_submitted("not graded: no 01_attention.ipynb in the submission")
    True
    >>> not_submitted("not graded: grader error (boom)"), not_submitted("graded")
    (False, False)
    """
    return status.startswith("not graded: no ") and status.endswith(".ipynb in the submission")


def _cell(index) -> str:
    """A cell's number as Jupyter users count (from 1)."""
    return str(index + 1) if type(index) is int else "?"
