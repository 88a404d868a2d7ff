"""Every chapter's answers (``helpers/answers/<module>.py``) as rows, for the tests written
once and parametrised over chapters (``test_checks_chapters.py``, ``test_verdict_chapters.py``).

Each answers module holds ``KEY`` ({function: check key}), ``CHECKS`` ({key: Check}), ``GOOD``
({key: a right answer written as a student would}), ``WRONG`` (rows ``(key, wrong answer,
mistake named[, graded only])``) and, where a chapter has them, ``ISSUE_32`` (``(key, name)``:
catalogue entries that must name no other mistake of their exercise).

    >>> ("02_masking", "masking.causal_mask") in right_answers()
    True

Chapter 08 (training) calls its checks with several functions (``graded(key, *fns)``): its
generic tests are in ``test_checks_training.py`` and ``test_verdict_training.py``.
"""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import nbformat

from autograder.checks import table

REPO = Path(__file__).resolve().parents[2]
CHAPTERS = tuple(c for c in sorted(table.TABLES) if c != "08_training")


def answers(chapter: str):
    """The answers module of ``chapter`` (``helpers.answers.<module>``)."""
    return importlib.import_module(f"helpers.answers.{table.chapter(chapter).module}")


def public(key: str):
    """The notebook's visible check of ``key`` (``check_<function>`` of the chapter module)."""
    module, _, _ = key.partition(".")
    check = table.by_key(key).declaration()
    return getattr(importlib.import_module(f"autograder.checks.{module}"), f"check_{check.name}")


def right_answers() -> list[tuple[str, str]]:
    """``(chapter, key)`` of every right answer."""
    return [(ch, key) for ch in CHAPTERS for key in sorted(answers(ch).GOOD)]


def wrong_answers() -> list[tuple]:
    """``(key, wrong, name, graded_only)`` of every chapter's catalogued wrong answers
    (``graded_only``: only a hidden case shows the mistake; False where a chapter's rows
    leave it out)."""
    return [(*w[:3], bool(w[3]) if len(w) > 3 else False)
            for ch in CHAPTERS for w in answers(ch).WRONG]


def named_alone() -> list[tuple[str, str]]:
    """``(key, name)`` of the entries that must name no other mistake of their exercise."""
    return [row for ch in CHAPTERS for row in getattr(answers(ch), "ISSUE_32", ())]


def chapter_of(key: str) -> str:
    """The chapter whose exercise table holds ``key``.

    >>> chapter_of("masking.causal_mask")
    '02_masking'
    """
    return next(ch for ch in table.TABLES if key in table.keys(ch).values())


def _names(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _kept(nodes: list, used: set) -> list:
    """Of a locked cell's statements: its definitions, and the imports and assignments of the
    names ``used`` needs, as far as they reach (not its prints, plots, plotting library or
    corpus loading)."""
    used, kept = set(used), []
    while True:
        kept = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                or isinstance(n, ast.Assign) and _names(ast.Module(n.targets, [])) & used
                or isinstance(n, (ast.Import, ast.ImportFrom))
                and {(a.asname or a.name).split(".")[0] for a in n.names} & used]
        more = set().union(*(_names(n) for n in kept)) - used
        if not more:
            return kept
        used |= more


@functools.cache
def solutions(chapter: str) -> dict:
    """The namespace of ``chapter``'s source notebook with its answers defined: the setup's
    and the given cells' definitions (locked cells), then every answer cell.

    >>> solutions("02_masking")["causal_mask"](2).tolist()
    [[True, False], [True, True]]
    """
    nb = nbformat.read(REPO / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
    cells = [(c.source, c.metadata.get("nbgrader", {})) for c in nb.cells
             if c.cell_type == "code"]
    used = set().union(*(_names(ast.parse(src)) for src, meta in cells if meta.get("solution")))
    ns: dict = {}
    for source, meta in cells:
        if meta.get("solution"):
            exec(source, ns)  # noqa: S102
        elif meta.get("locked") and not meta.get("grade"):
            kept = _kept(ast.parse(source).body, used)
            exec(compile(ast.Module(kept, []), "<locked cell>", "exec"), ns)  # noqa: S102
    return ns
