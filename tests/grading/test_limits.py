"""``python -m autograder.grading.sandbox.limits``: the wrapper every grading job starts in.

Its grader may be killed (``kill -9`` of ``course-grade``) while the wrapper is still in a
slow kernel call, before it has joined the student's cgroups; it must not outlive the grader
there (CI saw one still joining its cgroup 45 s after the kill).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# a stand-in for the grader: starts the wrapper as the runner does, says its pid, waits
GRADER = """
import os, subprocess, sys, time
env = dict(os.environ, COURSE_GRADE_PARENT=str(os.getpid()))
p = subprocess.Popen([sys.executable, "-m", "autograder.grading.sandbox.limits", sys.argv[1], "--",
                      "sleep", "300"], env=env, start_new_session=True)
print(p.pid, flush=True)
time.sleep(300)
"""


def _state(pid: int) -> str | None:
    """The process's state letter, None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _fds(pid: int) -> set[str]:
    """What ``pid``'s open fds name. An fd listed, then closed before its link is read, is
    skipped: the wrapper opens and closes files while Python starts (its imports); on a loaded
    machine the read often came after the close, and ``_blocked_on`` gave up on the wrapper
    while it was still starting (state R)."""
    names = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            names.add(os.readlink(fd))
        except FileNotFoundError:
            pass
    return names


def _blocked_on(pid: int, path: Path, seconds: float) -> bool:
    """Whether ``pid`` sleeps in ``open(path)``: the FIFO's wait for a reader (the kernel's
    ``wait_for_partner``; a kernel that hides wait channels says 0), not yet among its fds.
    False at once when ``pid`` is gone."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            wchan = Path(f"/proc/{pid}/wchan").read_text()
            fds = _fds(pid)
        except OSError:  # its /proc folder is gone
            return False
        if _state(pid) == "S" and wchan in ("wait_for_partner", "0") and str(path) not in fds:
            return True
        time.sleep(0.05)
    return False


def test_a_wrapper_stuck_joining_its_cgroup_dies_with_the_grader(tmp_path):
    # a FIFO with no reader: opening it to write blocks in the kernel, as a slow cgroup
    # join does, before anything else of the job has started
    fifo = tmp_path / "cgroup.procs"
    os.mkfifo(fifo)
    spec = json.dumps({"memory_mb": 1024, "cpu_s": 60, "cgroup_procs": [str(fifo)],
                       "cpus": []})
    grader = subprocess.Popen([sys.executable, "-c", GRADER, spec], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    wrapper = int(grader.stdout.readline())
    try:
        assert _blocked_on(wrapper, fifo, 20), (_state(wrapper), "not blocked in the open")
        grader.send_signal(signal.SIGKILL)
        grader.wait()
        deadline = time.monotonic() + 10
        while _state(wrapper) not in (None, "Z") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(wrapper) in (None, "Z"), f"still there: state {_state(wrapper)}"
    finally:
        if _state(wrapper) not in (None, "Z"):
            os.kill(wrapper, signal.SIGKILL)
        grader.kill()
        grader.wait()
