"""Routes around "from scratch" and "in place", read from a student cell's source (issue 47).

The probe measures both inside the student's process (the operators PyTorch's profiler sees,
whether an input changed), and that process can hide what it did: compute in a child process
the profiler does not watch, replace what the probe calls (``json.dumps``, the profiler) on
a module however it was reached, or call PyTorch's operators below its Python functions
(``torch.ops``, ``torch._C``). Such a route cannot be ruled out from inside the kernel, so
the parent looks for it in the submitted source, where the student cannot hide it from a
reader, and flags the exercise for review (``flags.py``); a flag never changes a score.

>>> sorted(route_flags(ast.parse("import os\\npid = os.fork()")))
['starts a child process (os.fork)']
>>> route_flags(ast.parse("import numpy as np\\ny = np.exp(x)"))
set()
"""

from __future__ import annotations

import ast
import re

CHILD = "starts a child process"
MODULE_SET = "sets an attribute of a module"
MODULE_VALUE = "passes a module as a value"
INTERNALS = "uses PyTorch's internals"

# a new process, whatever module it comes from (os, posix, pty, subprocess, multiprocessing,
# concurrent.futures, torch.multiprocessing); os.system and os.popen only when reached from os
_CHILD_ATTR = re.compile(r"fork|forkpty|fork_exec|posix_spawnp?|spawn[lv]p?e?|exec[lv]p?e?|"
                         r"Popen|ProcessPoolExecutor")
_CHILD_MODULES = ("subprocess", "multiprocessing", "pty", "_posixsubprocess",
                  "torch.multiprocessing")
_OS_ONLY = {"system", "popen"}
# below torch's Python functions, or the profiler the probe reads operators from
_TORCH_INTERNALS = {"ops", "_C", "profiler", "_VariableFunctions", "DisableTorchFunction",
                    "_disabled_torch_function_impl", "TorchFunctionMode", "TorchDispatchMode",
                    "_ExperimentalConfig", "kineto_results", "_profiler", "overrides"}
_INTERNAL_MODULES = ("torch._C", "torch.ops", "torch.profiler", "torch.autograd.profiler",
                     "torch.overrides", "torch.utils._python_dispatch", "torch._ops")
# modules a ``from P import Q`` binds (the rest of such imports bind functions and classes)
SUBMODULES = {
    "torch": {"nn", "optim", "autograd", "linalg", "fft", "distributions", "profiler", "ops",
              "_C", "utils", "cuda", "backends", "multiprocessing", "library", "func", "jit",
              "overrides", "random", "special"},
    "torch.nn": {"functional", "init", "utils", "modules", "parameter"},
    "torch.autograd": {"profiler", "graph", "forward_ad", "functional"},
    "numpy": {"random", "linalg", "fft", "testing", "lib", "core", "ma", "polynomial"},
    "os": {"path"}, "json": {"decoder", "encoder", "scanner"}, "concurrent": {"futures"},
    "matplotlib": {"pyplot", "colors", "cm", "ticker"}, "IPython": {"display", "core"},
}
_HARMLESS_CALLS = {"print", "help", "dir", "repr", "str", "len", "id"}  # a module shown


def module_names(tree: ast.AST) -> set[str]:
    """The names that ``tree``'s imports bind to modules.

    >>> sorted(module_names(ast.parse(
    ...     "import numpy as np, json\\nfrom torch.nn import functional as F, Linear")))
    ['F', 'json', 'np']
    """
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            subs = SUBMODULES.get(node.module or "", set())
            names |= {a.asname or a.name for a in node.names if a.name in subs}
    return names


def _imported(node) -> list[str]:
    """The modules (and ``module.name``s) an import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0:
        return [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
    return []


def _child_import(name: str) -> bool:
    """Whether importing ``name`` brings a way to start a process.

    >>> [_child_import(n) for n in ("subprocess", "os.fork", "os.path", "concurrent.futures")]
    [True, True, False, False]
    """
    top, last = name.split(".")[0], name.rpartition(".")[2]
    return name.startswith(_CHILD_MODULES) or last == "ProcessPoolExecutor" or (
        top in ("os", "posix") and (bool(_CHILD_ATTR.fullmatch(last)) or last in _OS_ONLY))


def _root_name(node) -> str | None:
    """The name an attribute/subscript chain starts from (``json`` of ``json.dumps``)."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node) -> list:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def route_flags(tree: ast.AST, modules: set[str] = frozenset()) -> set[str]:
    """The routes of one cell's tree (see the module's doc); ``modules``: names bound to
    modules elsewhere in the notebook (the setup cell's ``np``, ``torch``) besides the
    cell's own imports.

    >>> t = ast.parse("def patch(m):\\n    m.dumps = str\\npatch(json)\\nsetattr(np, 'e', 3)")
    >>> sorted(route_flags(t, {"json", "np"}))  # doctest: +NORMALIZE_WHITESPACE
    ['passes a module as a value (json)', 'passes a module as a value (np)',
     'sets an attribute of a module (setattr)']
    >>> sorted(route_flags(ast.parse("import torch\\ny = torch.ops.aten._softmax(x, -1, 0)")))
    ["uses PyTorch's internals (torch.ops)"]
    """
    modules = set(modules) | module_names(tree)
    torch_names = {n for n in modules if n == "torch"} | {
        a.asname for node in ast.walk(tree) if isinstance(node, ast.Import)
        for a in node.names if a.name == "torch" and a.asname}
    os_names = {"os", "posix"} | {
        a.asname for node in ast.walk(tree) if isinstance(node, ast.Import)
        for a in node.names if a.name in ("os", "posix") and a.asname}
    found: set[str] = set()
    shown = {id(a) for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id in _HARMLESS_CALLS
             for a in node.args}
    for node in ast.walk(tree):
        for name in _imported(node):
            if _child_import(name):
                found.add(f"{CHILD} ({name})")
            if name.startswith(_INTERNAL_MODULES):
                found.add(f"{INTERNALS} ({name})")
        if isinstance(node, ast.Attribute):
            base = _root_name(node.value)
            if _CHILD_ATTR.fullmatch(node.attr) or node.attr in _OS_ONLY and base in os_names:
                found.add(f"{CHILD} ({base or '...'}.{node.attr})")
            if node.attr in _TORCH_INTERNALS and (base in torch_names or node.attr != "ops"):
                found.add(f"{INTERNALS} ({ast.unparse(node)[:40]})")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("setattr", "delattr"):
            found.add(f"{MODULE_SET} ({node.func.id})")
        for t in _targets(node):
            if isinstance(t, ast.Attribute | ast.Subscript) and _root_name(t) in modules:
                found.add(f"{MODULE_SET} ({ast.unparse(t)[:40]})")
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and child.id in modules and \
                    isinstance(child.ctx, ast.Load) and id(child) not in shown and \
                    not (isinstance(node, ast.Attribute) and node.value is child):
                found.add(f"{MODULE_VALUE} ({child.id})")
    return found
