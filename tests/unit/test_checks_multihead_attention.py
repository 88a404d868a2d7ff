"""Notebook 03's checks: right answers pass, and every catalogued mistake is named.

The wrong implementations (in ``tests/helpers/answers/``) are written independently of
the catalogue in
``autograder/checks/multihead_attention.py``, the way a student would write them; each test
asserts that the check fails (visible and graded path) and that its message names the mistake.
``test_checks_catalogue.py`` makes sure no catalogue entry is left untested.
"""

import pytest
import torch
import torch.nn as nn

from autograder.checks import CheckFailed, NotImplementedYet, hidden_check
from autograder.checks import multihead_attention as M

from helpers.answers.multihead_attention import (
    CHECKS,
    GOOD,
    KEY,
    WRONG,
    attend,
    good_merge,
    good_mha,
    good_msa,
    good_split,
    good_weights,
)
from helpers.catalogue import assert_mistake_named, assert_not_named_for_the_others

# catalogue entries added or corrected for issue 32 (a class of 51 single-mistake students)
ISSUE_32 = [
    (KEY["multi_head_attention"], "keys and values projected from x_q instead of x_kv"),
    (KEY["fused_qkv"],
     "split(3) cut pieces of 3 columns (its argument is the piece size, not the count)"),
]


@pytest.mark.parametrize("key", sorted(GOOD))
def test_reference_answers_pass_visible_and_hidden(key, capsys):
    check = CHECKS[key]
    getattr(M, f"check_{check.name}")(GOOD[key])
    hidden_check(key, GOOD[key])
    out = capsys.readouterr().out
    assert out.count(f"✔ {check.exercise}") == 2, out


def test_every_exercise_has_a_public_check_and_hidden_cases():
    for check in CHECKS.values():
        assert callable(getattr(M, f"check_{check.name}"))
        assert any(c.hidden for c in check.cases) and any(not c.hidden for c in check.cases)


@pytest.mark.parametrize("key", sorted(GOOD))
def test_unfinished_exercise_says_not_implemented_yet(key):
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet, match="is not implemented yet"):
        hidden_check(key, stub)


@pytest.mark.parametrize(
    "key,wrong,name", WRONG, ids=[f"{w[0].split('.', 1)[1]}: {w[2]}" for w in WRONG]
)
def test_catalogued_mistake_is_named(key, wrong, name):
    check = CHECKS[key]
    assert_mistake_named(check, key, wrong, name, public=getattr(M, f"check_{check.name}"))


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



@pytest.mark.parametrize("key,name", ISSUE_32, ids=[n for _, n in ISSUE_32])
def test_an_issue_32_entry_names_no_other_mistake_of_its_exercise(key, name):
    assert_not_named_for_the_others(key, name, WRONG)


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
