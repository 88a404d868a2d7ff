"""Notebook 01 end to end: the solution passes every check, the release runs cleanly and says
"not implemented yet", and catalogued mistakes graded through ``course-grade`` are named.
"""

import csv
import html
import os
import re
import subprocess
import sys
import time

import nbformat

from autograder import release, selfcheck
from autograder.checks import table

from helpers.synthetic_class.shared import grade_cmd

EX = table.rows("01_attention")  # {function: exercise row} of the chapter

NAME = "01_attention"
SOURCE = release.SOURCE / NAME / f"{NAME}.ipynb"
RELEASED = release.RELEASE / NAME / f"{NAME}.ipynb"


def _nbg(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _execute(path):
    t0 = time.monotonic()
    nb = selfcheck.execute(path)  # what `course-check` runs: a fresh kernel, the notebook's folder
    return nb, time.monotonic() - t0


def _errors(cell):
    return [o for o in cell.get("outputs", []) if o.output_type == "error"]


def _text(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def test_solution_notebook_passes_every_check_on_cpu_in_under_two_minutes():
    nb, seconds = _execute(SOURCE)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not _errors(cell), f"cell {i}: {[e.evalue for e in _errors(cell)]}"
    tests = [c for c in nb.cells if _nbg(c).get("grade")]
    for cell in tests:
        out = _text(cell)
        # the visible check and the hidden (graded) check both passed
        assert out.count("✔") == 2 and "hidden" in out, (_nbg(cell)["grade_id"], out)
    figures = [
        c
        for c in nb.cells
        if c.cell_type == "code" and any(o.output_type == "display_data" for o in c.outputs)
    ]
    assert len(figures) >= 3  # softmax bars, variance plot, heatmap
    assert seconds < 120, f"notebook 01 took {seconds:.0f} s on CPU (limit: 2 minutes)"
    results, others = selfcheck.summarize(nb)
    assert [r.status for r in results] == [selfcheck.PASSED] * 8 and not others
    assert sum(r.points for r in results) == 16


def test_release_runs_end_to_end_and_every_check_says_not_implemented_yet():
    nb, _ = _execute(RELEASED)
    tests = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errs = _errors(cell)
        if _nbg(cell).get("grade"):
            tests += 1
            assert len(errs) == 1 and errs[0].ename == "NotImplementedYet", (i, errs)
            assert "is not implemented yet" in errs[0].evalue
            assert errs[0].traceback == [f"… NotImplementedYet: {errs[0].evalue}"]  # no wall
        else:
            assert not errs, f"cell {i} (outside the exercises) failed: {errs}"
        if "with requires(" in cell.source:
            assert re.search(r"Finish Exercise \d\.\d.* first", _text(cell)), (i, _text(cell))
    assert tests == 8
    results, others = selfcheck.summarize(nb)
    assert [r.status for r in results] == [selfcheck.TODO] * 8 and not others
    assert "Visible checks pass for 0 of 16 points; 8 exercise(s) not implemented yet" in (
        selfcheck.report(results, others, 1.0)
    )


def test_course_check_command_names_the_mistake_and_fails(tmp_path):
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}}
    )
    meta = {"schema_version": 3, "solution": False, "task": False}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import numpy as np\nfrom autograder.checks import check_softmax"
        ),
        nbformat.v4.new_code_cell(
            "def softmax(x, axis=-1):\n    return np.exp(x) / np.exp(x).sum(axis, keepdims=True)"
        ),
        nbformat.v4.new_code_cell("check_softmax(softmax)"),
    ]
    nb.cells[2].metadata["nbgrader"] = {
        **meta,
        "grade": True,
        "locked": True,
        "points": 2,
        "grade_id": EX["softmax"].grade_id,
    }
    path = tmp_path / "mini.ipynb"
    nbformat.write(nb, path)
    cmd = [sys.executable, "-m", "autograder.selfcheck"]
    proc = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "✘ Exercise 2.1 softmax" in proc.stdout
    assert "Likely mistake: unstable softmax overflowing." in proc.stdout
    # the summary is the chapter's exercise table: the test cells this notebook lacks are
    # listed as failed, never dropped from the total
    from autograder.checks import table

    assert "✘ Exercise 1.1 dot_product_scores" in proc.stdout
    assert "its test cell is not in this notebook" in proc.stdout
    total = table.chapter("01_attention").points
    assert f"Visible checks pass for 0 of {total} points" in proc.stdout
    assert nbformat.read(path, as_version=4).cells[2].outputs == []  # the file is untouched
    missing = subprocess.run([*cmd, str(tmp_path / "nope.ipynb")], capture_output=True, text=True)
    assert missing.returncode == 2 and "no such notebook" in missing.stderr


def test_torch_softmax_in_exercise_5_1_fails_the_visible_check_and_course_check(tmp_path):
    """Issue 32: the goal asks for "zero output for fully masked rows"; a `torch.softmax`
    answer (nan there) got "✔ ... all 8 cases match" in the notebook and in course-check, then
    lost its 4 points to a hidden case. The case is visible now: the student's notebook, as
    released, fails the check cell with the catalogued name, and course-check says so."""
    nb = nbformat.read(RELEASED, as_version=4)
    answer = EX["scaled_dot_product_attention"].solution_id
    (cell,) = [c for c in nb.cells if _nbg(c).get("grade_id") == answer]
    cell.source = (
        "def scaled_dot_product_attention(q, k, v, mask=None, scale=None):\n"
        "    if scale is None:\n        scale = 1 / math.sqrt(q.shape[-1])\n"
        "    s = q @ k.transpose(-2, -1) * scale\n"
        "    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n"
        "    return torch.softmax(s, dim=-1) @ v\n"
    )
    path = tmp_path / f"{NAME}.ipynb"
    nbformat.write(nb, path)
    ran, seconds = _execute(path)  # what course-check runs
    (test,) = [c for c in ran.cells
               if _nbg(c).get("grade_id") == EX["scaled_dot_product_attention"].grade_id]
    (err,) = _errors(test)
    assert err.ename == "CheckFailed", err
    assert "fails on a fully masked query row" in err.evalue
    assert "Likely mistake: a fully masked row gives nan." in err.evalue
    assert "✔" not in _text(test)
    results, others = selfcheck.summarize(ran)
    (row,) = [r for r in results if r.grade_id == EX["scaled_dot_product_attention"].grade_id]
    assert row.status == selfcheck.FAILED
    out = selfcheck.report(results, others, seconds)  # what course-check prints
    assert "✘ Exercise 5.1 scaled_dot_product_attention" in out
    assert "Likely mistake: a fully masked row gives nan." in out


# One catalogued mistake per exercise, as a student would write it (self-contained cells).
MISTAKES = {
    EX["dot_product_scores"].solution_id: (
        "def dot_product_scores(Q, K):\n    return K @ np.swapaxes(Q, -1, -2)\n",
        "scores transposed (K Qᵀ)",
    ),
    EX["softmax"].solution_id: (
        "def softmax(x, axis=-1):\n    e = np.exp(x)\n"
        "    return e / e.sum(axis=axis, keepdims=True)\n",
        "unstable softmax overflowing",
    ),
    EX["self_attention_unscaled"].solution_id: (
        "def self_attention_unscaled(X, W_Q, W_K, W_V):\n"
        "    S = (X @ W_Q) @ np.swapaxes(X @ W_K, -1, -2)\n"
        "    e = np.exp(S - S.max(axis=-2, keepdims=True))\n"
        "    return e / e.sum(axis=-2, keepdims=True) @ (X @ W_V)\n",
        "softmax over the wrong axis (over queries)",
    ),
    EX["score_variance"].solution_id: (
        "def score_variance(d_k, n_samples, rng):\n"
        "    q = rng.standard_normal((n_samples, d_k))\n"
        "    k = rng.standard_normal((n_samples, d_k))\n"
        "    return float(np.std((q * k).sum(axis=1)))\n",
        "returned the standard deviation",
    ),
    EX["scaled_dot_product_attention"].solution_id: (
        "def scaled_dot_product_attention(q, k, v, mask=None, scale=None):\n"
        "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) if scale is None else "
        "q @ k.transpose(-2, -1) * scale\n"
        "    if mask is not None:\n        s = s.masked_fill(mask, float('-inf'))\n"
        "    return torch.softmax(s, dim=-1) @ v\n",
        "mask inverted",
    ),
    EX["column_form_self_attention"].solution_id: (
        "def column_form_self_attention(X_cols, Q, K, V):\n"
        "    S = (K @ X_cols).T @ (Q @ X_cols)\n"
        "    A = torch.softmax(S, dim=1)\n    return (V @ X_cols) @ A, A\n",
        "softmax over j instead of over i",
    ),
    EX["cosine_similarity_attention"].solution_id: (
        "def cosine_similarity_attention(q, k, v, mask=None, temperature=1.0, eps=1e-8):\n"
        "    q = q / q.norm(dim=-1, keepdim=True).clamp_min(eps)\n"
        "    s = q @ k.transpose(-2, -1) / temperature\n"
        "    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n"
        "    return torch.softmax(s, dim=-1) @ v\n",
        "normalised only the queries",
    ),
    EX["self_score_dominance"].solution_id: (
        "def self_score_dominance(weights):\n"
        "    n = weights.shape[-1]\n"
        "    return (weights.argmax(dim=-2) == torch.arange(n)).float().mean().item()\n",
        "argmax over the wrong axis",
    ),
}


def test_catalogued_mistakes_graded_by_course_grade_score_zero_and_are_named(tmp_path):
    nb = nbformat.read(RELEASED, as_version=4)
    for cell in nb.cells:
        gid = _nbg(cell).get("grade_id")
        if gid in MISTAKES:
            cell.source = MISTAKES[gid][0]
    assert {_nbg(c).get("grade_id") for c in nb.cells} >= set(MISTAKES)
    (tmp_path / "subs" / "mistakes").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "subs" / "mistakes" / f"{NAME}.ipynb")
    out = tmp_path / "out"
    # course-grade starts from the session's template of 01 at this cell limit (grade_cmd)
    args = ("--workers", "1", "--cell-timeout", "60", "--timeout", "300")
    proc = subprocess.run(grade_cmd(tmp_path / "subs", out, release.SOURCE, *args),
                          capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "grades.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["student"] == "mistakes"]
    assert len(rows) == 8, rows
    for r in rows:
        assert float(r["points"]) == 0 < float(r["max_points"]), r
        assert r["status"] == "graded", r
    feedback = html.unescape((out / "feedback" / "mistakes" / NAME / f"{NAME}.html").read_text())
    for gid, (_, name) in MISTAKES.items():
        assert f"Likely mistake: {name}." in feedback, f"{gid}: {name!r} not in the feedback"


def test_course_check_runs_a_training_notebook_at_its_smoke_size_without_kernel_noise(tmp_path):
    """Issue 18 trial: course-check on 08 ran the full training into a cell timeout (no
    per-exercise results) and every run printed ipykernel's "running over TCP without
    encryption" warning. A notebook that reads COURSE_SMOKE gets COURSE_SMOKE=1."""
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}}
    )
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import os\nSMOKE = os.environ.get('COURSE_SMOKE') == '1'\n"
            "import time\nif not SMOKE:\n    time.sleep(60)  # the 'full training run'"
        ),
        nbformat.v4.new_code_cell("assert SMOKE, 'not the smoke size'"),
    ]
    nb.cells[1].metadata["nbgrader"] = {
        "schema_version": 3, "solution": False, "task": False, "grade": True, "locked": True,
        "points": 1, "grade_id": "ex1_1_smoke",
    }
    path = tmp_path / "trains.ipynb"
    nbformat.write(nb, path)
    env = {k: v for k, v in os.environ.items() if k != "COURSE_SMOKE"}
    cmd = [sys.executable, "-m", "autograder.selfcheck", "--timeout", "20", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "✔ Exercise 1.1 smoke" in proc.stdout
    assert "smoke size" in proc.stdout
    assert "without encryption" not in proc.stdout + proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
