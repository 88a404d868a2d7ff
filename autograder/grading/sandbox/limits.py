"""``python -m autograder.grading.sandbox.limits SPEC -- CMD ...``: set limits, then exec CMD.

SPEC is a JSON object (plain data, written by :class:`~autograder.grading.parent.runner.LocalRunner`
from the grading run's ``GradeConfig`` and the job's place from ``isolation.py``):
``{"memory_mb": 4096, "cpu_s": 930, "cgroup_procs": [...], "cpus": [...]}``.

- ``RLIMIT_AS`` (``memory_mb``), inherited by the kernel: an allocation past it fails there
  with ``MemoryError`` instead of pushing the machine into swap;
- ``RLIMIT_CPU`` (``cpu_s`` per process): a backstop for a busy loop a killed grader left;
- ``cgroup_procs``: join the student's cgroups (``isolation.py``) before anything starts;
  ``cpus``: else pin to the job's cores;
- ``PR_SET_PDEATHSIG`` (SIGKILL when the grader dies), and an exit at once when the grader
  (``COURSE_GRADE_PARENT``) is no longer the parent (killed before the ``prctl``). Both come
  before the cgroup write, which under load has kept a process in the kernel for 45 s after
  ``course-grade`` was killed: with the signal pending, that wait ends at once.

Setting them here, in the command's own process just before ``exec``, keeps ``preexec_fn``
(unsafe with threads) out of the grader's parent process.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

from ..env import GRADE_PARENT

PR_SET_PDEATHSIG = 1
PARENT_VAR = GRADE_PARENT


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: python -m autograder.grading.sandbox.limits SPEC_JSON -- CMD [ARGS...]")
    spec, cmd = json.loads(argv[0]), argv[2:]
    _die_with_the_grader(os.environ.pop(PARENT_VAR, ""))  # first: see above
    problem = apply(spec)
    if problem:
        sys.exit(problem)
    os.execvp(cmd[0], cmd)


def apply(spec: dict) -> str | None:
    """Join the job's cgroups, pin its cores, set its limits (in this process, inherited by
    what it starts); the reason when a cgroup cannot be joined (nothing may then run). Also
    used by ``warm.py``'s copies of the grading process, after their fork."""
    for procs in spec.get("cgroup_procs", []):
        try:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:  # never run a student outside the group they were given
            return f"course-grade: cannot join the cgroup {procs}: {e}"
    if spec.get("cpus"):
        os.sched_setaffinity(0, spec["cpus"])
    limit = int(spec["memory_mb"]) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cpu = int(spec["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dumps from crashing kernels
    return None


def _die_with_the_grader(parent: str) -> None:
    """SIGKILL when the parent (thread) dies; at once if ``parent`` (its pid) already did."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the wall-time limit still applies
        pass
    if parent and os.getppid() != int(parent):  # the grader died before the prctl
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1:])
