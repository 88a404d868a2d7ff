"""Notebook 01's checks, what is their own: an unknown mistake's message, switched-off
built-ins, in-place edits, dtypes, gradients, two bugs at once, Exercise 4.1's measurement.
Right answers and catalogued mistakes, in every chapter: ``test_checks_chapters.py``.
"""

import math

import numpy as np
import pytest
import torch

from autograder.checks import CheckFailed, hidden_check
from autograder.checks import attention as A

import helpers.attention_answers as ans
from helpers.answers.attention import (
    CHECKS,
    HONEST_VARIANCE,
    KEY,
    VARIANCE_JITTER,
    sdpa_builtin,
    softmax_in_place,
    softmax_torch,
    variance_fresh_generator,
)
from helpers.catalogue import assert_mistake_named
from helpers.verdict import judged

# The wrong implementations overflow and divide by zero on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::UserWarning")


def test_unknown_mistake_shows_where_and_how_much_on_a_small_printed_input():
    def squared(x, axis=-1):  # no catalogued mistake, no general symptom (not a constant scale)
        return ans.np_softmax(x, axis=axis) ** 2

    with pytest.raises(CheckFailed) as info:
        A.check_softmax(squared)
    msg = str(info.value)
    assert "Likely mistake" not in msg
    assert "differs at index (0, 2): expected 0.665241, got 0.442546" in msg
    assert "input:" in msg and "[[1. 2. 3.]]" in msg and "expected:" in msg and "got:" in msg


def test_builtin_softmax_raises_build_it_from_scratch_during_the_check():
    with pytest.raises(CheckFailed, match="build `softmax` from scratch"):
        A.check_softmax(softmax_torch)
    # and works again afterwards
    assert torch.allclose(torch.softmax(torch.zeros(2), 0), torch.tensor([0.5, 0.5]))


def test_builtin_sdpa_raises_build_it_from_scratch_during_the_check():
    with pytest.raises(CheckFailed, match="`scaled_dot_product_attention` is switched off"):
        A.check_scaled_dot_product_attention(sdpa_builtin)


def test_in_place_edit_of_the_input_fails():
    with pytest.raises(CheckFailed, match="changed its input in place"):
        A.check_softmax(softmax_in_place)


def test_wrong_dtype_fails():
    with pytest.raises(CheckFailed, match="dtype float64 for float32 inputs"):
        A.check_softmax(lambda x, axis=-1: ans.np_softmax(x.astype(np.float64), axis=axis))


def test_detached_output_fails_the_visible_gradient_case():
    """The goal asks for "gradients flowing to q, k, v": a visible case (issue 32), so a
    detached answer fails the notebook's check, not only the graded one."""

    def detached(q, k, v, mask=None, scale=None):  # e.g. a round trip through numpy
        return ans.sdpa(q.detach(), k.detach(), v.detach(), mask=mask, scale=scale)

    for run in (A.check_scaled_dot_product_attention,
                lambda f: hidden_check(KEY["scaled_dot_product_attention"], f)):
        with pytest.raises(CheckFailed, match="not connected to the inputs' autograd graph"):
            run(detached)


def test_two_bugs_at_once_still_name_the_main_one():
    def inverted_and_nan_rows(q, k, v, mask=None, scale=None):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))  # inverted ...
        e = torch.exp(s - s.amax(-1, keepdim=True))  # ... and nan for fully masked rows
        return e / e.sum(-1, keepdim=True) @ v

    with pytest.raises(CheckFailed) as info:
        A.check_scaled_dot_product_attention(inverted_and_nan_rows)
    assert "Likely mistake: mask inverted." in str(info.value)
    assert "a second bug" in str(info.value)


def test_float32_mean_of_the_hints_answer_passes_and_an_off_by_one_fraction_does_not(capsys):
    """Issue 18 trial: the hint's natural answer takes a float32 mean (2/3 -> 0.6666666865),
    which a 1e-9 tolerance rejected. It must pass; one hit more or fewer must not."""

    def natural(weights):
        n = weights.shape[-1]
        return (weights.argmax(-1) == torch.arange(n)).float().mean().item()

    hidden_check(KEY["self_score_dominance"], natural)
    assert "✔ Exercise 8.1" in capsys.readouterr().out

    def one_more_hit(weights):  # a fraction 1/N away: the nearest wrong answer
        hits = (weights.argmax(-1) == torch.arange(weights.shape[-1])).double()
        return (hits.sum().item() + 1) / hits.numel()

    with pytest.raises(CheckFailed, match="Exercise 8.1"):
        hidden_check(KEY["self_score_dominance"], one_more_hit)


# ---------------------------------------------------------------- Exercise 4.1: a measurement
# 8 s of CPU through both checks: in tests/slow/test_checks_attention_loop.py
LOOP = "a loop over samples"


@pytest.mark.parametrize("kind", sorted(set(HONEST_VARIANCE) - {LOOP}))
def test_honest_measurements_that_draw_otherwise_pass(kind, capsys):
    """Issue 30: the twin generators reject a jittered constant; every honest measurement
    passes whatever the order and layout of its draws, its library, dtype or ddof."""
    f = HONEST_VARIANCE[kind]
    A.check_score_variance(f)
    hidden_check(KEY["score_variance"], f)
    assert capsys.readouterr().out.count("✔ Exercise 4.1") == 2
    v = judged(CHECKS[KEY["score_variance"]], f)
    assert v.passed, v.message


def test_a_loop_over_samples_draws_what_the_pairs_layout_draws():
    """The loop's draws (q then k, sample by sample) are the "pairs (n, 2, d_k)" layout's,
    which passes above: the same measurement, vectorised."""
    loop, pairs = HONEST_VARIANCE[LOOP], HONEST_VARIANCE["pairs (n, 2, d_k)"]
    for d_k, n in ((4, 50), (16, 7)):
        a, b = np.random.default_rng(d_k), np.random.default_rng(d_k)
        assert loop(d_k, n, a) == pytest.approx(pairs(d_k, n, b), rel=1e-12)
        assert a.bit_generator.state == b.bit_generator.state


@pytest.mark.parametrize("kind", sorted(VARIANCE_JITTER))
def test_the_known_answer_jittered_by_the_generator_fails_in_the_kernel_and_the_grader(kind):
    check, name = CHECKS[KEY["score_variance"]], "returned d_k plus noise instead of measuring it"
    assert_mistake_named(check, check.key, VARIANCE_JITTER[kind], name,
                         public=A.check_score_variance)
    v = judged(check, VARIANCE_JITTER[kind])
    assert not v.passed and v.diagnosis == name, v.message
    assert f"Likely mistake: {name}." in v.message and "share their first draw" in v.message


def test_twin_generators_share_the_first_draw_only():
    assert len(A.TWINS) == 2  # the stage is not switched off (numpy's PCG64 as expected)
    for _, _, seed in A.TWINS:
        a, b = np.random.default_rng(seed), A.twin(seed)
        assert a.standard_normal() == b.standard_normal()
        assert a.random() != b.random()
        x, y = a.standard_normal((1000, 4)), b.standard_normal((1000, 4))
        assert abs(np.corrcoef(x.ravel(), y.ravel())[0, 1]) < 0.1  # unrelated streams


def test_a_measurement_from_a_new_generator_fails_the_visible_check_and_the_grader():
    """Issue 49: `np.random.default_rng()` in place of the given `rng` passed both checks.
    On a generator in the same state as the case's own it gives another number: the notebook's
    check and the grader's verdict (which decodes each generator from its state) name it."""
    check = CHECKS[KEY["score_variance"]]
    with pytest.raises(CheckFailed) as info:
        A.check_score_variance(variance_fresh_generator)
    assert f"Likely mistake: {A.FRESH}." in str(info.value)
    assert "on two generators in the same state" in str(info.value)
    v = judged(check, variance_fresh_generator)
    assert not v.passed and v.diagnosis == A.FRESH, v.message


def test_the_generators_of_the_stage_are_in_the_states_it_says():
    assert A.GENERATORS == ("the case's own", "the twin", "the same state again", "advanced")
    for _, _, seed in A.TWINS:
        own, twin, again, later = (g.standard_normal(4) for g in (
            np.random.default_rng(seed), A.twin(seed), np.random.default_rng(seed),
            A.advanced(seed)))
        assert (own == again).all() and not (own == later).any()
        assert own[0] == twin[0] and not (own[1:] == twin[1:]).any()
        moved = np.random.default_rng(seed)  # advanced: as a call that drew ADVANCE outputs
        moved.bit_generator.random_raw(A.ADVANCE)
        assert (moved.standard_normal(4) == later).all()
