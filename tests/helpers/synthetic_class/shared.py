"""Grade a synthetic class once per test session.

The tests that read one graded class run on one xdist worker (tests/conftest.py: a module is
one work unit, the modules that share a class one, ``SHARED_CLASSES``), so the class is
graded in that worker's temp folder (:func:`graded_dir`) the first time a test asks, and read
back from there afterwards. Only the class templates (:func:`notebook_info`) are shared by the
workers, under a file lock: they are a cache, built once per test session.
"""

from __future__ import annotations

import csv
import fcntl
import json
import subprocess
import sys
import time
from pathlib import Path

from . import ClassBuilder, Expected

REPO = Path(__file__).resolve().parents[3]


def graded_dir(tmp_path_factory) -> Path:
    """This worker's folder of graded classes (one test session)."""
    root = tmp_path_factory.getbasetemp() / "graded"
    root.mkdir(exist_ok=True)
    return root


def template(source: Path, assignments, cell_timeout: int) -> tuple[Path, dict]:
    """The session's template course of ``assignments`` for this cell limit and its notebook
    info: built once per test session (``build_template`` under a file lock, in
    ``helpers.TEMPLATES``), as course-grade would build it (nbgrader's generate_assignment,
    the kernels' packages: about 10 s of CPU each)."""
    from autograder.grading.config import GradeConfig
    from autograder.grading.parent.course import build_template

    import helpers

    root = helpers.TEMPLATES
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return build_template(Path(source).resolve(), list(assignments), root,
                              GradeConfig(cell_timeout=cell_timeout))


def notebook_info(tmp_path_factory, source: Path, assignments) -> dict:
    """``build_template``'s notebook info ({assignment: [Notebook]}) from the session's
    template (:func:`template`): the tests that build a class only need the notebooks'
    description, which no grading limit changes."""
    return template(source, assignments, 60)[1]


def _cell_timeout(extra: tuple) -> int:
    """The cell limit course-grade runs with for these arguments (``--cell-timeout``'s)."""
    from autograder.grading.config import CELL_TIMEOUT_S

    return int(extra[extra.index("--cell-timeout") + 1]) if "--cell-timeout" in extra \
        else CELL_TIMEOUT_S


def run_info(source: Path, assignments, extra: tuple) -> dict:
    """``notebook_info`` from the session's template that a course-grade run with the
    arguments ``extra`` starts from (its cell limit): the same notebooks'
    description, without building a second template (one at 60 s) only to describe them."""
    return template(source, assignments, _cell_timeout(tuple(extra)))[1]


def grade_cmd(submissions: Path, out: Path, source: Path, *extra: str) -> list[str]:
    """The course-grade command for a test class (its template: a copy of the session's
    template cache's, ``COURSE_CACHE`` in tests/conftest.py)."""
    return [
        sys.executable, "-m", "autograder.grade", str(submissions), "--out", str(out),
        "--source", str(source), "--no-progress", *extra,
    ]


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def graded_class(tmp_path_factory, name: str, source: Path, assignment: str,
                 args: tuple[str, ...], extra: tuple[str, ...] = ()) -> dict:
    """Build the class for ``assignment`` and grade it once; returns a dict (see the end)."""
    root = graded_dir(tmp_path_factory) / name
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    if not done.exists():
        info = run_info(source, [assignment], args)
        expected = ClassBuilder(info[assignment][0]).build(root / "class", extra)
        t0 = time.monotonic()
        proc = subprocess.run(
            grade_cmd(root / "class", root / "out", source, *args),
            cwd=REPO, capture_output=True, text=True,
        )
        seconds = time.monotonic() - t0
        done.write_text(json.dumps({
            "returncode": proc.returncode,
            "stderr": proc.stderr[-5000:],
            "seconds": seconds,
            "expected": {s: {k: v.__dict__ for k, v in e.items()} for s, e in expected.items()},
        }))
    result = json.loads(done.read_text())
    result["expected"] = {
        s: {k: Expected(**v) for k, v in e.items()} for s, e in result["expected"].items()
    }
    result["out"] = root / "out"
    result["rows"] = read_csv(root / "out" / "grades.csv") if result["returncode"] == 0 else []
    return result
