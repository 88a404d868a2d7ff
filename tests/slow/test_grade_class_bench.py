"""bench/grade_class.py's large-class options on a 3-student class of one small assignment
(issue 34, item 3): ``--dask`` (a localhost ``dask scheduler`` and two ``dask worker``
processes), ``--flat 1`` (the first student graded alone, then the class), ``--stock-sample 1``
(stock nbgrader on the first student only). Asserts what is printed and that the Dask run's
rows equal the local run's; never a time."""

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


def test_grade_class_bench_dask_flat_and_stock_sample(tmp_path):
    keep = tmp_path / "bench"
    cmd = [sys.executable, "bench/grade_class.py", "--students", "3", "--assignment",
           "04_layer_norm", "--workers", "2", "--dask", "--flat", "1", "--stock-sample", "1",
           "--keep", str(keep)]
    res = subprocess.run(cmd, cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS="1"),
                         capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout

    assert "class: 3 student(s) x 1 notebooks (04_layer_norm)" in out, out
    # stock nbgrader graded one student: only the per-student row, with its ratio
    assert re.search(rf"^per student \(course-grade: 3; stock: sample of 1\)(?: +{NUM}){{6}}$",
                     out, re.M), out
    assert "grading the class (autograde + feedback)" not in out
    assert "stock nbgrader (1 student(s): s01_correct)" in out
    assert set(re.findall(r"^  (s0\d_\w+) +\d+\.\d s$", out, re.M)) == {
        "s01_correct", "s02_wrong", "s03_blank"}

    # one table row per course-grade run: students, times, the parent's peak, the disk
    runs = {m[0]: m[1:] for m in re.findall(
        rf"^  (local, first 1|local|dask) +(\d+) +({NUM}) +({NUM}) +{NUM} +{NUM} +{NUM} "
        rf"+(\d+) +({NUM}) +({NUM}) +({NUM}) +(-?{NUM})$", out, re.M)}
    assert set(runs) == {"local, first 1", "local", "dask"}, out
    assert [int(runs[r][0]) for r in ("local, first 1", "local", "dask")] == [1, 3, 3]
    for label, (_, wall, cpu, peak, du, templ, per_student, _) in runs.items():
        assert float(wall) > 0 and float(cpu) > 0 and int(peak) > 0, label
        assert float(du) > float(templ) > 0 and float(per_student) > 0, label

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
    assert int(n_local) == int(n_dask) > 0 and int(n_local) % 3 == 0
    assert (d_points, d_status, verdict) == ("0", "0", "identical"), out

    # flat: the class against its first student, and that student's rows in both runs
    assert re.search(r"^flat per student: the class of 3 vs its first 1 graded alone", out,
                     re.M)
    for what in ("wall per student", "CPU per student", "student folders per student (MB)",
                 "parent peak RSS (MB, whole run)"):
        assert re.search(rf"^  {re.escape(what)} +{NUM} +{NUM} +{NUM}x$", out, re.M), what
    flat = re.search(r"the first 1 students in both runs: (\d+) rows class of 3, (\d+) rows "
                     r"class of 1; points differ on 0 row\(s\), status on 0: identical", out)
    assert flat and int(flat[1]) == int(flat[2]) == int(n_local) // 3, out

    # nothing of the cluster is left running
    assert not _running_under(keep / "dask"), _running_under(keep / "dask")
