"""Run a student's grading process with a wall-time limit and a memory limit.

A *runner* grades one student in their course folder and returns a :class:`RunResult`. The
grader talks to runners only through :meth:`LocalRunner.grade`, so a sandboxing runner
(:class:`BwrapRunner`: the kernels in bubblewrap; :class:`UnsandboxedRunner`) prepares the
folder (``sandbox/runners.py``) and grades as :class:`LocalRunner` does. :func:`make_runner`
chooses one from the ``GradeConfig``.

The grading process starts one way: a fork of the warm grading process (``autograde/warm.py``,
``warm_client.py``); :meth:`LocalRunner.run` starts any other command through
``python -m autograder.grading.sandbox.limits``. Either way:

- memory: ``RLIMIT_AS`` (``sandbox/limits.py``), inherited by every process it starts;
- CPU: a place of its own (``isolation.py``), joined before the ``exec``;
- wall time: the parent waits at most ``timeout`` seconds;
- clean-up: every process it started is then killed (SIGKILL): its process group, its
  descendants, and any process still carrying the job's token in its environment (orphans).

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

from ..autograde.kernel_package import arm
from ..config import GradeConfig
from ..env import GRADE_JOB, GRADE_PARENT
from ..sandbox import runners
from ..sandbox.bwrap import bwrap_path
from .isolation import isolation
from .warm_client import Warm

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
    needle = f"{GRADE_JOB}={token}".encode()
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
    """Runs a command as this user with the ``GradeConfig``'s limits and a wall-time limit
    given per call (no sandbox)."""

    name = "local (no sandbox)"

    def __init__(self, config: GradeConfig | None = None):
        self.config = config or GradeConfig()

    def grade(self, student: str, assignments: list[str], cwd: Path, *, timeout: float,
              log_path: Path, env: dict[str, str] | None = None) -> RunResult:
        """A student's grading process (``nbgrader_main`` grading ``assignments`` in turn) in
        ``cwd``, the student's course folder: always a fork of this process's warm grading
        process (``autograde/warm.py``), started on first use."""
        return self._job(lambda full_env, spec, log: WARM.spawn(
            [student, *assignments], cwd, full_env, spec, log), timeout, log_path, env)

    def run(self, argv: list[str], cwd: Path, *, timeout: float, log_path: Path,
            env: dict[str, str] | None = None) -> RunResult:
        """Any other command, started through ``python -m autograder.grading.sandbox.limits``
        (the same limits, place and clean-up as a grading process)."""
        def start(full_env, spec, log):
            wrapped = [sys.executable, "-m", "autograder.grading.sandbox.limits",
                       json.dumps(spec), "--", *argv]
            return subprocess.Popen(
                wrapped,
                cwd=cwd,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, killed as a whole
            )

        return self._job(start, timeout, log_path, env)

    def _job(self, start, timeout: float, log_path: Path, env) -> RunResult:
        """``start(env, spec, log)`` in a place of its own (``isolation.py``); waited for at
        most ``timeout`` s, then everything it started is killed."""
        token = uuid.uuid4().hex
        full_env = dict(os.environ if env is None else env)
        full_env[GRADE_JOB] = token
        full_env[GRADE_PARENT] = str(os.getpid())  # see limits.py: PDEATHSIG's race
        cpu_s = int(timeout * self.config.threads) + 30  # a backstop: see limits.py
        begin = time.monotonic()
        with isolation(self.config).job() as place, open(log_path, "ab") as log:
            spec = {"memory_mb": self.config.memory_mb, "cpu_s": cpu_s, **place.spec}
            proc = start(full_env, spec, log)
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
        return RunResult(rc, timed_out, time.monotonic() - begin)


class UnsandboxedRunner(LocalRunner):
    """No sandbox (``--unsandboxed``): the runner's limits plus the source policy hooks."""

    def grade(self, student, assignments, cwd, *, timeout, log_path, env=None):
        cwd = Path(cwd)
        env = runners.unsandboxed(cwd, dict(os.environ if env is None else env))
        arm(cwd)
        return super().grade(student, assignments, cwd, timeout=timeout, log_path=log_path,
                             env=env)


class BwrapRunner(LocalRunner):
    """nbgrader as :class:`LocalRunner` runs it; its kernels inside bubblewrap (see
    ``sandbox/__init__.py``)."""

    name = "bubblewrap sandbox"

    def __init__(self, config: GradeConfig, bwrap: str):
        super().__init__(config)
        self.bwrap = bwrap

    def grade(self, student, assignments, cwd, *, timeout, log_path, env=None):
        import shutil
        import tempfile

        cwd = Path(cwd)
        home = Path(tempfile.mkdtemp(prefix="cg-"))  # short: ipc sockets' paths < 108 bytes
        try:
            env = runners.sandboxed(cwd, dict(os.environ if env is None else env), self.config,
                                    self.bwrap, home)
            arm(cwd)  # sandbox.json: the base spec with the probe's mounts
            return super().grade(student, assignments, cwd, timeout=timeout,
                                 log_path=log_path, env=env)
        finally:
            shutil.rmtree(home, ignore_errors=True)


def make_runner(config: GradeConfig) -> LocalRunner:
    """The runner for one student's grading under ``config``: :class:`BwrapRunner`, or
    :class:`UnsandboxedRunner` when ``config.sandboxed`` is false. Raises ``RuntimeError``
    where bwrap is missing or cannot build a sandbox here."""
    if not config.sandboxed:
        return UnsandboxedRunner(config)
    bwrap = bwrap_path()
    if bwrap is None:
        raise RuntimeError("bubblewrap (bwrap) is missing or cannot create a sandbox here")
    return BwrapRunner(config, bwrap)
