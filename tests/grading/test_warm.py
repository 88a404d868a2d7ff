"""The warm grading process (autograder/grading/autograde/warm.py): each student's grading
process is a fork of it, which must behave as the started process did: the job's log, exit
status, session, environment and limits; killed with its job, and with the runner's
connection; gone when course-grade is. Every class test grades through it as well."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder.grading.env import GRADE_JOB
from autograder.grading.parent import warm_client as warm
from autograder.grading.parent.runner import kill_job

REPO = Path(__file__).resolve().parents[2]


def _spec(**extra) -> dict:
    return {"memory_mb": 3072, "cpu_s": 600, **extra}


@pytest.fixture(scope="module")
def server():
    w = warm.Warm()
    yield w
    w.close()


def _env(token: str) -> dict:
    return {**os.environ, GRADE_JOB: token, "COURSE_TEST_MARK": token}


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_copy_writes_its_log_and_exits_with_its_status(server, tmp_path):
    """A student folder with no course in it: the copy's nbgrader_main fails there, writes its
    traceback to the job's log, in the job's folder, and its exit status comes back."""
    log_path = tmp_path / "grading.log"
    with open(log_path, "ab") as log:
        job = server.spawn(["ada", "01_attention"], tmp_path, _env("t1"), _spec(), log)
    assert job is not None, "the warm process did not start"
    assert os.getpgid(job.pid) == job.pid and os.getsid(job.pid) == job.pid  # its own session
    assert job.wait(timeout=120) != 0
    text = log_path.read_text()
    assert "Traceback" in text and str(tmp_path) in text, text[-2000:]


def test_a_copy_has_the_jobs_limits_and_environment(server, tmp_path):
    """The copy shows the spec's limits and runs in the job's folder; stopped there, the
    runner's wait times out, and its kill sweep ends it."""
    log_path = tmp_path / "grading.log"
    with open(log_path, "ab") as log:
        job = server.spawn(["ada", "01_attention"], tmp_path, _env("t2"),
                           _spec(memory_mb=2500, cpu_s=321), log)
    def settled() -> bool:  # the copy sets its limits right after its session, then its folder
        return f"{2500 * 2**20}" in Path(f"/proc/{job.pid}/limits").read_text() and \
            Path(f"/proc/{job.pid}/cwd").resolve() == tmp_path.resolve()

    deadline = time.monotonic() + 20
    while not settled() and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(job.pid, signal.SIGSTOP)
    try:
        limits = Path(f"/proc/{job.pid}/limits").read_text()
        assert f"{2500 * 2**20}" in limits  # Max address space
        assert any(line.startswith("Max cpu time") and " 321 " in line
                   for line in limits.splitlines()), limits
        assert Path(f"/proc/{job.pid}/cwd").resolve() == tmp_path.resolve()
        with pytest.raises(subprocess.TimeoutExpired):
            job.wait(timeout=0.5)
    finally:
        kill_job(job, "t2")
    assert job.wait(timeout=30) == -signal.SIGKILL
    assert not _alive(job.pid)


def test_the_copy_dies_with_the_runners_connection(server, tmp_path):
    with open(tmp_path / "grading.log", "ab") as log:
        job = server.spawn(["ada", "01_attention"], tmp_path, _env("t3"), _spec(), log)
    os.kill(job.pid, signal.SIGSTOP)
    job.sock.close()  # the runner is gone
    deadline = time.monotonic() + 20
    while _alive(job.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(job.pid)


def test_a_cgroup_that_cannot_be_joined_runs_nothing(server, tmp_path):
    log_path = tmp_path / "grading.log"
    with open(log_path, "ab") as log:
        job = server.spawn(["ada", "01_attention"], tmp_path, _env("t4"),
                           _spec(cgroup_procs=[str(tmp_path / "nope" / "cgroup.procs")]), log)
    assert job.wait(timeout=60) == 1
    assert "cannot join the cgroup" in log_path.read_text()


class _Running:
    """A stand-in for the warm process's ``Popen``: still running (``close`` kills nothing)."""

    def poll(self):
        return None

    def kill(self):
        pass

    def wait(self):
        return None


def test_an_exit_line_read_with_the_pid_line_is_the_jobs_status(tmp_path):
    """A copy that ends at once (above) may have ended before the runner reads the ``pid``
    line: the warm process has then sent ``exit`` too, and one read gets both. That status is
    the job's; dropped, the connection's close read as the warm process gone (-9). A stand-in
    server sends both lines in one write, as a loaded machine had the real one's arrive."""
    path = str(tmp_path / "socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def answer():
        conn, _ = listener.accept()
        with conn:
            head, fds, _, _ = socket.recv_fds(conn, 4, 1)
            size, body = struct.unpack("!I", head)[0], b""
            while len(body) < size:
                body += conn.recv(size - len(body))
            for fd in fds:
                os.close(fd)
            conn.sendall(b"pid 4242\nexit 1\n")

    server = threading.Thread(target=answer)
    server.start()
    w = warm.Warm()
    w._path, w._proc = path, _Running()
    try:
        with open(tmp_path / "grading.log", "ab") as log:
            job = w.spawn(["ada", "01_attention"], tmp_path, _env("t6"), _spec(), log)
    finally:
        server.join(timeout=30)
        listener.close()
    assert job is not None and job.pid == 4242
    assert job.wait(timeout=10) == 1


def test_the_warm_process_ends_with_course_grade(tmp_path):
    """Its parent killed (SIGKILL: no clean-up of its own), the warm process kills the copies
    still running and ends."""
    code = (
        "import os, sys, time\n"
        "from autograder.grading.parent import warm_client as warm\n"
        "w = warm.Warm()\n"
        f"job = w.spawn(['ada', '01_attention'], {str(tmp_path)!r}, dict(os.environ),"
        " {'memory_mb': 3072, 'cpu_s': 600}, open(os.devnull, 'ab'))\n"
        "os.kill(job.pid, 19)\n"  # SIGSTOP: it would end by itself otherwise
        "print(w._proc.pid, job.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE,
                              text=True)
    try:
        server_pid, copy_pid = map(int, parent.stdout.readline().split())
        assert _alive(server_pid) and _alive(copy_pid)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 20
    while (_alive(server_pid) or _alive(copy_pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(server_pid) and not _alive(copy_pid)


def test_a_warm_process_that_cannot_start_is_the_graders_error(tmp_path, monkeypatch):
    """No second way to start a grading process: the student's grading fails (a grader error,
    graded again by the next run) instead."""
    monkeypatch.setattr(warm, "SERVER", "autograder.grading.env")  # runs, says nothing, ends
    w = warm.Warm()
    with open(tmp_path / "log", "ab") as log, pytest.raises(OSError, match="did not start"):
        w.spawn(["ada", "x"], tmp_path, _env("t5"), _spec(), log)
