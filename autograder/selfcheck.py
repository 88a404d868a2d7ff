"""``course-check``: run one notebook's checks and print a summary (the student's command).

    course-check notebooks/01_attention/01_attention.ipynb

The notebook runs top to bottom in a fresh kernel, in its own folder, exactly as "Restart
kernel and run all" would; the file itself is not modified. For every exercise of the
chapter (the exercise table, ``autograder/checks/table.py``) it then prints the points, and
whether the visible check passed, is not implemented yet, or failed (with the mistake the
check named). Hidden tests run only at grading time, so passing here means
"the visible checks pass", not "full marks". Exit status: 0 when every check passes, 1
otherwise, 2 when the notebook cannot be read.

A notebook that trains (it reads ``COURSE_SMOKE``, chapter 8) runs at its smoke size
(``COURSE_SMOKE=1`` for the kernel, as when it is graded) with a longer cell timeout, so the
check takes minutes, not the full training run.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .grading.cells import nbg as _nbg
from .grading.config import CELL_TIMEOUT_S
from .grading.env import SMOKE

PASSED, TODO, FAILED = "passed", "not implemented yet", "failed"
CELL_TIMEOUT, TRAINING_CELL_TIMEOUT = CELL_TIMEOUT_S, 600  # seconds per cell (grading's default)
# The kernel's own log (ipykernel warns "Kernel is running over TCP without encryption" at
# start; the kernel listens on localhost only): keep errors, drop that noise.
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]


@dataclass
class Result:
    """The outcome of one autograded test cell."""

    grade_id: str
    exercise: str
    points: float
    status: str  # PASSED, TODO or FAILED
    detail: str = ""


def exercise_label(grade_id: str) -> str:
    """``ex2_1_softmax`` -> ``Exercise 2.1 softmax``.

    >>> exercise_label("ex5_1_scaled_dot_product_attention")
    'Exercise 5.1 scaled_dot_product_attention'
    >>> exercise_label("setup")
    'setup'
    """
    m = re.fullmatch(r"ex(\d+)_(\d+)_(\w+)", grade_id)
    return f"Exercise {m[1]}.{m[2]} {m[3]}" if m else grade_id


def _errors(cell) -> list:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def _short(evalue: str) -> str:
    """The line saying what failed, plus the named mistake if there is one."""
    lines = [ln.strip() for ln in evalue.splitlines() if ln.strip()]
    keep = lines[:2]
    keep += [ln for ln in lines[2:] if ln.startswith("Likely mistake:")]
    return "\n".join(keep)


def chapter_of(nb):
    """The exercise table's chapter whose grade ids the notebook's test cells carry (None for
    a notebook the table does not know)."""
    from .checks import table

    gids = {_nbg(c).get("grade_id") for c in nb.cells if _nbg(c).get("grade")}
    for ch in table.TABLES.values():
        if gids & {e.grade_id for e in ch.exercises}:
            return ch
    return None


def summarize(nb) -> tuple[list[Result], list[str]]:
    """Results of the test cells of an executed notebook, and errors in the other cells.

    The exercises, their labels and points are the exercise table's
    (``autograder/checks/table.py``), in its order: a test cell's own metadata does not
    change them, and an exercise whose test cell is gone from the notebook is reported (not
    left out of the total). A notebook the table does not know is read from its metadata.
    """
    chapter = chapter_of(nb)
    rows = {e.grade_id: e for e in chapter.exercises} if chapter else {}
    found, others = {}, []
    for i, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        meta, errs = _nbg(cell), _errors(cell)
        if meta.get("grade"):
            gid = meta.get("grade_id", f"cell {i}")
            ex = rows.get(gid)
            label = f"{ex.label} {ex.function}" if ex else exercise_label(gid)
            pts = float(ex.points if ex else meta.get("points", 0))
            if not errs:
                found[gid] = Result(gid, label, pts, PASSED)
            elif errs[0].get("ename") == "NotImplementedYet":
                found[gid] = Result(gid, label, pts, TODO, errs[0]["evalue"])
            else:
                e = errs[0]
                detail = _short(e.get("evalue", "")) or e.get("ename", "error")
                if e.get("ename") not in ("CheckFailed", "AssertionError"):
                    detail = f"{e.get('ename')}: {detail}"
                missing = ex.undefined(f"{e.get('ename')}: {e.get('evalue', '')}") if ex else None
                if missing:
                    detail = (f"define `{missing}` first: run the answer cell of {ex.label} "
                              f"above ({detail})")
                found[gid] = Result(gid, label, pts, FAILED, detail)
        elif errs:
            where = exercise_label(meta["grade_id"]) if meta.get("grade_id") else f"cell {i}"
            e = errs[0]
            first = _short(e.get("evalue", "")).split("\n")[0]
            others.append(f"{where}: {e.get('ename')}: {first}")
    results = [
        found.pop(e.grade_id, None)
        or Result(e.grade_id, f"{e.label} {e.function}", float(e.points), FAILED,
                  "its test cell is not in this notebook (grading puts it back)")
        for e in (chapter.exercises if chapter else ())
    ]
    return results + list(found.values()), others


def trains(nb) -> bool:
    """Whether the notebook has a smoke size (a code cell reads ``COURSE_SMOKE``)."""
    return any(
        c.get("cell_type") == "code" and SMOKE in c.get("source", "") for c in nb.cells
    )


def execute(path: Path, timeout: int | None = None):
    """Run the notebook in a fresh kernel in its own folder; returns the executed copy.

    A notebook that trains runs at its smoke size (``COURSE_SMOKE=1``); ``timeout`` (seconds
    per cell) defaults to 600 for it and 120 otherwise.
    """
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ)
    if trains(nb):
        env[SMOKE] = "1"
    if timeout is None:
        timeout = TRAINING_CELL_TIMEOUT if trains(nb) else CELL_TIMEOUT
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=nb.metadata.get("kernelspec", {}).get("name", "python3"),
        allow_errors=True,
        extra_arguments=KERNEL_ARGS,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    client.execute(env=env)
    return nb


def report(results: list[Result], others: list[str], seconds: float) -> str:
    lines = []
    width = max([len(r.exercise) for r in results] + [8])
    for r in results:
        mark = {PASSED: "✔", TODO: "…", FAILED: "✘"}[r.status]
        line = f"{mark} {r.exercise:<{width}}  {r.points:g} pt  {r.status}"
        if r.status == FAILED:
            line += "".join(f"\n      {d}" for d in r.detail.splitlines())
        lines.append(line)
    for o in others:
        lines.append(f"! error outside the checks, {o}")
    total = sum(r.points for r in results)
    ok = sum(r.points for r in results if r.status == PASSED)
    todo = sum(r.status == TODO for r in results)
    lines.append(
        f"\nVisible checks pass for {ok:g} of {total:g} points"
        + (f"; {todo} exercise(s) not implemented yet" if todo else "")
        + f" ({seconds:.0f} s). Hidden tests run when the notebook is graded."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="course-check", description="Run a course notebook's checks and print a summary."
    )
    ap.add_argument("notebook", type=Path, help="e.g. notebooks/01_attention/01_attention.ipynb")
    ap.add_argument(
        "--timeout",
        type=int,
        default=None,
        help=f"seconds allowed per cell (default {CELL_TIMEOUT}; {TRAINING_CELL_TIMEOUT} for a "
        "notebook that trains, which also runs at its smoke size, COURSE_SMOKE=1)",
    )
    args = ap.parse_args(argv)
    if not args.notebook.is_file():
        print(f"course-check: no such notebook: {args.notebook}", file=sys.stderr)
        return 2
    print(f"running {args.notebook} in a fresh kernel ...", flush=True)
    try:
        import nbformat

        if trains(nbformat.read(args.notebook, as_version=4)):
            print("(this notebook trains: it runs at its smoke size, COURSE_SMOKE=1)", flush=True)
    except Exception:
        pass  # unreadable: execute() below says so
    t0 = time.monotonic()
    try:
        nb = execute(args.notebook, args.timeout)
    except Exception as e:  # unreadable JSON, missing kernel, a cell over the time limit
        print(
            f"course-check: could not run {args.notebook}: {type(e).__name__}: {e}", file=sys.stderr
        )
        return 2
    results, others = summarize(nb)
    if not results:
        print("this notebook has no checks")
        return 0
    print(report(results, others, time.monotonic() - t0))
    return 0 if all(r.status == PASSED for r in results) and not others else 1


if __name__ == "__main__":
    sys.exit(main())
