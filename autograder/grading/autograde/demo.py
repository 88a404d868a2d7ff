"""Demonstration cells: course cells that show something and decide nothing; not run when graded.

A chapter marks such a cell with the cell tag ``demo`` in its jupytext source (``# %%
tags=["demo"]``): a plot, a demo training loop, a printout of the student's function on an
example. It is neither an answer nor a test, and no later cell uses what it defines
(:func:`demo_problems` proves it over the chapter's source, ``tests/unit/test_demo_cells.py``).
:class:`SkipDemoCells` replaces the source of every submitted cell whose source is a demo
cell's in the course's own notebook with :data:`NOT_RUN` (the feedback shows it as not run).
The course's notebook decides, never the submission's metadata: a student's own cell, or a
demo cell they edited, runs.

>>> demo_problems([{"cell_type": "code", "source": "x = 1", "metadata": {"tags": ["demo"]}},
...                {"cell_type": "code", "source": "print(x)", "metadata": {}}])
["cell 0 (demo) binds 'x', which cell 1 uses"]
"""

from __future__ import annotations

import ast
import symtable
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from .. import pyast

TAG = "demo"
NOT_RUN = "# demonstration cell: not run when graded (it decides no points)"


def is_demo(cell) -> bool:
    tags = (cell.get("metadata") or {}).get("tags") or []
    return cell.get("cell_type") == "code" and TAG in tags


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _key(source: str) -> str:
    """Sources compared line by line without trailing blanks (an editor may strip them)."""
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _code(source: str) -> str:
    """The cell as Python: IPython's magics and shell lines (``%``, ``!``) dropped."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def _base(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node


def bound_names(source: str) -> set[str]:
    """Global names a cell binds or changes in place: assignments (also ``x.a = ...``,
    ``x[i] = ...``, ``del``), ``def``, ``class``, imports, loop and ``with`` targets."""
    tree = pyast.parse(_code(source))
    names: set[str] = set()
    todo = list(tree.body)
    while todo:  # top-level statements, and blocks nested in them (not function bodies)
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
            continue
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef,
                                ast.ClassDef, ast.GeneratorExp, ast.ListComp, ast.SetComp,
                                ast.DictComp)):
                continue
            targets = []
            if isinstance(sub, (ast.Assign, ast.Delete)):
                targets = sub.targets
            elif isinstance(sub, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor,
                                  ast.NamedExpr)):
                targets = [sub.target]
            elif isinstance(sub, ast.withitem) and sub.optional_vars is not None:
                targets = [sub.optional_vars]
            for t in targets:
                for n in ast.walk(t):
                    n = _base(n)
                    if isinstance(n, ast.Name):
                        names.add(n.id)
            if isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                names.add(sub.name)
        todo += [n for n in getattr(node, "body", []) + getattr(node, "orelse", [])
                 + getattr(node, "finalbody", [])
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return names


def _first_positions(tree, kind) -> dict[str, tuple[int, int]]:
    """{name: (line, col) of its first ``kind`` (Load/Store/Del) at the cell's own level}."""
    first: dict[str, tuple[int, int]] = {}
    todo = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                if isinstance(child, (ast.ListComp, ast.SetComp, ast.DictComp,
                                      ast.GeneratorExp)):
                    todo.append(child.generators[0].iter)  # evaluated in the cell's scope
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, kind):
                pos = (child.lineno, child.col_offset)
                first[child.id] = min(first.get(child.id, pos), pos)
            todo.append(child)
    return first


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


def used_names(source: str) -> set[str]:
    r"""Global names a cell reads that an earlier cell may have bound: read at the cell's own
    level before the cell binds them itself, or read inside a function, class, lambda or
    comprehension of the cell (as a global) when the cell's own level never binds them.

    >>> sorted(used_names("y = 1\nprint(x, y)\ndef f(z):\n    return z + w"))
    ['print', 'w', 'x']
    """
    code = _code(source)
    tree = pyast.parse(code)
    loads = _first_positions(tree, ast.Load)
    stores = _first_positions(tree, (ast.Store, ast.Del))
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef,
                                                           ast.AsyncFunctionDef, ast.ClassDef))}
    imported = {(a.asname or a.name).split(".")[0] for n in tree.body
                if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    top = set(stores) | defined | imported
    used = {n for n, pos in loads.items() if n not in stores or pos <= stores[n]}
    with pyast._LOCK:
        table = symtable.symtable(code, "<cell>", "exec")
    todo = list(table.get_children())
    while todo:
        t = todo.pop()
        todo += t.get_children()
        for sym in t.get_symbols():
            if sym.is_referenced() and sym.is_global() and sym.get_name() not in top:
                used.add(sym.get_name())
    return used


def demo_problems(cells) -> list[str]:
    """Why some demo cell of ``cells`` could change what a later non-demo cell does: a name it
    binds that a later non-demo code cell uses, or nbgrader metadata on it. ``[]``: none."""
    problems = []
    code = [(i, c) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    for pos, (i, cell) in enumerate(code):
        if not is_demo(cell):
            continue
        if (cell.get("metadata") or {}).get("nbgrader"):
            problems.append(f"cell {i} (demo) is an nbgrader cell")
        bound = bound_names(_source(cell))
        for j, later in code[pos + 1:]:
            if is_demo(later):
                continue
            for name in sorted(bound & used_names(_source(later))):
                problems.append(f"cell {i} (demo) binds {name!r}, which cell {j} uses")
    return problems


def demo_sources(nb) -> set[str]:
    """The (compared) sources of the demo cells of a course notebook."""
    return {_key(_source(c)) for c in nb.cells if is_demo(c)}


class SkipDemoCells(NbGraderPreprocessor):
    """Before execution: a submitted cell (no nbgrader metadata) whose source is one of the
    course notebook's demo cells' gets :data:`NOT_RUN` as its source and no outputs. The course
    notebook is ``<source_root>/<assignment>/<notebook>.ipynb`` (``course.write_config`` sets
    ``source_root`` to the course folder's source directory)."""

    source_root = Unicode("source", help="the course's source directory").tag(config=True)

    def preprocess(self, nb, resources):
        meta = resources.get("nbgrader", {})
        path = Path(self.source_root) / str(meta.get("assignment", "")) / \
            f"{meta.get('notebook', '')}.ipynb"
        if not path.is_file():
            return nb, resources
        skip = demo_sources(nbformat.read(path, as_version=4))
        for cell in nb.cells:
            if cell.get("cell_type") == "code" and not (cell.get("metadata") or {}).get(
                    "nbgrader") and _key(_source(cell)) in skip:
                cell.source = NOT_RUN
                cell.outputs = []
        return nb, resources
