"""Notebook 08 (training a GPT) through the real grading path, once per test session.

Solution, release and one catalogued mistake are graded in one ``course-grade`` run (see
``helpers.chapters.graded_chapter_04``; the tests: ``GradedWithChapter04``'s). Grading does
not run the demonstration cells (the training run among them); a submission whose training
cell was edited runs it at its smoke size: course-grade sets ``COURSE_SMOKE=1`` for the
kernel (through its sandbox), and plain nbgrader sets ``NBGRADER_EXECUTION``.
``course-check`` runs the notebook at its smoke size too. The committed release must equal a
fresh generation (tests/unit/test_release.py); the run-size cell picks gpu / cpu / smoke.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nbformat
import pytest
import torch

from transformer_ref.train import preset

from helpers.chapters import (
    SOURCE,
    CourseCellsQuiet,
    GradedWithChapter04,
    source_notebook,
)

ASSIGNMENT = "08_training"


# `course-check` on the solution, run once for the module (the notebook at its smoke size in a
# fresh kernel: ~45 s of CPU): the executed notebook it ran is what the tests of the executed
# solution read (``executed``), its report what test_course_check_... reads.
COURSE_CHECK = """
import sys

import nbformat

from autograder import selfcheck

run = selfcheck.execute


def execute(path, timeout=None):  # what course-check ran, kept for the tests
    nb = run(path, timeout)
    nbformat.write(nb, sys.argv[2])
    return nb


selfcheck.execute = execute
sys.exit(selfcheck.main(sys.argv[1:2]))  # course-check NOTEBOOK (pyproject's entry point)
"""


@pytest.fixture(scope="module")
def course_check(tmp_path_factory):
    """Issue 18 trial: run as a student runs it (no COURSE_SMOKE in the environment), on a copy
    of the solution notebook in a folder of its own; returns the finished process and the
    executed notebook."""
    import shutil
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("course-check")
    path = folder / f"{ASSIGNMENT}.ipynb"
    shutil.copy(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", path)
    ran = tmp_path_factory.mktemp("executed") / f"{ASSIGNMENT}.ipynb"
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_SMOKE", "NBGRADER_EXECUTION")}
    cmd = [sys.executable, "-c", COURSE_CHECK, str(path), str(ran)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    return proc, nbformat.read(ran, as_version=4) if ran.exists() else None


@pytest.fixture(scope="module")
def executed(course_check):
    """The solution as ``course-check`` ran it (demonstration cells included, smoke size)."""
    proc, book = course_check
    assert book is not None, proc.stdout + proc.stderr
    return book


def test_executed_run_is_the_smoke_size(executed):
    """The training cell ran (and printed its summary) in the smoke configuration."""
    book = executed
    text = "\n".join(o.get("text", "") for c in book.cells if c.cell_type == "code"
                     for o in c.outputs)
    assert "run: smoke on cpu" in text
    assert "smoke run: " in text and " steps in " in text


def test_executed_run_has_rope_and_a_bpe_run(executed):
    """Issue 49 item 4: the trained GPT's positions are RoPE (course-check runs the notebook
    alone in its folder, so no saved 06 is found: the given apply_rope, said so), and the smoke
    run trains the second model on chapter 07's BPE tokens (the given tokenizer, said so) and
    prints both models' validation bits per byte."""
    import re

    text = "\n".join(o.get("text", "") for c in executed.cells if c.cell_type == "code"
                     for o in c.outputs)
    assert "– chapter 06 not found or not saved: using the given apply_rope" in text
    assert "– chapter 07 not found or not saved: using the given train_bpe_fast" in text
    assert re.search(r"val loss / token +val bits / byte\n+characters +\d+ +[\d.]+ +[\d.]+\n+"
                     r"your BPE +\d+ +[\d.]+ +[\d.]+", text), text[-3000:]


def _run_size_cell(env: dict, device: str):
    """Execute the notebook's run-size cell with ``pick_device`` answering ``device``."""
    nb = source_notebook(ASSIGNMENT)
    cell = next(c.source for c in nb.cells if c.source.startswith("DEVICE = pick_device()"))
    ns = {"os": os, "torch": torch, "Path": Path, "tempfile": tempfile, "preset": preset,
          "pick_device": lambda: torch.device(device)}
    old = {k: os.environ.get(k) for k in ("COURSE_SMOKE", "NBGRADER_EXECUTION", "COURSE_GRADE_JOB")}
    try:
        for k in old:
            os.environ.pop(k, None)
        os.environ.update(env)
        exec(compile(cell, "run-size cell", "exec"), ns)
    finally:
        for k, v in old.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v
    return ns


@pytest.mark.parametrize("env,device,run,name", [
    ({}, "cuda", "gpu", "gpu_char"),
    ({}, "cpu", "cpu", "cpu_char"),
    ({"COURSE_SMOKE": "1"}, "cuda", "smoke", "cpu_smoke"),
    ({"NBGRADER_EXECUTION": "autograde"}, "cpu", "smoke", "cpu_smoke"),
    ({"COURSE_GRADE_JOB": "token"}, "cuda", "smoke", "cpu_smoke"),
])
def test_the_run_size_follows_the_device_and_the_environment(env, device, run, name, capsys):
    ns = _run_size_cell(env, device)
    assert ns["RUN"] == run
    want = preset(name)
    for field in ("n_layer", "d_model", "block_size", "batch_size"):
        assert getattr(ns["cfg"], field) == getattr(want, field), field
    if run == "smoke":
        assert ns["DEVICE"].type == "cpu" and ns["cfg"].max_iters <= 20
    if run == "cpu":
        assert ns["MAX_SECONDS"] <= 10 * 60
    assert f"run: {run}" in capsys.readouterr().out


class TestChapter08(GradedWithChapter04, CourseCellsQuiet):
    ASSIGNMENT = ASSIGNMENT
    ADDED = "3.3"  # the chapter as released before Exercise 3.3 was added (issue 47)
    CHECKS = "training"
    CALL = '_hidden_check("{k}", _probe("{k}"'
    NOT_CHECKS = 2  # `graded` and `probe`


def test_course_check_on_the_solution_lists_every_exercise(course_check):
    """Issue 18 trial: `course-check` on 08 ran the full CPU training into a cell timeout and
    a ZMQ traceback, with no per-exercise results, unless COURSE_SMOKE=1 was set by hand.
    Run as a student runs it (no COURSE_SMOKE in the environment), on a copy of the solution
    notebook in a folder of its own: every exercise is listed, passed, with its points."""
    import re

    from autograder.checks.table import chapter

    proc, _ = course_check
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "smoke size" in out
    table = chapter(ASSIGNMENT)
    for e in table.exercises:
        line = rf"✔ {re.escape(e.label)} {e.function}\s+{e.points:g} pt\s+passed"
        assert re.search(line, out), f"{line!r} not in:\n{out}"
    assert f"Visible checks pass for {table.points} of {table.points} points" in out, out
    assert "Traceback" not in out + proc.stderr and "without encryption" not in proc.stderr
