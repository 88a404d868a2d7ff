"""``course-grade --roster FILE``: real names and SIS ids from Canvas's gradebook export.

Canvas's download names a student by a squashed name (``lovelaceada``) and the Canvas user id;
its gradebook export (Grades, Export, CSV) has the columns ``Student, ID, SIS User ID,
SIS Login ID, Section`` then one per assignment, and a second row ``Points Possible`` (skipped,
as is any row whose ``ID`` is not a number). A student whose Canvas user id is the roster's
``ID`` gets the roster's ``Student`` as display name, kept as Canvas writes it ("Lovelace,
Ada": the form the Canvas export's ``Student`` column has), and its SIS ids and section
(grades.csv's ``sis_id``, the Canvas export's ``SIS User ID``, ``SIS Login ID``, ``Section``).
The student id (grades.csv's ``student``, folder names) does not change: it stays stable
across runs with or without a roster. The roster's assignment columns, ``Name (id)``, give the
Canvas export its header (:func:`canvas_columns`): Canvas imports a column into the
assignment whose id it names.

Moodle's download names a student by the participant id of that one assignment, so the same
student's downloads of two assignments are two students unless ``--roster`` is Moodle's
grading worksheet of the assignment (columns ``Identifier`` = ``Participant N``, ``Full name``,
``Email address``, ...) or its participants export (``First name``, ``Last name``, ``Email
address``): a Moodle student it names (by participant id, else by full name) gets the id
:func:`student_id` of its email, the same in every assignment. A worksheet is kept as its
assignment's (:func:`keep_worksheet`), the file ``exports.py`` writes back.

Example: ``apply_roster(read_roster(Path("Grades-CS101.csv")), subs)`` returns messages.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from .submissions import student_id

COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


@dataclass(frozen=True)
class Person:
    """One roster row."""

    name: str
    sis_id: str = ""
    sis_login: str = ""
    section: str = ""
    email: str = ""  # Moodle's: the student's id in every assignment


PARTICIPANT = "Participant "  # Moodle's worksheet's Identifier: this, then the participant id


def parse_roster(text: str, source: str = "--roster") -> dict[str, Person]:
    """{Canvas user id: Person} from the text of Canvas's gradebook export, {'Participant N'
    or full name: Person} from Moodle's grading worksheet or participants export; raises
    ``ValueError`` when the header is none of these.

    >>> parse_roster('Student,ID,SIS User ID\\n    Points Possible,,\\n"Lovelace, Ada",7,S1\\n')
    {'7': Person(name='Lovelace, Ada', sis_id='S1', sis_login='', section='', email='')}
    >>> parse_roster('Identifier,Full name,Email address\\nParticipant 5,Ada L,ada@u.edu\\n')
    {'Participant 5': Person(name='Ada L', sis_id='', sis_login='', section='', email='ada@u.edu')}
    """
    reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff")))
    header = [h.strip() for h in reader.fieldnames or []]
    reader.fieldnames = header
    if {"Email address", "First name", "Last name"} <= {*header} or \
            {"Identifier", "Full name"} <= {*header}:  # Moodle's participants / worksheet
        found = {}
        for row in reader:
            full = (row.get("Full name") or
                    f"{row.get('First name') or ''} {row.get('Last name') or ''}").strip()
            key = (row.get("Identifier") or "").strip() or full
            email = (row.get("Email address") or "").strip() if key not in found else ""
            found[key] = Person(full, email=email)  # two of one name: neither matched
        return found
    if "Student" not in header or "ID" not in header:
        raise ValueError(f"{source}: not a Canvas gradebook export (its header line must "
                         f"name the columns {', '.join(COLUMNS)}; it has "
                         f"{', '.join(header[:6]) or 'none'}), nor Moodle's grading worksheet "
                         "(Identifier, Full name, ...) or participants export (First name, "
                         "Last name, Email address, ...)")
    found = {}
    for row in reader:
        uid = (row.get("ID") or "").strip()
        if uid.isdigit():  # "Points Possible" and Canvas's own summary rows have none
            found[uid] = Person(*((row.get(c) or "").strip() for c in
                                  ("Student", "SIS User ID", "SIS Login ID", "Section")))
    return found


_COLUMN = re.compile(r"(?P<name>.*\S)\s*\((?P<id>\d+)\)\Z")


def _key(name: str) -> str:
    """A name as :func:`canvas_columns` compares it: case, spaces and punctuation aside.

    >>> _key("01 Attention"), _key("01_attention")
    ('01attention', '01attention')
    """
    return "".join(ch for ch in name.casefold() if ch.isalnum())


def canvas_columns(text: str, assignments: list[str]) -> tuple[dict[str, str], list[str]]:
    """({assignment: the roster's column of it}, messages): of the header of Canvas's
    gradebook export (``text``), the assignment columns ``Name (id)`` whose name is an
    assignment's, case, spaces and punctuation aside (``01 Attention (4711)`` is
    ``01_attention``'s). An assignment with no such column, or with several, has none (its
    export's header is its own name, which Canvas imports as a new assignment): a message
    says which.

    >>> columns, said = canvas_columns('Student,ID,01 Attention (4711),Quiz (5)\\n',
    ...                                ["01_attention", "02_x"])
    >>> columns, said[0][20:56]
    ({'01_attention': '01 Attention (4711)'}, 'of the roster is the assignment 02_x')
    """
    header = next(csv.reader(io.StringIO(text.removeprefix("\ufeff"))), [])
    found: dict[str, list[str]] = {}
    for h in (h.strip() for h in header):
        if (m := _COLUMN.match(h)) and h not in COLUMNS:
            found.setdefault(_key(m["name"]), []).append(h)
    columns, messages = {}, []
    for a in assignments:
        match = found.get(_key(a), [])
        if len(match) == 1:
            columns[a] = match[0]
            continue
        what = (f"{len(match)} columns of the roster name the assignment {a} "
                f"({', '.join(match)})" if match else
                f"no column of the roster is the assignment {a} (Canvas's header 'Name (id)')")
        messages.append(f"--roster: {what}: its Canvas export's header is '{a}', which Canvas "
                        "imports as a new assignment")
    return columns, messages


def read_roster(path: Path) -> dict[str, Person]:
    """:func:`parse_roster` of the instructor's file; raises ``ValueError`` on a bad one."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ValueError(f"--roster {path}: cannot read ({e.strerror})") from None
    return parse_roster(text, f"--roster {path}")


def read_columns(path: Path, assignments: list[str]) -> tuple[dict[str, str], list[str]]:
    """:func:`canvas_columns` of the roster file at ``path``; ({}, []) when it cannot be read
    (the run that reads it as the roster says why)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}, []
    return canvas_columns(text, assignments)


def apply_roster(roster: dict[str, Person], subs, most: int = 10) -> list[str]:
    """Give each Canvas student the roster's name and SIS ids, each Moodle student its name and
    email's id (:func:`_moodle`); returns a message for each
    Canvas user id of the download the roster lacks (its download name is kept), and one
    naming the roster's students with no submission in this folder (the first ``most``).

    >>> from types import SimpleNamespace as S
    >>> apply_roster({"7": Person("Lovelace, Ada"), "8": Person("Hopper, Grace")},
    ...              [S(lms="canvas", lms_id="7", name="lovelaceada", student="lovelaceada_7")])
    ['--roster: 1 student of the roster has no submission in this folder: Hopper, Grace (8)']
    >>> apply_roster({"7": Person("A"), "8": Person("B"), "9": Person("")}, [], most=2)[0][-31:]
    'folder: A (7); B (8) and 1 more'
    """
    messages = []
    absent = dict(roster)
    taken = {sub.student for sub in subs}
    for sub in subs:
        if sub.lms == "moodle":
            messages += _moodle(roster, absent, sub, taken)
        if sub.lms != "canvas":
            continue
        absent.pop(sub.lms_id, None)
        person = roster.get(sub.lms_id)
        if person is None:
            messages.append(f"--roster: Canvas user {sub.lms_id} ({sub.name}, {sub.student}) "
                            "is not in the roster; its download name is kept")
            continue
        sub.name = person.name or sub.name
        sub.sis_id, sub.sis_login, sub.section = person.sis_id, person.sis_login, person.section
    if absent:
        names = [f"{p.name or '(no name)'} ({uid})" for uid, p in absent.items()]
        more = f" and {len(names) - most} more" if len(names) > most else ""
        one = len(names) == 1
        messages.append(f"--roster: {len(names)} student{'' if one else 's'} of the roster "
                        f"{'has' if one else 'have'} no submission in this folder: "
                        f"{'; '.join(names[:most])}{more}")
    return messages


def _moodle(roster: dict[str, Person], absent: dict, sub, taken: set[str]) -> list[str]:
    """Give a Moodle student the roster's name and, as its id, its email's (the same in every
    assignment); a message where the roster lacks it (matched by participant id, else by full
    name: a participants export has no participant ids) or the id is another's."""
    key = PARTICIPANT + sub.lms_id if PARTICIPANT + sub.lms_id in roster else sub.name
    person = roster.get(key)
    absent.pop(key, None)
    if person is None or not person.email:
        return [f"--roster: Moodle participant {sub.lms_id} ({sub.name}) has no one email in the "
                f"roster: graded as {sub.student}, a student of this assignment only"]
    sid = student_id(person.email)
    if sid in taken:
        return [f"--roster: Moodle participant {sub.lms_id} ({sub.name}): {sid} is another "
                f"student of this folder; graded as {sub.student}"]
    taken.add(sid)
    sub.student, sub.name = sid, person.name or sub.name
    return []


def moodle_ids(subs, most: int = 10) -> list[str]:
    """Without ``--roster``: the message naming the Moodle students of this folder, each by its
    participant id of this assignment only."""
    ids = [f"{s.name} ({s.lms_id})" for s in subs if s.lms == "moodle"]
    if not ids:
        return []
    more = f" and {len(ids) - most} more" if len(ids) > most else ""
    return [f"Moodle's download names each student by a participant id of this assignment only "
            f"({'; '.join(ids[:most])}{more}): the same student in another assignment's "
            "download is another student here. Give --roster (the assignment's grading "
            "worksheet, or Moodle's participants export with emails) to grade each one under "
            "its email in every assignment"]


def worksheet_path(out: Path, assignment: str) -> Path:
    """Where OUT_DIR keeps the grading worksheet of ``assignment`` (:func:`keep_worksheet`)."""
    return out / "rosters" / f"{assignment}.moodle.csv"


def keep_worksheet(path: Path, out: Path, picked: list[str], subs) -> list[str]:
    """Keep the roster at ``path`` in OUT_DIR as the grading worksheet of the one assignment of
    this Moodle download (``picked``: those its notebooks are of), where it is a worksheet
    naming at least one participant of the download; messages where it cannot be kept."""
    try:
        data = path.read_bytes()
        rows = list(csv.DictReader(io.StringIO(data.decode("utf-8").removeprefix("\ufeff"))))
    except (OSError, UnicodeDecodeError):
        return []
    if not rows or "Identifier" not in rows[0]:  # not a worksheet
        return []
    if not {PARTICIPANT + s.lms_id for s in subs if s.lms == "moodle"} & {
            r["Identifier"] for r in rows}:
        return [f"--roster {path.name}: no participant of this download is in it: it is another "
            "assignment's grading worksheet (matched by full name here), so this assignment's "
            "Moodle file is not made from it: give this assignment's worksheet"]
    if len(picked) != 1:
        return [f"--roster {path.name}: a grading worksheet is one assignment's, and this "
                f"download has {len(picked)} ({', '.join(picked)}): give --assignment"]
    dest = worksheet_path(out, picked[0])
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    return []
