"""The grading run's own state, written only by the trusted parent process.

``OUT_DIR`` is a real nbgrader course directory (so stock nbgrader works on it: formgrader,
``nbgrader export``); the grader adds ``results/`` and ``grades.csv``:

- ``OUT_DIR/results/<student>.json``: one file per finished student, written atomically
  (temp file + ``os.replace``). It is the commit point: a student with a result whose
  fingerprint matches the submission is not graded again, so a killed run resumes where it
  stopped and a student is never counted twice.
- ``OUT_DIR/gradebook.db``: the class's nbgrader gradebook, **updated in place** at the end of
  every run (:meth:`ResultStore.write_gradebook`). Only ``auto_score`` and
  ``needs_manual_grade`` are ever written to a grade: manual scores, extra credit and
  comments entered in formgrader are never touched. Work not handed in has no submission.
- ``OUT_DIR/reviews.json``: the reviews pending. When a regrade changes the autograded score
  under a manual score, the grade is flagged ``needs_manual_grade`` and the change is kept
  here; every later run says so until the instructor saves or resolves that score in
  formgrader (which clears the flag) or gives another manual score.
- ``OUT_DIR/grades.csv``: rewritten (atomically) from the results and the gradebook after
  every student and at the start of every run, so it is never ahead of the results.
  ``points`` is the final score (the manual score when set, else the autograded one, plus
  extra credit); ``late_by`` is how late, ``late (marked by Canvas)``, ``submission time
  unknown`` (no penalty) or empty.
- ``OUT_DIR/nbgrader_config.py``, ``source/<assignment>/``, ``autograded/<student>/
  <assignment>/<nb>.ipynb``, ``feedback/<student>/<assignment>/<nb>.html``: nbgrader's
  layout, what formgrader reads. Of ``source/`` and ``submitted/`` only the folders
  course-grade made are ever replaced or removed (``ledger.ours``): in an instructor's
  nbgrader course folder, those nbgrader made stay as they are.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from ..gradebook import LatePolicy, quiet_sqlalchemy
from ..status import Kind, row_kind
from .exports import cell as csv_cell
from .exports import lms_of
from .times import WITHIN_GRACE, Timing, lateness, naive_utc, utc

# Contract B: the first six keep their meaning (``points`` = final score); the rest may be
# empty (a writer fills what it knows).
COLUMNS = [
    "student", "notebook", "exercise", "points", "max_points", "status", "diagnosis",
    "name", "lms_id", "auto_points", "manual_points", "extra_credit", "comment",
    "flagged", "submitted_at", "due", "late_by", "late_penalty", "review", "sis_id", "kind",
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
    example = "e.g. --due 01_attention=2026-12-01T23:59+01:00 (ISO 8601; no zone: UTC)"
    due = {}
    for item in items:
        name, sep, when = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--due wants ASSIGNMENT=DATE, got {item!r}; {example}")
        try:
            t = datetime.fromisoformat(when.strip())
        except ValueError:
            raise ValueError(f"--due {item}: {when.strip()!r} is not an ISO 8601 date; "
                             f"{example}") from None
        due[name.strip()] = utc(t)
    return due


def write_course_config(out: Path, config, late_penalty: str | LatePolicy) -> list[str]:
    """OUT_DIR/nbgrader_config.py, rooted at OUT_DIR, for formgrader and ``nbgrader export``.
    One course-grade did not write (an instructor's nbgrader course folder) is never changed:
    the lines it lacks are returned for the instructor to add ([] otherwise)."""
    from .course import write_config, written_by_us

    policy = late_penalty if isinstance(late_penalty, LatePolicy) else \
        LatePolicy.parse(late_penalty)
    penalty, floor, grace = policy.text  # nbgrader's autograde then penalises as course-grade
    extra = [
        "c.AssignLatePenalties.plugin_class = 'autograder.grading.gradebook.LatePolicyPlugin'",
        f"c.LatePolicyPlugin.penalty = {penalty!r}",
        f"c.LatePolicyPlugin.floor = {floor!r}",
        f"c.LatePolicyPlugin.grace = {grace!r}",
        "try:  # formgrader's scores less the late penalty, as the exports",
        "    from autograder.grading.gradebook import show_penalised_scores",
        "    show_penalised_scores()",
        "except ImportError:  # nbgrader without course-grade: its raw scores",
        "    pass",
        # `nbgrader export` keeps 'not graded' apart from 0 (see export_csv.NotGradedCsvExport)
        "c.ExportApp.plugin_class = 'autograder.grading.parent.export_csv.NotGradedCsvExport'",
    ]
    path = out / "nbgrader_config.py"
    if not written_by_us(path):
        text = path.read_text(errors="replace")
        return extra if any(line not in text for line in extra) else []
    write_config(out, config)  # the grading run's GradeConfig
    extra.insert(0, f"c.Exchange.root = {str(out / EXCHANGE)!r}")
    path.write_text(path.read_text() + "\n".join(extra) + "\n")
    (out / EXCHANGE).mkdir(exist_ok=True)
    return []


def publish_source(template: Path, out: Path, assignments: list[str]) -> list[str]:
    """Copy the template's ``source/<assignment>/`` into OUT_DIR (formgrader lists them);
    returns the assignments whose ``source/<assignment>/`` course-grade did not make (the
    instructor's: ``ledger.ours``), left as they are."""
    from .ledger import made, ours

    theirs = [a for a in assignments if not ours(out, f"source/{a}")]
    for a in [a for a in assignments if a not in theirs]:
        made(out, [f"source/{a}"])
        dest = out / "source" / a
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(template / "source" / a, dest)
    return theirs


def publish_student(root: Path, out: Path, student: str, assignments: list[str]) -> None:
    """Copy a student's submitted and autograded notebooks from its grading folder ``root``
    into OUT_DIR, replacing an older copy; an assignment not handed in gets no folder
    (formgrader counts the folders of ``submitted/`` as submissions)."""
    for a in assignments:
        handed_in = any((root / "submitted" / student / a).glob("*.ipynb"))
        for kind in ("submitted", "autograded"):
            dest = out / kind / student / a
            if dest.exists():
                shutil.rmtree(dest)
            src = root / kind / student / a
            if handed_in and src.is_dir():
                shutil.copytree(src, dest, ignore=shutil.ignore_patterns("timestamp.txt"))


def _write_timestamp(out: Path, student: str, assignment: str, at: datetime | None) -> None:
    """``submitted/<student>/<assignment>/timestamp.txt``: formgrader wants it equal to the
    gradebook's submission time."""
    from .ledger import ours

    folder = out / "submitted" / student / assignment
    if not folder.is_dir() or not ours(out, f"submitted/{student}/{assignment}"):
        return  # nbgrader collect's: its own timestamp.txt
    stamp = folder / "timestamp.txt"
    if at is None:
        stamp.unlink(missing_ok=True)
    else:
        stamp.write_text(at.astimezone(UTC).isoformat())


REVIEWS = "reviews.json"  # the reviews pending, in OUT_DIR: a list of review entries


def review_text(entry: dict) -> str:
    """The ``review`` of a grade whose autograded score changed under its manual score: the
    autograded scores seen since the manual score was given, oldest first.

    >>> review_text({"manual": 0.5, "scores": [0.0, 1.0]})
    'autograded score changed 0 -> 1 under manual score 0.5: review it (save or Resolve)'
    >>> review_text({"manual": 2.0, "scores": [1.0, None, 1.5]})[:58]
    'autograded score changed 1 -> none -> 1.5 under manual sco'
    """
    chain = " -> ".join(_fmt(x) or "none" for x in entry["scores"])
    return (f"autograded score changed {chain} under manual score {_fmt(entry['manual'])}: "
            "review it (save or Resolve)")  # formgrader's two ways to clear it


def _pending(entry: dict | None, manual, needs_manual_grade) -> bool:
    """Whether a stored review still waits: formgrader clears ``needs_manual_grade`` when it
    saves a score; another manual score answers it too."""
    return entry is not None and bool(needs_manual_grade) and manual == entry["manual"]


def _path_safe(name: str) -> str:
    """A display name as one folder name: letters of every script kept, separators dropped.

    >>> _path_safe("José / Núñez")
    'José Núñez'
    """
    kept = "".join(ch for ch in name if ch.isprintable() and ch not in '/\\:*?"<>|')
    return " ".join(kept.split()).strip(". ")


def _zip(zips: dict, tmp: Path, lms: str, assignment: str):
    """The open ``tmp/<lms>/<assignment>.zip``, created on first use."""
    import zipfile

    if (lms, assignment) not in zips:
        (tmp / lms).mkdir(exist_ok=True)
        zips[lms, assignment] = zipfile.ZipFile(tmp / lms / f"{assignment}.zip", "w",
                                                zipfile.ZIP_DEFLATED)
    return zips[lms, assignment]


def write_returns(out: Path, results: dict[str, dict], students: list[str]) -> Path:
    """Feedback laid out to give back: ``OUT_DIR/return/`` (rebuilt every run).

    - ``return/<display name> (<student>)/<assignment>/<nb>.html``: one folder per student;
    - ``return/moodle/<assignment>.zip``: Moodle's "Upload multiple feedback files in a
      zip", folders ``<full name>_<participant id>_assignfeedback_file`` (no ``_`` in the
      name: Moodle splits on it), for students with a Moodle participant id;
    - ``return/canvas/<assignment>.zip``: Canvas's "Re-Upload Submissions", each page named
      with the prefix Canvas gave the student's file (``lovelaceada_1001_5000_``), for
      students whose notebook came from a Canvas download.
    """
    root = out / "return"
    tmp = out / ".return.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    zips: dict = {}  # (lms, assignment) -> its open zip
    try:
        for sid in sorted(s for s in students if s in results):
            r = results[sid]
            name = _path_safe(r.get("name", ""))
            folder = tmp / (f"{name} ({sid})" if name and name != sid else sid)
            lms_id = str(r.get("lms_id", ""))
            # a result stored before ``lms`` was kept: a Moodle id is digits, as it was read
            moodle = r.get("lms", "moodle" if lms_id.isdigit() else "") == "moodle"
            canvas = r.get("canvas") or {}
            for rel in r.get("feedback", []):
                src = out / rel
                parts = Path(rel).parts  # feedback/<student>/<assignment>/<nb>.html
                if not src.is_file() or len(parts) != 4:
                    continue
                assignment, page = parts[2], parts[3]
                dest = folder / assignment / page
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)
                pid = (r.get("moodle") or {}).get(assignment, lms_id)  # that download's id
                if moodle and pid.isdigit():
                    full = " ".join((name or sid).replace("_", " ").split())
                    _zip(zips, tmp, "moodle", assignment).write(
                        src, f"{full}_{pid}_assignfeedback_file/{page}")
                if prefix := canvas.get(assignment):
                    _zip(zips, tmp, "canvas", assignment).write(src, f"{prefix}_{page}")
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
        self.reviews = out / REVIEWS
        # set by course-grade: (notebook, test cell) -> the answer cells it grades (their
        # formgrader comments go into the CSV), and notebook -> assignment (its due date)
        self.exercises: dict[tuple[str, str], list[str]] = {}
        self.assignment_of: dict[str, str] = {}
        # set by course-grade: what this run's intake knows of each student (names, LMS and
        # SIS ids, Canvas file names: ``submissions.intake_facts``), kept in their results
        self.people: dict[str, dict] = {}
        self.grace = 0.0  # set by course-grade: the late policy's grace period, seconds

    def load(self) -> dict[str, dict]:
        return load_results(self.out)

    def prune(self, students: list[str]) -> list[str]:
        """Remove ``students`` from the class on purpose (``course-grade --prune``): their
        results, notebooks and feedback in OUT_DIR and their gradebook entries (manual scores
        included). Returns what could not be removed."""
        from .ledger import forget, ours

        problems = []
        for sid in students:
            (self.dir / f"{sid}.json").unlink(missing_ok=True)
            for kind in ("autograded", "feedback"):
                shutil.rmtree(self.out / kind / sid, ignore_errors=True)
            mine = [f"submitted/{sid}/{p.name}" for p in (self.out / "submitted" / sid).glob("*")
                    if ours(self.out, f"submitted/{sid}/{p.name}")]  # not nbgrader collect's
            for rel in mine:
                shutil.rmtree(self.out / rel, ignore_errors=True)
            forget(self.out, mine)
            with contextlib.suppress(OSError):
                (self.out / "submitted" / sid).rmdir()  # empty: every folder was course-grade's
        reviews = self._read_reviews()
        if any(key[0] in students for key in reviews):
            self._write_reviews({k: e for k, e in reviews.items() if k[0] not in students})
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
        knows of the submission's time) is kept in it as ``timing``, and :attr:`people`'s
        entry for the student (a roster given on a later run renames them)."""
        if timing is not None or student in self.people:
            r = json.loads(result_json)
            r.update(self._facts(r, student, timing))
            result_json = json.dumps(r, indent=1)
        _atomic_write(self.dir / f"{student}.json", result_json)

    def _facts(self, r: dict, student: str, timing: dict[str, Timing] | None) -> dict:
        """What :meth:`save` writes into ``r``: :attr:`people`'s entry and ``timing``, over
        what ``r`` holds of assignments this run does not name."""
        facts = dict(self.people.get(student, {}))
        for lms in ("canvas", "moodle"):  # {assignment: its download's name or id}
            if lms in facts:
                facts[lms] = {**(r.get(lms) or {}), **facts[lms]}
        if timing is not None:
            facts["timing"] = dict(sorted({**(r.get("timing") or {}), **{
                a: t.as_json() for a, t in timing.items()}}.items()))
        return facts

    def read(self, student: str) -> dict | None:
        """The stored result of ``student`` (None when there is none)."""
        try:
            return json.loads((self.dir / f"{student}.json").read_text())
        except (OSError, ValueError):
            return None

    def record_timing(self, timing: dict[str, dict[str, Timing]]) -> None:
        """Keep this run's submission times ({student: {assignment: Timing}}) and
        :attr:`people`'s entries in the stored results where they differ."""
        for sid, r in self.load().items():
            if sid in timing and any(r.get(k) != v for k, v in
                                     self._facts(r, sid, timing[sid]).items()):
                self.save(json.dumps(r, indent=1), sid, timing[sid])

    def _read_reviews(self) -> dict[tuple[str, str, str], dict]:
        """OUT_DIR/reviews.json: {(student, notebook, exercise): entry}; an entry is
        ``{"student", "notebook", "exercise", "manual": the manual score reviewed, "scores":
        [the autograded scores seen since, oldest first]}``."""
        try:
            return {(e["student"], e["notebook"], e["exercise"]): e
                    for e in json.loads(self.reviews.read_text())}
        except (OSError, ValueError, KeyError, TypeError):
            return {}  # none yet (a file of another shape is ours to rewrite)

    def _write_reviews(self, reviews: dict[tuple[str, str, str], dict]) -> None:
        _atomic_write(self.reviews, json.dumps([reviews[k] for k in sorted(reviews)], indent=1))

    # ---- what the instructor entered (read straight from the gradebook, read-only) ---------

    def read_gradebook(self) -> dict:
        """{'grades': {(student, nb, cell): (auto, manual, extra)}, 'comments': {(student, nb,
        cell): text}, 'penalty': {(student, nb): p}, 'due': {assignment: datetime}, 'review':
        {(student, nb, cell): text of a review still pending}, 'extension': {(student,
        assignment): timedelta}}."""
        found = {"grades": {}, "comments": {}, "penalty": {}, "due": {}, "review": {},
                 "extension": {}}
        if not self.gradebook.exists():
            return found
        reviews = self._read_reviews()
        con = sqlite3.connect(f"file:{self.gradebook}?mode=ro", uri=True)
        try:
            student = """JOIN submitted_assignment sa ON sn.assignment_id = sa.id
                         JOIN student st ON sa.student_id = st.id"""
            q = """SELECT st.id, n.name, c.name, {cols} FROM {table} g
                   JOIN submitted_notebook sn ON g.notebook_id = sn.id
                   JOIN notebook n ON sn.notebook_id = n.id
                   JOIN base_cell c ON g.cell_id = c.id """ + student
            for s, nb, cell, auto, manual, extra, needs in con.execute(q.format(
                    cols="g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade",
                    table="grade")):
                found["grades"][(s, nb, cell)] = (auto, manual, extra)
                if _pending(entry := reviews.get((s, nb, cell)), manual, needs):
                    found["review"][(s, nb, cell)] = review_text(entry)
            for s, nb, cell, text in con.execute(
                    q.format(cols="g.manual_comment", table="comment")):
                if text:
                    found["comments"][(s, nb, cell)] = text
            for s, nb, p in con.execute(
                    """SELECT st.id, n.name, sn.late_submission_penalty FROM submitted_notebook sn
                       JOIN notebook n ON sn.notebook_id = n.id """ + student):
                found["penalty"][(s, nb)] = p
            for s, name, ext in con.execute(  # nbgrader's Interval: a time after 1970-01-01
                    """SELECT st.id, a.name, sa.extension FROM submitted_assignment sa
                       JOIN assignment a ON sa.assignment_id = a.id
                       JOIN student st ON sa.student_id = st.id
                       WHERE sa.extension IS NOT NULL"""):
                found["extension"][(s, name)] = datetime.fromisoformat(str(ext)) - \
                    datetime(1970, 1, 1)
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
        gradebook. ``exercises``: (notebook, test cell) -> the answer cells it grades (their
        comments); ``assignment_of``: notebook -> assignment (its due date)."""
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
                out["lms_id"] = row.get("lms_id") or (r.get("moodle") or {}).get(
                    assignment_of.get(row["notebook"], row["notebook"]), r.get("lms_id", ""))
                # the roster's (``--roster``); the login and section only for the exports
                out["sis_id"] = r.get("sis_id", "")
                out["sis_login"], out["section"] = r.get("sis_login", ""), r.get("section", "")
                nb, ex = row["notebook"], row["exercise"]
                auto = row["points"]
                _, manual, extra = gb["grades"].get((sid, nb, ex), (None, None, None))
                out["auto_points"] = auto
                out["manual_points"] = _fmt(manual)
                out["extra_credit"] = _fmt(extra)
                out["lms"] = lms_of(r, [])  # which LMS's file has the student (the exports)
                if manual is not None:
                    out["points"] = _fmt(manual + (extra or 0))
                elif auto != "" and extra:
                    out["points"] = _fmt(float(auto) + extra)
                out["comment"] = " | ".join(
                    gb["comments"][(sid, nb, c)] for c in exercises.get((nb, ex), [])
                    if (sid, nb, c) in gb["comments"])
                out["review"] = gb["review"].get((sid, nb, ex), "")
                assignment = assignment_of.get(nb, nb)
                when = _timing(r, assignment)
                due = gb["due"].get(assignment)
                extension = gb["extension"].get((sid, assignment))
                if due and extension:  # the student's own due date
                    due = due + extension
                out["due"] = due.isoformat() if due else ""
                out["late_by"], seconds = lateness(when, due, bool(extension))
                if 0 < seconds <= self.grace:  # on time, as the gradebook's penalty says
                    out["late_by"], seconds = f"{out['late_by']} {WITHIN_GRACE}", 0.0
                if row["kind"] == Kind.NOT_SUBMITTED:  # the time of the rest of the submission
                    when, out["late_by"], seconds = Timing(), "", 0.0
                out["submitted_at"] = when.at.isoformat() if when.at else ""
                out["late_penalty"] = _fmt(gb["penalty"].get((sid, nb))) if seconds > 0 else ""
                found.append(out)
        return found

    # ---- the class gradebook, updated in place ---------------------------------------------

    def write_gradebook(self, template: Path, students: list[str], *,
                        subs: dict | None = None, due: dict[str, datetime] | None = None,
                        late_penalty: str | LatePolicy = "none",
                        extensions=None) -> list[str]:
        """Bring OUT_DIR/gradebook.db up to date with the template and the results: a copy of
        the template's the first time, then updated in place (definitions, students' names
        and LMS ids, submission times, autograded scores, ``late_penalty``'s penalties with
        extensions included). Manual scores, extra credit and comments are never written.
        ``due`` sets due dates; ``extensions(student, assignment, due)`` gives an extension
        (None: the gradebook's stays). An assignment not handed in has no submission (one an
        older run made is removed unless the instructor entered something in it).

        Reviews (module docstring): a run never clears the flag of a grade with a manual
        score otherwise. Returns one message per review pending among ``students``.
        """
        from nbgrader.api import Gradebook, MissingEntry

        from ..nbgrader_patches import use_cached_head

        use_cached_head()  # a new gradebook is stamped with the schema head

        results = self.load()
        reviews = self._read_reviews()
        subs = subs or {}
        fresh = not self.gradebook.exists()
        target = self.out / ".gradebook.db.tmp" if fresh else self.gradebook
        if fresh:
            shutil.copyfile(template / "gradebook.db", target)
        messages = []
        policy = late_penalty if isinstance(late_penalty, LatePolicy) else \
            LatePolicy.parse(late_penalty)
        with quiet_sqlalchemy(), Gradebook(f"sqlite:///{target}") as gb, \
                Gradebook(f"sqlite:///{template / 'gradebook.db'}") as tg:
            if not fresh:  # a fresh one is a byte copy of the template's: nothing to sync
                _sync_definitions(tg, gb)
            for name, when in (due or {}).items():
                try:
                    gb.find_assignment(name).duedate = naive_utc(when)
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
                by_assignment: dict[str, list[dict]] = {}
                for row in r["rows"]:
                    if (assignment := nb_to_assignment.get(row["notebook"])) is not None:
                        by_assignment.setdefault(assignment, []).append(row)
                seen = set()
                for assignment, rows in by_assignment.items():
                    if all(row_kind(row) is Kind.NOT_SUBMITTED for row in rows) and \
                            _remove_unsubmitted(gb, self.out, assignment, sid):
                        continue
                    seen.add(assignment)
                    at = _timing(r, assignment).at
                    s = gb.update_or_create_submission(assignment, sid, timestamp=naive_utc(at))
                    if extensions is not None and (ext := extensions(
                            sid, assignment, s.assignment.duedate)) is not None:
                        s.extension = ext or None  # +0: the extension taken back
                    _complete_submission(gb, s)
                    _write_timestamp(self.out, sid, assignment, at)
                    for row in rows:
                        nb, ex = row["notebook"], row["exercise"]
                        grade = gb.find_grade(ex, nb, assignment, sid)
                        auto = float(row["points"]) if row["points"] != "" else None
                        entry = reviews.pop((sid, nb, ex), None)
                        if entry is not None and not _pending(entry, grade.manual_score,
                                                              grade.needs_manual_grade):
                            entry = None  # reviewed: the flag cleared, or another manual score
                            grade.needs_manual_grade = False  # as formgrader's save sets it
                        if grade.manual_score is not None and grade.auto_score != auto:
                            entry = entry or {"student": sid, "notebook": nb, "exercise": ex,
                                              "manual": grade.manual_score,
                                              "scores": [grade.auto_score]}
                            entry["scores"].append(auto)
                        grade.auto_score = auto
                        if entry is not None:  # formgrader shows it until saved or resolved
                            reviews[(sid, nb, ex)] = entry
                            grade.needs_manual_grade = True
                            messages.append(f"{sid} {nb} {ex}: {review_text(entry)}")
                        elif grade.manual_score is None:  # formgrader's own rule, and
                            # a notebook not handed in has nothing to grade by hand
                            grade.needs_manual_grade = auto is None and \
                                row_kind(row) is not Kind.NOT_SUBMITTED
                        # else: the flag of a manual score is the instructor's, left as it is
                gb.db.commit()
                for assignment in seen:  # nbgrader's own late penalty, as AssignLatePenalties
                    s = gb.find_submission(assignment, sid)
                    _, seconds = lateness(_timing(r, assignment), s.duedate, bool(s.extension))
                    for nb in s.notebooks:
                        nb.late_submission_penalty = policy.penalty(nb.score, seconds)
                gb.db.commit()
        if fresh:
            os.replace(target, self.gradebook)
        self._write_reviews(reviews)
        return messages


def load_results(out: Path) -> dict[str, dict]:
    """{student: result} from ``out/results/*.json``, unreadable files skipped (an unfinished
    write never has the final name); the rows of an older course-grade get their kinds."""
    results = {}
    for p in sorted((out / "results").glob("*.json")):
        try:
            r = json.loads(p.read_text())
            for row in r.get("rows", []):
                row["kind"] = row_kind(row).value
            results[str(r["student"])] = r
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return results


def _timing(result: dict, assignment: str) -> Timing:
    """What a stored result says of the submission time of ``assignment``."""
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


def _remove_unsubmitted(gb, out: Path, assignment: str, student: str) -> bool:
    """Nothing of ``assignment`` was handed in: remove its submission and folders, unless the
    instructor entered a score, extra credit or a comment in it (then False)."""
    from nbgrader.api import MissingEntry

    try:
        s = gb.find_submission(assignment, student)
    except MissingEntry:
        s = None
    if s is not None:
        if any(g.manual_score is not None or g.extra_credit is not None
               for nb in s.notebooks for g in nb.grades) or \
                any(c.manual_comment for nb in s.notebooks for c in nb.comments):
            return False
        gb.remove_submission(assignment, student)
    from .ledger import forget, ours

    if ours(out, rel := f"submitted/{student}/{assignment}"):  # else nbgrader collect's
        shutil.rmtree(out / rel, ignore_errors=True)
        forget(out, [rel])
    shutil.rmtree(out / "autograded" / student / assignment, ignore_errors=True)
    return True


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

