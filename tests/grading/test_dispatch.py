"""``course-grade --scheduler``: grading on a real Dask cluster started by the test.

A ``dask scheduler`` and two ``dask worker --nthreads 1`` processes on 127.0.0.1, the small
fixture assignment (plain Python, seconds per student). One scheduler serves the module: its
first test grades on it before any worker ever joined, then starts the first worker; each
worker (and the warm grading process it starts) serves every later test, and a worker killed
by a test is replaced only when a later test needs two:

- the class graded on the cluster has the same rows, CSV and feedback pages as a local run,
  and formgrader sees the same OUT_DIR: the same files under submitted/ and autograded/, the
  same gradebook submissions;
- a cluster with no worker is said at once; the run stops after --scheduler-timeout with the
  students not graded left for the next run (no row of 0), and a worker that comes back lets
  the next run finish; an unreachable scheduler fails fast;
- a worker killed (its whole process group, SIGKILL) while it grades a student: Dask runs the
  lost task again on the other worker and every student is graded exactly once;
- the parent killed midway, then rerun: the students finished before are not graded again, the
  rest are, and nothing is graded twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from helpers.synthetic_class import ClassBuilder, matches
from helpers.synthetic_class.shared import REPO, grade_cmd, notebook_info, read_csv

pytest.importorskip("distributed")

SOURCE = REPO / "tests" / "fixtures" / "solutions"
ASSIGNMENT = "99_fixture"
KEEP = {"correct", "wrong", "missing"}  # two that run, one that never starts
RESUME_KEEP = KEEP | {"blank"}  # three that run on two workers: a kill after two is midway
ARGS = ("--cell-timeout", "5", "--timeout", "120", "--memory", "2048")
DASK = Path(sys.executable).with_name("dask")



class Cluster:
    """A scheduler and workers in their own process groups, all on 127.0.0.1."""

    def __init__(self, root: Path):
        self.root = root
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        sched_file = root / "scheduler.json"
        self.procs.append(self._start([str(DASK), "scheduler", "--host", "127.0.0.1",
                                       "--port", "0", "--no-dashboard",
                                       "--scheduler-file", str(sched_file)], "scheduler"))
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.address = json.loads(sched_file.read_text())["address"]

    def _start(self, cmd: list[str], name: str) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "ab")
        p = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=log, start_new_session=True)
        log.close()
        return p

    def add_worker(self) -> subprocess.Popen:
        n = len(self.workers)
        p = self._start([str(DASK), "worker", self.address, "--nthreads", "1", "--no-nanny",
                         "--host", "127.0.0.1", "--no-dashboard", "--name", f"w{n}",
                         "--local-directory", str(self.root / f"w{n}")], f"worker{n}")
        self.procs.append(p)
        self.workers.append(p)
        return p

    def alive_workers(self) -> list[subprocess.Popen]:
        return [w for w in self.workers if w.poll() is None]

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=60) as c:
            c.wait_for_workers(n, timeout=60)

    def ensure_workers(self, n: int) -> None:
        """At least ``n`` live workers: a test that killed one leaves it to the next test that
        needs ``n`` to start another (none when it is the module's last)."""
        while len(self.alive_workers()) < n:
            self.add_worker()
        self.wait_for_workers(n)

    @staticmethod
    def kill(p: subprocess.Popen) -> None:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the process and everything it started
        except ProcessLookupError:
            pass
        p.wait()

    def close(self) -> None:
        for p in reversed(self.procs):
            self.kill(p)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The module's scheduler; its workers start when a test asks (:meth:`Cluster.ensure_workers`).
    The module's first test grades on it before any worker ever joined, then adds the first."""
    c = Cluster(tmp_path_factory.mktemp("dask"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def fixture_nb(tmp_path_factory):
    return notebook_info(tmp_path_factory, SOURCE, [ASSIGNMENT])[ASSIGNMENT][0]


def _class(nb, tmp_path: Path, keep: set[str]) -> tuple[dict, Path]:
    expected = ClassBuilder(nb).build(tmp_path / "all", extra=("missing",))
    class_dir = tmp_path / "class"
    class_dir.mkdir()
    for entry in (tmp_path / "all").iterdir():
        if entry.name.removesuffix(".zip") in keep:
            entry.rename(class_dir / entry.name)
    return {s: e for s, e in expected.items() if s in keep}, class_dir


def _results(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (out / "results").glob("*.json")}


def _check_class(out: Path, nb, expected: dict) -> list[dict]:
    """Every student once, with the expected points and status; returns the CSV rows."""
    assert set(_results(out)) == set(expected)
    rows = read_csv(out / "grades.csv")
    keys = Counter((r["student"], r["exercise"]) for r in rows)
    assert max(keys.values()) == 1 and len(keys) == len(expected) * len(nb.grade_cells)
    for student, exp in expected.items():
        got = {r["exercise"]: r for r in rows if r["student"] == student}
        bad = {ex: (got[ex]["points"], got[ex]["status"], e)
               for ex, e in exp.items() if not matches(got[ex], e)}
        assert not bad, (student, bad)
    return rows


def _comparable(out: Path) -> dict:
    """The results minus what differs between runs (timings, run notes)."""
    return {s: {k: v for k, v in r.items() if k not in ("seconds", "notes")}
            for s, r in _results(out).items()}


def test_no_worker_stops_after_timeout_then_worker_back_finishes(cluster, fixture_nb, tmp_path):
    expected, class_dir = _class(fixture_nb, tmp_path, KEEP)
    # a scheduler no worker ever joined: the module's, this being its first test (the worker
    # it adds stays for the next tests); run after another test, a scheduler of its own
    own = bool(cluster.workers)
    if own:
        (tmp_path / "dask").mkdir()
    empty = Cluster(tmp_path / "dask") if own else cluster
    try:
        out = tmp_path / "out"
        waiting = f"course-grade: the Dask cluster at {empty.address} has no worker; waiting up to"
        t0 = time.monotonic()
        first = subprocess.run(
            grade_cmd(class_dir, out, SOURCE, *ARGS, "--scheduler", empty.address,
                      "--scheduler-timeout", "3"),
            cwd=REPO, capture_output=True, text=True, timeout=120)
        assert time.monotonic() - t0 < 60, "said and stopped within a minute"
        assert first.returncode == 1, first.stderr
        assert f"{waiting} 3 s (--scheduler-timeout)" in first.stderr
        assert f"had no worker for 3 s (--scheduler-timeout): stopped; {len(KEEP)} student(s) " \
               "not graded, rerun to grade them" in first.stderr
        # nothing stored for them: no result, no row of 0, and the next run grades them
        assert not _results(out)
        assert not [r for r in read_csv(out / "grades.csv") if r["points"] not in ("", None)]

        second = subprocess.Popen(
            grade_cmd(class_dir, out, SOURCE, *ARGS, "--scheduler", empty.address,
                      "--scheduler-timeout", "300"),
            cwd=REPO, stderr=subprocess.PIPE, text=True)
        said = []
        for line in second.stderr:  # the wait is said before the worker comes
            said.append(line)
            if line.startswith(waiting):
                break
        assert said and said[-1].startswith(f"{waiting} 300 s"), "".join(said)
        empty.add_worker()
        rest = second.communicate(timeout=300)[1]
        assert second.returncode == 0, "".join(said) + rest
        assert f"a worker joined the Dask cluster at {empty.address}" in rest
        _check_class(out, fixture_nb, expected)
    finally:
        if own:
            empty.close()


@pytest.fixture(scope="module")
def both_runs(cluster, fixture_nb, tmp_path_factory):
    """The same class graded locally and on the cluster: (expected, local OUT_DIR, Dask's)."""
    tmp_path = tmp_path_factory.mktemp("both")
    cluster.ensure_workers(2)
    expected, class_dir = _class(fixture_nb, tmp_path, KEEP)
    local, remote = tmp_path / "local", tmp_path / "dask"
    for out, extra in ((local, ("--workers", "2")), (remote, ("--scheduler", cluster.address))):
        proc = subprocess.run(grade_cmd(class_dir, out, SOURCE, *ARGS, *extra), cwd=REPO,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert f"dask {cluster.address}" in proc.stderr
    return expected, local, remote


def test_dask_class_equals_local_run(both_runs, fixture_nb):
    expected, local, remote = both_runs
    assert _check_class(local, fixture_nb, expected) == _check_class(remote, fixture_nb, expected)
    assert _comparable(local) == _comparable(remote)
    pages = sorted(p.relative_to(local) for p in (local / "feedback").rglob("*.html"))
    assert pages and pages == sorted(p.relative_to(remote) for p in
                                     (remote / "feedback").rglob("*.html"))
    for page in pages:  # the same feedback (the page embeds no path or time of its own)
        assert (local / page).read_text() == (remote / page).read_text()
    # the parent alone wrote OUT_DIR: no scratch folder of a worker in it
    assert not (remote / ".work" / "students").exists()
    # a class of plain folders: no LMS's grade file (grades.csv and nbgrader export are its)
    assert [p.name for p in (local / "exports").iterdir()] == \
        [p.name for p in (remote / "exports").iterdir()] == []
    cut = "<h2>Slowest students</h2>"  # timings differ, the rest of the report does not
    report = (remote / "report.html").read_text()
    assert cut in report and (local / "report.html").read_text().split(cut)[0] == \
        report.split(cut)[0]


def _formgrader_files(out: Path) -> dict[str, bytes | dict]:
    """What formgrader reads of OUT_DIR besides the gradebook: submitted/ (its submission
    count) and autograded/ (the manual grading page), {relative path: content}. An autograded
    notebook is compared without its cells' execution times (two runs differ by those alone).
    """
    files = {}
    for kind in ("submitted", "autograded"):
        for p in sorted((out / kind).rglob("*")):
            if p.is_file():
                files[p.relative_to(out).as_posix()] = p.read_bytes()
    for rel, data in files.items():
        if rel.startswith("autograded/") and rel.endswith(".ipynb"):
            nb = json.loads(data)
            for c in nb["cells"]:
                c["metadata"].pop("execution", None)
            files[rel] = nb
    return files


def _submissions(out: Path) -> list[tuple]:
    """The gradebook's submissions as formgrader lists them, with their scores."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        return sorted((s.student_id, a.name, s.timestamp, s.score, s.max_score,
                       s.needs_manual_grade) for a in gb.assignments for s in a.submissions)


def test_dask_run_gives_formgrader_the_local_files(both_runs):
    expected, local, remote = both_runs
    files = _formgrader_files(local)
    # the students who handed the notebook in, each with its submitted and autograded copy
    handed_in = sorted(set(expected) - {"missing"})
    nb = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    assert sorted(files) == sorted(f"{kind}/{s}/{nb}" for kind in ("autograded", "submitted")
                                   for s in handed_in)
    assert _formgrader_files(remote) == files
    subs = _submissions(local)
    assert [s[:2] for s in subs] == [(s, ASSIGNMENT) for s in handed_in]
    assert _submissions(remote) == subs


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_fails_fast(fixture_nb, tmp_path):
    _, class_dir = _class(fixture_nb, tmp_path, KEEP)
    out = tmp_path / "out"
    address = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    t0 = time.monotonic()
    proc = subprocess.run(grade_cmd(class_dir, out, SOURCE, *ARGS, "--scheduler", address),
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t0 < 60, "an unreachable scheduler should fail fast"
    assert proc.returncode == 2
    assert f"course-grade: cannot reach the Dask scheduler at {address}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not _results(out)


def test_killed_parent_then_rerun_resumes(cluster, fixture_nb, tmp_path):
    cluster.ensure_workers(2)
    expected, class_dir = _class(fixture_nb, tmp_path, RESUME_KEEP)
    out = tmp_path / "out"
    cmd = grade_cmd(class_dir, out, SOURCE, *ARGS, "--scheduler", cluster.address)
    first = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while first.poll() is None and len(_results(out)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = _results(out)
    assert 2 <= len(before) < len(RESUME_KEEP), "the kill should land midway"
    second = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert f"{len(before)} student(s) already graded, skipped" in second.stderr
    after = _results(out)
    for student, result in before.items():  # not graded again: the same result, same run id
        assert after[student] == result
    _check_class(out, fixture_nb, expected)


def test_killed_worker_still_grades_everyone_once(cluster, fixture_nb, tmp_path):
    from distributed import Client

    cluster.ensure_workers(2)
    expected, class_dir = _class(fixture_nb, tmp_path, KEEP)
    out = tmp_path / "out"
    cmd = grade_cmd(class_dir, out, SOURCE, *ARGS, "--scheduler", cluster.address)
    parent = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True)
    victim, lost = None, []
    deadline = time.monotonic() + 120
    with Client(cluster.address, timeout=30, set_as_default=False) as c:
        while victim is None and parent.poll() is None and time.monotonic() < deadline:
            busy = {w: keys for w, keys in c.processing().items() if keys}
            if busy and len(_results(out)) < len(KEEP) - 1:
                addr, lost = next(iter(busy.items()))
                name = c.scheduler_info()["workers"][addr]["name"]  # "w<index>"
                victim = cluster.workers[int(name[1:])]
                cluster.kill(victim)  # mid-task: the student it was grading is lost with it
            time.sleep(0.2)
    assert victim is not None, "no worker was busy: the kill came too late"
    _, err = parent.communicate(timeout=300)
    assert parent.returncode == 0, err
    rows = _check_class(out, fixture_nb, expected)
    assert not [r for r in rows if "grader error" in r["status"]]
    lost_students = {str(k).split("-")[1] for k in lost}  # keys are grade-<student>-<run>
    assert lost_students and lost_students <= set(_results(out))
