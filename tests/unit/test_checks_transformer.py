"""Notebook 06's checks: right answers pass, and every catalogued mistake is named.

The wrong implementations are written here the way a student would write them, independently
of the catalogue in ``autograder/checks/transformer.py``.
"""

import pytest

from autograder.checks import CheckFailed, hidden_check
from autograder.checks import transformer as TR

from helpers.answers.transformer import (
    CHECKS,
    GOOD,
    WRONG,
    gpt,
    make_incremental,
)
from helpers.catalogue import (
    assert_mistake_named,
)


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

