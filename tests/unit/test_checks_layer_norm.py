"""Notebook 04's checks, what is its own: the switched-off built-ins, a detached output, an
unknown mistake's message. Right answers and catalogued mistakes, in every chapter:
``test_checks_chapters.py``.
"""

import pytest
import torch

import transformer_ref as ref
from autograder.checks import CheckFailed, hidden_check
from autograder.checks import layer_norm as N

from helpers.answers.layer_norm import KEY, good_ln, good_ln_np, good_rms


def test_builtin_layer_norm_is_switched_off_during_the_check():
    def builtin(x, gamma, beta, eps=1e-5):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, beta, eps)

    with pytest.raises(CheckFailed, match="`layer_norm` is switched off"):
        N.check_layer_norm(builtin)
    x = torch.randn(2, 4)
    assert torch.allclose(torch.nn.functional.layer_norm(x, (4,)), ref.layer_norm(x), atol=1e-6)


def test_autograd_is_switched_off_in_the_backward_exercise():
    def via_autograd(dy, x, gamma, eps=1e-5):
        x, gamma = x.clone().requires_grad_(True), gamma.clone().requires_grad_(True)
        beta = torch.zeros_like(gamma, requires_grad=True)
        return torch.autograd.grad((good_ln(x, gamma, beta, eps) * dy).sum(), (x, gamma, beta))

    with pytest.raises(CheckFailed, match="from scratch"):
        N.check_layer_norm_backward(via_autograd)


def test_detached_output_fails_the_visible_gradient_case():
    """2.2's goal asks for it "differentiable (autograd must see every step)": a visible case
    (issue 32), so a round trip through numpy fails the notebook's check too."""

    def via_numpy(x, gamma, beta, eps=1e-5):
        return torch.from_numpy(good_ln_np(*(t.detach().numpy() for t in (x, gamma, beta)), eps))

    for run in (N.check_layer_norm, lambda f: hidden_check(KEY["layer_norm"], f)):
        with pytest.raises(CheckFailed, match="not connected to the inputs' autograd graph"):
            run(via_numpy)


def test_an_unknown_mistake_says_where_and_how_much():
    with pytest.raises(CheckFailed) as info:
        N.check_rms_norm(lambda x, g, eps=1e-6: good_rms(x, g, eps)  # no symptom, no probe
                         + 0.01 * good_rms(x, g, eps) ** 2)
    msg = str(info.value)
    assert "Likely mistake" not in msg and "differs at index" in msg
