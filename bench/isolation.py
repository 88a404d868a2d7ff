"""How much one student's CPU hog slows the student graded next to it, with and without
per-student isolation (issue 14, item 6).

    .venv/bin/python bench/isolation.py [--children 100] [--hog-seconds 90] [--timeout 300]

Grades the fixture assignment three times with ``--workers 2``: ``correct`` alone; ``correct``
next to ``a_hog`` (100 busy processes, each in a session of its own) with ``--isolation
none``; the same with ``--isolation auto`` (cgroups where the machine allows, else pinned
cores; the summary line names which). Prints ``correct``'s grading seconds side by side and
the slowdown ratios against the run alone. Timings on a shared machine are noisy: read the
ratios, run it twice.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
SOURCE = REPO / "tests" / "fixtures" / "solutions"
ASSIGNMENT = "99_fixture"


def hog(children: int, seconds: int) -> str:
    return (
        "import os as _o, time as _t\n"
        f"for _ in range({children}):\n"
        "    if _o.fork() == 0:\n"
        "        _o.setsid()\n"
        f"        _end = _t.time() + {seconds}\n"
        "        while _t.time() < _end:\n"
        "            pass\n"
        "        _o._exit(0)\n"
    )


def main() -> None:
    import nbformat

    from autograder.grading.config import GradeConfig
    from autograder.grading.parent.course import build_template

    from helpers.synthetic_class import ClassBuilder

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--children", type=int, default=100)
    p.add_argument("--hog-seconds", type=int, default=90, help="how long the hog runs, s")
    p.add_argument("--timeout", type=int, default=300, help="per-student wall time, s")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _, info = build_template(SOURCE, [ASSIGNMENT], tmp / "template", GradeConfig())
        nb = info[ASSIGNMENT][0]
        b = ClassBuilder(nb)
        classes = {"alone": {"correct": ""},
                   "with hog": {"a_hog": hog(args.children, args.hog_seconds), "correct": ""}}
        for name, students in classes.items():
            for student, code in students.items():
                path = tmp / name / student / f"{nb.name}.ipynb"
                path.parent.mkdir(parents=True)
                nbformat.write(b.answered(lambda gid, src, c=code: c + src
                                          if gid == b.first else src), path)
        seconds = {}
        for label, klass, iso in (("alone", "alone", "auto"), ("hog, none", "with hog", "none"),
                                  ("hog, isolated", "with hog", "auto")):
            out = tmp / f"out-{label.replace(', ', '-')}"
            proc = subprocess.run(
                [sys.executable, "-m", "autograder.grade", str(tmp / klass), "--out", str(out),
                 "--source", str(SOURCE), "--workers", "2", "--timeout", str(args.timeout),
                 "--isolation", iso, "--no-progress"],
                cwd=REPO, capture_output=True, text=True)
            summary = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
            r = json.loads((out / "results" / "correct.json").read_text())
            statuses = sorted({row["status"] for row in r["rows"]})
            seconds[label] = r["seconds"]
            print(f"{label:15s} correct: {r['seconds']:7.1f} s  {statuses}\n    {summary}")
        base = seconds["alone"]
        print(f"\nslowdown of 'correct' next to the hog: without isolation "
              f"x{seconds['hog, none'] / base:.1f}, with isolation "
              f"x{seconds['hog, isolated'] / base:.1f}")


if __name__ == "__main__":
    main()
