"""A student's grading process, and ``python -m autograder.grading.autograde.nbgrader_main
ARGS``: the ``nbgrader`` command, faster.

:func:`student_main` (``STUDENT ASSIGNMENT...``) runs both grading steps for every assignment
in one process (see :func:`autograde_and_feedback`), in a fork of the warm grading process
(``warm.py``: the one way it starts);
``... nbgrader_main generate_assignments A B ...`` runs ``nbgrader generate_assignment --force``
for each assignment, in one process (see :func:`generate_assignments`);
``... nbgrader_main kernel_caches CACHE A B ...`` builds the class's kernel packages and probe
inputs (see :func:`build_kernel_caches`).

Before nbgrader's own main runs, the course's changes to nbgrader's and nbconvert's code are
applied (``nbgrader_patches.py``: the gradebook schema's head from ``COURSE_ALEMBIC_HEAD``,
templates compiled once, one engine per gradebook).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

from ..gradebook import quiet_sqlalchemy
from ..nbgrader_patches import share_compiled_templates, share_engines, use_cached_head


def autograde_and_feedback(student: str, assignments: list[str]) -> int:
    """``nbgrader autograde`` then ``nbgrader generate_feedback`` for one student and each of
    ``assignments`` in turn, in one process.

    The same nbgrader code the two commands run (its Python API, configured from the
    ``nbgrader_config.py`` in the working folder), without starting Python and importing
    nbgrader, torch and the checks again for every command and every assignment (about 6 s
    each time). Per assignment: the trusted side's kernel package and probe inputs
    (:func:`kernel_package.prepare`, :func:`kernel_package.write_inputs`) and the kernel's mounts
    (:func:`kernel_package.arm`), autograde, the trusted verdict (:func:`verdict.decide`),
    feedback with its last cleaning (:func:`feedback_html.clean_feedback`; in a thread of its
    own, while the next assignment is graded: :class:`_Feedback`).

    What happened to each assignment is its result file (``assignment_result.py``), the one
    thing the parent reads. The log says it for a person: ``==== <assignment> begin``, then
    ``==== <assignment> result``, nbgrader's log of it and ``==== <assignment> autograde:
    ok|failed``; ``==== <assignment> generate_feedback: ok|failed`` later. A failed
    assignment does not stop the next one. Exit status: 0 all done, 1 an autograde failed,
    3 graded but some feedback missing.
    """
    import nbformat

    from ..sandbox.kernel import PARENT_VAR
    from . import kernel_package

    os.environ[PARENT_VAR] = str(os.getpid())  # the kernels' launcher checks it (kernel.py)
    root = Path.cwd()
    cache = os.environ.get(kernel_package.CACHE_VAR) or None
    sources = {a: [nbformat.read(p, as_version=4)
                   for p in sorted((root / "source" / a).glob("*.ipynb"))] for a in assignments}
    done: set[str] = set()

    def ready(assignment: str) -> None:
        # the trusted side's kernel package and probe folder of this assignment (the class's
        # cached copy when the grader names one), and the case inputs for the kernel's probe
        if assignment not in done:
            done.add(assignment)
            kernel_package.prepare(root, sources[assignment], cache, assignment)
            kernel_package.write_inputs(root, assignment)

    base = root / ".grader" / "sandbox-base.json"
    base_spec = json.loads(base.read_text()) if base.exists() else None
    # the zygote first: its imports (torch: 3 s) overlap nbgrader's
    zyg = _start_zygote(root, assignments, ready, base_spec, sources)
    try:
        use_cached_head()
        from nbgrader.apps.baseapp import NbGrader

        share_compiled_templates()  # each feedback page's exporter: templates compiled once
        share_engines()  # every gradebook opened here: its statements compiled once
        app = NbGrader()
        app.initialize([])
        return _grade_in_turn(app.config, student, assignments, root, sources, ready,
                              kernel_package.arm)
    finally:
        if zyg is not None:
            zyg.close()


def _grade_in_turn(config, student: str, assignments: list[str], root: Path, sources: dict,
                   ready, arm) -> int:
    """Grade ``assignments`` one after another (:func:`autograde_and_feedback`); every
    graded assignment's feedback page is waited for, whatever happened to the others."""
    import logging

    from nbgrader.apps import NbGraderAPI

    from . import stopped

    log = logging.getLogger("course-grade.autograde")
    log.setLevel(logging.INFO)
    api = NbGraderAPI(config=config, log=log)
    feedback = _Feedback(config)
    status = 0
    for assignment in assignments:
        ready(assignment)
        code = _grade_one(api, root, student, assignment, sources[assignment], arm)
        # a run that stopped, and each notebook autograded all the same, still get a page
        if code == 0 or stopped.autograde(root, student, assignment) or _graded_any(
                root, assignment):
            feedback.submit(student, assignment)
        status = status or code
    # every page of the assignments that were graded, whatever happened to the others: the
    # process ends with os._exit, which would drop the pages still being written
    pages = feedback.wait()
    return status or pages


def _graded_any(root: Path, assignment: str) -> bool:
    """Whether a notebook of ``assignment`` was autograded though another's failed."""
    from ..assignment_result import AssignmentResult

    result = AssignmentResult.read(root, assignment)
    return result is not None and any(nb.graded for nb in result.notebooks.values())


def _start_zygote(root: Path, assignments: list[str], ready, base_spec: dict | None,
                  sources: dict):
    """The kernels' zygote of this grading process (``sandbox/zygote.py``), its socket named
    to the kernels' launchers in ``COURSE_ZYGOTE``: then the one way its kernels start. None
    without the sandbox or where the grader is not root (the sandbox user's uid needs it), or
    for kernels that cannot share one (``zygote.plan``): each kernel then starts in a bwrap of
    its own. Every assignment's folders are prepared first (the zygote stages what their
    kernels mount)."""
    from ..sandbox import zygote
    from .kernel_package import sandbox_spec

    if base_spec is None or os.geteuid() != 0:
        return None
    for assignment in assignments:
        ready(assignment)
    specs = [sandbox_spec(root, a) for a in assignments]
    code = [c.source for a in assignments for nb in sources[a] for c in nb.cells
            if c.cell_type == "code"]
    zyg = zygote.start(specs, Path(base_spec["home"]) / "zygote", zygote.preload_for(code))
    if zyg is not None:
        os.environ[zygote.ZYGOTE_VAR] = zyg.ctl
    return zyg


_SAY = threading.Lock()  # the grading log: whole lines from the feedback thread and the main


def _say(*parts: str) -> None:
    with _SAY:
        sys.stdout.write("\n".join(parts) + "\n")
        sys.stdout.flush()


def _grade_one(api, root: Path, student: str, assignment: str, sources: list, arm) -> int:
    """``autograde`` and the trusted verdict of one assignment of
    :func:`autograde_and_feedback` (its folders prepared); writes the assignment's result
    (``assignment_result.py``), the one thing the parent reads; its exit status (0: graded)."""
    from ..assignment_result import AssignmentResult, result_path
    from . import verdict

    result_path(root, assignment).unlink(missing_ok=True)
    _say(f"==== {assignment} begin")
    arm(root, assignment)  # this assignment's mounts for its kernels
    verdict.warm(sources)  # the trusted side's imports, while autograde waits on the kernel
    out = AssignmentResult(assignment)
    names = sorted(p.stem for p in (root / "source" / assignment).glob("*.ipynb"))
    handed = [n for n in names
              if (root / "submitted" / student / assignment / f"{n}.ipynb").is_file()]
    # several notebooks: one at a time, so one whose code ends its kernel (nbgrader then
    # removes what it autograded of that run) costs the others neither their run nor page
    runs = {name: _autograde(api, assignment, student, name)
            for name in (handed if len(handed) > 1 else ["*"])}
    failed = {name: _last_line(r.get("error", "")) or "nbgrader autograde failed"
              for name, r in runs.items() if not r["success"]}
    verdicts: dict[str, dict] = {}
    graded: set[str] = set()
    if not failed:
        out.autograde = "ok"
        # the scores: decided here from the sealed records, not by whether a cell raised
        try:
            verdicts = verdict.decide(root, assignment, student)
            graded = set(names)
        except Exception as e:  # noqa: BLE001 - a grader error, never a student's 0
            out.autograde, out.error = "failed", f"trusted verdict failed: {type(e).__name__}: {e}"
    else:
        out.error = next(iter(failed.values()))
        # the run stopped (kernel died or hung): what the kernel recorded before that is
        # still judged (the status function decides which rows it scores); the notebooks
        # autograded on their own are decided as any
        try:
            verdicts = verdict.judge_records(root, assignment)
            if len(failed) < len(runs):
                verdicts.update(verdict.decide(root, assignment, student))
                graded = set(names) - set(failed)
        except Exception as e:  # noqa: BLE001 - a grader error, never a student's 0
            out.error = f"judging the records failed: {type(e).__name__}: {e}"
    try:
        out.notebooks = _notebook_results(
            root, student, assignment, sources, verdicts, graded=graded,
            error={n: failed.get(n, failed.get("*", "")) for n in names})
    except Exception as e:  # noqa: BLE001 - a grader error, never a student's 0
        out.autograde, out.error = "failed", f"reading the grades failed: {type(e).__name__}: {e}"
    out.write(root)
    _say(f"==== {assignment} result", *(part for r in runs.values()
                                          for part in (r.get("log", ""), r.get("error", ""))),
         out.error, f"==== {assignment} autograde: {out.autograde}")
    return 0 if out.autograde == "ok" else 1


def _autograde(api, assignment: str, student: str, notebook: str = "*") -> dict:
    """nbgrader's ``autograde`` of one student's assignment, or of its ``notebook`` only (its
    ``--notebook``: a failure removes that notebook's autograded copy, not the others')."""
    course = api.coursedir
    try:
        course.notebook_id = notebook
        return api.autograde(assignment, student, force=True)
    except Exception as e:  # noqa: BLE001 - a grader error, never a student's 0
        return {"success": False, "error": f"{type(e).__name__}: {e}", "log": ""}
    finally:
        course.notebook_id = "*"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def stop_of(evidence: dict, graded: bool, error: str) -> dict | None:
    """Where a notebook's run stopped, for the rows (``NotebookResult.stopped``): the seal's
    own stop; else, where nbgrader failed after the student's code had run, that failure
    (nothing nbgrader or nbconvert does after the student's code ran makes a notebook "not
    graded": its recorded exercises keep their verdicts, the rest score 0, flagged); else None.

    >>> stop_of({"stopped": {"cell": 3, "why": "ended the kernel"}}, False, "x")["why"]
    'ended the kernel'
    >>> stop_of({"student_ran": True}, False, "KeyError: 'grade_id'")["why"]
    "left a notebook nbgrader could not finish (KeyError: 'grade_id')"
    >>> stop_of({"student_ran": True}, True, ""), stop_of({}, False, "boom")
    (None, None)
    >>> stop_of({"student_ran": True}, False, "")  # not nbgrader's failure: the grader's own
    """
    if evidence.get("stopped"):
        return evidence["stopped"]
    if graded or not error or evidence.get("student_ran") is not True:
        return None
    return {"cell": None, "why": f"left a notebook nbgrader could not finish ({error[:200]})",
            "course_cell": False}


def _notebook_results(root: Path, student: str, assignment: str, sources: list,
                      verdicts: dict, graded: set[str], error: dict[str, str]) -> dict:
    """{notebook: NotebookResult} of one assignment: the gradebook's points, the verdicts and
    the run's evidence (``records.Seal``), each exercise named by its test cells; ``graded``
    the notebooks nbgrader autograded, ``error`` {notebook: why its autograde failed}."""
    import nbformat

    from ..assignment_result import NotebookResult, timeouts_of
    from ..cells import grade_id, is_test
    from .records import read_evidence

    names = sorted(p.stem for p in (root / "source" / assignment).glob("*.ipynb"))
    out = {}
    for name in names:
        evidence = read_evidence(root, assignment, name)
        nb = NotebookResult(verdicts=verdicts.get(name, {}),
                            stopped=stop_of(evidence, name in graded, error.get(name, "")),
                            tampered=list(evidence.get("tampered", [])))
        done = root / "autograded" / student / assignment / f"{name}.ipynb"
        if name in graded and done.exists():
            executed = nbformat.read(done, as_version=4)
            nb.graded = True
            nb.scores = _scores(root, assignment, name, student)
            nb.timeouts, nb.student_timeouts = timeouts_of(executed.cells,
                                                           evidence.get("timeouts", []))
            nb.errors = {grade_id(c): [[str(o.get("ename", ""))[:100],
                                        str(o.get("evalue", ""))[:2000]]
                                       for o in c.get("outputs", [])
                                       if o.get("output_type") == "error"]
                         for c in executed.cells if is_test(c)}
        out[name] = nb
    return out


def _scores(root: Path, assignment: str, notebook: str, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with quiet_sqlalchemy(), Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        sn = gb.find_submission_notebook(notebook, assignment, student)
        return {g.name: g.auto_score for g in sn.grades if g.auto_score is not None}


class _Feedback:
    """``generate_feedback`` (and its last cleaning) of each graded assignment, one after
    another in a thread of their own, while the main thread grades the next assignment (the
    kernel runs on another core meanwhile: each page's rendering is 0.3 to 1 s of this
    process's CPU). Its own API object (its own course directory: nbgrader sets the assignment
    and student on it while it runs) and its own logger (so neither step's captured log holds
    the other's lines). The parent reads no marker of this step (it looks for the pages)."""

    def __init__(self, config):
        import logging
        from concurrent.futures import ThreadPoolExecutor

        from nbgrader.apps import NbGraderAPI

        log = logging.getLogger("course-grade.feedback")
        log.setLevel(logging.INFO)
        self.api = NbGraderAPI(config=config, log=log)
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="course-grade-feedback")
        self.futures: list = []

    def submit(self, student: str, assignment: str) -> None:
        self.futures.append(self.pool.submit(self._one, student, assignment))

    def _one(self, student: str, assignment: str) -> int:
        from .feedback_html import clean_feedback

        try:
            result = self.api.generate_feedback(assignment, student, force=True)
            if result["success"]:  # nothing in it may run
                course = self.api.coursedir
                clean_feedback(Path(course.root) / course.feedback_directory / student
                               / assignment)
        except Exception as e:  # noqa: BLE001 - no feedback page, never a lost grade
            result = {"success": False, "error": f"{type(e).__name__}: {e}"}
        ok = "ok" if result["success"] else "failed"
        _say(result.get("log", ""), result.get("error", ""),
             f"==== {assignment} generate_feedback: {ok}")
        return 0 if result["success"] else 3

    def wait(self) -> int:
        """Every page written (or failed); 3 when one is missing, else 0."""
        codes = [f.result() for f in self.futures]
        self.pool.shutdown()
        return 3 if any(codes) else 0


def generate_assignments(assignments: list[str]) -> int:
    """``nbgrader generate_assignment A --force`` for each of ``assignments`` (the template
    course, once per class), through nbgrader's Python API in one process: Python, nbgrader
    and the notebook exporters start once instead of once per assignment. Exit status 1 at
    the first failure (its log and error printed)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.apps.baseapp import NbGrader

    app = NbGrader()
    app.initialize([])
    api = NbGraderAPI(config=app.config)
    for assignment in assignments:
        result = api.generate_assignment(assignment, force=True, create=True)
        print(result.get("log", ""), result.get("error", ""), sep="\n")
        if not result["success"]:
            print(f"==== generate_assignment {assignment}: failed", flush=True)
            return 1
    return 0


def build_kernel_caches(cache: str, assignments: list[str]) -> int:
    """The class's kernel packages and probe inputs for each assignment, built once before the
    students are graded (:func:`kernel_package.build_cache`; reused while nothing they are made from
    changed). Runs in the template course folder."""
    import nbformat

    from . import kernel_package

    for assignment in assignments:
        sources = [nbformat.read(p, as_version=4)
                   for p in sorted((Path.cwd() / "source" / assignment).glob("*.ipynb"))]
        kernel_package.build_cache(Path(cache), sources)
    return 0


def student_main(args: list[str]) -> None:
    """``STUDENT ASSIGNMENT ...``: grade, then end the process at once (the entry of
    ``warm.py``'s copies)."""
    code = autograde_and_feedback(args[0], args[1:])
    # everything is written: skip the interpreter's clean-up (2 s with torch, ZeroMQ and
    # nbgrader loaded, after the last notebook of every student)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    use_cached_head()
    if sys.argv[1:2] == ["kernel_caches"]:
        sys.exit(build_kernel_caches(sys.argv[2], sys.argv[3:]))
    if sys.argv[1:2] == ["generate_assignments"]:
        sys.exit(generate_assignments(sys.argv[2:]))
    from nbgrader.apps.nbgraderapp import main

    sys.exit(main())
