"""Notebook 02's checks, what is its own: switched-off built-ins, the nan gradient of a fully
masked row, the layers under test. Right answers and catalogued mistakes, in every chapter:
``test_checks_chapters.py``.
"""

import pytest
import torch

import transformer_ref as ref
from autograder.checks import CheckFailed, hidden_check
from autograder.checks import masking as M

from helpers.answers.masking import (
    CHECKS,
    KEY,
    NAN_TO_NUM,
    NEG_INF,
    _scores,
    good_causal,
    good_grad,
    good_leak,
    masked_nan_to_num_output,
    masked_torch_softmax,
)
from helpers.verdict import judged


def test_builtin_sdpa_is_switched_off_during_the_masked_attention_check():
    def builtin(q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    with pytest.raises(CheckFailed, match="`scaled_dot_product_attention` is switched off"):
        M.check_masked_attention(builtin)


def test_nan_gradient_of_a_fully_masked_row_fails_the_visible_check_too():
    """The goal states it ("its gradients must be finite too", issue 32): a nan_to_num patch
    fails the notebook's check, not only the graded one."""

    def nan_to_num_after(q, k, v, mask):  # the output is repaired, its gradient is not
        return masked_torch_softmax(q, k, v, mask).nan_to_num(0.0)

    for run in (M.check_masked_attention, lambda f: hidden_check(KEY["masked_attention"], f)):
        with pytest.raises(CheckFailed, match=r"the gradient for input \d differs .* got nan"):
            run(nan_to_num_after)


def test_kernel_and_grader_name_the_nan_to_num_patch_on_the_same_visible_case():
    """It also fails a hidden gradient case declared before the visible one: both sides
    report the visible case (visible cases first), with the same name."""
    check = CHECKS[KEY["masked_attention"]]
    with pytest.raises(CheckFailed) as info:
        M.check_masked_attention(masked_nan_to_num_output)
    kernel = str(info.value)
    v = judged(check, masked_nan_to_num_output)
    assert v.diagnosis == NAN_TO_NUM and f"Likely mistake: {NAN_TO_NUM}." in kernel
    assert kernel.splitlines()[0] == v.message.splitlines()[0]
    assert "an additive mask and a fully masked row" in kernel.splitlines()[0]


def test_layers_under_test_really_are_causal_or_not():
    layers = {c.label.split(",")[0]: c.args[0] for c in CHECKS[KEY["future_leak"]].cases}
    causal, unmasked = layers["a causal layer"], layers["an unmasked layer"]
    x = torch.randn(5, 6, dtype=torch.float64)
    assert good_leak(causal, x, 2, torch.randn(5, 6, dtype=torch.float64)) == 0.0
    assert good_leak(unmasked, x, 2, torch.randn(5, 6, dtype=torch.float64)) > 1e-3
    g = good_grad(causal, x, 2)
    assert torch.count_nonzero(g[3:]) == 0 and torch.count_nonzero(g[:3]) > 0
    assert torch.equal(ref.causal_mask(3), good_causal(3))


def test_nan_to_num_on_the_weights_fails_on_an_additive_mask_gradient():
    """Issue 18 trial: nan_to_num repairs the weights of a fully masked row; with a boolean
    mask (masked_fill) the gradients stay finite, with an additive 0/-inf mask those for q
    and k are nan. The graded check must see it."""

    def nan_to_num_weights(q, k, v, mask):
        s = _scores(q, k)
        s = s.masked_fill(~mask, NEG_INF) if mask.dtype == torch.bool else s + mask
        return torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0) @ v

    with pytest.raises(CheckFailed, match=r"the gradient for input [12] differs .* got nan"):
        hidden_check(KEY["masked_attention"], nan_to_num_weights)

