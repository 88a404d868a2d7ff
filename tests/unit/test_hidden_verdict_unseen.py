"""What a student's code prints or raises on a hidden case never reaches the page (issue 47
item 6). The trusted verdict is what a feedback page shows for a test cell: on a hidden case it
names the case's label and what differs, never the case's input, its expected value or what
the student's function made of them (an exception's message, a returned number), so a function
written to echo its arguments learns nothing. Visible cases keep their whole message."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.checks import table
from autograder.checks._core import get_check

from helpers.verdict import judged

SECRET = "SECRET-7f3a"


def _softmax(x, axis=-1):  # (rows of -inf: 0, as the reference)
    top = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(top), top, 0))
    return e / np.maximum(e.sum(axis=axis, keepdims=True), np.finfo(x.dtype).tiny)


def _hidden_four_axes():
    check = get_check(table.check("01_attention", "softmax").key)
    assert not any(c.args[0].ndim == 4 for c in check.cases if not c.hidden)
    return check, next(c for c in check.cases if c.hidden and c.args[0].ndim == 4)


def test_an_exception_on_a_hidden_case_shows_its_type_not_its_message():
    check, case = _hidden_four_axes()
    x = case.args[0]

    def raises_its_input(x, axis=-1):  # right on every visible case
        if x.ndim == 4:
            raise KeyError(f"{SECRET} {x.ravel()[:3].tolist()!r}")
        return _softmax(x, axis)

    v = judged(check, raises_its_input)
    assert not v.passed, v
    assert case.label in v.message and "KeyError" in v.message, v.message
    assert SECRET not in v.message and repr(float(x.ravel()[0]))[:8] not in v.message, v.message
    assert "raise KeyError" in v.message  # the student's own line, where it raised


def test_an_exception_on_a_visible_case_keeps_its_message():
    check, _ = _hidden_four_axes()

    def raises(x, axis=-1):
        raise KeyError(SECRET)

    v = judged(check, raises)
    assert not v.passed and f"your function raised KeyError: '{SECRET}'" in v.message, v.message


def test_a_hidden_scalar_case_shows_neither_expected_nor_the_students_number():
    check = get_check(table.check("training", "get_lr").key)
    hidden = [c for c in check.cases if c.hidden and c.kind == "scalar"]
    assert hidden
    visible = {tuple(c.args): c.expected for c in check.cases if not c.hidden}
    secret = 12345.6789

    def echoes(*args):  # right on every visible case
        return visible.get(tuple(args), secret)

    v = judged(check, echoes)
    assert not v.passed, v
    failing = next(c for c in hidden if c.label in v.message)
    assert "12345" not in v.message and "1.23457e+04" not in v.message, v.message
    assert f"expected {failing.expected:.6g}" not in v.message, v.message
    assert "outside the tolerance" in v.message, v.message


def _test_cell(gid: str, printed: str):
    import nbformat

    key = table.keys("autograder.checks.attention")["softmax"]
    cell = nbformat.v4.new_code_cell(f"_hidden_check({key!r}, softmax)  # {gid}")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": gid, "locked": True,
                                 "points": 1, "solution": False}
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    return cell


def test_a_stopped_notebooks_test_cells_show_their_verdicts_not_what_the_kernel_printed():
    """A page of a notebook whose run stopped (``stopped._publish``) is the notebook as it
    ran: a test cell's outputs there are the kernel's, where the student's function printed
    the hidden cases' inputs. The page shows each test cell's verdict instead, and the note
    on the cell the run stopped in."""
    import nbformat

    from autograder.grading.autograde.stopped import ENDED, _verdicts_shown, note

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("def softmax(x): print(x); ..."),
                _test_cell("t1", f"{SECRET} [[10531.157 ...]]\n"),
                _test_cell("t2", f"{SECRET} printed, then the function ended the kernel\n"),
                _test_cell("t3", "")]
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="mine\n")]
    verdicts = {"t1": {"passed": False, "message": "✘ it fails on a hidden case",
                       "diagnosis": "output differs", "points": 0.0, "stopped": True},
                "t2": {"passed": False, "message": "✘ no result was recorded",
                       "diagnosis": "output missing", "points": 0.0, "stopped": True}}
    _verdicts_shown(nb, verdicts, 2, "ended the kernel")
    shown = nbformat.writes(nb)
    assert SECRET not in shown
    assert nb.cells[0].outputs[0].text == "mine\n"  # the student's own cell: as it ran
    assert [o.get("ename") for o in nb.cells[1].outputs] == [None, "CheckFailed"]
    assert nb.cells[1].outputs[1].evalue == "✘ it fails on a hidden case"
    assert [o.get("ename") for o in nb.cells[2].outputs] == [None, "CheckFailed", ENDED]
    assert nb.cells[2].outputs[2].evalue == note(2, "ended the kernel")
    assert nb.cells[3].outputs == []  # no verdict: nothing


def test_a_limit_output_kept_on_a_test_cell_is_in_the_graders_words():
    import nbformat

    from autograder.grading.autograde.verdict import _limit_output

    cell = _test_cell("t1", "")
    cell.outputs.append(nbformat.v4.new_output(
        "error", ename="MemoryError", evalue=f"{SECRET} [[10531.157]]",
        traceback=[f"MemoryError: {SECRET}"]))
    kept = _limit_output(cell)
    assert (kept.ename, kept.evalue) == ("MemoryError", "the cell ran out of memory")
    assert SECRET not in str(kept)


def test_a_test_cells_text_leaves_the_line_cache_when_its_hidden_check_records(tmp_path):
    """IPython keeps every cell's text in ``linecache`` (input history or not), where a later
    cell could read a test cell's hidden part and print it. In a graded kernel (the probe's
    folder in the environment) the hidden check takes its cell's text out before the student's
    function runs."""
    import json
    import os
    import subprocess
    import sys

    code = f"""
import json, linecache
from IPython.core.interactiveshell import InteractiveShell
from autograder.checks import _probe

def cached():
    return any({SECRET!r} in "".join(v[2]) for v in list(linecache.cache.values())
               if type(v) is tuple and len(v) == 4)

seen = []
_probe.run = lambda *a, **k: seen.append(cached())
shell = InteractiveShell.instance()
ok = shell.run_cell("from autograder.checks._core import hidden_check\\n"
                    "_given = {{'softmax': 'def softmax(x): {SECRET}'}}\\n"
                    "hidden_check('not.registered#seal', abs)\\n", store_history=False).success
shell.run_cell("x = 1", store_history=True)
print(json.dumps([ok, seen, cached()]))
"""
    env = dict(os.environ, COURSE_PROBE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[2]).stdout
    ok, seen, after = json.loads(out.strip().splitlines()[-1])
    assert ok and seen == [False] and not after, out
