"""The runners that grade inside the sandbox (or, with ``--unsandboxed``, without it).

Both are :class:`~autograder.grading.parent.runner.LocalRunner` runners (limits, wall time,
process-tree kill) that first prepare the student's course folder: :func:`dedupe_grade_ids`,
and a Jupyter config folder whose ``nbgrader_config.py`` installs the source policy's hooks
(``policy.py``). :class:`BwrapRunner` also writes the ``course-sandbox`` kernelspec whose
command is the sandbox's launcher (``kernel.py``) and the spec it reads (the bwrap paths, the
kernel's environment, the :class:`~autograder.grading.config.GradeConfig`).

Before nbgrader starts, :func:`dedupe_grade_ids` turns submitted cells with a repeated or
unknown grade id into ordinary cells (nbgrader 0.9.6 otherwise fails on the whole notebook).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from ..cells import grade_id
from ..config import GradeConfig
from ..env import PROBE_DIR
from ..parent.runner import LocalRunner
from .bwrap import KERNEL_NAME, font_cache, kernel_env, package_dir, readonly_paths
from .policy import trusted_cells


def dedupe_grade_ids(course_root: Path) -> None:
    """Strip nbgrader metadata from submitted cells whose grade id nbgrader would choke on.

    nbgrader 0.9.6 fails on the whole notebook (``KeyError: 'grade_id'`` in
    ``OverwriteCells.add_missing_grade_cells``) when a submitted cell repeats an earlier
    cell's grade id (``DeduplicateIds`` leaves it half-marked) or carries an id the source
    does not have (``OverwriteCells`` deletes the id, keeps the rest), so a student could
    make a notebook ungradeable by copying or renaming a test cell. Such cells become
    ordinary cells here; the first cell with a known id keeps it (nbgrader restores its
    source) and a test cell that is then missing is put back by nbgrader.
    """
    import nbformat

    known = set()
    for src in (course_root / "source").glob("*/*.ipynb"):
        known |= {grade_id(c) for c in nbformat.read(src, as_version=4).cells}
    known.discard(None)
    for path in sorted((course_root / "submitted").rglob("*.ipynb")):
        try:
            nb = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # not graded anyway (precheck)
        seen, changed = set(), False
        for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
            meta = cell.get("metadata", {}) if isinstance(cell, dict) else None
            nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
            if not isinstance(nbg, dict):
                continue
            gid = nbg.get("grade_id")
            if gid in seen or gid not in known:
                del meta["nbgrader"]
                changed = True
            else:
                seen.add(gid)
        if changed:
            path.write_text(json.dumps(nb, indent=1))


def _share_first(cwd: Path, env: dict) -> str:
    """``JUPYTER_PATH`` with the course folder's kernelspecs first, then what was set (the
    feedback pages' MathJax template: ``grading/mathjax.py``)."""
    rest = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    return os.pathsep.join([str(cwd / ".grader" / "share"), *rest])


def _write_hook_config(cwd: Path, extra: list[str]) -> dict[str, str]:
    """A Jupyter config folder whose nbgrader_config.py installs the policy hooks (+ extra)."""
    conf = cwd / ".grader"
    conf.mkdir(exist_ok=True)
    (conf / "trusted.json").write_text(json.dumps(trusted_cells(cwd)))
    lines = [
        "c = get_config()  # noqa: F821",
        "from autograder.grading.sandbox import load_policy as _load_policy",
        f"_policy = _load_policy({str(conf / 'trusted.json')!r})",
        "c.Execute.on_notebook_start = _policy.on_notebook_start",
        "c.Execute.on_cell_error = _policy.on_cell_error",
        *extra,
    ]
    (conf / "nbgrader_config.py").write_text("\n".join(lines) + "\n")
    return {"JUPYTER_CONFIG_DIR": str(conf)}


class UnsandboxedRunner(LocalRunner):
    """No sandbox (``--unsandboxed``): the runner's limits plus the source policy hooks."""

    name = "local (no sandbox)"

    def run(self, argv, cwd, *, timeout, log_path, env=None, lanes=1):
        cwd = Path(cwd)
        env = dict(os.environ if env is None else env)
        dedupe_grade_ids(cwd)
        env.update(_write_hook_config(cwd, [f"c.Execute.kernel_name = {PROBE_KERNEL!r}"]))
        env["JUPYTER_PATH"] = _share_first(cwd, env)
        (cwd / ".grader" / "sandbox-base.json").unlink(missing_ok=True)  # arm(): unsandboxed
        arm(cwd)
        return super().run(argv, cwd, timeout=timeout, log_path=log_path, env=env,
                                 lanes=lanes)


class BwrapRunner(LocalRunner):
    """nbgrader as :class:`LocalRunner` runs it; its kernel inside bubblewrap (see
    ``sandbox/__init__.py``)."""

    name = "bubblewrap sandbox"

    def __init__(self, config: GradeConfig, bwrap: str):
        super().__init__(config)
        self.bwrap = bwrap

    def run(self, argv, cwd, *, timeout, log_path, env=None, lanes=1):
        import secrets
        import tempfile

        cwd = Path(cwd)
        env = dict(os.environ if env is None else env)
        dedupe_grade_ids(cwd)
        # short path: ZeroMQ ipc sockets are Unix sockets (paths < 108 bytes)
        home = Path(tempfile.mkdtemp(prefix="cg-"))
        try:
            uid = 200000 + secrets.randbelow(2**20) if os.geteuid() == 0 else os.geteuid()
            work, ipc = home / "work", home / "ipc"
            work.mkdir()
            ipc.mkdir()
            for nb in sorted((cwd / "submitted").rglob("*.ipynb")):  # this student's only
                shutil.copyfile(nb, work / nb.name)
            os.chmod(home, 0o755)
            os.chown(ipc, uid, uid) if os.geteuid() == 0 else None
            spec = {
                "bwrap": self.bwrap, "uid": uid, "home": str(home),
                "ro": readonly_paths(),
                "env": kernel_env(env),
                "tmp_mb": self.config.tmp_mb,
                "config": self.config.to_dict(),  # the kernel's launcher sets its limits
            }
            from ..autograde.kernel_package import CACHE_VAR

            if env.get(CACHE_VAR):  # the class's kernel cache (grade_student)
                spec["fontlist"] = font_cache(Path(env[CACHE_VAR]) / "mpl")
            (cwd / ".grader").mkdir(exist_ok=True)
            (cwd / ".grader" / "sandbox-base.json").write_text(json.dumps(spec))
            arm(cwd)  # writes sandbox.json: the spec with the probe's mounts
            conf_env = _write_hook_config(cwd, [
                f"c.Execute.kernel_name = {KERNEL_NAME!r}",
                "c.KernelManager.transport = 'ipc'",
                f"c.KernelManager.ip = {str(ipc / 'k')!r}",
            ])
            spec_path = cwd / ".grader" / "sandbox.json"
            kdir = cwd / ".grader" / "share" / "kernels" / KERNEL_NAME
            kdir.mkdir(parents=True, exist_ok=True)
            (kdir / "kernel.json").write_text(json.dumps({
                "argv": [sys.executable, "-m", "autograder.grading.sandbox", "kernel",
                         str(spec_path), "{connection_file}"],
                "display_name": "Python 3 (course sandbox)",
                "language": "python",
                "interrupt_mode": "message",  # a signal would reach bwrap, not the kernel
            }))
            env.update(conf_env)
            env["JUPYTER_PATH"] = _share_first(cwd, env)
            env["JUPYTER_RUNTIME_DIR"] = str(cwd / ".grader" / "runtime")
            return super().run(argv, cwd, timeout=timeout, log_path=log_path, env=env,
                                 lanes=lanes)
        finally:
            shutil.rmtree(home, ignore_errors=True)


def _add_probe_mounts(spec: dict, cwd: Path, uid: int, assignment: str = "_") -> None:
    """Trusted verdicts (``kernel_package``): the kernel's ``autograder`` is the stubbed copy,
    mounted where the real one is; ``transformer_ref`` only when the notebook needs it, and
    then the copy without the chapter's reference implementations, as are the packages that
    are an exercise's reference (``reference.py``); the probe's inputs read-only, and nothing
    writable: the records reach the grader as messages (``records.py``)."""
    from ..autograde.kernel_package import kernel_spec

    probe = kernel_spec(cwd, assignment)
    if probe is None:
        return
    real = probe["real_package"]
    ref = package_dir("transformer_ref")
    spec["ro"] = [p for p in spec["ro"]
                  if p != real and (probe["mount_ref"] or p != ref)]
    inputs = probe["probe"] + "/in"  # a link to the class's cached inputs: bind its target
    spec["ro_as"] = [[probe["package"], real], [os.path.realpath(inputs), inputs]]
    if probe.get("ref_package"):  # without the chapter's references (reference.py)
        spec["ro_as"].append([probe["ref_package"], ref])
    for name, stub in sorted(probe.get("stubs", {}).items()):  # e.g. chapter 07's tiktoken
        real_dir = package_dir(name)
        if real_dir:
            spec["ro_as"].append([stub, real_dir])
    spec["rw"] = []  # the records reach the grader as messages (grading/autograde/records.py)
    spec["env"][PROBE_DIR] = probe["probe"]


PROBE_KERNEL = "course-probe"


def sandbox_spec(cwd: Path, assignment: str = "_") -> dict | None:
    """The sandbox's spec for a kernel of ``assignment``: the runner's base spec plus the
    probe's mounts of that assignment (:func:`kernel_package.prepare`); None without the sandbox."""
    base = Path(cwd) / ".grader" / "sandbox-base.json"
    if not base.exists():
        return None
    spec = json.loads(base.read_text())
    _add_probe_mounts(spec, Path(cwd), spec["uid"], assignment)
    return spec


def arm(cwd: Path, assignment: str = "_") -> None:
    """Point the kernel that starts next at the course folder's trusted-verdict spec of
    ``assignment`` (``kernel_package``), and name it in ``.grader/assignment`` (the source
    policy asks whether its notebooks are judged outside the kernel): with the sandbox,
    ``.grader/sandbox.json`` (what the kernel's launcher reads) is :func:`sandbox_spec`;
    without it, the ``course-probe``
    kernelspec puts the stubbed ``autograder`` first on the path. Called by the runner before
    nbgrader starts and by nbgrader_main before each assignment (whose kernels, started ahead
    by ``prestart.py``, are given their own spec file instead)."""
    cwd = Path(cwd)
    (cwd / ".grader").mkdir(exist_ok=True)
    (cwd / ".grader" / "assignment").write_text(assignment)  # what the source policy asks
    spec = sandbox_spec(cwd, assignment)
    if spec is not None:
        (cwd / ".grader" / "sandbox.json").write_text(json.dumps(spec))
        return
    from ..autograde.kernel_package import kernel_spec

    probe = kernel_spec(cwd, assignment)
    kdir = cwd / ".grader" / "share" / "kernels" / PROBE_KERNEL
    kdir.mkdir(parents=True, exist_ok=True)
    kernel = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
              "display_name": "Python 3 (course probe)", "language": "python"}
    if probe is not None:
        kernel["env"] = {"PYTHONPATH": str(Path(probe["package"]).parent),
                         PROBE_DIR: probe["probe"]}
    (kdir / "kernel.json").write_text(json.dumps(kernel))
