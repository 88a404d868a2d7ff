"""Grading time: course-grade vs stock nbgrader on the same class, per student and per class.

    .venv/bin/python bench/grade_class.py                   # 1 student x all 8 notebooks
    .venv/bin/python bench/grade_class.py --students 3 --workers 2
    .venv/bin/python bench/grade_class.py --assignment 01_attention 04_layer_norm
    .venv/bin/python bench/grade_class.py --speedup --assignment 01_attention
    .venv/bin/python bench/grade_class.py --students 10 --workers 2 --peer-rev 8cfdd3e
    .venv/bin/python bench/grade_class.py --students 100 --workers 2 --dask --flat 10 \
        --stock-sample 3

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

For a large class (``--students 100 --workers 2 --dask --flat 10 --stock-sample 3``):

- ``--stock-sample K`` grades only the first K students with stock nbgrader (about 220 s each
  on 2 cores) and prints the ratio per student; ``--no-stock`` none;
- ``--dask [N]`` grades the same submissions folder again, into its own ``--out``, on a
  localhost Dask cluster started as the README tells an instructor (``dask scheduler``, N
  (default 2) ``dask worker ADDRESS --nthreads 1``, their processes in the CPU meter; shut
  down through the scheduler at the end): its wall and CPU beside the local run's, the ratio,
  the workers' peak RSS, and the rows of the two grades.csv whose points or status differ;
- ``--flat K`` first grades the class's first K students alone (a copy of their folders):
  per-student wall, CPU and disk and the parent's peak memory for K and for the whole class,
  with the ratio (1.00x: flat), and their rows in both runs compared.

Every course-grade run prints its class time and per student, the course-grade parent's peak
RSS (its own ``VmHWM`` since exec, written by the process itself at its end: the parent alone,
not the grading processes or kernels it starts), and ``du`` of its ``--out`` after the
template and after grading, split into the folders and files named after a student (per
student) and the rest (once per class: MathJax, gradebook, report, exports, the template's
kernel packages, rebuilt when ``autograder/`` changes during a run). ``--keep DIR`` works in
DIR (kept) instead of a temporary folder.

``--peer-rev REV`` (instead of stock nbgrader): the same class graded by this checkout's
course-grade and by REV's (a ``git worktree`` of REV with a hard-linked copy of this venv whose
editable install points at the worktree, so that every process, the sandboxed kernels
included, runs REV's ``autograder`` and ``transformer_ref``: see :func:`peer_checkout`), each
run in a fresh ``--out`` (its own template), ``--rounds N`` times in alternating order; wall,
CPU, per student, the ratio REV/current, whose code each run imported (and inside its
sandbox), and the rows of the two grades.csv whose points or status differ.

``--speedup``: the old mode, the synthetic class of one assignment
(``tests/helpers/synthetic_class``)
graded with ``--workers 1`` and ``--workers N``.
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
    VM); otherwise ``getrusage(RUSAGE_CHILDREN)`` (waited-for descendants only). The group is
    made inside this process's own cgroup where it can be, so that a meter around the bench (a
    test suite's, say) still counts what the bench runs.
    """

    def __init__(self):
        from autograder.grading.parent.isolation import _mounts, _own_cgroups

        self.group, self.kind = None, "rusage of waited-for children (kernels may be missed)"
        name = f"bench-grade-{uuid.uuid4().hex[:8]}"
        mounts, own = _mounts(), _own_cgroups()
        here = [(mounts[c] / own[c].lstrip("/"), usage, kind)
                for c, usage, kind in (("cpuacct", "cpuacct.usage", "cpuacct cgroup"),
                                       ("", "cpu.stat", "cgroup v2"))
                if c in mounts and c in own]
        for base, usage, kind in here + [
            (Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage", "cpuacct cgroup"),
            (Path("/sys/fs/cgroup"), "cpu.stat", "cgroup v2"),
        ]:
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


class ProcWatch:
    """Which Python executables the processes of a metered run are (``/proc/PID/exe`` of the
    meter's cgroup, sampled every second): by role, from the command line. Empty without a
    cgroup."""

    ROLES = (("autograder.grade ", "course-grade"), ("run_module('autograder.grade'",
                                                      "course-grade"),
             ("nbgrader_main", "grading process"),
             ("autograde.warm", "warm grading process (grading processes are its forks)"),
             ("sandbox zygote", "kernel zygote (kernels are its forks)"),
             ("sandbox kernel", "kernel launcher"), ("grading.outcap", "kernel"),
             ("grading.limits", "limits launcher"), ("ipykernel", "kernel"))

    def __init__(self, meter: CpuMeter):
        import threading

        self.procs = meter.group / "cgroup.procs" if meter.group else None
        self.seen: dict[str, set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.wait(1.0):
            try:
                pids = self.procs.read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    exe = os.readlink(f"/proc/{pid}/exe")
                except OSError:
                    continue
                role = next((r for key, r in self.ROLES if key in cmd), None)
                if role and "python" in Path(exe).name:
                    self.seen.setdefault(role, set()).add(exe)

    def __enter__(self) -> dict:
        if self.procs is not None:
            self._thread.start()
        return self.seen

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


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


_ENVS: dict = {}  # tmp -> _env(tmp): ``alembic --version`` (about 0.8 s of CPU) once per class


def _env(tmp: Path) -> dict:
    """nbgrader's environment: this venv's bin first on PATH (nbgrader runs ``alembic`` from
    there). A venv copied from elsewhere may hold an ``alembic`` script whose ``#!`` line
    points at a Python that is gone: then a bin folder in ``tmp`` gets the same entry point.
    Worked out once per ``tmp`` (every run of a class asks); a copy each time."""
    if tmp not in _ENVS:
        _ENVS[tmp] = _make_env(tmp)
    return dict(_ENVS[tmp])


def _make_env(tmp: Path) -> dict:
    from autograder.grading.parent.course import tool_env

    # COURSE_CACHE=off: every run builds its own class template, timed apart as the docstring
    # says (a template cached by an earlier run, or absent from a --peer-rev's code, would make
    # two runs unlike; bench/template_cache.py measures the cache itself)
    env = dict(tool_env(), COURSE_SMOKE="1", MPLBACKEND="Agg", COURSE_CACHE="off")
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


# course-grade run in this Python process (``python -c _PEAK FILE ARGS...`` is ``python -m
# autograder.grade ARGS...``), which then writes its own VmHWM (kB) to FILE: the peak resident
# memory of the parent process alone since its exec (not its children's; not ru_maxrss, which
# on Linux keeps the forking bench's peak across the exec).
_PEAK = (
    "import runpy, sys\n"
    "peak_file = sys.argv.pop(1)\n"
    "try:\n"
    "    runpy.run_module('autograder.grade', run_name='__main__', alter_sys=True)\n"
    "finally:\n"
    "    hwm = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')]\n"
    "    open(peak_file, 'w').write(hwm[0] if hwm else '')\n"
)


def du_bytes(*paths: Path) -> int:
    """Disk used by ``paths`` together (``du -sc``: allocated blocks, a hard-linked file
    once), in bytes; paths that do not exist count 0."""
    paths = [str(p) for p in paths if p.exists()]
    if not paths:
        return 0
    r = subprocess.run(["du", "-sc", "--block-size=1", *paths], capture_output=True, text=True)
    return int(r.stdout.splitlines()[-1].split()[0]) if r.stdout.strip() else 0


def student_paths(out: Path, student: str) -> list[Path]:
    """What ``OUT_DIR`` holds under a student's own name: feedback, submitted and autograded
    notebooks, the result, the grading folder kept under ``.work/students/``."""
    return [out / "feedback" / student, out / "submitted" / student,
            out / "autograded" / student, out / "results" / f"{student}.json",
            out / ".work" / "students" / student]


def run_course_grade(args, meter, tmp, students, assignments, name="course-grade",
                     env=None, code=None, class_dir=None, extra=()) -> dict:
    """``code``: whose course-grade runs (:func:`peer_checkout`'s dict: its Python, working
    folder and environment); None: this checkout's. ``class_dir``: the submissions (default
    ``tmp/class``); ``extra``: more course-grade arguments (``--scheduler ADDRESS``).

    Returns the times (``once``, ``grading``: wall s, CPU s), each student's own time, the
    parent's peak RSS (``peak_kb``), ``OUT_DIR``'s size after the template (``du_once``) and
    after grading (``du``), in bytes."""
    from autograder.grading.config import GradeConfig

    out = tmp / name
    class_dir = class_dir or tmp / "class"
    peak_file = tmp / f"{name}.peak"
    env = {**_env(tmp), **(env or {})}
    python, cwd = sys.executable, REPO
    if code is not None:
        python, cwd = code["python"], code["tree"]
        env = {**env, **code["env"], "PATH": os.pathsep.join([code["bin"], env["PATH"]])}
    config = GradeConfig(cell_timeout=int(args.cell_timeout))
    build = (
        "import sys; from pathlib import Path\n"
        "from autograder.grading.config import GradeConfig\n"
        "from autograder.grading.parent.course import build_template\n"
        f"build_template(Path({str(args.source)!r}), {assignments!r}, "
        f"Path({str(out / '.work')!r}), GradeConfig(cell_timeout={config.cell_timeout}))\n"
    )
    once = meter.run([python, "-c", build], cwd=cwd, env=env)
    du_once = du_bytes(out)
    cmd = [python, "-c", _PEAK, str(peak_file), str(class_dir), "--out", str(out),
           "--source", str(args.source), "--workers", str(args.workers),
           "--cell-timeout", args.cell_timeout, "--no-progress", "--assignment", *assignments,
           *extra]
    cmd += ["--memory", args.memory] if args.memory else []
    with ProcWatch(meter) as seen:
        grading = meter.run(cmd, cwd=cwd, env=env)
    per = {q.stem: json.loads(q.read_text())["seconds"]
           for q in sorted((out / "results").glob("*.json"))}
    peak = peak_file.read_text().strip() if peak_file.exists() else ""
    return {"once": once, "grading": grading, "per": per, "cells": cell_times(out),
            "out": out, "seen": seen, "peak_kb": int(peak) if peak else None,
            "du_once": du_once, "du": du_bytes(out), "n": len(per),
            "du_students": du_bytes(*(p for s in per for p in student_paths(out, s)))}


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
    from autograder.grading.parent.course import REPO_CONFIG, source_ignore

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


# ---------------------------------------------------------------- a localhost Dask cluster
@contextlib.contextmanager
def dask_cluster(meter: CpuMeter, root: Path, env: dict, workers: int = 2):
    """A localhost Dask cluster as the README starts one for an instructor: ``dask scheduler``
    and ``workers`` x ``dask worker ADDRESS --nthreads 1`` (each with its nanny, the default),
    this venv's ``dask``, in the CPU meter's group (their CPU is counted with the run's) and
    each in a session of its own. Yields ``{"address", "peak_kb": callable}``; the peak
    (VmHWM, kB) of each worker process is read while it is still alive. At the end the
    cluster is shut down through the scheduler (``Client.shutdown``), then any process left
    is terminated, and killed after 30 s; ``"stopped"`` says how it went."""
    import signal

    from distributed import Client

    dask = str(Path(sys.executable).with_name("dask"))
    procs = meter.group / "cgroup.procs" if meter.group else None

    def join():
        os.setsid()
        if procs is not None:
            procs.write_text(str(os.getpid()))

    def start(cmd, name):
        with open(root / f"{name}.log", "ab") as log:
            return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log,
                                    preexec_fn=join)

    root.mkdir(parents=True, exist_ok=True)
    sched_file = root / "scheduler.json"
    started = [start([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                      "--no-dashboard", "--scheduler-file", str(sched_file)], "scheduler")]
    cluster: dict = {"stopped": "not started"}
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            if started[0].poll() is not None:
                break
            time.sleep(0.1)
        if not sched_file.exists():
            raise SystemExit(f"dask scheduler did not start (see {root / 'scheduler.log'})")
        address = json.loads(sched_file.read_text())["address"]
        for i in range(workers):
            started.append(start([dask, "worker", address, "--nthreads", "1", "--host",
                                  "127.0.0.1", "--no-dashboard", "--name", f"w{i}",
                                  "--local-directory", str(root / f"w{i}")], f"worker{i}"))
        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=120)

        def peak_kb() -> dict:
            """{worker name: VmHWM kB} of the worker processes (not their nannies)."""
            out = {}
            with Client(address, timeout=30, set_as_default=False) as c:
                names = {a: w.get("name", a) for a, w in
                         c.scheduler_info(n_workers=-1)["workers"].items()}
                for addr, pid in c.run(os.getpid).items():
                    try:
                        status = Path(f"/proc/{pid}/status").read_text()
                    except OSError:
                        continue
                    hwm = [ln.split()[1] for ln in status.splitlines()
                           if ln.startswith("VmHWM:")]
                    out[names.get(addr, addr)] = int(hwm[0]) if hwm else None
            return out

        cluster.update(address=address, peak_kb=peak_kb)
        yield cluster
    finally:
        how = "shut down through the scheduler"
        address = cluster.get("address")
        if address:
            try:
                with Client(address, timeout=30, set_as_default=False) as c:
                    c.shutdown()
            except Exception as e:  # noqa: BLE001 - said, then the processes are ended below
                how = f"Client.shutdown failed ({type(e).__name__})"
        left = []
        for p in started:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                left.append(p)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in left:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        cluster["stopped"] = how + (f"; {len(left)} process(es) terminated after 30 s"
                                    if left else "; every process exited by itself")


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
    from autograder.grading.parent.course import build_template, find_assignments

    assignments = args.assignment or list(find_assignments(args.source))
    meter = CpuMeter()
    try:
        with (contextlib.nullcontext(str(args.keep)) if args.keep
              else tempfile.TemporaryDirectory()) as tmp:
            tmp = Path(tmp)
            if args.keep:
                args.keep.mkdir(parents=True)  # a new folder: never one with a class in it
            _, info = build_template(args.source, assignments, tmp / "describe",
                                     GradeConfig(cell_timeout=60))
            students = build_class(info, tmp / "class", args.students)
            yield tmp, meter, info, students, assignments
    finally:
        meter.close()


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg} ({_uptime()})", file=sys.stderr, flush=True)


def diff_rows(a: dict, b: dict, la: str, lb: str, students=None) -> list[str]:
    """Two runs' :func:`_points` compared (only ``students``' rows when given): a summary line,
    then each row whose points or status differ (at most 40 of each)."""
    if students is not None:
        keep = set(students)
        a = {k: v for k, v in a.items() if k[0] in keep}
        b = {k: v for k, v in b.items() if k[0] in keep}
    pts = [k for k in sorted(set(a) | set(b)) if a.get(k, (None,))[:2] != b.get(k, (None,))[:2]]
    st = [k for k in sorted(set(a) & set(b)) if a[k][2] != b[k][2]]
    same = "identical" if not pts and not st and a else "DIFFERENT"
    lines = [f"{len(a)} rows {la}, {len(b)} rows {lb}; points differ on {len(pts)} row(s), "
             f"status on {len(st)}: {same}"]
    lines += [f"  points {'/'.join(k)}: {la} {a.get(k, ('-', '-', '-'))[:2]}, "
              f"{lb} {b.get(k, ('-', '-', '-'))[:2]}" for k in pts[:40]]
    lines += [f"  status {'/'.join(k)}: {la} {a[k][2]!r}, {lb} {b[k][2]!r}" for k in st[:40]]
    return lines


def compare_stock(args) -> None:
    """The class graded by course-grade (``--workers W``), and as asked by stock nbgrader (the
    whole class, ``--stock-sample K`` of it, or not at all), course-grade on a localhost Dask
    cluster (``--dask``) and course-grade on the class's first ``--flat K`` students."""
    with course_class(args) as (tmp, meter, info, students, assignments):
        n = len(students)
        k_stock = 0 if args.no_stock else min(args.stock_sample or n, n)
        runs: dict = {}  # label: course-grade run, in the order of the table
        before = _uptime()
        if args.flat and args.flat < n:
            sub = tmp / f"class-first{args.flat}"
            for s in students[:args.flat]:
                shutil.copytree(tmp / "class" / s, sub / s)
            _say(f"course-grade, the first {args.flat} students")
            runs[f"local, first {args.flat}"] = run_course_grade(
                args, meter, tmp, students[:args.flat], assignments,
                name=f"course-grade-first{args.flat}", class_dir=sub)
        _say(f"course-grade, {n} students, --workers {args.workers}")
        cg = runs["local"] = run_course_grade(args, meter, tmp, students, assignments)
        cluster = None
        if args.dask:
            _say(f"course-grade on a localhost Dask cluster ({args.dask} workers x 1 thread)")
            with dask_cluster(meter, tmp / "dask", _env(tmp), args.dask) as cluster:
                dk = runs["dask"] = run_course_grade(
                    args, meter, tmp, students, assignments, name="course-grade-dask",
                    extra=("--scheduler", cluster["address"]))
                dk["workers_peak"] = cluster["peak_kb"]()
        st = None
        if k_stock:
            _say(f"stock nbgrader, {k_stock} of {n} students")
            st = run_stock(args, meter, tmp, students[:k_stock], assignments)
        after = _uptime()
        points = {label: _points(run["out"]) for label, run in runs.items()}
    _say("done")
    n = _print_class(args, meter, students, info, assignments, before, after)
    if st is not None:
        _print_stock(cg, st, n, k_stock, students)
    print("\ncourse-grade, each student's own grading time (results/*.json, wall):")
    for student, s in cg["per"].items():
        print(f"  {student:15s} {s:6.1f} s")
    print("course-grade, kernel time per notebook (all students; wall), its slowest cells:")
    for nb, rows in cg["cells"].items():
        top = ", ".join(f"{cid} {s:.1f}" for s, cid, _ in rows[:3])
        print(f"  {nb:28s} {sum(r[0] for r in rows):6.1f} s  ({top})")
    _print_runs(args, runs, cluster, points, students)


def _print_stock(cg: dict, st: dict, n: int, k: int, students: list[str]) -> None:
    """course-grade vs stock nbgrader; with a sample (``k`` < ``n``) only per student."""
    per_c = tuple(x / n for x in cg["grading"])
    per_s = tuple(x / k for x in st["grading"])
    rows = [("once per class (template / generate_assignment)", cg["once"], st["once"])]
    if k == n:
        rows += [("grading the class (autograde + feedback)", cg["grading"], st["grading"]),
                 ("per student (grading / students)", per_c, per_s),
                 ("whole run (once + grading)",
                  tuple(a + b for a, b in zip(cg["once"], cg["grading"])),
                  tuple(a + b for a, b in zip(st["once"], st["grading"])))]
    else:
        rows += [(f"per student (course-grade: {n}; stock: sample of {k})", per_c, per_s)]
    head = "stock nbgrader" if k == n else f"stock ({k} of {n})"
    print(f"\n{'':50s} {'course-grade':>19s} {head:>19s} {'stock/course-grade':>19s}")
    print(f"{'':50s} {'wall s':>9s} {'CPU s':>9s} {'wall s':>9s} {'CPU s':>9s} "
          f"{'wall':>9s} {'CPU':>9s}")
    for label, c, s in rows:
        print(f"{label:50s} {c[0]:9.1f} {c[1]:9.1f} {s[0]:9.1f} {s[1]:9.1f} "
              f"{s[0] / c[0]:9.2f} {s[1] / c[1]:9.2f}")
    print(f"\nstock nbgrader ({k} student(s): {', '.join(students[:k])}): autograde "
          f"{st['autograde'][0]:.1f} s wall / {st['autograde'][1]:.1f} s CPU, "
          f"generate_feedback {st['feedback'][0]:.1f} s wall / {st['feedback'][1]:.1f} s CPU")
    if k < n:
        own = [cg["per"].get(s, float("nan")) for s in students[:k]]
        print(f"  the same {k} student(s) in course-grade, their own grading time "
              f"(results/*.json, wall): {sum(own) / k:.1f} s per student; the class's "
              f"per-student figure above is its wall / {n}")


def _print_runs(args, runs: dict, cluster, points: dict, students: list[str]) -> None:
    """Each course-grade run: class time, per student, the parent's peak memory, OUT_DIR's
    size; the Dask run against the local one; the first ``--flat`` students against all."""
    mb = 2**20
    print(f"\ncourse-grade runs ({os.cpu_count()} cores): wall and CPU of grading (the "
          "template apart: templ s); peak = the course-grade parent process's own VmHWM; OUT = "
          "du of --out after grading: templ (after the template), st = the folders and files "
          "named after a student, per student; rest = OUT - templ - students (once per class: "
          "MathJax for the feedback pages, gradebook, report, exports, return zips):")
    print(f"  {'run':22s} {'students':>8s} {'wall s':>8s} {'CPU s':>8s} {'wall/st':>8s} "
          f"{'CPU/st':>8s} {'templ s':>8s} {'peak MB':>8s} {'OUT MB':>8s} {'templ MB':>8s} "
          f"{'MB/st':>8s} {'rest MB':>8s}")
    for label, r in runs.items():
        k = max(r["n"], 1)
        peak = f"{r['peak_kb'] / 1024:8.0f}" if r["peak_kb"] else f"{'?':>8s}"
        rest = r["du"] - r["du_once"] - r["du_students"]
        print(f"  {label:22s} {r['n']:8d} {r['grading'][0]:8.1f} {r['grading'][1]:8.1f} "
              f"{r['grading'][0] / k:8.2f} {r['grading'][1] / k:8.2f} {r['once'][0]:8.1f} "
              f"{peak} {r['du'] / mb:8.1f} {r['du_once'] / mb:8.1f} "
              f"{r['du_students'] / k / mb:8.2f} {rest / mb:8.1f}")
    cg = runs["local"]
    n = cg["n"]
    rate = (cg["once"][0] + 100 * cg["grading"][0] / max(n, 1)) / 60
    print(f"  class of {n}: {(cg['once'][0] + cg['grading'][0]) / 60:.1f} min wall with its "
          f"template; at this per-student wall, 100 students: about {rate:.1f} min "
          f"(goal: at most 15 min on 2 cores)")
    if "dask" in runs:
        dk = runs["dask"]
        print(f"\nDask (localhost: dask scheduler + {args.dask} x dask worker --nthreads 1) vs "
              f"local --workers {args.workers}: wall {dk['grading'][0]:.1f} / "
              f"{cg['grading'][0]:.1f} s = {dk['grading'][0] / cg['grading'][0]:.2f}x, CPU "
              f"{dk['grading'][1]:.1f} / {cg['grading'][1]:.1f} s = "
              f"{dk['grading'][1] / cg['grading'][1]:.2f}x (the cluster's processes in the "
              "meter, idle ones too)")
        peaks = ", ".join(f"{w} {v / 1024:.0f} MB" for w, v in sorted(
            dk.get("workers_peak", {}).items()) if v)
        print(f"  dask worker processes' peak RSS (VmHWM, read before shutdown): {peaks or '?'}")
        print(f"  cluster: {cluster['stopped']}")
        print("  grades.csv, local vs dask (student, notebook, exercise): "
              + "\n  ".join(diff_rows(points["local"], points["dask"], "local", "dask")))
    flat = next((lb for lb in runs if lb.startswith("local, first")), None)
    if flat:
        f = runs[flat]
        k = max(f["n"], 1)

        def ratio(big, small):
            return f"{big / small:.2f}x" if small else "-"

        print(f"\nflat per student: the class of {n} vs its first {k} graded alone "
              "(1.00x is flat):")
        print(f"  {'':34s} {f'{n} st':>9s} {f'{k} st':>9s}  {n}/{k}")
        for what, big, small in (
                ("wall per student", cg["grading"][0] / n, f["grading"][0] / k),
                ("CPU per student", cg["grading"][1] / n, f["grading"][1] / k),
                ("student folders per student (MB)", cg["du_students"] / n / mb,
                 f["du_students"] / k / mb),
                ("OUT - template, per student (MB)", (cg["du"] - cg["du_once"]) / n / mb,
                 (f["du"] - f["du_once"]) / k / mb),
                ("parent peak RSS (MB, whole run)", (cg["peak_kb"] or 0) / 1024,
                 (f["peak_kb"] or 0) / 1024)):
            print(f"  {what:34s} {big:9.2f} {small:9.2f}  {ratio(big, small)}")
        if n > k:
            print(f"  {'OUT grows per added student (MB)':34s} "
                  f"{(cg['du'] - f['du']) / (n - k) / mb:9.2f}  ((OUT {n} - OUT {k}) / {n - k})")
        print(f"  grades.csv, the first {k} students in both runs: "
              + "\n  ".join(diff_rows(points["local"], points[flat], f"class of {n}",
                                      f"class of {k}", students[:k])))


# ---------------------------------------------------------------- another revision
@contextlib.contextmanager
def peer_checkout(rev: str, tmp: Path):
    """course-grade as it was at git revision ``rev``, ready to run: {"rev", "tree", "python",
    "env"}. A ``git worktree`` of ``rev`` in ``tmp`` (removed at the end) and a virtual
    environment of its own: this one's, hard-linked (``cp -al``: the same files, so the same
    page cache), whose editable-install finder maps ``autograder`` and ``transformer_ref`` to
    the worktree instead of this checkout. ``PYTHONPATH`` and a working folder in the worktree
    are not enough: the sandboxed kernel runs with a cleared environment in its own folder and
    imports the course packages through the venv's finder, and the sandbox binds only the
    grading process's own venv and package folders; so every process of the run, the kernels
    included, must come from a venv whose finder names the worktree."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    tree = tmp / f"peer-{sha[:7]}"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), sha],
                   check=True, capture_output=True)
    try:
        venv = tmp / "peer-venv"
        if sys.prefix == sys.base_prefix:
            raise SystemExit("--peer-rev: run this with the course's virtual environment")
        if subprocess.run(["cp", "-al", sys.prefix, str(venv)]).returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            shutil.copytree(sys.prefix, venv, symlinks=True)
        lib = next((venv / "lib").glob("python*")) / "site-packages"
        finders = sorted(lib.glob("__editable__*finder.py"))
        if not finders:
            raise SystemExit(f"--peer-rev: no editable-install finder in {lib}")
        for finder in finders:  # a new file (unlink first): never write through a hard link
            text = finder.read_text().replace(f"'{REPO}/", f"'{tree}/")
            finder.unlink()
            finder.write_text(text)
            for pyc in (lib / "__pycache__").glob(f"{finder.stem}.*.pyc"):
                pyc.unlink()
        python = venv / "bin" / Path(sys.executable).name
        env = {"PYTHONPATH": os.pathsep.join(
            [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
        yield {"rev": sha[:7], "tree": tree, "python": str(python), "bin": str(python.parent),
               "env": env}
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)


_WHICH = ("import autograder, transformer_ref, os, sys\n"
          "print(os.path.dirname(autograder.__file__), os.path.dirname(transformer_ref.__file__),"
          " os.path.exists(os.path.join(os.path.dirname(autograder.__file__), 'grading',"
          " 'records.py')), sys.prefix)\n")

_IN_SANDBOX = r"""
import json, os, subprocess, sys, tempfile
from pathlib import Path
from autograder.grading.sandbox.bwrap import sandbox_argv
spec = json.loads(Path(sys.argv[1]).read_text())
probe = ("import autograder, importlib.util as u, os, sys; "
         "ref = u.find_spec('transformer_ref'); "
         "print('autograder', os.path.dirname(autograder.__file__), '| transformer_ref', "
         "ref and ref.origin, '(not mounted for this notebook)' if ref is None else '', "
         "'| sys.prefix', sys.prefix, '|', sys.argv[1], 'visible:', os.path.exists(sys.argv[1]))")
with tempfile.TemporaryDirectory(prefix="cg-") as home:
    (Path(home) / "work").mkdir()
    spec["home"] = home
    argv = sandbox_argv(spec, []) + [sys.executable, "-c", probe, sys.argv[2]]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    print((r.stdout.strip() or r.stderr.strip()[-300:]).replace(chr(10), " | "))
"""


def which_code(run: dict, code: dict | None, tmp: Path) -> list[str]:
    """How a run's code was checked: the course packages its Python imports with the run's
    environment (from another folder, as the grading process), with a cleared environment
    (as the kernel), and inside a sandbox built from one of the run's own ``sandbox.json``
    specs (as the kernel: its mounts, its cleared environment); whether the students' course
    folders have ``.grader/records/`` (only since the record channel,
    ``autograder/grading/autograde/records.py``)."""
    python, cwd = (code["python"], code["tree"]) if code else (sys.executable, REPO)
    env = _env(tmp)
    if code:
        env = {**env, **code["env"], "PATH": os.pathsep.join([code["bin"], env["PATH"]])}
    lines = []
    for label, e, where in (
            ("grading process's imports", env, run["out"]),
            ("cleared env's imports", {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}, "/"),
    ):
        r = subprocess.run([python, "-c", _WHICH], env=e, cwd=where, capture_output=True,
                           text=True)
        lines.append(f"{label}: {(r.stdout.strip() or r.stderr.strip()[-300:])}"
                     "  (autograder, transformer_ref, has records.py, sys.prefix)")
    specs = sorted(run["out"].glob(".work/students/*/**/.grader/sandbox*.json"))
    spec = next((p for p in specs if p.name == "sandbox.json"), specs[0] if specs else None)
    if spec is not None:
        ro = json.loads(spec.read_text())
        mounts = [p for p in ro.get("ro", []) + [d for _, d in ro.get("ro_as", [])]
                  if "site-packages" not in p and not p.startswith(("/usr", "/etc", "/bin",
                                                                    "/sbin", "/lib", "/opt"))]
        lines.append(f"sandbox mounts ({spec.relative_to(run['out'])}): {', '.join(mounts)}")
        r = subprocess.run([python, "-c", _IN_SANDBOX, str(spec), str(REPO / "autograder")],
                           env=env, cwd=cwd, capture_output=True, text=True)
        lines.append("inside that sandbox: "
                     + (r.stdout.strip() or r.stderr.strip()[-300:]).replace("\n", " | "))
    else:
        lines.append("sandbox: no sandbox.json kept under .work/students/")
    n = len(list(run["out"].glob(".work/students/*")))
    k = len({p.relative_to(run["out"]).parts[2]
             for p in run["out"].glob(".work/students/*/**/.grader/records")})
    lines.append(f"students' course folders with .grader/records/: {k} of {n}")
    for role, exes in sorted(run["seen"].items()):
        lines.append(f"processes seen, {role}: {', '.join(sorted(exes))}")
    return lines


def _points(out: Path) -> dict:
    """{(student, notebook, exercise): (points, max_points, status)} of a run's grades.csv."""
    import csv

    with open(out / "grades.csv", newline="") as f:
        return {(r["student"], r["notebook"], r["exercise"]):
                (r["points"], r["max_points"], r["status"]) for r in csv.DictReader(f)}


def compare_peer(args) -> None:
    """The class graded by this checkout's course-grade and by REV's, side by side: ``--rounds``
    rounds, the order alternating (this, REV; REV, this; ...), each run in a fresh ``--out``."""
    with course_class(args) as (tmp, meter, info, students, assignments), \
            peer_checkout(args.peer_rev, tmp) as peer:
        cur_label, peer_label = "current", peer["rev"]
        codes = {cur_label: None, peer_label: peer}
        runs: dict = {cur_label: [], peer_label: []}
        before = _uptime()
        for r in range(args.rounds):
            order = [cur_label, peer_label] if r % 2 == 0 else [peer_label, cur_label]
            for label in order:
                t0 = time.monotonic()
                runs[label].append(run_course_grade(
                    args, meter, tmp, students, assignments, name=f"out-{label}-r{r + 1}",
                    code=codes[label]))
                print(f"round {r + 1}: {label} done in {time.monotonic() - t0:.0f} s "
                      f"({_uptime()})", flush=True)
        after = _uptime()
        checks = {label: which_code(runs[label][0], codes[label], tmp) for label in runs}
        points = {label: [_points(run["out"]) for run in runs[label]] for label in runs}
    n = _print_class(args, meter, students, info, assignments, before, after)
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    print(f"current = this checkout ({REPO}, HEAD {sha} plus its uncommitted changes); "
          f"{peer_label} = git worktree of {args.peer_rev}; "
          f"rounds: {args.rounds} (order alternating, current first)")

    def total(label, key, i=None):
        rs = runs[label] if i is None else [runs[label][i]]
        return tuple(sum(run[key][j] for run in rs) / len(rs) for j in (0, 1))

    rows = []
    for i in range(args.rounds):
        tag = f" (round {i + 1})" if args.rounds > 1 else ""
        rows += [(f"once per class (template){tag}", total(cur_label, "once", i),
                  total(peer_label, "once", i)),
                 (f"grading the class{tag}", total(cur_label, "grading", i),
                  total(peer_label, "grading", i)),
                 (f"per student{tag}", tuple(x / n for x in total(cur_label, "grading", i)),
                  tuple(x / n for x in total(peer_label, "grading", i)))]
    if args.rounds > 1:
        rows.append(("per student (mean of the rounds)",
                     tuple(x / n for x in total(cur_label, "grading")),
                     tuple(x / n for x in total(peer_label, "grading"))))
    head = f"{peer_label}/current"
    print(f"\n{'':40s} {'current':>19s} {peer_label:>19s} {head:>19s}")
    print(f"{'':40s} {'wall s':>9s} {'CPU s':>9s} {'wall s':>9s} {'CPU s':>9s} "
          f"{'wall':>9s} {'CPU':>9s}")
    for label, c, s in rows:
        print(f"{label:40s} {c[0]:9.1f} {c[1]:9.1f} {s[0]:9.1f} {s[1]:9.1f} "
              f"{s[0] / c[0]:9.2f} {s[1] / c[1]:9.2f}")

    print("\neach student's own grading time (results/*.json, wall s; mean of the rounds):")
    print(f"  {'student':15s} {'current':>8s} {peer_label:>8s} {head:>14s}")
    for student in students:
        c = [run["per"].get(student, float("nan")) for run in runs[cur_label]]
        s = [run["per"].get(student, float("nan")) for run in runs[peer_label]]
        c, s = sum(c) / len(c), sum(s) / len(s)
        print(f"  {student:15s} {c:8.1f} {s:8.1f} {s / c:14.2f}")
    print("kernel time per notebook (all students, wall s; first round):")
    for nb in runs[cur_label][0]["cells"]:
        c = sum(x[0] for x in runs[cur_label][0]["cells"][nb])
        s = sum(x[0] for x in runs[peer_label][0]["cells"].get(nb, []))
        print(f"  {nb:28s} {c:7.1f} {s:7.1f}")

    print("\nwhose code ran:")
    for label in runs:
        print(f"  {label}:")
        for line in checks[label]:
            print(f"    {line}")

    print("\ngrades.csv, current vs " + peer_label + " (per student, notebook, exercise):")
    for i in range(args.rounds):
        cur, old = points[cur_label][i], points[peer_label][i]
        diff_pts = [k for k in sorted(set(cur) | set(old))
                    if cur.get(k, (None,))[:2] != old.get(k, (None,))[:2]]
        diff_st = [k for k in sorted(set(cur) & set(old)) if cur[k][2] != old[k][2]]
        print(f"  round {i + 1}: {len(cur)} rows current, {len(old)} rows {peer_label}; "
              f"points differ on {len(diff_pts)} row(s), status on {len(diff_st)}")
        for k in diff_pts[:40]:
            print(f"    points {'/'.join(k)}: current {cur.get(k, ('-', '-', '-'))[:2]}, "
                  f"{peer_label} {old.get(k, ('-', '-', '-'))[:2]}")
        for k in diff_st[:40]:
            print(f"    status {'/'.join(k)}: current {cur[k][2]!r}, {peer_label} {old[k][2]!r}")
    for i in range(1, args.rounds):
        for label in runs:
            a, b = points[label][0], points[label][i]
            same = sum(1 for k in a if a[k][:2] == b.get(k, (None,))[:2])
            print(f"  {label}, round 1 vs round {i + 1}: points equal on {same} of {len(a)}")


# ---------------------------------------------------------------- older modes
def speedup(args) -> None:
    """The synthetic class of one assignment, ``--workers 1`` vs ``--workers N``."""
    from autograder.grading.config import GradeConfig
    from autograder.grading.parent.course import build_template

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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", nargs="+", default=None,
                   help="assignments (default: every chapter; --speedup: the "
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
    p.add_argument("--peer-rev", default=None, metavar="REV",
                   help="instead of stock nbgrader: course-grade as it was at git revision "
                   "REV (a worktree of it), on the same class, side by side")
    p.add_argument("--rounds", type=int, default=1,
                   help="with --peer-rev: rounds, the order alternating (default 1)")
    p.add_argument("--dask", type=int, nargs="?", const=2, default=0, metavar="N",
                   help="also grade the class on a localhost Dask cluster (dask scheduler + N "
                   "dask worker --nthreads 1; N default 2) and compare the rows")
    p.add_argument("--flat", type=int, default=0, metavar="K",
                   help="first grade the class's first K students alone: per-student time, "
                   "disk and the parent's peak memory for K and for the whole class")
    p.add_argument("--stock-sample", type=int, default=0, metavar="K",
                   help="stock nbgrader grades only the class's first K students (default: "
                   "all); the ratio is per student")
    p.add_argument("--no-stock", action="store_true", help="no stock nbgrader run")
    p.add_argument("--keep", type=Path, default=None, metavar="DIR",
                   help="work in DIR (a new folder, kept: the class and every --out) instead "
                   "of a temporary folder")
    args = p.parse_args()
    args.source = args.source.resolve()
    args.keep = args.keep.resolve() if args.keep else None
    if args.speedup:
        return speedup(args)
    if args.peer_rev:
        return compare_peer(args)
    return compare_stock(args)


if __name__ == "__main__":
    main()
