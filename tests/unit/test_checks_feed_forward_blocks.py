"""Notebook 05's checks: right answers pass, and every catalogued mistake is named.

The wrong implementations are written here the way a student would write them, independently
of the catalogue in ``autograder/checks/feed_forward_blocks.py``.
"""

import pytest
import torch.nn.functional as F

from autograder.checks import CheckFailed, hidden_check
from autograder.checks import feed_forward_blocks as B

from helpers.answers.feed_forward_blocks import (
    CHECKS,
    GOOD,
    KEY,
    WRONG,
    good_ffn,
    good_gradnorm,
)
from helpers.catalogue import (
    assert_mistake_named,
    assert_not_named_for_the_others,
)

# catalogue entries added for issue 32 (a class of 51 single-mistake students)
ISSUE_32 = [
    (KEY["ffn_as_conv1d"],
     "conv1d kernel made with reshape instead of a transpose (its weights scrambled)"),
    (KEY["ffn_param_count"], "forgot W_3's bias (SwiGLU's gate)"),
    # from the mutation report
    (KEY["feed_forward"], "subtracted a bias instead of adding it"),
    (KEY["ffn_param_count"],
     "a weight matrix counted by one side only (d_model or d_ff, not d_model * d_ff)"),
    (KEY["post_ln_block"], "sublayer output subtracted from the residual (x - sublayer)"),
    (KEY["pre_ln_block"], "sublayer output subtracted from the residual (x - sublayer)"),
]


@pytest.mark.parametrize("key", sorted(GOOD))
def test_right_answers_pass_visible_and_hidden(key, capsys):
    hidden_check(key, GOOD[key])
    getattr(B, f"check_{CHECKS[key].name}")(GOOD[key])
    assert capsys.readouterr().out.count("✔") == 2


@pytest.mark.parametrize(
    "key,wrong,name,graded_only", WRONG, ids=[f"{w[0].split('.', 1)[1]}: {w[2]}" for w in WRONG]
)
def test_catalogued_mistake_is_named(key, wrong, name, graded_only):
    check = CHECKS[key]
    public = None if graded_only else getattr(B, f"check_{check.name}")
    assert_mistake_named(check, key, wrong, name, public=public)


# ---------------------------------------------------------------- other failures
def test_matrix_products_are_switched_off_in_the_conv1d_exercise():
    with pytest.raises(CheckFailed, match="switched off"):
        B.check_ffn_as_conv1d(lambda x, W1, b1, W2, b2: good_ffn(x, W1, b1, W2, b2))
    with pytest.raises(CheckFailed, match="`linear` is switched off"):
        B.check_feed_forward(lambda x, W1, b1, W2, b2, activation="relu": F.linear(
            F.relu(F.linear(x, W1.T, b1)), W2.T, b2))


def test_returning_a_list_of_floats_is_explained():
    def as_list(blocks, x, target):
        return good_gradnorm(blocks, x, target).tolist()

    with pytest.raises(CheckFailed, match="should be a torch.Tensor but is a list"):
        B.check_grad_norm_per_layer(as_list)



@pytest.mark.parametrize("key,name", ISSUE_32, ids=[n for _, n in ISSUE_32])
def test_an_issue_32_entry_names_no_other_mistake_of_its_exercise(key, name):
    assert_not_named_for_the_others(key, name, WRONG)
