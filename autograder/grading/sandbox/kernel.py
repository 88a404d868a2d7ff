"""The kernel's launcher (outside the sandbox) and the uid drop (inside it).

Jupyter starts the ``course-sandbox`` kernelspec's command,
``python -m autograder.grading.sandbox kernel SPEC CONNECTION_FILE``: :func:`kernel_main`
copies the connection file into the folder the sandbox shares, sets the sandbox user's limits
(from the ``GradeConfig`` in SPEC) and ``exec``-s ``bwrap``. As root, bwrap then runs
``python -m autograder.grading.sandbox drop UID -- KERNEL ...`` (:func:`drop_main`) inside,
which becomes the sandbox's own user before the kernel starts.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from ..config import GradeConfig
from ..env import KERNEL_PARENT
from .bwrap import bwrap_argv
from .zygote import ZYGOTE_VAR, run_kernel, serve

USAGE = "usage: python -m autograder.grading.sandbox kernel SPEC CONNECTION_FILE"


PARENT_VAR = KERNEL_PARENT  # the grading process that starts this launcher


def _die_with_the_grader() -> None:
    """SIGKILL when the grading process's thread that started this launcher dies, from now on
    and through the ``exec`` of bwrap (whose own ``--die-with-parent`` only starts once bwrap
    runs); and at once if it died before that (re-parented: no signal coming). Without it, a
    grader killed during the launcher's start-up left a sandboxed kernel running forever."""
    import ctypes
    import signal

    from .limits import PR_SET_PDEATHSIG

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux
        return
    parent = os.environ.pop(PARENT_VAR, "")
    if parent and os.getppid() != int(parent):
        os.kill(os.getpid(), signal.SIGKILL)


def kernel_main(spec_path: str, connection_file: str) -> None:
    import resource

    _die_with_the_grader()
    spec = json.loads(Path(spec_path).read_text())
    config = GradeConfig.from_dict(spec["config"])
    ipc = Path(spec.get("ipc") or Path(spec["home"]) / "ipc")
    conn = ipc / "kernel.json"
    shutil.copyfile(connection_file, conn)
    if os.geteuid() == 0:
        os.chown(conn, spec["uid"], spec["uid"])
        resource.setrlimit(resource.RLIMIT_NPROC, (config.nproc, config.nproc))
    os.chmod(conn, 0o600)
    fsize = config.fsize_mb * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    _own_output(Path(spec["home"]) / "kernel-output.log")
    ctl = os.environ.pop(ZYGOTE_VAR, "")
    if ctl:  # the grading process has a zygote: its forks are the one way its kernels start
        spec["ipc"] = str(ipc)
        code = run_kernel(ctl, spec, str(conn))
        if code is None:
            print("course-grade: the kernel zygote did not start this kernel",
                  file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(1 if code is None else code)
    argv = bwrap_argv(spec, str(conn))  # no zygote (not root): a bwrap of its own
    os.execv(argv[0], argv)


def _own_output(path: Path) -> None:
    """The kernel's stdout and stderr go to a file of its own (capped by the ``RLIMIT_FSIZE``
    set just before, which the kernel inherits), never to the grading process's log: nothing
    the kernel writes there can be mistaken for the grader's words."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def drop_main(uid: int, cmd: list[str]) -> None:
    import ctypes

    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)  # all uids non-zero: no capabilities left
    ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    os.execv(cmd[0], cmd)


def main(argv: list[str]) -> None:
    if argv[:1] == ["kernel"] and len(argv) == 3:
        kernel_main(argv[1], argv[2])
    elif argv[:1] == ["drop"] and argv[2:3] == ["--"]:
        drop_main(int(argv[1]), argv[3:])
    elif argv[:1] == ["zygote"] and len(argv) == 2:
        serve(argv[1])
    else:
        sys.exit(USAGE)
