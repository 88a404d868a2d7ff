"""The notebook that is graded: rebuilt from the release, never the student's file as sent.

Of a submitted notebook only the student's *sources* travel: each answer cell's source and the
cells the student added, as plain cells. Everything else (locked and test cells, metadata,
cell ids, nbformat 4) comes from the release; no output or metadata of the student's survives,
so nothing in a file's format, metadata or outputs can reach nbgrader.

The order is the student's; a release cell they deleted is put back before the release cell
that follows it. A notebook from an earlier release gets a newer exercise's cells from the
release, and its rows say so (:attr:`Rebuilt.absent`).

>>> release = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
...     _demo_cell("code", "raise NotImplementedError", "ex1_solution", solution=True),
...     _demo_cell("code", "check(f)", "ex1_f", grade=True)]}
>>> sent = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
...     _demo_cell("code", "def f(): return 1", "ex1_solution", grade=True, points=9),
...     {"cell_type": "code", "source": ["print(", "f())"], "metadata": {}, "outputs": [
...         {"output_type": "display_data", "data": {"text/plain": 5}, "metadata": {}}]}]}
>>> nb = rebuild(json.dumps(sent).encode(), nbformat.from_dict(release),
...               {"ex1_f": ["ex1_solution"]}, "demo")
>>> [(c.source, c.metadata.get("nbgrader", {}).get("grade")) for c in nb.notebook.cells]
[('def f(): return 1', False), ('print(f())', None), ('check(f)', True)]
>>> nb.restored, nb.missing, nb.absent
({'ex1_f': 'deleted'}, [], [])
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..cells import grade_id, is_answer, is_test, nbg
from . import sent
from .sent import NotANotebook, student_cells
from .submissions import MAX_CELLS, MAX_NESTING, MAX_NOTEBOOK_BYTES, IntakeProblem, open_bounded

READ_MEMORY_MB = 2048  # the reading process's address space (sent.py; a 32 MB notebook of
# empty objects: about 700 MB parsed)
READ_CPU_S = 30  # ... and its CPU time (01 with 300,000 outputs, 17 MB: 0.5 s)

_FLAGS = ("grade", "solution", "locked")  # a changed "points" is ignored: max from the source


@dataclass
class Rebuilt:
    """A submission rebuilt from the release, and what the rebuilding found."""

    notebook: nbformat.NotebookNode  # what nbgrader grades (nbformat 4, valid, no outputs)
    sent: list[dict]  # the submitted cells as read (:func:`student_cells`), for the flags
    # {test grade id: "edited" | "deleted" | "flags changed"}: the release's are graded
    restored: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # answer cells deleted: the stub stands in
    # the tests of exercises of which the file holds no cell (an earlier release)
    absent: list[str] = field(default_factory=list)


def rebuild(data: bytes | list[dict], release, answers_of: dict[str, list[str]],
            name: str = "", others: dict[str, set[str]] | None = None) -> Rebuilt:
    """The notebook ``name`` to grade, from a submission's cells as read (or its bytes) and
    the chapter's ``release``. ``answers_of``: test grade id -> its answer cells' ids;
    ``others``: the class's other notebooks -> their test ids (to name the chapter a file
    holds instead). Raises :class:`NotANotebook`: not a notebook, or none of its graded cells.
    """
    cells = student_cells(data) if isinstance(data, bytes) else data
    ours = {grade_id(c): c for c in release.cells if grade_id(c) is not None and nbg(c)}
    sent_ids = {grade_id(c) for c in cells}
    tests = [g for g, c in ours.items() if is_test(c)]
    if not any(g in sent_ids for g in tests):  # answer ids are shared by chapters, tests not
        held = [other for other, ids in sorted((others or {}).items()) if ids & sent_ids]
        if held:
            raise NotANotebook(f"this file holds {held[0]}, not {name}")
        if not any(g in sent_ids for g, c in ours.items() if is_answer(c)):
            raise NotANotebook(f"this file is not {name} (none of its graded cells)")

    out = Rebuilt(nbformat.v4.new_notebook(metadata=copy.deepcopy(release.metadata)), cells)
    out.notebook.nbformat_minor = release.nbformat_minor
    placed: dict[str, int] = {}  # release grade id -> its index in the output
    taken = {c.get("id") for c in release.cells}
    for k, cell in enumerate(cells):
        gid = grade_id(cell)
        ref = ours.get(gid)
        if ref is not None and gid not in placed:
            placed[gid] = len(out.notebook.cells)
            new = copy.deepcopy(ref)
            if is_answer(ref):
                new.source = cell["source"]
            elif is_test(ref):
                changed = "flags changed" if any(
                    nbg(cell).get(f) != nbg(ref).get(f) for f in _FLAGS) else "edited" if (
                    cell["source"] != ref.source or cell.get("cell_type") != "code") else ""
                if changed:
                    out.restored[gid] = changed
            out.notebook.cells.append(new)
        else:  # the student's own cell (or a second copy of a release cell): plain
            out.notebook.cells.append(_plain(cell, _fresh_id(k, taken)))
    # the release cells the file lacks, each just before the release cell that follows it (so
    # after the cells the student added behind the one before it)
    at = len(out.notebook.cells)
    for c in reversed(release.cells):
        gid = grade_id(c)
        if gid not in ours:
            continue
        if gid not in placed:
            out.notebook.cells.insert(at, copy.deepcopy(c))
            placed = {g: i + (i >= at) for g, i in placed.items()}
            if is_test(c):
                out.restored[gid] = "deleted"
            elif is_answer(c):
                out.missing.insert(0, gid)
        at = placed.setdefault(gid, at)
    out.absent = [t for t in tests if answers_of.get(t) and _gone(t, answers_of, out)]
    if out.absent:  # an earlier release: its test cells differ from this one's by release
        out.restored = {g: why for g, why in out.restored.items() if why != "edited"}
    nbformat.validate(out.notebook)  # ours: the release's cells and plain sources
    return out


def read_cells(path: Path) -> list[dict]:
    """:func:`sent.student_cells` of the notebook at ``path``, read by a limited process of its
    own (``sent.py``); the parent only opens the file (``submissions.open_bounded``). Raises
    ``IntakeProblem`` or :class:`NotANotebook` with the row's reason, or ``OSError``."""
    caps = {"bytes": MAX_NOTEBOOK_BYTES, "cells": MAX_CELLS, "nesting": MAX_NESTING,
            "memory_mb": READ_MEMORY_MB, "cpu_s": READ_CPU_S}
    fd = open_bounded(path, MAX_NOTEBOOK_BYTES)
    try:
        done = subprocess.run([sys.executable, "-I", "-S", sent.__file__, json.dumps(caps)],
                              stdin=fd, capture_output=True, timeout=READ_CPU_S * 4)
    except subprocess.TimeoutExpired:
        raise IntakeProblem("the notebook could not be read within the grader's limits "
                            f"({READ_CPU_S * 4} s)") from None
    finally:
        os.close(fd)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if type(answer) is not dict:
        raise IntakeProblem("the notebook could not be read within the grader's limits "
                            f"({READ_MEMORY_MB} MB, {READ_CPU_S} s of CPU; exit "
                            f"{done.returncode})")
    if answer.get("problem"):
        why = str(answer["problem"]).replace("the notebook", path.name, 1)
        raise NotANotebook(why) if answer.get("kind") == "not a notebook" else IntakeProblem(why)
    return answer["cells"]


def _gone(test: str, answers_of: dict[str, list[str]], out: Rebuilt) -> bool:
    """The file holds no cell of ``test``'s exercise: no answer cell and no test cell of it
    (the tests that grade the same answers are the same exercise)."""
    mine = set(answers_of[test])
    return mine <= set(out.missing) and all(
        out.restored.get(t) == "deleted" for t, a in answers_of.items() if mine & set(a))


def _plain(cell: dict, cell_id: str):
    """A student's own cell: its type and source, nothing else."""
    kind = cell["cell_type"]
    if kind == "code":
        return nbformat.v4.new_code_cell(cell["source"], id=cell_id)
    if kind == "markdown":
        return nbformat.v4.new_markdown_cell(cell["source"], id=cell_id)
    return nbformat.v4.new_raw_cell(cell["source"], id=cell_id)


def _fresh_id(k: int, taken: set) -> str:
    """An id for the student's k-th cell that no release cell has."""
    cid = f"student-{k}"
    while cid in taken:
        cid += "x"
    return cid


def _demo_cell(kind, source, gid, **flags):
    """A cell with nbgrader metadata (the module's example)."""
    meta = {"grade_id": gid, "solution": False, "grade": False, "locked": False, **flags}
    if meta["grade"]:
        meta["locked"] = True
    cell = {"cell_type": kind, "source": source, "metadata": {"nbgrader": meta}, "id": gid}
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell
