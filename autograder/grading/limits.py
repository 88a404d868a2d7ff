"""``python -m autograder.grading.limits MB CPU_S -- CMD ...``: set limits, then exec CMD.

- ``RLIMIT_AS`` (address space, ``MB`` mebibytes) is inherited across ``fork``/``exec``, so it
  also bounds the Jupyter kernel that runs the student's code; an allocation past it fails there
  with ``MemoryError`` (or torch's "can't allocate memory") instead of pushing the machine into
  swap.
- ``RLIMIT_CPU`` (``CPU_S`` seconds per process) is a backstop: if the grader itself is killed,
  a busy loop left behind still ends.
- ``PR_SET_PDEATHSIG``: this process gets SIGKILL when the grader thread that started it dies.
  A grader killed between the ``fork`` and the ``prctl`` would leave it running (re-parented,
  no signal coming: seen under ``kill -9`` of ``course-grade``), so when the grader's pid is
  given in ``COURSE_GRADE_PARENT`` and is no longer the parent, this process ends at once.

Setting them here, in the command's own process just before ``exec``, keeps ``preexec_fn``
(unsafe with threads) out of the grader's parent process.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

PR_SET_PDEATHSIG = 1
PARENT_VAR = "COURSE_GRADE_PARENT"


def main(argv: list[str]) -> None:
    mb, cpu, sep, *cmd = argv
    if sep != "--" or not cmd:
        sys.exit("usage: python -m autograder.grading.limits MB CPU_S -- CMD [ARGS...]")
    limit = int(mb) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu) + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dumps from crashing kernels
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the wall-time limit still applies
        pass
    parent = os.environ.pop(PARENT_VAR, "")
    if parent and os.getppid() != int(parent):  # the grader died before the prctl
        os.kill(os.getpid(), signal.SIGKILL)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
