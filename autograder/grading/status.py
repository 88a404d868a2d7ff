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

>>> row_status(Facts(graded=True, score=2.0))[:3]
('graded', 2.0, '')
>>> status, points, flag, kind = row_status(Facts(stopped={"cell": 4, "why": "ended the kernel"}))
>>> status, points
('graded (no result: your code ended the kernel in cell 5)', 0.0)
>>> row_status(Facts(graded=True, score=1.0, absent="Exercise 2.2")).points
0.0
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

# A notebook whose run stopped keeps the verdicts its test cells recorded before it stopped;
# an exercise without a record scores 0: "graded (no result: your code <why> in cell <n>)"
STOPPED_RECORDED = "graded (from its record; the notebook stopped later)"
STOPPED_NO_RESULT = "graded (no result: your code "
# the words of a stop at the memory limit (the seal's why, ``preprocessors.SealedExecute``; the
# parent's, ``student.limit_why``, adds the limit's size)
STOPPED_MEMORY = "used up the memory limit"
# an exercise of which the file holds no cell: a notebook from an earlier release of its
# chapter (the exercise was added since), or its cells deleted; it scores 0
EARLIER_RELEASE = "graded (not in this notebook: "


class Kind(StrEnum):
    """What a row is, as data: the exports, the report, the gradebook and the summary read
    this, never the status's words (which are for people: :func:`row_status`)."""

    GRADED = "graded"
    TEST_RESTORED = "test restored"  # graded; nbgrader put the test cell back
    ANSWER_MISSING = "answer missing"  # graded; the answer cell was deleted
    NOT_IN_NOTEBOOK = "not in notebook"  # 0: no cell of the exercise (an earlier release)
    FROM_RECORD = "from record"  # the notebook stopped later; scored from its sealed record
    STOPPED = "stopped"  # 0: the student's code stopped the notebook before its record
    NOT_SUBMITTED = "not submitted"  # no file of the notebook's name: nothing to grade
    REFUSED = "refused"  # not graded: the file is unreadable, not a notebook, over a cap
    TIMED_OUT = "timed out"  # not graded: a limit the grader enforced
    GRADER_ERROR = "grader error"  # not graded: the grader itself failed
    COURSE_CELL = "course cell"  # not graded: the kernel stopped before the student's code
    NO_GRADE = "no grade"  # not graded: nbgrader recorded none

    @property
    def graded(self) -> bool:
        """The row has points (a number, 0 included)."""
        return self in _GRADED


_GRADED = {Kind.GRADED, Kind.TEST_RESTORED, Kind.ANSWER_MISSING, Kind.NOT_IN_NOTEBOOK,
           Kind.FROM_RECORD, Kind.STOPPED}


@dataclass(frozen=True)
class Facts:
    """What decides one exercise's row.

    - ``problem``: why the notebook could not be graded, as the grader found it ("" if none),
      and ``problem_kind`` what kind of reason it is (the grader's own: it knows which check
      found it);
    - ``stopped``: ``NotebookResult.stopped`` (``{"cell", "why", "course_cell"}``) or None;
    - ``verdict``: the exercise's trusted verdict, if it has one;
    - ``graded``: nbgrader scored the notebook; ``score``: the gradebook's points for the
      exercise's test cell (None: nbgrader recorded none);
    - ``timed_out``: the exercise's test cell (the course's code) was interrupted at the cell
      timeout; ``student_timed_out``: a cell the student wrote was (their doing: the
      exercise is scored as its test cell ran after the interrupt, and flagged);
    - ``restored``: ``"edited"``, ``"deleted"`` or ``"flags changed"`` when nbgrader restored
      the test cell; ``answer_missing``: the id of a deleted answer cell of the exercise;
    - ``absent``: the exercise's label when the file holds none of its cells (a notebook from
      an earlier release of the chapter: ``rebuild.Rebuilt.absent``).
    """

    problem: str = ""
    problem_kind: Kind = Kind.REFUSED
    stopped: dict | None = None
    verdict: dict | None = None
    graded: bool = False
    score: float | None = None
    timed_out: bool = False
    student_timed_out: bool = False
    restored: str = ""
    answer_missing: str = ""
    absent: str = ""


class RowStatus(NamedTuple):
    """What :func:`row_status` decides: the row's words, points, flag and kind."""

    status: str
    points: float | None
    flag: str
    kind: Kind


def row_status(f: Facts, cell_timeout: float = 0) -> RowStatus:
    """(status, points or None when not graded, flag text or "", kind) of one row.

    >>> row_status(Facts(problem="invalid notebook file (not valid JSON)"))[:3]
    ('not graded: invalid notebook file (not valid JSON)', None, '')
    >>> row_status(Facts(graded=True, score=1.0, timed_out=True), cell_timeout=60).kind
    <Kind.TIMED_OUT: 'timed out'>
    """
    stop = f.stopped if isinstance(f.stopped, dict) else None
    if f.problem and not stop:
        return RowStatus(f"not graded: {f.problem}", None, "", f.problem_kind)
    if f.absent:  # the release's stub stood in for it: nothing of the student's to score
        return RowStatus(f"{EARLIER_RELEASE}{f.absent}; an earlier release of the chapter, or "
                         "its cells deleted)", 0.0, "", Kind.NOT_IN_NOTEBOOK)
    if stop:
        cell = _cell(stop.get("cell"))
        why = str(stop.get("why", "stopped the kernel"))
        if stop.get("course_cell"):
            return RowStatus(f"not graded: the kernel stopped in the course's own cell {cell}, "
                             "before any of the student's code ran", None, "", Kind.COURSE_CELL)
        if f.verdict and f.verdict.get("recorded") is True:
            return RowStatus(STOPPED_RECORDED, float(f.verdict.get("points", 0.0)), "",
                             Kind.FROM_RECORD)
        where = f" in cell {cell}" if cell != "?" else ""
        return RowStatus(f"{STOPPED_NO_RESULT}{why}{where})", 0.0,
                         f"stopped the notebook: your code {why}{where}", Kind.STOPPED)
    if f.timed_out:
        return RowStatus(f"not graded: a cell of this exercise ran over {cell_timeout:g} s",
                         None, "", Kind.TIMED_OUT)
    if not f.graded or f.score is None:
        return RowStatus("not graded: no grade recorded by nbgrader", None, "", Kind.NO_GRADE)
    flag = (f"your code in a cell of this exercise ran over the cell limit of "
            f"{cell_timeout:g} s and was interrupted") if f.student_timed_out else ""
    if f.answer_missing:
        return RowStatus(f"graded (answer cell {f.answer_missing} missing)", f.score, flag,
                         Kind.ANSWER_MISSING)
    if f.restored:
        return RowStatus(f"graded (test cell restored: {f.restored})", f.score, flag,
                         Kind.TEST_RESTORED)
    return RowStatus("graded", f.score, flag, Kind.GRADED)


def row_kind(row: dict) -> Kind:
    """A stored row's kind. Rows written before rows carried one (results of an older
    course-grade in the output folder, kept as the class's ledger) have theirs read once from
    the words this module wrote then; nothing else reads a status's words.

    >>> row_kind({"kind": "not submitted"}), row_kind({"status": "graded (test cell restored: x)"})
    (<Kind.NOT_SUBMITTED: 'not submitted'>, <Kind.TEST_RESTORED: 'test restored'>)
    """
    try:
        return Kind(row.get("kind"))
    except ValueError:
        pass
    status = str(row.get("status", ""))
    if status.startswith("not graded: no ") and status.endswith(".ipynb in the submission"):
        return Kind.NOT_SUBMITTED
    for words, kind in _LEGACY:
        if status.startswith(words):
            return kind
    return Kind.GRADED if status == "graded" else Kind.REFUSED


_LEGACY = [("not graded: no grade recorded", Kind.NO_GRADE),
           ("not graded: grader error", Kind.GRADER_ERROR),
           ("not graded: time limit", Kind.TIMED_OUT),
           ("not graded: a cell of this exercise ran over", Kind.TIMED_OUT),
           ("not graded: the kernel stopped in the course's own cell", Kind.COURSE_CELL),
           (STOPPED_RECORDED, Kind.FROM_RECORD), (STOPPED_NO_RESULT, Kind.STOPPED),
           ("graded (answer cell", Kind.ANSWER_MISSING),
           ("graded (test cell restored", Kind.TEST_RESTORED)]


def _cell(index) -> str:
    """A cell's number as Jupyter users count (from 1)."""
    return str(index + 1) if type(index) is int else "?"
