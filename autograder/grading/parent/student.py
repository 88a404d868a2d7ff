"""Grade one student: check the files, run nbgrader in a limited process, read the grades.

The steps that decide a grade run here, in the trusted parent; only ``nbgrader autograde`` and
``nbgrader generate_feedback`` (and through them the student's code, in a Jupyter kernel) run in
the limited process the runner starts, in the student's own course folder with its own
gradebook.

Each row's status, points and flag come from one pure function, ``status.row_status``, of
the facts gathered here: the parent's own checks of the submitted file (``precheck``), the
runner's evidence (its time limit, the process's exit) and the assignment's result file that the
grading process wrote (``assignment_result.py``). No log is parsed, no kernel output is read.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..assignment_result import AssignmentResult, NotebookResult
from ..autograde.kernel_package import CACHE_VAR
from ..autograde.records import read_evidence
from ..cells import is_locked
from ..config import GradeConfig
from ..env import SMOKE
from ..exercises import chapter_tests, label
from ..mathjax import with_path
from ..status import STOPPED_MEMORY, STOPPED_RECORDED, Facts, Kind, row_status  # noqa: F401
from .course import Notebook, kernels_dir, make_student_course, tool_env
from .diagnosis import diagnose
from .flags import flags as source_flags
from .rebuild import NotANotebook, Rebuilt, read_cells, rebuild
from .runner import LocalRunner
from .submissions import IntakeProblem, Submission, find_notebook, missing


@dataclass
class StudentResult:
    student: str
    fingerprint: str
    rows: list[dict]
    seconds: float
    feedback: list[str] = field(default_factory=list)  # paths relative to OUT_DIR
    notes: list[str] = field(default_factory=list)
    name: str = ""  # display name (contract B; from the Submission)
    lms_id: str = ""
    submitted_at: str = ""  # ISO 8601 with time zone, "" when unknown


# ---- checks on the submitted file (parent side, before anything runs) -----------------------


def precheck(path: Path, nb: Notebook) -> tuple[str | None, Rebuilt | None]:
    """(why the file cannot be graded, or None; the notebook to grade, rebuilt from the
    release: ``rebuild.py``). Only the grader's own findings refuse a file: it is over a cap,
    unreadable, not a notebook, or holds none of this notebook's graded cells."""
    try:  # parsed in a limited process of its own (sent.py): the parent reads the cells only
        cells = read_cells(path)
        answers = {g.grade_id: g.solution_ids for g in nb.grade_cells}
        others = {name: ids for name, ids in chapter_tests().items() if name != nb.name}
        return None, rebuild(cells, nb.release, answers, nb.name, others)
    except (IntakeProblem, NotANotebook) as e:
        return str(e), None
    except OSError as e:
        return f"cannot read the notebook ({e.strerror})", None


# ---- the grader's own evidence, read after the run (parent side) -------------------------


def failed_result(sub: Submission, info: dict[str, list[Notebook]], error: str):
    """Every row 'not graded' after an error of the grader itself (not of the student's code).

    Its fingerprint matches nothing, so the next run grades the student again.
    """
    status, _, _, kind = row_status(Facts(problem=f"grader error ({error})",
                                          problem_kind=Kind.GRADER_ERROR))
    rows = [
        {"student": sub.student, "notebook": nb.name, "exercise": g.grade_id, "points": "",
         "max_points": _fmt(g.max_points), "status": status, "diagnosis": "grader error",
         "flagged": "", "kind": kind.value}
        for notebooks in info.values() for nb in notebooks for g in nb.grade_cells
    ]
    return StudentResult(sub.student, "grader-error", rows, 0.0)


# ---- one student ----------------------------------------------------------------------------


def grade_student(
    sub: Submission,
    info: dict[str, list[Notebook]],
    template: Path,
    work: Path,
    out: Path,
    config: GradeConfig,
    fingerprint: str,
    runner=None,
) -> StudentResult:
    """Grade every assignment in ``info`` for one student; never raises for the student's code.

    All of the student's assignments are graded by one process, one after another (nbgrader,
    torch and the checks are imported once, one kernel zygote).
    """
    runner = runner or LocalRunner(config)
    start = time.monotonic()
    shutil.rmtree(out / "feedback" / sub.student, ignore_errors=True)  # from an older grading
    if getattr(sub, "problem", ""):  # intake could not use this entry: nothing to run
        status, _, _, kind = row_status(Facts(problem=sub.problem))
        rows = [
            {"student": sub.student, "notebook": nb.name, "exercise": g.grade_id, "points": "",
             "max_points": _fmt(g.max_points), "status": status, "kind": kind.value,
             "diagnosis": diagnose(kind, "", "")}
            for notebooks in info.values() for nb in notebooks for g in nb.grade_cells
        ]
        return StudentResult(sub.student, fingerprint, rows, 0.0)
    root = work / "students" / sub.student
    make_student_course(template, root, config)
    (root / "logs").mkdir()
    env = tool_env()
    env.update(
        OMP_NUM_THREADS=str(config.threads),
        MKL_NUM_THREADS=str(config.threads),
        OPENBLAS_NUM_THREADS=str(config.threads),
        MPLBACKEND="Agg",
        IPYTHONDIR=str(root / ".ipython"),  # no instructor IPython startup files
        PYTHONWARNINGS="default",
    )
    env[SMOKE] = "1"  # notebooks that train (chapter 8) run their smoke size when graded
    env = with_path(env, template / "jupyter")  # feedback pages: MathJax offline (mathjax.py)
    env[CACHE_VAR] = str(kernels_dir(template))  # built once per class (kernel_package.prepare)
    result = StudentResult(sub.student, fingerprint, [], 0.0)
    fatal: dict[str, tuple[str, Kind]] = {}  # notebook -> reason, its kind
    built: dict[str, Rebuilt] = {}  # notebook -> what is graded
    flagged: dict[str, dict[str, str]] = {}  # notebook -> {test: "flagged: ..."}
    to_run = []
    to_flag = []  # (notebook, submitted bytes): flagged while the grading process runs
    for assignment, notebooks in info.items():
        dest = root / "submitted" / sub.student / assignment
        dest.mkdir(parents=True)
        for nb in notebooks:
            path, note = find_notebook(sub, nb.name, assignment)
            if note and path is not None:
                result.notes.append(f"{nb.name}: {note}")
            if path is None:
                fatal[nb.name] = note, (Kind.NOT_SUBMITTED if note == missing(nb.name)
                                        else Kind.REFUSED)
                continue
            reason, rebuilt = precheck(path, nb)
            if reason:
                fatal[nb.name] = reason, Kind.REFUSED
            else:  # the notebook rebuilt from the release, never the file as sent
                nbformat.write(rebuilt.notebook, dest / f"{nb.name}.ipynb")
                built[nb.name] = rebuilt
                to_flag.append((nb, rebuilt.sent))
        if any(nb.name not in fatal for nb in notebooks):
            to_run.append(assignment)
    with ThreadPoolExecutor(1, thread_name_prefix="course-grade-student") as pool:
        # the grading process starts first; the source flags (read only by the rows, half a
        # second of this process's CPU per student) are found while it runs
        run = pool.submit(_run_nbgrader, runner, root, to_run, sub.student, info, fatal,
                          config, env, start) if to_run else None
        for nb, sent in to_flag:
            flagged[nb.name] = source_flags(sent, nb)
        ended = run.result() if run is not None else None  # a grader error raises here
    if ended is not None:
        _after_limit(runner, root, sub.student, info, built, fatal, *limit_why(ended, config),
                     env)
    for assignment, notebooks in info.items():
        for nb in notebooks:
            result.rows += _rows(root, sub.student, assignment, nb, fatal.get(nb.name),
                                 built.get(nb.name), config, flagged.get(nb.name, {}))
    for assignment, notebooks in info.items():
        for nb in notebooks:
            html = root / "feedback" / sub.student / assignment / f"{nb.name}.html"
            if nb.name not in fatal and html.exists():
                rel = Path("feedback") / sub.student / assignment / f"{nb.name}.html"
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(html, out / rel)
                result.feedback.append(str(rel))
    result.seconds = round(time.monotonic() - start, 2)
    return result


def _run_nbgrader(runner, root, assignments, student, info, fatal, config, env, start):
    """autograde + generate_feedback of ``assignments`` (one after another: ``nbgrader_main``)
    in one limited process. Each assignment's result is the file the process writes
    (``assignment_result.py``); where there is none, the reason is the grader's own evidence
    (its time limit, the process's exit) in ``fatal``."""
    run = runner.grade(student, assignments, root,
                       timeout=config.timeout - (time.monotonic() - start),
                       log_path=root / "logs" / "grading.log", env=env)
    for assignment in assignments:
        if AssignmentResult.read(root, assignment) is not None:
            continue
        for nb in info[assignment]:
            if nb.name not in fatal:
                fatal[nb.name] = _no_result(run, config)
    return run


AFTER_LIMIT_S = 120  # the grader's own time to judge the sealed records (and render the page)


def limit_why(run, config: GradeConfig) -> tuple[str, str]:
    """The words and the kind (a diagnosis: ``diagnosis.py``) of a whole-run limit that ended the
    grading process, from what the runner saw of it; ("", "") when none did. The student's time
    limit is the runner's own kill (``timed_out``). A SIGKILL the runner did not send is the
    memory limit's: the kernel's OOM killer where a cgroup's memory limit holds the job
    (``isolation.py``); ``RLIMIT_AS`` makes an allocation fail, it sends no signal, and the
    student's code cannot reach this process from its sandbox.

    >>> from types import SimpleNamespace as R
    >>> c = GradeConfig(timeout=60, memory_mb=2048)
    >>> [limit_why(R(timed_out=t, returncode=rc), c)[1] for t, rc in
    ...  ((True, None), (False, -9), (False, -11), (False, 1))]
    ['time limit', 'memory limit', '', '']
    >>> limit_why(R(timed_out=False, returncode=-9), c)[0]
    'used up the memory limit of 2048 MB'
    """
    if run.timed_out:
        return f"ran past the time limit of {config.timeout:g} s", "time limit"
    if run.returncode == -signal.SIGKILL:
        return f"{STOPPED_MEMORY} of {config.memory_mb} MB", "memory limit"
    return "", ""


def limit_stop(evidence: dict, cells: list, why: str, what: str = "") -> dict | None:
    """Where a whole-run limit (the student's ``--timeout``, the memory limit: :func:`limit_why`)
    stopped a notebook's run, when it came while the student's own code ran: the seal's evidence
    (``records.Seal``) says which cell was running; an answer cell or a cell the student added
    is the student's, as at the cell timeout (``assignment_result.timeouts_of``). Then the
    notebook is scored as a run that stopped (each exercise from its sealed record, 0 where
    none, flagged); None (``not graded``) when a test or locked cell (the course's code) was
    running, no cell was (the grader's own work between cells or after the last), or no student
    code had run.

    >>> A = {"cell_type": "code", "metadata": {"nbgrader": {"solution": True}}}
    >>> T = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "locked": True}}}
    >>> cells = [T, A, {"cell_type": "code", "metadata": {}}]
    >>> [limit_stop({"student_ran": True, "running": i}, cells, "w", "k")["cell"] for i in (1, 2)]
    [1, 2]
    >>> limit_stop({"student_ran": True, "running": 2}, cells, "w", "k")
    {'cell': 2, 'why': 'w', 'what': 'k', 'course_cell': False}
    >>> [limit_stop(e, cells, "w") for e in ({"student_ran": True, "running": 0},
    ...  {"student_ran": True, "running": None}, {"running": 1}, {})]
    [None, None, None, None]
    """
    running = evidence.get("running")
    if evidence.get("student_ran") is not True or type(running) is not int \
            or not 0 <= running < len(cells) or is_locked(cells[running]):
        return None
    return {"cell": running, "why": why, "what": what, "course_cell": False}


def _after_limit(runner, root: Path, student: str, info: dict[str, list[Notebook]],
                 built: dict[str, Rebuilt], fatal: dict, why: str, what: str, env) -> None:
    """Notebooks a whole-run limit (``why``, ``what``: :func:`limit_why`) stopped while the
    student's own code ran (:func:`limit_stop`) are not "not graded": their sealed records are
    judged, and their feedback page made, by a limited process of the grader's own
    (``autograde/after_limit.py``, at most :data:`AFTER_LIMIT_S`), and ``fatal`` loses them
    (their rows come from the result it writes)."""
    if not why:
        return
    stops: dict[str, dict[str, dict]] = {}
    for assignment, notebooks in info.items():
        for nb in notebooks:
            if nb.name in built and fatal.get(nb.name, ("", None))[1] in (Kind.TIMED_OUT,
                                                                          Kind.GRADER_ERROR):
                stop = limit_stop(read_evidence(root, assignment, nb.name),
                                  built[nb.name].notebook.cells, why, what)
                if stop is not None:
                    stops.setdefault(assignment, {})[nb.name] = stop
    if not stops:
        return
    runner.run([sys.executable, "-m", "autograder.grading.autograde.after_limit", student,
                json.dumps(stops)], root, timeout=AFTER_LIMIT_S,
               log_path=root / "logs" / "after_limit.log", env=env)
    for assignment, names in stops.items():
        result = AssignmentResult.read(root, assignment)
        for name in names:
            if result is not None and name in result.notebooks:
                del fatal[name]


def _no_result(run, config: GradeConfig) -> tuple[str, Kind]:
    """Why an assignment has no result file, from what the runner saw of the process."""
    if run.timed_out:
        return f"time limit of {config.timeout:g} s for the student exceeded", Kind.TIMED_OUT
    if run.returncode is not None and run.returncode < 0:
        return (f"grader error (the grading process was killed by signal {-run.returncode})",
                Kind.GRADER_ERROR)
    return (f"grader error (the grading process ended without a result, exit "
            f"{run.returncode})", Kind.GRADER_ERROR)


def log_of(student: str) -> str:
    """Where a student's grading log is, relative to OUT_DIR (a local run keeps it there; a
    Dask worker's scratch folder is gone with the task).

    >>> log_of("ada_1001")
    '.work/students/ada_1001/logs/grading.log'
    """
    return f".work/students/{student}/logs/grading.log"


def _rows(root, student, assignment, nb: Notebook, fatal, built: Rebuilt | None, config,
          flagged=None):
    """The rows of one notebook: :func:`status.row_status` of each exercise's facts."""
    flagged = flagged or {}
    restored = built.restored if built is not None else {}
    missing = built.missing if built is not None else []
    absent = built.absent if built is not None else []
    result = AssignmentResult.read(root, assignment) if fatal is None else None
    mine = result.notebooks.get(nb.name) if result is not None else None
    problem, kind = fatal or ("", Kind.REFUSED)
    if not problem and mine is None:
        problem, kind = f"grader error (no result for {nb.name})", Kind.GRADER_ERROR
    if not problem and result.error and not (mine.stopped or mine.graded):
        problem, kind = f"grader error ({result.error})"[:300], Kind.GRADER_ERROR
    if kind is Kind.GRADER_ERROR:  # the traceback is in the log: say where
        problem += f"; log: {log_of(student)}"
    mine = mine or NotebookResult()
    wide = _tamper_flag(mine.tampered)
    rows = []
    for gc in nb.grade_cells:
        verdict = mine.verdicts.get(gc.grade_id)
        verdict = verdict if type(verdict) is dict else None
        facts = Facts(
            problem=problem, problem_kind=kind, stopped=mine.stopped, verdict=verdict,
            graded=mine.graded,
            score=mine.scores.get(gc.grade_id), timed_out=gc.grade_id in mine.timeouts,
            student_timed_out=gc.grade_id in mine.student_timeouts,
            restored=restored.get(gc.grade_id, ""),
            absent=label(gc.grade_id) if gc.grade_id in absent else "",
            answer_missing=next((s for s in gc.solution_ids if s in missing), ""))
        status, points, flag, row_kind = row_status(facts, config.cell_timeout)
        row = {
            "student": student,
            "notebook": nb.name,
            "exercise": gc.grade_id,
            "points": _fmt(points) if row_kind.graded else "",
            "max_points": _fmt(gc.max_points),
            "status": status,
            "kind": row_kind.value,
        }
        if row_kind in (Kind.GRADED, Kind.TEST_RESTORED, Kind.ANSWER_MISSING, Kind.FROM_RECORD) \
                and verdict is not None:  # the verdict says what went wrong
            row["diagnosis"] = str(verdict.get("diagnosis", ""))
        else:
            errors = [{"output_type": "error", "ename": e[0], "evalue": e[1]}
                      for e in mine.errors.get(gc.grade_id, []) if type(e) is list and len(e) == 2]
            row["diagnosis"] = diagnose(row_kind, row["points"], row["max_points"], errors,
                                        why=str((mine.stopped or {}).get("why", "")),
                                        what=str((mine.stopped or {}).get("what", "")))
        row["flagged"] = _join_flags(flagged.get(gc.grade_id, ""), flag, wide)
        rows.append(row)
    return rows


def _tamper_flag(tampered: list) -> str:
    """The notebook-wide flag of records sent where they must not be (``records.Seal``)."""
    what = list(dict.fromkeys(str(t.get("what", "")) for t in tampered if type(t) is dict))
    return f"notebook-wide: {'; '.join(what)}" if what else ""


def _join_flags(*parts: str) -> str:
    """One ``flagged`` text of the static flags (``flagged: ...``) and the run's evidence.

    >>> _join_flags("flagged: exec/eval", "", "notebook-wide: x"), _join_flags("", "", "")
    ('flagged: exec/eval; notebook-wide: x', '')
    """
    texts = [p.removeprefix("flagged: ") for p in parts if p]
    return f"flagged: {'; '.join(texts)}"[:400] if texts else ""


def _fmt(x: float) -> str:
    """Points as the CSV shows them.

    >>> _fmt(2.0), _fmt(0.5)
    ('2', '0.5')
    """
    return f"{float(x):g}"


def to_json(r: StudentResult) -> str:
    return json.dumps(r.__dict__, indent=1)
