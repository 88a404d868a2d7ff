"""Grade one student: check the files, run nbgrader in a limited process, read the grades.

The steps that decide a grade run here, in the trusted parent; only ``nbgrader autograde`` and
``nbgrader generate_feedback`` (and through them the student's code, in a Jupyter kernel) run in
the limited process the runner starts, in the student's own course folder with its own
gradebook.

Every CSV row gets a status:

- ``graded``, or ``graded (test cell restored: edited|deleted)`` when the submission's test cell
  differed from the release or was missing and nbgrader put the source back;
- ``graded (from its record; the notebook stopped later)``: the notebook's run stopped (its
  kernel died or hung: nbgrader graded nothing), and this exercise is judged from what its test
  cell recorded before that; ``graded (no result: the notebook stopped; flagged)``: no record,
  and the exercise's answer cell tampers with the grader (``verdict.flags``): 0;
- ``not graded: <reason>``, with the points left empty, when the grade would not be the
  student's: the notebook is missing or not valid JSON, an answer cell is missing, the kernel
  died, a cell flooded its output, the time, memory or disk (``/tmp``) limit was hit (for the
  whole notebook, or for one exercise whose cells timed out, ran out of memory or filled
  ``/tmp`` while the rest of the notebook was graded).
"""

from __future__ import annotations

import json
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.reader import NotJSONError

from .cells import grade_id, is_answer, is_test, nbg
from .config import GradeConfig
from .course import NBGRADER, Notebook, make_student_course, tool_env
from .diagnosis import diagnose
from .nbgrader_main import quiet_sqlalchemy
from .runner import LocalRunner
from .submissions import IntakeProblem, Submission, find_notebook, read_notebook_bytes
from .verdict import CACHE_VAR, read_verdicts
from .verdict import flags as source_flags

_FLAGS = ("grade", "solution", "locked")  # a changed "points" is ignored: max from the source


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


def precheck(path: Path, nb: Notebook) -> tuple[str | None, dict[str, str], list[str]]:
    """(fatal reason or None, {test grade_id: 'edited'|'deleted'}, [missing answer cell ids])."""
    try:  # bounded: a link, special file or over-cap notebook is refused before parsing
        data = read_notebook_bytes(path)
    except IntakeProblem as e:
        return str(e), {}, []
    except OSError as e:
        return f"cannot read the notebook ({e.strerror})", {}, []
    try:
        sub = nbformat.reads(data.decode("utf-8"), as_version=4)
        nbformat.validate(sub)
    except (NotJSONError, UnicodeDecodeError):
        return "invalid notebook file (not valid JSON)", {}, []
    except Exception as e:  # schema errors, unreadable files
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"invalid notebook file ({type(e).__name__}: {first[:100]})", {}, []
    cells = {}
    for c in sub.cells:
        gid = grade_id(c)
        if gid is not None and gid not in cells:
            cells[gid] = c
    restored = {}
    release = {nbg(c).get("grade_id"): nbg(c) for c in nb.release.cells if nbg(c)}
    for gid, src in nb.release_tests.items():
        c = cells.get(gid)
        if c is None:
            restored[gid] = "deleted"
        elif any(nbg(c).get(k) != release[gid].get(k) for k in _FLAGS):
            restored[gid] = "flags changed"  # put back by restore_locked_metadata
        elif c.source != src or c.cell_type != "code":
            restored[gid] = "edited"
    missing = [s for s in nb.solution_ids if s not in cells]
    return None, restored, missing


def restore_locked_metadata(data: bytes, nb: Notebook, dest: Path) -> None:
    """Copy the submission to ``dest`` with the release's nbgrader flags on its locked and test
    cells (a test cell turned into an answer or a plain cell would make nbgrader fail the whole
    notebook; with its flags back nbgrader restores its source and grades it)."""
    sub = nbformat.reads(data.decode("utf-8", errors="replace"), as_version=4)
    release = {nbg(c).get("grade_id"): c for c in nb.release.cells
               if nbg(c).get("locked") or nbg(c).get("grade")}
    changed = False
    for c in sub.cells:
        gid = nbg(c).get("grade_id")
        ref = release.get(gid)
        if ref is not None and nbg(c) != nbg(ref):
            c.metadata["nbgrader"] = dict(nbg(ref))
            if c.cell_type != ref.cell_type:
                c.cell_type = ref.cell_type
                if ref.cell_type == "code":
                    c.outputs, c.execution_count = [], None
                else:
                    c.pop("outputs", None)
                    c.pop("execution_count", None)
            changed = True
    if changed:
        nbformat.write(sub, dest)
    else:
        dest.write_bytes(data)


# ---- reading what the kernel did (parent side, after the run) -------------------------------


def _problem(cell) -> str | None:
    """'timeout' / 'memory' / 'disk' when a cell's outputs show it hit a limit."""
    for out in cell.get("outputs", []):
        if out.get("output_type") != "error":
            continue
        if out.get("ename") == "CellTimeoutError":  # appended by nbgrader when nbclient interrupts
            return "timeout"
        text = " ".join([out.get("ename", ""), out.get("evalue", "")] + out.get("traceback", []))
        if "MemoryError" in text or "can't allocate memory" in text:
            return "memory"
        if "No space left on device" in text or "File too large" in text:
            return "disk"  # the sandbox's /tmp (memory) is full, or a file over RLIMIT_FSIZE
    return None


def exercise_problems(autograded: nbformat.NotebookNode) -> dict[str, str]:
    """{test grade_id: problem} for tests whose exercise (answer cells to test) hit a limit."""
    problems, current, after_test = {}, None, False
    for cell in autograded.cells:
        if is_answer(cell) and after_test:
            current, after_test = None, False  # a new exercise starts
        current = current or _problem(cell)
        if is_test(cell):
            after_test = True
            if current:
                problems[nbg(cell)["grade_id"]] = current
    return problems


def _fatal_reason(log: str, run, what: str, config: GradeConfig) -> str:
    if run.timed_out:
        return f"time limit of {config.timeout:g} s for the student exceeded"
    if "DeadKernelError" in log or "Kernel died" in log or "kernel died" in log:
        return "the kernel died while running the notebook (exit, crash or signal)"
    if "Timeout waiting for IOPub output" in log and "Timeout waiting for execute reply" \
            not in log:  # the cell ended in time, its output kept coming
        return "a cell printed more output than the grader could read (output flood)"
    if "CellTimeoutError" in log:
        return f"a cell ran over {config.cell_timeout} s and could not be interrupted"
    if "MemoryError" in log:
        return f"memory limit of {config.memory_mb} MB exceeded"
    if run.returncode is not None and run.returncode < 0:
        return f"{what} was killed by signal {-run.returncode}"
    errors = [ln for ln in log.splitlines() if "[ERROR]" in ln or "Error" in ln]
    tail = errors[-1].strip()[:160] if errors else "no error message"
    return f"nbgrader {what} failed (exit {run.returncode}): {tail}"


def _read_grades(root: Path, assignment: str, notebook: str, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with quiet_sqlalchemy(), Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        sn = gb.find_submission_notebook(notebook, assignment, student)
        return {g.name: g.auto_score for g in sn.grades}


def failed_result(sub: Submission, info: dict[str, list[Notebook]], error: str):
    """Every row 'not graded' after an error of the grader itself (not of the student's code).

    Its fingerprint matches nothing, so the next run grades the student again.
    """
    rows = [
        {"student": sub.student, "notebook": nb.name, "exercise": g.grade_id, "points": "",
         "max_points": _fmt(g.max_points), "status": f"not graded: grader error ({error})",
         "diagnosis": "grader error", "flagged": ""}
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
    parts: int = 1,
) -> StudentResult:
    """Grade every assignment in ``info`` for one student; never raises for the student's code.

    All of the student's assignments are graded by one process (nbgrader, torch and the checks
    are imported once, one kernel zygote); with ``parts`` > 1 (cores the class leaves idle)
    they are split into that many lanes of about equal work, graded at the same time by that
    process (``nbgrader_main``: a thread and a kernel at a time per lane).
    """
    runner = runner or LocalRunner(config)
    start = time.monotonic()
    shutil.rmtree(out / "feedback" / sub.student, ignore_errors=True)  # from an older grading
    if getattr(sub, "problem", ""):  # intake could not use this entry: nothing to run
        rows = [
            {"student": sub.student, "notebook": nb.name, "exercise": g.grade_id, "points": "",
             "max_points": _fmt(g.max_points), "status": f"not graded: {sub.problem}",
             "diagnosis": diagnose(f"not graded: {sub.problem}", "", "")}
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
        COURSE_SMOKE="1",  # notebooks that train (chapter 8) run their smoke size when graded
    )
    env[CACHE_VAR] = str(template / "kernels")  # built once per class (verdict.prepare)
    result = StudentResult(sub.student, fingerprint, [], 0.0)
    fatal: dict[str, str] = {}  # notebook -> reason
    restored: dict[str, dict[str, str]] = {}
    missing: dict[str, list[str]] = {}
    flagged: dict[str, dict[str, str]] = {}  # notebook -> {test: "flagged: ..."}
    to_run = []
    to_flag = []  # (notebook, submitted bytes): flagged while the grading process runs
    for assignment, notebooks in info.items():
        dest = root / "submitted" / sub.student / assignment
        dest.mkdir(parents=True)
        for nb in notebooks:
            path, note = find_notebook(sub, nb.name)
            if note and path is not None:
                result.notes.append(f"{nb.name}: {note}")
            if path is None:
                fatal[nb.name] = note
                continue
            reason, restored[nb.name], missing[nb.name] = precheck(path, nb)
            if reason:
                fatal[nb.name] = reason
            else:  # the checked bytes, not the path again (it may have been swapped)
                data = read_notebook_bytes(path)
                restore_locked_metadata(data, nb, dest / f"{nb.name}.ipynb")
                to_flag.append((nb, data))
        if any(nb.name not in fatal for nb in notebooks):
            to_run.append(assignment)
    lanes = split_assignments(to_run, info, parts)
    with ThreadPoolExecutor(1, thread_name_prefix="course-grade-student") as pool:
        # the grading process starts first; the source flags (read only by the rows, half a
        # second of this process's CPU per student) are found while it runs
        run = pool.submit(_run_nbgrader, runner, root, lanes, sub.student, info, fatal,
                          config, env, start) if lanes else None
        for nb, data in to_flag:
            flagged[nb.name] = source_flags(data, nb)
        if run is not None:
            run.result()  # an error of the grader itself is raised here, as before
    for assignment, notebooks in info.items():
        for nb in notebooks:
            result.rows += _rows(root, sub.student, assignment, nb, fatal.get(nb.name),
                                 restored.get(nb.name, {}), missing.get(nb.name, []), config,
                                 flagged.get(nb.name, {}))
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


def split_assignments(assignments: list[str], info: dict[str, list[Notebook]],
                      parts: int) -> list[list[str]]:
    """``assignments`` in at most ``parts`` groups of about equal work (longest first, each to
    the lightest group; the work of an assignment is its number of code cells), each group in
    course order; no empty group.

    >>> split_assignments(["a", "b", "c"], {}, 2)
    [['a', 'c'], ['b']]
    """
    def work(a):
        return sum(c.cell_type == "code" for nb in info.get(a, []) for c in nb.source.cells) \
            or 1

    groups: list[list[str]] = [[] for _ in range(max(1, min(parts, len(assignments))))]
    load = [0] * len(groups)
    for a in sorted(assignments, key=lambda a: -work(a)):
        k = load.index(min(load))
        groups[k].append(a)
        load[k] += work(a)
    order = {a: i for i, a in enumerate(assignments)}
    return [sorted(g, key=order.get) for g in groups if g]


def _run_nbgrader(runner, root, lanes, student, info, fatal, config, env, start):
    """autograde + generate_feedback of the assignments of ``lanes`` (graded at the same time,
    each lane's in turn: ``nbgrader_main``) in one limited process; fills ``fatal`` for
    notebooks that were not graded (no feedback alone is not a grading failure)."""
    from .nbgrader_main import LANE

    log_path = root / "logs" / "grading.log"
    args = [a for k, lane in enumerate(lanes) for a in ([LANE] if k else []) + lane]
    run = runner.run(
        [*NBGRADER, "autograde+feedback", student, *args],
        root,
        timeout=config.timeout - (time.monotonic() - start),
        log_path=log_path,
        env=env,
        lanes=len(lanes),  # one worker's share of the cores for each lane
    )
    log = log_path.read_text(errors="replace")
    for assignment in [a for lane in lanes for a in lane]:
        part = assignment_log(log, assignment)
        # graded: its autograde ended well (feedback may be missing; the process may have run
        # out of time after it)
        graded = f"==== {assignment} autograde: ok" in part
        for nb in info[assignment]:
            if nb.name in fatal:
                continue
            done = root / "autograded" / student / assignment / f"{nb.name}.ipynb"
            if not graded or not done.exists():
                fatal[nb.name] = _fatal_reason(part, run, "autograde", config)


def assignment_log(log: str, assignment: str) -> str:
    """The part of a grading process's log about one assignment: its result block (its
    ``result`` marker to its ``autograde:`` marker, written at once by ``nbgrader_main``)
    when there is one, else from its ``begin`` marker to the end (the process stopped while
    it was graded; another lane's lines may be in it); "" when it never began.

    >>> log = ("==== a begin\\n==== b begin\\n==== b result\\nB\\n==== b autograde: ok\\n"
    ...        "==== a result\\nA\\n==== a autograde: failed\\n")
    >>> assignment_log(log, "a")
    '==== a result\\nA\\n==== a autograde: failed\\n'
    >>> assignment_log(log, "b")
    '==== b result\\nB\\n==== b autograde: ok\\n'
    >>> assignment_log("x\\n==== a begin\\nA\\n", "a"), assignment_log("x", "a")
    ('==== a begin\\nA\\n', '')
    """
    name = re.escape(assignment)
    block = re.search(rf"^==== {name} result$.*?^==== {name} autograde: \S+$\n?", log,
                      re.M | re.S)
    if block:
        return block.group(0)
    begin = re.search(rf"^==== {name} begin$", log, re.M)
    return log[begin.start():] if begin else ""


# A notebook whose run stopped (kernel died or hung) keeps the verdicts its kernel recorded
# before it stopped; an exercise with no record is 0 when the submission tampers with the
# grader on it (flagged), else not graded (see _rows)
STOPPED_RECORDED = "graded (from its record; the notebook stopped later)"
STOPPED_FLAGGED = "graded (no result: the notebook stopped; flagged)"


def _rows(root, student, assignment, nb: Notebook, fatal, restored, missing, config,
          flagged=None):
    rows = []
    grades, problems, outputs, verdicts = {}, {}, {}, {}
    stopped = {}  # the run stopped: verdicts judged from what the kernel recorded before
    if fatal is not None:
        stopped = {gid: v for gid, v in read_verdicts(root, assignment, nb.name).items()
                   if type(v) is dict and v.get("stopped") is True}
    if fatal is None:
        try:
            verdicts = read_verdicts(root, assignment, nb.name)
            grades = _read_grades(root, assignment, nb.name, student)
            autograded = root / "autograded" / student / assignment / f"{nb.name}.ipynb"
            done = nbformat.read(autograded, as_version=4)
            problems = exercise_problems(done)
            outputs = {grade_id(c): c.get("outputs", []) for c in done.cells}
        except Exception as e:  # a gradebook or notebook we cannot read is not a 0
            fatal = f"cannot read the grading result ({type(e).__name__}: {e})"[:200]
    for gc in nb.grade_cells:
        points = grades.get(gc.grade_id)
        gone = [s for s in gc.solution_ids if s in missing]
        early = stopped.get(gc.grade_id)
        if fatal and early and early.get("recorded") is True:
            status, points = STOPPED_RECORDED, float(early.get("points", 0.0))
            verdicts[gc.grade_id] = early
        elif fatal and early and (flagged or {}).get(gc.grade_id):
            status, points = STOPPED_FLAGGED, 0.0
            verdicts[gc.grade_id] = {"diagnosis": f"no result: {fatal}"}
        elif fatal:
            status = f"not graded: {fatal}"
        elif gone:
            status = f"not graded: answer cell {gone[0]} missing from the submission"
        elif problems.get(gc.grade_id) == "timeout":
            status = f"not graded: a cell of this exercise ran over {config.cell_timeout} s"
        elif problems.get(gc.grade_id) == "memory":
            status = f"not graded: memory limit of {config.memory_mb} MB exceeded"
        elif problems.get(gc.grade_id) == "disk":
            status = (f"not graded: disk limit exceeded (/tmp holds {config.tmp_mb} MB, a file "
                      f"at most {config.fsize_mb} MB)")
        elif points is None:
            status = "not graded: no grade recorded by nbgrader"
        elif gc.grade_id in restored:
            status = f"graded (test cell restored: {restored[gc.grade_id]})"
        else:
            status = "graded"
        graded = status.startswith("graded")
        row = {
            "student": student,
            "notebook": nb.name,
            "exercise": gc.grade_id,
            "points": _fmt(points) if graded else "",
            "max_points": _fmt(gc.max_points),
            "status": status,
        }
        if graded and gc.grade_id in verdicts:  # the trusted verdict says what went wrong
            row["diagnosis"] = str(verdicts[gc.grade_id].get("diagnosis", ""))
        else:
            row["diagnosis"] = diagnose(status, row["points"], row["max_points"],
                                        outputs.get(gc.grade_id))
        row["flagged"] = (flagged or {}).get(gc.grade_id, "")
        rows.append(row)
    return rows


def _fmt(x: float) -> str:
    """Points as the CSV shows them.

    >>> _fmt(2.0), _fmt(0.5)
    ('2', '0.5')
    """
    return f"{float(x):g}"


def to_json(r: StudentResult) -> str:
    return json.dumps(r.__dict__, indent=1)
