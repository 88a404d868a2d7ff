"""``python -m autograder.grading.nbgrader_main ARGS``: the ``nbgrader`` command, faster.

``... nbgrader_main autograde+feedback ASSIGNMENT STUDENT`` runs both grading steps in one
process (see :func:`autograde_and_feedback`); ``... nbgrader_main generate_assignments A B ...``
runs ``nbgrader generate_assignment --force`` for each assignment, in one process (see
:func:`generate_assignments`).

nbgrader 0.9.6 runs the ``alembic`` command in a subprocess (about a second) every time it
opens a gradebook, only to read the schema's head revision, which is fixed for an installed
nbgrader; ``autograde`` opens it about eight times. The grader looks the head up once and passes
it in ``COURSE_ALEMBIC_HEAD``; this wrapper hands it to nbgrader, then runs nbgrader's own main.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from pathlib import Path

import nbgrader.api

HEAD_VAR = "COURSE_ALEMBIC_HEAD"


def schema_head() -> str:
    """The gradebook schema's head revision, as ``alembic heads`` prints it (no subprocess)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    with nbgrader.api._temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        return ScriptDirectory.from_config(Config(ini)).get_current_head()


@contextlib.contextmanager
def quiet_sqlalchemy():
    """Silence SQLAlchemy's autoflush warnings that nbgrader's own gradebook code triggers."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module="nbgrader")
        warnings.filterwarnings("ignore", message=".*not in session.*")
        yield


def ensure_cached_head() -> None:
    """Look the head up once (in the grader) and cache it here and for the commands it starts."""
    if not os.environ.get(HEAD_VAR):
        os.environ[HEAD_VAR] = schema_head()
    use_cached_head()


def use_cached_head() -> None:
    """Answer nbgrader's schema-head question from the environment when it is there."""
    head = os.environ.get(HEAD_VAR)
    if head:
        nbgrader.api.get_alembic_version = lambda: head


def autograde_and_feedback(assignment: str, student: str) -> int:
    """``nbgrader autograde`` then ``nbgrader generate_feedback`` for one student, one process.

    The same nbgrader code the two commands run (its Python API, configured from the
    ``nbgrader_config.py`` in the working folder), without starting Python and importing
    nbgrader twice; then the feedback pages get their last cleaning
    (:func:`feedback_html.clean_feedback`). Exit status: 0 done, 1 autograde failed, 3 graded
    but no feedback.
    """
    from nbgrader.apps import NbGraderAPI
    from nbgrader.apps.baseapp import NbGrader

    from . import verdict

    app = NbGrader()
    app.initialize([])
    api = NbGraderAPI(config=app.config)
    root = Path.cwd()
    verdict.write_inputs(root, assignment)  # case inputs for the kernel's probe (trusted side)
    for step, run in (("autograde", api.autograde), ("generate_feedback", api.generate_feedback)):
        result = run(assignment, student, force=True)
        if step == "generate_feedback" and result["success"]:  # nothing in it may run
            from .feedback_html import clean_feedback

            course = api.coursedir
            clean_feedback(Path(course.root) / course.feedback_directory / student / assignment)
        ok = "ok" if result["success"] else "failed"
        print(result.get("log", ""), result.get("error", ""), sep="\n")
        if result["success"] and step == "autograde":
            # the scores: decided here from the kernel's records, not by whether a cell raised
            try:
                verdict.decide(root, assignment, student)
            except Exception as e:  # noqa: BLE001 - a grader error, never a student's 0
                print(f"trusted verdict failed: {type(e).__name__}: {e}")
                ok = "failed"
                result["success"] = False
        print(f"==== {step}: {ok}", flush=True)
        if not result["success"]:
            return 1 if step == "autograde" else 3
    return 0


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


if __name__ == "__main__":
    use_cached_head()
    if sys.argv[1:2] == ["autograde+feedback"]:
        sys.exit(autograde_and_feedback(*sys.argv[2:4]))
    if sys.argv[1:2] == ["generate_assignments"]:
        sys.exit(generate_assignments(sys.argv[2:]))
    from nbgrader.apps.nbgraderapp import main

    sys.exit(main())
