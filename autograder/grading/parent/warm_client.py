"""The runner's side of the warm grading process (``autograde/warm.py``, which says what it
is and why): start it on first use, ask it for a copy per student, wait for the copy.

:class:`~autograder.grading.parent.runner.LocalRunner` asks :data:`WARM` (one per process:
``course-grade``, or a Dask worker) for every student's grading process: the one way a grading
process starts. A warm process that ended (killed, say) is started again for the next
student; one that cannot start or answer is the grader's error for that student (raised).
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

SERVER = "autograder.grading.autograde.warm"
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
    use."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._path: str | None = None

    def spawn(self, args: list[str], cwd: Path, env: dict, spec: dict, log) -> WarmJob:
        """A copy grading ``args`` (``STUDENT ASSIGNMENT...``: ``nbgrader_main.student_main``)
        in ``cwd`` with ``env`` and the limits and place of ``spec``, its output on ``log``.
        Raises ``OSError`` where the warm process cannot start or fork it."""
        self._ready(args[1:], env)
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(30)
            sock.connect(self._path)
            body = json.dumps({"args": args, "cwd": str(cwd), "env": env, "spec": spec}).encode()
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
            raise OSError(f"the warm grading process did not fork a copy ({e})") from e

    def _ready(self, assignments: list[str], env: dict) -> None:
        """The warm process running: started now when there is none (or it ended)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            if self._proc is not None:
                print(f"course-grade: the warm grading process ended (exit "
                      f"{self._proc.returncode}); starting another", file=sys.stderr)
            self._start(assignments, env)

    def _start(self, assignments: list[str], env: dict) -> None:
        folder = tempfile.mkdtemp(prefix="course-grade-warm-")  # mode 0700
        self._path = os.path.join(folder, "socket")
        start_env = {k: v for k, v in env.items() if k not in (GRADE_JOB, GRADE_PARENT)}
        start_env.update(dict.fromkeys(THREAD_VARS, "1"))  # see the module's docstring
        self._proc = subprocess.Popen(
            [sys.executable, "-m", SERVER, self._path, str(os.getpid()), *assignments],
            env=start_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            start_new_session=True,
            # an empty folder: its imports resolve as the started process's did (the installed
            # package), not from course-grade's own folder (warm.py puts the job's back)
            cwd=folder)
        atexit.register(self.close)
        line = _read_line(self._proc.stdout, READY_S)
        if line != "ready":
            self._proc.kill()
            self._proc.wait()
            raise OSError(f"the warm grading process did not start ({line or 'no answer'})")

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


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
