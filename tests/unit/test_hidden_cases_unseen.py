"""A failing hidden case shows its label and what differs, never its data (issue 47 item 6):
not its input, not its expected value, neither in the trusted verdict that feedback pages show
nor in the check run in the kernel."""

from __future__ import annotations

import re

import numpy as np
import pytest

from autograder.checks import table
from autograder.checks._core import CheckFailed, get_check, hidden_check

from helpers.verdict import judged

SOFTMAX = table.check("01_attention", "softmax").key
NUMBER = re.compile(r"expected:?\s*\[?-?\d")


def _softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    return e / np.where(s == 0, 1, s)


def _wrong_in_1d(x, axis=-1):  # every visible case has two axes or more; a hidden one has one
    return np.zeros_like(x) if x.ndim == 1 else _softmax(x, axis)


def _wrong_in_4d(x, axis=-1):  # a hidden case has four axes
    return _softmax(x, axis) * (1.01 if x.ndim == 4 else 1.0)


@pytest.mark.parametrize("fn", [_wrong_in_1d, _wrong_in_4d])
def test_a_failing_hidden_case_shows_no_data(fn):
    check = get_check(SOFTMAX)
    verdict = judged(check, fn)
    with pytest.raises(CheckFailed) as kernel:
        hidden_check(SOFTMAX, fn)
    for text in (verdict.message, str(kernel.value)):
        failing = [c for c in check.cases if c.hidden and c.label in text]
        assert failing, text  # a hidden case fails, and is named by its label
        assert "input:" not in text and not NUMBER.search(text), text
        call = text.split("call: ", 1)[1].splitlines()[0]
        assert re.fullmatch(r"softmax\((\(\d+(, \d+)*\) \w+|\w+)(, (\(\d+(, \d+)*\) \w+|\w+))*\)",
                            call), call
