"""The source policy: what a student-written cell that reaches into the grader looks like.

Untrusted code in the same interpreter as the checks can still change what runs after it
(patch a library, install an IPython input transformer, hide tracebacks). Every test cell is
judged outside the kernel (trusted verdicts), so nothing is refused: a deny-list only delays,
and what runs in the kernel cannot change a verdict.

- :func:`policy_problem` reads every cell the student could have written (anything but the
  locked and test cells restored from the source) for what reaches into the grader's
  machinery (``get_ipython``, ``builtins``, ``exec``/``eval``, module attribute assignment,
  dunder internals, ``sys.modules`` ...); the parent flags it (``flags.flags``);
- nbgrader's process gets two hooks (``c.Execute.on_notebook_start`` / ``on_cell_error``):
  code cells a student put above the locked setup cell are moved to just after it
  (:func:`setup_first`), and a cell whose execute reply says *error* but shows no error
  output (a silenced traceback) gets one, so nbgrader scores it 0
  (:meth:`Policy.on_cell_error`).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from .. import pyast
from ..cells import grade_id, is_locked

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
    """The cell's tree (None: a syntax error, which the kernel will report itself)."""
    return pyast.cell_tree(source)[0]


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


class Policy:
    """The hooks nbgrader's Execute preprocessor calls (in nbgrader's trusted process)."""

    def __init__(self, trusted_sources: list[str], trusted_ids=()):
        self.trusted = set(trusted_sources)
        # locked and test cells nbgrader's OverwriteCells has just restored from the
        # gradebook (their source is the instructor's, whatever the submission had)
        self.trusted_ids = set(trusted_ids)

    def _restored(self, cell) -> bool:
        return cell.get("cell_type") == "code" and cell.source in self.trusted and \
            grade_id(cell) in self.trusted_ids and is_locked(cell)

    def on_notebook_start(self, notebook, **_):
        setup_first(notebook, self._restored)

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


def setup_first(notebook, restored) -> int:
    """Move the code cells a student put above the notebook's locked setup cell (the first
    restored locked code cell, ``restored(cell)``) to just after it, in their order: the setup
    runs first in a fresh kernel and binds the checks before any student code. Returns how
    many moved (the parent flags them: ``flags.flags``).

    >>> from nbformat.v4 import new_code_cell, new_notebook
    >>> nb = new_notebook(cells=[new_code_cell("patch()"), new_code_cell("setup"),
    ...                          new_code_cell("answer")])
    >>> setup_first(nb, lambda c: c.source == "setup"), [c.source for c in nb.cells]
    (1, ['setup', 'patch()', 'answer'])
    """
    cells = notebook.cells
    first = next((i for i, c in enumerate(cells) if restored(c)), None)
    if first is None:
        return 0
    above = [c for c in cells[:first] if c.get("cell_type") == "code" and not restored(c)]
    if not above:
        return 0
    keep = [c for c in cells[:first] if not (c.get("cell_type") == "code" and not restored(c))]
    cells[:] = keep + [cells[first]] + above + cells[first + 1:]
    return len(above)


def load_policy(path: str) -> Policy:
    """The grading process's policy, from the trusted cells ``runners`` wrote to ``path``."""
    cells = json.loads(Path(path).read_text())
    return Policy([c["source"] for c in cells], [c["grade_id"] for c in cells])


def trusted_cells(course_root: Path) -> list[dict]:
    """{grade_id, source} of the locked and test cells of the course's source notebooks."""
    import nbformat

    out = []
    for p in sorted((course_root / "source").glob("*/*.ipynb")):
        for cell in nbformat.read(p, as_version=4).cells:
            if cell.cell_type == "code" and is_locked(cell):
                out.append({"grade_id": grade_id(cell), "source": cell.source})
    return out

