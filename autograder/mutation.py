"""Mutation testing of every exercise's check: a wrong answer must never pass.

For each exercise of a solution notebook this module takes the code between the exercise's
``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers, applies one systematic AST mutation at
a time (an axis changed, ``keepdim`` dropped, an off-by-one, a comparison or a mask flipped, a
scale, eps, transpose, ``.detach()`` or ``-inf`` dropped or changed, a dtype changed, operands
swapped, a statement removed, a constant changed ...), defines the mutant in a namespace that
holds the notebook's earlier code, and runs it through the exercise's graded check
(``hidden_check(key, fn)``: visible and hidden cases), in this process.

* a mutant the check rejects is *killed*; it is *named* when the message names a catalogued
  mistake, a metamorphic probe's observation or a general symptom ("Likely mistake: ...");
  it is *probe-only* when a probe (``checks/_metamorphic``) named it and the same check with
  the probes off names nothing (the share the probes add); a mutant stopped by the engine's own
  time limit (it loops, or is far too slow) is killed too but counted apart (*timeout*): no
  check message judged it, so it is in neither the named count nor the share's denominator;
* a mutant the check accepts is compared with the solution on many random inputs derived from
  the check's own cases (each tensor argument re-drawn around its values, non-finite entries
  kept), at the check's tolerance: if it agrees everywhere it is *equivalent* and set aside,
  otherwise it is a *survivor*: a wrong answer that passes, to be killed by a new case;
* a mutant that cannot even be defined (the cell raises when run) is *stillborn*.

No existing mutation library fits: mutmut, cosmic-ray and mutatest mutate module files on
disk and judge a mutant by a test suite's exit code, while ours live in notebook cells and
are judged by one in-process check whose message we read. So the operators are our own
``ast.NodeTransformer`` (:class:`_Mutator`), enumerated deterministically.

    python -m bench.mutation                       # every notebook (COURSE_SMOKE=1 is set)
    python -m bench.mutation --notebook 01 --exercise ex2_1_softmax -v

>>> [m.description for m in mutants("def f(x):\\n    ### BEGIN SOLUTION\\n    return x.sum(dim=-1)"
...                                    "\\n    ### END SOLUTION\\n")][:2]
['dim -1 -> -2', 'dim -1 -> 0']
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import dataclasses
import importlib
import io
import json
import math
import os
import signal
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .grading.env import SMOKE

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

# Methods/functions whose integer positional arguments are axes.
_AXIS_FUNCS = {
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "softmax", "log_softmax",
    "cumsum", "cumprod", "transpose", "swapaxes", "unsqueeze", "squeeze", "flatten", "cat",
    "concatenate", "stack", "split", "chunk", "norm", "var", "std", "size", "logsumexp",
    "diagonal", "movedim", "moveaxis", "roll", "flip", "expand_dims", "prod", "all", "any",
    "count_nonzero", "topk", "sort", "argsort", "gather", "narrow", "unbind", "repeat_interleave",
}  # fmt: skip
_SWAP_FUNCS = {"max": "min", "min": "max", "amax": "amin", "amin": "amax", "argmax": "argmin",
               "argmin": "argmax", "tril": "triu", "triu": "tril", "sum": "mean", "mean": "sum",
               "float": "double", "double": "float", "long": "int", "zeros": "ones",
               "ones": "zeros", "zeros_like": "ones_like", "ones_like": "zeros_like",
               "exp": "log", "log": "exp", "relu": "gelu", "gelu": "relu"}  # fmt: skip
_DTYPES = {"float64": "float32", "float32": "float64", "double": "float", "float": "double",
           "int64": "int32", "int32": "int64", "long": "int", "bool": "uint8",
           "float16": "float32", "bfloat16": "float32"}  # fmt: skip
_TRANSPOSES = {"transpose", "swapaxes", "permute", "movedim", "moveaxis"}
_NONCOMMUTATIVE = (ast.Sub, ast.Div, ast.MatMult, ast.Pow, ast.FloorDiv, ast.Mod)
_CMP_FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
             ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
             ast.In: ast.NotIn, ast.NotIn: ast.In}  # fmt: skip
_BIG_NEGATIVE = -1e9
# str/bytes methods whose constant receiver or arguments are text (a separator, a marker)
_TEXT_METHODS = {"join", "replace", "split", "rsplit", "strip", "rstrip", "lstrip",
                 "startswith", "endswith", "removeprefix", "removesuffix", "partition",
                 "rpartition", "count", "find", "rfind", "index"}  # fmt: skip


def _is_text(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (str, bytes)


# ====================================================================== mutation operators
def _int_of(node):
    """The int a node spells (``3`` or ``-3``), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


def _num(v):
    return ast.UnaryOp(ast.USub(), ast.Constant(-v)) if v < 0 else ast.Constant(v)


def _axis_alternatives(c: int) -> list[int]:
    out = []
    for a in {-1: [-2], -2: [-1], 0: [1], 1: [0]}.get(c, []) + [c + 1, c - 1]:
        if a != c and a not in out:
            out.append(a)
    return out


def _is_float_of(node, *texts: str) -> bool:
    """``float("<text>")`` for one of ``texts`` (lower case; the string's case and surrounding
    blanks do not count)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "float"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and str(node.args[0].value).strip().lower() in texts
    )


def _is_neg_inf(node) -> bool:
    """``float("-inf")``, ``-math.inf`` / ``-np.inf`` / ``-torch.inf``, ``-float("inf")``."""
    if _is_float_of(node, "-inf", "-infinity"):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        o = node.operand
        if (isinstance(o, ast.Attribute) and o.attr == "inf") or _is_float_of(o, "inf"):
            return True
    # torch.finfo(dtype).min: the most negative finite number, used as a stand-in for -inf
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "min"
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "attr", getattr(node.value.func, "id", "")) == "finfo"
    )


def _func_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


class _Mutator(ast.NodeTransformer):
    """Enumerates mutation sites (``target=None``) or applies site number ``target``.

    Sites are numbered in one deterministic traversal, so enumerating and applying agree.
    Only nodes whose line lies in ``lines`` (the solution region) are mutated.
    """

    def __init__(self, lines: set[int], target: int | None = None):
        self.lines = lines
        self.target = target
        self.count = 0
        self.sites: list[tuple[str, str, int]] = []  # (operator, description, line)
        self.skip: set[int] = set()  # ids of constants already mutated as axes
        self.text: set[int] = set()  # ids of str/bytes constants used as text (see visit_Constant)
        self.errors: set[int] = set()  # ids of `errors=` handler names of encode/decode

    def _in(self, node) -> bool:
        return getattr(node, "lineno", None) in self.lines

    def offer(self, node, operator: str, alternatives):
        """``alternatives``: (description, build) pairs; ``build()`` returns the new node."""
        for description, build in alternatives:
            i = self.count
            self.count += 1
            if self.target is None:
                kind, _, what = description.partition(": ")
                self.sites.append((kind, what, node.lineno))
            elif i == self.target:
                new = build()
                return node if new is None else ast.copy_location(new, node)
        return node

    # -------------------------------------------------------------- calls
    def visit_Call(self, node: ast.Call):
        name = _func_name(node)
        axis_args = []
        for kw in node.keywords:
            if kw.arg in ("axis", "dim", "dims", "dim0", "dim1", "axis1", "axis2"):
                c = _int_of(kw.value)
                if c is not None:
                    axis_args.append((kw, c, kw.arg))
        if name in _AXIS_FUNCS:
            for i, a in enumerate(node.args):
                c = _int_of(a)
                if c is not None and not (i == 0 and name in ("cat", "stack", "concatenate")):
                    axis_args.append((("arg", i), c, "axis"))
        for kw in node.keywords:  # keepdim=True -> False is the same as dropping it
            if kw.arg in ("keepdims", "keepdim"):
                self.skip.add(id(kw.value))
        for where, _c, _ in axis_args:
            v = where.value if isinstance(where, ast.keyword) else node.args[where[1]]
            self.skip.update(id(n) for n in ast.walk(v))
        if name in _TEXT_METHODS:  # the separator of a join, what a replace/strip works on
            recv = node.func.value if isinstance(node.func, ast.Attribute) else None
            self.text.update(id(a) for a in [recv, *node.args] if _is_text(a))
        for kw in node.keywords:
            if kw.arg == "errors" and _is_text(kw.value):
                self.errors.add(id(kw.value))
        self.generic_visit(node)
        if not self._in(node):
            return node
        alts = []
        for where, c, label in axis_args:
            for a in _axis_alternatives(c):

                def build(where=where, a=a):
                    if isinstance(where, ast.keyword):
                        where.value = _num(a)
                    else:
                        node.args[where[1]] = _num(a)
                    return node

                alts.append(("axis", f"{label} {c} -> {a}", build))
        for kw in node.keywords:
            if kw.arg in ("keepdims", "keepdim") and getattr(kw.value, "value", None) is True:

                def build(kw=kw):
                    node.keywords.remove(kw)
                    return node

                alts.append(("keepdim", f"{kw.arg}=True dropped", build))
            if kw.arg == "dtype":

                def build(kw=kw):
                    node.keywords.remove(kw)
                    return node

                alts.append(("dtype", "dtype= dropped", build))
        recv = node.func.value if isinstance(node.func, ast.Attribute) else None
        is_method = recv is not None and not (
            isinstance(recv, ast.Name) and recv.id in ("np", "torch", "math", "F", "nn")
        )
        if name in ("sqrt", "rsqrt"):
            arg = recv if is_method and not node.args else (node.args[0] if node.args else None)
            if arg is not None:
                alts.append(("scale", f"{name}(x) -> x", lambda arg=arg: arg))
        if name in _TRANSPOSES:
            arg = recv if is_method else (node.args[0] if node.args else None)
            if arg is not None:
                alts.append(("transpose", f"{name} dropped", lambda arg=arg: arg))
        if name in ("detach", "clone", "contiguous", "astype", "item", "tolist") and is_method:
            op = {"detach": "detach", "astype": "dtype"}.get(name, "call")
            alts.append((op, f".{name}() dropped", lambda: recv))
        if name == "logical_not" and node.args:
            alts.append(("mask", "logical_not dropped", lambda: node.args[0]))
        if name == "where" and len(node.args) == 3:

            def build():
                node.args[1], node.args[2] = node.args[2], node.args[1]
                return node

            alts.append(("mask", "where branches swapped", build))
        if name in ("masked_fill", "masked_fill_") and node.args:

            def build():
                node.args[0] = ast.UnaryOp(ast.Invert(), node.args[0])
                return node

            alts.append(("mask", "masked_fill mask inverted", build))
        if name in _SWAP_FUNCS and (recv is not None or name in ("max", "min")):

            def build(new=_SWAP_FUNCS[name]):
                if isinstance(node.func, ast.Attribute):
                    node.func.attr = new
                else:
                    node.func.id = new
                return node

            op = "dtype" if name in ("float", "double", "long") else "function"
            alts.append((op, f"{name} -> {_SWAP_FUNCS[name]}", build))
        if name in ("matmul", "mm", "bmm", "sub", "div", "pow", "einsum") and len(node.args) >= 2:
            i0 = 1 if name == "einsum" else 0
            if len(node.args) >= i0 + 2:

                def build(i0=i0):
                    node.args[i0], node.args[i0 + 1] = node.args[i0 + 1], node.args[i0]
                    return node

                alts.append(("swap", f"{name} operands swapped", build))
        if name == "range":
            for i, a in enumerate(node.args[:2]):
                for d in (1, -1):

                    def build(i=i, a=a, d=d):
                        op = ast.Add() if d > 0 else ast.Sub()
                        node.args[i] = ast.BinOp(a, op, ast.Constant(1))
                        return node

                    alts.append(("off-by-one", f"range argument {i + 1} {d:+d}", build))
        if _is_neg_inf(node):
            alts += [
                ("-inf", "-inf -> -1e9", lambda: ast.Constant(_BIG_NEGATIVE)),
                ("-inf", "-inf -> 0", lambda: ast.Constant(0.0)),
            ]
        return self.offer(node, "call", [(f"{o}: {d}", b) for o, d, b in alts])

    # -------------------------------------------------------------- attributes, constants
    def visit_Attribute(self, node: ast.Attribute):
        self.generic_visit(node)
        if not self._in(node) or not isinstance(node.ctx, ast.Load):
            return node
        alts = []
        if node.attr in ("T", "mT", "mH", "H"):
            alts.append((f"transpose: .{node.attr} dropped", lambda: node.value))
        owner = node.value.id if isinstance(node.value, ast.Name) else ""
        if owner in ("torch", "np", "numpy") and node.attr in _DTYPES:

            def build():
                node.attr = _DTYPES[node.attr]
                return node

            alts.append((f"dtype: {owner}.{node.attr} -> {_DTYPES[node.attr]}", build))
        if _is_neg_inf(node):
            alts += [
                ("-inf: finfo.min -> -1e9", lambda: ast.Constant(_BIG_NEGATIVE)),
                ("-inf: finfo.min -> 0", lambda: ast.Constant(0.0)),
            ]
        return self.offer(node, "attribute", alts)

    def visit_Constant(self, node: ast.Constant):
        if not self._in(node) or id(node) in self.skip:
            return node
        v = node.value
        alts = []
        if type(v) is bool:
            alts.append((f"constant: {v} -> {not v}", lambda: ast.Constant(not v)))
        elif type(v) is int:
            alts += [(f"constant: {v} -> {v + 1}", lambda: ast.Constant(v + 1))]
            alts += [(f"constant: {v} -> {v - 1}", lambda: _num(v - 1))]
        elif id(node) in self.errors:  # how invalid bytes are handled
            for w in ("strict", "replace", "ignore"):
                if w != v:
                    alts.append((f"text: errors={v!r} -> {w!r}", lambda w=w: ast.Constant(w)))
        elif id(node) in self.text:  # a separator or a marker: emptied, or "" made a space
            e = v[:0]
            w = (b" " if type(v) is bytes else " ") if not v else e
            alts.append((f"text: {v!r} -> {w!r}", lambda w=w: ast.Constant(w)))
        elif type(v) is float and math.isfinite(v):
            new = [0.0, v * 1e3] if 0 < abs(v) < 1e-3 else [0.0, 2 * v] if v else [1.0]
            for w in new:
                alts.append((f"constant: {v:g} -> {w:g}", lambda w=w: ast.Constant(w)))
        return self.offer(node, "constant", alts)

    # -------------------------------------------------------------- operators
    def visit_UnaryOp(self, node: ast.UnaryOp):
        neg_inf = _is_neg_inf(node)
        self.generic_visit(node)
        if not self._in(node):
            return node
        alts = []
        if neg_inf:
            alts += [
                ("-inf: -inf -> -1e9", lambda: ast.Constant(_BIG_NEGATIVE)),
                ("-inf: -inf -> 0", lambda: ast.Constant(0.0)),
            ]
        elif isinstance(node.op, ast.Invert):
            alts.append(("mask: ~ dropped", lambda: node.operand))
        elif isinstance(node.op, ast.Not):
            alts.append(("mask: not dropped", lambda: node.operand))
        elif isinstance(node.op, ast.USub) and _int_of(node) is None:
            if not isinstance(node.operand, ast.Constant):
                alts.append(("sign: unary minus dropped", lambda: node.operand))
        return self.offer(node, "unary", alts)

    def visit_BinOp(self, node: ast.BinOp):
        if isinstance(node.op, ast.Add):  # "a" + s: text glued on
            self.text.update(id(a) for a in (node.left, node.right) if _is_text(a))
        self.generic_visit(node)
        if not self._in(node):
            return node
        alts = []
        op = type(node.op)
        if op in (ast.Mult, ast.Div):
            alts.append((f"scale: `{ast.unparse(node)}` -> left operand", lambda: node.left))
        if op is ast.Mult:
            alts.append((f"scale: `{ast.unparse(node)}` -> right operand", lambda: node.right))
        if issubclass(op, _NONCOMMUTATIVE):

            def build():
                node.left, node.right = node.right, node.left
                return node

            alts.append((f"swap: operands of `{ast.unparse(node)}` swapped", build))
        flips = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
                 ast.FloorDiv: ast.Div}  # fmt: skip
        if op in flips:

            def build(new=flips[op]):
                node.op = new()
                return node

            alts.append((f"operator: {op.__name__} -> {flips[op].__name__}", build))
        if op in (ast.Add, ast.Sub):
            alts.append((f"term: `{ast.unparse(node)}` -> left operand", lambda: node.left))
        return self.offer(node, "binop", alts)

    def visit_Compare(self, node: ast.Compare):
        self.text.update(id(a) for a in (node.left, *node.comparators) if _is_text(a))
        self.generic_visit(node)
        if not self._in(node):
            return node
        alts = []
        for i, o in enumerate(node.ops):
            if type(o) in _CMP_FLIP:

                def build(i=i, o=o):
                    node.ops[i] = _CMP_FLIP[type(o)]()
                    return node

                new = _CMP_FLIP[type(o)].__name__
                alts.append((f"comparison: {type(o).__name__} -> {new}", build))
        return self.offer(node, "compare", alts)

    def visit_BoolOp(self, node: ast.BoolOp):
        self.generic_visit(node)
        if not self._in(node):
            return node

        def build():
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            return node

        return self.offer(node, "boolop", [("boolean: and <-> or", build)])

    def visit_Subscript(self, node: ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for p in parts:  # the index constants are mutated here, as positions
            self.skip.update(id(n) for n in ast.walk(p) if _int_of(n) is not None)
            if isinstance(p, ast.Slice):
                for b in (p.lower, p.upper):
                    if b is not None:
                        self.skip.update(id(n) for n in ast.walk(b))
        self.generic_visit(node)
        if not self._in(node):
            return node
        alts = []
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for j, p in enumerate(parts):
            if isinstance(p, ast.Slice):
                for bound in ("lower", "upper"):
                    b = getattr(p, bound)
                    for d in (1, -1):
                        if b is None and (bound == "lower") != (d > 0):
                            continue  # [:n] -> [1:n] and [n:] -> [n:-1] only

                        def build(p=p, bound=bound, b=b, d=d):
                            if b is None:
                                setattr(p, bound, _num(d))
                            elif _int_of(b) is not None:
                                setattr(p, bound, _num(_int_of(b) + d))
                            else:
                                op = ast.Add() if d > 0 else ast.Sub()
                                setattr(p, bound, ast.BinOp(b, op, ast.Constant(1)))
                            return node

                        alts.append((f"off-by-one: slice {bound} {d:+d}", build))
            else:
                c = _int_of(p)
                if c is not None:
                    for d in (1, -1):

                        def build(j=j, c=c, d=d):
                            if isinstance(node.slice, ast.Tuple):
                                node.slice.elts[j] = _num(c + d)
                            else:
                                node.slice = _num(c + d)
                            return node

                        alts.append((f"off-by-one: index {c} -> {c + d}", build))
        return self.offer(node, "subscript", alts)

    # -------------------------------------------------------------- statements
    def remove_statements(self, tree: ast.Module):
        """Statement removal, after the expression operators (numbering continues).

        A statement is replaced with ``pass`` only when that leaves valid code that can run:
        not a ``return``, not a docstring, and every name it binds is bound before it (a
        removal that leaves a name unbound only gives a NameError, which says nothing).
        """
        for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            bound = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
            self._bodies(fn, fn.body, bound)

    def _bodies(self, fn, body: list, bound: set):
        for i, stmt in enumerate(list(body)):
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # docstring
            binds = {
                n.id
                for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                binds.add(stmt.target.id)
            if (
                self._in(stmt)
                and not isinstance(stmt, ast.Return | ast.FunctionDef | ast.Global)
                and binds <= bound
            ):

                def build(i=i):
                    body[i] = ast.Pass()
                    return None

                line = ast.unparse(stmt).splitlines()[0][:60]
                self.offer(stmt, "statement", [(f"statement: `{line}` removed", build)])
            for sub in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, sub, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    self._bodies(fn, inner, set(bound))
            bound |= binds


@dataclass
class Mutant:
    index: int
    operator: str
    description: str
    line: int  # 1-based line in the cell
    source: str  # the whole mutated cell


def _solution_lines(cell_source: str) -> set[int]:
    lines, inside = set(), False
    for i, text in enumerate(cell_source.splitlines(), start=1):
        if BEGIN in text:
            inside = True
        elif END in text:
            inside = False
        elif inside:
            lines.add(i)
    return lines


def mutants(cell_source: str) -> list[Mutant]:
    """Every single-site mutant of the solution region(s) of ``cell_source``, in order."""
    lines = _solution_lines(cell_source)
    tree = ast.parse(cell_source)
    scout = _Mutator(lines)
    scout.visit(tree)
    scout.remove_statements(tree)
    out = []
    for i, (operator, description, line) in enumerate(scout.sites):
        tree = ast.parse(cell_source)
        m = _Mutator(lines, target=i)
        tree = m.visit(tree)
        m.remove_statements(tree)
        ast.fix_missing_locations(tree)
        src = ast.unparse(tree)
        out.append(Mutant(i, operator, description, line, src))
    # identical code from two sites (e.g. `x.T` and a transpose call) is one mutant
    seen, unique = set(), []
    for m in out:
        if m.source not in seen:
            seen.add(m.source)
            unique.append(m)
    return unique


# ====================================================================== the notebooks
@dataclass
class Exercise:
    notebook: str  # "01_attention"
    grade_id: str  # "ex2_1_softmax"
    key: str  # "attention.softmax"
    cell: str  # the solution cell's source
    test_arg: str  # the expression passed to hidden_check, e.g. "softmax"
    test_imports: str  # the test cell's imports (e.g. 08's `probe as _probe`)
    before: list = field(default_factory=list)  # sources run before the solution cell


def _hidden_call(test_source: str):
    for node in ast.walk(ast.parse(test_source)):
        if (
            isinstance(node, ast.Call)
            and _func_name(node) in ("_hidden_check", "hidden_check")
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
        ):
            return node.args[0].value, ast.unparse(node.args[1])
    return None


def _definitions(source: str) -> str:
    """The top-level imports, definitions and assignments of a course cell (no loops, no
    demos): what later exercises may use."""
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign,
            ast.AnnAssign, ast.If)  # fmt: skip
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    tree.body = [s for s in tree.body if isinstance(s, keep)]
    return ast.unparse(tree)


def exercises(notebook: Path) -> list[Exercise]:
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    out, before, pending = [], [], None
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and pending is not None and _hidden_call(cell.source):
            key, arg = _hidden_call(cell.source)
            imports = [
                s for s in ast.parse(cell.source).body if isinstance(s, ast.Import | ast.ImportFrom)
            ]
            out.append(
                Exercise(
                    notebook.parent.name,
                    meta["grade_id"],
                    key,
                    pending[0],
                    arg,
                    ast.unparse(ast.Module(imports, [])),
                    pending[1],
                )
            )
            pending = None
        elif meta.get("solution"):
            pending = (cell.source, list(before))
            before.append(cell.source)
        elif not meta.get("grade"):
            before.append(cell.source if meta.get("grade_id") == "setup" else
                          _definitions(cell.source))  # fmt: skip
    return out


# ====================================================================== running mutants
class MutantTimeout(BaseException):
    """A mutant ran past its time (a graded cell would time out): not an Exception, so the
    check's own ``except Exception`` does not swallow it."""


# a limit counts this process's CPU time (user + sys), so whether a mutant "ran past its
# time" does not depend on what else the machine runs; a wall-clock cap this many times the
# limit still stops a mutant that waits without computing
WALL_FACTOR = 5


@contextlib.contextmanager
def _time_limit(seconds: float):
    def on_alarm(signum, frame):
        raise MutantTimeout()

    previous = {sig: signal.signal(sig, on_alarm) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds * WALL_FACTOR)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _print_options_kept():
    """numpy's and torch's print options as they were before (a notebook's setup cell sets
    its own, e.g. ``np.set_printoptions(precision=3)``: they must not leak into this process)."""
    import numpy as np
    from torch._tensor_str import PRINT_OPTS

    saved_np, saved_torch = np.get_printoptions(), dict(vars(PRINT_OPTS))
    try:
        yield
    finally:
        np.set_printoptions(**saved_np)
        for k, v in saved_torch.items():
            setattr(PRINT_OPTS, k, v)


@contextlib.contextmanager
def _quiet():
    import numpy as np

    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
        warnings.catch_warnings(),
        np.errstate(all="ignore"),
        _print_options_kept(),
    ):
        warnings.simplefilter("ignore")
        yield


def _define(ex: Exercise, base: dict, cell: str):
    ns = dict(base)
    exec(compile(cell, f"<{ex.grade_id} mutant>", "exec"), ns)
    exec(ex.test_imports, ns)
    return eval(ex.test_arg, ns)


def _base_namespace(ex: Exercise) -> dict:
    ns: dict = {"__name__": "__main__"}
    with _quiet():
        for src in ex.before:
            try:
                exec(compile(src, f"<{ex.notebook} cell>", "exec"), ns)
            except Exception:  # a course cell that needs what we skipped: not our concern
                pass
    return ns


def _check_of(key: str):
    from autograder.checks import _core

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("autograder.checks."):
            for v in vars(mod).values():
                if isinstance(v, _core.Check) and v.key == key:
                    return v
    raise KeyError(key)


def run_check(key: str, fn, seconds: float, check=None, name: bool = True) -> tuple[str, str]:
    """('pass' | 'fail' | 'timeout', message) of the graded check on ``fn`` (``check``: run
    this Check object instead of the registered one, e.g. a deliberately weakened copy).
    ``name=False``: the same verdict, but a failure's message names no catalogued mistake
    (the check does not look for one, which on some chapters costs more than the verdict)."""
    from autograder.checks._core import CheckFailed, _run, hidden_check

    with _quiet():
        try:
            with _time_limit(seconds):
                if check is None:
                    hidden_check(key, fn, diagnose=name)
                else:
                    _run(check, fn, hidden=True, diagnose=name)
        except MutantTimeout:
            return "timeout", "ran past its time"
        except CheckFailed as e:
            return "fail", str(e)
        except Exception as e:  # the check machinery itself broke on this mutant
            return "fail", f"check raised {type(e).__name__}: {e}"
    return "pass", ""


# ---------------------------------------------------------------- equivalence
class _Perturb:
    """Random inputs of the same kind as a case's: float tensors/arrays re-drawn around their
    values (non-finite entries kept where they are: masks stay masks), random generators
    re-seeded, everything else unchanged. ``changed`` counts what it changed."""

    def __init__(self, seed: int, generators_only: bool = False):
        import numpy as np

        self.rng = np.random.default_rng(seed)
        self.changed = 0
        self.generators_only = generators_only  # a statistic: its target depends on the rest

    def __call__(self, x):
        import numpy as np
        import torch

        rng = self.rng
        if self.generators_only and not isinstance(x, np.random.Generator | torch.Generator):
            return tuple(self(a) for a in x) if type(x) is tuple else x
        if type(x) is torch.Tensor and x.is_floating_point() and x.numel():
            self.changed += 1
            finite = torch.isfinite(x)
            scale = float(x[finite].double().std()) if int(finite.sum()) > 1 else 1.0
            scale = scale if math.isfinite(scale) and scale > 0 else 1.0
            g = torch.Generator().manual_seed(int(rng.integers(2**31)))
            noise = torch.randn(x.shape, generator=g, dtype=torch.float64) * scale
            new = x.double().nan_to_num(0.0, 0.0, 0.0) * float(rng.uniform(-1.5, 1.5)) + noise
            new = torch.where(finite, new.to(x.dtype), x)
            return torch.from_numpy(self._edge(new.numpy())) if x.dtype != torch.bfloat16 else new
        if type(x) is np.ndarray and x.dtype.kind == "f" and x.size:
            self.changed += 1
            finite = np.isfinite(x)
            scale = float(x[finite].std()) if finite.sum() > 1 else 1.0
            scale = scale if math.isfinite(scale) and scale > 0 else 1.0
            with np.errstate(all="ignore"):
                new = np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0) * rng.uniform(-1.5, 1.5)
                new = new + rng.standard_normal(x.shape) * scale
            return self._edge(np.where(finite, new.astype(x.dtype), x))
        if type(x) is int and x >= 2:  # a size: keep its parity (d_model stays even)
            self.changed += 1
            return x + 2 * int(rng.integers(1, 4))
        if type(x) is bytes and len(x) >= 2:  # a piece: a random run of its bytes
            self.changed += 1
            i = int(rng.integers(0, len(x) - 1))
            return x[i : int(rng.integers(i + 1, len(x) + 1))]
        if type(x) is str and len(x) >= 10 and " " in x:  # a text: a random run of its words
            self.changed += 1
            w = x.split(" ")
            i = int(rng.integers(0, len(w)))
            return " ".join(w[i : int(rng.integers(i + 1, len(w) + 1))])
        if isinstance(x, np.random.Generator):
            self.changed += 1
            return np.random.default_rng(int(rng.integers(2**31)))
        if type(x) is torch.Generator:
            self.changed += 1
            return torch.Generator().manual_seed(int(rng.integers(2**31)))
        if isinstance(x, torch.nn.Module):
            self.changed += 1
            x = copy.deepcopy(x)
            g = torch.Generator().manual_seed(int(rng.integers(2**31)))
            with torch.no_grad():
                for p in x.parameters():
                    if p.is_floating_point():
                        p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5 * p.std())
            return x
        if type(x) is tuple:
            return tuple(self(a) for a in x)
        return x

    def _edge(self, a):
        """Now and then an edge the check's cases may lack: huge values (1000 times larger)
        or one slice along the last axis all -inf (a fully masked row)."""
        import numpy as np

        mode = self.rng.random()
        a = np.array(a, copy=True)
        with np.errstate(all="ignore"):
            if mode < 0.2:
                a = (a * 1e3).astype(a.dtype)
            elif mode < 0.4 and a.ndim >= 1:
                index = tuple(int(self.rng.integers(0, n)) for n in a.shape[:-1])
                a[index] = -np.inf
        return a


def _is_nan(x) -> bool:
    """A number (or 0-d tensor/array) that is nan."""
    try:
        return math.isnan(float(x))
    except (TypeError, ValueError, RuntimeError):
        return False


def _variant(case, seed: int):
    """A ``Case.call`` that builds the same random variant of ``case``'s arguments each time."""

    def make():
        perturb = _Perturb(seed, generators_only=case.kind == "statistic")
        return perturb(case.call() if case.call is not None else case.args)

    return make


def _expected(check, case, fn):
    """The reference ``fn``'s answer to ``case`` in the shape the check compares."""
    import torch

    from autograder.checks import _core

    args, out = _core._call(check, fn, case)
    if case.kind != "grad":
        return out
    if type(out) in (tuple, list):
        out = out[0]
    torch.sum(out * case.probe).backward()
    grads = tuple(args[i].grad.detach().clone() for i in case.grad_args)
    return out.detach().clone(), grads


def equivalent(ex: Exercise, ref, mutant, rounds: int, seed: int = 0) -> tuple[bool, str]:
    """Whether ``mutant`` agrees with the solution ``ref`` on ``rounds`` random variants of
    every case of the check, compared as the check compares (same tolerance). For a
    measured statistic the variants re-seed the random generator and the target stays."""
    from autograder.checks import _core

    check = _check_of(ex.key)
    new_cases, changed = [], 0
    for n, case in enumerate(check.cases):
        for r in range(rounds):
            make = _variant(case, seed * 1000 + n * 100 + r)
            # the variant's arguments, as ``make()`` builds them: is there anything to vary?
            perturb = _Perturb(seed * 1000 + n * 100 + r, case.kind == "statistic")
            args = perturb(case.call() if case.call is not None else case.args)
            if not perturb.changed:
                continue
            changed += 1
            kwargs = {k: _Perturb(r, case.kind == "statistic")(v) for k, v in case.kwargs.items()}
            # a case's other generators (``samples``) rebuild its *original* arguments: they
            # fit a statistic's variant (same target, generators re-seeded), not a variant
            # whose arguments were re-drawn (08's sampler: other logits, same seeds there)
            others = {} if case.kind == "statistic" else {"samples": (), "spread": None}
            trial = dataclasses.replace(
                case, args=args, call=make, kwargs=kwargs, label=f"{case.label} #{r}", **others
            )
            if case.kind != "statistic":
                try:
                    with _quiet(), _time_limit(60):
                        trial = dataclasses.replace(trial, expected=_expected(check, trial, ref))
                except BaseException:  # noqa: B036  (the solution itself refuses this input)
                    continue
            new_cases.append(dataclasses.replace(trial, hidden=False))
    if not new_cases:
        return False, "no random variant of the check's cases could be made"
    # a number the reference gives as nan (a fully -inf row, huge inputs): the check's own
    # comparison fails any nan, so here the mutant agrees when it gives nan too
    nan_cases = [c for c in new_cases if c.kind == "scalar" and _is_nan(c.expected)]
    for c in nan_cases:
        out = None
        try:
            with _quiet(), _time_limit(60):
                out = _core._call(check, mutant, c)[1]
            same = _is_nan(out)
        except BaseException:  # noqa: B036
            same = False
        if not same:
            return False, f"differs on a random input: {c.label}: nan expected, got {out!r:.60}"
    new_cases = [c for c in new_cases if not any(c is n for n in nan_cases)]
    if not new_cases:
        return True, f"agrees on {len(nan_cases)} random inputs"
    probe = dataclasses.replace(check, cases=tuple(new_cases), mistakes=(), post=None)
    with _quiet():
        try:
            with _time_limit(120):
                _core._run(probe, mutant, hidden=True)
        except MutantTimeout:
            return False, "timed out on random inputs"
        except _core.CheckFailed as e:
            lines = str(e).splitlines()
            return False, "differs on a random input: " + " ".join(s.strip() for s in lines[:2])
        except Exception as e:
            return False, f"raised {type(e).__name__} on a random input"
    return True, f"agrees on {len(new_cases)} random inputs"


# ---------------------------------------------------------------- one exercise
@dataclass
class Result:
    mutant: Mutant
    outcome: str  # killed | equivalent | survivor | stillborn
    named: bool = False
    message: str = ""
    timeout: bool = False  # killed by the engine's time limit, not by the check's message
    probe_only: bool = False  # named by a probe, unnamed with the probes off


def run_exercise(
    ex: Exercise,
    sample: int = 0,
    seconds: float = 20.0,
    rounds: int = 8,
    check=None,
    name: bool = True,
) -> list[Result]:
    """Run every mutant (or every ``sample``-th, deterministically) of one exercise
    (``check``: judge with this Check object instead of the registered one). ``name=False``:
    the same outcome for every mutant, but none is *named* (the check does not look for the
    catalogued mistake, the costly part of a failure on some chapters): for callers that need
    only the outcomes, e.g. the 0-survivor test. The named share needs ``name=True``."""
    # the chapter's checks are imported here, never under a mutant's time limit (an import
    # cut short leaves half a registry behind)
    importlib.import_module(f"autograder.checks.{ex.key.split('.')[0]}")
    base = _base_namespace(ex)
    with _quiet():
        ref = _define(ex, base, ex.cell)
    status, msg = run_check(ex.key, ref, seconds * 5, check)
    if status != "pass":
        raise RuntimeError(f"{ex.notebook} {ex.grade_id}: the solution fails its check: {msg}")
    all_mutants = mutants(ex.cell)
    chosen = all_mutants[::sample] if sample > 1 else all_mutants
    results = []
    for m in chosen:
        try:
            with _quiet(), _time_limit(seconds):
                fn = _define(ex, base, m.source)
        except BaseException as e:  # noqa: B036  (a mutant may even loop at definition)
            results.append(Result(m, "stillborn", message=f"{type(e).__name__}: {e}"))
            continue
        status, msg = run_check(ex.key, fn, seconds, check, name)
        if status == "timeout":
            results.append(Result(m, "killed", message="timeout: " + msg, timeout=True))
        elif status == "fail":
            named = name and "Likely mistake:" in msg
            results.append(Result(m, "killed", named, msg,
                                  probe_only=named and _only_a_probe(ex, fn, msg, seconds, check)))
        else:
            same, why = equivalent(ex, ref, fn, rounds, seed=m.index)
            results.append(Result(m, "equivalent" if same else "survivor", message=why))
    return results


def _only_a_probe(ex: Exercise, fn, msg: str, seconds: float, check) -> bool:
    """Whether ``msg`` is a probe's and the check names nothing with the probes off."""
    from autograder.checks import _metamorphic

    if _metamorphic.MARK not in msg:
        return False
    with _metamorphic.disabled():
        status, without = run_check(ex.key, fn, seconds, check)
    return status == "fail" and "Likely mistake:" not in without


# ====================================================================== report
def summarize(results: list[Result]) -> dict:
    """Counts per outcome. ``named_share`` is named / (killed - timeout): the share of the
    mutants a check's message rejected whose message names the mistake; a mutant the
    engine's time limit stopped got no message and is counted under ``timeout`` only."""
    c = Counter(r.outcome for r in results)
    killed = c["killed"]
    timeout = sum(r.timeout for r in results if r.outcome == "killed")
    named = sum(r.named for r in results if r.outcome == "killed")
    probe_only = sum(r.probe_only for r in results if r.outcome == "killed")
    judged = killed - timeout
    return {
        "mutants": len(results),
        "stillborn": c["stillborn"],
        "equivalent": c["equivalent"],
        "killed": killed,
        "survivors": c["survivor"],
        "timeout": timeout,
        "named": named,
        "named_share": round(named / judged, 3) if judged else None,
        "probe_only": probe_only,
    }


def notebooks(pattern: str | None = None) -> list[Path]:
    paths = sorted(SOLUTIONS.glob("*/*.ipynb"))
    return [p for p in paths if not pattern or p.parent.name.startswith(pattern)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.mutation", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--notebook", help="a notebook prefix, e.g. 01 or 07_bpe")
    ap.add_argument("--exercise", help="a grade id (ex<N>_<M>_<function>) or check key")
    ap.add_argument("--sample", type=int, default=0, help="only every N-th mutant")
    ap.add_argument("--seconds", type=float, default=20.0, help="CPU-time limit per mutant")
    ap.add_argument("--rounds", type=int, default=8, help="random variants per case")
    ap.add_argument("--json", type=Path, help="write every mutant's outcome here")
    ap.add_argument("-v", "--verbose", action="store_true", help="list unnamed kills too")
    a = ap.parse_args(argv)
    os.environ.setdefault(SMOKE, "1")
    table, dump, survivors = [], [], 0
    for nb in notebooks(a.notebook):
        per_nb: list[Result] = []
        for ex in exercises(nb):
            if a.exercise and a.exercise not in (ex.grade_id, ex.key):
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            res = run_exercise(ex, a.sample, a.seconds, a.rounds)
            s = summarize(res)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(
                f"{nb.parent.name[:2]} {ex.grade_id:34s} mutants {s['mutants']:4d}  "
                f"equivalent {s['equivalent']:3d}  killed {s['killed']:4d}  "
                f"survivors {s['survivors']:2d}  named {s['named_share']}  "
                f"probe-only {s['probe_only']:2d}  "
                f"timeout {s['timeout']:2d}  "
                f"stillborn {s['stillborn']:3d}  ({wall:.0f} s, cpu {cpu:.0f} s)",
                flush=True,
            )
            for r in res:
                show = r.outcome == "survivor" or (
                    a.verbose and r.outcome in ("killed", "equivalent") and not r.named
                )
                if show:
                    first = r.message.splitlines()[1].strip() if "\n" in r.message else r.message
                    print(
                        f"    {r.outcome.upper():10s} line {r.mutant.line}: "
                        f"{r.mutant.description}  | {first[:110]}"
                    )
            per_nb += res
            dump += [
                {
                    "notebook": ex.notebook,
                    "exercise": ex.grade_id,
                    "key": ex.key,
                    "operator": r.mutant.operator,
                    "description": r.mutant.description,
                    "line": r.mutant.line,
                    "outcome": r.outcome,
                    "named": r.named,
                    "probe_only": r.probe_only,
                    "timeout": r.timeout,
                    "message": r.message,
                }  # fmt: skip
                for r in res
            ]
        if per_nb:
            table.append((nb.parent.name, summarize(per_nb)))
    print()
    print(
        "| notebook | mutants | equivalent | killed | survivors | timeout "
        "| named (share of killed - timeout) | probe-only |"
    )
    print("|---|---|---|---|---|---|---|---|")
    tot: Counter = Counter()
    for name, s in table:
        share = f"{s['named_share']:.0%}" if s["named_share"] is not None else "-"
        print(
            f"| {name} | {s['mutants']} | {s['equivalent']} | {s['killed']} | "
            f"{s['survivors']} | {s['timeout']} | {s['named']} ({share}) | {s['probe_only']} |"
        )
        tot.update({k: v for k, v in s.items() if isinstance(v, int)})
        survivors += s["survivors"]
    if len(table) > 1:
        judged = tot["killed"] - tot["timeout"]
        share = f"{tot['named'] / judged:.0%}" if judged else "-"
        print(
            f"| all | {tot['mutants']} | {tot['equivalent']} | {tot['killed']} | "
            f"{tot['survivors']} | {tot['timeout']} | {tot['named']} ({share}) | "
            f"{tot['probe_only']} |"
        )
    print("(mutants counts every single-site mutant; stillborn ones, which cannot be defined,")
    print(" are in mutants but in no other column; timeout: killed by the engine's time limit,")
    print(" counted in killed, not in the named share; probe-only: named only by a metamorphic")
    print(" probe, unnamed with the probes off)")
    if a.json:
        a.json.write_text(json.dumps(dump, indent=1, ensure_ascii=False) + "\n")
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main())
