"""The grading sandbox: the student's kernel runs in bubblewrap; the grader stays outside.

Who runs where (one student, one assignment):

- trusted, outside the sandbox: ``course-grade`` (the parent: results, grades.csv, the class
  gradebook) and, in the limited process the runner starts, nbgrader itself (it reads the
  source notebooks and the student's own gradebook copy, restores the test cells, sends each
  cell to the kernel, scores the outputs, writes the autograded notebook and the feedback);
- untrusted, inside ``bwrap``: only the Jupyter kernel that executes the cells. nbgrader
  starts it through the ``course-sandbox`` kernelspec this module writes, whose command is
  ``python -m autograder.grading.sandbox kernel SPEC CONNECTION_FILE``: it copies the
  connection file where the kernel may read it, sets the limits and ``exec``-s ``bwrap``.

What the kernel sees and may do:

- files: the system (``/usr``, ``/etc`` ...), Python and the packages the notebook imports
  (the virtual environment, ``autograder/``, ``transformer_ref/``), read-only; a working
  folder holding a read-only copy of this student's submission; an empty private ``/tmp``;
  nothing else: not ``solutions/``, the course folder with its gradebook and source
  notebooks, other students' work, the submissions folder or ``/root``;
- no network (``--unshare-net``: a loopback of its own); the kernel talks to nbgrader over
  Unix sockets (ZeroMQ ``ipc``) in a folder bound into the sandbox;
- its own PID namespace (it cannot see or signal the grader) that dies with it
  (``--die-with-parent``): every process it started is gone when grading ends;
- run as an unprivileged user of its own (a random uid, when the grader runs as root), with
  limits: processes (``RLIMIT_NPROC``: a fork bomb stops there), file size
  (``RLIMIT_FSIZE``), and, inherited from the runner, memory (``RLIMIT_AS``) and CPU time;
  wall time is the runner's (per student) and nbgrader's (per cell).

Untrusted code in the same interpreter as the checks can still change what runs after it
(patch a library, install an IPython input transformer, hide tracebacks). nbgrader's process
therefore gets two hooks (``c.Execute.on_notebook_start`` / ``on_cell_error``), sandboxed
or not:

- :func:`policy_problem` reads every cell the student could have written (anything but the
  locked and test cells restored from the source) and a cell that reaches into the grader's
  machinery (``get_ipython``, ``builtins``, ``exec``/``eval``, module attribute assignment,
  dunder internals, ``sys.modules`` ...) is not run: its source becomes a ``raise`` that
  names the reason, so its exercise scores 0 and the feedback says why;
- :meth:`Policy.on_cell_error`: a cell whose execute reply says *error* but shows no error
  output (a silenced traceback) gets one, so nbgrader scores it 0.

Before nbgrader starts, :func:`dedupe_grade_ids` turns submitted cells with a repeated or
unknown grade id into ordinary cells (nbgrader 0.9.6 otherwise fails on the whole notebook).

Not defended: code that gets past the policy (it is a deny-list over the source, e.g. a
library function that hands out a frame or a module the policy does not know) can still
patch the kernel it runs in; only running the checks in another process would stop that. A
fork bomb is stopped by the process limit and leaves nothing behind, but the forked copies
of the kernel share its sockets: the bomber's other rows may or may not be graded.

Example: ``policy_problem("np.allclose = lambda *a, **k: True", {"np"})`` names the problem;
``policy_problem("def f(x):\\n    return x + 1", {"np"})`` is ``None``.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
from pathlib import Path

KERNEL_NAME = "course-sandbox"
NPROC = 128  # tasks (threads count) of the sandbox user: a fork bomb stops here
FSIZE_MB = 256  # largest file the kernel may write (its /tmp is memory)
_PROBE: dict[str, bool] = {}


# ---------------------------------------------------------------- is bubblewrap usable?
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


# ---------------------------------------------------------------- source policy
FORBIDDEN_NAMES = {
    "get_ipython", "__builtins__", "__import__", "eval", "exec", "compile", "globals",
    "locals", "vars", "setattr", "delattr", "breakpoint", "__loader__", "__spec__",
}
FORBIDDEN_MODULES = {
    "builtins", "ctypes", "gc", "inspect", "importlib", "IPython", "ipykernel", "jupyter_client",
    "zmq", "traitlets", "tornado", "nbformat", "nbclient", "nbconvert", "nbgrader", "code",
    "codeop", "types", "marshal", "runpy", "autograder", "transformer_ref", "_thread",
    "sitecustomize", "usercustomize", "site",
}
ALLOWED_DUNDERS = {
    "__init__", "__call__", "__name__", "__doc__", "__len__", "__getitem__", "__repr__",
    "__str__", "__iter__", "__next__", "__enter__", "__exit__", "__qualname__", "__version__",
}
FRAME_ATTRS = {
    "f_globals", "f_locals", "f_back", "f_builtins", "f_code", "gi_frame", "cr_frame",
    "ag_frame", "tb_frame", "tb_next", "co_code", "co_consts",
}
SYS_ALLOWED = {
    "stdout", "stderr", "float_info", "maxsize", "version", "version_info", "platform",
    "byteorder", "getrecursionlimit", "float_repr_style", "exit", "int_info",
}
ALLOWED_MAGICS = {"time", "timeit", "matplotlib"}


def _root(node) -> ast.AST:
    """What an attribute/subscript chain starts from: a name, or the call that made a new
    object. ``getattr(x, ...)`` and ``type(x)`` lead back to ``x`` (no new object).
    """
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript | ast.Starred):
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "type") and node.args):
            node = node.args[0]
        else:
            return node


def _via_type(node) -> bool:
    """Whether an attribute chain goes through ``type(...)`` (so it changes a class)."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "type":
                return True
            if not (isinstance(node.func, ast.Name) and node.func.id == "getattr" and node.args):
                return False
            node = node.args[0]
        else:
            node = node.value
    return False


def _targets(node) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [node.optional_vars]
    if isinstance(node, ast.NamedExpr):
        return [node.target]
    return []


def _flat(targets):
    for t in targets:
        if isinstance(t, ast.Tuple | ast.List):
            yield from _flat(t.elts)
        else:
            yield t


def _scoped(tree: ast.AST) -> tuple[set[int], set[str]]:
    """(ids of nodes in a function, lambda or class body: their own scope, names declared
    ``global`` anywhere). Rebinding a setup-cell name as a *local* variable is harmless."""
    inner: set[int] = set()
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    for node in ast.walk(tree):
        if isinstance(node, scopes):
            body = node.body if isinstance(node.body, list) else [node.body]
            for stmt in body:
                inner |= {id(n) for n in ast.walk(stmt)}
    declared = {n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names}
    return inner, declared


def _magic_problem(tree: ast.AST) -> str | None:
    """IPython magics become ``get_ipython().run_*_magic(name, ...)``: allow a few by name."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Call)
                and isinstance(node.func.value.func, ast.Name)
                and node.func.value.func.id == "get_ipython"):
            first = node.args[0] if node.args else None
            name = first.value if isinstance(first, ast.Constant) else None
            if node.func.attr in ("run_line_magic", "run_cell_magic") and name in ALLOWED_MAGICS:
                node.func.value.func.id = "_allowed_magic"  # checked; not get_ipython any more
            else:
                return f"IPython magic or shell command ({node.func.attr} {name!r})"
    return None


def _parse(source: str) -> ast.AST | None:
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        code = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - not IPython-transformable: try it as Python
        code = source
    try:
        return ast.parse(code)
    except SyntaxError:
        return None  # the kernel will report the syntax error itself


def module_names(sources: list[str]) -> set[str]:
    """Names bound by an import anywhere in ``sources`` (modules and what was imported)."""
    names = set()
    for src in sources:
        tree = _parse(src)
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Import | ast.ImportFrom):
                for a in node.names:
                    names.add((a.asname or a.name).split(".")[0])
    return names


def policy_problem(source: str, protected: set[str]) -> str | None:
    """Why this student-written cell may not run (it reaches into the grader), or None.

    ``protected``: names the locked cells bound (modules, the check functions); they may be
    imported again but not rebound, and nothing reached from them may be assigned to.

    >>> policy_problem("np.allclose = lambda *a, **k: True", {"np"})
    'assigns to `np...` (changes a module or object the grader uses), line 1'
    >>> policy_problem("import numpy as np\\ndef f(x):\\n    return np.exp(x)", {"np"}) is None
    True
    >>> policy_problem("def f(x):\\n    S = x\\n    return S", {"S"}) is None  # a local S
    True
    >>> policy_problem("def f(x):\\n    global S\\n    S = x", {"S"})
    'rebinds `S` (set by the locked setup cell), line 3'
    """
    tree = _parse(source)
    if tree is None:
        return None
    problem = _magic_problem(tree)
    if problem:
        return problem
    tainted = set(protected)
    sys_names = set()
    changed = True
    while changed:  # names bound to modules, or to anything reached from one
        changed = False
        for node in ast.walk(tree):
            new = set()
            if isinstance(node, ast.Import | ast.ImportFrom):
                for a in node.names:
                    new.add((a.asname or a.name).split(".")[0])
                    if (a.name == "sys" and isinstance(node, ast.Import)) or \
                            (isinstance(node, ast.ImportFrom) and node.module == "sys"):
                        sys_names.add((a.asname or a.name).split(".")[0])
            elif (isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr)
                  and node.value is not None):
                root = _root(node.value)
                if isinstance(root, ast.Name) and root.id in tainted:
                    new |= {t.id for t in _flat(_targets(node)) if isinstance(t, ast.Name)}
            if new - tainted:
                tainted |= new
                changed = True
    inner, declared_global = _scoped(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            return f"uses `{node.id}`, line {line}"
        if isinstance(node, ast.Attribute):
            a = node.attr
            if (a.startswith("__") and a.endswith("__") and a not in ALLOWED_DUNDERS) \
                    or a in FRAME_ATTRS:
                return f"uses the internal attribute `.{a}`, line {line}"
            if (isinstance(node.value, ast.Name) and node.value.id in sys_names
                    and a not in SYS_ALLOWED):
                return f"uses `sys.{a}`, line {line}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            else:
                mods = [node.module or ""]
            for m in mods:
                if m.split(".")[0] in FORBIDDEN_MODULES:
                    return f"imports `{m}`, line {line}"
            if isinstance(node, ast.ImportFrom) and node.module == "sys":
                bad = [a.name for a in node.names if a.name not in SYS_ALLOWED]
                if bad:
                    return f"imports `sys.{bad[0]}`, line {line}"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"):
            name = node.args[1] if len(node.args) > 1 else None
            const = isinstance(name, ast.Constant) and isinstance(name.value, str)
            root = _root(node.args[0]) if node.args else None
            if const and (name.value.startswith("__") or name.value in FRAME_ATTRS):
                return f"uses the internal attribute `{name.value}`, line {line}"
            if not const and not (isinstance(root, ast.Name) and root.id not in tainted):
                return f"uses `getattr` with a computed name on a module, line {line}"
        for t in _flat(_targets(node)):
            if (isinstance(t, ast.Name) and t.id in protected
                    and (id(t) not in inner or t.id in declared_global)):
                return f"rebinds `{t.id}` (set by the locked setup cell), line {line}"
            if isinstance(t, ast.Attribute | ast.Subscript):
                root = _root(t)
                if isinstance(root, ast.Name) and root.id in tainted:
                    return (f"assigns to `{root.id}...` (changes a module or object the "
                            f"grader uses), line {line}")
                if _via_type(t):
                    return f"assigns to an attribute of a class (`type(...)`), line {line}"
                if not isinstance(root, ast.Name | ast.Call):
                    return f"assigns to an attribute of a computed object, line {line}"
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and node.name in protected and (id(node) not in inner
                                                or node.name in declared_global):
            return f"redefines `{node.name}` (set by the locked setup cell), line {line}"
    return None


def _nbg(cell) -> dict:
    return (cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}


class Policy:
    """The hooks nbgrader's Execute preprocessor calls (in nbgrader's trusted process)."""

    def __init__(self, trusted_sources: list[str], trusted_ids=()):
        self.trusted = set(trusted_sources)
        # locked and test cells nbgrader's OverwriteCells has just restored from the
        # gradebook (their source is the instructor's, whatever the submission had)
        self.trusted_ids = set(trusted_ids)
        self.protected = module_names(trusted_sources) | {
            n for src in trusted_sources for n in _defined_names(src)
        }

    def on_notebook_start(self, notebook, **_):
        for cell in notebook.cells:
            if cell.get("cell_type") != "code" or cell.source in self.trusted:
                continue
            meta = _nbg(cell)
            if (meta.get("grade_id") in self.trusted_ids and not meta.get("solution")
                    and (meta.get("grade") or meta.get("locked"))):
                continue
            problem = policy_problem(cell.source, self.protected)
            if problem:
                msg = (f"course-grade did not run this cell: it {problem}. Answers may not "
                       f"change the grader, the libraries it uses or the notebook's machinery.")
                cell.source = f"raise RuntimeError({msg!r})"

    @staticmethod
    def on_cell_error(cell, execute_reply=None, **_):
        content = (execute_reply or {}).get("content", {})
        if content.get("status") != "error":
            return
        if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            return
        from nbformat.v4 import new_output

        cell.setdefault("outputs", []).append(new_output(
            "error", ename=str(content.get("ename", "Error")),
            evalue=str(content.get("evalue", "")) + " (its error output was hidden)",
            traceback=[],
        ))


def _defined_names(source: str) -> set[str]:
    """Names a trusted cell binds at top level by assignment or def (e.g. helpers)."""
    tree = _parse(source)
    out = set()
    for node in tree.body if tree else ():
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            out.add(node.name)
        for t in _flat(_targets(node)):
            if isinstance(t, ast.Name):
                out.add(t.id)
    return out


def load_policy(path: str) -> Policy:
    cells = json.loads(Path(path).read_text())
    return Policy([c["source"] for c in cells], [c["grade_id"] for c in cells])


def trusted_cells(course_root: Path) -> list[dict]:
    """{grade_id, source} of the locked and test cells of the course's source notebooks."""
    import nbformat

    out = []
    for p in sorted((course_root / "source").glob("*/*.ipynb")):
        for cell in nbformat.read(p, as_version=4).cells:
            meta = _nbg(cell)
            if cell.cell_type == "code" and (meta.get("grade") or meta.get("locked")) \
                    and not meta.get("solution"):
                out.append({"grade_id": meta.get("grade_id"), "source": cell.source})
    return out


# ---------------------------------------------------------------- runners
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
        known |= {_nbg(c).get("grade_id") for c in nbformat.read(src, as_version=4).cells}
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


def _local_runner():
    from .runner import LocalRunner

    return LocalRunner


class UnsandboxedRunner(_local_runner()):
    """No sandbox (``--unsandboxed``): the runner's limits plus the source policy hooks."""

    name = "local (no sandbox)"

    def run(self, argv, cwd, *, timeout, memory_mb, log_path, env=None):
        env = dict(os.environ if env is None else env)
        dedupe_grade_ids(Path(cwd))
        env.update(_write_hook_config(Path(cwd), _probe_kernel(Path(cwd), env)))
        return super().run(argv, cwd, timeout=timeout, memory_mb=memory_mb,
                           log_path=log_path, env=env)


class BwrapRunner(_local_runner()):
    """nbgrader as :class:`LocalRunner` runs it; its kernel inside bubblewrap (see above)."""

    name = "bubblewrap sandbox"

    def __init__(self, bwrap: str):
        self.bwrap = bwrap

    def run(self, argv, cwd, *, timeout, memory_mb, log_path, env=None):
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
                "ro": _readonly_paths(),
                "env": _kernel_env(env),
            }
            _add_probe_mounts(spec, cwd, uid)
            conf_env = _write_hook_config(cwd, [
                f"c.Execute.kernel_name = {KERNEL_NAME!r}",
                "c.KernelManager.transport = 'ipc'",
                f"c.KernelManager.ip = {str(ipc / 'k')!r}",
            ])
            spec_path = cwd / ".grader" / "sandbox.json"
            spec_path.write_text(json.dumps(spec))
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
            env["JUPYTER_PATH"] = str(cwd / ".grader" / "share")
            env["JUPYTER_RUNTIME_DIR"] = str(cwd / ".grader" / "runtime")
            return super().run(argv, cwd, timeout=timeout, memory_mb=memory_mb,
                               log_path=log_path, env=env)
        finally:
            shutil.rmtree(home, ignore_errors=True)


def _add_probe_mounts(spec: dict, cwd: Path, uid: int) -> None:
    """Trusted verdicts (``verdict.prepare``): the kernel's ``autograder`` is the stubbed copy,
    mounted where the real one is; ``transformer_ref`` only when the notebook needs it; the
    probe's inputs read-only, its records folder writable."""
    from .verdict import kernel_spec

    probe = kernel_spec(cwd)
    if probe is None:
        return
    real = probe["real_package"]
    ref = _package_dir("transformer_ref")
    spec["ro"] = [p for p in spec["ro"]
                  if p != real and (probe["mount_ref"] or p != ref)]
    spec["ro_as"] = [[probe["package"], real], [probe["probe"] + "/in", probe["probe"] + "/in"]]
    spec["rw"] = [probe["probe"] + "/out"]
    spec["env"]["COURSE_PROBE_DIR"] = probe["probe"]
    if os.geteuid() == 0:
        os.chown(probe["probe"] + "/out", uid, uid)


def _probe_kernel(cwd: Path, env: dict) -> list[str]:
    """Unsandboxed: a kernelspec that puts the stubbed ``autograder`` first on the path."""
    from .verdict import kernel_spec

    probe = kernel_spec(cwd)
    if probe is None:
        return []
    kdir = cwd / ".grader" / "share" / "kernels" / "course-probe"
    kdir.mkdir(parents=True, exist_ok=True)
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (course probe)", "language": "python",
        "env": {"PYTHONPATH": str(Path(probe["package"]).parent),
                "COURSE_PROBE_DIR": probe["probe"]},
    }))
    env["JUPYTER_PATH"] = str(cwd / ".grader" / "share")
    return ["c.Execute.kernel_name = 'course-probe'"]


def _package_dir(name: str) -> str | None:
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(list(spec.submodule_search_locations)[0]).resolve())


def _readonly_paths() -> list[str]:
    """What the kernel may read: the system, Python, the venv, the two course packages."""
    paths = ["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"]
    for p in (sys.base_prefix, sys.prefix, Path(sys.executable).resolve().parent.parent):
        paths.append(str(Path(p).resolve()))
    for pkg in ("autograder", "transformer_ref"):
        d = _package_dir(pkg)
        if d:
            paths.append(d)
    seen, out = set(), []
    for p in paths:
        if p not in seen and os.path.exists(p):
            seen.add(p)
            out.append(p)
    return out


def _kernel_env(env: dict[str, str]) -> dict[str, str]:
    keep = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MPLBACKEND",
            "PYTHONWARNINGS", "LANG", "LC_ALL", "COURSE_GRADE_JOB", "COURSE_SMOKE")
    out = {k: env[k] for k in keep if k in env}
    out.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin",
                              "/bin"]),
        HOME="/tmp", TMPDIR="/tmp", IPYTHONDIR="/tmp/.ipython", MPLCONFIGDIR="/tmp/.mpl",
        JUPYTER_RUNTIME_DIR="/tmp/.jupyter", PYTHONDONTWRITEBYTECODE="1",
    )
    out.setdefault("LANG", "C.UTF-8")
    return out


# ---------------------------------------------------------------- in the kernel's process
def bwrap_argv(spec: dict, connection_file: str) -> list[str]:
    """The ``bwrap`` command that runs the kernel (see the module docstring)."""
    home = spec["home"]
    work, ipc = f"{home}/work", f"{home}/ipc"
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
    # /tmp, as CI may have them) must be mounted on top of it, not hidden by it.
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    made.add("/tmp")
    for p in spec["ro"]:
        argv += [*parents(p), "--ro-bind", p, p]
    for src, dest in spec.get("ro_as", []):  # trusted verdicts: the stubbed package, inputs
        argv += [*parents(dest), "--ro-bind", src, dest]
    for p in spec.get("rw", []):  # the probe's records
        argv += [*parents(p), "--bind", p, p]
    argv += [*parents(work), "--ro-bind", work, work, "--bind", ipc, ipc,
             "--chdir", work, "--clearenv"]
    for k, v in spec["env"].items():
        argv += ["--setenv", k, v]
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file]
    if os.geteuid() == 0:  # become the sandbox's own user inside (bwrap drops root's caps)
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                 sys.executable, "-m", "autograder.grading.sandbox", "drop", str(spec["uid"]),
                 "--", *kernel]
    else:
        argv += ["--unshare-user", "--", *kernel]
    return argv


def _kernel_main(spec_path: str, connection_file: str) -> None:
    import resource

    spec = json.loads(Path(spec_path).read_text())
    ipc = Path(spec["home"]) / "ipc"
    conn = ipc / "kernel.json"
    shutil.copyfile(connection_file, conn)
    if os.geteuid() == 0:
        os.chown(conn, spec["uid"], spec["uid"])
        resource.setrlimit(resource.RLIMIT_NPROC, (NPROC, NPROC))
    os.chmod(conn, 0o600)
    fsize = FSIZE_MB * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    argv = bwrap_argv(spec, str(conn))
    os.execv(argv[0], argv)


def _drop_main(uid: int, cmd: list[str]) -> None:
    import ctypes

    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)  # all uids non-zero: no capabilities left
    ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    if sys.argv[1:2] == ["kernel"]:
        _kernel_main(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["drop"] and sys.argv[3:4] == ["--"]:
        _drop_main(int(sys.argv[2]), sys.argv[4:])
    else:
        sys.exit("usage: python -m autograder.grading.sandbox kernel SPEC CONNECTION_FILE")
