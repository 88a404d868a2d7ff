"""What went wrong in an exercise that lost points: the ``diagnosis`` of a grades row.

One function, :func:`diagnose`, turns a row's kind and points plus the outputs of its test
cell into a short label: ``""`` at full marks, the name of the catalogued mistake the check
library recognised (``"mask inverted"``, from the check's "Likely mistake: X." line), a
general symptom it recognised in the output (``"transposed output"``, same line), or a
failure kind (``"not implemented"``, ``"raised ValueError"``, ``"wrong shape"``,
``"output differs"``, ``"timeout"``, ...). The class report ranks these; grades.csv shows them.

It reads what the autograded notebook holds, so until the trusted verdict decides it, the
label is only as trustworthy as that notebook's outputs; a verdict module can replace this
function as a whole.
"""

from __future__ import annotations

import functools
import re

from ..status import STOPPED_MEMORY, Kind

_MISTAKE = re.compile(r"Likely mistake: (.+?)\.(?:\s|$)")
_RAISED = re.compile(r"your function raised (\w+)")
_USES = re.compile(r"uses your `([^`]+)` \((Exercise [0-9.]+)\), which fails its check")

# rows without the check's verdict: their kind (``status.Kind``) -> the failure kind
_OF_KIND = {
    Kind.NOT_SUBMITTED: "notebook missing",
    Kind.REFUSED: "invalid notebook",
    Kind.TIMED_OUT: "timeout",
    Kind.GRADER_ERROR: "grader error",
    Kind.COURSE_CELL: "kernel died",
    Kind.NO_GRADE: "not graded",
    Kind.NOT_IN_NOTEBOOK: "earlier release",
}
_STOPPED = {  # the student's code stopped the notebook (records.Seal.stopped's why)
    "ended the kernel": "ended the kernel",
    "flooded its output": "output flood",
    "ran past the cell timeout and could not be interrupted": "could not be interrupted",
    STOPPED_MEMORY: "memory limit",
}
# a whole-run limit that ended the grading process in the student's code (``student.limit_stop``
# writes its kind as data, ``what``: its words hold the limit's size)
_LIMITS = frozenset({"time limit", "memory limit"})


# The failure kinds (generic: what kind of thing went wrong) that diagnose() and the trusted
# verdict (autograder/checks/_judge.py, the chapters' timed stages) write; any other diagnosis
# is the name of a mistake the check library catalogues (a Mistake or an ErrorHint).
FAILURE_KINDS = frozenset(set(_OF_KIND.values()) | set(_STOPPED.values()) | _LIMITS | {
    "no result",
    "not graded", "lost points", "error", "not implemented", "input changed in place",
    "wrong shape", "wrong dtype", "wrong type", "wrong gradient", "not a measurement",
    "output differs", "output missing", "output too large", "used the reference implementation",
    "malformed record",
})
_FAILURE_PREFIXES = ("raised ", "used forbidden built-in ", "uses failing ")


@functools.cache
def symptom_names() -> frozenset[str]:
    """The names of the general symptoms (``autograder/checks/_symptoms.py``): how a wrong
    output relates to the right one ("transposed output", "sign flipped", ...), recognised
    for any exercise. Imported on first use (it imports torch)."""
    from autograder.checks import _symptoms

    return frozenset(v.name for v in vars(_symptoms).values() if isinstance(v, _symptoms.Symptom))


def kind_of(diagnosis: str) -> str:
    """What a diagnosis is: ``"failure kind"`` (what kind of thing went wrong), ``"symptom"``
    (a general symptom of the output, any exercise) or ``"catalogued mistake"`` (a mistake
    of this exercise that the check library names by reproducing it).

    >>> kind_of("wrong shape"), kind_of("transposed output"), kind_of("missing transpose of K")
    ('failure kind', 'symptom', 'catalogued mistake')
    """
    if is_failure_kind(diagnosis):
        return "failure kind"
    return "symptom" if diagnosis in symptom_names() else "catalogued mistake"


def is_failure_kind(diagnosis: str) -> bool:
    """Whether a diagnosis is a failure kind rather than a catalogued mistake's name.

    >>> is_failure_kind("raised ValueError"), is_failure_kind("mask inverted")
    (True, False)
    """
    return diagnosis in FAILURE_KINDS or diagnosis.startswith(_FAILURE_PREFIXES)


def _errors(outputs) -> list[tuple[str, str]]:
    return [
        (str(o.get("ename", "")), str(o.get("evalue", "")))
        for o in outputs or []
        if o.get("output_type") == "error"
    ]


def diagnose(kind: Kind, points: str, max_points: str, outputs=None, why: str = "",
             what: str = "") -> str:
    """The diagnosis of one exercise from its row's kind and points, its test cell's outputs
    and, for a notebook the student's code stopped, what it did: the stop's kind (``what``,
    a whole-run limit's) or the seal's own words for it (``why``, one of its constants).

    >>> diagnose(Kind.GRADED, "0", "2", [{"output_type": "error", "ename": "CheckFailed",
    ...     "evalue": "... fails on ...\\n  Likely mistake: mask inverted. Use ..."}])
    'mask inverted'
    >>> diagnose(Kind.TIMED_OUT, "", "2"), diagnose(Kind.STOPPED, "0", "2", why="ended the kernel")
    ('timeout', 'ended the kernel')
    >>> diagnose(Kind.STOPPED, "0", "2", why="ran past the time limit of 60 s", what="time limit")
    'time limit'
    """
    if kind in _OF_KIND:
        return _OF_KIND[kind]
    if kind is Kind.STOPPED:
        return what if what in _LIMITS else _STOPPED.get(why, "no result")
    try:
        if float(points) >= float(max_points):
            return ""
    except ValueError:
        pass
    errors = _errors(outputs)
    if not errors:
        return "lost points"
    ename, evalue = errors[-1]
    if m := _USES.search(evalue):  # the cascade: an earlier function fails (its mistake follows)
        return f"uses failing {m.group(1)} ({m.group(2)})"
    if m := _MISTAKE.search(evalue):
        return m.group(1).strip()
    if ename in ("NotImplementedYet", "NotImplementedError") or "not implemented yet" in evalue:
        return "not implemented"
    if m := _RAISED.search(evalue):
        return f"raised {m.group(1)}"
    if ename not in ("CheckFailed", "AssertionError"):
        return f"raised {ename}" if ename else "error"
    if "changed its input in place" in evalue:
        return "input changed in place"
    if " has shape " in evalue:
        return "wrong shape"
    if " should be " in evalue and " but is " in evalue or " should be a " in evalue:
        return "wrong type"
    if "gradient" in evalue:
        return "wrong gradient"
    return "output differs"
