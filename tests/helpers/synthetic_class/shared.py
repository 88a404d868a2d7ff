"""Grade a synthetic class once per test session, even under pytest-xdist.

A session-scoped fixture runs once per xdist worker; grading a class is the slowest thing in
the suite, so the first worker to ask does it (under a file lock) and the others read its
result from the shared temp folder.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from . import ClassBuilder, Expected

REPO = Path(__file__).resolve().parents[3]


def shared_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "run")
        base = base.parent / f"shared-{run}"
    base.mkdir(parents=True, exist_ok=True)
    return base


def notebook_info(tmp_path_factory, source: Path, assignments) -> dict:
    """``build_template``'s notebook info ({assignment: [Notebook]}) from one template per
    test session for each set of ``assignments`` (a shared folder, a file lock): the tests
    that build a class only need the notebooks' description, which no grading limit changes,
    so they share the template instead of each generating its own (nbgrader, the kernels'
    packages: about 10 s of CPU each)."""
    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    root = shared_dir(tmp_path_factory) / "templates"
    root.mkdir(exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _, info = build_template(Path(source), list(assignments), root,
                                 GradeConfig(cell_timeout=60))
    return info


def grade_cmd(submissions: Path, out: Path, source: Path, *extra: str) -> list[str]:
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
    root = shared_dir(tmp_path_factory) / name
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            info = notebook_info(tmp_path_factory, source, [assignment])
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
