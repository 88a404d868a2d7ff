"""The graded kernel's reference packages: the chapter's reference implementations taken out.

A chapter's notebook may use ``transformer_ref`` for what is *not* its exercises (chapter 08
trains ``transformer_ref``'s GPT with the student's loop; chapter 06 hands the student's
``gpt_logits`` a ``transformer_ref.GPT``), while the reference implementation of its own
exercises must not be importable by the process that runs a graded call. Each chapter's row
in the exercise table names those references (``Chapter.reference`` in
``autograder/checks/table.py``): ``"module"`` (all of it), ``"module:function"``,
``"module:Class"`` (every method) or ``"module:Class.method"``.

For a graded kernel :func:`stubbed_ref` writes a copy of ``transformer_ref`` in which every
named function and method keeps its signature but raises :class:`ReferenceUnavailable` (the
code is not in the copy). A package outside ``transformer_ref`` that is a reference
(``tiktoken``, chapter 07) becomes :func:`stub_package`: importable, every attribute raising.
The sandbox mounts these copies where the real packages are; the verdict reads
``ReferenceUnavailable`` in a record as "used the reference implementation".

>>> sorted(references({"feed_forward_blocks"}))[:1]
['transformer_ref.blocks:SelfAttentionBlock.forward']
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
from pathlib import Path

from .. import pyast

EXCEPTION = "ReferenceUnavailable"  # = checks._judge.REFERENCE_UNAVAILABLE (no torch here)
_HELPER = f'''
class {EXCEPTION}(RuntimeError):
    """Raised in a graded kernel by a reference implementation of the chapter's exercises."""


def _unavailable(name):
    raise {EXCEPTION}(
        f"{{name}} is the course's reference implementation of an exercise of this chapter: "
        "it is not available while the notebook is graded (write the exercise yourself)")
'''


def references(modules: set[str]) -> list[str]:
    """The reference entries of the chapters whose check modules are ``modules``."""
    from autograder.checks.table import TABLES

    return sorted({r for ch in TABLES.values() if ch.module in modules for r in ch.reference})


def _targets(entries: list[str], module: str) -> tuple[bool, set[str]]:
    """(whole module?, qualified names) named for ``module`` by ``entries``."""
    whole, names = False, set()
    for e in entries:
        mod, _, name = e.partition(":")
        if mod == module:
            whole = whole or not name
            if name:
                names.add(name)
    return whole, names


def _stub_body(node, qualname: str) -> None:
    doc = ast.get_docstring(node, clean=False)
    body = [ast.Expr(ast.Constant(doc))] if doc is not None else []
    call = pyast.parse(f"_unavailable({qualname!r})").body[0]
    node.body = body + [call]
    node.decorator_list = [d for d in node.decorator_list
                           if ast.unparse(d) in ("staticmethod", "classmethod", "property")]


def _rewrite(source: str, module: str, whole: bool, names: set[str]) -> str:
    """``source`` with the named functions/methods (all of them if ``whole``) stubbed."""
    tree = pyast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if whole or node.name in names:
                _stub_body(node, f"{module}.{node.name}")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and (
                        whole or node.name in names or f"{node.name}.{item.name}" in names):
                    _stub_body(item, f"{module}.{node.name}.{item.name}")
    helper = pyast.parse(_HELPER).body
    at = 0  # after the docstring and ``from __future__`` imports

    def leading(node) -> bool:
        return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) or (
            isinstance(node, ast.ImportFrom) and node.module == "__future__")

    while at < len(tree.body) and leading(tree.body[at]):
        at += 1
    tree.body[at:at] = helper
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def stubbed_ref(entries: list[str], dest: Path) -> None:
    """Write to ``dest`` a copy of ``transformer_ref`` without the references ``entries``
    name (those of ``transformer_ref``; the others are :func:`stub_package`-ed)."""
    src = Path(importlib.util.find_spec("transformer_ref").origin).parent
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in sorted(dest.rglob("*.py")):
        parts = path.relative_to(dest).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        module = ".".join(("transformer_ref", *parts))
        whole, names = _targets(entries, module)
        if whole or names:
            path.write_text(_rewrite(path.read_text(), module, whole, names))


def stub_package(name: str, dest: Path) -> None:
    """A package ``name`` at ``dest`` that imports, and raises on any attribute."""
    dest.mkdir(parents=True)
    (dest / "__init__.py").write_text(
        f'"""Graded kernel: `{name}` is the reference of this chapter\'s exercises."""\n'
        + _HELPER + "\n\ndef __getattr__(attr):\n"
        "    if attr.startswith('__'):\n"
        "        raise AttributeError(attr)\n"
        f"    _unavailable(f'{name}.{{attr}}')\n")


def outside_packages(entries: list[str]) -> list[str]:
    """The packages other than ``transformer_ref`` that ``entries`` name (``tiktoken``)."""
    return sorted({e.partition(":")[0].split(".")[0] for e in entries} - {"transformer_ref"})
