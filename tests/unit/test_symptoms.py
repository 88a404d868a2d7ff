"""The general mistakes (``autograder/checks/_symptoms.py``): each is recognised from a wrong
output written the way a student's bug produces it, and named by a real check, in-kernel and
in the trusted verdict. No entry goes untested (``test_every_symptom_is_tested``).
"""

import math

import numpy as np
import pytest
import torch

from autograder.checks import CheckFailed, hidden_check
from autograder.checks import _symptoms as S

g = torch.Generator().manual_seed(0)
X = torch.randn(2, 3, 4, 4, generator=g, dtype=torch.float64)  # (B, H, T, T)
W = torch.randn(5, 3, generator=g, dtype=torch.float64)
MASK = torch.tril(torch.ones(4, 4, dtype=torch.bool))

VALUES = [  # (symptom, expected, a wrong output)
    (S.TRANSPOSED, X, X.transpose(-1, -2)),
    (S.SWAPPED_AXES, X, X.transpose(0, 1)),  # (B, H) for (H, B): the shapes differ
    (S.SWAPPED_AXES, X[:, :, :2, :2], X[:, :, :2, :2].transpose(0, 2)),  # equal sizes
    (S.SCALED, X, X / math.sqrt(4)),
    (S.NEGATED, X, -X),
    (S.RECIPROCAL, torch.softmax(X, -1), 1 / torch.softmax(X, -1)),  # total / e for e / total
    (S.SHIFTED, X, X + 1e-3),
    (S.ROLLED, W, torch.cat([W[:1] * 7, W[:-1]])),
    (S.DROPPED_DIM, X.sum(-1, keepdim=True), X.sum(-1)),
    (S.EXTRA_DIM, X.sum(-1), X.sum(-1, keepdim=True)),
    (S.REDUCED_ALL, W.sum(0), W.sum()),  # dγ summed over every axis
    (S.OFF_BY_ONE_LENGTH, W, W[1:]),
    (S.WRONG_AXIS_SIZE, W.sum(0), W.sum(1)),
    (S.NONFINITE, torch.softmax(W * 1000, -1),  # exp() overflowing: inf / inf
     torch.exp(W * 1000) / torch.exp(W * 1000).sum(-1, keepdim=True)),
    (S.INVERTED, MASK, ~MASK),
    (S.DIAGONAL, MASK, torch.tril(torch.ones(4, 4, dtype=torch.bool), diagonal=-1)),
]
EXACT = [
    (S.ONE_ITEM_TOO_FEW, [(b"a", b"b"), (b"ab", b"c")], [(b"a", b"b")]),
    (S.ONE_ITEM_TOO_MANY, [1, 2, 3], [1, 2, 3, 4]),
    (S.REVERSED, [1, 2, 3], [3, 2, 1]),
    (S.NUMBER_OFF_BY_ONE, 7, 8),
]
ERRORS = [
    (S.SHAPES_MISMATCH, "RuntimeError", "The size of tensor a (4) must match the size of tensor "
     "b (3) at non-singleton dimension 1"),
    (S.AXIS_OUT_OF_RANGE, "IndexError", "Dimension out of range (expected to be in range of "
     "[-2, 1], but got -3)"),
    (S.INDEX_OUT_OF_RANGE, "IndexError", "list index out of range"),
    (S.NONE_VALUE, "TypeError", "unsupported operand type(s) for *: 'Tensor' and 'NoneType'"),
    (S.MISSING_KEY, "KeyError", "(101, 32)"),
    (S.RESHAPE_SIZE, "RuntimeError", "shape '[2, 5, 2]' is invalid for input of size 80"),
    (S.FLOAT_SIZE, "TypeError", "view(): argument 'size' failed to unpack the object at pos 4 "
     "with error \"type must be tuple of ints,but got float\""),
    (S.NO_GRAD_PATH, "RuntimeError", "element 0 of tensors does not require grad and does not "
     "have a grad_fn"),
    (S.EMPTY_MAX, "ValueError", "max() arg is an empty sequence"),
    (S.BYTE_RANGE, "ValueError", "bytes must be in range(0, 256)"),
]


@pytest.mark.parametrize("symptom,expected,got", VALUES, ids=[v[0].name for v in VALUES])
def test_value_symptom(symptom, expected, got):
    assert S.diagnose(expected, got, "allclose") == symptom
    assert S.diagnose(expected.numpy(), got.numpy(), "allclose") == symptom  # numpy too
    assert S.diagnose((W, expected), (W, got), "allclose") == symptom  # item 1 of a tuple


@pytest.mark.parametrize("symptom,expected,got", EXACT, ids=[v[0].name for v in EXACT])
def test_exact_symptom(symptom, expected, got):
    assert S.diagnose(expected, got, "exact") == symptom


@pytest.mark.parametrize("symptom,name,message", ERRORS, ids=[v[0].name for v in ERRORS])
def test_error_symptom(symptom, name, message):
    assert S.diagnose_error(name, message) == symptom


FLOAT_SIZES = {  # a size or index computed with / instead of //, as torch reports it
    "view": lambda x: x.view(2, 2, 6 / 2),
    "zeros": lambda x: torch.zeros(x.shape[0] / 1),
    "split": lambda x: x.split(6 / 2, -1),
    "tril": lambda x: torch.tril(x, 2 / 2),
    "transpose": lambda x: x.transpose(0, 2 / 2),
    "index": lambda x: x[4 / 2],
}


@pytest.mark.parametrize("call", sorted(FLOAT_SIZES))
def test_a_float_size_is_named_from_torch_s_own_message(call):
    with pytest.raises((TypeError, IndexError)) as info:
        FLOAT_SIZES[call](torch.zeros(2, 6))
    assert S.diagnose_error(info.type.__name__, str(info.value)) == S.FLOAT_SIZE, info.value


def test_scalar_symptoms():
    assert S.diagnose(0.5, -0.5, "scalar") == S.NEGATED
    assert S.diagnose(3.0, 4, "scalar") == S.NUMBER_OFF_BY_ONE
    assert S.diagnose(3.0, math.inf, "scalar") == S.NONFINITE


def test_unrelated_wrong_outputs_get_no_symptom():
    noise = torch.randn(X.shape, generator=g, dtype=torch.float64)
    assert S.diagnose(X, X + noise, "allclose") is None
    assert S.diagnose(W, W.T.contiguous()[:, :4], "allclose") is None  # a shape unlike any
    assert S.diagnose([1, 2, 3], [1, 5, 3], "exact") is None
    assert S.diagnose(np.array(["a"]), np.array(["b"]), "allclose") is None
    assert S.diagnose_error("ValueError", "something else") is None


def test_every_symptom_is_tested():
    tested = {s for s, *_ in VALUES + EXACT + ERRORS} | {S.NEGATED, S.NUMBER_OFF_BY_ONE}
    assert set(S.ALL + S.ALL_ERRORS) <= tested


# ---------------------------------------------------------------- named by real checks


def _named(key, fn):  # the in-kernel check's message
    with pytest.raises(CheckFailed) as info:
        hidden_check(key, fn)
    return str(info.value)


def test_trusted_verdict_names_a_symptom(tmp_path):
    """The grader's verdict (plain data) names the same symptom, and its diagnosis column."""

    from autograder.checks import _judge, table

    from helpers.verdict import record

    _SOFTMAX = table.check("01_attention", "softmax")

    def softmax(x, axis=-1):  # right, then negated (a sign slip)
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return -(e / e.sum(axis=axis, keepdims=True))

    v = _judge.judge(_SOFTMAX, record(tmp_path, _SOFTMAX, softmax))
    assert not v.passed and v.diagnosis == "sign flipped", v
    assert "Likely mistake: sign flipped." in v.message
    assert "Likely mistake: sign flipped." in _named(_SOFTMAX.key, softmax)


def test_an_output_scaled_by_a_constant_is_named_by_a_check_without_that_entry():
    """Before the general symptoms a halved softmax read only "the output differs"."""
    from autograder.checks.attention import check_softmax

    def halved(x, axis=-1):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return 0.5 * e / e.sum(axis=axis, keepdims=True)

    with pytest.raises(CheckFailed) as info:
        check_softmax(halved)
    assert "Likely mistake: output scaled by a constant." in str(info.value)


# ---------------------------------------------------------------- dtype and type messages
def test_a_dtype_or_type_difference_gets_no_value_symptom():
    """Issue 49: a mask of the right values in int64 for bool was named "axes in the wrong
    order" (its two size-1 axes swapped give it back). The dtype message stands alone."""
    keep = torch.arange(5)[None, :] < torch.tensor([3, 5])[:, None]
    mask = keep[:, None, None, :]  # (B, 1, 1, T) bool
    assert S.diagnose(mask, mask.long(), "allclose") is None
    assert S.diagnose(X, X.float(), "allclose") is None  # float32 for float64
    assert S.diagnose(X, X.transpose(0, 1).float(), "allclose") == S.SWAPPED_AXES  # shape first
    assert S.diagnose(X, X.numpy(), "allclose") is None  # a numpy array for a tensor
    assert S.diagnose((W, X), (W.float(), -X), "allclose") is None  # item 0's dtype first
    # ... and swapping two axes of the same size 1 is no swap: a value difference is not one
    assert S.diagnose(mask.double(), (mask.double() * 2), "allclose") == S.SCALED
    assert S.diagnose(mask.double(), mask.double().transpose(1, 2) + 1, "allclose") == S.SHIFTED


def test_a_dtype_the_exercise_states_is_named_as_such(tmp_path):
    """Issue 49: "(keep the input's dtype)" only where the output keeps the input's dtype;
    where the exercise states another (02 Ex 2.1's bool mask from int64 lengths), the message
    names it, in the kernel and in the grader's verdict, and no "Likely mistake" follows."""
    from autograder.checks import _judge, table

    from helpers.verdict import record

    check = table.check("02_masking", "padding_mask_from_lengths")

    def int_mask(lengths, T):  # right values, int64 instead of bool
        return (torch.arange(T)[None, :] < lengths[:, None]).long()[:, None, None, :]

    for message in (_named(check.key, int_mask),
                    _judge.judge(check, record(tmp_path, check, int_mask)).message):
        assert "has dtype int64; the exercise asks for bool" in message, message
        assert "keep the input's dtype" not in message and "Likely mistake" not in message

    from autograder.checks.attention import check_softmax

    with pytest.raises(CheckFailed) as info:  # an output that should keep its input's dtype
        check_softmax(lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis, keepdims=True)
                      if x.dtype == np.float64 else (np.exp(x) / np.exp(x).sum(
                          axis, keepdims=True)).astype(np.float64))
    assert "has dtype float64 for float32 inputs (keep the input's dtype)" in str(info.value)
    assert "Likely mistake" not in str(info.value)
