"""Gradebook exports an LMS imports: one total per student per assignment.

Written next to grades.csv, per assignment (``ASSIGNMENT`` = a folder of ``solutions/``):

- ``OUT_DIR/exports/ASSIGNMENT.canvas.csv``: Canvas's gradebook import format, columns
  ``Student, ID, SIS User ID, SIS Login ID, Section, ASSIGNMENT``. Canvas matches a row to a
  student by ``ID`` (the Canvas user id, the ``<userid>`` of its "download submissions" file
  names, kept as the submission's ``lms_id``); ``SIS User ID``, ``SIS Login ID`` and
  ``Section`` are the roster's (``course-grade --roster``, grades.csv's ``sis_id``), else
  empty (Canvas then uses ``ID``). The last column is the score; rename its
  header to the Canvas assignment's (``Name (id)``) if it was created under another name.
- ``OUT_DIR/exports/ASSIGNMENT.moodle.csv``: for Moodle's "Import grades: CSV file", columns
  ``Full name, User ID, ASSIGNMENT``. On import, "Identify user by": map from ``User ID`` to
  ``userid`` (the id in Moodle's "download submissions in folders" folder names), and map the
  ``ASSIGNMENT`` column to the assignment's grade item.

The total is the one grades.csv and nbgrader's export give (the final points: the
instructor's manual scores and extra credit from formgrader, minus nbgrader's late penalty).
A student with any exercise of the assignment not graded (and not scored by hand) gets an
EMPTY total (never 0): an empty cell leaves the LMS grade unset, so the instructor sees it
still needs a decision.
Students missing from the results are left out. Text a spreadsheet would read as a formula
(a display name starting with ``=``, ``+``, ``-``, ``@``) is written with a leading ``'``
(:func:`cell`), here and in grades.csv.

Example: ``write_exports(Path("grades"), {"01_attention": ["01_attention"]}, names, lms_ids)``.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from .status import row_kind

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = ["Full name", "User ID"]


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(value) -> str:
    """A CSV cell a spreadsheet shows as text: a value that would start a formula (``=``,
    ``+``, ``-``, ``@``, tab, carriage return; a display name comes from the LMS download, so
    from the student) gets a leading ``'``, as OWASP advises; numbers stay numbers.

    >>> cell("=SUM(A1:A9)"), cell("-0.5"), cell("José"), cell(2)
    ("'=SUM(A1:A9)", '-0.5', 'José', '2')
    """
    text = "" if value is None else str(value)
    if not text.startswith(_FORMULA_START):
        return text
    try:
        float(text)
        return text
    except ValueError:
        return "'" + text


def total(rows: list[dict]) -> str:
    """One assignment's total for one student, as nbgrader's own export scores it: the sum of
    the rows' final ``points`` (grades.csv's: the instructor's manual score where set, plus
    extra credit) minus the notebooks' ``late_penalty``, at least 0; '' when a row is not
    graded and the instructor has not scored it by hand (``manual_points``).

    >>> total([{"points": "1", "kind": "graded"}, {"points": "0.5", "kind": "graded"}])
    '1.5'
    >>> total([{"points": "1", "kind": "graded"}, {"points": "", "kind": "grader error"}])
    ''
    >>> total([{"points": "1", "kind": "graded"},
    ...        {"points": "2", "kind": "grader error", "manual_points": "2"}])
    '3'
    >>> total([{"notebook": "a", "points": "3", "kind": "graded", "late_penalty": "3"}])
    '0'
    """
    decided = [row_kind(r).graded or r.get("manual_points") not in (None, "") for r in rows]
    if not rows or not all(decided):
        return ""
    penalty = {}
    try:
        for r in rows:
            if r.get("late_penalty") not in (None, ""):
                penalty[r.get("notebook", "")] = float(r["late_penalty"])
        score = sum(float(r["points"]) for r in rows)
    except (KeyError, ValueError):
        return ""
    return f"{max(0.0, score - sum(penalty.values())):g}"


def _write(path: Path, header: list[str], body: list[list[str]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows([cell(v) for v in row] for row in body)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    os.replace(tmp, path)


def write_exports(
    out: Path, notebooks: dict[str, list[str]], results: dict[str, dict],
    students: list[str] | None = None,
) -> list[Path]:
    """Write both exports for every assignment in ``notebooks`` ({assignment: [notebook]}).

    ``results`` is {student: result dict} (``rows``, optional ``name`` and ``lms_id``).
    """
    folder = out / "exports"
    folder.mkdir(parents=True, exist_ok=True)
    order = [s for s in (students if students is not None else sorted(results)) if s in results]
    written = []
    for assignment, nbs in notebooks.items():
        canvas, moodle = [], []
        for sid in order:
            r = results[sid]
            rows = [row for row in r.get("rows", []) if row.get("notebook") in nbs]
            if not rows:
                continue
            name = str(r.get("name", "") or "") or sid
            lms_id = str(r.get("lms_id", "") or "")
            sis = [str(r.get(k) or rows[0].get(k) or "")  # the roster's (grades.csv's rows)
                   for k in ("sis_id", "sis_login", "section")]
            score = total(rows)
            canvas.append([name, lms_id, *sis, score])
            moodle.append([name, lms_id, score])
        for kind, header, body in (
            ("canvas", CANVAS_COLUMNS + [assignment], canvas),
            ("moodle", MOODLE_COLUMNS + [assignment], moodle),
        ):
            path = folder / f"{assignment}.{kind}.csv"
            _write(path, header, body)
            written.append(path)
    return written
