"""Gradebook files each LMS imports: one total per student per assignment, for its own class.

Written next to grades.csv, per assignment (``ASSIGNMENT`` = a folder of ``solutions/``), each
only where the class has students from that LMS's download (a Canvas class gets no Moodle
file, a class of plain folders neither: grades.csv and ``nbgrader export`` are its files):

- ``OUT_DIR/exports/ASSIGNMENT.canvas.csv``: Canvas's gradebook import format, columns
  ``Student, ID, SIS User ID, SIS Login ID, Section`` and the assignment's, one row per
  student of a Canvas download. Canvas matches a row to a student by ``ID`` (the Canvas user
  id, the ``<userid>`` of its "download submissions" file names, kept as the submission's
  ``lms_id``); ``SIS User ID``, ``SIS Login ID`` and ``Section`` are the roster's
  (``course-grade --roster``, grades.csv's ``sis_id``), else empty (Canvas then uses
  ``ID``). The last column's header is the roster's column of the assignment, ``Name (id)``
  as Canvas writes it (:func:`roster.canvas_columns`: the column whose name is the
  assignment's, case, spaces and punctuation aside); without a roster, or with none
  matching, the assignment's name (Canvas would import it as a new assignment: the run says
  so).
- ``OUT_DIR/exports/ASSIGNMENT.moodle.csv``: Moodle's grading worksheet, what the
  assignment's "Upload grading worksheet" imports (the offline grading worksheet feedback
  type), one row per student of a Moodle download. Columns ``Identifier, Full name, Grade,
  Maximum Grade, Last modified (grade)``: Moodle finds a row's student by ``Identifier``,
  ``Participant N`` where N is the participant id of that assignment (the id in the
  download's folder names ``<Full Name>_<N>_assignsubmission_file_``, kept as the
  submission's ``lms_id``: not the user id), and reads ``Grade``; it skips a row whose
  ``Last modified (grade)`` is more than a minute older than the grade it holds (a grade
  changed in Moodle since is kept, unless the upload allows overwriting it). That column is
  when course-grade last changed the total (``OUT_DIR/changes.csv``, ISO 8601, UTC), empty
  where the log has none (Moodle then keeps any grade it holds). ``Maximum Grade`` is the
  assignment's points: Moodle skips a grade above the assignment's own maximum, so set its
  "Maximum grade" to it. Where OUT_DIR keeps the assignment's own worksheet (``--roster``
  gave it: ``roster.keep_worksheet``), the file is that worksheet, every row and column as
  Moodle wrote it, with only ``Grade``, ``Feedback comments`` (each exercise's points) and
  ``Last modified (grade)`` changed in the rows of students graded (:func:`worksheet`).

The total is the one grades.csv and nbgrader's export give (the final points: the
instructor's manual scores and extra credit from formgrader, minus nbgrader's late penalty).
A student with any exercise of the assignment not graded (and not scored by hand) gets an
EMPTY total (never 0): both LMSs leave an empty grade unset, so the instructor sees it
still needs a decision.
Students missing from the results are left out. Text a spreadsheet would read as a formula
(a display name starting with ``=``, ``+``, ``-``, ``@``) is written with a leading ``'``
(:func:`cell`), here and in grades.csv.

Example: ``write_exports(Path("grades"), {"01_attention": ["01_attention"]}, results)``.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from ..status import row_kind

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
# Moodle's own words (mod/assign's language strings 'recordid', 'grade', 'maxgrade',
# 'lastmodifiedgrade'; the identifier is 'hiddenuser' then the participant id)
MOODLE_COLUMNS = ["Identifier", "Full name", "Grade", "Maximum Grade", "Last modified (grade)"]
PARTICIPANT = "Participant "


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


def maximum(rows: list[dict]) -> str:
    """The points an assignment's rows are out of (their ``max_points``); '' if unknown.

    >>> maximum([{"max_points": "2"}, {"max_points": "1.5"}]), maximum([{"max_points": ""}])
    ('3.5', '')
    """
    try:
        return f"{sum(float(r['max_points']) for r in rows):g}"
    except (KeyError, ValueError):
        return ""


def changed_at(out: Path) -> dict[tuple[str, str], str]:
    """{(student, assignment): when course-grade last changed that total}: the ``total``
    lines of the change log ``OUT_DIR/changes.csv`` (``ledger.py``: appended in time order,
    its columns ``when``, ``student``, ``assignment``, ``exercise``); {} without a log."""
    try:
        with open(out / "changes.csv", encoding="utf-8", newline="") as f:
            return {(line["student"], line["assignment"]): line["when"]
                    for line in csv.DictReader(f)
                    if line.get("exercise") == "total" and line.get("when")}
    except (OSError, KeyError):
        return {}


def lms_of(result: dict, rows: list[dict]) -> str:
    """The LMS whose download named the student: ``canvas``, ``moodle`` or '' (grades.csv's
    rows carry the result's ``lms``; a result stored before it was kept: a Canvas file name
    kept for it says Canvas, else digits in ``lms_id`` say Moodle, as ``write_returns``
    reads it).

    >>> lms_of({"lms": "canvas"}, []), lms_of({"lms_id": "2001"}, []), lms_of({}, [{}])
    ('canvas', 'moodle', '')
    """
    for source in (result, *rows[:1]):
        if "lms" in source:
            return str(source["lms"] or "")
    if result.get("canvas"):
        return "canvas"
    return "moodle" if str(result.get("lms_id", "") or "").isdigit() else ""


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
    students: list[str] | None = None, columns: dict[str, str] | None = None,
) -> list[Path]:
    """Write each LMS's file of every assignment in ``notebooks`` ({assignment: [notebook]})
    that has students from its download; a file of an LMS with none (left by an older
    course-grade, which wrote both) is removed: the files are made anew from every stored
    result each time, so it holds nobody's grade. Returns the files written.

    ``results`` is {student: result dict} (``rows``, optional ``name``, ``lms_id``, ``lms``);
    ``columns`` {assignment: Canvas column header} (:func:`roster.canvas_columns`), else the
    roster kept in ``OUT_DIR/settings.json`` is read for them.
    """
    folder = out / "exports"
    folder.mkdir(parents=True, exist_ok=True)
    order = [s for s in (students if students is not None else sorted(results)) if s in results]
    if columns is None:
        columns = _roster_columns(out, list(notebooks))
    when = changed_at(out)
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
            lms = lms_of(r, rows)
            if lms == "canvas":
                sis = [str(r.get(k) or rows[0].get(k) or "")  # the roster's (grades.csv's)
                       for k in ("sis_id", "sis_login", "section")]
                canvas.append([name, lms_id, *sis, total(rows)])
            elif lms == "moodle" and (lms_id := str(  # that assignment's download's id
                    rows[0].get("lms_id") or lms_id)).isdigit():
                moodle.append([f"{PARTICIPANT}{lms_id}", name, total(rows), maximum(rows),
                               when.get((sid, assignment), "")])
        sheet = worksheet(out, assignment, order, results, nbs, when)
        for kind, header, body in (
            ("canvas", CANVAS_COLUMNS + [columns.get(assignment) or assignment], canvas),
            ("moodle", MOODLE_COLUMNS, moodle),
        ):
            path = folder / f"{assignment}.{kind}.csv"
            if kind == "moodle" and sheet is not None:
                tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
                tmp.write_text(sheet, encoding="utf-8")
                os.replace(tmp, path)
                written.append(path)
            elif body:
                _write(path, header, body)
                written.append(path)
            else:
                path.unlink(missing_ok=True)
    return written


def _roster_columns(out: Path, assignments: list[str]) -> dict[str, str]:
    """The Canvas column headers of ``assignments`` in the roster the class keeps
    (``settings.json``'s ``--roster``); {} without one."""
    from .roster import read_columns
    from .settings import read

    path = read(out).get("roster")
    return read_columns(Path(path), assignments)[0] if path else {}


def worksheet(out: Path, assignment: str, order: list[str], results: dict[str, dict],
              nbs: list[str], when: dict) -> str | None:
    """The text of the grading worksheet OUT_DIR keeps for ``assignment``, its rows of the
    students graded filled in; None without one. A row is a student's whose id is its email's
    (``--roster``: ``roster.py``), else whose Moodle participant id is the row's. Where the
    row's ``Maximum Grade`` is not the assignment's points, ``Grade`` is the total scaled to it
    (two decimals) and ``Feedback comments`` say both."""
    from .roster import PARTICIPANT as P
    from .roster import worksheet_path
    from .submissions import student_id

    try:
        text = worksheet_path(out, assignment).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    table = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"))))
    head = table[0] if table else []
    if "Identifier" not in head or "Grade" not in head:
        return None

    def of(sid: str) -> list[dict]:  # the student's rows of the assignment
        return [r for r in results[sid].get("rows", []) if r.get("notebook") in nbs] \
            if sid in order else []

    by_id = {f"{P}{rows[0].get('lms_id') or results[s].get('lms_id')}": s for s in order
             if (rows := of(s)) and lms_of(results[s], rows) == "moodle"}
    for line in table[1:]:
        row = dict(zip(head, line))
        email = row.get("Email address")
        sid = next((s for s in (student_id(email) if email else "",
                                by_id.get(row["Identifier"], "")) if of(s)), "")
        if not (rows := of(sid)):
            continue
        done = {"Grade": total(rows), "Last modified (grade)": when.get((sid, assignment)),
                "Feedback comments": "; ".join(
                    f"{r.get('exercise')} {r.get('points') or '-'}/{r.get('max_points')}"
                    for r in rows)}
        try:  # Moodle reads Grade out of its own Maximum Grade: points scaled to it
            of_max, points = float(row["Maximum Grade"]), float(maximum(rows))
            scaled = float(done["Grade"]) * of_max / points
        except (KeyError, ValueError, ZeroDivisionError):
            scaled = None
        if scaled is not None and of_max != points:
            done["Feedback comments"] += (f" (total {done['Grade']}/{points:g} points, "
                                          f"{scaled:.2f} of Moodle's {of_max:g})")
            done["Grade"] = f"{scaled:.2f}"
        line[:] = [cell(done[h]) if done.get(h) is not None else v
                   for h, v in zip(head, line)]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(table)
    return text[:1] * text.startswith("\ufeff") + buf.getvalue()
