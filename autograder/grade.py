"""``course-grade``: grade a class's submissions with nbgrader and write grades.csv + feedback.

    course-grade SUBMISSIONS_DIR --out OUT_DIR [--workers N] [--timeout S] [--memory MB]
                 [--cell-timeout S] [--assignment NAME ...] [--source DIR] [--force]
                 [--regrade STUDENT ...] [--due ASSIGNMENT=DATE ...] [--submitted-at FILE]
                 [--late-penalty POLICY] [--late-floor P%] [--grace DURATION]
                 [--extensions FILE] [--unsandboxed] [--scheduler ADDRESS]
                 [--scheduler-timeout S] [--roster FILE] [--prune]
                 [--regrade-exercise ASSIGNMENT:EXERCISE ...]
    course-grade SUBMISSIONS_DIR --dry-run [--assignment NAME ...] [--submitted-at FILE]
                 [--roster FILE] [--extensions FILE] [late policy options] [--prune]
                 [--out OUT_DIR]

SUBMISSIONS_DIR holds one folder or .zip per student (as an LMS downloads them); notebooks are
found inside by name at any depth. For each student, in parallel (``--workers``, default: the
number of cores), a course folder of their own is made from the source notebooks
(``solutions/``) and nbgrader's ``autograde`` and ``generate_feedback`` run in a process with a
wall-time and a memory limit; the student's code (the Jupyter kernel) runs in a bubblewrap
sandbox (no network, no access to solutions/, the gradebook or other students' work; see
``grading/sandbox/``); with ``--scheduler`` each student is a task on a Dask cluster instead
(``grading/parent/dispatch.py``). The parent alone writes the results. OUT_DIR is an nbgrader
course directory (formgrader: ``python3 -m autograder.bootstrap lab --instructor OUT_DIR``):

- ``OUT_DIR/grades.csv``: one row per student and exercise: student, notebook, exercise,
  points (final: the manual score when set in formgrader, else the autograded one),
  max_points, status (``graded``, ``graded (test cell restored: ...)``, ``graded (from its
  record; the notebook stopped later)``, ``graded (no result: the notebook stopped; flagged)``
  or ``not graded: <reason>``), diagnosis (what lost the points: a catalogued mistake's name or
  a failure kind), name, lms_id, auto_points, manual_points, extra_credit, comment, flagged,
  submitted_at, due (the student's own: an extension included), late_by (how late, ``late
  (marked by Canvas)``, or ``submission time unknown``: no penalty), late_penalty
  (nbgrader's, per notebook: the late policy's points lost), review (the autograded
  score changed under a manual score: shown until the score is saved or resolved in
  formgrader), sis_id (with ``--roster``), kind (what the row is, as data: ``graded``,
  ``test restored``, ``answer missing``, ``not in notebook``, ``from record``, ``stopped``
  (these have points), ``not submitted``, ``refused``, ``timed out``, ``grader error``,
  ``course cell``, ``no grade``: ``grading/status.py``'s ``Kind``);
- ``OUT_DIR/report.html``: the class report (score distributions, mistakes ranked by how many
  students made them, not-graded reasons, slowest students), rewritten after every student;
- ``OUT_DIR/exports/<assignment>.canvas.csv`` and ``.moodle.csv``: one total per student for
  the LMS gradebook import (empty where something was not graded), each only for the
  students of that LMS's downloads: Canvas's gradebook import, Moodle's grading worksheet
  (keyed by participant: ``grading/parent/exports.py``);
- ``OUT_DIR/feedback/<student>/<assignment>/<notebook>.html``: nbgrader feedback without
  hidden tests; ``OUT_DIR/autograded/<student>/<assignment>/``: the autograded notebooks;
  ``OUT_DIR/return/``: the feedback per student name, and as Moodle's feedback zip;
- ``OUT_DIR/gradebook.db``: the class's nbgrader gradebook, updated in place (manual scores,
  extra credit and comments entered in formgrader are never overwritten);
  ``OUT_DIR/results/``: one file per finished student;
- ``OUT_DIR/changes.csv``: the change log, appended to and never rewritten: one line per
  change of a grade (an exercise's final points, or an assignment's total), with when, the
  run, its cause (``new submission``, ``submission changed``, ``checks changed``, ``option
  --force``, ``option --regrade-exercise``, ``option --prune``, ``late policy``,
  ``extension``, or a score entered in formgrader between runs), the student, assignment,
  exercise and old -> new; the report shows the last run's.

OUT_DIR is the class's ledger (``grading/parent/ledger.py``): a run grades only what is new
in SUBMISSIONS_DIR, changed, or stale (graded with other checks: each result keeps a
fingerprint of the release notebook and ``autograder/checks/``), or what an option names
(``--regrade`` students, ``--force`` every notebook in the folder, ``--regrade-exercise`` one
exercise across the class). A notebook or student missing from SUBMISSIONS_DIR keeps its last
result (rows, feedback, gradebook entry, returns, exports): an LMS download of one assignment
never erases another; a killed run resumes where it stopped. Only ``--prune`` removes
(``--prune --dry-run --out OUT_DIR`` lists what it would). Results written before the
fingerprints were kept are not graded again unless an option asks (the run says how many).

Submission times come only from trusted sources (``grading/parent/times.py``): nbgrader's own
``timestamp.txt`` when SUBMISSIONS_DIR is a course's ``submitted/`` folder filled by ``nbgrader
collect``, the instructor's ``--submitted-at`` CSV, and Canvas's ``LATE`` mark (late by an
unknown amount: the late policy takes the most it takes). Never a file's or zip entry's time,
nor a ``timestamp.txt`` a student uploaded; a student with no known time gets no late penalty.
The late policy (``--late-penalty``, ``--late-floor``, ``--grace``) is nbgrader's late-submission
plugin (``grading/gradebook.py``'s ``LatePolicyPlugin``, named in OUT_DIR's nbgrader_config.py):
the gradebook's ``late_submission_penalty`` is what grades.csv, the exports, the report and
``nbgrader export`` subtract. ``--extensions`` become nbgrader's own per-student extensions.
The late policy, ``--roster``, ``--submitted-at`` and ``--extensions`` are kept in
OUT_DIR/settings.json: a later run without the option uses the kept one and says so.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from .grading.config import ISOLATION, GradeConfig
from .grading.gradebook import POLICY_FORMAT
from .grading.parent.times import CSV_FORMAT, EXTENSIONS_FORMAT
from .grading.status import row_kind

ROOT = Path(__file__).resolve().parent.parent
NO_ASSIGNMENT = "no assignment notebook found in the submissions"
DEFAULT = GradeConfig()  # the options' defaults


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="course-grade",
        description=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("submissions", type=Path, help="one folder or .zip per student")
    p.add_argument("--out", type=Path, metavar="OUT_DIR",
                   help="output folder (created; not needed with --dry-run)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="students graded at once (default: the number of cores, %(default)s)")
    p.add_argument("--timeout", type=float, default=DEFAULT.timeout,
                   help="wall-time limit per student, seconds (default: %(default)s)")
    p.add_argument("--cell-timeout", type=int, default=DEFAULT.cell_timeout,
                   help="one cell's limit, seconds; the cell is interrupted, its exercise is "
                   "'not graded', the rest still runs (default: %(default)s)")
    p.add_argument("--memory", type=int, default=DEFAULT.memory_mb,
                   help="memory (address space) limit per process, MB (default: %(default)s)")
    p.add_argument("--tmp", type=int, default=0, metavar="MB",
                   help="size of the sandbox's /tmp (it is memory), MB (default: a quarter of "
                   "--memory)")
    p.add_argument("--isolation", choices=ISOLATION, default=DEFAULT.isolation,
                   help="keeps one student's CPU use from slowing the others: per-student "
                   "cgroups where this machine allows, else each worker pinned to cores of its "
                   "own (auto, the default); 'none' for neither (see grading/parent/isolation.py)")
    p.add_argument("--assignment", nargs="+", default=None,
                   help="assignments to grade (default: those found in the submissions)")
    p.add_argument("--source", type=Path, default=ROOT / "solutions",
                   help="nbgrader source notebooks, one folder per assignment (default: the "
                   "course's solutions/)")
    p.add_argument("--force", action="store_true",
                   help="grade again every notebook in SUBMISSIONS_DIR (of the assignments "
                   "graded); results of notebooks not in it are kept")
    p.add_argument("--prune", action="store_true",
                   help="remove from OUT_DIR what is not in SUBMISSIONS_DIR: the students "
                   "graded earlier who are not in it, and the earlier results of the "
                   "assignments graded now whose notebooks are not in it (without it both are "
                   "kept: OUT_DIR is the class's ledger); with --dry-run --out: list them")
    p.add_argument("--regrade-exercise", nargs="+", default=[],
                   metavar="ASSIGNMENT:EXERCISE",
                   help="grade one exercise again across the class (e.g. 02_masking:ex2_1, "
                   "02_masking:2.1 or the test cell's id): every notebook of the assignment in "
                   "SUBMISSIONS_DIR is run again and only that exercise's rows change; "
                   "changes.csv logs them")
    p.add_argument("--regrade", nargs="+", default=[], metavar="STUDENT",
                   help="grade these students again (their student ids, as in grades.csv); "
                   "manual scores and comments stay")
    p.add_argument("--due", nargs="+", default=[], metavar="ASSIGNMENT=DATE",
                   help="due date of an assignment, ISO 8601 (e.g. "
                   "01_attention=2026-12-01T23:59+01:00; no zone: UTC); kept in the gradebook "
                   "for later runs (formgrader can edit it there too)")
    p.add_argument("--submitted-at", type=Path, default=None, metavar="FILE",
                   help="submission times you trust (e.g. from the LMS's submission list): "
                   f"{CSV_FORMAT}. These win over nbgrader's timestamp.txt and Canvas's LATE "
                   "mark (the time is then compared with the due date). Kept in "
                   "OUT_DIR/settings.json: later runs read the file again without the option")
    p.add_argument("--resolve-duplicates", action="store_true",
                   help="an LMS user found twice with different files (two downloads, or a "
                   "download and a copy edited after unpacking): grade the newest Canvas "
                   "upload, else the unpacked copy; without it neither is graded and both "
                   "are listed")
    p.add_argument("--roster", type=Path, default=None, metavar="FILE",
                   help="Canvas's gradebook export (Grades, Export; columns Student, ID, SIS "
                   "User ID, ...): its names ('Lovelace, Ada') and SIS ids replace the "
                   "download's, matched by Canvas user id; ids it lacks are reported. Or "
                   "Moodle's grading worksheet of the assignment (or its participants export): "
                   "a Moodle student is then its email in every assignment, and the worksheet "
                   "is written back with the grades. Kept in "
                   "OUT_DIR/settings.json: later runs read the file again without the option")
    p.add_argument("--late-penalty", default=None, metavar="POLICY",
                   help="what a notebook submitted after its due date loses (nbgrader's "
                   f"late-submission penalty): {POLICY_FORMAT.replace('%', '%%')}. Marked LATE "
                   "by Canvas with no known time: the most the policy takes. Default: the one "
                   "OUT_DIR/settings.json keeps from an earlier run, else zero. A submission "
                   "with no known time gets none")
    p.add_argument("--late-floor", default=None, metavar="P%", help="the share of its score "
                   "a late notebook always keeps (50%%: the penalty takes at most half), zero's "
                   "too; kept in OUT_DIR/settings.json (0%% takes it back)")
    p.add_argument("--grace", default=None, metavar="DURATION",
                   help="lateness that counts as on time (e.g. 15m, 2h, 1d); beyond it, "
                   "lateness counts from the due date. Kept in OUT_DIR/settings.json; 0 takes "
                   "it back")
    p.add_argument("--extensions", type=Path, default=None, metavar="FILE",
                   help=f"per-student extensions: {EXTENSIONS_FORMAT}. They become nbgrader's "
                   "extensions in the gradebook (formgrader, nbgrader export). Kept in "
                   "OUT_DIR/settings.json: later runs read the file again without the option")
    p.add_argument("--unsandboxed", action="store_true",
                   help="run students' code without the bubblewrap sandbox (it can then read "
                   "solutions/ and other students' work); without this flag grading refuses "
                   "to start where bwrap is missing")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="grade on a Dask cluster: the scheduler's address (tcp://host:8786); "
                   "each student is one task run by a `dask worker` (see the README). "
                   "Default: on this machine, --workers at once")
    p.add_argument("--scheduler-timeout", type=float, default=600, metavar="S",
                   help="with --scheduler: how long to wait while the cluster has no worker "
                   "before stopping (the students not graded are graded by the next run); "
                   "seconds (default: %(default)g)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--dry-run", action="store_true",
                   help="print the roster (student id, name, notebooks found, where the "
                   "submission time comes from) and grade nothing; nothing is written")
    return p


class UsageError(Exception):
    """What the command line asks for cannot be done: course-grade prints it on one line
    and exits 2, before grading anything."""


def _no_such(option: str, what: str, unknown: list[str], valid: list[str],
             listing: str = "") -> str:
    """The message for names that are not among ``valid``: the closest valid name of each
    (difflib) and, with ``listing``, all of them.

    >>> _no_such("--assign", "assignment", ["01_atention", "zz"], ["01_attention"], "all")
    '--assign: no such assignment: 01_atention (did you mean 01_attention?), zz; all: 01_attention'
    """
    import difflib

    named = []
    for name in unknown:
        close = difflib.get_close_matches(name, valid, n=1)
        named.append(f"{name} (did you mean {close[0]}?)" if close else name)
    text = f"{option}: no such {what}: {', '.join(named)}"
    return f"{text}; {listing}: {', '.join(valid) or 'none'}" if listing else text


def make_runner(config: GradeConfig):
    """The runner that executes one student's grading (the plug-in point for a sandbox).

    Anything with :meth:`autograder.grading.parent.runner.LocalRunner.grade`'s signature works. The
    default runs nbgrader with rlimits, a wall-time limit and a process-tree kill, and the
    student's kernel inside bubblewrap (``grading/sandbox/``); with ``--unsandboxed``
    (``config.sandboxed`` false) the kernel runs as this user. Both install the source
    policy hooks. Raises ``RuntimeError`` where bwrap is missing or unusable.
    """
    from .grading.parent import runner

    return runner.make_runner(config)


def _pick_assignments(args, available, subs) -> list[str]:
    from .grading.parent.submissions import find_notebook

    if args.assignment:
        return args.assignment
    picked = []
    for a, paths in available.items():
        if any(find_notebook(s, p.stem, a)[0] for s in subs for p in paths):
            picked.append(a)
    return picked


def _write_outputs(store, students, notebooks, people, report, final=False,
                   log=None) -> list[dict]:
    """grades.csv, the class report (``report``: a ReportWriter) and the LMS exports of
    ``notebooks`` ({assignment: [notebook]}), all from the stored results; ``log(rows)``
    runs before the report (the change log it shows); returns grades.csv's rows."""
    from .grading.parent.exports import write_exports

    rows = store.final_rows(students)
    store.write_csv(students, rows=rows)
    if log is not None:
        log(rows)
    report.write(students, force=final, rows=rows, notebooks=notebooks)  # the exports' totals
    # the exports total grades.csv's final points (manual scores, extra credit, late penalty)
    results: dict[str, dict] = {}
    for row in rows:
        name, lms_id = people.get(row["student"], ("", ""))
        r = results.setdefault(row["student"], {"rows": [], "name": row.get("name") or name,
                                                "lms_id": row.get("lms_id") or lms_id})
        r["rows"].append(row)
    write_exports(store.out, notebooks, results, students)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.out is None and not args.dry_run:
        parser.error("the following arguments are required: --out (all but --dry-run)")
    if threading.current_thread() is not threading.main_thread():
        return _run(args)
    # SIGTERM stops the run like Ctrl-C: running students are killed, finished ones are kept
    old = signal.signal(signal.SIGTERM, signal.default_int_handler)
    old_int = signal.getsignal(signal.SIGINT)
    try:
        return _run(args)
    finally:
        signal.signal(signal.SIGTERM, old)
        if old_int is not None:
            signal.signal(signal.SIGINT, old_int)


def _run(args) -> int:
    """:func:`_main`, with what stops it said in one line: a :class:`UsageError` (exit 2);
    Ctrl-C or SIGTERM at any moment outside the grading loop (which says what it kept):
    every process course-grade started is killed, exit 130."""
    try:
        return _main(args)
    except UsageError as e:
        print(f"course-grade: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _hold_interrupts()
        from .grading.parent.runner import kill_children

        kill_children()
        print("course-grade: interrupted", file=sys.stderr)
        return 130


def _hold_interrupts() -> None:
    """Ctrl-C again while the first one's clean-up (bounded: a few kill sweeps) runs: no
    second message, no traceback (:func:`main` puts the handlers back)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _refuse(submissions: Path, out: Path | None) -> None:
    """Raise :class:`UsageError` for a SUBMISSIONS_DIR that is no submissions folder: the
    course repository or a course-grade output, or the OUT_DIR inside it. An entry of it that
    looks like either is one student's folder (the console says so): what a student's folder
    holds never stops the class."""
    from .grading.parent.submissions import not_submissions

    if found := not_submissions(submissions):
        raise UsageError(
            f"refusing to grade {submissions}: {'; '.join(found)}. Pass the folder that holds "
            "only the students' submissions (the LMS download, a folder or .zip per student) "
            "as SUBMISSIONS_DIR, and the output folder as --out")
    if out is not None and out.resolve().is_relative_to(submissions):
        raise UsageError(
            f"--out {out} is inside SUBMISSIONS_DIR {submissions}: it would be read as a "
            "student's submission. Pass an --out outside it")


def _main(args) -> int:
    """Check the options, then plan (who is graded, and why), grade, publish."""
    from .grading.parent.dispatch import ClusterError
    from .grading.parent.runner import kill_all

    submissions, available, due = _checked(args)
    kept = _settings(args)
    if args.dry_run:
        return _dry_run(args, submissions, available, due, kept)
    run = _plan(args, submissions, available, due)
    try:
        _grade(run)
    except KeyboardInterrupt:  # (a second one during this clean-up: _run's one line)
        run.dispatcher.close(cancel=True)
        kill_all()
        run.bar.close()
        print("course-grade: interrupted; rerun to grade the rest", file=sys.stderr)
        return 130
    except ClusterError as e:  # no worker for --scheduler-timeout: the rest wait for a rerun
        run.dispatcher.close(cancel=True)
        run.bar.close()
        print(f"course-grade: {e}", file=sys.stderr)
        return 1
    run.dispatcher.close()
    run.bar.close()
    _publish(run)
    return 0


def _checked(args) -> tuple[Path, dict, dict]:
    """SUBMISSIONS_DIR, the source's assignments and ``--due``'s dates, or :class:`UsageError`."""
    from .grading.parent.course import find_assignments
    from .grading.parent.results import parse_due

    if not args.submissions.is_dir():
        raise UsageError(f"{args.submissions} is not a folder")
    submissions = args.submissions.resolve()
    _refuse(submissions, args.out)
    if not args.source.is_dir():
        raise UsageError(f"--source {args.source} is not a folder")
    available = find_assignments(args.source.resolve())
    if unknown := [a for a in args.assignment or [] if a not in available]:
        raise UsageError(_no_such("--assignment", "assignment", unknown, list(available),
                                  f"the assignments in {args.source} are"))
    try:
        due = parse_due(args.due)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if unknown := [a for a in due if a not in available]:
        raise UsageError(_no_such("--due", "assignment", unknown, list(available),
                                  f"the assignments in {args.source} are"))
    return submissions, available, due


class _Run:
    """One run's plan and what its grading and publishing share (attributes set by
    :func:`_plan`)."""

    def log(self, rows: list[dict], old: list[dict], cause) -> None:
        """Append what changed between ``old`` and ``rows`` (and why) to the change log."""
        from .grading.parent import ledger

        self.logged.extend(lines := ledger.changes(old, rows, cause, self.store.assignment_of,
                                                   ledger.now(), self.run_id))
        ledger.append(self.out, lines)

    def write_outputs(self, final=False, log=None) -> list[dict]:
        return _write_outputs(self.store, self.students, self.notebooks, self.people,
                              self.report, final=final, log=log)


def _plan(args, submissions: Path, available: dict, due: dict) -> _Run:
    """Everything before the first student is graded: the runner and the dispatcher (refused
    here), intake, the template and OUT_DIR's course files, and each student's ledger plan;
    writes what changed since the last run (formgrader's, ``--prune``'s)."""
    from tqdm import tqdm

    from .grading.parent import ledger, settings
    from .grading.parent.course import build_template
    from .grading.parent.dispatch import ClusterError, Dispatcher
    from .grading.parent.report import ReportWriter
    from .grading.parent.results import ResultStore, publish_source, write_course_config
    from .grading.parent.submissions import find_notebook, fingerprint, intake_facts, missing
    from .grading.parent.times import timings

    run = _Run()
    run.args, run.due = args, due
    run.config = config = GradeConfig.from_args(args)
    try:
        run.runner = make_runner(config)
    except RuntimeError as e:
        raise UsageError(f"refusing to grade: {e}. Install it (apt-get install bubblewrap) or "
                         "pass --unsandboxed to run students' code without a sandbox.") from None
    run.dispatcher = Dispatcher(args.scheduler, config.workers, args.scheduler_timeout,
                                say=lambda msg: tqdm.write(f"course-grade: {msg}",
                                                           file=sys.stderr))
    try:
        run.dispatcher.connect()  # an unreachable scheduler: said before any work
    except ClusterError as e:
        raise UsageError(str(e)) from None
    run.t0 = time.monotonic()
    run.out = out = args.out.resolve()
    run.work = work = out / ".work"
    work.mkdir(parents=True, exist_ok=True)
    subs, assignments = _intake(args, submissions, work / "unpacked", available, due)
    if not assignments:
        raise UsageError(NO_ASSIGNMENT)
    run.subs, run.assignments = subs, assignments
    settings.write(out, args.class_settings)  # what was given, now or before: the class's
    run.template, run.info = template, info = build_template(
        args.source.resolve(), assignments, work, config)
    run.store = store = ResultStore(out)
    if add := write_course_config(out, config, args.policy):  # the instructor's: unchanged
        print(f"course-grade: {out / 'nbgrader_config.py'} is not course-grade's: left as it "
              "is. For formgrader and nbgrader export to show the late policy's scores as "
              "grades.csv does, add these lines to it:\n  " + "\n  ".join(add),
              file=sys.stderr)
    if theirs := publish_source(template, out, assignments):
        print(f"course-grade: {out / 'source'}: {', '.join(theirs)} not made by course-grade "
              f"(the instructor's): left as it is; graded with {args.source}'s", file=sys.stderr)
    run.exercises = exercises = _regrade_exercises(args.regrade_exercise, info, assignments)
    before = _read_grades(out)  # grades.csv as the last run left it (the change log's "old")
    done = store.load()
    run.run_id = uuid.uuid4().hex[:8]
    # every assignment OUT_DIR holds: this run's, and those graded by earlier runs
    run.notebooks = notebooks = {a: [p.stem for p in available[a]] for a in available
                                 if a in assignments or (out / "source" / a).is_dir()}
    run.graders = graders = {
        a: ledger.grader_print(sorted((template / "source" / a).glob("*.ipynb")))
        for a in assignments}
    run.present, run.plans, run.prints = present, plans, prints = {}, {}, {}
    found_of = {}
    for s in subs:
        found_of[s.student] = found = {a: [find_notebook(s, nb.name, a) for nb in info[a]]
                                       for a in assignments}
        prints[s.student] = f"{template.name}:" + fingerprint(
            [p for a in assignments for p, _ in found[a]], s.problem)
        stored = done.get(s.student)
        earlier = ledger.graded_before(stored, notebooks)
        present[s.student] = {  # None: nothing of it here (an entry intake could not use
            # counts for the assignments it never graded: it replaces no earlier result)
            a: fingerprint([p for p, _ in ps], s.problem)
            if any(p is not None or note != missing(nb.name) for (p, note), nb in
                   zip(ps, info[a])) and not (s.problem and a in earlier) else None
            for a, ps in found.items()}
        legacy = bool(stored) and "ledger" not in stored and \
            stored.get("fingerprint") == prints[s.student]
        plans[s.student] = ledger.plan(
            present[s.student], stored, graders, notebooks=notebooks, force=args.force,
            regrade=s.student in args.regrade, exercises=frozenset(exercises),
            legacy=legacy, prune=args.prune)
    # OUT_DIR is the class: students graded earlier and absent from this folder (a late
    # submission downloaded on its own) keep their rows, exports and returns
    absent = sorted(set(done) - {s.student for s in subs})
    pruned = set()
    if absent and args.prune:
        for msg in store.prune(absent):
            print(f"course-grade: {msg}", file=sys.stderr)
        print(f"course-grade: --prune: removed {len(absent)} student(s) not in this folder: "
              f"{', '.join(absent)}", file=sys.stderr)
        pruned, absent = set(absent), []
    elif absent:
        print(f"course-grade: kept {len(absent)} student(s) graded earlier whose submissions "
              f"are not in this folder ({', '.join(absent[:5])}{', ...' if len(absent) > 5 else ''}"
              "); --prune removes them", file=sys.stderr)
    # kept results graded with other checks (or named by --regrade-exercise): from OUT_DIR
    run.grading, run.kept_prints = ledger.regrade_kept(
        out, work, subs, absent, done, plans, found_of, notebooks, graders, exercises,
        frozenset(args.regrade))
    for sid in sorted(set(args.regrade) & set(absent)):  # their last result, no new row
        print(f"course-grade: --regrade {sid}: not in this folder; " + (
            f"graded again from the notebooks OUT_DIR keeps ({out / 'submitted' / sid})"
            if sid in run.grading else "OUT_DIR keeps no notebook of theirs to grade again: "
            "their last result stays as it is"), file=sys.stderr)
    run.todo = [run.grading.get(s.student, s) for s in subs if plans[s.student].grade] + \
        [run.grading[sid] for sid in absent if sid in run.grading]
    skipped = sum(not plans[s.student].grade for s in subs)  # (absent ones: said above)
    if skipped:
        print(f"course-grade: {skipped} student(s) already graded, skipped", file=sys.stderr)
    for line in ledger.summary(plans, {s.student for s in subs}):
        print(f"course-grade: {line}", file=sys.stderr)
    # the exports: the same order each run
    run.students = sorted([s.student for s in subs] + absent)
    run.people = {s.student: (getattr(s, "name", ""), getattr(s, "lms_id", "")) for s in subs}
    run.by_id = {s.student: s for s in subs}
    # the CSV's comment column: formgrader's comments on the answer cells a test grades
    store.exercises = {(nb.name, g.grade_id): g.solution_ids
                       for nbs in [*_described(out, {a: n for a, n in notebooks.items()
                                                      if a not in info}).values(),
                                   *info.values()]
                       for nb in nbs for g in nb.grade_cells}
    store.assignment_of = {nb: a for a, nbs in notebooks.items() for nb in nbs}
    store.grace = args.policy.grace
    # this run's submission times and Canvas names count for the notebooks in this folder
    run.timing = {sid: {a: t for a, t in ts.items() if present[sid][a] is not None}
                  for sid, ts in timings(subs, {a: notebooks[a] for a in assignments}).items()}
    store.people = intake_facts(subs, {a: notebooks[a] for a in assignments})
    store.record_timing(run.timing)  # a time (or roster name) given now: those graded before too
    run.report = ReportWriter(out)
    run.logged = []
    run.start = run.write_outputs(  # what changed since the last run: formgrader's, --prune's
        final=True, log=lambda rows: run.log(
            rows, before, lambda sid, a: ledger.PRUNE if sid in pruned else ledger.BETWEEN))
    run.bar = tqdm(total=len(run.todo), unit="student", desc="grading",
                   disable=args.no_progress, file=sys.stderr)
    return run


def _grade(run: _Run) -> None:
    """Grade the plan's students (here or on the cluster); each one's result is committed to
    OUT_DIR as it comes, with grades.csv and the exports rewritten."""
    from .grading.nbgrader_patches import warm as nbgrader_warm
    from .grading.parent import ledger
    from .grading.parent.dispatch import publish_remote
    from .grading.parent.exchange import carry
    from .grading.parent.results import publish_student
    from .grading.parent.student import grade_student, to_json

    out, work, store, plans, bar = run.out, run.work, run.store, run.plans, run.bar
    if run.todo:
        nbgrader_warm()  # nbgrader's gradebook code loads, for the gradebook written after them
    staging = work / "staged"  # a student's new files, until they replace only what was graded
    (staging / ".work").mkdir(parents=True, exist_ok=True)

    def only(s):  # the student's assignments this run grades
        return {a: run.info[a] for a in run.assignments if a in plans[s.student].grade}

    for _, r, remote in run.dispatcher.run(
        run.todo,
        lambda s: grade_student(s, only(s), run.template, work, staging, run.config,
                                run.prints.get(s.student, "ledger"), run.runner),
        lambda s: (only(s), run.template, run.config, run.prints.get(s.student, "ledger")),
        run.info,
    ):
        r.notes.append(f"run {run.run_id}")
        s = run.by_id.get(r.student) or run.grading[r.student]
        r.name, r.lms_id = getattr(s, "name", ""), getattr(s, "lms_id", "")
        graded = list(plans[r.student].grade)
        if remote is not None:  # graded elsewhere: its pages and notebooks came as data
            publish_remote(staging, r.student, graded, remote)
        else:
            publish_student(work / "students" / r.student, staging, r.student, graded)
        # nbgrader's exchange: the submission's secret, for `nbgrader release_feedback`
        carry([*([s.origin] if getattr(s, "per_assignment", False) else []),
               out / "submitted" / r.student], staging, r.student, graded,
              dict(getattr(s, "times", None) or {}))
        ledger.publish(staging, out, r.student, graded)
        result = ledger.merge(
            store.read(r.student), json.loads(to_json(r)), plans[r.student].grade,
            run.notebooks, {**{a: {"submission": h, "grader": run.graders[a]}
                               for a, h in run.present.get(r.student, {}).items()
                               if a in graded and h is not None},
                            **run.kept_prints.get(r.student, {})},
            only={a: run.exercises[a] for a, why in plans[r.student].grade.items()
                  if why == ledger.EXERCISE})
        store.save(json.dumps(result, indent=1), r.student, run.timing.get(r.student))  # commit
        run.write_outputs()
        bar.set_postfix_str(f"{r.student} {r.seconds:.0f}s")
        bar.update()


def _publish(run: _Run) -> None:
    """The gradebook, grades.csv with what this run changed, the exports and returns; the
    run's summary."""
    from .grading.parent import ledger
    from .grading.parent.isolation import isolation
    from .grading.parent.results import write_returns
    from .grading.parent.submissions import discard_unpacked
    from .grading.parent.times import LATE_POLICY, late_cause, late_summary

    args, out, store, plans, students = run.args, run.out, run.store, run.plans, run.students
    discard_unpacked(run.work / "unpacked")  # graded: OUT_DIR keeps the rebuilt copies only
    for msg in store.write_gradebook(run.template, students, subs=run.by_id, due=run.due,
                                     late_penalty=args.policy, extensions=_extension_delta(
                                         args.extension_map)):
        print(f"course-grade: {msg}", file=sys.stderr)
    rows = run.write_outputs(  # and what this run changed
        final=True, log=lambda rows: run.log(
            rows, run.start, lambda sid, a: plans[sid].grade[a] if a in plans.get(
                sid, ledger.Plan()).grade else late_cause(args.extension_map, sid, a)))
    results = store.load()
    write_returns(out, results, students)
    bad = sum(
        1 for sid in students for row in results.get(sid, {}).get("rows", [])
        if not row_kind(row).graded
    )
    print(
        f"course-grade: {len(students)} students, {len(run.todo)} graded now in "
        f"{time.monotonic() - run.t0:.1f}s ({run.dispatcher.name}, runner: {run.runner.name}, "
        f"isolation: {isolation(run.config).kind}); "
        f"{bad} row(s) not graded; "
        f"{out / 'grades.csv'}",
        file=sys.stderr,
    )
    print(f"course-grade: run {run.run_id}: {len(run.logged)} grade change(s) appended to "
          f"{out / ledger.CHANGES}", file=sys.stderr)
    for line in late_summary(rows):
        print(f"course-grade: {line}", file=sys.stderr)
    if args.late_defaulted and (n := sum(c["cause"] == LATE_POLICY for c in run.logged)):
        print(f"course-grade: {n} grade change(s) only because --late-penalty was left out "
              f"and no earlier run kept one: the default ({args.late_penalty}) applied; give "
              "--late-penalty to choose", file=sys.stderr)


def _described(out: Path, notebooks: dict[str, list[str]]) -> dict[str, list]:
    """{assignment: [course.Notebook]} of the source notebooks OUT_DIR holds (an assignment
    an earlier run graded: its rows' comments in grades.csv when ``--assignment`` leaves it
    out of this run)."""
    import nbformat

    from .grading.parent.course import describe

    found: dict[str, list] = {}
    for a, names in notebooks.items():
        for name in names:
            path = out / "source" / a / f"{name}.ipynb"
            if path.is_file():
                source = nbformat.read(path, as_version=4)
                found.setdefault(a, []).append(describe(a, name, source, source))
    return found


def _read_grades(out: Path) -> list[dict]:
    """OUT_DIR/grades.csv's rows as the last run wrote them (none when there is none)."""
    import csv

    try:
        with open(out / "grades.csv", encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def _regrade_exercises(specs: list[str], info: dict, assignments: list[str]) -> dict:
    """``--regrade-exercise``'s ``ASSIGNMENT:EXERCISE`` items as {assignment: {test cell id}}
    (:func:`ledger.exercise_ids`); raises :class:`UsageError` for what names nothing."""
    from .grading.parent import ledger

    found: dict[str, set[str]] = {}
    for spec in specs:
        a, sep, name = spec.partition(":")
        if not sep or a not in info:
            raise UsageError(_no_such("--regrade-exercise", "assignment graded here",
                                      [a or spec], assignments, "those graded here are")
                             + " (ASSIGNMENT:EXERCISE, e.g. 02_masking:ex2_1)")
        ids = [g.grade_id for nb in info[a] for g in nb.grade_cells]
        if not (hit := ledger.exercise_ids(name, ids)):
            raise UsageError(_no_such("--regrade-exercise", f"exercise of {a}", [name], ids,
                                      "its exercises are"))
        found.setdefault(a, set()).update(hit)
    return found


def _settings(args) -> list[str]:
    """Put the class's kept settings (``grading/parent/settings.py``) into ``args`` where an
    option is left out; say each one used (stderr) and return them."""
    from .grading.gradebook import LatePolicy
    from .grading.parent import settings

    stored = settings.read(args.out.resolve()) if args.out is not None else {}
    given = {key: getattr(args, key) for key in settings.DEFAULTS}
    resolved, kept = settings.resolve(given, stored)
    args.class_settings = {k: v for k, v in resolved.items()
                           if given[k] is not None or k in stored}
    args.late_defaulted = given["late_penalty"] is None and "late_penalty" not in stored
    for key, value in resolved.items():
        setattr(args, key, Path(value) if key in settings.FILES and value is not None
                else value)
    try:
        args.policy = LatePolicy.parse(args.late_penalty, args.late_floor, args.grace)
    except ValueError as e:
        raise UsageError(str(e)) from None
    for line in kept:
        print(f"course-grade: {line}: kept from an earlier run ({settings.SETTINGS}); give "
              "the option to change it", file=sys.stderr)
    return kept


def _instructor_files(args) -> tuple:
    """(roster, submission times, extensions) read from ``--roster``, ``--submitted-at`` and
    ``--extensions`` (None where not given), before any submission is unpacked: a wrong path
    or a malformed file stops the run at once (:class:`UsageError`: the line and the format
    expected)."""
    from .grading.parent.roster import read_roster
    from .grading.parent.times import parse_extensions, parse_submitted_at

    def text(option, path):
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"{option}: cannot read {path} ({e})") from None

    roster = times = extensions = None
    try:
        if args.roster is not None:
            roster = read_roster(args.roster)
        if (path := args.submitted_at) is not None:
            times = parse_submitted_at(text("--submitted-at", path),
                                       f"--submitted-at {path.name}")
        if (path := args.extensions) is not None:
            extensions = parse_extensions(text("--extensions", path),
                                          f"--extensions {path.name}")
    except ValueError as e:
        raise UsageError(str(e)) from None
    return roster, times, extensions


def _intake(args, submissions: Path, unpack_dir: Path, available: dict,
            due: dict) -> tuple[list, list[str]]:
    """The students (intake's messages printed, their trusted times set) and the assignments
    to grade; raises :class:`UsageError` for an option naming what is not there."""
    from .grading.parent.submissions import discover, one_assignment, strays
    from .grading.parent.times import from_nbgrader

    roster, times, extensions = _instructor_files(args)  # before anything is unpacked
    subs, problems = discover(submissions, unpack_dir, resolve=args.resolve_duplicates)
    for msg in problems:
        print(f"course-grade: {msg}", file=sys.stderr)
    from_nbgrader(submissions, subs)
    names = {a: [p.stem for p in paths] for a, paths in available.items()}
    for msg in one_assignment(subs, names, args.assignment):  # an LMS download's (issue 47)
        print(f"course-grade: {msg}", file=sys.stderr)
    for msg in (m for s in subs for m in strays(s, names)):  # nbgrader's layout, LMS downloads
        print(f"course-grade: {msg}", file=sys.stderr)
    if roster is not None:
        from .grading.parent.roster import apply_roster

        for msg in apply_roster(roster, subs):
            print(f"course-grade: {msg}", file=sys.stderr)
    if times is not None:
        from .grading.parent.times import apply_submitted_at

        for msg in apply_submitted_at(times, subs, f"--submitted-at {args.submitted_at.name}"):
            print(f"course-grade: {msg}", file=sys.stderr)
    args.extension_map = {}
    graded = [p.stem for p in (args.out / "results").glob("*.json")] \
        if args.out is not None else []  # the students OUT_DIR keeps
    if extensions is not None:
        from .grading.parent.times import resolve_extensions

        args.extension_map, messages = resolve_extensions(
            extensions, subs, graded, f"--extensions {args.extensions.name}")
        for msg in messages:
            print(f"course-grade: {msg}", file=sys.stderr)
    ids = [s.student for s in subs]
    if unknown := sorted(set(args.regrade) - set(ids) - set(graded)):
        raise UsageError(_no_such("--regrade", "student", unknown, sorted({*ids, *graded})))
    picked = assignments = _pick_assignments(args, available, subs)
    if not args.assignment:  # OUT_DIR is the class: what it graded before stays in it (and
        # its template is reused: the same assignments, the same template)
        out = args.out.resolve() if args.out is not None else None
        earlier = {a for a in available if out and (out / "source" / a).is_dir()}
        assignments = [a for a in available if a in assignments or a in earlier]
    if roster is not None and any(s.lms == "canvas" for s in subs):  # the exports' headers
        from .grading.parent.roster import read_columns

        for msg in read_columns(args.roster, assignments)[1]:
            print(f"course-grade: {msg}", file=sys.stderr)
    from .grading.parent.roster import keep_worksheet, moodle_ids

    for msg in moodle_ids(subs) if roster is None else keep_worksheet(
            args.roster, args.out, picked, subs) if not args.dry_run else []:
        print(f"course-grade: {msg}", file=sys.stderr)
    if assignments and (unknown := sorted(set(due) - set(assignments))):
        raise UsageError(_no_such("--due", "assignment graded here", unknown, assignments,
                                  "those graded here are"))
    return subs, assignments


def _dry_run(args, submissions: Path, available: dict, due: dict, kept=()) -> int:
    """``--dry-run``: the roster on stdout, intake's messages on stderr; nothing graded and
    nothing written (zips are unpacked into a temporary folder, removed after)."""
    with tempfile.TemporaryDirectory(prefix="course-grade-dry-run-") as tmp:
        subs, assignments = _intake(args, submissions, Path(tmp), available, due)
        print(f"course-grade --dry-run: {len(subs)} student(s) in {submissions}; "
              f"assignments: {', '.join(assignments) or 'none found'}; nothing graded, "
              "nothing written")
        for line in _roster(subs, {a: [p.stem for p in available[a]] for a in assignments}):
            print(line)
        for line in _settings_lines(args, kept):
            print(line)
        if args.prune and args.out is not None:
            for line in _prune_preview(args.out.resolve(), subs, assignments, available):
                print(line)
    if not assignments:
        print(f"course-grade: {NO_ASSIGNMENT}", file=sys.stderr)
        return 2
    return 0


def _settings_lines(args, kept) -> list[str]:
    """``--dry-run``'s settings: the late policy in words, the extensions, then each option's
    value (``none``: not set) and those kept from an earlier run."""
    from .grading.parent import settings
    from .grading.parent.times import extension_of

    lines = [f"late policy: {args.policy.describe()}"
             + (" (the default: no earlier run kept one; give --late-penalty to choose)"
                if args.late_defaulted else "")]
    for sid in sorted(args.extension_map):
        for a, ext in sorted(args.extension_map[sid].items()):
            if extension_of(args.extension_map, sid, a) is ext:
                until = ext.until.isoformat() if ext.until else \
                    f"+{ext.by / 86400:g}d" if ext.by % 86400 == 0 else f"+{ext.by / 3600:g}h"
                lines.append(f"extension: {sid} {a}: {until}")
    values = ", ".join(f"{option} {getattr(args, key) or 'none'}"
                       for key, option in settings.OPTIONS.items())
    return [*lines, f"settings: {values}" + (f" (kept: {'; '.join(kept)})" if kept else "")]


def _extension_delta(extension_map: dict):
    """``write_gradebook``'s ``extensions``: (student, assignment, due) -> nbgrader's
    extension (None where the CSV names none)."""
    from .grading.parent.times import extension_of

    def delta(sid: str, assignment: str, due):
        ext = extension_of(extension_map, sid, assignment)
        return ext.delta(due) if ext is not None else None

    return delta


def _prune_preview(out: Path, subs, assignments: list[str], available: dict) -> list[str]:
    """``--prune --dry-run --out OUT_DIR``: what ``--prune`` would remove from OUT_DIR
    (:func:`ledger.prune_plan`); nothing is read but its results."""
    from .grading.parent import ledger
    from .grading.parent.report import load_results
    from .grading.parent.submissions import find_notebook, missing

    notebooks = {a: [p.stem for p in available[a]] for a in available}
    present = {s.student: {a: "here" if any(
        (found := find_notebook(s, nb, a))[0] is not None or found[1] != missing(nb)
        for nb in notebooks[a]) else None for a in assignments} for s in subs}
    gone = ledger.prune_plan(load_results(out), present, assignments, notebooks)
    return [f"--prune would remove from {out}: {len(gone)} result(s)"] + \
        [f"  {line}" for line in gone]


def _time_source(sub) -> str:
    """Where a student's submission time comes from (``grading/parent/times.py``)."""
    if sub.time_source:
        return sub.time_source
    if sub.late_marked:
        return "unknown, marked LATE by Canvas (late penalty)"
    return "unknown (no late penalty)"


def _roster(subs, notebooks: dict[str, list[str]]) -> list[str]:
    """``--dry-run``'s table: each student's id, name, the notebooks found of those to grade
    ({assignment: [notebook]}), and where the submission time comes from."""
    from .grading.parent.submissions import find_notebook

    wanted = [nb for nbs in notebooks.values() for nb in nbs]
    of = {nb: a for a, nbs in notebooks.items() for nb in nbs}
    rows = [("student", "name", "notebooks found", "submission time")]
    for s in subs:
        have = [nb for nb in wanted if not s.problem and find_notebook(s, nb, of[nb])[0]]
        missing = [nb for nb in wanted if nb not in have]
        found = ", ".join(have) or "none"
        if s.problem:
            found = f"not graded: {s.problem}"
        elif have and missing:
            found += f" (missing: {', '.join(missing)})"
        rows.append((s.student, s.name, found, _time_source(s)))
    widths = [max(_width(r[i]) for r in rows) for i in range(3)]
    return ["  ".join([*(c + " " * (w - _width(c)) for c, w in zip(r, widths)), r[3]])
            for r in rows]


def _width(text: str) -> int:
    """Terminal columns ``text`` takes: wide (CJK) characters two, combining marks none.

    >>> _width("李娜"), _width("Zoë"), _width("Zoe\u0308")
    (4, 3, 3)
    """
    import unicodedata

    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


if __name__ == "__main__":
    sys.exit(main())
