"""Notebook 03's checks, what is its own: the switched-off built-in, the loop and the batched
heads, the gradient case, the fused and cross-attention cases. Right answers and catalogued
mistakes, in every chapter: ``test_checks_chapters.py``.
"""

import pytest
import torch
import torch.nn as nn

from autograder.checks import CheckFailed, hidden_check
from autograder.checks import multihead_attention as M

from helpers.answers.multihead_attention import (
    CHECKS,
    KEY,
    attend,
    good_merge,
    good_mha,
    good_msa,
    good_split,
    good_weights,
)


def test_builtin_multi_head_attention_is_switched_off_during_the_check():
    def builtin(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
        q, k, v = (good_split(t, n_head) for t in (x_q @ W_Q, x_kv @ W_K, x_kv @ W_V))
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return good_merge(y) @ W_O

    with pytest.raises(CheckFailed, match="`scaled_dot_product_attention` is switched off"):
        M.check_multi_head_attention(builtin)


def test_the_loop_and_the_batched_heads_agree():
    """The column-vector lecture notes' loop over heads == split / attend / merge with the "
    "heads' blocks of W."""
    torch.manual_seed(0)
    X = torch.randn(2, 5, 8, dtype=torch.float64)
    heads = [tuple(torch.randn(8, 4, dtype=torch.float64) for _ in range(3)) for _ in range(2)]
    W_Q, W_K, W_V = (torch.cat([h[j] for h in heads], dim=1) for j in range(3))
    batched = good_merge(attend(*(good_split(X @ W, 2) for W in (W_Q, W_K, W_V)), scale=1.0))
    torch.testing.assert_close(batched, good_msa(X, heads), rtol=1e-12, atol=1e-12)


def test_loaded_weights_reproduce_nn_multihead_attention():
    torch.manual_seed(1)
    m = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True, dtype=torch.float64)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    want = m(x, x, x, need_weights=False)[0]
    torch.testing.assert_close(good_mha(x, x, *good_weights(m), 2), want, rtol=1e-10, atol=1e-12)


def test_gradient_case_agrees_with_the_reference_module_and_catches_a_detached_output():
    cases = CHECKS[KEY["multi_head_attention"]].cases
    (case,) = [c for c in cases if c.kind == "grad"]
    torch.testing.assert_close(case.expected[0], good_mha(*case.args, **case.kwargs),
                               rtol=1e-12, atol=1e-12)

    def detached(*args, **kwargs):
        return good_mha(*(a.detach() if torch.is_tensor(a) else a for a in args), **kwargs)

    M.check_multi_head_attention(detached)  # the visible cases have no gradients
    with pytest.raises(CheckFailed, match="not connected to the inputs' autograd graph"):
        hidden_check(KEY["multi_head_attention"], detached)


def test_no_visible_fused_case_makes_split_3_look_like_an_off_by_one():
    """Issue 32: with d = 4, .split(3)'s pieces (3 wide) were one column short of d and the
    general symptom "length off by one" answered first. No visible case has d within one of 3."""
    for case in CHECKS[KEY["fused_qkv"]].cases:
        d = case.args[0].shape[-1]
        assert case.hidden or abs(d - 3) > 1, case.label


def test_cross_attention_from_x_q_is_named_before_the_padded_case_raises():
    from helpers.answers.multihead_attention import mha_kv_from_x_q

    with pytest.raises(CheckFailed) as info:
        M.check_multi_head_attention(mha_kv_from_x_q)
    msg = str(info.value)
    assert "fails on cross-attention T_q=2, T_k=5, no mask" in msg
    assert "shapes do not line up" not in msg
