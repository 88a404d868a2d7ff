"""A kernel started as grading starts it (``python -m autograder.grading.sandbox.outcap CHARS
-f CONNECTION_FILE``; outside the sandbox, which plays no part in it), and one cell's messages
as its client sees them: for the tests of the kernel's launcher
(``autograder/grading/sandbox/outcap.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jupyter_client import BlockingKernelClient
from jupyter_client.connect import write_connection_file

from . import REPO


@contextmanager
def outcap_kernel(folder: Path, cap: int) -> Iterator[BlockingKernelClient]:
    """A ready client of a kernel whose cells' output is capped at ``cap`` characters (its
    connection file in ``folder``); the kernel is killed on exit.

    ipykernel does not watch the descriptors under pytest (PYTEST_CURRENT_TEST); the sandbox
    gives the graded kernel an environment of its own, without it. The kernel is not in a
    session of its own, as jupyter_client would start it: Linux shares the CPU between
    sessions first (autogroup), and CPU hogs in the test's session would hardly slow a kernel
    in another one."""
    conn, _ = write_connection_file(str(folder / "kernel.json"))
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    kernel = subprocess.Popen(
        [sys.executable, "-m", "autograder.grading.sandbox.outcap", str(cap), "-f", conn],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    client = BlockingKernelClient(connection_file=conn)
    client.load_connection_file()
    client.start_channels(hb=False)  # no heartbeat: its first beats come late under load
    try:
        client.wait_for_ready(timeout=120)
        yield client
    finally:
        client.stop_channels()
        kernel.kill()
        kernel.wait()


def cell_messages(kc: BlockingKernelClient, code: str) -> Iterator[dict]:
    """Execute ``code``; its own iopub messages, in order, until the kernel is idle (the idle
    status not included)."""
    msg_id = kc.execute(code)
    while True:
        msg = kc.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return
        yield msg
