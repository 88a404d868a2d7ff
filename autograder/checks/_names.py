"""Which names a function's code uses (the check library and the kernel's probe both ask)."""

from __future__ import annotations

import types


def calls_name(fn, name: str) -> bool:
    """Whether ``fn``'s code (nested lambdas and comprehensions included) names ``name``.

    >>> def f(x):
    ...     return [softmax(r) for r in x]
    >>> calls_name(f, "softmax"), calls_name(f, "dot")
    (True, False)
    """
    code = getattr(fn, "__code__", None)
    todo = [code] if type(code) is types.CodeType else []
    while todo:
        c = todo.pop()
        if name in c.co_names:
            return True
        todo += [k for k in c.co_consts if type(k) is types.CodeType]
    return False
