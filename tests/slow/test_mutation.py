"""Mutation testing of the checks (issue 18): the operators, and 0 survivors per notebook.

``autograder.mutation`` mutates each exercise's solution one site at a time and runs every
mutant through the exercise's graded check; a mutant that passes and is not equivalent to
the solution on random inputs is a survivor (a wrong answer the check accepts).
"""

import dataclasses

import pytest

from autograder import mutation as M
from autograder.checks import table

EX = table.rows("01_attention")  # {function: exercise row} of the chapter

# ---------------------------------------------------------------- the operators

SNIPPETS = [
    # (solution body, a mutant description that must be among its mutants)
    ("return x.sum(dim=-1)", "dim -1 -> -2"),
    ("return x.sum(-1)", "axis -1 -> -2"),
    ("return np.max(x, axis=0)", "axis 0 -> 1"),
    ("return x.mean(-1, keepdim=True)", "keepdim=True dropped"),
    ("return np.sum(x, axis=1, keepdims=True)", "keepdims=True dropped"),
    ("return [x[i] for i in range(1, n)]", "range argument 1 +1"),
    ("return x[1:]", "slice lower -1"),
    ("return x[:-1]", "slice upper +1"),
    ("return x[..., 0]", "index 0 -> 1"),
    ("return x < y", "Lt -> LtE"),
    ("return x == y", "Eq -> NotEq"),
    ("return s.masked_fill(~mask, 0.0)", "~ dropped"),
    ("return s.masked_fill(mask, 0.0)", "masked_fill mask inverted"),
    ("return torch.where(m, a, b)", "where branches swapped"),
    ("return torch.logical_not(m)", "logical_not dropped"),
    ("return q @ k / math.sqrt(d)", "sqrt(x) -> x"),
    ("return q @ k / math.sqrt(d)", "`q @ k / math.sqrt(d)` -> left operand"),
    ("return x / (v + 1e-05)", "1e-05 -> 0"),
    ("return q @ k.transpose(-2, -1)", "transpose dropped"),
    ("return q @ k.T", ".T dropped"),
    ("return x.detach()", ".detach() dropped"),
    ("return s.masked_fill(m, float('-inf'))", "-inf -> -1e9"),
    ("return s.masked_fill(m, -math.inf)", "-inf -> 0"),
    ("return x.to(torch.float64)", "torch.float64 -> float32"),
    ("return x.double()", "double -> float"),
    ("return a - b", "operands of `a - b` swapped"),
    ("return a @ b", "operands of `a @ b` swapped"),
    ("y = x * 2\n    y = y + 1\n    return y", "`y = y + 1` removed"),
    ("return x * 0.5", "0.5 -> 1"),
    ("return ''.join(x).replace('</w>', ' ')", "'' -> ' '"),
    ("return ''.join(x).replace('</w>', ' ')", "'</w>' -> ''"),
    ("return x.decode('utf-8', errors='replace')", "errors='replace' -> 'ignore'"),
]


@pytest.mark.parametrize("body,description", SNIPPETS, ids=[s[1] for s in SNIPPETS])
def test_operator_produces_the_mutant(body, description):
    cell = f"def f(x, y=None):\n    ### BEGIN SOLUTION\n    {body}\n    ### END SOLUTION\n"
    found = [m.description for m in M.mutants(cell)]
    assert any(description in d for d in found), found


def test_codec_names_are_not_mutated():
    cell = "def f(x):\n    ### BEGIN SOLUTION\n    return x.decode('utf-8')\n    ### END SOLUTION\n"
    assert not M.mutants(cell)


def test_only_the_solution_region_is_mutated_and_mutants_are_distinct():
    cell = (
        "def f(x):\n    y = x.sum(-1)\n    ### BEGIN SOLUTION\n    return y * 2\n"
        "    ### END SOLUTION\n"
    )
    ms = M.mutants(cell)
    assert ms and all(m.line == 4 for m in ms)
    assert all("x.sum(-1)" in m.source for m in ms)
    assert len({m.source for m in ms}) == len(ms)


def test_removing_a_statement_never_leaves_a_name_unbound():
    cell = (
        "def f(x):\n    ### BEGIN SOLUTION\n    a = x + 1\n    a = a * 2\n    return a\n"
        "    ### END SOLUTION\n"
    )
    removed = [m.description for m in M.mutants(cell) if m.operator == "statement"]
    assert removed == ["`a = a * 2` removed"]


# ---------------------------------------------------------------- the report can fail


def _softmax_exercise():
    nb = M.notebooks("01")[0]
    return next(e for e in M.exercises(nb) if e.key == EX["softmax"].key)


def test_a_weakened_check_lets_mutants_survive():
    """The same run with Exercise 2.1's check cut to its first case: wrong softmaxes pass.
    Also without naming (``name=False``, as the 0-survivor test below runs): every mutant
    has the outcome of the named run (killed, equivalent, survivor), and none is named."""
    from autograder.checks.table import exercise

    softmax = exercise("01_attention", "2.1").declaration()
    weak = dataclasses.replace(softmax, cases=softmax.cases[:1])
    named = M.run_exercise(_softmax_exercise(), check=weak)
    res = M.run_exercise(_softmax_exercise(), check=weak, name=False)
    survivors = [r.mutant.description for r in res if r.outcome == "survivor"]
    assert survivors, "a one-case softmax check should let wrong mutants through"
    assert [(r.mutant, r.outcome, r.timeout) for r in res] == [
        (r.mutant, r.outcome, r.timeout) for r in named
    ]
    assert any(r.named for r in named) and not any(r.named for r in res)
    full = M.summarize(M.run_exercise(_softmax_exercise(), name=False))
    assert full["survivors"] == 0 and full["killed"] > 0


# ---------------------------------------------------------------- 0 survivors


# Notebooks 01-06 in full; 07 and 08 (BPE training, GPT training steps: seconds per mutant)
# every 2nd / 4th mutant, a deterministic sample. The full run: `python -m bench.mutation`.
# The test needs only each mutant's outcome, so the checks do not name the mistakes
# (``name=False``: no catalogue outputs computed on a failing case; the same outcomes).
# A mutant's CPU-time limit: without naming, the slowest mutant check that finishes took
# 0.66 s of CPU here (08's sample_next_token), the slowest that passes 0.45 s (08's train_step);
# the five of 07 that loop forever (four in merge_pair, one in encode_piece) are stopped after
# this much instead of the engine's default 20 s each. A timeout counts as a kill, so the limit
# keeps a wide margin (6x) over the slowest passing mutant.
SECONDS = 3.0
SAMPLES = [("01", 0), ("02", 0), ("03", 0), ("04", 0), ("05", 0), ("06", 0), ("07", 2), ("08", 4)]


@pytest.mark.parametrize("notebook,sample", SAMPLES, ids=[n for n, _ in SAMPLES])
def test_no_mutant_survives_the_checks(notebook, sample, monkeypatch):
    """Every non-equivalent mutant of every exercise of the notebook fails its check."""
    monkeypatch.setenv("COURSE_SMOKE", "1")
    rows = []
    for ex in M.exercises(M.notebooks(notebook)[0]):
        res = M.run_exercise(ex, sample=sample, seconds=SECONDS, name=False)
        rows += [
            f"{ex.grade_id} line {r.mutant.line}: {r.mutant.description} ({r.message})"
            for r in res
            if r.outcome == "survivor"
        ]
    assert not rows, "wrong answers that pass their check:\n" + "\n".join(rows)


def test_a_notebooks_print_options_do_not_leak_into_the_process():
    """The setup cells set numpy's and torch's print options; the engine keeps ours."""
    import numpy as np
    import torch

    ex = M.Exercise("00_x", "ex", "k", "", "f", "", before=[
        "import numpy as np, torch\nnp.set_printoptions(precision=2, suppress=True)\n"
        "torch.set_printoptions(precision=2, sci_mode=False)"])  # fmt: skip
    before_np, before_torch = np.get_printoptions(), str(torch.tensor([1.23456789e-8]))
    M._base_namespace(ex)
    assert np.get_printoptions() == before_np
    assert str(torch.tensor([1.23456789e-8])) == before_torch


def test_mutants_stopped_by_the_time_limit_are_counted_apart_from_the_named_share():
    """A mutant the engine's time limit stops got no check message: it is killed, counted
    under ``timeout``, and is in neither the named count nor the share's denominator."""
    m = M.Mutant(0, "constant", "1 -> 2", 1, "")
    results = [
        M.Result(m, "killed", named=True, message="Likely mistake: x."),
        M.Result(m, "killed", message="the output differs"),
        M.Result(m, "killed", message="timeout: ran past its time", timeout=True),
        M.Result(m, "killed", message="timeout: ran past its time", timeout=True),
        M.Result(m, "equivalent"),
    ]
    s = M.summarize(results)
    assert (s["killed"], s["timeout"], s["named"], s["named_share"]) == (4, 2, 1, 0.5)


def test_the_time_limit_counts_cpu_time_and_caps_wall_time():
    """A mutant is stopped by the CPU time it used, not by the machine's load: 1 s of sleep
    (no CPU) under a 0.5 s limit finishes; a busy loop is stopped; a wait that never ends is
    stopped by the wall-clock cap (``WALL_FACTOR`` times the limit)."""
    import time

    with M._time_limit(0.5):
        time.sleep(1.0)
    with pytest.raises(M.MutantTimeout), M._time_limit(0.2):
        while True:
            pass
    with pytest.raises(M.MutantTimeout), M._time_limit(0.05):
        time.sleep(30)
