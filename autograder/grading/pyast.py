"""``ast.parse`` that is safe in the grader's threads.

CPython before 3.11.8 keeps the AST converter's recursion depth in interpreter-wide state
(gh-106905). When two threads of the grader's pool parse at once and the GIL changes hands in
the middle (a ``__del__`` run by the garbage collector is enough), one of them raises
``SystemError: AST constructor recursion depth mismatch`` and that student is "not graded".
Every parse in the grading package goes through :func:`parse`, which takes one lock, and
:func:`install` routes every other ``ast.parse`` of the grading process through it too (the
traceback module's caret anchors, ``ast.literal_eval``, libraries): the grader's thread pool and
Dask's worker threads call it before they start.

>>> type(parse("x = 1").body[0]).__name__
'Assign'
"""

from __future__ import annotations

import ast
import functools
import threading

_LOCK = threading.RLock()
_ORIGINAL = ast.parse


def parse(source, filename="<unknown>", mode="exec", *args, **kwargs) -> ast.AST:
    """:func:`ast.parse`, one thread at a time."""
    with _LOCK:
        return _ORIGINAL(source, filename, mode, *args, **kwargs)


def install() -> None:
    """Make ``ast.parse`` itself this process's locked :func:`parse` (idempotent)."""
    ast.parse = parse


@functools.lru_cache(maxsize=4096)
def cell_tree(source: str) -> tuple[ast.AST | None, bool]:
    """(the AST of a cell as IPython runs it (magics become calls), or of its source as it is
    where IPython cannot transform it, or None; whether the transform worked). Cached and
    shared: callers only read it.
    """
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        code, transformed = TransformerManager().transform_cell(source), True
    except Exception:  # noqa: BLE001 - not IPython-transformable: try it as Python
        code, transformed = source, False
    try:
        return parse(code), transformed
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # e.g. a NUL, deep nesting
        return None, transformed
