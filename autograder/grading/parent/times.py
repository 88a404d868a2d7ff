"""Submission times from trusted sources only, and the lateness they give grades.csv's rows.

A submission's time decides its late penalty, so it is taken only where the student could not
have set it:

- **nbgrader's own collect**: SUBMISSIONS_DIR is a course's ``submitted/`` folder (next to
  the course's ``nbgrader_config.py`` or ``gradebook.db``), and
  ``<student>/<assignment>/timestamp.txt`` is the one nbgrader's exchange wrote
  (:func:`from_nbgrader`);
- **the instructor's CSV**, ``course-grade --submitted-at FILE`` (:data:`CSV_FORMAT`,
  :func:`parse_submitted_at`); it wins over nbgrader's time;
- **the LMS's own mark**: Canvas's ``LATE`` in a file name says the submission was late,
  not by how much (``late (marked by Canvas)``; the late policy takes the most it takes). It
  is measured against Canvas's due date: for a student with an extension
  (``--extensions``) and no known time it is not taken as lateness.

Per-student extensions come from the instructor's CSV (``course-grade --extensions FILE``,
:data:`EXTENSIONS_FORMAT`); they become nbgrader's own extensions in the gradebook.

Never a file's modification time (the moment the download was unpacked), a zip entry's time or
a ``timestamp.txt`` inside a student's upload: the student or the unpacking sets those. A row
with a due date and no known time gets no penalty and says ``submission time unknown``.
"""

from __future__ import annotations

import csv
import io
import math
import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..gradebook import parse_duration
from .submissions import IntakeProblem, Submission, find_notebook, read_bounded

UNKNOWN = "submission time unknown"
MARKED = "late (marked by Canvas)"
WITHIN_GRACE = "(within the grace period: on time)"
EXTENDED_MARK = f"{UNKNOWN} (marked LATE by Canvas, but extended: --submitted-at gives the time)"
CSV_FORMAT = (
    "a CSV file with a header line naming the columns student and submitted_at, and "
    "optionally assignment; student is the student as course-grade names it (grades.csv's "
    "student), or the LMS id or the display name it lists; submitted_at is an ISO 8601 time "
    "(2026-12-01T22:10:00+01:00; no zone: UTC); assignment, where given, limits the time to "
    "that assignment (empty or absent: every assignment). Example line: "
    "nunezjose_1001,2026-12-01T22:10:00+01:00"
)


def parse_timestamp(text: str) -> datetime | None:
    """A ``timestamp.txt`` as nbgrader writes it (``%Y-%m-%d %H:%M:%S.%f %Z``) or ISO 8601;
    a time without zone is UTC (as nbgrader reads it).

    >>> parse_timestamp("2026-11-20 14:03:00.250000 UTC").isoformat()
    '2026-11-20T14:03:00.250000+00:00'
    """
    import dateutil.parser

    try:
        return utc(dateutil.parser.parse(text.strip())) if text.strip() else None
    except (ValueError, OverflowError):
        return None


def utc(t: datetime) -> datetime:
    """``t`` in UTC; a time without zone is UTC."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _csv_lines(text: str, source: str, needed: list[str], fmt: str):
    """(line number, {column: stripped value}) of each non-blank line of an instructor's CSV
    whose header names the ``needed`` columns; ``ValueError`` naming a malformed line."""
    rows = csv.reader(io.StringIO(text.removeprefix("\ufeff")))  # a spreadsheet's BOM
    header = [h.strip().lower() for h in next(rows, [])]
    if not set(needed) <= set(header):
        raise ValueError(f"{source} line 1: the header names no {', '.join(needed[:-1])} and "
                         f"{needed[-1]} columns; expected {fmt}")
    for row in rows:
        if not any(cell.strip() for cell in row):
            continue  # a blank line
        if len(row) != len(header):
            raise ValueError(f"{source} line {rows.line_num}: {len(row)} fields, the header "
                             f"has {len(header)}; expected {fmt}")
        yield rows.line_num, dict(reversed([(h, c.strip()) for h, c in zip(header, row)]))


# ---- nbgrader's collect ----------------------------------------------------------------------


def is_nbgrader_submitted(folder: Path) -> bool:
    """Whether ``folder`` is an nbgrader course's ``submitted/``, which only ``nbgrader
    collect`` fills: its name and its course folder are the instructor's, never a student's."""
    return folder.name == "submitted" and any(
        (folder.parent / f).is_file() for f in ("nbgrader_config.py", "gradebook.db"))


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)  # a link is not followed
    except OSError:
        return False


def from_nbgrader(submissions_dir: Path, subs: list[Submission]) -> int:
    """Give each student folder of an nbgrader ``submitted/`` its assignments' times, from
    ``<student>/<assignment>/timestamp.txt`` (exactly there), and mark it ``per_assignment``;
    returns how many times were read. No other layout is read."""
    if not is_nbgrader_submitted(submissions_dir):
        return 0
    found = 0
    for sub in subs:
        if sub.problem or sub.origin.parent != submissions_dir or not _is_dir(sub.origin):
            continue  # a zip or a stray file is not nbgrader's
        sub.per_assignment = True  # nbgrader collected it: one <assignment>/ per assignment
        try:
            entries = sorted(os.listdir(sub.origin))
        except OSError:
            continue
        for entry in entries:
            if not _is_dir(sub.origin / entry):
                continue
            try:
                text = read_bounded(sub.origin / entry / "timestamp.txt", 1024)
            except (IntakeProblem, OSError):
                continue
            if (when := parse_timestamp(text.decode("utf-8", "replace"))) is not None:
                sub.times[entry] = when
                sub.time_source = "nbgrader timestamp.txt"
                found += 1
    return found


# ---- the instructor's CSV --------------------------------------------------------------------


@dataclass(frozen=True)
class Stated:
    """One line of the instructor's CSV."""

    line: int
    who: str
    assignment: str  # "" = every assignment
    at: datetime


def parse_submitted_at(text: str, source: str = "--submitted-at") -> list[Stated]:
    """The lines of an instructor's CSV (:data:`CSV_FORMAT`); raises ``ValueError`` naming the
    first malformed line and the format expected.

    >>> parse_submitted_at("student,submitted_at\\nann,2026-12-01T23:00+01:00\\n")[0].at
    datetime.datetime(2026, 12, 1, 22, 0, tzinfo=datetime.timezone.utc)
    """
    found = []
    for line, row in _csv_lines(text, source, ["student", "submitted_at"], CSV_FORMAT):
        who, when = row["student"], row["submitted_at"]
        try:
            at = datetime.fromisoformat(when)
        except ValueError:
            raise ValueError(f"{source} line {line}: {when!r} is not an ISO 8601 time; "
                             f"expected {CSV_FORMAT}") from None
        if not who:
            raise ValueError(f"{source} line {line}: no student; expected {CSV_FORMAT}")
        found.append(Stated(line, who, row.get("assignment", ""), utc(at)))
    return found


def _match(who: str, subs: list[Submission]) -> list[Submission]:
    """The students ``who`` names: by course-grade's id, else the LMS id, else the name."""
    for key in (lambda s: s.student, lambda s: s.lms_id, lambda s: s.name):
        found = [s for s in subs if key(s) and key(s) == who]
        if found:
            return found
    return []


def apply_submitted_at(stated: list[Stated], subs: list[Submission],
                       source: str = "--submitted-at") -> list[str]:
    """Give the students the instructor's times (over any other); returns a message for each
    line naming no student here. Raises ``ValueError`` for a line naming two students, or a
    second time for the same student and assignment."""
    seen: dict[tuple[str, str], int] = {}
    messages = []
    # a line for every assignment first: a line for one assignment then overrides it
    for st in sorted(stated, key=lambda st: (st.assignment != "", st.line)):
        found = _match(st.who, subs)
        if not found:
            messages.append(f"{source} line {st.line}: no student {st.who!r} in the "
                            "submissions (skipped)")
            continue
        if len(found) > 1:
            raise ValueError(f"{source} line {st.line}: {st.who!r} names "
                             f"{len(found)} students ({', '.join(s.student for s in found)}); "
                             "give the student column as in grades.csv")
        sub = found[0]
        if (sub.student, st.assignment) in seen:
            raise ValueError(f"{source} line {st.line}: a second time for {sub.student} "
                             f"{st.assignment or '(every assignment)'} (line "
                             f"{seen[sub.student, st.assignment]})")
        seen[sub.student, st.assignment] = st.line
        if not st.assignment:
            sub.times.clear()  # the instructor's time for every assignment replaces nbgrader's
        sub.times[st.assignment] = st.at
        sub.time_source = source
    return messages


# ---- per-student extensions -----------------------------------------------------------------

EXTENSIONS_FORMAT = (
    "a CSV file with a header line naming the columns student, assignment and due; student as "
    "in --submitted-at; assignment is one assignment or * (every assignment); due is the "
    "student's own due date, an ISO 8601 time (2026-12-03T23:59+01:00; no zone: UTC), or + and "
    "a duration added to the assignment's (+2d, +36h, +0 takes an extension back). Example "
    "line: nunezjose_1001,01_attention,+2d"
)


@dataclass(frozen=True)
class Extension:
    """One line of the instructor's extensions CSV: ``until`` is the new due date, or ``by``
    seconds added to the assignment's."""

    line: int
    who: str
    assignment: str  # "*" = every assignment
    until: datetime | None = None
    by: float = 0.0

    def delta(self, due: datetime | None) -> timedelta | None:
        """nbgrader's ``extension`` of a submission due ``due`` (None: no due date to extend).

        >>> due = datetime(2026, 12, 1, tzinfo=UTC)
        >>> Extension(2, "a", "*", by=86400).delta(due), Extension(2, "a", "*").delta(None)
        (datetime.timedelta(days=1), None)
        """
        if due is None:
            return None
        if self.until is not None:
            return naive_utc(self.until) - naive_utc(due)
        return timedelta(seconds=self.by)


def parse_extensions(text: str, source: str = "--extensions") -> list[Extension]:
    """The lines of the instructor's extensions CSV (:data:`EXTENSIONS_FORMAT`); raises
    ``ValueError`` naming the first malformed line and the format expected.

    >>> [(e.who, e.assignment, e.by) for e in parse_extensions(
    ...     "student,assignment,due\\nann,*,+2d\\nbob,01_attention,2026-12-03\\n")]
    [('ann', '*', 172800.0), ('bob', '01_attention', 0.0)]
    """
    found, seen = [], {}
    needed = ["student", "assignment", "due"]
    for line, row in _csv_lines(text, source, needed, EXTENSIONS_FORMAT):
        who, a, due = (row[k] for k in needed)
        if not who or not due:
            raise ValueError(f"{source} line {line}: no student or due; expected "
                             f"{EXTENSIONS_FORMAT}")
        a = a or "*"
        if (who, a) in seen:
            raise ValueError(f"{source} line {line}: a second extension for {who} {a} (line "
                             f"{seen[who, a]})")
        seen[who, a] = line
        if due.startswith("+"):
            by = parse_duration(due[1:], f"{source} line {line}")
            found.append(Extension(line, who, a, by=by))
            continue
        try:
            until = datetime.fromisoformat(due)
        except ValueError:
            raise ValueError(f"{source} line {line}: {due!r} is neither an ISO 8601 time nor "
                             f"+DURATION; expected {EXTENSIONS_FORMAT}") from None
        found.append(Extension(line, who, a, until=utc(until)))
    return found


def resolve_extensions(extensions: list[Extension], subs: list[Submission],
                       graded: list[str], source: str = "--extensions"
                       ) -> tuple[dict[str, dict[str, Extension]], list[str]]:
    """({student id: {assignment or "*": Extension}}, a message for each line naming no
    student): a student is matched as in ``--submitted-at`` among this folder's students,
    else by the id of one graded before (``graded``)."""
    found: dict[str, dict[str, Extension]] = {}
    messages = []
    for ext in extensions:
        hit = [s.student for s in _match(ext.who, subs)] or \
            [sid for sid in graded if sid == ext.who]
        if len(hit) != 1:
            messages.append(f"{source} line {ext.line}: "
                            + (f"no student {ext.who!r} (skipped)" if not hit else
                               f"{ext.who!r} names {len(hit)} students (skipped); give the "
                               "student column as in grades.csv"))
            continue
        found.setdefault(hit[0], {})[ext.assignment] = ext
    return found, messages


def extension_of(extensions: dict[str, dict[str, Extension]], student: str,
                 assignment: str) -> Extension | None:
    """The student's extension of ``assignment``: its own line, else the ``*`` line."""
    mine = extensions.get(student, {})
    return mine.get(assignment) or mine.get("*")


LATE_POLICY, EXTENSION = "late policy", "extension"  # changes.csv's causes of a penalty change


def late_cause(extensions: dict[str, dict[str, Extension]], student: str,
               assignment: str) -> str:
    """changes.csv's cause of a late penalty that changed with no regrade: ``extension`` for a
    student with one, else ``late policy`` (the policy, a due date or a time changed)."""
    return EXTENSION if extension_of(extensions, student, assignment) else LATE_POLICY


# ---- lateness --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """What is known of when one student submitted one assignment.

    >>> Timing.from_json(Timing(datetime(2026, 12, 1, tzinfo=UTC)).as_json()).at.isoformat()
    '2026-12-01T00:00:00+00:00'
    """

    at: datetime | None = None  # tz-aware, from a trusted source only
    marked_late: bool = False  # the LMS marked the submission late

    def as_json(self) -> dict:
        return {"at": self.at.isoformat() if self.at else "", "marked_late": self.marked_late}

    @classmethod
    def from_json(cls, d) -> Timing:
        if not isinstance(d, dict):
            return cls()
        try:
            at = datetime.fromisoformat(d["at"]) if d.get("at") else None
        except (TypeError, ValueError):
            at = None
        return cls(at, d.get("marked_late") is True)


def timings(subs: list[Submission], notebooks: dict[str, list[str]]
            ) -> dict[str, dict[str, Timing]]:
    """{student: {assignment: Timing}} for ``notebooks`` ({assignment: [notebook]}); an
    assignment is marked late when a notebook graded for it came from a file Canvas marked
    ``LATE``."""
    found: dict[str, dict[str, Timing]] = {}
    for sub in subs:
        for a, nbs in notebooks.items():
            at = sub.times.get(a, sub.times.get(""))
            marked = False
            if sub.late_files and sub.path is not None:
                for nb in nbs:
                    path = find_notebook(sub, nb, a)[0]
                    if path is not None and \
                            path.relative_to(sub.path).parts[0] in sub.late_files:
                        marked = True
            found.setdefault(sub.student, {})[a] = Timing(at, marked)
    return found


def naive_utc(t: datetime | None) -> datetime | None:
    """``t`` as nbgrader stores times: naive UTC."""
    return t.astimezone(UTC).replace(tzinfo=None) if t is not None and t.tzinfo else t


def lateness(timing: Timing, due: datetime | None,
             extended: bool = False) -> tuple[str, float]:
    """(grades.csv's ``late_by``, seconds late): a known time against the due date; else the
    LMS's mark (``inf``), unless ``extended`` (the mark is against the class's due date); else,
    with a due date, ``submission time unknown``.

    >>> due = datetime(2026, 12, 1, tzinfo=UTC)
    >>> lateness(Timing(datetime(2026, 12, 2, 1, tzinfo=UTC)), due)
    ('1 day, 1:00:00', 90000.0)
    >>> lateness(Timing(), due), lateness(Timing(marked_late=True), due), lateness(Timing(), None)
    (('submission time unknown', 0.0), ('late (marked by Canvas)', inf), ('', 0.0))
    """
    if timing.at is not None and due is not None:
        seconds = (naive_utc(timing.at) - naive_utc(due)).total_seconds()
        return (str(timedelta(seconds=int(seconds))), seconds) if seconds > 0 else ("", 0.0)
    if timing.marked_late and extended:
        return EXTENDED_MARK, 0.0
    if timing.marked_late:
        return MARKED, math.inf
    return (UNKNOWN if due is not None else ""), 0.0  # a due date, no time; or no due date


NOT_PENALISED = "not penalised (no time to compare with the due date: --submitted-at gives one)"


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def late_summary(rows: list[dict]) -> list[str]:
    """What grades.csv's rows say of lateness, counted in students, one line each.

    >>> late_summary([{"student": "a", "late_by": UNKNOWN, "late_penalty": ""},
    ...               {"student": "b", "late_by": MARKED, "late_penalty": "4"}])
    ['1 student late (1 marked by Canvas, time unknown); late penalty applied to 1', \
'1 student: submission time unknown; not penalised (no time to compare with the due \
date: --submitted-at gives one)']
    """
    late, marked, penalised, unknown, grace = set(), set(), set(), set(), set()
    for r in rows:
        sid, by = r.get("student", ""), r.get("late_by", "") or ""
        if by.startswith(UNKNOWN):
            unknown.add(sid)
        elif by.endswith(WITHIN_GRACE):
            grace.add(sid)
        elif by:
            late.add(sid)
            if by == MARKED:
                marked.add(sid)
            if r.get("late_penalty") not in (None, ""):
                penalised.add(sid)
    out = []
    if late:
        how = f" ({len(marked)} marked by Canvas, time unknown)" if marked else ""
        out.append(f"{_n(len(late), 'student')} late{how}; late penalty applied to "
                   f"{len(penalised)}")
    if grace:
        out.append(f"{_n(len(grace), 'student')} late {WITHIN_GRACE}: not penalised")
    if unknown:
        out.append(f"{_n(len(unknown), 'student')}: {UNKNOWN}; {NOT_PENALISED}")
    return out
