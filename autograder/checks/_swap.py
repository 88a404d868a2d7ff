"""Running a student's function with some of the global names it calls bound to other
functions: the given implementations of earlier exercises (README "One mistake costs one
exercise"). Used by the in-process check (``_core``) and the graded kernel's probe
(``_probe``); it imports nothing of the course.

>>> def double(x):
...     return twice(x)
>>> twice = lambda x: 0
>>> given = given_function(double, "twice", "def twice(x):\\n    return 2 * x")
>>> with swapped(double, {"twice": given}):
...     double(3)
6
>>> double(3)
0
"""

from __future__ import annotations

import contextlib


def given_function(fn, name: str, source: str):
    """The given ``name`` defined by ``source`` over a copy of ``fn``'s globals (the
    notebook's imports), so that defining it changes nothing of the student's."""
    ns = dict(getattr(fn, "student", fn).__globals__)
    exec(compile(source, f"<the given {name}>", "exec"), ns)  # noqa: S102
    return ns[name]


@contextlib.contextmanager
def swapped(fn, functions: dict):
    """``fn``'s global names in ``functions`` ({name: function}) bound to those functions
    while the block runs, then restored."""
    space = getattr(fn, "student", fn).__globals__
    missing = object()
    old = {name: space.get(name, missing) for name in functions}
    space.update(functions)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is missing:
                space.pop(name, None)
            else:
                space[name] = value
