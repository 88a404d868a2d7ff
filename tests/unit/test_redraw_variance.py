"""Exercise 4.1's measurement is re-drawn by the grader from the case's own generator
(issue 47 item 5): the student's result must be that measurement up to rounding.

The issue's jitter, ``d_k * (1 + 0.02 * rng.standard_normal(4).mean())``, depends on more
than one draw, varies like a measurement and passed 4.1; so do a measurement of half the
pairs and one that draws something else from the generator first. Each fails now, in the
notebook's visible check, in the kernel's graded path and in the grader's verdict, naming
the re-draw. Every honest measurement still passes (``test_checks_attention``'s
``HONEST_VARIANCE``, judged by the grader there, whatever the layout, dtype or ddof).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from autograder.checks import attention as A

from helpers.answers.attention import CHECKS, HONEST_VARIANCE, KEY
from helpers.catalogue import assert_mistake_named
from helpers.verdict import judged

CHECK = CHECKS[KEY["score_variance"]]


def jitter_of_four(d_k, n_samples, rng):  # the issue's
    return float(d_k * (1 + 0.02 * rng.standard_normal(4).mean()))


def half_the_pairs(d_k, n_samples, rng):
    q, k = rng.standard_normal((n_samples // 2, d_k)), rng.standard_normal((n_samples // 2, d_k))
    return float(np.var((q * k).sum(-1)))


def a_draw_first(d_k, n_samples, rng):
    rng.random()  # one draw the exercise does not prescribe
    q, k = rng.standard_normal((n_samples, d_k)), rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


NOT_PRESCRIBED = {"jitter of four draws": jitter_of_four, "half the pairs": half_the_pairs,
                  "a draw first": a_draw_first}


@pytest.mark.parametrize("kind", sorted(NOT_PRESCRIBED))
def test_a_measurement_other_than_the_prescribed_one_fails_everywhere(kind):
    wrong = NOT_PRESCRIBED[kind]
    assert_mistake_named(CHECK, CHECK.key, wrong, A.REDRAWN, public=A.check_score_variance)
    v = judged(CHECK, wrong)
    assert not v.passed and v.diagnosis == A.REDRAWN, v.message
    assert "the grader drew the same" in v.message


def test_the_jitter_passes_every_earlier_stage():
    """Without the re-draw the issue's jitter passed: its results are within the tolerance,
    spread like measurements and pass the twin generators."""
    driven = A.DRIVEN[CHECK.key]  # the twin generators' stage, as the grader judges it
    outs = [jitter_of_four(*copy.deepcopy(args)) for _, args in driven.extra]
    assert driven.post(*outs) is None
    for case in CHECK.cases:
        values = [jitter_of_four(*build()) for build in (case.call, *case.samples)]
        assert all(abs(v - case.expected) <= case.atol + case.rtol * case.expected
                   for v in values)


@pytest.mark.parametrize("kind", sorted(HONEST_VARIANCE))
def test_every_honest_measurement_is_one_the_grader_redraws(kind):
    case = CHECK.cases[1]  # d_k=16, n_samples=20000
    assert A.redraw_problem(case, case.call(), HONEST_VARIANCE[kind](*case.call())) is None


def test_the_redraw_leaves_the_generator_where_it_was():
    rng = np.random.default_rng(3)
    values = list(A.redrawn(4, 50, rng))
    assert rng.standard_normal() == np.random.default_rng(3).standard_normal()
    assert len(values) == 2 * 6 * 4  # two dtypes, six layouts, four estimators
    assert len({round(v, 12) for v in values}) > 6  # the layouts draw other pairs


def test_a_hidden_case_is_named_by_its_label_only():
    case = next(c for c in CHECK.cases if c.hidden)
    got = 1.2345 * case.expected
    found = A.redraw_problem(case, case.call(), got)
    assert found[0] == A.REDRAWN and f"the hidden case “{case.label}”" in found[1]
    d_k, n, rng = case.call()
    mine = next(A.redrawn(d_k, n, rng))
    for data in (f"{mine:.6g}", f"{got:.6g}", f"{2 * n * d_k:,}"):
        assert data not in found[1], (data, found[1])  # its label only: no values
