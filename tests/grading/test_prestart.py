"""Kernels started ahead (``autograder/grading/sandbox/prestart.py``): the queue's order, each
kernel's own sockets and mounts, and the kernel's imports before it answers (``outcap``).

End to end, every sandboxed grading takes its kernels from the queue (the class tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grading.sandbox import bwrap_argv, bwrap_path
from autograder.grading.sandbox.prestart import KernelQueue

from helpers.sandbox import course_with_two_assignments

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "solutions"


class RecordingQueue(KernelQueue):
    """The queue's bookkeeping, with kernels that are only names."""

    def __init__(self, root, order, ready):
        super().__init__(root, order, ready)
        self.events: list[str] = []

    def _start(self, assignment, config, extra_arguments):
        self.ready(assignment)
        self.count += 1
        self.events.append(f"start {assignment}#{self.count}")
        return f"{assignment}#{self.count}"

    def _kill(self, km):
        self.events.append(f"kill {km}")


def _base(root: Path) -> None:
    (root / ".grader").mkdir(parents=True)
    (root / ".grader" / "sandbox-base.json").write_text(json.dumps({"home": str(root)}))


def test_the_queue_starts_the_next_kernel_ahead_and_kills_one_not_taken(tmp_path):
    _base(tmp_path)
    readied: list[str] = []
    q = RecordingQueue(tmp_path, ["a", "a", "b", "c", "d"], readied.append)
    q.start_ahead(config=None)
    assert q.events == ["start a#1"]  # before nbgrader reads the first notebook
    assert q.take("a", None) == "a#1" and q.events[-1] == "start a#2"  # a's second notebook
    assert q.take("a", None) == "a#2" and q.events[-1] == "start b#3"
    # b failed before its notebook ran (nbgrader never asked for its kernel): killed, and c's
    # kernel, not started ahead, starts now
    assert q.take("c", None) == "c#4"
    assert q.events[-3:] == ["kill b#3", "start c#4", "start d#5"]
    q.close()  # d's notebook is never run
    assert q.events[-1] == "kill d#5" and q.ahead == []
    assert readied == ["a", "a", "b", "c", "d"]  # each kernel's assignment prepared first
    assert q.take("e", None) == "e#6" and q.events[-1] == "start e#6"  # not in the order


def test_each_lane_has_its_own_queue_and_its_kernels_their_own_files(tmp_path):
    """nbgrader_main grades two lanes at once, each in a thread with the queue it installed;
    the two queues' kernels never share an ipc folder or a spec file."""
    import threading

    from autograder.grading.sandbox import prestart

    (tmp_path / ".grader").mkdir()
    (tmp_path / ".grader" / "sandbox-base.json").write_text(json.dumps(
        {"home": str(tmp_path), "uid": os.getuid(), "env": {}, "ro": []}))
    lanes = [KernelQueue(tmp_path, ["a"]), KernelQueue(tmp_path, ["b"])]
    seen, gate = {}, threading.Barrier(2)

    def lane(k):
        prestart.install(lanes[k])
        gate.wait()  # both installed before either looks
        seen[k] = [prestart.current(), lanes[k]._spec_file("ab"[k]),
                   lanes[k]._spec_file("ab"[k])]

    threads = [threading.Thread(target=lane, args=(k,)) for k in (0, 1)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert prestart.current() is None  # this thread installed none
    assert seen[0][0] is lanes[0] and seen[1][0] is lanes[1]
    files = [p for k in (0, 1) for p in seen[k][1:]]
    ipcs = [json.loads(p.read_text())["ipc"] for p in files]
    assert len(set(files)) == len(set(ipcs)) == 4, (files, ipcs)


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap not installed")
def test_a_kernel_sees_only_its_own_sockets_and_its_own_assignment_s_probe(tmp_path):
    """Two kernels of one student are alive at once (one runs, the next waits): each one's
    sandbox holds its own ipc folder (connection file with the key, sockets) and its own
    assignment's probe folder, never the other's."""
    uid = 212345 if os.geteuid() == 0 else os.geteuid()
    specs = course_with_two_assignments(tmp_path, uid)
    q = KernelQueue(tmp_path, ["01_attention", "02_masking"],
                    imports=lambda a: ["torch._dynamo"] if a == "02_masking" else [])
    first, second = q._spec_file("01_attention"), q._spec_file("02_masking")
    one, two = json.loads(first.read_text()), json.loads(second.read_text())
    assert one["ipc"] != two["ipc"] and Path(one["ipc"]).parent == Path(two["ipc"]).parent
    from autograder.grading.sandbox.outcap import IMPORTS_VAR

    assert one["env"][IMPORTS_VAR] == "" and two["env"][IMPORTS_VAR] == "torch._dynamo"
    assert one["rw"] == two["rw"] == []  # nothing writable: records travel as messages
    assert one["env"]["COURSE_PROBE_DIR"] == specs["01_attention"]["probe"]
    Path(two["ipc"], "kernel.json").write_text("{}")  # the other kernel's connection file
    look = (
        "import json, os, sys\n"
        "home, ipcs, probes = sys.argv[1:4]\n"
        "print(json.dumps([sorted(os.listdir(home)), os.path.exists(ipcs),\n"
        "                  sorted(os.listdir(probes))]))\n"
    )
    argv = bwrap_argv(one, "unused")
    cmd = argv[: argv.index("autograder.grading.sandbox.outcap") - 2] + [
        sys.executable, "-c", look, one["home"], two["ipc"],
        str(tmp_path / ".grader" / "probe")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    listed, other_ipc, probes = json.loads(out.stdout)
    assert listed == sorted(["work", Path(one["ipc"]).name]) and other_ipc is False
    assert probes == ["01_attention"]


def test_the_kernel_has_its_libraries_loaded_before_the_first_cell_and_binds_none(tmp_path,
                                                                                 monkeypatch):
    """``outcap`` imports torch, numpy and pyplot, and the modules the exercise table names for
    the notebook, before the kernel answers: the notebook's namespace is untouched and pyplot
    still draws inline (the backend ipykernel sets)."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    spec = tmp_path / "kernels" / "outcap-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "autograder.grading.sandbox.outcap", "100000",
                 "-f", "{connection_file}"],
        "display_name": "outcap", "language": "python"}))
    from autograder.grading.sandbox.outcap import IMPORTS_VAR

    nb = new_notebook(cells=[
        new_code_cell("import os, sys\nprint(sorted(m for m in ('torch', 'numpy', "
                      "'matplotlib.pyplot', 'xml.dom.minidom') if m in sys.modules), "
                      f"'torch' in dir(), {IMPORTS_VAR!r} in os.environ)"),
        new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"),
    ])
    # the exercise table's kernel_imports of the notebook (here a module nothing else loads)
    monkeypatch.setenv(IMPORTS_VAR, "xml.dom.minidom")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # ipykernel's inline backend, as graded
    NotebookClient(nb, kernel_name="outcap-test", timeout=120,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[0].outputs[0]["text"].strip() == \
        "['matplotlib.pyplot', 'numpy', 'torch', 'xml.dom.minidom'] False False"
    assert any("image/png" in o.get("data", {}) for o in nb.cells[1].outputs), nb.cells[1]
    # a kernel not started ahead (no variable) imports nothing ahead: a notebook that needs
    # no torch (the fixture course) does not pay for it
    monkeypatch.delenv(IMPORTS_VAR)
    plain = new_notebook(cells=[nb.cells[0].copy()])
    NotebookClient(plain, kernel_name="outcap-test", timeout=120,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert plain.cells[0].outputs[0]["text"].strip() == "[] False False"
