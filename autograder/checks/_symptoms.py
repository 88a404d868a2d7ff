"""General mistakes, recognised from how a wrong output relates to the right one.

A chapter's catalogue (``Mistake``) names mistakes of one exercise by recomputing them. Many
wrong answers of *any* exercise share a symptom instead: the output is the right one
transposed, scaled by a constant, negated, shifted by a constant or by one position, has a
dimension too few or too many (``keepdim``), is off by one in a length (a slice or range
bound), an inverted mask, or nan where the answer is finite. Mutation testing
(``python -m bench.mutation``) finds these classes over and over; this module names them.

:func:`diagnose` is consulted only after the output failed its comparison and no catalogued
mistake reproduced it, so it never decides pass or fail, only what the message says.
It reads nothing but the two values (plain data): the trusted verdict (``_judge``) uses it
as the in-kernel check (``_core``) does.

>>> import torch
>>> diagnose(torch.eye(2) + torch.tensor([[0.0, 1.0], [0.0, 0.0]]),
...          torch.eye(2) + torch.tensor([[0.0, 0.0], [1.0, 0.0]]), "allclose").name
'transposed output'
>>> diagnose([1, 2, 3], [1, 2], "exact").name
'one item too few'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

_Tensor, _ndarray, _type, _len = torch.Tensor, np.ndarray, type, len
_isclose, _allclose, _from_numpy = torch.isclose, torch.allclose, torch.from_numpy
_no_torch_function = torch._C.DisableTorchFunction


@dataclass(frozen=True)
class Symptom:
    name: str
    explanation: str


def _s(name: str, explanation: str) -> Symptom:
    return Symptom(name, explanation)


TRANSPOSED = _s(
    "transposed output",
    "Your output is the right one with its last two axes swapped: a transpose missing or one "
    "too many (k.T vs k, x @ W vs W @ x), or the wrong one of two axes reduced.",
)
SWAPPED_AXES = _s(
    "axes in the wrong order",
    "Your output holds the right numbers with two axes swapped: check the order of the axes "
    "you transpose, permute or reshape into (the shape comments say which is which).",
)
SCALED = _s(
    "output scaled by a constant",
    "Your output is the right one times a constant (shown above): a scale factor missing, "
    "doubled or inverted (1/sqrt(d_k), a mean vs a sum, a 1/n or a factor 2).",
)
NEGATED = _s(
    "sign flipped",
    "Your output is the right one negated: a subtraction with its operands swapped (b - a "
    "for a - b) or a minus sign missing or extra.",
)
RECIPROCAL = _s(
    "output inverted (1 / the answer)",
    "Your output is 1 divided by the right one: a division the wrong way round (b / a for "
    "a / b, total / e for e / total), or a power's sign flipped (x ** -0.5 for x ** 0.5).",
)
SHIFTED = _s(
    "output shifted by a constant",
    "Your output is the right one plus a constant (shown above): a term added or subtracted "
    "once too often or not at all (an eps, a max subtracted and not added back, a bias).",
)
ROLLED = _s(
    "off by one position",
    "Your output holds the right values, moved by one position along an axis: an off-by-one "
    "in an index, a slice bound or a range (x[1:] vs x[:-1], range(1, n) vs range(n)).",
)
DROPPED_DIM = _s(
    "a dimension dropped",
    "Your output lacks a size-1 axis the answer has: a reduction without keepdim=True "
    "(keepdims for numpy), an integer index where a slice keeps the axis, or a squeeze.",
)
EXTRA_DIM = _s(
    "an extra dimension",
    "Your output has an axis the answer lacks: keepdim=True where the axis should go, an "
    "unsqueeze/None too many, or a broadcast against the wrong shape.",
)
REDUCED_ALL = _s(
    "reduced over every axis",
    "Your output is a single number where the answer keeps an axis: a sum or mean over every "
    "axis (no dim= given, or a range of axes one too long), where only some should go.",
)
OFF_BY_ONE_LENGTH = _s(
    "length off by one",
    "One axis of your output is one entry too long or too short: an off-by-one in a slice "
    "bound or a range (x[:n] vs x[:n+1], range(1, n) vs range(n)).",
)
WRONG_AXIS_SIZE = _s(
    "wrong size along an axis",
    "One axis of your output has the size of another axis of the input: a reduction, "
    "concatenation or reshape over the wrong axis (dim/axis), or an axis transposed.",
)
NONFINITE = _s(
    "nan or inf where the answer is finite",
    "Your output has nan or inf where the right answer is finite: exp() overflowing (subtract "
    "the max first), a division by zero (an eps dropped), or -inf reaching a sum.",
)
INVERTED = _s(
    "True and False swapped",
    "Your boolean output is the exact opposite of the answer: True where it should be False. "
    "A comparison flipped (< vs >=), a ~ missing or extra, or the other convention of mask.",
)
DIAGONAL = _s(
    "diagonal wrong",
    "Your mask differs from the answer only on the diagonal: a strict inequality where it "
    "should not be (< vs <=), or tril/triu with the wrong diagonal offset.",
)
ONE_ITEM_TOO_FEW = _s(
    "one item too few",
    "Your result stops one item early: an off-by-one in a loop or range bound, or a stop "
    "condition that is met one step too soon.",
)
ONE_ITEM_TOO_MANY = _s(
    "one item too many",
    "Your result has one item more than the answer: an off-by-one in a loop or range bound, "
    "or a stop condition that is met one step too late.",
)
REVERSED = _s(
    "order reversed",
    "Your result has the right items in reverse order: a sort or a comparison the wrong way "
    "round (min for max, reverse=True), or items prepended instead of appended.",
)
NUMBER_OFF_BY_ONE = _s(
    "off by one",
    "Your number is one away from the answer: an off-by-one in a count, a bound or a length.",
)

GRADIENT_CUT = _s(
    "no gradient flows to an input",
    "Your output is right, but the gradient for an input (shown above) is 0 everywhere, where "
    "the right one is not: that input reaches the output only through a step autograd cannot "
    "follow (.detach(), .data, torch.no_grad(), .item() or .numpy() and back, torch.tensor("
    "...) of a tensor).",
)
GRADIENT_CUT_PART = _s(
    "the gradient stops in part of an input",
    "Your output is right, but the gradient for an input (shown above) is 0 on some entries "
    "where the right one is not: part of the computation is cut from the graph (a slice or "
    "a branch that goes through .detach(), .data or a new tensor, or a value overwritten in "
    "place after it was used).",
)

ALL = (TRANSPOSED, SWAPPED_AXES, SCALED, NEGATED, RECIPROCAL, SHIFTED, ROLLED, DROPPED_DIM,
       EXTRA_DIM, REDUCED_ALL, OFF_BY_ONE_LENGTH, WRONG_AXIS_SIZE, NONFINITE, INVERTED, DIAGONAL,
       ONE_ITEM_TOO_FEW, ONE_ITEM_TOO_MANY, REVERSED, NUMBER_OFF_BY_ONE)  # fmt: skip
GRADIENTS = (GRADIENT_CUT, GRADIENT_CUT_PART)  # of a grad case (tests/unit/test_probes.py)


def _t(x) -> torch.Tensor | None:
    if _type(x) is _ndarray:
        try:
            return _from_numpy(np.array(x, order="C", copy=True))  # 0-d stays 0-d
        except TypeError:  # an object or string array
            return None
    return x if _type(x) is _Tensor else None


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype == torch.bool or b.dtype == torch.bool:
        return bool(torch.equal(a.bool(), b.bool())) if a.dtype == b.dtype else False
    a, b = a.double(), b.double()
    return bool(_allclose(a, b, rtol=1e-5, atol=1e-7, equal_nan=True))


def _shape_symptom(e: torch.Tensor, g: torch.Tensor) -> Symptom | None:
    es, gs = tuple(e.shape), tuple(g.shape)
    if g.numel() == 1 and e.numel() > 1 and _len(gs) < _len(es):
        return REDUCED_ALL
    if _len(gs) == _len(es) - 1 and any(es[:i] + es[i + 1:] == gs
                                        for i in range(_len(es)) if es[i] == 1):
        return DROPPED_DIM
    if _len(gs) == _len(es) + 1 and any(gs[:i] + gs[i + 1:] == es
                                        for i in range(_len(gs)) if gs[i] == 1):
        return EXTRA_DIM
    if _len(gs) == _len(es):
        diff = [i for i in range(_len(es)) if es[i] != gs[i]]
        if sorted(gs) == sorted(es) and _len(diff) == 2:
            return SWAPPED_AXES
        if _len(diff) == 1:
            i = diff[0]
            return OFF_BY_ONE_LENGTH if abs(es[i] - gs[i]) == 1 else WRONG_AXIS_SIZE
    return None


def _value_symptom(e: torch.Tensor, g: torch.Tensor) -> Symptom | None:
    if e.dtype == torch.bool and g.dtype == torch.bool:
        if torch.equal(g, ~e):
            return INVERTED
        if e.dim() >= 2 and e.shape[-1] == e.shape[-2]:
            eye = torch.eye(e.shape[-1], dtype=torch.bool)
            if not torch.equal(g, e) and torch.equal(g & ~eye, e & ~eye):
                return DIAGONAL
        return None
    if not (e.is_floating_point() or g.is_floating_point()):
        e, g = e.double(), g.double()
    e, g = e.double(), g.double()
    fe, fg = torch.isfinite(e), torch.isfinite(g)
    if bool((fe & ~fg).any()):
        return NONFINITE
    if e.dim() >= 2 and e.shape[-1] == e.shape[-2] and _close(g, e.transpose(-1, -2)):
        return TRANSPOSED
    if e.dim() >= 2:  # two other axes of equal size swapped
        for i in range(e.dim()):
            for j in range(i + 1, e.dim()):
                if e.shape[i] == e.shape[j] and (i, j) != (e.dim() - 2, e.dim() - 1):
                    swapped = e.transpose(i, j)
                    if _close(g, swapped) and not _close(swapped, e):
                        return SWAPPED_AXES
    both = fe & fg
    if int(both.sum()) < 2:
        return None
    ev, gv = e[both], g[both]
    if _close(gv, -ev) and bool((ev.abs() > 1e-12).any()):
        return NEGATED
    if bool((ev != 0).all()) and _close(gv, 1 / ev) and not _close(gv, ev):
        return RECIPROCAL
    big = ev.abs() > 1e-9 * float(ev.abs().max())
    if int(big.sum()) >= 2:
        ratio = gv[big] / ev[big]
        r = float(ratio.mean())
        if math.isfinite(r) and abs(r - 1) > 1e-6 and r != 0 and _close(gv, ev * r):
            return SCALED
    c = float((gv - ev).mean())
    if abs(c) > 1e-12 and _close(gv, ev + c):
        return SHIFTED
    for d in range(e.dim()):
        if e.shape[d] > 1:
            for k in (1, -1):
                r = torch.roll(e, k, dims=d)
                if _close(r, e):  # constant along this axis: a roll shows nothing
                    continue
                keep = [slice(None)] * e.dim()
                keep[d] = slice(1, None) if k == 1 else slice(None, -1)
                if _close(g[tuple(keep)], r[tuple(keep)]) and not _close(g, e):
                    return ROLLED
    return None


def _exact_symptom(e, g) -> Symptom | None:
    if _type(e) in (list, tuple) and _type(g) in (list, tuple):
        e, g = list(e), list(g)
        if _len(g) == _len(e) - 1 and (g == e[:-1] or g == e[1:]):
            return ONE_ITEM_TOO_FEW
        if _len(g) == _len(e) + 1 and (g[:-1] == e or g[1:] == e):
            return ONE_ITEM_TOO_MANY
        if _len(e) > 1 and g == e[::-1] and g != e:
            return REVERSED
        return None
    if _type(e) is int and _type(g) is int and abs(e - g) == 1:
        return NUMBER_OFF_BY_ONE
    return None


def diagnose(expected, got, kind: str) -> Symptom | None:
    """The symptom that relates a wrong ``got`` to the ``expected`` value, if one does.

    ``kind``: the case's kind ("allclose", "exact", "scalar", ...).
    """
    try:
        with _no_torch_function(), np.errstate(all="ignore"):
            return _diagnose(expected, got, kind)
    except Exception:  # noqa: BLE001 - an odd value: no symptom, the plain message stands
        return None


def _diagnose(expected, got, kind: str) -> Symptom | None:
    if kind == "exact":
        return _exact_symptom(expected, got)
    if kind in ("scalar", "statistic"):
        if _type(got) in (_Tensor, _ndarray) and _len(getattr(got, "shape", (1,))) == 0:
            got = got.item()
        if not isinstance(got, int | float) or isinstance(got, bool):
            return None
        e, g = float(expected), float(got)
        if math.isfinite(e) and not math.isfinite(g):
            return NONFINITE
        if e != 0 and g != 0 and abs(g + e) <= 1e-9 * abs(e):
            return NEGATED
        if e == int(e) and g == int(g) and abs(e - g) == 1:
            return NUMBER_OFF_BY_ONE
        return None
    if _type(expected) is tuple:
        if _type(got) not in (tuple, list) or _len(got) != _len(expected):
            return None
        for e, g in zip(expected, got):
            te, tg = _t(e), _t(g)
            if te is None or tg is None:
                return None
            if _type(e) is not _type(g) or te.shape != tg.shape or te.dtype != tg.dtype \
                    or not _close(te, tg):
                return _diagnose(e, g, kind)  # the item the comparison's message is about
        return None
    e, g = _t(expected), _t(got)
    if e is None or g is None or _type(expected) is not _type(got):
        return None  # the message says which type it should be: nothing to add
    if e.shape != g.shape:
        return _shape_symptom(e, g)
    if e.dtype != g.dtype:
        return None  # the message names the dtype: a value symptom would be a guess
    return _value_symptom(e, g)


def diagnose_grads(expected: tuple, got: tuple) -> Symptom | None:
    """The symptom of gradients ``got`` (the output being right) against ``expected``: the
    first one that differs is 0 everywhere (:data:`GRADIENT_CUT`) or on the entries where it
    differs (:data:`GRADIENT_CUT_PART`) while the right one is not; else None.

    >>> e = torch.tensor([1.0, 2.0])
    >>> diagnose_grads((e,), (torch.zeros(2),)).name
    'no gradient flows to an input'
    >>> diagnose_grads((e,), (torch.tensor([1.0, 0.0]),)).name
    'the gradient stops in part of an input'
    """
    try:
        with _no_torch_function():
            for e, g in zip(expected, got):
                if _type(e) is not _Tensor or _type(g) is not _Tensor or e.shape != g.shape:
                    return None
                e, g = e.detach().double(), g.detach().double()
                if _close(g, e):
                    continue
                scale = float(e.abs().max()) if e.numel() else 0.0
                off = ~torch.isclose(g, e, rtol=1e-4, atol=1e-6 * max(scale, 1e-12))
                if not bool((e[off].abs() > 1e-9 * scale).any()) or not bool(
                        (g[off] == 0).all()):
                    return None
                return GRADIENT_CUT if bool((g == 0).all()) else GRADIENT_CUT_PART
    except Exception:  # noqa: BLE001 - odd gradients: no symptom
        return None
    return None


# ---------------------------------------------------------------- errors
SHAPES_MISMATCH = _s(
    "shapes do not line up",
    "Two operands have shapes that do not fit: a transpose missing or extra, a reduction over "
    "the wrong axis, or keepdim=True dropped. Print the shapes of both operands.",
)
AXIS_OUT_OF_RANGE = _s(
    "axis out of range",
    "An axis (dim/axis) the array does not have: count from the end (dim=-1, -2) so any "
    "number of leading batch axes works, and check which array you reduce.",
)
INDEX_OUT_OF_RANGE = _s(
    "index out of range",
    "An index one past the end: an off-by-one in a loop or range bound (range(n) covers 0 to "
    "n - 1).",
)
NONE_VALUE = _s(
    "a value is None",
    "Something you computed with is None: a helper without `return`, or the line that "
    "should set the value is missing.",
)
MISSING_KEY = _s(
    "a key that was never stored",
    "A dict lookup of a key nothing stored: a count or id not added or updated when it "
    "should be (a merge's new pairs), or a lookup that needs a default (d.get(k, 0), "
    "collections.Counter, defaultdict(int)).",
)
EMPTY_MAX = _s(
    "max() or min() of an empty sequence",
    "A loop went on after there was nothing left to pick from: stop when no pair (or "
    "candidate) remains, or when the target size is reached, before taking max()/min().",
)
BYTE_RANGE = _s(
    "a byte value outside 0..255",
    "bytes([i]) needs 0 <= i < 256: an off-by-one in a byte value or token id, or an id "
    "that is not a single byte used as one.",
)
RESHAPE_SIZE = _s(
    "a reshape to a shape of the wrong size",
    "view/reshape needs a shape with as many entries as the tensor: check the sizes you "
    "split into (B, T, H, d_k with H * d_k = d_model), and use // for sizes.",
)
FLOAT_SIZE = _s(
    "a float where a size is needed",
    "Sizes and indices are ints: d_model // H, not d_model / H (which is a float).",
)
NO_GRAD_PATH = _s(
    "no gradient path",
    "What you call backward() on is not connected to the parameters: a step that builds it "
    "is missing, or it went through .detach(), .item() or torch.no_grad().",
)

_ERRORS = (
    (SHAPES_MISMATCH, ("must match the size of tensor", "shapes cannot be multiplied",
                       "could not be broadcast", "size mismatch", "mismatch in its core dimension",
                       "shape mismatch", "doesn't match the broadcast shape",
                       "must have the same shape", "not aligned",
                       "expected size for first two dimensions")),
    (RESHAPE_SIZE, ("is invalid for input of size", "cannot reshape array of size")),
    (FLOAT_SIZE, ("failed to unpack the object", "'float' object cannot be interpreted as an "
                  "integer", "slice indices must be integers", "must be tuple of ints, not float",
                  "must be int, not float", "are valid indices (got float)")),
    (NO_GRAD_PATH, ("does not require grad and does not have a grad_fn",)),
    (AXIS_OUT_OF_RANGE, ("dimension out of range", "is out of bounds for array of dimension")),
    (INDEX_OUT_OF_RANGE, ("index out of range", "is out of bounds for dimension",
                          "is out of bounds for axis")),
    (NONE_VALUE, ("'nonetype'",)),
    (EMPTY_MAX, ("arg is an empty sequence", "iterable argument is empty")),
    (BYTE_RANGE, ("bytes must be in range(0, 256)",)),
)  # fmt: skip
ALL_ERRORS = (MISSING_KEY, *(s for s, _ in _ERRORS))


def diagnose_error(exc_name: str, message: str) -> Symptom | None:
    """The symptom an exception's message shows, if one does.

    >>> diagnose_error("RuntimeError", "mat1 and mat2 shapes cannot be multiplied").name
    'shapes do not line up'
    """
    if exc_name == "KeyError":
        return MISSING_KEY
    text = f"{exc_name}: {message}".lower()
    for symptom, needles in _ERRORS:
        if any(n in text for n in needles):
            return symptom
    return None
