"""A killed ``course-grade`` leaves its students' cgroups behind (SIGKILL runs no clean-up).
A later run that gets the same pid names its groups the same way, and making them failed
(``FileExistsError``): every row 'not graded: grader error'. Seen when a machine's earlier
runs had been killed (the suite's own kill tests leave such groups)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

from autograder.grading.config import GradeConfig
from autograder.grading.parent import isolation as iso_mod
from autograder.grading.parent.isolation import CgroupV1, CgroupV2, isolation


def test_a_group_left_by_a_killed_run_with_this_pid_is_replaced(monkeypatch):
    config = GradeConfig(workers=1, cpus=1, isolation="auto", pids=123)
    iso = isolation(config)
    if not isinstance(iso, CgroupV1 | CgroupV2):
        pytest.skip(f"no writable cgroup here ({iso.kind})")
    # the next job's name, made first as a killed run would have left it: with a process in it
    n = next(iso_mod._COUNTER)
    monkeypatch.setattr(iso_mod, "_COUNTER", itertools.count(n))  # the job below gets n
    name = f"course-grade-{os.getpid()}-{n}"
    stale = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    left = []
    try:
        for parent in iso.parents.values():
            (parent / name).mkdir()
            (parent / name / "cgroup.procs").write_text(str(stale.pid))
            left.append(parent / name)
        with iso.job() as place:
            assert [g.name for g in place.cgroups] == [name] * len(left)
            # a fresh group: the leftover's process is gone and our limit is written
            for g in place.cgroups:
                assert (g / "cgroup.procs").read_text().split() == []
            assert stale.wait(timeout=30) == -9
        assert not any(g.exists() for g in left)
    finally:
        stale.kill()
        stale.wait()
        for g in left:
            if g.exists():
                iso_mod._remove(g)
