"""A student's course folder made ready for the grading process, in the sandbox or not.

The parent's runners (``parent/runner.py``: :class:`~autograder.grading.parent.runner.BwrapRunner`,
``UnsandboxedRunner``) call :func:`sandboxed` or :func:`unsandboxed` before they start the
grading process: :func:`dedupe_grade_ids`, and a Jupyter config folder whose
``nbgrader_config.py`` installs the source policy's hooks (``policy.py``); with the sandbox,
also the ``course-sandbox`` kernelspec whose command is the sandbox's launcher (``kernel.py``)
and the base spec it reads (the bwrap paths, the kernel's environment, the
:class:`~autograder.grading.config.GradeConfig`).

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
from ..env import KERNEL_CACHE
from .bwrap import KERNEL_NAME, font_cache, kernel_env, readonly_paths
from .policy import trusted_cells

PROBE_KERNEL = "course-probe"  # without the sandbox: the kernelspec ``kernel_package.arm`` writes


def dedupe_grade_ids(course_root: Path) -> None:
    """Strip nbgrader metadata from submitted cells whose grade id repeats an earlier one or
    is not the source's: nbgrader 0.9.6 fails the whole notebook on them (``KeyError:
    'grade_id'``). The first cell with a known id keeps it; nbgrader restores a missing test.
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
        "from autograder.grading.sandbox.policy import load_policy as _load_policy",
        f"_policy = _load_policy({str(conf / 'trusted.json')!r})",
        "c.Execute.on_notebook_start = _policy.on_notebook_start",
        "c.Execute.on_cell_error = _policy.on_cell_error",
        *extra,
    ]
    (conf / "nbgrader_config.py").write_text("\n".join(lines) + "\n")
    return {"JUPYTER_CONFIG_DIR": str(conf)}


def unsandboxed(cwd: Path, env: dict) -> dict:
    """The course folder ready for a grading process without the sandbox (``--unsandboxed``):
    the policy's hooks; returns its environment."""
    dedupe_grade_ids(cwd)
    env.update(_write_hook_config(cwd, [f"c.Execute.kernel_name = {PROBE_KERNEL!r}"]))
    env["JUPYTER_PATH"] = _share_first(cwd, env)
    (cwd / ".grader" / "sandbox-base.json").unlink(missing_ok=True)  # arm(): unsandboxed
    return env


def sandboxed(cwd: Path, env: dict, config: GradeConfig, bwrap: str, home: Path) -> dict:
    """The course folder ready for a grading process whose kernels run in bubblewrap (see
    ``sandbox/__init__.py``), their shared folder ``home`` (short: ZeroMQ ipc sockets are Unix
    sockets, paths < 108 bytes); returns the grading process's environment."""
    import secrets

    dedupe_grade_ids(cwd)
    uid = 200000 + secrets.randbelow(2**20) if os.geteuid() == 0 else os.geteuid()
    work, ipc = home / "work", home / "ipc"
    work.mkdir()
    ipc.mkdir()
    for nb in sorted((cwd / "submitted").rglob("*.ipynb")):  # this student's only
        shutil.copyfile(nb, work / nb.name)
    os.chmod(home, 0o755)
    os.chown(ipc, uid, uid) if os.geteuid() == 0 else None
    spec = {
        "bwrap": bwrap, "uid": uid, "home": str(home),
        "ro": readonly_paths(),
        "env": kernel_env(env),
        "tmp_mb": config.tmp_mb,
        "config": config.to_dict(),  # the kernel's launcher sets its limits
    }
    if env.get(KERNEL_CACHE):  # the class's kernel cache (grade_student)
        spec["fontlist"] = font_cache(Path(env[KERNEL_CACHE]) / "mpl")
    (cwd / ".grader").mkdir(exist_ok=True)
    (cwd / ".grader" / "sandbox-base.json").write_text(json.dumps(spec))
    env.update(_write_hook_config(cwd, [
        f"c.Execute.kernel_name = {KERNEL_NAME!r}",
        "c.KernelManager.transport = 'ipc'",
        f"c.KernelManager.ip = {str(ipc / 'k')!r}",
    ]))
    spec_path = cwd / ".grader" / "sandbox.json"  # kernel_package.arm writes it
    kdir = cwd / ".grader" / "share" / "kernels" / KERNEL_NAME
    kdir.mkdir(parents=True, exist_ok=True)
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "autograder.grading.sandbox", "kernel",
                 str(spec_path), "{connection_file}"],
        "display_name": "Python 3 (course sandbox)",
        "language": "python",
        "interrupt_mode": "message",  # a signal would reach bwrap, not the kernel
    }))
    env["JUPYTER_PATH"] = _share_first(cwd, env)
    env["JUPYTER_RUNTIME_DIR"] = str(cwd / ".grader" / "runtime")
    return env
