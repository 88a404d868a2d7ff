"""Issue 47, fact 10: in nbgrader's layout, an assignment's time comes from its own folder and
its notebook must too.

An nbgrader course folder (``nbgrader_config.py`` beside ``submitted/``) as ``nbgrader
collect`` leaves it: ``submitted/<student>/<assignment>/`` with the ``timestamp.txt`` that
``nbgrader submit`` wrote. Two assignments, each a copy of the fixture assignment's notebook
(``EARLY`` and ``LATER``, both due at ``DUE``); the answers are the fixture's solution, or the
same made wrong. Issue 47 reports, for notebook 01 in ``02_masking/``: 01 graded 16/16,
``submission time unknown``, no penalty.

=========  ==================================================================  ================
student    submitted/<student>/                                                expected
=========  ==================================================================  ================
ontime     ``EARLY/`` and ``LATER/``, right, on time (the control)             both full, on
                                                                               time
absent     ``LATER/`` only, right, on time                                     EARLY: not
                                                                               submitted;
                                                                               LATER full
moved      fact 10: missed EARLY; puts a right ``EARLY.ipynb`` into its on-    as ``absent``;
           time ``LATER/``                                                     the console
                                                                               names the file
nested     another route: ``EARLY/`` one day late with wrong answers, under    EARLY: 0, one
           another name (``EARLY (1).ipynb``, as a browser names a second      day late;
           download); its on-time ``LATER/`` holds a folder named ``EARLY/``   LATER full; the
           with a right ``EARLY.ipynb`` (the exact name, which the search      console names
           prefers anywhere else) and a ``timestamp.txt`` that claims the due  the file
           date
=========  ==================================================================  ================
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from .dodge_class import Row
from helpers.synthetic_class import WRAP_WRONG, ClassBuilder, _wrap

EARLY, LATER = "96_early", "97_later"
DUE = "2026-12-01T23:59:00+00:00"
ON_TIME = "2026-12-01 20:00:00.000000 UTC"
LATE = "2026-12-02 23:59:00.000000 UTC"  # one day after DUE
LATE_BY = "1 day, 0:00:00"


def stray(student: str, rel: str, assignment: str) -> str:
    """The console's line on a notebook of ``assignment`` found outside its folder."""
    return f"course-grade: {student}: {rel} is not in {assignment}'s folder: not graded"


class LayoutBuilder(ClassBuilder):
    """Writes the course folder; each student's expected rows by (assignment, exercise)."""

    def build_course(self, course: Path) -> tuple[dict, list[str]]:
        """Write ``course`` (``nbgrader_config.py`` and ``submitted/``); return
        ({student: {(assignment, exercise): (Row, late_by)}}, the console lines expected)."""
        course.mkdir(parents=True)
        (course / "nbgrader_config.py").write_text("c = get_config()\n")
        right = self.answered()
        wrong = self.answered(lambda g, s: _wrap(s, WRAP_WRONG, "_course_make_wrong"))

        def put(student, assignment, nb, name=None, stamp=None, under=""):
            folder = course / "submitted" / student / assignment / under
            folder.mkdir(parents=True, exist_ok=True)
            if stamp is not None:
                (folder / "timestamp.txt").write_text(stamp)
            if nb is not None:
                nbformat.write(nb, folder / f"{name or assignment}.ipynb")

        full = {g: (r, "") for g, r in self.full_marks(Row).items()}
        zero = {g: (Row("0", "graded", "output differs"), LATE_BY) for g in full}
        gone = Row("", f"not graded: no {EARLY}.ipynb in the submission", "notebook missing")
        missing = {g: (gone, "") for g in full}

        def rows(early, later):
            return {**{(EARLY, g): r for g, r in early.items()},
                    **{(LATER, g): r for g, r in later.items()}}

        for a in (EARLY, LATER):
            put("ontime", a, right, stamp=ON_TIME)
        put("absent", LATER, right, stamp=ON_TIME)
        put("moved", LATER, right, stamp=ON_TIME)
        put("moved", LATER, right, name=EARLY)
        put("nested", EARLY, wrong, name=f"{EARLY} (1)", stamp=LATE)
        put("nested", LATER, right, stamp=ON_TIME)
        put("nested", LATER, right, name=EARLY, stamp=ON_TIME, under=EARLY)
        expected = {"ontime": rows(full, full), "absent": rows(missing, full),
                    "moved": rows(missing, full), "nested": rows(zero, full)}
        console = [stray("moved", f"{LATER}/{EARLY}.ipynb", EARLY),
                   stray("nested", f"{LATER}/{EARLY}/{EARLY}.ipynb", EARLY)]
        return expected, console
