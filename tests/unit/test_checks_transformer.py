"""Notebook 06's checks, what is its own: a wrong gpt inside the incremental logits, a copy of
the reference forward, the model's blocks. Right answers and catalogued mistakes, in every
chapter: ``test_checks_chapters.py``.
"""

import pytest
import torch

from autograder.checks import CheckFailed, hidden_check
from autograder.checks import transformer as TR

from helpers.answers.transformer import (
    CHECKS,
    KEY,
    gpt,
    gpt_like_the_reference,
    make_incremental,
)
from helpers.verdict import judged


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
