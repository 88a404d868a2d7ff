"""A notebook whose run stopped (its code ended the kernel, or a cell could not be stopped):
its autograded notebook, scores and feedback page all the same (issue 48, item 6).

nbgrader's autograde fails when the kernel dies: it removes the assignment's autograded
folder and scores nothing, so the student had no feedback page and formgrader showed the
submission as "not autograded", though the exercises whose test cells ran before the stop are
scored from their sealed records (``verdict.judge_records``, the rows' ``status.row_status``).
Two steps, both in the grading process, never in the student's kernel:

- :func:`keep` (``preprocessors.SealedExecute``, where the run stops): the notebook as it ran
  up to that cell, with its outputs, the stopping cell's own source (not the sealed text the
  kernel ran) and an error output on that cell saying what happened, its outputs cut as
  autograde cuts them (nbgrader's ``LimitOutput``, ``LimitOutputSize``); kept in
  ``.grader/stopped/<assignment>/<notebook>.ipynb``;
- :func:`autograde` (``nbgrader_main``, after autograde failed): for each notebook of the
  assignment result that stopped in the student's code and has that notebook, it becomes the
  autograded notebook (``autograded/<student>/<assignment>/``, which formgrader and the
  parent read), with a note at its top, and its test cells get the scores the rows give
  (:func:`status.row_status`: a recorded exercise its verdict's points, the others 0) in the
  student's gradebook; then nbgrader's ``generate_feedback`` renders the page as for any
  graded notebook (hidden tests removed, outputs sanitised).

A run that a whole-run limit ended (the student's time limit, the memory limit killing the
grading process: no process was left to keep it) gets the same from ``after_limit.py``: the
notebook as submitted, kept with the note on the cell that was running, then both steps.
"""

from __future__ import annotations

import copy
from pathlib import Path

STOPPED = Path(".grader") / "stopped"
ENDED = "StoppedHere"  # the error name of the note on the cell where the run stopped


def partial_path(root: Path, assignment: str, notebook: str) -> Path:
    """Where :func:`keep` puts a notebook's run up to its stop."""
    return root / STOPPED / assignment / f"{notebook}.ipynb"


def note(index: int, why: str) -> str:
    """The words on the cell where the run stopped, and atop the page.

    >>> note(4, "ended the kernel")[:48]
    'Your code ended the kernel in cell 5: no cell af'
    """
    return (f"Your code {why} in cell {index + 1}: no cell after it ran. Exercises whose "
            "checks ran before it keep their scores; the others score 0.")


def keep(nb, resources: dict, index: int, source: str, why: str,
         cut: tuple = ()) -> Path | None:
    """Keep the notebook ``nb`` as it ran until cell ``index`` stopped the run (``why``, in
    the seal's words), ``source`` being that cell's own text, its outputs cut by the
    preprocessors ``cut`` (autograde's own: ``preprocessors.SealedExecute`` passes them);
    None when it cannot be kept (the grade does not depend on it: the page is then missing,
    as before)."""
    import nbformat

    meta = (resources or {}).get("nbgrader", {})
    assignment, notebook = meta.get("assignment"), meta.get("notebook")
    if not assignment or not notebook:
        return None
    try:
        ran = copy.deepcopy(nb)
        cell = ran.cells[index]
        cell.source = source
        cell.setdefault("outputs", []).append(_note_output(note(index, why)))
        for cutter in cut:
            ran, _ = cutter.preprocess(ran, {})
        path = partial_path(Path.cwd(), assignment, notebook)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(ran, path)
        return path
    except Exception:  # noqa: BLE001 - never in the way of the grade
        return None


def autograde(root: Path, student: str, assignment: str) -> bool:
    """The autograded notebooks and gradebook scores of ``assignment``'s notebooks whose run
    stopped in the student's code (:func:`keep`); True when there is one, to render its page."""
    from ..assignment_result import AssignmentResult
    from ..status import Facts, row_status

    result = AssignmentResult.read(root, assignment)
    if result is None:
        return False
    done = False
    for name, nb in result.notebooks.items():
        stop = nb.stopped if isinstance(nb.stopped, dict) else None
        partial = partial_path(root, assignment, name)
        if nb.graded or stop is None or stop.get("course_cell") or not partial.is_file():
            continue
        scores = {gid: row_status(Facts(stopped=stop, verdict=v if type(v) is dict else None)
                                  ).points for gid, v in nb.verdicts.items()}
        try:
            _publish(root, student, assignment, name, partial, stop, scores, nb.verdicts)
        except Exception:  # noqa: BLE001 - the rows stand; only the page is missing
            continue
        done = True
    return done


def _publish(root: Path, student: str, assignment: str, name: str, partial: Path,
             stop: dict, scores: dict[str, float | None], verdicts: dict) -> None:
    import nbformat
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.utils import is_grade

    from ..gradebook import quiet_sqlalchemy

    ran = nbformat.read(partial, as_version=4)
    index = stop.get("cell")
    _verdicts_shown(ran, verdicts, index, str(stop.get("why", "stopped")))
    if type(index) is int:
        ran.cells.insert(0, nbformat.v4.new_markdown_cell(
            f"**This notebook stopped.** {note(index, str(stop.get('why', 'stopped')))}"))
    with quiet_sqlalchemy(), Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for cell in ran.cells:
            if not is_grade(cell):
                continue
            gid = cell.metadata["nbgrader"]["grade_id"]
            try:
                grade = gb.find_grade(gid, name, assignment, student)
            except MissingEntry:
                continue
            grade.auto_score = scores.get(gid, 0.0) or 0.0
            grade.needs_manual_grade = False
        gb.db.commit()
    dest = root / "autograded" / student / assignment / f"{name}.ipynb"
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(ran, dest)


def _verdicts_shown(ran, verdicts: dict, index, why: str) -> None:
    """Each test cell of ``ran`` shows its verdict (``verdict.outputs``), never what the
    kernel printed there (the student's function ran on hidden cases in it: issue 47); the
    one the run stopped in keeps the grader's note."""
    from nbgrader.utils import is_grade

    from .verdict import outputs

    for i, cell in enumerate(ran.cells):
        if cell.cell_type != "code" or not is_grade(cell):
            continue
        v = verdicts.get(cell.metadata["nbgrader"]["grade_id"])
        cell.outputs = outputs(v) if type(v) is dict and "message" in v else []
        if i == index:
            cell.outputs.append(_note_output(note(i, why)))


def _note_output(text: str):
    """The error output of the note on the cell where the run stopped."""
    from nbformat.v4 import new_output

    return new_output("error", ename=ENDED, evalue=text, traceback=[f"{ENDED}: {text}"])
