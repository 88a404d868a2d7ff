"""The grading run's own state, written only by the trusted parent process.

``OUT_DIR`` is a real nbgrader course directory (so stock nbgrader works on it: formgrader,
``nbgrader export``); the grader adds ``results/`` and ``grades.csv``:

- ``OUT_DIR/results/<student>.json``: one file per finished student, written atomically
  (temp file + ``os.replace``). It is the commit point: a student with a result whose
  fingerprint matches the submission is not graded again, so a killed run resumes where it
  stopped and a student is never counted twice.
- ``OUT_DIR/gradebook.db``: the class's nbgrader gradebook, **updated in place** at the end of
  every run: cell definitions from the source, students (display name, LMS id), submission
  times (from trusted sources only, ``times.py``; none when unknown), autograded scores and
  nbgrader's late penalty (also for a submission Canvas marked late without a time). Only
  ``auto_score`` (and ``needs_manual_grade`` where no manual score is set) is ever written to
  a grade: manual scores, extra credit and comments entered in formgrader are never touched.
  When a regrade changes the autograded score under a manual score, the run says so (stderr
  and the CSV's ``review`` column).
- ``OUT_DIR/grades.csv``: rewritten (atomically) from the results and the gradebook after
  every student, and at the start of every run: a kill between a student's result file and
  the CSV rewrite leaves the CSV behind by that student (never ahead), and the next run puts
  it back. ``points`` is the final score (the manual score when one is set, else the
  autograded one, plus extra credit); ``auto_points`` and ``manual_points`` show both parts.
  ``late_by`` is how late (``1 day, 0:30:00``), ``late (marked by Canvas)``, ``submission
  time unknown`` (a due date but no trusted time: no penalty) or empty (on time, or no due
  date); ``late_penalty`` is the gradebook's, per notebook.
- ``OUT_DIR/nbgrader_config.py``, ``source/<assignment>/``, ``autograded/<student>/
  <assignment>/<nb>.ipynb``, ``feedback/<student>/<assignment>/<nb>.html``: nbgrader's
  layout, what formgrader reads.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from ..gradebook import quiet_sqlalchemy
from .exports import cell as csv_cell
from .times import Timing, lateness

# Contract B: the first six keep their meaning (``points`` = final score); the rest may be
# empty (a writer fills what it knows).
COLUMNS = [
    "student", "notebook", "exercise", "points", "max_points", "status", "diagnosis",
    "name", "lms_id", "auto_points", "manual_points", "extra_credit", "comment",
    "flagged", "submitted_at", "due", "late_by", "late_penalty", "review",
]
EXCHANGE = "exchange"  # nbgrader's exchange, inside OUT_DIR (nothing outside it is written)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fmt(x) -> str:
    """Points as the CSV shows them: ``_fmt(2.0) == '2'``, ``_fmt(None) == ''``."""
    return "" if x is None else f"{float(x):g}"


def parse_due(items: list[str]) -> dict[str, datetime]:
    """``["01_attention=2026-12-01T23:59+01:00"]`` -> {assignment: tz-aware due date}.

    A date without a time zone is read as UTC.

    >>> parse_due(["a=2026-12-01T23:59+01:00"])["a"].isoformat()
    '2026-12-01T22:59:00+00:00'
    """
    due = {}
    for item in items:
        name, sep, when = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--due wants ASSIGNMENT=DATE, got {item!r}")
        t = datetime.fromisoformat(when.strip())
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        due[name.strip()] = t.astimezone(UTC)
    return due


def _utc_naive(t: datetime | str | None) -> datetime | None:
    """nbgrader stores naive UTC datetimes."""
    if t is None or t == "":
        return None
    if isinstance(t, str):
        t = datetime.fromisoformat(t)
    if t.tzinfo is not None:
        t = t.astimezone(UTC).replace(tzinfo=None)
    return t


def write_course_config(out: Path, config, late_penalty: str) -> None:
    """OUT_DIR/nbgrader_config.py: the graders' course config, rooted at OUT_DIR.

    Formgrader and ``nbgrader export`` started in OUT_DIR (``bootstrap lab --instructor``)
    read it: the gradebook and folders are OUT_DIR's, the exchange lives inside it.
    """
    from .course import write_config

    write_config(out, config)  # the grading run's GradeConfig
    extra = [
        f"c.Exchange.root = {str(out / EXCHANGE)!r}",
        f"c.LateSubmissionPlugin.penalty_method = {late_penalty!r}",
        # `nbgrader export` keeps 'not graded' apart from 0 (see export_csv.NotGradedCsvExport)
        "c.ExportApp.plugin_class = 'autograder.grading.parent.export_csv.NotGradedCsvExport'",
    ]
    path = out / "nbgrader_config.py"
    path.write_text(path.read_text() + "\n".join(extra) + "\n")
    (out / EXCHANGE).mkdir(exist_ok=True)


def publish_source(template: Path, out: Path, assignments: list[str]) -> None:
    """Copy the template's ``source/<assignment>/`` into OUT_DIR (formgrader lists them)."""
    for a in assignments:
        dest = out / "source" / a
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(template / "source" / a, dest)


def publish_student(root: Path, out: Path, student: str, assignments: list[str]) -> None:
    """Copy a student's submitted and autograded notebooks from its grading folder ``root``
    into OUT_DIR (an older grading's copy is replaced).

    ``OUT_DIR/autograded/<student>/<assignment>/<nb>.ipynb`` is where formgrader's manual
    grading page reads them. The ``timestamp.txt`` of ``submitted/<student>/<assignment>/`` is
    written with the gradebook's submission time (:meth:`ResultStore.write_gradebook`).
    """
    for a in assignments:
        for kind in ("submitted", "autograded"):
            dest = out / kind / student / a
            if dest.exists():
                shutil.rmtree(dest)
            src = root / kind / student / a
            if src.is_dir():
                shutil.copytree(src, dest, ignore=shutil.ignore_patterns("timestamp.txt"))


def _write_timestamp(out: Path, student: str, assignment: str, at: datetime | None) -> None:
    """Formgrader counts a submission as autograded only when the ``timestamp.txt`` of
    ``submitted/<student>/<assignment>/`` equals the gradebook's submission time: both are
    written from the same time (none when unknown)."""
    folder = out / "submitted" / student / assignment
    if not folder.is_dir():
        return
    stamp = folder / "timestamp.txt"
    if at is None:
        stamp.unlink(missing_ok=True)
    else:
        stamp.write_text(at.astimezone(UTC).isoformat())


def _path_safe(name: str) -> str:
    """A display name as one folder name: letters of every script kept, separators dropped.

    >>> _path_safe("José / Núñez")
    'José Núñez'
    """
    kept = "".join(ch for ch in name if ch.isprintable() and ch not in '/\\:*?"<>|')
    return " ".join(kept.split()).strip(". ")


def write_returns(out: Path, results: dict[str, dict], students: list[str]) -> Path:
    """Feedback laid out to give back: ``OUT_DIR/return/`` (rebuilt every run).

    - ``return/<display name> (<student>)/<assignment>/<nb>.html``: one folder per student;
    - ``return/moodle/<assignment>.zip``: Moodle's "Upload multiple feedback files in a
      zip": one folder per student named ``<full name>_<participant id>_assignfeedback_file``
      (Moodle reads the id after the first ``_`` and the plugin from the next two parts, so
      underscores in the name are replaced by spaces); only students whose Moodle download
      gave the participant id (``lms_id``, digits) are in it.
    """
    import zipfile

    root = out / "return"
    tmp = out / ".return.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    zips: dict[str, zipfile.ZipFile] = {}
    try:
        for sid in sorted(s for s in students if s in results):
            r = results[sid]
            name = _path_safe(r.get("name", ""))
            folder = tmp / (f"{name} ({sid})" if name and name != sid else sid)
            lms_id = str(r.get("lms_id", ""))
            for rel in r.get("feedback", []):
                src = out / rel
                parts = Path(rel).parts  # feedback/<student>/<assignment>/<nb>.html
                if not src.is_file() or len(parts) != 4:
                    continue
                assignment, page = parts[2], parts[3]
                dest = folder / assignment / page
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)
                if lms_id.isdigit():
                    if assignment not in zips:
                        (tmp / "moodle").mkdir(exist_ok=True)
                        zips[assignment] = zipfile.ZipFile(
                            tmp / "moodle" / f"{assignment}.zip", "w", zipfile.ZIP_DEFLATED)
                    full = " ".join((name or sid).replace("_", " ").split())
                    zips[assignment].write(src, f"{full}_{lms_id}_assignfeedback_file/{page}")
    finally:
        for z in zips.values():
            z.close()
    shutil.rmtree(root, ignore_errors=True)
    os.replace(tmp, root)
    return root


class ResultStore:
    def __init__(self, out: Path):
        self.out = out
        self.dir = out / "results"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.gradebook = out / "gradebook.db"
        # set by course-grade: (notebook, test cell) -> the answer cells it grades (their
        # formgrader comments go into the CSV), and notebook -> assignment (its due date)
        self.exercises: dict[tuple[str, str], list[str]] = {}
        self.assignment_of: dict[str, str] = {}

    def load(self) -> dict[str, dict]:
        results = {}
        for p in sorted(self.dir.glob("*.json")):
            try:
                r = json.loads(p.read_text())
            except (OSError, ValueError):
                continue  # an unfinished write never has the final name; be safe anyway
            results[r["student"]] = r
        return results

    def prune(self, students: list[str]) -> list[str]:
        """Remove ``students`` from the class on purpose (``course-grade --prune``): their
        results, notebooks and feedback in OUT_DIR and their gradebook entries (manual scores
        included). Returns what could not be removed."""
        problems = []
        for sid in students:
            (self.dir / f"{sid}.json").unlink(missing_ok=True)
            for kind in ("submitted", "autograded", "feedback"):
                shutil.rmtree(self.out / kind / sid, ignore_errors=True)
        if self.gradebook.exists():
            from nbgrader.api import Gradebook, MissingEntry

            from ..nbgrader_patches import use_cached_head

            use_cached_head()
            with quiet_sqlalchemy(), Gradebook(f"sqlite:///{self.gradebook}") as gb:
                for sid in students:
                    try:
                        gb.remove_student(sid)
                    except MissingEntry:
                        pass
                    except Exception as e:  # noqa: BLE001 - say so; the rest is removed
                        problems.append(f"--prune: {sid} stays in the gradebook ({e})")
        return problems

    def save(self, result_json: str, student: str,
             timing: dict[str, Timing] | None = None) -> None:
        """Write a student's result; ``timing`` ({assignment: Timing}, what this run's intake
        knows of the submission's time) is kept in it as ``timing``."""
        if timing is not None:
            r = json.loads(result_json)
            r["timing"] = {a: t.as_json() for a, t in sorted(timing.items())}
            result_json = json.dumps(r, indent=1)
        _atomic_write(self.dir / f"{student}.json", result_json)

    def record_timing(self, timing: dict[str, dict[str, Timing]]) -> None:
        """Keep this run's submission times ({student: {assignment: Timing}}) in the stored
        results whose times differ: a time given on a later run (``--submitted-at``) counts
        for students graded before, and a student absent from a later run keeps theirs."""
        for sid, r in self.load().items():
            if sid in timing and r.get("timing") != {
                    a: t.as_json() for a, t in sorted(timing[sid].items())}:
                self.save(json.dumps(r, indent=1), sid, timing[sid])

    # ---- what the instructor entered (read straight from the gradebook, read-only) ---------

    def read_gradebook(self) -> dict:
        """{'grades': {(student, nb, cell): (auto, manual, extra)}, 'comments': {(student, nb,
        cell): text}, 'penalty': {(student, nb): p}, 'due': {assignment: datetime}}."""
        found = {"grades": {}, "comments": {}, "penalty": {}, "due": {}}
        if not self.gradebook.exists():
            return found
        con = sqlite3.connect(f"file:{self.gradebook}?mode=ro", uri=True)
        try:
            q = """SELECT st.id, n.name, c.name, {cols} FROM {table} g
                   JOIN submitted_notebook sn ON g.notebook_id = sn.id
                   JOIN notebook n ON sn.notebook_id = n.id
                   JOIN base_cell c ON g.cell_id = c.id
                   JOIN submitted_assignment sa ON sn.assignment_id = sa.id
                   JOIN student st ON sa.student_id = st.id"""
            for s, nb, cell, auto, manual, extra in con.execute(
                    q.format(cols="g.auto_score, g.manual_score, g.extra_credit", table="grade")):
                found["grades"][(s, nb, cell)] = (auto, manual, extra)
            for s, nb, cell, text in con.execute(
                    q.format(cols="g.manual_comment", table="comment")):
                if text:
                    found["comments"][(s, nb, cell)] = text
            for s, nb, p in con.execute(
                    """SELECT st.id, n.name, sn.late_submission_penalty FROM submitted_notebook sn
                       JOIN notebook n ON sn.notebook_id = n.id
                       JOIN submitted_assignment sa ON sn.assignment_id = sa.id
                       JOIN student st ON sa.student_id = st.id"""):
                found["penalty"][(s, nb)] = p
            for name, due in con.execute("SELECT name, duedate FROM assignment"):
                if due:
                    found["due"][name] = datetime.fromisoformat(str(due)).replace(
                        tzinfo=UTC)
        except sqlite3.Error:
            pass  # a gradebook of another shape: no manual data, the run rewrites nothing
        finally:
            con.close()
        return found

    def write_csv(self, students: list[str] | None = None,
                  exercises: dict[tuple[str, str], list[str]] | None = None,
                  assignment_of: dict[str, str] | None = None,
                  rows: list[dict] | None = None) -> Path:
        """grades.csv from the stored results and the gradebook (only ``students`` when
        given), sorted by student: :meth:`final_rows`, or ``rows`` when given (already made).
        """
        if rows is None:
            rows = self.final_rows(students, exercises, assignment_of)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=COLUMNS, restval="", extrasaction="ignore",
                           lineterminator="\n")
        w.writeheader()
        for out in rows:
            w.writerow({k: csv_cell(v) for k, v in out.items()})  # no formula runs on open
        path = self.out / "grades.csv"
        _atomic_write(path, buf.getvalue())
        return path

    def final_rows(self, students: list[str] | None = None,
                   exercises: dict[tuple[str, str], list[str]] | None = None,
                   assignment_of: dict[str, str] | None = None) -> list[dict]:
        """grades.csv's rows (dicts keyed by ``COLUMNS``) from the stored results and the
        gradebook: ``points`` is the final score (the manual score where set, plus extra
        credit).

        ``exercises`` maps (notebook, test cell) to the answer cells it grades (their
        formgrader comments go into ``comment``); ``assignment_of`` maps a notebook to its
        assignment (for its due date). The submission time and the LMS's late mark are the
        result's ``timing`` (:meth:`save`; none known where absent).
        """
        results = self.load()
        gb = self.read_gradebook()
        exercises = exercises or self.exercises
        assignment_of = assignment_of or self.assignment_of
        found = []
        for sid in sorted(results):
            if students is not None and sid not in students:
                continue
            r = results[sid]
            for row in r["rows"]:
                out = {k: row.get(k, "") for k in COLUMNS}
                out["name"] = row.get("name") or r.get("name", "")
                out["lms_id"] = row.get("lms_id") or r.get("lms_id", "")
                nb, ex = row["notebook"], row["exercise"]
                auto = row["points"]
                _, manual, extra = gb["grades"].get((sid, nb, ex), (None, None, None))
                out["auto_points"] = auto
                out["manual_points"] = _fmt(manual)
                out["extra_credit"] = _fmt(extra)
                if manual is not None:
                    out["points"] = _fmt(manual + (extra or 0))
                elif auto != "" and extra:
                    out["points"] = _fmt(float(auto) + extra)
                out["comment"] = " | ".join(
                    gb["comments"][(sid, nb, c)] for c in exercises.get((nb, ex), [])
                    if (sid, nb, c) in gb["comments"])
                assignment = assignment_of.get(nb, nb)
                when = _timing(r, assignment)
                out["submitted_at"] = when.at.isoformat() if when.at else ""
                due = gb["due"].get(assignment)
                out["due"] = due.isoformat() if due else ""
                out["late_by"], seconds = lateness(when, due)
                out["late_penalty"] = _fmt(gb["penalty"].get((sid, nb))) if seconds > 0 else ""
                found.append(out)
        return found

    # ---- the class gradebook, updated in place ---------------------------------------------

    def write_gradebook(self, template: Path, students: list[str], *,
                        subs: dict | None = None, due: dict[str, datetime] | None = None,
                        late_penalty: str = "none") -> list[str]:
        """Bring OUT_DIR/gradebook.db up to date with the template and the results.

        Created from the template's gradebook the first time; afterwards updated in place:
        assignment/notebook/cell definitions (``update_or_create``), students' display names
        and LMS ids, submission times (the results' ``timing``: none where unknown, a time
        an older run stored included), autograded scores, late penalties (nbgrader's
        ``LateSubmissionPlugin`` with ``late_penalty``, against the submission's due date,
        an extension set in formgrader included; a submission the LMS marked late without a
        time is late by an unknown amount). Manual scores, extra credit and comments are
        never written. ``due`` sets assignments' due dates (others keep theirs).
        Returns one message per grade whose autograded score changed under a manual score
        (also stored as the row's ``review`` in the student's result).
        """
        from nbgrader.api import Gradebook, MissingEntry
        from nbgrader.plugins import LateSubmissionPlugin

        from ..nbgrader_patches import use_cached_head

        use_cached_head()  # a new gradebook is stamped with the schema head

        results = self.load()
        subs = subs or {}
        fresh = not self.gradebook.exists()
        target = self.out / ".gradebook.db.tmp" if fresh else self.gradebook
        if fresh:
            shutil.copyfile(template / "gradebook.db", target)
        changed: dict[str, list[tuple[int, str]]] = {}
        plugin = LateSubmissionPlugin(penalty_method=late_penalty)
        with quiet_sqlalchemy(), Gradebook(f"sqlite:///{target}") as gb, \
                Gradebook(f"sqlite:///{template / 'gradebook.db'}") as tg:
            _sync_definitions(tg, gb)
            for name, when in (due or {}).items():
                try:
                    gb.find_assignment(name).duedate = _utc_naive(when)
                except MissingEntry:
                    pass
            gb.db.commit()
            nb_to_assignment = {nb.name: a.name for a in gb.assignments for nb in a.notebooks}
            for sid in sorted(s for s in students if s in results):
                r = results[sid]
                sub = subs.get(sid)
                name = getattr(sub, "name", "") or r.get("name", "")
                lms_id = getattr(sub, "lms_id", "") or r.get("lms_id", "")
                known = {}  # only what the layout gave: a name typed in formgrader stays
                if name:
                    known.update(last_name=name, first_name="")
                if lms_id:
                    known["lms_user_id"] = lms_id
                gb.update_or_create_student(sid, **known)
                seen = set()
                for i, row in enumerate(r["rows"]):
                    assignment = nb_to_assignment.get(row["notebook"])
                    if assignment is None:
                        continue
                    if assignment not in seen:
                        seen.add(assignment)
                        at = _timing(r, assignment).at
                        s = gb.update_or_create_submission(assignment, sid,
                                                           timestamp=_utc_naive(at))
                        _complete_submission(gb, s)
                        _write_timestamp(self.out, sid, assignment, at)
                    grade = gb.find_grade(row["exercise"], row["notebook"], assignment, sid)
                    auto = float(row["points"]) if row["points"] != "" else None
                    if grade.manual_score is not None and grade.auto_score != auto and \
                            not (grade.auto_score is None and auto is None):
                        msg = (f"autograded score changed {_fmt(grade.auto_score) or 'none'} -> "
                               f"{_fmt(auto) or 'none'} under manual score "
                               f"{_fmt(grade.manual_score)}: review it")
                        changed.setdefault(sid, []).append((i, msg))
                    grade.auto_score = auto
                    grade.needs_manual_grade = auto is None and grade.manual_score is None
                gb.db.commit()
                for assignment in seen:  # nbgrader's own late penalty, as AssignLatePenalties
                    s = gb.find_submission(assignment, sid)
                    _, seconds = lateness(_timing(r, assignment), s.duedate)
                    for nb in s.notebooks:
                        nb.late_submission_penalty = (
                            plugin.late_submission_penalty(sid, nb.score, seconds)
                            if seconds > 0 else None)
                gb.db.commit()
        if fresh:
            os.replace(target, self.gradebook)
        messages = []
        for sid, items in changed.items():
            r = results[sid]
            for i, msg in items:
                r["rows"][i]["review"] = msg
                messages.append(f"{sid} {r['rows'][i]['notebook']} "
                                f"{r['rows'][i]['exercise']}: {msg}")
            self.save(json.dumps(r, indent=1), sid)
        return messages


def _timing(result: dict, assignment: str) -> Timing:
    """What a stored result says of the submission time of ``assignment`` (none known in a
    result written before times came from trusted sources only)."""
    return Timing.from_json((result.get("timing") or {}).get(assignment))


def _sync_definitions(src, dst) -> None:
    """Create or update in ``dst`` every assignment, notebook and cell of ``src`` (both
    nbgrader Gradebooks), as ``nbgrader generate_assignment`` would; nothing is removed."""
    for a in src.assignments:
        dst.update_or_create_assignment(a.name)
        for nb in a.notebooks:
            dst.update_or_create_notebook(nb.name, a.name)
            for c in nb.grade_cells:
                dst.update_or_create_grade_cell(c.name, nb.name, a.name, max_score=c.max_score,
                                                cell_type=c.cell_type)
            for c in nb.solution_cells:
                dst.update_or_create_solution_cell(c.name, nb.name, a.name)
            for c in nb.task_cells:
                dst.update_or_create_task_cell(c.name, nb.name, a.name, max_score=c.max_score,
                                               cell_type=c.cell_type)
            for c in nb.source_cells:
                dst.update_or_create_source_cell(c.name, nb.name, a.name, cell_type=c.cell_type,
                                                 locked=c.locked, source=c.source,
                                                 checksum=c.checksum)
    dst.db.commit()


def _complete_submission(gb, submission) -> None:
    """Give an existing submission the notebooks, grades and comments of cells added to the
    source since it was made (``add_submission`` does this only once)."""
    from nbgrader.api import Comment, Grade, SubmittedNotebook

    have = {nb.notebook_id: nb for nb in submission.notebooks}
    for notebook in submission.assignment.notebooks:
        snb = have.get(notebook.id) or SubmittedNotebook(notebook=notebook,
                                                         assignment=submission)
        graded = {g.cell_id for g in snb.grades}
        commented = {c.cell_id for c in snb.comments}
        for cell in list(notebook.grade_cells) + list(notebook.task_cells):
            if cell.id not in graded:
                Grade(cell_id=cell.id, notebook=snb)
        for cell in list(notebook.solution_cells) + list(notebook.task_cells):
            if cell.id not in commented:
                Comment(cell_id=cell.id, notebook=snb)
    gb.db.commit()


def __getattr__(name: str):
    # the plugin's old place, which OUT_DIR/nbgrader_config.py files written before named:
    # nbgrader (traitlets' import_item) finds it here still, without this module importing
    # nbgrader when course-grade starts
    if name == "NotGradedCsvExport":
        from .export_csv import NotGradedCsvExport

        return NotGradedCsvExport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
