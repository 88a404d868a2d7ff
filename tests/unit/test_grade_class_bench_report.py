"""bench/grade_class.py's bookkeeping and report, its runs replaced by stand-ins (no grading).

``compare_stock`` through ``main`` (the command line as the README gives it), with the class,
course-grade, stock nbgrader and the Dask cluster replaced by stand-ins: course-grade's writes
a grades.csv for exactly the student folders it is given, so ``--flat K`` must hand it a copy
of the first K students' folders. What is printed is checked as tests/slow/
test_grade_class_bench.py checks the real runs' output (which grades a real class locally, on
a real localhost Dask cluster and with stock nbgrader), here also for the parts that test does
not run: ``--flat``, stock nbgrader on the whole class, and rows that differ (the verdict
"DIFFERENT" and each row named)."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NUM = r"\d+\.\d+"
KINDS = ("correct", "wrong", "blank")
EXERCISES = ("ex1", "ex2")


@pytest.fixture(scope="module")
def bench():
    """bench/grade_class.py as a module (it puts REPO and tests/ on sys.path: undone)."""
    path = list(sys.path)
    spec = importlib.util.spec_from_file_location("bench_grade_class", REPO / "bench" /
                                                  "grade_class.py")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path[:] = path
    return mod


class Stand:
    """The stand-ins and what they were asked: ``calls`` [(run name, students graded, extra
    arguments)], ``stock`` (the students stock nbgrader got), ``perturb`` {run name: (row,
    field, value)} changed in that run's grades.csv."""

    def __init__(self, bench, monkeypatch, n):
        self.students = [f"s{i + 1:02d}_{KINDS[i % 3]}" for i in range(n)]
        self.calls, self.stock, self.perturb, self.cluster = [], None, {}, []
        for name in ("course_class", "run_course_grade", "run_stock", "dask_cluster"):
            monkeypatch.setattr(bench, name, getattr(self, name))
        monkeypatch.setattr(bench, "_uptime", lambda: "up")

    @contextlib.contextmanager
    def course_class(self, args):
        tmp = args.keep
        tmp.mkdir(parents=True)
        for s in self.students:
            (tmp / "class" / s).mkdir(parents=True)
            (tmp / "class" / s / "04_layer_norm.ipynb").write_text("{}")

        class Meter:
            kind = "stand-in meter"

        yield tmp, Meter(), {"04_layer_norm": ["04_layer_norm"]}, self.students, [
            "04_layer_norm"]

    def run_course_grade(self, args, meter, tmp, students, assignments, name="course-grade",
                         env=None, code=None, class_dir=None, extra=()):
        graded = sorted(p.name for p in (class_dir or tmp / "class").iterdir())
        assert graded == sorted(students), (name, graded, students)  # the folders it is given
        self.calls.append((name, graded, tuple(extra)))
        out = tmp / name
        out.mkdir()
        rows = [{"student": s, "notebook": "04_layer_norm", "exercise": ex,
                 "points": "2" if "correct" in s else "0", "max_points": "2",
                 "status": "graded"} for s in graded for ex in EXERCISES]
        if name in self.perturb:
            i, field, value = self.perturb[name]
            rows[i][field] = value
        with open(out / "grades.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        k, mb = len(graded), 2**20
        return {"once": (20.0, 6.0), "grading": (5.0 * k + 10, 4.0 * k + 6),
                "per": {s: 4.0 for s in graded}, "cells": {"04_layer_norm": [
                    (0.2, "ex1", "autograder"), (0.1, "setup", "")]},
                "out": out, "seen": {}, "peak_kb": 105 * 1024, "du_once": 3 * mb,
                "du": (15 + k) * mb, "n": k, "du_students": k * mb}

    def run_stock(self, args, meter, tmp, students, assignments):
        self.stock = list(students)
        k = len(students)
        return {"once": (16.0, 7.0), "grading": (30.0 * k, 12.0 * k),
                "autograde": (20.0 * k, 8.0 * k), "feedback": (10.0 * k, 4.0 * k)}

    @contextlib.contextmanager
    def dask_cluster(self, meter, root, env, workers=2):
        cluster = {"address": "tcp://127.0.0.1:9", "stopped": "not started",
                   "peak_kb": lambda: {f"w{i}": (88 + i) * 1024 for i in range(workers)}}
        self.cluster.append(workers)
        try:
            yield cluster
        finally:
            cluster["stopped"] = ("shut down through the scheduler; every process exited by "
                                  "itself")


def _main(bench, monkeypatch, capsys, tmp_path, *argv):
    monkeypatch.setattr(sys, "argv", ["grade_class.py", *argv, "--keep", str(tmp_path / "b")])
    bench.main()
    return capsys.readouterr().out


def _dask_rows(out):
    m = re.search(r"grades\.csv, local vs dask \(student, notebook, exercise\): (\d+) rows "
                  r"local, (\d+) rows dask; points differ on (\d+) row\(s\), status on "
                  r"(\d+): (\w+)$", out, re.M)
    assert m, out
    return m.groups()


def test_flat_dask_and_stock_sample_are_run_and_reported(bench, monkeypatch, capsys, tmp_path):
    st = Stand(bench, monkeypatch, 3)
    out = _main(bench, monkeypatch, capsys, tmp_path, "--students", "3", "--assignment",
                "04_layer_norm", "--workers", "2", "--dask", "--flat", "1",
                "--stock-sample", "1")
    s = st.students
    # the first student alone (a copy of its folder), then the class locally and on Dask
    assert st.calls == [("course-grade-first1", s[:1], ()), ("course-grade", s, ()),
                        ("course-grade-dask", s, ("--scheduler", "tcp://127.0.0.1:9"))]
    assert st.cluster == [2] and st.stock == s[:1]
    assert "class: 3 student(s) x 1 notebooks (04_layer_norm)" in out, out
    assert re.search(rf"^per student \(course-grade: 3; stock: sample of 1\)(?: +{NUM}){{6}}$",
                     out, re.M), out
    assert "grading the class (autograde + feedback)" not in out
    assert "stock nbgrader (1 student(s): s01_correct)" in out
    runs = {m[0]: m[1:] for m in re.findall(
        rf"^  (local, first 1|local|dask) +(\d+) +({NUM}) +({NUM}) +{NUM} +{NUM} +{NUM} "
        rf"+(\d+) +({NUM}) +({NUM}) +({NUM}) +(-?{NUM})$", out, re.M)}
    assert [int(runs[r][0]) for r in ("local, first 1", "local", "dask")] == [1, 3, 3], out
    assert re.search(r"^  dask worker processes' peak RSS \(VmHWM, read before shutdown\): "
                     r"w0 88 MB, w1 89 MB$", out, re.M), out
    assert "cluster: shut down through the scheduler; every process exited by itself" in out
    assert _dask_rows(out) == ("6", "6", "0", "0", "identical")
    assert re.search(r"^flat per student: the class of 3 vs its first 1 graded alone", out,
                     re.M), out
    # the stand-ins' figures: 3 students (18/3 s CPU each) against 1 (10/1 s)
    assert re.search(r"^  CPU per student +6\.00 +10\.00  0\.60x$", out, re.M), out
    assert re.search(r"^  OUT grows per added student \(MB\) +1\.00", out, re.M), out
    assert ("grades.csv, the first 1 students in both runs: 2 rows class of 3, 2 rows class "
            "of 1; points differ on 0 row(s), status on 0: identical") in out


@pytest.mark.parametrize("field, value", [("points", "1"), ("status", "not graded: timeout")])
def test_a_dask_row_that_differs_is_named(bench, monkeypatch, capsys, tmp_path, field, value):
    st = Stand(bench, monkeypatch, 2)
    st.perturb["course-grade-dask"] = (3, field, value)  # s02_wrong's ex2
    out = _main(bench, monkeypatch, capsys, tmp_path, "--students", "2", "--assignment",
                "04_layer_norm", "--dask", "--no-stock")
    pts, sts = ("1", "0") if field == "points" else ("0", "1")
    assert _dask_rows(out) == ("4", "4", pts, sts, "DIFFERENT"), out
    row = {"points": "points s02_wrong/04_layer_norm/ex2: local ('0', '2'), dask ('1', '2')",
           "status": "status s02_wrong/04_layer_norm/ex2: local 'graded', dask 'not graded: "
                     "timeout'"}[field]
    assert f"\n    {row}" in out, out
    assert st.stock is None and "stock nbgrader" not in out


def test_flat_rows_that_differ_and_stock_on_the_whole_class(bench, monkeypatch, capsys,
                                                           tmp_path):
    st = Stand(bench, monkeypatch, 3)
    st.perturb["course-grade-first2"] = (2, "points", "2")  # s02_wrong's ex1, alone
    out = _main(bench, monkeypatch, capsys, tmp_path, "--students", "3", "--assignment",
                "04_layer_norm", "--flat", "2")
    assert [c[:2] for c in st.calls] == [("course-grade-first2", st.students[:2]),
                                         ("course-grade", st.students)]
    assert st.stock == st.students and not st.cluster and "Dask" not in out
    assert ("grades.csv, the first 2 students in both runs: 4 rows class of 3, 4 rows class "
            "of 2; points differ on 1 row(s), status on 0: DIFFERENT") in out, out
    assert "points s02_wrong/04_layer_norm/ex1: class of 3 ('0', '2'), class of 2 ('2', '2')" \
        in out
    for label in ("grading the class (autograde + feedback)", "per student (grading / students)",
                  "whole run (once + grading)"):
        assert re.search(rf"^{re.escape(label)}(?: +{NUM}){{6}}$", out, re.M), label


def test_stock_course_folder_and_commands(bench, tmp_path):
    """``run_stock`` with a meter that records the commands instead of running them: stock
    nbgrader's course folder (the course's configuration, its own root and gradebook, the cell
    timeout), the sampled students' notebooks submitted, and nbgrader's three commands per
    assignment in the course folder, their times summed."""
    from autograder.grading.parent.course import REPO_CONFIG

    class Meter:
        def __init__(self):
            self.cmds = []

        def run(self, cmd, **kw):
            self.cmds.append((cmd, kw["cwd"]))
            return 2.0, 1.0

    class Args:
        source, cell_timeout = REPO / "solutions", "77"

    students = ["s01_correct", "s02_wrong", "s03_blank"]
    for s in students:
        (tmp_path / "class" / s).mkdir(parents=True)
        (tmp_path / "class" / s / "04_layer_norm.ipynb").write_text(s)
    meter = Meter()
    st = bench.run_stock(Args, meter, tmp_path, students[:2], ["04_layer_norm"])
    root = tmp_path / "stock"
    config = (root / "nbgrader_config.py").read_text()
    for line in (f"load_subconfig({str(REPO_CONFIG)!r})  # noqa: F821", f"c.CourseDirectory.root = "
                 f"{str(root)!r}", "c.CourseDirectory.source_directory = 'source'",
                 f"c.CourseDirectory.db_url = {'sqlite:///' + str(root / 'gradebook.db')!r}",
                 "c.Execute.timeout = 77"):
        assert line in config.splitlines(), (line, config)
    assert (root / "source" / "04_layer_norm" / "04_layer_norm.ipynb").exists()
    submitted = sorted(p.relative_to(root / "submitted").as_posix()
                       for p in (root / "submitted").rglob("*.ipynb"))
    assert submitted == ["s01_correct/04_layer_norm/04_layer_norm.ipynb",
                         "s02_wrong/04_layer_norm/04_layer_norm.ipynb"]
    assert (root / "submitted" / submitted[1]).read_text() == "s02_wrong"
    assert [(c[3:], cwd) for c, cwd in meter.cmds] == [
        (["generate_assignment", "04_layer_norm", "--force"], root),
        (["autograde", "04_layer_norm", "--force"], root),
        (["generate_feedback", "04_layer_norm", "--force"], root)]
    assert {tuple(c[:3]) for c, _ in meter.cmds} == {(sys.executable, "-m", "nbgrader")}
    assert st == {"once": (2.0, 1.0), "grading": (4.0, 2.0), "autograde": (2.0, 1.0),
                  "feedback": (2.0, 1.0)}
