"""Grading time of the synthetic class: per student, and for the class serial vs parallel.

    .venv/bin/python bench/grade_class.py [--assignment 01_attention] [--workers N]
    .venv/bin/python bench/grade_class.py --pipeline both   # trusted verdicts vs in-kernel

``--pipeline both`` grades the class twice with one worker, first with the previous pipeline
(checks judged inside the kernel: ``COURSE_VERDICT_PIPELINE=old``), then with trusted verdicts,
and prints each student's seconds side by side with the ratio new/old.

Builds the synthetic class (tests/synthetic_class) from the assignment's source and release,
grades it with ``course-grade --workers 1`` and then ``--workers N`` (default: all cores), each
into a fresh output folder, and prints the wall time of each run, the speed-up, and each
student's grading time (from the run's results). No assertion: numbers only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def main() -> None:
    from synthetic_class import ClassBuilder

    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", default="01_attention")
    p.add_argument("--source", type=Path, default=REPO / "solutions")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--cell-timeout", default="30")
    p.add_argument("--memory", default="3072")
    p.add_argument("--pipeline", choices=("new", "old", "both"), default="new")
    p.add_argument("--students", default="",
                   help="with --pipeline both: comma-separated students of the class to keep")
    args = p.parse_args()
    if args.pipeline == "both":
        return compare_pipelines(args)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _, info = build_template(args.source, [args.assignment], tmp / "template",
                                 GradeConfig(cell_timeout=60))
        ClassBuilder(info[args.assignment][0]).build(tmp / "class")
        n = len(list((tmp / "class").iterdir()))
        print(f"class: {n} students, assignment {args.assignment}, {os.cpu_count()} cores")
        runs = {}
        for workers in (1, args.workers):
            out = tmp / f"out-{workers}"
            cmd = [sys.executable, "-m", "autograder.grade", str(tmp / "class"), "--out",
                   str(out), "--source", str(args.source), "--workers", str(workers),
                   "--cell-timeout", args.cell_timeout, "--memory", args.memory,
                   "--no-progress"]
            t0 = time.monotonic()
            subprocess.run(cmd, check=True, cwd=REPO)
            runs[workers] = time.monotonic() - t0
            per = {q.stem: json.loads(q.read_text())["seconds"]
                   for q in sorted((out / "results").glob("*.json"))}
            print(f"\n--workers {workers}: class graded in {runs[workers]:.1f} s")
            for student, s in per.items():
                print(f"  {student:15s} {s:6.1f} s")
        if args.workers != 1:
            print(f"\nserial {runs[1]:.1f} s, parallel ({args.workers} workers) "
                  f"{runs[args.workers]:.1f} s: speed-up x{runs[1] / runs[args.workers]:.2f}")


def _grade(args, tmp: Path, name: str, workers: int, env: dict) -> tuple[float, dict]:
    out = tmp / f"out-{name}"
    cmd = [sys.executable, "-m", "autograder.grade", str(tmp / "class"), "--out", str(out),
           "--source", str(args.source), "--workers", str(workers), "--cell-timeout",
           args.cell_timeout, "--memory", args.memory, "--no-progress"]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, cwd=REPO, env=env)
    per = {q.stem: json.loads(q.read_text())["seconds"]
           for q in sorted((out / "results").glob("*.json"))}
    return time.monotonic() - t0, per


def compare_pipelines(args) -> None:
    """One worker, the same class: in-kernel checks (old) vs trusted verdicts (new)."""
    from synthetic_class import ClassBuilder

    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _, info = build_template(args.source, [args.assignment], tmp / "template",
                                 GradeConfig(cell_timeout=60))
        ClassBuilder(info[args.assignment][0]).build(tmp / "class")
        keep = {s for s in args.students.split(",") if s}
        for entry in (tmp / "class").iterdir():
            if keep and entry.name.removesuffix(".zip") not in keep:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        n = len(list((tmp / "class").iterdir()))
        print(f"class: {n} students, assignment {args.assignment}, {os.cpu_count()} cores")
        walls, pers = {}, {}
        for name in ("old", "new"):
            env = dict(os.environ, COURSE_VERDICT_PIPELINE=name)
            walls[name], pers[name] = _grade(args, tmp, name, 1, env)
        print(f"\n{'student':15s} {'old s':>7s} {'new s':>7s} {'new/old':>8s}")
        for student in sorted(pers["old"]):
            o, w = pers["old"][student], pers["new"].get(student, float("nan"))
            print(f"  {student:13s} {o:7.1f} {w:7.1f} {w / o if o else float('nan'):8.2f}")
        so, sn = sum(pers["old"].values()), sum(pers["new"].values())
        print(f"\nper student (mean): old {so / n:.1f} s, new {sn / n:.1f} s, "
              f"new/old x{sn / so:.2f}; class: old {walls['old']:.1f} s, "
              f"new {walls['new']:.1f} s")


if __name__ == "__main__":
    main()
