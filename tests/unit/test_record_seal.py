"""Only the probe's own send is a record (issue 47 item 4): the test cell's seal, and a test
cell that ends in an error after its record was sent.

The seal (``records.Seal``) is driven here as ``preprocessors.SealedExecute`` drives it, and
the kernel's side is the probe itself (``_probe.run``) called in-process on plain functions,
its send going straight to the seal: no kernel, no sandbox. The issue's example: 4.1's
function displays a forged record, then raises ``KeyboardInterrupt`` so that the probe never
sends its own; it scored 1 of 1, unflagged.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from autograder.checks import _probe, table
from autograder.checks._judge import case_inputs
from autograder.grading.autograde import records, verdict
from autograder.grading.autograde.preprocessors import with_seal
from autograder.grading.exercises import keys_in

_VARIANCE = table.check("01_attention", "score_variance")
KEY = _VARIANCE.key
TEST_ID = table.rows("01_attention")["score_variance"].grade_id
CELL = f'check_score_variance(score_variance)\n_hidden_check("{KEY}", score_variance)\n'


def measured(d_k, n_samples, rng):
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def _forged(probe: Path, seal: str | None = None) -> str:
    """A record of a right measurement's results (what a forger would send), with ``seal``."""
    sink: list[str] = []
    _probe.run(str(probe), KEY, measured, sink=sink.append, seal=seal)
    return sink[0]


@pytest.fixture()
def cell(tmp_path):
    """(seal, probe folder, judge()): a Seal in the test cell of 4.1, as the executor starts
    it, the probe's inputs as the grader writes them, and the verdict on the cell."""
    probe = tmp_path / "probe"
    (probe / "in").mkdir(parents=True)
    (probe / "in" / f"{KEY}.json").write_text(json.dumps(case_inputs(_VARIANCE)))
    seal = records.Seal(tmp_path / "sealed", "01_attention")
    seal.start_cell(7, TEST_ID, keys_in(CELL))

    def judge() -> dict:
        return verdict._judge_cell(probe, seal.folder, [KEY], 1.0, "")

    return seal, probe, judge


def _run(seal, probe: Path, fn, secret: str | None) -> None:
    """The test cell's hidden check in the kernel: the probe records ``fn`` and sends."""
    _probe.run(str(probe), KEY, fn, sink=seal.record, seal=secret)


def _whats(seal) -> list[str]:
    return [t["what"] for t in seal.evidence["tampered"]]


def test_the_kernel_runs_the_cell_with_its_seal():
    sealed = with_seal(CELL, "0a1b")
    assert f'_hidden_check("{KEY}#0a1b", score_variance)' in sealed
    assert sealed.replace("#0a1b", "") == CELL
    assert sealed.count("\n") == CELL.count("\n")  # tracebacks keep their line numbers


def test_each_test_cell_draws_its_own_seal(tmp_path):
    seal = records.Seal(tmp_path, "nb")
    seal.start_cell(1, "answer", [])
    assert seal.secret is None  # not a test cell: nothing to seal
    seal.end_cell()
    drawn = set()
    for index in range(3):
        seal.start_cell(index, "test", [KEY])
        drawn.add(seal.secret)
        seal.end_cell()
        assert seal.secret is None
    assert len(drawn) == 3 and all(len(s) == 32 for s in drawn)


def test_the_probes_own_record_passes(cell):
    seal, probe, judge = cell
    _run(seal, probe, measured, seal.secret)
    seal.cell_ended("ok")
    v = judge()
    assert v["passed"] and v["points"] == 1.0, v["message"]
    assert seal.evidence["tampered"] == []


@pytest.mark.parametrize("secret", [None, "0" * 32, "abc"])
def test_a_record_without_the_cells_seal_is_refused_and_flagged(cell, secret):
    """Sent before the probe's (the student's function) or after it (a thread): refused, the
    probe's own record judged."""
    seal, probe, judge = cell
    seal.record(_forged(probe, secret))

    def wrong(d_k, n_samples, rng):
        return 2.0 * d_k

    _run(seal, probe, wrong, seal.secret)
    seal.record(_forged(probe, secret))
    seal.cell_ended("ok")
    v = judge()
    assert not v["passed"] and v["points"] == 0.0 and v["recorded"], v
    assert _whats(seal) == [f"sent a grader record without its test cell's seal ({KEY})"] * 2


def test_the_issues_example_forged_record_then_keyboard_interrupt(cell):
    """4.1's function displays a forged record, then raises KeyboardInterrupt: the forged
    record has no seal (refused, flagged), the probe lets the interrupt stop the cell, and
    the exercise has no record: 0."""
    seal, probe, judge = cell

    def score_variance(d_k, n_samples, rng):
        seal.record(_forged(probe))  # display({RECORD_MIME: ...}, raw=True)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(seal, probe, score_variance, seal.secret)
    seal.cell_ended("error", "KeyboardInterrupt")
    v = judge()
    assert v["points"] == 0.0 and v["diagnosis"] == "output missing", v
    assert _whats(seal) == [f"sent a grader record without its test cell's seal ({KEY})"]


def test_a_stolen_seal_then_keyboard_interrupt_is_tampering(cell):
    """Code that read the running cell's seal (frames) sends a sealed forged record, then
    stops the probe with KeyboardInterrupt: the record was accepted, but the cell did not
    end normally after it: malformed (0), flagged."""
    seal, probe, judge = cell
    stolen = seal.secret

    def score_variance(d_k, n_samples, rng):
        seal.record(_forged(probe, stolen))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(seal, probe, score_variance, seal.secret)
    assert json.loads((seal.folder / f"{KEY}.json").read_text())["cases"]  # accepted ...
    seal.cell_ended("error", "KeyboardInterrupt")
    v = judge()  # ... until the cell ended in an error
    assert v["points"] == 0.0 and v["diagnosis"] == "malformed record", v
    assert "ended in KeyboardInterrupt after the record was sent" in v["message"]
    assert _whats(seal) == [
        f"the test cell of {KEY} ended in KeyboardInterrupt after its record was sent"]


@pytest.mark.parametrize("how", ["timeout", "kernel"])
def test_a_stolen_seal_then_a_stop_is_tampering(cell, how):
    """The same, with the cell run into the cell timeout (nbclient's own error reply) or the
    kernel ended (``os._exit``) after the forged record."""
    seal, probe, judge = cell
    seal.record(_forged(probe, seal.secret))
    if how == "timeout":
        seal.cell_ended("error", "CellTimeoutError")
    else:
        seal.stopped(7, "ended the kernel")
    v = judge()
    assert v["points"] == 0.0 and v["diagnosis"] == "malformed record", v
    assert len(_whats(seal)) == 1 and "after its record was sent" in _whats(seal)[0]


def test_a_stolen_seal_and_the_probes_record_is_two_records(cell):
    seal, probe, judge = cell
    seal.record(_forged(probe, seal.secret))
    _run(seal, probe, measured, seal.secret)
    seal.cell_ended("ok")
    v = judge()
    assert v["points"] == 0.0 and v["diagnosis"] == "malformed record", v
    assert _whats(seal) == [f"sent a second record for {KEY}"]


@pytest.mark.parametrize("exc", [SystemExit, GeneratorExit, type("Escape", (BaseException,), {})])
def test_the_probe_records_any_other_base_exception(cell, exc):
    """What the student's function raises is its result, BaseExceptions included (only the
    grader's own interrupt, KeyboardInterrupt, stops the cell): the probe sends its record
    and the cell ends normally."""
    seal, probe, judge = cell

    def score_variance(d_k, n_samples, rng):
        raise exc("stop")

    _run(seal, probe, score_variance, seal.secret)
    seal.cell_ended("ok")
    v = judge()
    assert v["points"] == 0.0 and v["diagnosis"] == f"raised {exc.__name__}", v
    assert seal.evidence["tampered"] == []


def test_an_error_after_no_record_is_no_tampering(cell):
    """A test cell that fails before its record (the function is not defined) is output
    missing, not tampering."""
    seal, _probe_dir, judge = cell
    seal.cell_ended("error", "NameError")
    assert judge()["diagnosis"] == "output missing"
    assert seal.evidence["tampered"] == []
