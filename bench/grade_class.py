"""Grading time: course-grade vs stock nbgrader on the same class, per student and per class.

    .venv/bin/python bench/grade_class.py                   # 1 student x all 8 notebooks
    .venv/bin/python bench/grade_class.py --students 3 --workers 2
    .venv/bin/python bench/grade_class.py --assignment 01_attention 04_layer_norm
    .venv/bin/python bench/grade_class.py --speedup --assignment 01_attention
    .venv/bin/python bench/grade_class.py --pipeline both --students 3   # trusted vs in-kernel

Default: builds a class of ``--students`` students, each submitting every notebook of the
chosen assignments (all chapters by default): student 1 answers everything correctly, student
2 submits wrong answers (every function's output perturbed), student 3 the blank release, then
again. The same submissions are graded twice, each run under its own CPU meter:

- ``course-grade`` (sandbox, limits, trusted verdicts, cleaned feedback), ``--workers W``;
  its template course (once per class) is built first and timed apart;
- stock nbgrader 0.9.6, as its documentation runs it: a course folder with the course's
  ``autograder/nbgrader_config.py``, ``nbgrader generate_assignment`` per assignment (once per
  class, timed apart), then ``nbgrader autograde`` and ``nbgrader generate_feedback`` per
  assignment, serial and unsandboxed.

Both kernels get ``COURSE_SMOKE=1`` (chapter 8 trains at its smoke size). It prints wall and
CPU seconds (user+sys of every process of the run, the Jupyter kernels included: a cpuacct
cgroup of its own where the machine allows one, else the waited-for children only, which
misses kernels that are killed), the per-student figures, the ratio stock/course-grade, and
``uptime`` before and after: on a shared machine compare the CPU columns. No assertion.

``--speedup``: the old mode, the synthetic class of one assignment
(``tests/helpers/synthetic_class``)
graded with ``--workers 1`` and ``--workers N``. ``--pipeline both``: in-kernel checks
(``COURSE_VERDICT_PIPELINE=old``) vs trusted verdicts on the same class, wall and CPU, per
student: the whole course with the class above (``--assignment`` several chapters or none),
or with one ``--assignment`` that chapter's synthetic class (``tests/helpers/synthetic_class``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))


# ---------------------------------------------------------------- CPU meter
class CpuMeter:
    """CPU seconds (user+sys) of the commands run through :meth:`run`, descendants included.

    A cpuacct cgroup (v1) or a cgroup v2 leaf of its own when one can be made here (root on a
    VM); otherwise ``getrusage(RUSAGE_CHILDREN)`` (waited-for descendants only).
    """

    def __init__(self):
        self.group, self.kind = None, "rusage of waited-for children (kernels may be missed)"
        name = f"bench-grade-{uuid.uuid4().hex[:8]}"
        for base, usage, kind in (
            (Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage", "cpuacct cgroup"),
            (Path("/sys/fs/cgroup"), "cpu.stat", "cgroup v2"),
        ):
            if (base / usage).exists() or (base / "cgroup.controllers").exists():
                try:
                    (base / name).mkdir()
                except OSError:
                    continue
                if (base / name / usage).exists():
                    self.group, self.usage, self.kind = base / name, usage, kind
                    break
                (base / name).rmdir()

    def seconds(self) -> float:
        if self.group is None:
            r = resource.getrusage(resource.RUSAGE_CHILDREN)
            return r.ru_utime + r.ru_stime
        text = (self.group / self.usage).read_text()
        if self.usage == "cpuacct.usage":
            return int(text) / 1e9
        return int(dict(ln.split() for ln in text.splitlines())["usage_usec"]) / 1e6

    def run(self, cmd: list[str], **kw) -> tuple[float, float]:
        """Run ``cmd`` (check=True); return (wall s, CPU s) of it and its descendants."""
        procs = self.group / "cgroup.procs" if self.group else None

        def join():  # in the child, before exec: everything it starts is counted
            if procs is not None:
                procs.write_text(str(os.getpid()))

        c0, t0 = self.seconds(), time.monotonic()
        subprocess.run(cmd, check=True, preexec_fn=join, **kw)
        return time.monotonic() - t0, self.seconds() - c0

    def close(self):
        if self.group is not None:
            try:
                self.group.rmdir()
            except OSError:
                pass


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


# ---------------------------------------------------------------- the class
def build_class(info: dict, dest: Path, n: int) -> list[str]:
    """``n`` students (correct, wrong, blank, correct, ...), each with every notebook."""
    import nbformat

    from helpers.synthetic_class import ClassBuilder

    kinds = ("correct", "wrong", "blank")
    students = []
    builders = [ClassBuilder(nb) for nbs in info.values() for nb in nbs]
    for i in range(n):
        kind = kinds[i % len(kinds)]
        student = f"s{i + 1:02d}_{kind}"
        folder = dest / student
        folder.mkdir(parents=True)
        for b in builders:
            nb = {"correct": b.answered, "wrong": b.wrong, "blank": b.release}[kind]()
            nbformat.write(nb, folder / f"{b.nb.name}.ipynb")
        students.append(student)
    return students


def _env(tmp: Path) -> dict:
    """nbgrader's environment: this venv's bin first on PATH (nbgrader runs ``alembic`` from
    there). A venv copied from elsewhere may hold an ``alembic`` script whose ``#!`` line
    points at a Python that is gone: then a bin folder in ``tmp`` gets the same entry point."""
    from autograder.grading.course import tool_env

    env = dict(tool_env(), COURSE_SMOKE="1", MPLBACKEND="Agg")
    try:
        subprocess.run(["alembic", "--version"], env=env, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        bindir = tmp / "bin"
        bindir.mkdir(exist_ok=True)
        script = bindir / "alembic"
        script.write_text(f"#!{sys.executable}\nimport sys\nfrom alembic.config import main\n"
                          "sys.exit(main())\n")
        script.chmod(0o755)
        env["PATH"] = os.pathsep.join([str(bindir), env["PATH"]])
    return env


def run_course_grade(args, meter, tmp, students, assignments, name="course-grade",
                     env=None) -> dict:
    from autograder.grading.config import GradeConfig

    out = tmp / name
    env = {**_env(tmp), **(env or {})}
    config = GradeConfig(cell_timeout=int(args.cell_timeout))
    build = (
        "import sys; from pathlib import Path\n"
        "from autograder.grading.config import GradeConfig\n"
        "from autograder.grading.course import build_template\n"
        f"build_template(Path({str(args.source)!r}), {assignments!r}, "
        f"Path({str(out / '.work')!r}), GradeConfig(cell_timeout={config.cell_timeout}))\n"
    )
    once = meter.run([sys.executable, "-c", build], cwd=REPO, env=env)
    cmd = [sys.executable, "-m", "autograder.grade", str(tmp / "class"), "--out", str(out),
           "--source", str(args.source), "--workers", str(args.workers),
           "--cell-timeout", args.cell_timeout, "--no-progress", "--assignment", *assignments]
    cmd += ["--memory", args.memory] if args.memory else []
    grading = meter.run(cmd, cwd=REPO, env=env)
    per = {q.stem: json.loads(q.read_text())["seconds"]
           for q in sorted((out / "results").glob("*.json"))}
    return {"once": once, "grading": grading, "per": per, "cells": cell_times(out)}


def cell_times(out: Path) -> dict:
    """{notebook: [(seconds, cell id, tags), ...]} summed over the students, slowest first: the
    kernel's own time per cell, from the execution timestamps nbclient records in each
    autograded notebook (a demonstration cell grading skipped is a comment: ~0 s)."""
    from datetime import datetime

    import nbformat

    def ts(text):
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    times: dict = {}
    for book in sorted(out.glob(".work/students/*/autograded/*/*/*.ipynb")):
        nb = nbformat.read(book, as_version=4)
        rows = times.setdefault(book.stem, {})
        for cell in nb.cells:
            ex = cell.get("metadata", {}).get("execution", {})
            if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
                s = (ts(ex["shell.execute_reply"]) - ts(ex["iopub.execute_input"])).total_seconds()
                key = (cell.get("id", "?"), ",".join(cell.get("metadata", {}).get("tags", [])))
                rows[key] = rows.get(key, 0.0) + s
    return {nb: sorted(((s, *k) for k, s in rows.items()), reverse=True)
            for nb, rows in times.items()}


def run_stock(args, meter, tmp, students, assignments) -> dict:
    """nbgrader's own commands on a plain course folder (no sandbox, no course grader)."""
    from autograder.grading.course import REPO_CONFIG, source_ignore

    root = tmp / "stock"
    root.mkdir()
    (root / "nbgrader_config.py").write_text("\n".join([
        "c = get_config()  # noqa: F821",
        f"load_subconfig({str(REPO_CONFIG)!r})  # noqa: F821",
        f"c.CourseDirectory.root = {str(root)!r}",
        "c.CourseDirectory.source_directory = 'source'",
        "c.CourseDirectory.release_directory = 'release'",
        f"c.CourseDirectory.db_url = {'sqlite:///' + str(root / 'gradebook.db')!r}",
        f"c.Execute.timeout = {int(args.cell_timeout)}",
    ]) + "\n")
    for a in assignments:
        shutil.copytree(args.source / a, root / "source" / a, ignore=source_ignore(a))
        for s in students:
            dest = root / "submitted" / s / a
            dest.mkdir(parents=True)
            for nb in (root / "source" / a).glob("*.ipynb"):
                shutil.copyfile(tmp / "class" / s / nb.name, dest / nb.name)
    nbgrader = [sys.executable, "-m", "nbgrader"]
    kw = dict(cwd=root, env=_env(tmp), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    once, autograde, feedback = [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]
    for a in assignments:
        for total, step in ((once, "generate_assignment"), (autograde, "autograde"),
                            (feedback, "generate_feedback")):
            w, c = meter.run([*nbgrader, step, a, "--force"], **kw)
            total[0] += w
            total[1] += c
    grading = (autograde[0] + feedback[0], autograde[1] + feedback[1])
    return {"once": tuple(once), "grading": grading, "autograde": tuple(autograde),
            "feedback": tuple(feedback)}


def _print_class(args, meter, students, info, assignments, before, after) -> int:
    """The class line and the uptime around the runs; returns the class size."""
    n, nbs = len(students), sum(len(v) for v in info.values())
    print(f"\nclass: {n} student(s) x {nbs} notebooks ({', '.join(assignments)}); "
          f"{os.cpu_count()} cores; course-grade --workers {args.workers}; CPU = user+sys "
          f"of every process ({meter.kind})")
    print(f"uptime before: {before}\nuptime after:  {after}")
    return n


@contextlib.contextmanager
def course_class(args):
    """(tmp, meter, info, students, assignments): the class of ``build_class`` for the chosen
    assignments (all chapters by default) in a temporary folder, and a CPU meter."""
    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template, find_assignments

    assignments = args.assignment or list(find_assignments(args.source))
    meter = CpuMeter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            _, info = build_template(args.source, assignments, tmp / "describe",
                                     GradeConfig(cell_timeout=60))
            students = build_class(info, tmp / "class", args.students)
            yield tmp, meter, info, students, assignments
    finally:
        meter.close()


def compare_stock(args) -> None:
    with course_class(args) as (tmp, meter, info, students, assignments):
        before = _uptime()
        cg = run_course_grade(args, meter, tmp, students, assignments)
        st = run_stock(args, meter, tmp, students, assignments)
        after = _uptime()
    n = _print_class(args, meter, students, info, assignments, before, after)
    rows = [
        ("once per class (template / generate_assignment)", cg["once"], st["once"]),
        ("grading the class (autograde + feedback)", cg["grading"], st["grading"]),
        ("per student (grading / students)", tuple(x / n for x in cg["grading"]),
         tuple(x / n for x in st["grading"])),
        ("whole run (once + grading)", tuple(a + b for a, b in zip(cg["once"], cg["grading"])),
         tuple(a + b for a, b in zip(st["once"], st["grading"]))),
    ]
    print(f"\n{'':50s} {'course-grade':>19s} {'stock nbgrader':>19s} {'stock/course-grade':>19s}")
    print(f"{'':50s} {'wall s':>9s} {'CPU s':>9s} {'wall s':>9s} {'CPU s':>9s} "
          f"{'wall':>9s} {'CPU':>9s}")
    for label, c, s in rows:
        print(f"{label:50s} {c[0]:9.1f} {c[1]:9.1f} {s[0]:9.1f} {s[1]:9.1f} "
              f"{s[0] / c[0]:9.2f} {s[1] / c[1]:9.2f}")
    print(f"\nstock nbgrader: autograde {st['autograde'][0]:.1f} s wall / "
          f"{st['autograde'][1]:.1f} s CPU, generate_feedback {st['feedback'][0]:.1f} s wall / "
          f"{st['feedback'][1]:.1f} s CPU")
    print("course-grade, each student's own grading time (results/*.json, wall):")
    for student, s in cg["per"].items():
        print(f"  {student:15s} {s:6.1f} s")
    print("course-grade, kernel time per notebook (all students; wall), its slowest cells:")
    for nb, rows in cg["cells"].items():
        top = ", ".join(f"{cid} {s:.1f}" for s, cid, _ in rows[:3])
        print(f"  {nb:28s} {sum(r[0] for r in rows):6.1f} s  ({top})")


# ---------------------------------------------------------------- older modes
def speedup(args) -> None:
    """The synthetic class of one assignment, ``--workers 1`` vs ``--workers N``."""
    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    from helpers.synthetic_class import ClassBuilder

    assignment = (args.assignment or ["01_attention"])[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _, info = build_template(args.source, [assignment], tmp / "template",
                                 GradeConfig(cell_timeout=60))
        ClassBuilder(info[assignment][0]).build(tmp / "class")
        n = len(list((tmp / "class").iterdir()))
        print(f"class: {n} students, assignment {assignment}, {os.cpu_count()} cores")
        runs = {}
        for workers in sorted({1, args.workers}):
            runs[workers], per = _grade(args, tmp, f"w{workers}", workers, dict(os.environ))
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
           args.cell_timeout, "--memory", args.memory or "3072", "--no-progress"]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, cwd=REPO, env=env)
    per = {q.stem: json.loads(q.read_text())["seconds"]
           for q in sorted((out / "results").glob("*.json"))}
    return time.monotonic() - t0, per


def compare_pipelines_course(args) -> None:
    """The whole course (or ``--assignment A B ...``), a class of ``--students`` (correct,
    wrong, blank, ...): in-kernel checks (old) vs trusted verdicts (new), wall and CPU."""
    runs = {}
    with course_class(args) as (tmp, meter, info, students, assignments):
        before = _uptime()
        for name in ("old", "new"):
            runs[name] = run_course_grade(args, meter, tmp, students, assignments,
                                          name=f"course-grade-{name}",
                                          env={"COURSE_VERDICT_PIPELINE": name})
        rows = {name: _rows_of(tmp / f"course-grade-{name}") for name in runs}
        after = _uptime()
    n = _print_class(args, meter, students, info, assignments, before, after)
    old, new = runs["old"]["grading"], runs["new"]["grading"]
    print(f"\n{'':36s} {'old (in-kernel)':>19s} {'new (trusted)':>19s} {'new/old':>19s}")
    print(f"{'':36s} {'wall s':>9s} {'CPU s':>9s} {'wall s':>9s} {'CPU s':>9s} "
          f"{'wall':>9s} {'CPU':>9s}")
    for label, o, w in (("grading the class", old, new),
                        ("per student", tuple(x / n for x in old), tuple(x / n for x in new))):
        print(f"{label:36s} {o[0]:9.1f} {o[1]:9.1f} {w[0]:9.1f} {w[1]:9.1f} "
              f"{w[0] / o[0]:9.2f} {w[1] / o[1]:9.2f}")
    print("\neach student's own grading time (results/*.json, wall):")
    print(f"  {'student':15s} {'old s':>7s} {'new s':>7s} {'new/old':>8s} "
          f"{'old points':>11s} {'new points':>11s}")
    for student in students:
        o, w = runs["old"]["per"].get(student), runs["new"]["per"].get(student)
        po, pn = rows["old"].get(student, "?"), rows["new"].get(student, "?")
        print(f"  {student:15s} {o:7.1f} {w:7.1f} {w / o:8.2f} {po:>11s} {pn:>11s}")


def _rows_of(out: Path) -> dict:
    """{student: "points/max (k not graded)"} from a run's grades.csv."""
    import csv

    totals: dict = {}
    with open(out / "grades.csv", newline="") as f:
        for r in csv.DictReader(f):
            t = totals.setdefault(r["student"], [0.0, 0.0, 0])
            t[1] += float(r["max_points"] or 0)
            if r["points"]:
                t[0] += float(r["points"])
            else:
                t[2] += 1
    return {s: f"{p:g}/{m:g}" + (f" ({k} ng)" if k else "") for s, (p, m, k) in totals.items()}


def compare_pipelines(args) -> None:
    """One worker, the same class: in-kernel checks (old) vs trusted verdicts (new)."""
    from autograder.grading.config import GradeConfig
    from autograder.grading.course import build_template

    from helpers.synthetic_class import ClassBuilder

    if not args.assignment or len(args.assignment) > 1:
        return compare_pipelines_course(args)
    assignment = args.assignment[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _, info = build_template(args.source, [assignment], tmp / "template",
                                 GradeConfig(cell_timeout=60))
        ClassBuilder(info[assignment][0]).build(tmp / "class")
        keep = {s for s in args.keep.split(",") if s}
        for entry in (tmp / "class").iterdir():
            if keep and entry.name.removesuffix(".zip") not in keep:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        n = len(list((tmp / "class").iterdir()))
        print(f"class: {n} students, assignment {assignment}, {os.cpu_count()} cores")
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", nargs="+", default=None,
                   help="assignments (default: every chapter; --speedup/--pipeline: the "
                   "first, else 01_attention)")
    p.add_argument("--students", type=int, default=1, help="class size (default: 1)")
    p.add_argument("--source", type=Path, default=REPO / "solutions")
    p.add_argument("--workers", type=int, default=1,
                   help="course-grade --workers (default 1; --speedup: vs 1)")
    p.add_argument("--cell-timeout", default="120")
    p.add_argument("--memory", default="",
                   help="course-grade --memory, MB (default: course-grade's own)")
    p.add_argument("--speedup", action="store_true",
                   help="the synthetic class of one assignment, --workers 1 vs --workers N")
    p.add_argument("--pipeline", choices=("new", "old", "both"), default="new")
    p.add_argument("--keep", default="",
                   help="with --pipeline both: comma-separated students of the class to keep")
    args = p.parse_args()
    args.source = args.source.resolve()
    if args.pipeline == "both":
        return compare_pipelines(args)
    if args.speedup:
        return speedup(args)
    return compare_stock(args)


if __name__ == "__main__":
    main()
