"""The runner's side of the warm grading process (``autograde/warm.py``, which says what it
is and why): start it on first use, ask it for a copy per student, wait for the copy.

:class:`~autograder.grading.parent.runner.LocalRunner` asks :data:`WARM` (one per process:
``course-grade``, or a Dask worker) for every student's grading process; where the warm process
cannot start or answer, it says so once on standard error and starts each process the plain way.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..env import GRADE_JOB, GRADE_PARENT
from ..env import WARM as WARM_VAR

SERVER = "autograder.grading.autograde.warm"
MAIN = "autograder.grading.autograde.nbgrader_main"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
READY_S = 120.0  # the warm process's imports, on a loaded machine


class WarmJob:
    """A forked grading process as :class:`~autograder.grading.parent.runner.LocalRunner`
    uses a ``Popen``: ``pid`` (its process group too), ``wait(timeout)``."""

    def __init__(self, sock: socket.socket, pid: int, buf: bytes = b""):
        self.sock, self.pid, self.returncode = sock, pid, None
        self._buf = buf  # what came after the ``pid`` line: the ``exit`` line, when it did

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("warm grading process", timeout)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(64)
            except TimeoutError:
                raise subprocess.TimeoutExpired("warm grading process", timeout) from None
            except OSError:
                chunk = b""
            if not chunk:  # the warm process is gone: it killed the copy as it went
                self._buf += b"exit -9\n"
                break
            self._buf += chunk
        line = self._buf.split(b"\n", 1)[0].decode()
        self.returncode = int(line.split()[1]) if line.startswith("exit ") else -9
        self.sock.close()
        return self.returncode


class Warm:
    """The warm process of this ``course-grade`` (or Dask worker) process, started on first
    use; ``None`` from :meth:`spawn` means "start the process the plain way"."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._path: str | None = None
        self._failed = False

    def spawn(self, argv: list[str], cwd: Path, env: dict, spec: dict, log) -> WarmJob | None:
        if not self._ready(argv, env):
            return None
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(30)
            sock.connect(self._path)
            body = json.dumps({"argv": argv, "cwd": str(cwd), "env": env, "spec": spec}).encode()
            socket.send_fds(sock, [struct.pack("!I", len(body)) + body], [log.fileno()])
            answer = b""
            while b"\n" not in answer:
                chunk = sock.recv(256)
                if not chunk:
                    break
                answer += chunk
            # a copy that ends at once (a cgroup it cannot join) has its ``exit`` line sent
            # right after the ``pid`` line: one read may hold both, and the rest is the job's
            line, _, rest = answer.partition(b"\n")
            words = line.decode(errors="replace").split()
            if words[:1] != ["pid"]:
                raise OSError(line.decode(errors="replace").strip() or "no answer")
            return WarmJob(sock, int(words[1]), rest)
        except OSError as e:
            self._give_up(f"could not fork a grading process from it ({e})")
            return None

    def _ready(self, argv: list[str], env: dict) -> bool:
        with self._lock:
            if self._failed or os.environ.get(WARM_VAR) == "0":
                return False
            if self._proc is not None and self._proc.poll() is None:
                return True
            if self._proc is not None:
                self._give_up_locked(f"it ended (exit {self._proc.returncode})")
                return False
            try:
                self._start(argv, env)
                return True
            except (OSError, RuntimeError) as e:
                self._give_up_locked(str(e))
                return False

    def _start(self, argv: list[str], env: dict) -> None:
        folder = tempfile.mkdtemp(prefix="course-grade-warm-")  # mode 0700
        self._path = os.path.join(folder, "socket")
        start_env = {k: v for k, v in env.items() if k not in (GRADE_JOB, GRADE_PARENT)}
        start_env.update(dict.fromkeys(THREAD_VARS, "1"))  # see the module's docstring
        self._proc = subprocess.Popen(
            [sys.executable, "-m", SERVER, self._path,
             str(os.getpid()), *chapters_of(argv)],
            env=start_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            start_new_session=True,
            # an empty folder: its imports resolve as the started process's did (the installed
            # package), not from course-grade's own folder (warm.py puts the job's back)
            cwd=folder)
        atexit.register(self.close)
        line = _read_line(self._proc.stdout, READY_S)
        if line != "ready":
            self._proc.kill()
            raise RuntimeError(f"it did not start ({line or 'no answer'})")

    def _give_up(self, why: str) -> None:
        with self._lock:
            self._give_up_locked(why)

    def _give_up_locked(self, why: str) -> None:
        if not self._failed:
            print(f"course-grade: no warm grading process ({why}); each student's grading "
                  "process starts on its own", file=sys.stderr)
        self._failed = True
        self.close()

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def chapters_of(argv: list[str]) -> list[str]:
    """The assignments named in an ``autograde+feedback`` command (their checks are loaded).

    >>> chapters_of(["python", "-m", "x", "autograde+feedback", "ada", "01_a", "--lane", "02_b"])
    ['01_a', '02_b']
    """
    return [a for a in argv[argv.index("autograde+feedback") + 2:] if not a.startswith("--")]


def is_grading_command(argv: list[str]) -> bool:
    """``argv`` starts a student's grading process (``parent/course.py``'s ``NBGRADER``).

    >>> is_grading_command([sys.executable, "-m", MAIN, "autograde+feedback", "ada", "01_a"])
    True
    """
    return argv[:1] == [sys.executable] and argv[1:4] == ["-m", MAIN, "autograde+feedback"]


def _read_line(stream, timeout: float) -> str:
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not sel.select(left):
            break
        chunk = os.read(stream.fileno(), 256)
        if not chunk:
            break
        data += chunk
    sel.close()
    return data.decode(errors="replace").strip()
