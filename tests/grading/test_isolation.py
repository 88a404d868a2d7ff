"""Resources per student (issue 14, item 6): the sandbox's /tmp is capped, and one student's
CPU hog does not change the result of a student graded next to it.

The class test grades three students of the fixture assignment with two workers: ``a_hog``
(its first answer starts 100 busy processes, each in a session of its own, that outlive the
cell), ``correct`` (graded at the same time as the hog) and ``tmp_filler`` (writes 64 MB into
a 16 MB /tmp). Without per-student isolation the hog's processes share every core with
``correct``, whose grading then runs past its wall-time limit (seen: every row 'not graded:
time limit'); with it, ``correct`` gets full marks. Slow (the hog runs until its own wall-time
limit): about a minute and a half.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import nbformat
import pytest

from autograder.grading.config import GradeConfig
from autograder.grading.parent.isolation import CgroupV1, CgroupV2, Pinned, isolation
from autograder.grading.parent.runner import LocalRunner
from autograder.grading.sandbox import bwrap_argv, bwrap_path, readonly_paths
from autograder.grading.status import STOPPED_NO_RESULT, STOPPED_RECORDED

from helpers.synthetic_class import ClassBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, read_csv, run_info

SOURCE = REPO / "tests" / "fixtures" / "solutions"
ASSIGNMENT = "99_fixture"

HOG = (
    "import os as _o, time as _t\n"
    "for _ in range(100):\n"
    "    if _o.fork() == 0:\n"
    "        _o.setsid()\n"
    "        _end = _t.time() + 150\n"
    "        while _t.time() < _end:\n"
    "            pass\n"
    "        _o._exit(0)\n"
)
FILL = (
    "for _i in range(8):\n"
    "    with open(f'/tmp/fill{_i}', 'wb') as _f:\n"
    "        _f.write(b'x' * (8 * 2**20))\n"
)
TIMEOUT = 60

OUTCAP = "autograder.grading.sandbox.outcap"  # the kernel's launcher module


def _need_bwrap():
    if bwrap_path() is None:
        pytest.skip("bubblewrap not installed")


# ---- /tmp cap ---------------------------------------------------------------------------
def test_sandbox_tmp_is_capped(tmp_path):
    """Writing past the cap fails inside the sandbox with ENOSPC (16 MB here)."""
    _need_bwrap()
    (tmp_path / "work").mkdir()
    (tmp_path / "ipc").mkdir()
    spec = {"bwrap": bwrap_path(), "uid": 212345, "home": str(tmp_path),
            "ro": readonly_paths(), "env": {"HOME": "/tmp"}, "tmp_mb": 16}
    argv = bwrap_argv(spec, "unused")
    probe = (
        "import errno\nwritten = 0\n"
        "try:\n"
        "    with open('/tmp/fill', 'wb') as f:\n"
        "        for _ in range(64):\n"
        "            f.write(b'x' * 2**20)\n"
        "            f.flush()\n"
        "            written += 1\n"
        "    print('wrote', written)\n"
        "except OSError as e:\n"
        "    print(errno.errorcode[e.errno], written)\n"
    )
    cmd = argv[: argv.index(OUTCAP) - 2] + [sys.executable, "-c", probe]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    kind, written = out.stdout.split()
    assert kind == "ENOSPC" and 14 <= int(written) <= 16, out.stdout


def test_tmp_size_follows_the_memory_limit():
    assert GradeConfig(memory_mb=4096).tmp_mb == 1024
    assert GradeConfig(memory_mb=4096, tmp_mb=100).tmp_mb == 100


# ---- where a job runs -------------------------------------------------------------------
def test_pinned_slots_split_the_cores():
    config = GradeConfig(workers=2, cpus=4)
    iso = Pinned(config, cpus=[0, 1, 2, 3])
    with iso.job() as a, iso.job() as b:
        assert sorted(a.cpus + b.cpus) == [0, 1, 2, 3] and not set(a.cpus) & set(b.cpus)
        with iso.job() as c:  # more jobs than slots: shared, never refused
            assert c.cpus in (a.cpus, b.cpus)
    one = Pinned(GradeConfig(workers=3, cpus=2), cpus=[0, 1])
    with one.job() as a, one.job() as b, one.job() as c:
        assert [a.cpus, b.cpus, c.cpus] == [[0], [1], [0]]


def test_job_runs_in_its_place_and_leaves_nothing(tmp_path):
    """The command sees its cgroup (or its cores); the group is gone afterwards."""
    config = GradeConfig(workers=2, cpus=2, isolation="auto")
    iso = isolation(config)
    code = ("import os\nprint(open('/proc/self/cgroup').read().replace(chr(10), ' '))\n"
            "print('cpus', sorted(os.sched_getaffinity(0)))")
    r = LocalRunner(config).run([sys.executable, "-c", code], tmp_path, timeout=60,
                                log_path=tmp_path / "log")
    log = (tmp_path / "log").read_text()
    assert r.returncode == 0, log
    if isinstance(iso, CgroupV1 | CgroupV2):
        assert "course-grade-" in log
        for parent in iso.parents.values():
            assert not [p for p in parent.glob(f"course-grade-{os.getpid()}-*") if p.is_dir()
                        and not p.name.endswith("-grader")]
    else:
        assert isinstance(iso, Pinned)
        assert "cpus [" in log and len(iso.slots) == min(2, len(os.sched_getaffinity(0)))


def test_cgroup_limits_are_written(tmp_path):
    """Where this machine has a writable cgroup: the student's group gets the CPU quota (its
    share of the cores) and the task cap."""
    config = GradeConfig(workers=2, cpus=2, isolation="auto", pids=300)
    iso = isolation(config)
    if not isinstance(iso, CgroupV1 | CgroupV2):
        pytest.skip(f"no writable cgroup here ({iso.kind})")
    with iso.job() as place:
        files = {p.name: p.read_text().strip() for g in place.cgroups for p in g.iterdir()
                 if p.name in ("cpu.max", "cpu.cfs_quota_us", "pids.max")}
    assert files.get("pids.max") == "300"
    assert files.get("cpu.max", "").startswith("100000 ") or files.get("cpu.cfs_quota_us") \
        == "100000"
    assert not any(g.exists() for g in place.cgroups)


# ---- the class ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    _need_bwrap()
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: nothing to isolate the students from each other with")
    root = tmp_path_factory.mktemp("isolation")
    args = ("--workers", "2", "--cell-timeout", "20", "--timeout", str(TIMEOUT), "--memory",
            "2048", "--tmp", "16")
    info = run_info(SOURCE, [ASSIGNMENT], args)
    nb = info[ASSIGNMENT][0]
    builder = ClassBuilder(nb)
    first = builder.first
    for student, code in (("a_hog", HOG), ("correct", ""), ("tmp_filler", FILL)):
        path = root / "class" / student / f"{nb.name}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(builder.answered(lambda gid, src, c=code: c + src if gid == first
                                        else src), path)
    t0 = time.monotonic()
    proc = subprocess.run(grade_cmd(root / "class", root / "out", SOURCE, *args),
                          cwd=REPO, capture_output=True, text=True)
    rows = read_csv(root / "out" / "grades.csv") if proc.returncode == 0 else []
    return {"proc": proc, "rows": rows, "nb": nb, "builder": builder,
            "seconds": time.monotonic() - t0}


def _rows(graded, student):
    return {r["exercise"]: (r["points"], r["status"]) for r in graded["rows"]
            if r["student"] == student}


def test_a_cpu_hog_does_not_change_the_student_next_to_it(graded):
    assert graded["proc"].returncode == 0, graded["proc"].stderr
    nb = graded["nb"]
    assert _rows(graded, "correct") == {g.grade_id: (f"{g.max_points:g}", "graded")
                                         for g in nb.grade_cells}, graded["proc"].stderr
    # The hog's own rows depend on how much CPU its busy children leave its own answers
    # (it is not a student doing the right thing): each row is its full marks, or 'not
    # graded' with one of the limits that stop a hog, all seen (idle machine: full marks;
    # loaded: the student's time limit, or only the hog's exercise ran over its cell limit),
    # or, where a cell of the hog could not be interrupted at the cell timeout (its kernel
    # wedged: the student's doing), 0 for the exercises without a record. Never a score in
    # between. The neighbour above is the point of this test.
    hog = _rows(graded, "a_hog")
    stopped = {("", f"not graded: time limit of {TIMEOUT} s for the student exceeded"),
               ("", "not graded: a cell of this exercise ran over 20 s")}
    wedged = f"{STOPPED_NO_RESULT}ran past the cell timeout and could not be interrupted"
    assert sorted(hog) == sorted(g.grade_id for g in nb.grade_cells), hog
    for g in nb.grade_cells:
        # (a hog's own cell interrupted at the cell limit: the exercise scores as its test
        # cell ran after it, 0 or full)
        assert hog[g.grade_id] in ((f"{g.max_points:g}", "graded"), ("0", "graded"),
                                   (f"{g.max_points:g}", STOPPED_RECORDED)) \
            or hog[g.grade_id] in stopped \
            or hog[g.grade_id][0] == "0" and hog[g.grade_id][1].startswith(wedged), hog


def test_filling_tmp_stops_at_the_cap_and_scores_the_exercise(graded):
    # /tmp is capped (16 MB here): the student's code meets "No space left on device", an
    # exception of its own like any other (the text a cell raises never sets a status), so
    # the exercise whose answer filled it scores 0 and the rest of the notebook is graded
    assert graded["proc"].returncode == 0, graded["proc"].stderr
    nb, builder = graded["nb"], graded["builder"]
    first_tests = builder._tests_of(builder.first)
    assert _rows(graded, "tmp_filler") == {
        g.grade_id: ("0", "graded") if g.grade_id in first_tests else
        (f"{g.max_points:g}", "graded")
        for g in nb.grade_cells
    }


def test_a_job_gets_one_workers_cores_tasks_and_memory(tmp_path):
    config = GradeConfig(workers=4, cpus=4, pids=300)
    v1 = CgroupV1(config, {"cpu": tmp_path, "pids": tmp_path})._limits()
    assert v1["cpu"]["cpu.cfs_quota_us"] == "100000" and v1["pids"]["pids.max"] == "300"
    v2 = CgroupV2(GradeConfig(workers=4, cpus=4, memory_mb=1000, tmp_mb=24), tmp_path,
                  memory=True)._limits()["unified"]
    assert v2["cpu.max"] == "100000 100000" and v2["memory.max"] == str(1024 * 2**20)
