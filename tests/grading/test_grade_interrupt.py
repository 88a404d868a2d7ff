"""Ctrl-C at any moment ends course-grade with one line (issue 31, item 15): here while it
builds the template course (nbgrader, a process of its own), before any grading, on the tiny
fixture assignment and a fresh OUT_DIR (so that the template is built, not reused)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "solutions"


def _children(pid: int) -> dict[int, str]:
    """{pid: command line} of the processes whose parent is ``pid``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found[int(entry)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_ctrl_c_during_the_template_build_prints_one_line_and_kills_its_children(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "ann").mkdir(parents=True)
    (subs / "ann" / "99_fixture.ipynb").write_bytes(
        (FIXTURE / "99_fixture" / "99_fixture.ipynb").read_bytes())
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder.grade", str(subs), "--out", str(out), "--source",
         str(FIXTURE), "--no-progress", "--unsandboxed"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Ctrl-C as a terminal delivers it, whatever this test runner's own SIGINT setting
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        builder = None
        deadline = time.monotonic() + 300  # a bound on a hang only: nothing is timed
        while builder is None and proc.poll() is None and time.monotonic() < deadline:
            builder = next((pid for pid, cmd in _children(proc.pid).items()
                            if "generate_assignments" in cmd), None)
            time.sleep(0.01)
        assert builder is not None, f"no template build seen: {proc.communicate()}"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, stdout, stderr) == (130, "", "course-grade: interrupted\n")
    assert not _alive(builder)
    assert not (out / "grades.csv").exists()  # nothing graded
