"""Notebook 06's checks: right answers pass, and every catalogued mistake is named.

The wrong implementations are written here the way a student would write them, independently
of the catalogue in ``autograder/checks/transformer.py``.
"""

import pytest
import torch

from autograder.checks import CheckFailed, hidden_check
from autograder.checks import transformer as TR

from helpers.answers.transformer import (
    CHECKS,
    GOOD,
    KEY,
    WRONG,
    gpt,
    gpt_like_the_reference,
    make_incremental,
)
from helpers.catalogue import (
    assert_mistake_named,
)
from helpers.verdict import judged


@pytest.mark.parametrize("key", sorted(GOOD))
def test_right_answers_pass_visible_and_hidden(key, capsys):
    hidden_check(key, GOOD[key])
    getattr(TR, f"check_{CHECKS[key].name}")(GOOD[key])
    assert capsys.readouterr().out.count("✔") == 2


@pytest.mark.parametrize(
    "key,wrong,name,graded_only", WRONG, ids=[f"{w[0][12:]}: {w[2]}" for w in WRONG]
)
def test_catalogued_mistake_is_named(key, wrong, name, graded_only):
    check = CHECKS[key]
    public = None if graded_only else getattr(TR, f"check_{check.name}")
    assert_mistake_named(check, key, wrong, name, public=public)


def test_incremental_logits_with_a_wrong_gpt_is_caught_too():
    # a KV-cache position bug inside gpt_logits shows up in Exercise 5.1 as well
    with pytest.raises(CheckFailed, match="KV cache positions off by one"):
        TR.check_incremental_logits(make_incremental(gpt("plus1")))



@pytest.mark.parametrize("key", [KEY["gpt_logits"], KEY["incremental_logits"]])
def test_a_copy_of_the_reference_forward_passes_in_the_kernel_and_the_grader(key, capsys):
    """Issue 32: Exercise 4.1 says "with the parts of a transformer_ref.GPT"; a faithful copy
    of GPT.forward (`x = model.drop(x)`, `blk(..., rope=model.rope, positions=positions)`)
    found no `drop` on the check's model and lost 4.1's and 5.1's points."""
    fn = (gpt_like_the_reference if key == KEY["gpt_logits"]
          else make_incremental(gpt_like_the_reference))
    getattr(TR, f"check_{CHECKS[key].name}")(fn)
    hidden_check(key, fn)
    assert capsys.readouterr().out.count("✔") == 2
    v = judged(CHECKS[key], fn)
    assert v.passed, v.message


def test_the_models_blocks_refuse_rotary_positions_rather_than_ignore_them():
    model = CHECKS[KEY["gpt_logits"]].cases[0].args[1]
    x = torch.zeros(1, 2, model.config.d_model, dtype=torch.float64)
    with pytest.raises(ValueError, match="no rotary positions"):
        model.blocks[0](x, is_causal=True, rope=object(), positions=torch.arange(2))
