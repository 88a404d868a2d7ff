"""bench/grade_class.py's large-class options on a real class (issue 34, item 3): two students
(correct, wrong) of one small assignment graded by course-grade locally and on a localhost Dask
cluster (``--dask``: a ``dask scheduler`` and two ``dask worker`` processes, started and shut
down by the bench). Asserts what is printed (class time, per student, the parent's peak
memory, the output folder's size, the Dask run beside the local one), that the local run graded
every row (the right student full marks, the wrong one less) and that the Dask run's rows equal
the local run's, and stock nbgrader beside them on one student; never a time.

The bench's other runs are checked with stand-ins in tests/unit/test_grade_class_bench_report.py
(its bookkeeping and every report, a row that differs included, and stock nbgrader's course
folder and commands). ``--flat K`` is one more local course-grade run through the same code as
the local run here (what it adds is the copy of the first K folders and its table; that the
same students graded apart give the same rows is what the Dask run proves here: each student is
a task of its own there, in a fresh folder). ``--stock-sample 1`` runs stock nbgrader's
``autograde`` and ``generate_feedback`` for real on the first student."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")

REPO = Path(__file__).resolve().parents[2]
NUM = r"\d+\.\d+"


def _running_under(folder: Path) -> list[str]:
    """Command lines of live processes that name ``folder`` (the cluster's files are there)."""
    left = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(folder) in cmd:
            left.append(cmd)
    return left


def _rows(out: Path) -> dict:
    """{(student, exercise): (points, max_points, status)} of a run's grades.csv."""
    import csv

    with open(out / "grades.csv", newline="") as f:
        return {(r["student"], r["exercise"]): (r["points"], r["max_points"], r["status"])
                for r in csv.DictReader(f)}


def test_grade_class_bench_dask(tmp_path):
    keep = tmp_path / "bench"
    cmd = [sys.executable, "bench/grade_class.py", "--students", "2", "--assignment",
           "04_layer_norm", "--workers", "2", "--dask", "--stock-sample", "1",
           "--keep", str(keep)]
    res = subprocess.run(cmd, cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS="1"),
                         capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout

    assert "class: 2 student(s) x 1 notebooks (04_layer_norm)" in out, out
    # stock nbgrader (its own commands, for real) graded one student: only the per-student
    # row, with its ratio
    assert re.search(rf"^per student \(course-grade: 2; stock: sample of 1\)(?: +{NUM}){{6}}$",
                     out, re.M), out
    assert "grading the class (autograde + feedback)" not in out
    assert "stock nbgrader (1 student(s): s01_correct)" in out
    assert set(re.findall(r"^  (s0\d_\w+) +\d+\.\d s$", out, re.M)) == {
        "s01_correct", "s02_wrong"}

    # one table row per course-grade run: students, times, the parent's peak, the disk
    runs = {m[0]: m[1:] for m in re.findall(
        rf"^  (local|dask) +(\d+) +({NUM}) +({NUM}) +{NUM} +{NUM} +{NUM} "
        rf"+(\d+) +({NUM}) +({NUM}) +({NUM}) +(-?{NUM})$", out, re.M)}
    assert set(runs) == {"local", "dask"}, out
    assert [int(runs[r][0]) for r in ("local", "dask")] == [2, 2]
    for label, (_, wall, cpu, peak, du, templ, per_student, _) in runs.items():
        assert float(wall) > 0 and float(cpu) > 0 and int(peak) > 0, label
        assert float(du) > float(templ) > 0 and float(per_student) > 0, label

    # the local run graded every row: the right answers full marks, the wrong ones less (rows
    # of grader errors, the same in both runs, would otherwise compare "identical")
    local = _rows(keep / "course-grade")
    assert {k[0] for k in local} == {"s01_correct", "s02_wrong"}, local
    assert {v[2] for v in local.values()} == {"graded"}, local
    right = [v for k, v in local.items() if k[0] == "s01_correct"]
    wrong = [v for k, v in local.items() if k[0] == "s02_wrong"]
    assert all(p == m for p, m, _ in right) and len(right) == len(wrong) > 0, local
    assert sum(float(p) for p, _, _ in wrong) < sum(float(m) for _, m, _ in wrong), local

    # the Dask run: beside the local one, its workers measured, the cluster shut down, and
    # the same rows (points and status) as the local run
    assert re.search(rf"^Dask \(localhost: dask scheduler \+ 2 x dask worker --nthreads 1\) "
                     rf"vs local --workers 2: wall {NUM} / {NUM} s = {NUM}x, CPU {NUM} / "
                     rf"{NUM} s = {NUM}x", out, re.M), out
    assert re.search(r"peak RSS \(VmHWM, read before shutdown\): w0 \d+ MB, w1 \d+ MB$",
                     out, re.M), out
    assert "cluster: shut down through the scheduler; every process exited by itself" in out
    rows = re.search(r"grades\.csv, local vs dask \(student, notebook, exercise\): (\d+) rows "
                     r"local, (\d+) rows dask; points differ on (\d+) row\(s\), status on "
                     r"(\d+): (\w+)$", out, re.M)
    assert rows, out
    n_local, n_dask, d_points, d_status, verdict = rows.groups()
    assert int(n_local) == int(n_dask) == len(local)
    assert (d_points, d_status, verdict) == ("0", "0", "identical"), out
    assert _rows(keep / "course-grade-dask") == local

    # nothing of the cluster is left running
    assert not _running_under(keep / "dask"), _running_under(keep / "dask")
