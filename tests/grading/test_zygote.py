"""The kernels' zygote (``autograder/grading/sandbox/zygote.py``): one loaded sandbox per grading
process forks every kernel, and each fork is as closed in as a kernel in a bwrap of its own.

Two kernels of one student are alive at once here (one runs, the next waits, as the kernel
queue has them); the test looks at both from inside, through real kernels started the way
nbgrader starts them (the ``course-sandbox`` kernelspec's launcher). Needs root (the zygote is
used only then) and bubblewrap.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from autograder.grading.autograde.kernel_package import sandbox_spec
from autograder.grading.sandbox import bwrap_path
from autograder.grading.sandbox import zygote as Z

pytestmark = pytest.mark.skipif(bwrap_path() is None or os.geteuid() != 0,
                                reason="the zygote needs root and bubblewrap")

UID = 212346

LOOK = r"""
import json, os, socket, subprocess, sys
home, probes = {home!r}, {probes!r}
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines()
              if ":\t" in l)
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
try:
    stage = os.listdir({stage!r})  # the mount point left when the staging folder went
except OSError:
    stage = []
open("/tmp/mark-{name}", "w").write("x")
open("/dev/shm/mark-{name}", "w").write("x")
listener = None
try:
    listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(1)
    port = listener.getsockname()[1]
except OSError:
    port = None
sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)
import random, numpy
draws = [random.random(), float(numpy.random.random())]
print(json.dumps({{
    "uid": os.getuid(), "caps": status["CapEff"].strip(), "no_new_privs":
    status.get("NoNewPrivs", "").strip(), "loaded": "torch" in sys.modules,
    "home": sorted(os.listdir(home)), "probes": sorted(os.listdir(probes)),
    "stage": stage, "pid": os.getpid(), "pids": len(pids),
    "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")), "port": port,
    "draws": draws, "shm_in_tmp": os.stat("/dev/shm").st_dev == os.stat("/tmp").st_dev,
}}))
"""


def _start(root: Path, assignment: str, n: int):
    """A started kernel of ``assignment`` (its launcher is ``kernel.py``, as the course's
    kernelspec has it), with a spec file, ipc folder and kernelspec of its own: two kernels of
    two assignments at once, as no grading process runs them but the zygote must keep apart."""
    from jupyter_client import KernelManager

    spec = sandbox_spec(root, assignment)
    ipc = Path(spec["home"]) / f"ipc-{n}"
    ipc.mkdir()
    os.chown(ipc, spec["uid"], spec["uid"])
    spec["ipc"] = str(ipc)
    path = root / ".grader" / f"sandbox-{n}.json"
    path.write_text(json.dumps(spec))
    kdir = root / ".grader" / "share" / "kernels" / f"course-sandbox-{n}"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "autograder.grading.sandbox", "kernel", str(path),
                 "{connection_file}"],
        "display_name": "sandbox", "language": "python", "interrupt_mode": "message"}))
    km = KernelManager(kernel_name=f"course-sandbox-{n}")
    km.transport, km.ip = "ipc", str(ipc / "k")
    km.start_kernel()
    return km


def _kill(km) -> None:
    try:
        km.shutdown_kernel(now=True)
    except Exception:  # noqa: BLE001 - already gone
        pass


def _run(km, code: str) -> str:
    kc = km.blocking_client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        out: list[str] = []

        def hook(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        kc.execute_interactive(code, output_hook=hook, timeout=120)
        return "".join(out)
    finally:
        kc.stop_channels()


def _sleepers() -> list[int]:
    found = []
    for p in os.listdir("/proc"):
        try:
            cmd = Path("/proc", p, "cmdline").read_bytes()
            owner = os.stat(Path("/proc", p)).st_uid
        except OSError:
            continue
        if cmd == b"sleep\x00300\x00" and owner == UID:
            found.append(int(p))
    return found


def test_forked_kernels_are_loaded_and_each_in_a_sandbox_of_its_own(tmp_path, monkeypatch):
    from helpers.sandbox import course_with_two_assignments

    root = tmp_path
    course_with_two_assignments(root, UID)
    home = json.loads((root / ".grader" / "sandbox-base.json").read_text())["home"]
    os.chown(home, 0, 0)
    os.chmod(home, 0o755)
    monkeypatch.setenv("JUPYTER_PATH", str(root / ".grader" / "share"))
    specs = [sandbox_spec(root, a) for a in ("01_attention", "02_masking")]
    zyg = Z.start(specs, Path(home) / "zygote")
    assert zyg is not None
    monkeypatch.setenv(Z.ZYGOTE_VAR, zyg.ctl)
    kernels = []
    try:
        kernels.append(one := _start(root, "01_attention", 1))
        kernels.append(two := _start(root, "02_masking", 2))
        seen = {}
        for name, km in (("one", one), ("two", two)):
            out = _run(km, LOOK.format(home=home, probes=str(root / ".grader" / "probe"),
                                       stage=Z.STAGE, name=name))
            seen[name] = json.loads(out.strip().splitlines()[-1])
        a, b = seen["one"], seen["two"]
        # forked from the loaded zygote: torch is there before any cell imported it
        assert a["loaded"] and b["loaded"]
        # the sandbox user, no capability left, no way to regain one
        assert a["uid"] == b["uid"] == UID
        assert a["caps"] == b["caps"] == "0000000000000000" and a["no_new_privs"] == "1"
        # each its own ipc folder, neither the zygote's socket nor the staging folder
        ipc1, ipc2 = (Path(json.loads(p.read_text())["ipc"]).name
                      for p in sorted((root / ".grader").glob("sandbox-[0-9]*.json")))
        assert a["home"] == sorted(["work", ipc1]) and b["home"] == sorted(["work", ipc2])
        assert a["stage"] == b["stage"] == []
        # random streams of their own, as two processes started apart would have
        assert a["draws"][0] != b["draws"][0] and a["draws"][1] != b["draws"][1]
        # each its own assignment's probe folder
        assert a["probes"] == ["01_attention"] and b["probes"] == ["02_masking"]
        # its own PID namespace (an init and the kernel's processes), /tmp and /dev/shm
        assert a["pid"] == b["pid"] == 2 and a["pids"] < 8
        assert "mark-one" in a["tmp"] and "mark-one" not in b["tmp"]
        assert a["shm"] == ["mark-one"] and b["shm"] == ["mark-two"]
        assert a["shm_in_tmp"] and b["shm_in_tmp"]  # one budget: --tmp (issue 47 item 7)
        # its own network: a port one kernel listens on is not the other's
        if a["port"] is not None:
            out = _run(two, "import socket\ntry:\n    socket.create_connection(('127.0.0.1', "
                       f"{a['port']}), timeout=2)\n    print('reached')\n"
                       "except OSError:\n    print('unreachable')\n")
            assert out.strip() == "unreachable"
        # every process a kernel started goes with it
        assert len(_sleepers()) == 2
        _kill(one)
        assert _wait_for(lambda: len(_sleepers()) == 1)
    finally:
        for km in kernels:
            _kill(km)
        zyg.close()
    # the namespaces' last processes are killed as the zygote's sandbox goes: soon, not at once
    assert _wait_for(lambda: _sleepers() == []), _sleepers()


def _wait_for(condition, seconds: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_zygote_that_is_gone_starts_no_kernel(tmp_path):
    """A zygote that is gone (its socket refuses, or never came) starts nothing, and says so
    (the launcher then ends: no second way to start the kernel)."""
    import socket

    dead = tmp_path / "ctl"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(dead))
    s.close()  # a socket file nobody listens on
    assert Z.run_kernel(str(dead), {}, "unused", wait_s=1) is None
    assert Z.run_kernel(str(tmp_path / "missing"), {}, "unused", wait_s=0.2) is None


def test_specs_that_cannot_share_a_zygote_get_none():
    base = {"uid": 1, "home": "/h", "ro": ["/usr"], "env": {}, "ro_as": []}
    assert Z.plan([]) is None and Z.plan([None]) is None
    assert Z.plan([base]) is None  # no stubbed autograder: the real one would be mounted
    from autograder.grading.sandbox.bwrap import package_dir

    pkg = package_dir("autograder")
    one = {**base, "ro_as": [["/stub", pkg]]}
    assert Z.plan([one, {**one, "uid": 2}]) is None
    zspec, binds = Z.plan([one, {**one, "ro": ["/usr", "/extra"]}])
    assert zspec["ro"] == ["/usr"] and zspec["ro_as"] == [["/stub", pkg]]
    staged = {dest: (opt, src) for opt, src, dest in binds}
    assert staged[Z.staged("/extra")] == ("--ro-bind", "/extra")  # the second kernel's own
    assert staged[Z.staged("/h")] == ("--bind", "/h")  # work and every ipc folder
