"""A synthetic class of submissions, generated from an assignment's source and release notebooks.

Each student is the student release with something done to it (so the class never drifts from
the notebooks), and each comes with the score and status every CSV row must show:

========================  ==============================================  =====================
student                   what the submission does                        expected
========================  ==============================================  =====================
correct                   solution code in every answer cell              full marks, graded
blank                     the release as handed out (zip, nested)         0, graded
wrong                     every function's output perturbed (renamed      0, graded
                          file, a checkpoint copy that is correct)
infinite_loop             correct, last answer cell starts ``while True``  that exercise 0,
                          (a loop that sleeps: see ``LOOP``)              flagged (its own cell
                                                                          ran over)
memory_bomb               correct, last answer cell allocates forever     that exercise not
                                                                          graded (memory)
monkeypatch               wrong + ``np.allclose = lambda *a, **k: True``  0, graded
                          (and ``torch.allclose``)
edited_test               wrong, first exercise's test cells -> ``pass``  0, restored: edited
deleted_test              correct, first exercise's test cells deleted    full, restored: deleted
os_exit                   correct, ``os._exit(1)`` in the last answer     not graded (kernel);
                                                                          earlier exercises
                                                                          judged outside the
                                                                          kernel: full, from
                                                                          their records
invalid_json              the release, truncated                          not graded (invalid)
warns                     correct, every function warns and prints to     full marks, graded
                          stderr
========================  ==============================================  =====================

Options add ``missing`` (no notebook), ``deleted_answer`` (last answer cell removed),
``stubborn_loop`` (a loop that ignores SIGINT: the cell timeout's interrupt cannot stop it,
the kernel is killed) and ``earlier_release`` (the chapter as a student fetched it from an
earlier release, answered: ``tests/fixtures/earlier_releases/``; full marks, graded).
"""

from __future__ import annotations

import ast
import copy
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.grading.autograde.verdict import converted_keys
from autograder.grading.cells import nbg as _nbg  # noqa: F401 (tests.adversarial uses it)
from autograder.grading.status import STOPPED_NO_RESULT, STOPPED_RECORDED

EARLIER = Path(__file__).resolve().parents[2] / "fixtures" / "earlier_releases"

WRAP_WRONG = """
def _course_make_wrong(f):
    def g(*args, **kwargs):
        out = f(*args, **kwargs)
        try:
            return out * 1.5 + 0.1
        except TypeError:
            return None
    return g
"""

WRAP_WARN = """
import sys as _course_sys
import warnings as _course_warnings
def _course_make_noisy(f):
    def g(*args, **kwargs):
        _course_warnings.warn("this API is deprecated", UserWarning)
        print("Warning: something a library prints to stderr", file=_course_sys.stderr)
        return f(*args, **kwargs)
    return g
"""

PATCH = """import numpy as np
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
try:
    import torch
    torch.allclose = lambda *a, **k: True
    torch.testing.assert_close = lambda *a, **k: None
except ImportError:
    pass
"""

# The loops sleep: what their rows prove is the wall-clock cell timeout (interrupted, or not
# interruptible), which a spinning loop only makes cost a core until the limit (30 s in
# test_grade_class). The CPU-bound loop interrupted at the cell timeout is the fixture class's
# ``import_loop`` (helpers/adversarial/fixture_class.py, 5 s); test_isolation's hog spins too.
LOOP = "import time\nwhile True:\n    time.sleep(0.5)\n"
STUBBORN = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "while True:\n    time.sleep(0.5)\n")
BOMB = (
    "def _course_bomb():\n    hog = []\n    while True:\n"
    "        hog.append(b'x' * (64 * 2**20))\n_course_bomb()\n"
)
EXIT = "import os\nos._exit(1)\n"


@dataclass
class Expected:
    points: str  # as in the CSV ('' when not graded)
    status: str  # exact, or a prefix ending in ':' for 'not graded: ...'


def _defs(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _wrap(source: str, wrapper: str, maker: str) -> str:
    names = _defs(source)
    tail = "".join(f"\n{n} = {maker}({n})" for n in names)
    return f"{wrapper}\n{source}\n{tail}\n"


def _fmt(x: float) -> str:
    return f"{float(x):g}"


class ClassBuilder:
    """Make the class for one notebook (a ``course.Notebook`` with source and release)."""

    def __init__(self, nb):
        self.nb = nb
        self.solutions = {
            _nbg(c)["grade_id"]: c.source
            for c in nb.source.cells
            if _nbg(c).get("solution") and not _nbg(c).get("grade")
        }
        self.grade_ids = [g.grade_id for g in nb.grade_cells]  # the test cells, in order
        self.first = nb.solution_ids[0]
        self.last = nb.solution_ids[-1]

    # -- notebooks ------------------------------------------------------------------------
    def release(self):
        return copy.deepcopy(self.nb.release)

    def answered(self, edit=None):
        """The release with every answer cell filled in; ``edit(gid, src)`` may change it."""
        nb = self.release()
        for cell in nb.cells:
            gid = _nbg(cell).get("grade_id")
            if gid in self.solutions:
                src = self.solutions[gid]
                cell.source = edit(gid, src) if edit else src
        return nb

    def wrong(self):
        return self.answered(lambda gid, src: _wrap(src, WRAP_WRONG, "_course_make_wrong"))

    def full_marks(self, row=None, *more) -> dict:
        """{exercise: ``row(its points, "graded", *more)``} (``row``: default ``Expected``):
        every exercise at full marks."""
        row = row or Expected
        return self.expect(lambda g: row(_fmt(g.max_points), "graded", *more))

    def writer(self, dest: Path):
        """``put(student, nb, filename=None, folder=None, **write)``: writes ``nb`` (a
        notebook, or a notebook's text as is) as ``student``'s submission,
        ``dest / (folder or student) / (filename or <the chapter>.ipynb)`` (a notebook through
        ``nbformat.write(nb, path, **write)``); returns the path."""

        def put(student: str, nb, filename=None, folder=None, **write) -> Path:
            path = dest / (folder or student) / (filename or f"{self.nb.name}.ipynb")
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(nb, str):
                path.write_text(nb)
            else:
                nbformat.write(nb, path, **write)
            return path

        return put

    def _tests_of(self, solution_id):
        return {g.grade_id for g in self.nb.grade_cells if solution_id in g.solution_ids}

    # -- expectations ---------------------------------------------------------------------
    def expect(self, default, overrides=None):
        """{exercise: Expected}: ``default(gc)`` for every test, ``overrides`` by grade id."""
        out = {g.grade_id: default(g) for g in self.nb.grade_cells}
        out.update(overrides or {})
        return out

    def build(self, dest: Path, extra: tuple[str, ...] = ()) -> dict[str, dict[str, Expected]]:
        """Write the class to ``dest`` and return {student: {exercise: Expected}}."""
        dest.mkdir(parents=True, exist_ok=True)
        name = self.nb.name
        full = lambda g: Expected(_fmt(g.max_points), "graded")  # noqa: E731
        zero = lambda g: Expected("0", "graded")  # noqa: E731
        first_tests, last_tests = self._tests_of(self.first), self._tests_of(self.last)

        def ng(reason):
            return lambda g: Expected("", f"not graded: {reason}")

        def stopped(why):  # the student's code stopped the notebook: 0 where no record
            return lambda g: Expected("0", f"{STOPPED_NO_RESULT}{why} in cell")

        def prefix_last(code):
            return self.answered(lambda gid, src: code + src if gid == self.last else src)

        class_ = {}

        put = self.writer(dest)

        put("correct", self.answered())
        class_["correct"] = self.expect(full)

        # blank: a zip with the notebook nested two folders down, as LMS downloads are
        blank = dest / "blank.zip"
        with zipfile.ZipFile(blank, "w") as zf:
            zf.writestr(f"blank/submission/{name}.ipynb", nbformat.writes(self.release()))
        class_["blank"] = self.expect(zero)

        # wrong: a renamed file, next to a checkpoint copy that is correct (must be ignored)
        put("wrong", self.wrong(), filename=f"{name} (1).ipynb")
        put("wrong", self.answered(), filename=f".ipynb_checkpoints/{name}-checkpoint.ipynb")
        class_["wrong"] = self.expect(zero)

        put("infinite_loop", prefix_last(LOOP))
        # the student's own answer cell ran over: interrupted, the exercise scores as its test
        # cell ran after it (0), flagged: not "not graded" (issue 47)
        class_["infinite_loop"] = self.expect(full, {t: Expected("0", "graded")
                                                     for t in last_tests})

        # the MemoryError the bomb meets is an exception of the student's code, not a limit
        # the grader saw (a student may raise one too): the exercise scores 0
        put("memory_bomb", prefix_last(BOMB))
        class_["memory_bomb"] = self.expect(full, {t: Expected("0", "graded")
                                                   for t in last_tests})

        mp = self.wrong()
        for cell in mp.cells:
            if _nbg(cell).get("grade_id") == self.first:
                cell.source = PATCH + cell.source
        put("monkeypatch", mp)
        class_["monkeypatch"] = self.expect(zero)

        ed = self.wrong()
        for cell in ed.cells:
            if _nbg(cell).get("grade_id") in first_tests:
                cell.source = "pass  # my tests pass now"
        put("edited_test", ed)
        class_["edited_test"] = self.expect(
            zero, {t: Expected("0", "graded (test cell restored: edited)") for t in first_tests}
        )

        dl = self.answered()
        dl.cells = [c for c in dl.cells if _nbg(c).get("grade_id") not in first_tests]
        put("deleted_test", dl)
        class_["deleted_test"] = self.expect(
            full,
            {
                t: Expected(_fmt(g.max_points), "graded (test cell restored: deleted)")
                for g in self.nb.grade_cells
                for t in [g.grade_id]
                if t in first_tests
            },
        )

        # the kernel dies in the last answer: the tests before it that are judged outside
        # the kernel keep the verdicts of what they recorded; the rest scores 0 (flagged)
        put("os_exit", prefix_last(EXIT))
        recorded = set(converted_keys(self.nb.source)) - set(last_tests)
        class_["os_exit"] = self.expect(stopped("ended the kernel"), {
            g.grade_id: Expected(_fmt(g.max_points), STOPPED_RECORDED)
            for g in self.nb.grade_cells if g.grade_id in recorded})

        text = nbformat.writes(self.release())
        put("invalid_json", text[: len(text) // 2])  # cut short, as a failed upload is
        class_["invalid_json"] = self.expect(ng("invalid notebook file"))

        put("warns", self.answered(lambda gid, src: _wrap(src, WRAP_WARN, "_course_make_noisy")))
        class_["warns"] = self.expect(full)

        if "missing" in extra:
            (dest / "missing").mkdir(exist_ok=True)
            (dest / "missing" / "notes.txt").write_text("I forgot to attach it")
            class_["missing"] = self.expect(ng(f"no {name}.ipynb in the submission"))
        if "deleted_answer" in extra:
            da = self.answered()
            da.cells = [c for c in da.cells if _nbg(c).get("grade_id") != self.last]
            put("deleted_answer", da)
            class_["deleted_answer"] = self.expect(full, {
                t: Expected("0", f"graded (answer cell {self.last} missing)")
                for t in last_tests})
        if "stubborn_loop" in extra:
            sl = self.answered(lambda gid, src: STUBBORN + src if gid == self.first else src)
            put("stubborn_loop", sl)
            class_["stubborn_loop"] = self.expect(
                stopped("ran past the cell timeout and could not be interrupted"))
        if "earlier_release" in extra:  # (tests/helpers/earlier_releases.py)
            put("earlier_release", nbformat.read(EARLIER / f"{name}.ipynb", as_version=4))
            class_["earlier_release"] = self.expect(full)
        return class_


def matches(row: dict, exp: Expected) -> bool:
    """A CSV row against its expectation (a status ending in ':'-reason is a prefix)."""
    if row["points"] != exp.points:
        return False
    if exp.status.startswith(("not graded:", STOPPED_NO_RESULT)):
        return row["status"].startswith(exp.status)
    return row["status"] == exp.status


def unmatched(row: dict, exp: Expected) -> tuple | None:
    """None when :func:`matches`, else (the row's points, its status, ``exp``): the
    ``mismatch`` of ``helpers.adversarial.graded.assert_rows_exact`` for these rows."""
    return None if matches(row, exp) else (row["points"], row["status"], exp)
