"""Trusted verdicts: scores decided outside the student's kernel, from plain data.

For a *converted* chapter (``exercises.converted``) grading goes:

1. the grading process, before ``autograde``: ``kernel_package.prepare`` and ``write_inputs``
   (the stubbed kernel package, every case's inputs; expected values stay here);
2. the kernel: the test cell's hidden check only records what the student's function returns
   (``autograder/checks/_probe.py``); the executor seals it (``records.py``);
3. the grading process, between ``autograde`` and ``generate_feedback`` (:func:`decide`):
   reads the sealed records, judges them (``autograder/checks/_judge.py``), writes the points
   into the gradebook, the verdict's message into the test cell's outputs, and returns the
   verdicts for the assignment's result; after a stop, :func:`judge_records`;
4. the parent reads the verdicts from that result and flags the source (``flags.py``).

Judging one key never fails the notebook: any exception while judging it scores that key 0 as
"malformed record" (:func:`_judged`).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from ..background import head_start
from ..cells import nbg as _nbg
from ..exercises import CHECKS, converted_keys, get_check, test_cells
from .kernel_package import kernel_spec
from .records import read_record, records_dir

_KEEP = ("CellTimeoutError",)  # errors that say the cell hit a limit: the row reads them


def _cell_error(cell) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out.get('ename', '')}: {out.get('evalue', '')}"[:200]
    return ""


def _limit_output(cell):
    """The error output saying ``cell`` hit a limit, rebuilt with words of the grader's own:
    the kernel's text may be the student's (an exception of theirs raised with a hidden
    case's data, named like a limit: issue 47)."""
    from nbformat.v4 import new_output

    for out in cell.get("outputs", []):
        if out.get("output_type") != "error":
            continue
        ename, text = str(out.get("ename", "")), f"{out.get('ename', '')} {out.get('evalue', '')}"
        if ename in _KEEP or "MemoryError" in text or "can't allocate" in text:
            name = ename if ename in _KEEP else "MemoryError"
            said = _LIMIT_WORDS[name]
            return new_output("error", ename=name, evalue=said, traceback=[f"{name}: {said}"])
    return None


_LIMIT_WORDS = {"CellTimeoutError": "the cell ran over its time limit",
                "MemoryError": "the cell ran out of memory"}


def outputs(verdict: dict, limit=None) -> list:
    """A converted test cell's outputs on its page: the verdict's words only (nothing the
    kernel printed there: the student's function ran on hidden cases in that cell), and
    ``limit`` (:func:`_limit_output`) when the cell hit one."""
    from nbformat.v4 import new_output

    message = verdict["message"]
    head = "course-grade (decided outside your notebook):\n"
    outs = [new_output("stream", name="stdout",
                       text=head + (message + "\n" if verdict["passed"] else ""))]
    if not verdict["passed"]:  # named like the in-kernel check's exception
        ename = "NotImplementedYet" if verdict["diagnosis"] == "not implemented" \
            else "CheckFailed"
        outs.append(new_output("error", ename=ename, evalue=message,
                               traceback=[f"{ename}: {message}"]))
    if limit is not None:
        outs.append(limit)
    return outs


def warm(sources: list):
    """Import, in a daemon thread, the check modules :func:`decide` will judge ``sources``
    with (about 2 s) while autograde waits on the kernel; returns the thread (a failure here
    is met again where the import is needed)."""
    modules = sorted({k.split(".")[0] for nb in sources for keys in converted_keys(nb).values()
                      for k in keys})

    def load():
        with CHECKS:
            importlib.import_module("autograder.checks._judge")
            for m in modules:
                importlib.import_module(f"autograder.checks.{m}")

    return head_start(load, "course-grade-warm")


def decide(root: Path, assignment: str, student: str) -> dict[str, dict]:
    """Judge every converted test cell; fill gradebook, autograded notebook, verdict files."""
    import nbformat
    from nbgrader.api import Gradebook

    from ..gradebook import quiet_sqlalchemy

    everything = {}
    for name, probe, sealed, cells, points in _converted_notebooks(root, assignment):
        done = root / "autograded" / student / assignment / f"{name}.ipynb"
        if not done.exists():
            continue
        nb = nbformat.read(done, as_version=4)
        verdicts = {}
        by_id = {_nbg(c).get("grade_id"): c for c in nb.cells if _nbg(c).get("grade")}
        for gid, keys in cells.items():
            cell = by_id.get(gid)
            error = _cell_error(cell) if cell is not None else ""
            verdicts[gid] = _judge_cell(probe, sealed, keys, points[gid], error)
            if cell is not None:
                cell["outputs"] = outputs(verdicts[gid], _limit_output(cell))
        nbformat.write(nb, done)
        with quiet_sqlalchemy(), Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            for gid, v in verdicts.items():
                grade = gb.find_grade(gid, name, assignment, student)
                grade.auto_score = v["points"]
            gb.db.commit()
        everything[name] = verdicts
    return everything


def judge_records(root: Path, assignment: str) -> dict[str, dict]:
    """After a notebook's run stopped (nbgrader graded nothing): judge each converted test
    cell from the records sealed before the stop. Each verdict carries ``stopped: True`` and
    ``recorded`` (every record of the cell was there)."""
    everything = {}
    for name, probe, sealed, cells, points in _converted_notebooks(root, assignment):
        everything[name] = {
            gid: {**_judge_cell(probe, sealed, keys, points[gid], ""), "stopped": True}
            for gid, keys in cells.items()}
    return everything


def _converted_notebooks(root: Path, assignment: str):
    """(notebook, probe folder, sealed records folder, {grade_id: keys}, {grade_id: points})
    for each source notebook of ``assignment`` with converted test cells (none without the
    assignment's kernel spec)."""
    import nbformat

    spec = kernel_spec(root, assignment)
    if spec is None:
        return
    probe, sealed = Path(spec["probe"]), records_dir(root, assignment)
    for src_path in sorted((root / "source" / assignment).glob("*.ipynb")):
        source = nbformat.read(src_path, as_version=4)
        if cells := converted_keys(source):
            points = {_nbg(c)["grade_id"]: float(_nbg(c).get("points", 0))
                      for c in test_cells(source)}
            yield src_path.stem, probe, sealed, cells, points


def _judge_cell(probe: Path, sealed: Path, keys: list[str], points: float, error: str) -> dict:
    """One converted test cell's verdict from the sealed records of its checks (``sealed``:
    ``records.records_dir``; ``recorded``: every record was there) and the case inputs in
    ``probe``."""
    records = [read_record(sealed, k) for k in keys]
    inputs = [_inputs(probe, k) for k in keys]
    with CHECKS:
        from autograder.checks._judge import judge

        parts = [_judged(judge, k, r, error, i)
                 for k, r, i in zip(keys, records, inputs, strict=True)]
    passed = all(v.passed for v in parts)
    return {"points": points if passed else 0.0, "passed": passed,
            "diagnosis": _utf8(next((v.diagnosis for v in parts if not v.passed), "")),
            "message": _utf8("\n".join(v.message for v in parts)),
            "recorded": all(r is not None for r in records)}


def _utf8(text: str) -> str:
    """``text`` with what UTF-8 cannot hold (a lone surrogate, which a record's JSON may
    carry into a message) escaped, so that the notebook and the CSV can be written.

    >>> _utf8("a\\ud800b")
    'a\\\\ud800b'
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _judged(judge, key: str, record: dict | None, error: str, inputs: dict | None):
    """``judge``'s verdict on ``key``, or 0 as "malformed record" when judging its record
    raised: the record is the kernel's, so nothing in it may stop the notebook's grading (the
    exception's type stays in the message: a grader's own bug shows there)."""
    from autograder.checks._judge import malformed

    check = get_check(key)
    try:
        return judge(check, record, error, inputs)
    except (Exception, RecursionError) as e:  # noqa: BLE001 - see above
        try:
            text = str(e)[:200]
        except Exception:  # noqa: BLE001
            text = ""
        return malformed(check, f"{type(e).__name__} while judging it: {text}")


def _inputs(probe: Path, key: str) -> dict | None:
    """The case inputs the grader wrote for ``key`` (``in`` is the grader's, read-only to the
    kernel; the class's cached copy), or None."""
    try:
        data = json.loads((probe / "in" / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if type(data) is dict else None

