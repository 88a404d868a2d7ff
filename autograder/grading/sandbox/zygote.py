"""One loaded sandbox per grading process, which forks every notebook's kernel.

A kernel started the plain way (``kernel.py`` ``exec``-s ``bwrap``, then Python, ipykernel and
``import torch``) costs 4 to 5 s of CPU. The zygote is one sandbox per grading process in
which Python imports :data:`PRELOAD` once and waits; each kernel's launcher (``kernel.py``,
still the kernelspec's command) hands it the kernel's spec and its stdin/stdout/stderr over a
Unix socket only root can reach, and a fork becomes the kernel in about 0.1 s.

Each fork is sandboxed as a ``bwrap`` of its own would be (``kernel_package.sandbox_spec``):

- a mount namespace: a new private ``/tmp`` (and ``/dev/shm``), then its own assignment's
  mounts and ipc folder, bound from the zygote's staging folder (:data:`STAGE`, mode 0700),
  which the fork then detaches, with the zygote's socket folder;
- a PID namespace whose ``init`` dies with the kernel, taking every process it started; a
  network and an IPC namespace (no loopback, abstract socket or shared memory in common);
- then the sandbox user's uid and gid, no supplementary groups, ``PR_SET_NO_NEW_PRIVS``, and
  ``kernel.py``'s limits.

The zygote runs as root in its ``bwrap`` (``CAP_SYS_ADMIN``, ``CAP_SETUID``, ``CAP_SETGID``)
and runs no student code: only :data:`PRELOAD`'s imports happen before a fork. Where the
grader runs as root it is the one way kernels start (a kernel it refuses does not start:
graded again next run); elsewhere each kernel starts in a ``bwrap`` of its own. Decided once
per grading process (``nbgrader_main._start_zygote``).

Protocol (one connection per kernel): the launcher sends a length-prefixed JSON request
``{"spec": ..., "conn": CONNECTION_FILE}`` with its three standard file descriptors; the
zygote answers ``ok PID`` (or ``error TEXT``), later ``exit STATUS`` when the kernel has
ended. The launcher closing the connection (nbgrader shut the kernel down, killing it) kills
the kernel and everything it started.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path

from ..env import PROBE_DIR, ZYGOTE, ZYGOTE_PRELOAD, ZYGOTE_RO
from .bwrap import SHM_IN_TMP

ZYGOTE_VAR = ZYGOTE  # the control socket's path, for the kernels' launcher
RO_VAR = ZYGOTE_RO  # the zygote's own read-only binds (JSON list)
STAGE = "/run/course-stage"  # in the zygote's sandbox: where the kernels' mounts come from
PRELOAD = ("ipykernel.kernelapp", "numpy", "torch", "matplotlib.pyplot")
PRELOAD_VAR = ZYGOTE_PRELOAD  # the PRELOAD modules the notebooks import (JSON list)


def preload_for(sources: list[str]) -> list[str]:
    """The :data:`PRELOAD` modules worth loading for notebooks whose code cells are
    ``sources``: ipykernel always, a library only when some cell imports it (a course of plain
    Python notebooks does not pay for torch).

    >>> preload_for(["import numpy as np", "x = 1"])
    ['ipykernel.kernelapp', 'numpy']
    >>> preload_for(["from matplotlib import pyplot as plt\\nimport torch.nn as nn"])
    ['ipykernel.kernelapp', 'torch', 'matplotlib.pyplot']
    """
    import re

    def imported(module: str) -> bool:
        top = re.escape(module.split(".")[0])
        pattern = re.compile(rf"^\s*(import|from)\s+{top}\b", re.M)
        return any(pattern.search(src) for src in sources)

    return [m for m in PRELOAD if m == "ipykernel.kernelapp" or imported(m)]
MAX_REQUEST = 2**20

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x08000000, 0x20000000, \
    0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 38, 36


def staged(path: str) -> str:
    """Where the zygote sees the host's ``path`` (under a staged folder)."""
    return STAGE + str(path)


# ---------------------------------------------------------------- the grading process's side
class Zygote:
    """The running zygote: its ``bwrap`` process and its control socket's path."""

    def __init__(self, proc, ctl: str):
        self.proc, self.ctl = proc, ctl

    def close(self) -> None:
        """Kill the zygote's sandbox (every kernel in it goes with its PID namespace)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def plan(specs: list[dict]) -> tuple[dict, list[tuple[str, str, str]]] | None:
    """The zygote's own spec and the folders it stages, for kernels of ``specs`` (one spec per
    assignment graded by this process, ``kernel_package.sandbox_spec``); None when they cannot share
    one zygote (another sandbox user or home, or a kernel that mounts no stubbed
    ``autograder``)."""
    from .bwrap import package_dir

    if not specs or None in specs:
        return None
    first = specs[0]
    if any(s["uid"] != first["uid"] or s["home"] != first["home"] for s in specs):
        return None
    package = package_dir("autograder")  # each kernel's stubbed copy is bound there
    stubs = [{dest: src for src, dest in s.get("ro_as", [])}.get(package) for s in specs]
    if package is None or None in stubs:
        return None
    common = [p for p in first["ro"] if all(p in s["ro"] for s in specs)]
    env = {k: v for k, v in first["env"].items() if k != PROBE_DIR}
    env[RO_VAR] = json.dumps(common)  # what a kernel need not bind again (unless under /tmp)
    zspec = {**first, "ro": common, "ro_as": [[stubs[0], package]], "rw": [], "ipc": None,
             "env": env}
    roots: dict[str, str] = {first["home"]: "--bind"}  # work and every kernel's ipc folder
    for s in specs:
        for p in s["ro"]:
            if p not in common or p.startswith("/tmp/"):
                roots.setdefault(p, "--ro-bind")
        for src, _dest in s.get("ro_as", []):
            roots.setdefault(src, "--ro-bind")
        for p in s.get("rw", []):
            roots[p] = "--bind"
    binds = [(option, p, staged(p)) for p, option in roots.items()]
    return zspec, binds


def start(specs: list[dict], ctl_dir: Path, preload: list[str] | None = None) -> Zygote | None:
    """Start the zygote for kernels of ``specs``; its socket in ``ctl_dir`` (made here, root's
    alone); it imports ``preload`` (default :data:`PRELOAD`). None for specs that cannot share
    one (:func:`plan`). Only as root (the caller's choice: ``nbgrader_main._start_zygote``)."""
    import subprocess

    from .bwrap import sandbox_argv

    planned = plan(specs)
    if planned is None:
        return None
    zspec, binds = planned
    if preload is not None:
        zspec["env"] = {**zspec["env"], PRELOAD_VAR: json.dumps(list(preload))}
    ctl_dir = Path(ctl_dir)
    ctl_dir.mkdir(mode=0o700)
    ctl = str(ctl_dir / "ctl")
    argv = sandbox_argv(zspec, [*binds, ("--bind", str(ctl_dir), str(ctl_dir))],
                        private=(STAGE,))
    argv += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
             "--", sys.executable, "-m", "autograder.grading.sandbox", "zygote", ctl]
    return Zygote(subprocess.Popen(argv, stdin=subprocess.DEVNULL), ctl)


# ---------------------------------------------------------------- the launcher's side
def run_kernel(ctl: str, spec: dict, conn: str, wait_s: float = 30.0) -> int | None:
    """Have the zygote at ``ctl`` fork the kernel of ``spec``; wait for it to end and return
    its exit status (as a process's: 128 + signal when killed). None when the zygote could not
    start it (not there, not answering, refused): the kernel does not start.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        return _ask(sock, ctl, spec, conn, time.monotonic() + wait_s)


def _ask(sock: socket.socket, ctl: str, spec: dict, conn: str, deadline: float) -> int | None:
    while True:  # the socket appears once the zygote listens (its imports come after)
        try:
            sock.connect(ctl)
            break
        except FileNotFoundError:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)
        except OSError:
            return None
    data = json.dumps({"spec": spec, "conn": conn}).encode()
    try:
        message = struct.pack("!I", len(data)) + data
        sent = socket.send_fds(sock, [message], [0, 1, 2])
        sock.sendall(message[sent:])
        with sock.makefile("rb") as reader:
            first = reader.readline().decode(errors="replace").split(" ", 1)
            if first[0] != "ok":
                print(f"course-grade: the kernel zygote refused: {first[-1].strip()}",
                      file=sys.stderr, flush=True)
                return None
            last = reader.readline().decode(errors="replace").split()
    except OSError:
        return None
    if last[:1] == ["exit"] and len(last) == 2 and last[1].lstrip("-").isdigit():
        return int(last[1])
    return 137  # the zygote went away with the kernel in it


# ---------------------------------------------------------------- inside the zygote's sandbox
_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.c_ulong, ctypes.c_char_p]
        _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return _libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, dest: str, fstype: str | None, flags: int, data: str | None = None):
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_c().mount(enc(src), enc(dest), enc(fstype), flags, enc(data)), f"mount {dest}")


def _bind(src: str, dest: str, readonly: bool) -> None:
    if os.path.isdir(src):
        os.makedirs(dest, mode=0o755, exist_ok=True)
    elif not os.path.exists(dest):
        os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
        open(dest, "a").close()
    _mount(src, dest, None, MS_BIND | MS_REC)
    if readonly:
        _mount(None, dest, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _tmpfs(dest: str, size_mb: int) -> None:
    _mount("tmpfs", dest, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,mode=1777")


def _namespaces(spec: dict, zygote_ro: set[str], ctl_dir: str) -> None:
    """In the fork: the kernel's own mount, network and IPC namespaces and mounts."""
    _check(_c().unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _check(_c().umount2(ctl_dir.encode(), MNT_DETACH), "umount the zygote's socket")
    _tmpfs("/tmp", int(spec["tmp_mb"]))
    for p in spec["ro"]:  # what the new /tmp hid, and what this kernel has beyond the zygote
        if p.startswith("/tmp/") or p not in zygote_ro:
            _bind(staged(p), p, readonly=True)
    for src, dest in spec.get("ro_as", []):
        _bind(staged(src), dest, readonly=True)
    for p in spec.get("rw", []):
        _bind(staged(p), p, readonly=False)
    work = f"{spec['home']}/work"
    _bind(staged(work), work, readonly=True)
    _bind(staged(spec["ipc"]), spec["ipc"], readonly=False)
    mpl = spec["env"].get("MPLCONFIGDIR")
    if mpl and mpl.startswith("/tmp/"):
        os.makedirs(mpl, exist_ok=True)
        os.chmod(mpl, 0o1777)
    # /dev/shm (POSIX shared memory: a DataLoader's workers) is the zygote's link to a folder
    # of /tmp (bwrap.dev_argv): this new /tmp's, within its size
    os.makedirs(SHM_IN_TMP, exist_ok=True)
    os.chmod(SHM_IN_TMP, 0o1777)
    # nothing of the host beyond this kernel's own mounts
    _check(_c().umount2(STAGE.encode(), MNT_DETACH), "umount the staging folder")


def _drop(spec: dict) -> None:
    import resource

    from ..config import GradeConfig  # loaded by the zygote

    config = GradeConfig.from_dict(spec["config"])
    resource.setrlimit(resource.RLIMIT_NPROC, (config.nproc, config.nproc))
    fsize = config.fsize_mb * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    uid = int(spec["uid"])
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)  # all uids non-zero: no capabilities left
    _check(_c().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _kernel(spec: dict, conn: str) -> None:
    """The kernel itself (``outcap.main``), in its sandbox, as the sandbox user."""
    from ..config import GradeConfig
    from .outcap import main as outcap_main

    os.chdir(f"{spec['home']}/work")
    os.environ.clear()
    os.environ.update(spec["env"])
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if "numpy" in sys.modules:  # numpy's global generator, seeded from entropy as in a new
        sys.modules["numpy"].random.seed()  # process (Python's own ``random`` reseeds itself)
    cap = GradeConfig.from_dict(spec.get("config", {})).output_chars
    sys.argv = [sys.argv[0]]
    outcap_main([str(cap), "-f", conn])


def _init(kernel_pid: int) -> None:
    """PID 1 of the kernel's namespace: reap every orphan; end with the kernel's status."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == kernel_pid:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def _fork_kernel(request: dict, fds: list[int], keep: set[int], zygote_ro: set[str],
                 ctl_dir: str) -> int:
    """Fork the sandboxed kernel of ``request``; the PID (here) of its namespace's ``init``."""
    r, w = os.pipe()
    a = os.fork()
    if a == 0:  # becomes the kernel's namespaces, forks their init, and goes
        code = 70
        try:
            os.close(r)
            for fd in keep:
                os.close(fd)
            spec = request["spec"]
            _namespaces(spec, zygote_ro, ctl_dir)
            _check(_c().unshare(CLONE_NEWPID), "unshare pid")
            b = os.fork()
            if b == 0:  # PID 1 of the new namespace
                os.close(w)
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
                _drop(spec)
                c = os.fork()
                if c == 0:
                    for target, fd in enumerate(fds):
                        os.dup2(fd, target)
                    os.closerange(3, 65536)
                    _kernel(spec, request["conn"])
                    os._exit(0)
                for fd in fds:
                    os.close(fd)
                _init(c)
            os.write(w, str(b).encode())
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported to the launcher, then gone
            try:
                os.write(2, f"course-grade zygote: {type(e).__name__}: {e}\n".encode())
            except OSError:
                pass
        os._exit(code)
    os.close(w)
    os.waitpid(a, 0)
    with os.fdopen(r, "rb") as f:
        pid = f.read(32)
    if not pid.isdigit():
        raise OSError("the kernel's sandbox could not be made")
    return int(pid)


def read_request(conn: socket.socket, nfds: int,
                 cap: int | None = MAX_REQUEST) -> tuple[dict, list[int]]:
    """A length-prefixed JSON request and the ``nfds`` descriptors sent with it (the zygote's
    and the warm grading process's protocol); ``ValueError`` or ``OSError`` (the descriptors
    received then closed)."""
    first, fds, _flags, _addr = socket.recv_fds(conn, 65536, nfds)
    try:
        if len(first) < 4:
            raise ValueError("short request")
        (size,) = struct.unpack("!I", first[:4])
        if cap is not None and size > cap:
            raise ValueError("request too large")
        data = first[4:]
        while len(data) < size:
            more = conn.recv(size - len(data))
            if not more:
                raise ValueError("truncated request")
            data += more
        if len(fds) != nfds:
            raise ValueError(f"{nfds} file descriptor(s) expected, {len(fds)} sent")
        return json.loads(data), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def serve(ctl: str) -> None:
    """The zygote's main loop (``python -m autograder.grading.sandbox zygote CTL``)."""
    import importlib
    import selectors

    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    _check(_c().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(ctl + ".new")
    listener.listen(64)
    os.rename(ctl + ".new", ctl)  # the launchers connect from now on; served after the imports
    for name in json.loads(os.environ.pop(PRELOAD_VAR, "null")) or PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - the notebook's own import reports it
            continue
    from ..config import GradeConfig  # noqa: F401
    from . import outcap  # noqa: F401 - what the forks run, loaded once here

    zygote_ro = set(json.loads(os.environ.pop(RO_VAR, "[]")))
    ctl_dir = os.path.dirname(ctl)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    kernels: dict[int, socket.socket] = {}  # init's pid -> its launcher's connection
    while True:
        for key, _events in sel.select(timeout=0.05):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                fds: list[int] = []
                try:
                    request, fds = read_request(conn, 3)
                    keep = {listener.fileno(), conn.fileno(),
                            *(c.fileno() for c in kernels.values()), sel.fileno()}
                    pid = _fork_kernel(request, fds, keep, zygote_ro, ctl_dir)
                except Exception as e:  # noqa: BLE001 - this kernel is refused, not the rest
                    conn.sendall(f"error {type(e).__name__}: {e}\n".encode())
                    conn.close()
                    continue
                finally:
                    for fd in fds:
                        os.close(fd)
                conn.sendall(f"ok {pid}\n".encode())
                kernels[pid] = conn
                sel.register(conn, selectors.EVENT_READ, pid)
            else:  # the launcher is gone (or wrote): the kernel goes too
                try:
                    os.kill(key.data, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        reap(kernels, sel, shell=True)  # ended kernels (and failed forks of a launcher's)


def reap(conns: dict, sel, shell: bool) -> None:
    """Send each ended child's connection (``conns``: pid -> socket, unregistered from
    ``sel``) ``exit CODE`` and close it; ``shell``: a signal as 128 + its number, else
    negative. Used by the zygote and the warm grading process."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = conns.pop(pid, None)
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        if shell and code < 0:
            code = 128 - code
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(conn)
        with contextlib.suppress(OSError):
            conn.sendall(f"exit {code}\n".encode())
        conn.close()
