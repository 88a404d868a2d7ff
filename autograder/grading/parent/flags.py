"""Static flags: what a submission that tries to get around the grader looks like in its source.

Read in the parent (``course-grade``), from the submitted bytes, never by running them; the
row says ``flagged: <what>`` for the instructor to review (:func:`flags`). A flag never changes
a score by itself. What the source policy (``sandbox.policy``) finds is flagged here; no cell
is refused (every test cell is judged outside the kernel).
"""

from __future__ import annotations

import ast
import re

from .. import pyast
from ..cells import nbg as _nbg
from ..sandbox.policy import module_names, policy_problem
from . import routes
from .rebuild import NotANotebook, student_cells


def _by_name(reasons: dict[str, str]) -> dict[str, str]:
    """{name: reason} from {reason: "name name ..."}."""
    return {name: why for why, names in reasons.items() for name in names.split()}


_FLAG_ATTRS = _by_name({
    "introspection of frames": "f_globals f_locals f_back tb_frame gi_frame _getframe",
    "introspection of globals/closures": "__globals__ __closure__ cell_contents __code__ __dict__",
    "rewrites cells (input transformer)":
        "input_transformers_cleanup input_transformers_post input_transformer_manager",
    "rewrites cells (custom magic)": "register_magic_function",
    "rewrites cells (exception handler)": "set_custom_exc",
    "decodes encoded code": "fromhex b64decode",
    "builtin obtained by name": "__builtins__",
})
_FLAG_NAMES = {
    "exec": "exec/eval", "eval": "exec/eval", "compile": "exec/eval",
    "__import__": "builtin obtained by name", "globals": "introspection of globals/closures",
    "vars": "introspection of globals/closures", "get_ipython": "reaches into IPython",
    # the given answers a later test cell hands the grader (README "One mistake costs one
    # exercise"): the dict, and the kernel's input history that still holds its text
    "_given": "reads a test cell's given answers", "In": "reads the kernel's input history",
    "_ih": "reads the kernel's input history",  # (not _i, _ii: common loop names)
}
_FLAG_MODULES = _by_name({
    "introspection of frames": "inspect gc ctypes",
    "builtin obtained by name": "builtins importlib",
    "decodes encoded code": "codecs base64",
    "reaches into the grader": "autograder",
    "imports the reference implementation": "transformer_ref",
})


def _folded(node) -> str | None:
    """The text of a string constant or a sum of them (``'__glo' + 'bals__'``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded(node.left), _folded(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def _source_flags(source: str, modules: set[str] = frozenset()) -> set[str]:
    """Reasons to flag one student-written cell (an allowed cell magic's body included);
    ``modules``: the names the notebook's imports bind to modules (``routes.route_flags``:
    the routes around "from scratch" and "in place").

    >>> sorted(_source_flags("import torch\\ntorch.library.Library('aten', 'IMPL')"))
    ['operator re-registration (torch.library)']
    >>> _source_flags("def f(x):\\n    return x + 1")
    set()
    >>> sorted(_source_flags("src = _i7 + _given['softmax']"))
    ["reads a test cell's given answers", "reads the kernel's input history"]
    """
    tree, transformed = pyast.cell_tree(source)
    if tree is None or not transformed:  # not Python: the kernel reports it
        return set()
    found = routes.route_flags(tree, modules)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ("getattr", "setattr") \
                and id(node) not in called:
            found.add(f"alias of {node.id}")
        text = _folded(node)
        if text is not None and re.fullmatch(r"[\w.]+", text):  # a name, not prose
            if text in _FLAG_ATTRS:
                found.add(_FLAG_ATTRS[text])
            if re.search(r"\b(__import__|__builtins__|builtins)\b", text):
                found.add("builtin obtained by name")
        if isinstance(node, ast.Attribute):
            if node.attr in ("library", "Library") or (
                    node.attr in ("impl", "define", "register_kernel")
                    and "library" in ast.unparse(node.value)):
                found.add("operator re-registration (torch.library)")
            if node.attr in _FLAG_ATTRS:
                found.add(_FLAG_ATTRS[node.attr])
        elif isinstance(node, ast.Name) and node.id in _FLAG_NAMES:
            found.add(_FLAG_NAMES[node.id])
        elif isinstance(node, ast.Name) and re.fullmatch(r"_i\d+", node.id):
            found.add("reads the kernel's input history")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            for m in mods:
                top = m.split(".")[0]
                if top in _FLAG_MODULES:
                    found.add(_FLAG_MODULES[top])
                if m.startswith("torch.library"):
                    found.add("operator re-registration (torch.library)")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch") and \
                    any(a.name in ("library", "Library") for a in node.names):
                found.add("operator re-registration (torch.library)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "run_cell_magic" and len(node.args) >= 3 \
                and isinstance(node.args[2], ast.Constant) and isinstance(node.args[2].value, str):
            found |= _source_flags(node.args[2].value, modules)  # %%time's body
    return found


def flags(sent: bytes | list[dict], notebook) -> dict[str, str]:
    """{test grade_id: ``flagged: <what>``} for a submitted notebook (bytes, or its cells as
    read); a test with nothing to flag is absent. Student-written code cells are read: an
    answer cell's reasons go on the tests that grade it, a changed test cell's on that test,
    the rest on every row after ``notebook-wide:``. What the source policy would have refused
    (it refuses nothing in a notebook judged outside) is flagged here.
    """
    if isinstance(sent, bytes):
        try:
            sent = student_cells(sent)
        except NotANotebook:  # not graded anyway (precheck)
            return {}
    return _flags(sent, notebook)


def _flags(cells: list[dict], notebook) -> dict[str, str]:
    release = {_nbg(c).get("grade_id"): c for c in notebook.release.cells if _nbg(c)}
    tests_of = {}  # answer cell -> the tests that grade it
    for g in notebook.grade_cells:
        for sid in g.solution_ids:
            tests_of.setdefault(sid, []).append(g.grade_id)
    locked = [c.source for c in notebook.release.cells
              if c.cell_type == "code" and _nbg(c).get("locked")]
    # modules and the names the locked cells import (the checks): rebinding a helper a given
    # cell defines (chapter 07's pretoken_counts) is the student's own business
    protected = module_names(locked)
    modules = _modules(locked + [c["source"] for c in cells if c.get("cell_type") == "code"])
    per_test: dict[str, list[str]] = {}
    everywhere: list[str] = []
    seen_setup = False
    for cell in cells:
        meta = _nbg(cell)
        gid = meta.get("grade_id")
        ref = release.get(gid) if gid is not None else None
        if ref is not None and _nbg(ref).get("locked") and not _nbg(ref).get("solution"):
            if cell.get("cell_type") == "code" and not seen_setup and not _nbg(ref).get("grade"):
                seen_setup = True
            changed = [k for k in ("grade", "solution", "locked", "points")
                       if meta.get(k) != _nbg(ref).get(k)]
            if changed:
                why = f"nbgrader flags of locked cell {gid} changed ({', '.join(changed)})"
                (per_test.setdefault(gid, []) if _nbg(ref).get("grade") else everywhere)\
                    .append(why)
            continue  # its source is restored by nbgrader
        if cell.get("cell_type") != "code":
            continue
        source = cell["source"]
        reasons = sorted(_source_flags(source, modules)) + _reference_uses(source, ref, notebook)
        if problem := policy_problem(source, protected):
            reasons.append(f"reaches into the grader: {problem}")
        if not seen_setup and source.strip():
            everywhere.append("a code cell above the setup cell (run after it)")
        tests = tests_of.get(gid, []) if ref is not None else []
        if tests:
            for t in tests:
                per_test.setdefault(t, []).extend(reasons)
        else:
            where = f"answer cell {gid}" if ref is not None else "a cell the student added"
            everywhere += [f"{r} (in {where})" for r in reasons]
    out = {}
    for g in notebook.grade_cells:
        mine = list(dict.fromkeys(per_test.get(g.grade_id, [])))
        wide = list(dict.fromkeys(everywhere))
        parts = mine + ([f"notebook-wide: {'; '.join(wide)}"] if wide else [])
        if parts:
            out[g.grade_id] = f"flagged: {'; '.join(parts)}"[:400]
    return out


def _modules(sources: list[str]) -> set[str]:
    """The names the imports of ``sources`` (cells) bind to modules (``routes``)."""
    names: set[str] = set()
    for source in sources:
        tree, _ = pyast.cell_tree(source)
        if tree is not None:
            names |= routes.module_names(tree)
    return names


def _reference_names(release) -> tuple[set, set]:
    """Names the release's setup cell imports from the reference's training and sampling code
    (chapter 08's demos need them): (all of them, those renamed ``reference_...``)."""
    names, renamed = set(), set()
    for cell in release.cells:
        if cell.cell_type != "code" or _nbg(cell).get("grade_id") != "setup":
            continue
        tree = pyast.parse(cell.source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and re.match(
                    r"transformer_ref\.(train|sampling)\b", node.module or ""):
                for a in node.names:
                    names.add(a.asname or a.name)
                    if a.asname and a.asname != a.name:
                        renamed.add(a.asname)
    return names, renamed


def _reference_uses(source: str, ref, notebook) -> list[str]:
    """``uses the reference implementation (name)`` for a student cell that uses a name the
    setup cell bound to the reference's training/sampling code: in an answer cell any of them,
    elsewhere (a cell the release does not have verbatim) a ``reference_...`` name."""
    names, renamed = _reference_names(notebook.release)
    if not names:
        return []
    answer = ref is not None and bool(_nbg(ref).get("solution"))
    if not answer and any(source == c.source for c in notebook.release.cells):
        return []
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return []
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & (names if answer
                                                                        else renamed)
    return [f"uses the reference implementation ({n})" for n in sorted(used)]

