"""Run one untrusted command with a wall-time limit and a memory limit.

A *runner* executes an argv in a working folder and returns a :class:`RunResult`. The grader
talks to runners only through :meth:`LocalRunner.run`, so a sandboxing runner (bubblewrap, a
separate user, namespaces) can replace :class:`LocalRunner` per student without touching the
rest of the pipeline.

:class:`LocalRunner` (no sandbox) does three things:

- memory: the command starts through ``python -m autograder.grading.sandbox.limits``, which sets
  ``RLIMIT_AS`` and then ``exec``-s the real command; the limit is inherited by every process it
  starts (the Jupyter kernel included), so an allocation past it raises ``MemoryError`` there;
- CPU: the job runs in a place of its own (``isolation.py``: a per-student cgroup with a CPU
  quota and a task cap, or cores of its own), which ``limits`` joins before the ``exec``;
- wall time: the parent waits at most ``timeout`` seconds;
- clean-up: when the command ends or runs out of time, every process it started is killed
  (SIGKILL): its process group, its descendants (Jupyter starts kernels in a session of their
  own), and any process still carrying the job's token in its environment (orphans of a killed
  parent are re-parented to init, out of the tree).

Example: ``LocalRunner(GradeConfig(memory_mb=512)).run([sys.executable, "-c", "while True:
pass"], cwd, timeout=2, log_path=log)`` returns after ~2 s with ``timed_out=True``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..config import GradeConfig
from ..env import GRADE_JOB, GRADE_PARENT
from .isolation import isolation
from .warm_client import Warm, is_grading_command

JOB_TOKEN_VAR = GRADE_JOB
_ACTIVE: dict[int, tuple[subprocess.Popen, str]] = {}  # jobs running now, for kill_all()
_LOCK = threading.Lock()
WARM = Warm()  # this process's warm grading process (autograde/warm.py), started on first use


@dataclass
class RunResult:
    returncode: int | None  # None when killed for time
    timed_out: bool
    seconds: float


def _children_map() -> dict[int, list[int]]:
    """{ppid: [pid, ...]} for every process visible in /proc."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: parse after the last ')'
        fields = stat.rsplit(")", 1)[1].split()
        kids.setdefault(int(fields[1]), []).append(int(entry))
    return kids


def _descendants(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def _with_token(token: str) -> list[int]:
    needle = f"{JOB_TOKEN_VAR}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry))
    return found


def _kill(pids) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_job(proc: subprocess.Popen, token: str, also=None) -> None:
    """SIGKILL the command's process group, its descendants, every process with its token and
    ``also()`` (the processes in the job's cgroups)."""
    for _ in range(3):  # a process may fork while we kill: sweep a few times
        victims = set(_descendants(proc.pid)) | set(_with_token(token))
        victims |= set(also() if also else ())
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _kill(victims)
        if not victims:
            break
        time.sleep(0.05)


def kill_all() -> None:
    """Kill every job still running (the grader is being interrupted)."""
    with _LOCK:
        jobs = list(_ACTIVE.values())
    for proc, token in jobs:
        kill_job(proc, token)


def kill_children() -> None:
    """Kill every process this one started that still runs: the grading jobs
    (:func:`kill_all`), then any other (nbgrader building the template, the font cache's)."""
    kill_all()
    WARM.close()
    _kill(_descendants(os.getpid()))


class LocalRunner:
    """Runs a command as this user with rlimits and a wall-time limit (no sandbox).

    The memory and CPU-time limits are the :class:`~autograder.grading.config.GradeConfig`'s;
    the wall time is given per call (what is left of the student's).
    """

    name = "local (no sandbox)"

    def __init__(self, config: GradeConfig | None = None):
        self.config = config or GradeConfig()

    def run(
        self,
        argv: list[str],
        cwd: Path,
        *,
        timeout: float,
        log_path: Path,
        env: dict[str, str] | None = None,
        lanes: int = 1,
    ) -> RunResult:
        """``lanes``: the command grades that many notebooks at once (a student's lanes,
        ``nbgrader_main``): its place has that many workers' cores, tasks and memory."""
        token = uuid.uuid4().hex
        full_env = dict(os.environ if env is None else env)
        full_env[JOB_TOKEN_VAR] = token
        full_env[GRADE_PARENT] = str(os.getpid())  # see limits.py: PDEATHSIG's race
        cpu_s = int(timeout * self.config.threads * lanes) + 30  # a backstop: see limits.py
        start = time.monotonic()
        with isolation(self.config).job(lanes) as place, open(log_path, "ab") as log:
            spec = {"memory_mb": self.config.memory_mb, "cpu_s": cpu_s, **place.spec}
            # a student's grading process: a copy of the warm one where it runs (warm.py)
            proc = WARM.spawn(argv, cwd, full_env, spec, log) if is_grading_command(argv) \
                else None
            if proc is None:
                wrapped = [sys.executable, "-m", "autograder.grading.sandbox.limits",
                           json.dumps(spec), "--", *argv]
                proc = subprocess.Popen(
                    wrapped,
                    cwd=cwd,
                    env=full_env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group, killed as a whole
                )
            with _LOCK:
                _ACTIVE[proc.pid] = (proc, token)
            try:
                rc = proc.wait(timeout=max(timeout, 0.1))
                timed_out = False
            except subprocess.TimeoutExpired:
                rc, timed_out = None, True
            finally:
                kill_job(proc, token, place.pids)  # also background processes left behind
                proc.wait()
                with _LOCK:
                    _ACTIVE.pop(proc.pid, None)
        return RunResult(rc, timed_out, time.monotonic() - start)
