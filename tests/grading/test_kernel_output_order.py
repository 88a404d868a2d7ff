"""C-level output of a graded cell is that cell's output, however loaded the machine.

ipykernel makes file descriptors 1 and 2 pipes that a thread of its own reads (its
file-descriptor watcher), and sent what that thread read as output of the cell running *when
the thread got to run*. Every graded test cell ends with such a write: PyTorch's profiler
(``autograder/checks/_probe.py``) writes its ``profiler_stop`` line to fd 2 from C++. On a
loaded machine the line could reach the grader as output of the next cell, in chapter 02 a
demonstration cell that grading does not run (``autograder/grading/autograde/demo.py``): the release
then failed ``assert_demo_cells_not_run`` (issue 33). The kernel's launcher
(``autograder/grading/sandbox/outcap.py``) now sends what the pipes hold at the end of each cell,
before its reply.

Here the kernel is started as grading starts it (``python -m autograder.grading.sandbox.outcap
CHARS -f CONNECTION_FILE``; outside the sandbox, which plays no part in it), CPU hogs keep
every core busy, and for a few seconds a cell that ends with a C-level write to fd 2 alternates
with a comment-only cell, each sent once the previous one is idle, as nbclient sends them.
Without the launcher's fix, about one comment-only cell in ten got the other cell's line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from autograder.grading.config import GradeConfig

from helpers.outcap_kernel import cell_messages, outcap_kernel

SECONDS = 6.0  # of alternating cells, under load
WRITE = 'n += 1\nos.write(2, b"C-level line %d\\n" % n)'  # as the profiler: C, fd 2, at the end
COMMENT = "# a comment: no output"
# The watcher threads at the lowest CPU priority: a loaded machine runs them late now and then,
# here whenever the hogs keep them waiting. ``watch_fd_thread`` is ipykernel's.
SETUP = """import os, sys
n = 0
for stream in (sys.stdout, sys.stderr):
    os.setpriority(os.PRIO_PROCESS, stream.watch_fd_thread.native_id, 19)
"""


def _run(kc, code: str) -> tuple[str, str]:
    """Execute ``code``; (its stream output, its reply's status), once the kernel is idle."""
    text = [msg["content"]["text"] for msg in cell_messages(kc, code)
            if msg["msg_type"] == "stream"]
    reply = kc.get_shell_msg(timeout=60)
    return "".join(text), reply["content"]["status"]


def test_c_level_output_stays_in_the_cell_that_wrote_it_under_load(tmp_path):
    # the kernel as grading starts it, in this test's session (``outcap_kernel``)
    with outcap_kernel(tmp_path, GradeConfig().output_chars) as kc:
        assert _run(kc, SETUP) == ("", "ok")
        hogs: list[subprocess.Popen] = []
        try:
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(os.cpu_count() or 1)]
            pairs, in_comment, not_own = 0, [], []
            deadline = time.monotonic() + SECONDS
            while time.monotonic() < deadline:
                pairs += 1
                written, status = _run(kc, WRITE)
                assert status == "ok", written
                if written != f"C-level line {pairs}\n":
                    not_own.append((pairs, written))
                shown, _ = _run(kc, COMMENT)
                if shown:
                    in_comment.append((pairs, shown))
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    print(f"{pairs} pairs: {len(in_comment)} comment-only cells with output, "
          f"{len(not_own)} writing cells without exactly their own line")
    assert pairs >= 20, pairs  # enough cells to mean something
    assert not in_comment, f"{len(in_comment)} of {pairs} comment-only cells had output: " \
        f"{in_comment[:5]}"
    assert not not_own, f"{len(not_own)} of {pairs} cells did not show exactly their own " \
        f"line: {not_own[:5]}"
