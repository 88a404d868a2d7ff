"""Grade one small adversarial class once per test session (file lock across xdist workers).

``graded_attack_class(tmp_path_factory, name, assignment, make)``: ``make(notebook)`` returns a
builder whose ``build_attacks(dest)`` writes the class and returns {student: {exercise: Row}}.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import time

from synthetic_class.shared import REPO, grade_cmd, read_csv, shared_dir

from .verdict_class import Row

SOURCE = REPO / "solutions"


def graded_attack_class(tmp_path_factory, name: str, assignment: str, make, *,
                        template_timeout: int = 60, cell_timeout: int = 60,
                        timeout: int = 600) -> dict:
    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    root = shared_dir(tmp_path_factory) / name
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _, info = build_template(SOURCE, [assignment], root / "template-work",
                                     GradeConfig(cell_timeout=template_timeout))
            expected = make(info[assignment][0]).build_attacks(root / "class")
            args = ("--workers", "2", "--cell-timeout", str(cell_timeout),
                    "--timeout", str(timeout),
                    "--memory", "3072", "--assignment", assignment)
            t0 = time.monotonic()
            proc = subprocess.run(grade_cmd(root / "class", root / "out", SOURCE, *args),
                                  cwd=REPO, capture_output=True, text=True)
            done.write_text(json.dumps({
                "returncode": proc.returncode, "stderr": proc.stderr[-5000:],
                "seconds": time.monotonic() - t0,
                "expected": {s: {k: v.__dict__ for k, v in e.items()}
                             for s, e in expected.items()},
            }))
    result = json.loads(done.read_text())
    result["expected"] = {s: {k: Row(**v) for k, v in e.items()}
                          for s, e in result["expected"].items()}
    result["out"] = root / "out"
    result["rows"] = read_csv(root / "out" / "grades.csv") if result["returncode"] == 0 else []
    return result
