"""bubblewrap: is it usable here, what the kernel may read, and the ``bwrap`` command line.

See the package docstring for what the sandbox allows. Example: ``bwrap_argv(spec, conn)``
with ``spec = {"bwrap": "/usr/bin/bwrap", "uid": 212345, "home": "/tmp/cg-x",
"ro": ["/usr"], "env": {"HOME": "/tmp"}, "tmp_mb": 1024}`` starts
``bwrap --unshare-pid --unshare-net ...`` and ends with the kernel's ``-f CONN``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from ..config import GradeConfig
from ..env import GRADE_JOB, SMOKE

KERNEL_NAME = "course-sandbox"
_PROBE: dict[str, bool] = {}


def bwrap_path() -> str | None:
    """The ``bwrap`` executable when it is installed and can build a sandbox here, else None."""
    import subprocess

    exe = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.path.exists("/usr/bin/bwrap") else None)
    if exe is None:
        return None
    if exe not in _PROBE:
        args = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--unshare-pid", "--unshare-net", "--die-with-parent"]
        if os.geteuid() != 0:
            args.append("--unshare-user")
        try:
            ok = subprocess.run([*args, "true"], capture_output=True, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        _PROBE[exe] = ok
    return exe if _PROBE[exe] else None


def package_dir(name: str) -> str | None:
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(list(spec.submodule_search_locations)[0]).resolve())


def readonly_paths() -> list[str]:
    """What the kernel may read: the system, Python, the venv, the two course packages."""
    paths = ["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"]
    for p in (sys.base_prefix, sys.prefix, Path(sys.executable).resolve().parent.parent):
        paths.append(str(Path(p).resolve()))
    for pkg in ("autograder", "transformer_ref"):
        d = package_dir(pkg)
        if d:
            paths.append(d)
    seen, out = set(), []
    for p in paths:
        if p not in seen and os.path.exists(p):
            seen.add(p)
            out.append(p)
    return out


def kernel_env(env: dict[str, str]) -> dict[str, str]:
    """The kernel's whole environment: a few of the grader's variables, paths inside."""
    keep = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MPLBACKEND",
            "PYTHONWARNINGS", "LANG", "LC_ALL", GRADE_JOB, SMOKE)
    out = {k: env[k] for k in keep if k in env}
    out.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin",
                              "/bin"]),
        HOME="/tmp", TMPDIR="/tmp", IPYTHONDIR="/tmp/.ipython", MPLCONFIGDIR="/tmp/.mpl",
        JUPYTER_RUNTIME_DIR="/tmp/.jupyter", PYTHONDONTWRITEBYTECODE="1",
    )
    out.setdefault("LANG", "C.UTF-8")
    return out


def font_cache(folder: Path) -> str | None:
    """matplotlib's font list (``fontlist-v*.json``), built once in ``folder`` (the class's
    kernel cache) and bound read-only into each kernel's ``MPLCONFIGDIR``: every kernel starts
    with an empty ``/tmp``, so without it each one scans the system's fonts again when the
    notebook imports pyplot. None if it cannot be built (each kernel then builds its own)."""
    import subprocess
    import tempfile

    folder = Path(folder)
    found = sorted(folder.glob("fontlist-v*.json"))
    if found:
        return str(found[-1])
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            env = dict(os.environ, MPLCONFIGDIR=tmp, MPLBACKEND="Agg")
            subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], env=env,
                           capture_output=True, timeout=120, check=True)
            built = sorted(Path(tmp).glob("fontlist-v*.json"))
            if not built:
                return None
            built[-1].rename(folder / built[-1].name)  # atomic: a rename in one folder
    except (OSError, subprocess.SubprocessError):
        return None
    return str(folder / built[-1].name)


def bwrap_argv(spec: dict, connection_file: str) -> list[str]:
    """The ``bwrap`` command that runs the kernel (see the package docstring)."""
    ipc = spec.get("ipc") or f"{spec['home']}/ipc"  # this kernel's own
    argv = sandbox_argv(spec, [("--bind", ipc, ipc)])
    # ipykernel, with each cell's stream output capped in the kernel (``outcap``)
    cap = GradeConfig.from_dict(spec.get("config", {})).output_chars
    kernel = [sys.executable, "-m", "autograder.grading.sandbox.outcap", str(cap),
              "-f", connection_file]
    if os.geteuid() == 0:  # become the sandbox's own user inside (bwrap drops root's caps)
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                 sys.executable, "-m", "autograder.grading.sandbox", "drop", str(spec["uid"]),
                 "--", *kernel]
    else:
        argv += ["--unshare-user", "--", *kernel]
    return argv


SHM_IN_TMP = "/tmp/.shm"  # the sandbox's /dev/shm: a folder of its sized /tmp
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def dev_argv() -> list[str]:
    """A ``/dev`` of the devices a kernel uses (bound from the host, as ``--dev`` binds them),
    the ``fd`` and standard stream links, and ``shm`` a link to :data:`SHM_IN_TMP`. Its own
    tmpfs holds only these entries (64 KiB, root's: the sandbox user cannot write there).

    >>> dev_argv()[-3:]
    ['--symlink', '../tmp/.shm', '/dev/shm']
    """
    argv = ["--perms", "0755", "--size", str(64 * 2**10), "--tmpfs", "/dev"]
    for d in _DEVICES:
        argv += ["--dev-bind", f"/dev/{d}", f"/dev/{d}"]
    for k, name in enumerate(("stdin", "stdout", "stderr")):
        argv += ["--symlink", f"/proc/self/fd/{k}", f"/dev/{name}"]
    return argv + ["--symlink", "/proc/self/fd", "/dev/fd",
                   "--symlink", "../" + SHM_IN_TMP.lstrip("/"), "/dev/shm"]


def sandbox_argv(spec: dict, binds: list[tuple[str, str, str]],
                 private: tuple[str, ...] = ()) -> list[str]:
    """``bwrap`` and its options for ``spec``'s sandbox, up to the command: namespaces, the
    private ``/tmp``, the read-only system, the spec's own mounts, the folders ``private``
    (empty file systems of their own, root's alone: mode 0700), ``binds`` (``(option,
    source, destination)``, applied last), the working folder, the environment."""
    work = f"{spec['home']}/work"
    argv = [spec["bwrap"], "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--hostname", "sandbox"]
    made = set()

    def parents(path: str) -> list[str]:  # bwrap would make them 0700: unreadable to the user
        out = []
        for d in reversed(Path(path).parents):
            if str(d) != "/" and str(d) not in made:
                made.add(str(d))
                out += ["--perms", "0755", "--dir", str(d)]
        return out

    # The private /tmp first: read-only binds that live under /tmp (a clone and its .venv in
    # /tmp, as CI may have them) must be mounted on top of it, not hidden by it. It is memory:
    # its size is capped (``GradeConfig.tmp_mb``), a write past it fails with ENOSPC.
    # /dev/shm (POSIX shared memory, semaphores) is a folder of that /tmp: one budget for both
    # (bwrap's own --dev would make it a folder of an unsized tmpfs).
    argv += ["--proc", "/proc", "--perms", "1777",
             "--size", str(int(spec["tmp_mb"]) * 2**20), "--tmpfs", "/tmp",
             "--perms", "1777", "--dir", SHM_IN_TMP, *dev_argv()]
    made.update(("/tmp", SHM_IN_TMP))
    if spec.get("fontlist"):  # MPLCONFIGDIR, writable, with the class's font list in it
        mpl = spec["env"]["MPLCONFIGDIR"]
        argv += ["--perms", "1777", "--dir", mpl, "--ro-bind", spec["fontlist"],
                 f"{mpl}/{Path(spec['fontlist']).name}"]
        made.add(mpl)
    for p in spec["ro"]:
        argv += [*parents(p), "--ro-bind", p, p]
    for src, dest in spec.get("ro_as", []):  # trusted verdicts: the stubbed package, inputs
        argv += [*parents(dest), "--ro-bind", src, dest]
    for p in spec.get("rw", []):  # the probe's records
        argv += [*parents(p), "--bind", p, p]
    argv += [*parents(work), "--ro-bind", work, work]
    for d in private:
        argv += [*parents(d), "--perms", "0700", "--tmpfs", d]
        made.add(d)
    for option, src, dest in binds:
        argv += [*parents(dest), option, src, dest]
    argv += ["--chdir", work, "--clearenv"]
    for k, v in spec["env"].items():
        argv += ["--setenv", k, v]
    return argv
