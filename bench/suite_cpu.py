"""Where the test suite's CPU goes: each test's CPU seconds, its grading processes included.

    PYTHONPATH=bench .venv/bin/python -m pytest -p suite_cpu -n 2 --dist loadgroup   # record
    .venv/bin/python bench/suite_cpu.py            # the table, per xdist work unit (group)
    .venv/bin/python bench/suite_cpu.py --tests 30 # the 30 costliest tests

As a pytest plugin, each process of the run (each xdist worker) joins a CPU meter of its own
(:class:`grade_class.CpuMeter`: a cpuacct cgroup or a cgroup v2 leaf where one can be made,
else the waited-for children's rusage), so a test's CPU counts every process it starts,
``course-grade``'s sandboxed kernels included. A module fixture's cost (a graded class) goes
to the first test that asks for it. Each test's line (id, outcome, CPU s, wall s) is appended
to ``$SUITE_CPU_OUT`` (default ``suite-cpu.jsonl`` in the current folder).

CPU seconds, unlike wall time, change little when other work shares the machine: the table
ranks what to trim even on a busy machine. The report groups tests as the suite's scheduler
does (``tests/conftest.py``, :func:`group_of`): a shared class's modules are one row.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("SUITE_CPU_OUT", "suite-cpu.jsonl"))
_meter = None
_start: dict[str, tuple[float, float]] = {}
_outcome: dict[str, str] = {}


def pytest_configure(config):
    global _meter
    numprocesses = getattr(config.option, "numprocesses", None)
    if numprocesses and "PYTEST_XDIST_WORKER" not in os.environ:
        return  # xdist's controller: its workers measure (it only hears their reports)
    sys.path.insert(0, str(REPO / "bench"))
    from grade_class import CpuMeter

    _meter = CpuMeter()
    if _meter.group is not None:  # this worker, and all it starts, in the meter's group
        (_meter.group / "cgroup.procs").write_text(str(os.getpid()))


def pytest_runtest_logstart(nodeid, location):
    if _meter is None:
        return
    _start[nodeid] = (_meter.seconds(), time.monotonic())


def pytest_runtest_logreport(report):
    if _meter is None:
        return
    if report.failed or report.when == "call":
        _outcome.setdefault(report.nodeid, report.outcome if report.failed else "passed")
    elif report.skipped:
        _outcome.setdefault(report.nodeid, "skipped")


def pytest_runtest_logfinish(nodeid, location):
    if _meter is None:
        return
    cpu0, wall0 = _start.pop(nodeid)
    line = {"id": nodeid, "outcome": _outcome.pop(nodeid, "passed"),
            "cpu": round(_meter.seconds() - cpu0, 3), "wall": round(time.monotonic() - wall0, 3)}
    with open(OUT, "a") as f:
        f.write(json.dumps(line) + "\n")


def pytest_unconfigure(config):
    if _meter is not None and _meter.group is not None:
        try:  # back to the group this process came from, so that the meter's can go
            (_meter.group.parent / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            return
        _meter.close()


def table(lines: list[dict], top: int) -> list[str]:
    """The report's rows: per work unit, CPU and wall summed, costliest first.

    >>> table([{"id": "tests/unit/test_a.py::t", "cpu": 1.0, "wall": 2.0},
    ...        {"id": "tests/grading/test_notebook05.py::x", "cpu": 9.0, "wall": 9.5}], 5)[1:]
    ['     9.0      9.5      1  chapters-04', '     1.0      2.0      1  unit tier (other tests)']
    """
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import group_of

    cpu, wall, n = collections.Counter(), collections.Counter(), collections.Counter()
    for r in lines:
        g = group_of(r["id"])
        g = "unit tier (other tests)" if "::" in g else g
        cpu[g] += r["cpu"]
        wall[g] += r["wall"]
        n[g] += 1
    rows = [f"{'CPU s':>8} {'wall s':>8} {'tests':>6}  group  (total {sum(cpu.values()):.0f} s "
            f"of CPU, {sum(n.values())} tests)"]
    rows += [f"{c:8.1f} {wall[g]:8.1f} {n[g]:6d}  {g}" for g, c in cpu.most_common(top)]
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", nargs="?", type=Path, default=OUT)
    p.add_argument("--top", type=int, default=40, help="groups shown")
    p.add_argument("--tests", type=int, default=0, help="also the N costliest tests")
    args = p.parse_args(argv)
    lines = [json.loads(x) for x in args.file.read_text().splitlines() if x.strip()]
    print("\n".join(table(lines, args.top)))
    for r in sorted(lines, key=lambda r: -r["cpu"])[:args.tests]:
        print(f"{r['cpu']:8.1f} {r['wall']:8.1f}  {r.get('outcome', '?'):7}  {r['id']}")


if __name__ == "__main__":
    main()
