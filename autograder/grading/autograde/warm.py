"""One grading process loaded ahead, which forks every student's grading process.

Importing nbgrader, nbconvert, jupyter_client, torch and the checks is about 5 s of the 7 s of
CPU a one-notebook student's grading takes. The *warm* process imports them once per
``course-grade`` run (per Dask worker process), renders one feedback page
(``feedback_html.warm_up``) and ``gc.freeze``-s; each student's grading process is a ``fork``
of it, which then takes a session of its own, ``PR_SET_PDEATHSIG``, the job's cgroups, cores
and limits (:func:`~autograder.grading.sandbox.limits.apply`), the student's grading log as
stdout and stderr, the job's folder and environment (its token included) and torch's thread
count, and runs ``nbgrader_main.student_main``.

Trust: like ``nbgrader_main``, the warm process runs no student code; students' code runs in
the sandboxed kernels the copy starts.

Protocol (one connection per job, on a Unix socket in a folder only the grader can reach):
the runner sends a length-prefixed JSON request ``{"args": [STUDENT, ASSIGNMENT, ...], "cwd":
..., "env": {...}, "spec": {...}}`` with the log's file descriptor; the warm process forks and
answers ``pid N`` (or ``error TEXT``), then ``exit STATUS`` (``os.waitstatus_to_exitcode``:
negative for a signal) when the copy has ended. The runner's connection closing first (the
runner was killed) kills the copy's process group. The warm process ends when ``course-grade``
does (it watches its parent) and kills the copies still running then.

The runner's side (starting it, asking it, waiting): ``parent/warm_client.py``. This is the
one way a student's grading process starts (``parent/runner.py``, ``LocalRunner.grade``).
"""

from __future__ import annotations

import gc
import os
import selectors
import signal
import socket
import sys
import threading

from ..sandbox.zygote import read_request, reap

# What a student's grading process imports (measured: its sys.modules at the end), by the
# packages that cost: nbgrader and its gradebook (sqlalchemy), nbconvert, jupyter_client,
# torch and the grading code. The chapters' check modules are added per run (:func:`start`).
PRELOAD = (
    "nbformat",
    "nbgrader.api",
    "nbgrader.apps",
    "nbgrader.apps.baseapp",
    "nbgrader.converters",
    "nbgrader.preprocessors",
    "nbconvert.exporters",
    "nbclient",
    "jupyter_client",
    "jupyter_client.manager",
    "torch",
    "autograder.checks._judge",
    "autograder.grading.autograde.nbgrader_main",
    "autograder.grading.autograde.verdict",
    "autograder.grading.autograde.preprocessors",
    "autograder.grading.autograde.feedback_html",
    "autograder.grading.autograde.kernel_package",
    "autograder.grading.sandbox.runners",
    "autograder.grading.sandbox.zygote",
)


# ------------------------------------------------------------------ the warm process
_START_DIR = os.getcwd()  # the warm process's folder: sys.path[0] under ``python -m``


def serve(path: str, parent: int, assignments: list[str]) -> None:
    import importlib

    from ..nbgrader_patches import share_compiled_templates, use_cached_head

    use_cached_head()
    for name in PRELOAD:
        importlib.import_module(name)
    share_compiled_templates()
    from autograder.checks import table

    for a in assignments:
        try:
            importlib.import_module(f"autograder.checks.{table.chapter(a).module}")
        except Exception:  # not a chapter of the table (a test's assignment): not loaded
            pass
    from autograder.checks._core import build_cases

    build_cases()  # the expected values, built on first use: once here, shared by every fork
    from .feedback_html import warm_up

    warm_up()  # one page rendered: what every copy's first feedback page would build first
    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
        print("threads running after the imports: cannot fork safely", flush=True)
        sys.exit(1)
    # what the copies inherit is out of the cyclic garbage collector's sight: a collection in a
    # copy walks only its own objects, not these (nor writes to their pages: copy-on-write)
    gc.collect()
    gc.freeze()

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "child")
    jobs: dict[int, socket.socket] = {}  # copy's pid -> its runner's connection
    print("ready", flush=True)
    while os.getppid() == parent:
        for key, _ in sel.select(1.0):
            if key.data == "accept":
                conn, _ = listener.accept()
                pid = _fork_job(conn, listener, wake_r, wake_w, jobs)
                if pid:
                    jobs[pid] = conn
                    sel.register(conn, selectors.EVENT_READ, pid)
                else:
                    conn.close()
            elif key.data == "child":
                os.read(wake_r, 4096)
                reap(jobs, sel, shell=False)
            else:  # the runner's connection: closed (or it wrote, which it never does)
                pid = key.data
                sel.unregister(key.fileobj)
                if pid in jobs:
                    _kill_group(pid)
        reap(jobs, sel, shell=False)
    for pid in list(jobs):  # course-grade is gone: so are its students' grading processes
        _kill_group(pid)


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _fork_job(conn, listener, wake_r, wake_w, jobs) -> int:
    try:
        conn.settimeout(30)
        request, fds = read_request(conn, 1, cap=None)  # the runner's: its log
    except (OSError, ValueError) as e:
        try:
            conn.sendall(f"error {e}\n".encode())
        except OSError:
            pass
        return 0
    me = os.getpid()
    started_r, started_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: never returns
        try:
            os.setsid()  # first: the runner kills the job's process group once it has the pid
            os.write(started_w, b".")
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (wake_r, wake_w, started_r, started_w, listener.fileno(), conn.fileno(),
                       *(c.fileno() for c in jobs.values())):
                try:
                    os.close(fd)
                except OSError:
                    pass
            _become_job(request, fds[0], me)
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(1)
    os.close(fds[0])
    os.close(started_w)
    os.read(started_r, 1)  # its session exists (or it died: then the read ends at once)
    os.close(started_r)
    conn.settimeout(None)
    try:
        conn.sendall(f"pid {pid}\n".encode())
    except OSError:
        _kill_group(pid)
    return pid


def _become_job(request: dict, log_fd: int, warm_pid: int) -> None:
    from ..sandbox import limits

    limits._die_with_the_grader(str(warm_pid))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(null)
    os.close(log_fd)
    problem = limits.apply(request["spec"])
    if problem:
        print(problem, file=sys.stderr, flush=True)
        os._exit(1)
    os.chdir(request["cwd"])
    if sys.path and sys.path[0] == _START_DIR:  # ``python -m`` had put the job's folder there
        sys.path[0] = request["cwd"]
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.pop(limits.PARENT_VAR, None)  # as limits.main leaves it
    import torch

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1") or 1)))
    from . import nbgrader_main

    sys.argv = [nbgrader_main.__file__, *request["args"]]
    nbgrader_main.student_main(request["args"])


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
