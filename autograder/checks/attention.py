"""Checks for notebook 01 (attention), each with its catalogue of known mistakes.

Every check runs the student's function on seeded inputs over several shapes and dtypes
and compares it with ``transformer_ref`` (expected outputs are computed here, on first use;
in a notebook at import, before any student code runs: ``_core._Cases``). On a mismatch the
catalogue below is tried: a mistake whose output equals the student's output is named in the
message.

>>> def softmax(x, axis=-1):  # forgot to subtract the max
...     return np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)
>>> try:
...     with np.errstate(all="ignore"):
...         check_softmax(softmax)
... except AssertionError as e:  # a CheckFailed
...     print(str(e).splitlines()[2].strip()[:45])
Likely mistake: unstable softmax overflowing.
"""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import torch

import transformer_ref
from autograder.checks import _metamorphic as _mm
from autograder.checks import table
from autograder.checks._cases import grad_case
from autograder.checks._cases import is_broadcast_error as _is_broadcast_error
from autograder.checks._cases import is_matmul_mismatch as _is_matmul_mismatch
from autograder.checks._cases import np_rand as _np_rand
from autograder.checks._cases import t_rand as _t_rand
from autograder.checks._core import Case, Check, ErrorHint, Mistake, register
from autograder.checks._core import _call as _call_guarded
from autograder.checks._judge import Driven

# trusted references: bound here, at import, before any student cell runs
from transformer_ref import causal_mask as _causal
from transformer_ref import column_form_self_attention as _col_form
from transformer_ref import cosine_similarity_attention as _cos_attn
from transformer_ref import scaled_dot_product_attention as _sdpa
from transformer_ref import softmax as _t_softmax
from transformer_ref.numpy_ref import scaled_dot_product_attention as _np_sdpa
from transformer_ref.numpy_ref import softmax as _np_softmax

__all__ = [
    "check_dot_product_scores",
    "check_softmax",
    "check_self_attention_unscaled",
    "check_score_variance",
    "check_scaled_dot_product_attention",
    "check_column_form_self_attention",
    "check_cosine_similarity_attention",
    "check_self_score_dominance",
]


# ====================================================================== Exercise 1.1
def _scores_ref(Q, K):
    return Q @ np.swapaxes(K, -1, -2)


_SCORES_CASES = []
for _i, (_q, _k, _dt, _hidden) in enumerate(
    [
        ((2, 3), (4, 3), np.float64, False),
        ((5, 4), (3, 4), np.float32, False),
        ((2, 5, 4), (2, 3, 4), np.float32, False),
        ((2, 3, 4, 8), (2, 3, 6, 8), np.float64, False),
        ((1, 4), (1, 4), np.float64, True),
        ((2, 1, 3, 2, 5), (2, 1, 3, 7, 5), np.float32, True),
    ]
):
    _Q, _K = _np_rand(100 + _i, *_q, dtype=_dt), _np_rand(200 + _i, *_k, dtype=_dt)
    _SCORES_CASES.append(
        Case(
            f"Q {_q}, K {_k}, {np.dtype(_dt).name}",
            (_Q, _K),
            _scores_ref(_Q, _K),
            hidden=_hidden,
        )
    )

_DOT = Check(
    **table.identity(__name__, "dot_product_scores"),
    reference_off=True,
    cases=tuple(_SCORES_CASES),
    probes=(_mm.factor(lambda case: {"sqrt(d_k)": math.sqrt(case.args[0].shape[-1]),
                                     "d_k": case.args[0].shape[-1]},
                       "Exercise 1.1 asks for the raw dot products Q Kᵀ: the scaling by "
                       "1/sqrt(d_k) comes later, in scaled_dot_product_attention."),),
    mistakes=(
        Mistake(
            "scores transposed (K Qᵀ)",
            "Row i of the scores belongs to query i: S = Q Kᵀ has shape (T_q, T_k).",
            lambda Q, K: K @ np.swapaxes(Q, -1, -2),
        ),
    ),
    error_hints=(
        ErrorHint(
            "the shapes of a matrix product do not line up (`.T` on a batched array?)",
            "Q is (..., T_q, d) and K is (..., T_k, d): multiply Q by K transposed over its "
            "last two axes, `Q @ np.swapaxes(K, -1, -2)` (`K.T` only works for 2-d K).",
            _is_matmul_mismatch,
        ),
    ),
)
check_dot_product_scores = register(_DOT)


# ====================================================================== Exercise 2.1
def _softmax_naive(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_last_axis(x, axis=-1):
    return _np_softmax(x, axis=-1)


def _softmax_axis0(x, axis=-1):
    return _np_softmax(x, axis=0)


def _softmax_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_nan_rows(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_global_sum(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum()


def _softmax_cases():
    cases = []

    def add(label, x, axis=-1, hidden=False):
        kw = {} if axis == -1 else {"axis": axis}
        cases.append(Case(label, (x,), _np_softmax(x, axis=axis), kwargs=kw, hidden=hidden))

    add("a small row, float64", np.array([[1.0, 2.0, 3.0]]))
    add("a (4, 5) matrix, float32", _np_rand(2, 4, 5, dtype=np.float32))
    add("a (3, 3) matrix, float64", _np_rand(1, 3, 3))
    add("a (2, 3, 4) array, float64", _np_rand(3, 2, 3, 4))
    add("axis=0 of a (3, 4) matrix", _np_rand(4, 3, 4), axis=0)
    add("axis=1 of a (2, 3, 4) array", _np_rand(5, 2, 3, 4), axis=1)
    add("large inputs (x ~ 1000)", np.array([[1000.0, 1001.0, 1002.0], [-5.0, 0.0, 5.0]]))
    add(
        "rows on very different scales",
        np.array([[0.0, 1.0, 2.0], [800.0, 801.0, 802.0]]),
    )
    add(
        "a row of all -inf (fully masked)",
        np.array([[0.5, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]]),
    )
    add("a single entry", np.array([3.0]), hidden=True)
    add(
        "large float32 inputs (x ~ 1e4)",
        _np_rand(6, 3, 5, dtype=np.float32, scale=1e4),
        hidden=True,
    )
    add("very negative inputs (x ~ -1e4)", _np_rand(7, 2, 4, scale=1e2) - 1e4, hidden=True)
    add("axis=-2 of a (2, 3, 4, 5) array", _np_rand(8, 2, 3, 4, 5), axis=-2, hidden=True)
    add(
        "a fully masked column, axis=0",
        np.array([[1.0, -np.inf], [2.0, -np.inf], [3.0, -np.inf]]),
        axis=0,
        hidden=True,
    )
    return tuple(cases)


_SOFTMAX = Check(
    **table.identity(__name__, "softmax"),
    probes=(_mm.answer_for(lambda case: ((-case.args[0],), dict(case.kwargs)), "-x",
                           _np_softmax, "Subtract the maximum from x (x - max), not x from "
                           "the maximum: softmax(x) = exp(x - m) / sum(exp(x - m))."),),
    reference_off=True,
    cases=_softmax_cases,
    mistakes=(
        Mistake(
            "unstable softmax overflowing",
            "np.exp(1000) is inf and inf / inf is nan. Subtract the maximum along `axis` "
            "before exponentiating: it cancels in the ratio but keeps exp() <= 1.",
            _softmax_naive,
        ),
        Mistake(
            "softmax over the wrong axis (always the last one)",
            "Use the `axis` argument in your max and sum.",
            _softmax_last_axis,
        ),
        Mistake(
            "softmax over the wrong axis (axis 0)",
            "Use the `axis` argument in your max and sum.",
            _softmax_axis0,
        ),
        Mistake(
            "subtracted the maximum of the whole array",
            "A row far below the global maximum underflows to exp(-800) = 0 and gives 0/0. "
            "Subtract each slice's own maximum: np.max(x, axis=axis, keepdims=True).",
            _softmax_global_max,
        ),
        Mistake(
            "a fully masked slice gives nan",
            "If every entry is -inf, the max is -inf and -inf - (-inf) is nan. Shift by 0 "
            "where the max is not finite (np.where(np.isfinite(m), m, 0)) and divide by 1 "
            "where the sum is 0, so the slice comes out as zeros.",
            _softmax_nan_rows,
        ),
        Mistake(
            "normalised by the sum of the whole array",
            "Each slice along `axis` must sum to one: sum with axis=axis, keepdims=True.",
            _softmax_global_sum,
        ),
    ),
    error_hints=(
        ErrorHint(
            "max or sum without keepdims=True",
            "np.max(x, axis=axis) drops the axis and no longer broadcasts against x; "
            "use keepdims=True.",
            _is_broadcast_error,
        ),
    ),
    forbidden=("softmax", "special_softmax", "_softmax", "log_softmax"),
    forbidden_hint="Write it with np.exp, np.max and np.sum.",
)
check_softmax = register(_SOFTMAX)


# ====================================================================== Exercise 3.1
def _sa_ref(X, W_Q, W_K, W_V):
    return _np_sdpa(X @ W_Q, X @ W_K, X @ W_V, scale=1.0)


def _sa_cases():
    cases = []
    specs = [
        # (n, d, d_k, d_v, leading, dtype, scale, hidden)
        (4, 5, 4, 2, (), np.float64, 1.0, False),  # n == d_k: a missing transpose still runs
        (3, 4, 2, 3, (), np.float64, 1.0, False),
        (6, 8, 4, 5, (), np.float32, 1.0, False),
        (5, 8, 4, 4, (2,), np.float64, 1.0, False),
        (1, 4, 3, 2, (), np.float64, 1.0, True),
        (7, 6, 6, 3, (2, 3), np.float32, 1.0, True),
        (5, 4, 4, 3, (), np.float32, 6.0, True),  # scores ~ 300: exp overflows float32
    ]
    for i, (n, d, d_k, d_v, lead, dt, s, hidden) in enumerate(specs):
        X = _np_rand(300 + i, *lead, n, d, dtype=dt, scale=s)
        Ws = [_np_rand(310 + 3 * i + j, d, w, dtype=dt) for j, w in enumerate((d_k, d_k, d_v))]
        label = f"X {(*lead, n, d)}, d_k={d_k}, d_v={d_v}, {np.dtype(dt).name}"
        if s != 1.0:
            label += f", inputs scaled by {s:g}"
        cases.append(Case(label, (X, *Ws), _sa_ref(X, *Ws), hidden=hidden))
    return tuple(cases)


_SELF_ATTN = Check(
    **table.identity(__name__, "self_attention_unscaled"),
    uses=table.uses(__name__, "dot_product_scores", "softmax"),
    reference_off=True,
    cases=_sa_cases,
    mistakes=(
        Mistake(
            "softmax over the wrong axis (over queries)",
            "Each output y_i mixes the values with weights that sum to one over j (the keys): "
            "softmax over the last axis of the (n, n) score matrix. Normalising over the "
            "queries is [S1]'s column form, not this row form.",
            lambda X, Wq, Wk, Wv: (
                np.swapaxes(
                    _np_softmax(np.swapaxes(X @ Wq @ np.swapaxes(X @ Wk, -1, -2), -1, -2)), -1, -2
                )
                @ (X @ Wv)
            ),
        ),
        Mistake(
            "missing transpose of K",
            "The scores are Q Kᵀ (n, n): q_i · k_j for every pair. Q @ K only runs when "
            "n == d_k and then computes something else.",
            lambda X, Wq, Wk, Wv: _np_softmax((X @ Wq) @ (X @ Wk)) @ (X @ Wv),
        ),
        Mistake(
            "scaled the scores by 1/sqrt(d_k)",
            "This exercise is [S3]'s unscaled form: softmax(Q Kᵀ) V. Scaling "
            "comes in "
            "section 4.",
            lambda X, Wq, Wk, Wv: _np_sdpa(X @ Wq, X @ Wk, X @ Wv),
        ),
        Mistake(
            "used W_Q for the keys",
            "K = X W_K, not X W_Q.",
            lambda X, Wq, Wk, Wv: _np_sdpa(X @ Wq, X @ Wq, X @ Wv, scale=1.0),
        ),
        Mistake(
            "returned the attention weights instead of the output",
            "After softmax(Q Kᵀ) (n, n), multiply by V (n, d_v).",
            lambda X, Wq, Wk, Wv: _np_softmax(X @ Wq @ np.swapaxes(X @ Wk, -1, -2)),
        ),
        Mistake(
            "unstable softmax overflowing",
            "Unscaled scores get large; exp() of them overflows to inf and inf/inf = nan. "
            "Use your stable softmax from Exercise 2.1.",
            lambda X, Wq, Wk, Wv: _softmax_naive(X @ Wq @ np.swapaxes(X @ Wk, -1, -2)) @ (X @ Wv),
        ),
    ),
    error_hints=(
        ErrorHint(
            "the shapes of a matrix product do not line up",
            "In row form Q = X @ W_Q with W_Q of shape (d, d_k) (the wiki page [S3] writes "
            "q_i = W_q x_i "
            "for column vectors, i.e. W_q = W_Qᵀ). Scores: Q @ swapaxes(K, -1, -2).",
            _is_matmul_mismatch,
        ),
    ),
    forbidden=("softmax", "special_softmax", "_softmax", "scaled_dot_product_attention"),
    forbidden_hint="Use numpy and your own softmax from Exercise 2.1.",
)
check_self_attention_unscaled = register(_SELF_ATTN)


# ====================================================================== Exercise 4.1
def _rng_call(d_k: int, n: int, seed: int):
    return lambda: (d_k, n, np.random.default_rng(seed))


def _variance_cases():
    cases = []
    for i, (d_k, hidden) in enumerate(
        [(4, False), (16, False), (64, False), (1, True), (256, True)]
    ):
        n = 20_000
        # relative sd of a sample variance of q.k is about sqrt((2 + 6/d_k) / n) < 2%
        cases.append(
            Case(
                f"d_k={d_k}, n_samples={n}",
                (d_k, n, None),
                float(d_k),
                kind="statistic",
                rtol=0.1,
                atol=0.1 * math.sqrt(d_k),
                call=_rng_call(d_k, n, 400 + i),
                hidden=hidden,
                # three more generators: a measurement varies, a formula does not
                samples=tuple(_rng_call(d_k, n, 400 + i + 100 * j) for j in (1, 2, 3))
                if d_k <= 64
                else (),
                spread=d_k * math.sqrt((2 + 6 / d_k) / n),
            )
        )
    for case in cases:  # the grader's own measurements, once (the warm process: every fork)
        _HINT[_state(*case.call())] = list(itertools.islice(redrawn(*case.call()), 4))
    return tuple(cases)


def _products(d_k, n, rng):
    q = rng.standard_normal((n, d_k))
    k = rng.standard_normal((n, d_k))
    return q * k  # (n, d_k): row s holds the d_k products of sample s


def _dots(d_k, n, rng):
    return _products(d_k, n, rng).sum(axis=-1)


# A statistic's spread across generators is checked from below only (``samples``): the known
# answer jittered by the generator, d_k * (1 + 0.02 * rng.standard_normal()), spreads too.
# What no jitter can imitate: a measurement of n_samples pairs depends on *all* the draws.
# So the check also runs the function on twin generators, a case's own generator and one
# whose first 64-bit output is the same but every later one differs (PCG64 is an LCG on
# 128 bits, state -> state * M + inc, whose output is a function of the new state: another
# stream inc' and the start state that reaches the same first state give the same first
# output only). Every honest measurement gives two different results, whatever the order
# or layout of its draws (q then k, (n, 2, d_k), a loop over samples, (d_k, n)), numpy or
# torch, ddof 0 or 1; a number computed from the generator's first draw (a normal, a
# uniform, an integer, a torch seed) gives the same result twice.
# The goal also says *from the given generator* (issue 49): on a generator in the same state
# as the case's own a measurement gives the same number again (one drawn from a new
# generator, ``np.random.default_rng()``, does not), and on that generator advanced (as a
# second call finds it) a different one (a number that ignores the generator does not).
_PCG64_MULT = 0x2360ED051FC65DA44385DF649FCCF645  # numpy's PCG64 (PCG_DEFAULT_MULTIPLIER_128)
_OTHER_STREAM = 0x9E3779B97F4A7C15F39CC0605CEDC834  # even: inc ^ it is odd, another stream
_MOD = 1 << 128
ADVANCE = 1 << 20  # the advanced generator: this many 64-bit outputs later


def twin(seed: int) -> np.random.Generator:
    """A generator whose first output is that of ``default_rng(seed)``, no later one.

    >>> a, b = np.random.default_rng(400), twin(400)
    >>> a.standard_normal() == b.standard_normal(), a.standard_normal() == b.standard_normal()
    (True, False)
    """
    state = np.random.default_rng(seed).bit_generator.state
    s, inc = state["state"]["state"], state["state"]["inc"]
    first = (s * _PCG64_MULT + inc) % _MOD  # the state the first output is taken from
    inc2 = inc ^ _OTHER_STREAM
    start = (first - inc2) * pow(_PCG64_MULT, -1, _MOD) % _MOD
    bg = np.random.PCG64()
    bg.state = {**state, "state": {"state": start, "inc": inc2}}
    return np.random.Generator(bg)


def advanced(seed: int) -> np.random.Generator:
    """``default_rng(seed)`` after :data:`ADVANCE` outputs, as a later call finds it.

    >>> a = np.random.default_rng(400)
    >>> _ = a.bit_generator.random_raw(ADVANCE)
    >>> a.standard_normal() == advanced(400).standard_normal()
    True
    """
    rng = np.random.default_rng(seed)
    rng.bit_generator.advance(ADVANCE)
    return rng


def _twins_ok(seed: int) -> bool:
    """Whether ``twin(seed)`` shares the first output with ``default_rng(seed)``, none of
    the next four, and so the first standard normal (the ziggurat's fast path: one output)."""
    raw_a = np.random.default_rng(seed).bit_generator.random_raw(5)
    raw_b = twin(seed).bit_generator.random_raw(5)
    a, b = np.random.default_rng(seed), twin(seed)
    return bool(
        raw_a[0] == raw_b[0]
        and (raw_a[1:] != raw_b[1:]).all()
        and a.standard_normal() == b.standard_normal()
    )


# (d_k, n_samples, seed): the first two cases' generators (empty if numpy's PCG64 changed)
TWINS = tuple((d_k, 20_000, seed) for d_k, seed in ((4, 400), (16, 401)) if _twins_ok(seed))
# the generators of each seed the stage calls the function on, in this order
GENERATORS = ("the case's own", "the twin", "the same state again", "advanced")


def _twin_args() -> tuple:
    """Fresh arguments for each seed of ``TWINS``: ((d_k, n, its generator), (d_k, n, its
    twin), (d_k, n, a generator in the same state), (d_k, n, it advanced)), ..."""
    return tuple(
        ((d_k, n, np.random.default_rng(seed)), (d_k, n, twin(seed)),
         (d_k, n, np.random.default_rng(seed)), (d_k, n, advanced(seed)))
        for d_k, n, seed in TWINS
    )


_JITTER = "returned d_k plus noise instead of measuring it"
_JITTER_WHY = (
    "The known answer with noise from the generator, like d_k * (1 + 0.02 * "
    "rng.standard_normal()), varies like a measurement but measures nothing: draw the "
    "n_samples pairs (q, k) from the generator and return the sample variance of q · k."
)
FRESH = "drew from a new generator instead of the given rng"
_FRESH_WHY = (
    "Draw the samples from the generator you are given, `rng.standard_normal(...)`: a new "
    "one (`np.random.default_rng()`, `np.random.standard_normal`, `torch.randn`) gives other "
    "numbers on every run, so the same generator state cannot reproduce your result."
)
IGNORED = "ignored the given generator (the result does not change when it advances)"
_IGNORED_WHY = (
    "Draw the samples from the generator you are given, `rng.standard_normal(...)`: a "
    "generator that has moved on (as a second call finds it) gives new samples, and a "
    "measurement of them a new number."
)


def _as_number(x) -> float | None:
    if isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim == 0:
        x = x.item()
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        return None
    return float(x)


def _equal(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _twin_problem(*outs) -> tuple[str, str] | None:
    """(diagnosis, problem) from the results on each seed's generators (``GENERATORS`` for
    each seed of ``TWINS``, in that order), or None: a measurement from the given generator
    gives the same number on the same state, and differs on the advanced and twin ones."""
    k = len(GENERATORS)
    for i, (d_k, n, _) in enumerate(TWINS):
        nums = [_as_number(x) for x in outs[k * i : k * i + k]]
        if len(nums) < k or any(x is None for x in nums):
            return ("not a measurement", "on the twin generators the result is not a number")
        own, twin_, again, later = nums
        where = f"d_k={d_k}, n_samples={n}"
        if not _equal(own, again):
            return (
                FRESH,
                f"on two generators in the same state ({where}) your results differ "
                f"({own:.6g} and {again:.6g}): they do not come from the generator you are "
                f"given. {_FRESH_WHY}",
            )
        if _equal(own, later):
            return (
                IGNORED,
                f"on a generator and the same one advanced ({where}) your results are equal "
                f"({own:.6g}): they do not depend on its draws. {_IGNORED_WHY}",
            )
        if _equal(own, twin_):
            return (
                _JITTER,
                f"on two random generators that share their first draw and no later one "
                f"({where}) your results are equal ({own:.6g}): they come from "
                f"that one draw, while a measurement of {n} pairs differs. {_JITTER_WHY}",
            )
    return None


# The exercise prescribes the measurement: n_samples pairs (q, k) drawn from the given
# generator, the sample variance of their dot products. So the grader draws the same numbers
# from each case's own generator and measures too (issue 47): the student's result must be
# that measurement up to rounding. A jitter of the known answer, d_k * (1 + 0.02 *
# rng.standard_normal(4).mean()), spreads and depends on many draws like a measurement, but
# is not this one. Every honest layout of the 2 x n_samples x d_k draws counts (q then k,
# pairs, a loop over samples, (d_k, n)), as float64 or float32 draws, with np.var's ddof 0
# or 1 or the mean of squares (the mean is 0).
REDRAWN = "not the variance of the pairs drawn from the given generator"
_REDRAWN_WHY = (
    "Draw q and k from the generator you are given, n_samples x d_k standard normals each "
    "(`rng.standard_normal((n_samples, d_k))`), and nothing else from it, then return the "
    "sample variance of the n_samples dot products: the grader draws the same numbers from "
    "the same generator and measures them too."
)
REDRAW_RTOL = 1e-4  # float32 sums round at 1e-5; two honest measurements differ by ~2%
_LAYOUTS = ((0, 1, 2), (1, 0, 2), (0, 2, 1), (1, 2, 0), (2, 0, 1), (2, 1, 0))
_HINT: dict = {}  # (d_k, n, a case's generator state) -> the hint's layout's values


def _state(d_k: int, n: int, rng: np.random.Generator) -> tuple:
    return d_k, n, repr(rng.bit_generator.state)


def redrawn(d_k: int, n: int, rng: np.random.Generator):
    """The variances of q · k a measurement of ``n`` pairs drawn from ``rng`` can give, the
    hint's first: the ``2 * n * d_k`` standard normals ``rng`` gives next (float64, then
    float32) laid out as (pair, sample, component) in each order, then np.var with ddof 0
    and 1, and the mean of squares over n and n - 1. ``rng`` itself is not advanced.

    >>> rng = np.random.default_rng(5)
    >>> q, k = rng.standard_normal((100, 3)), rng.standard_normal((100, 3))
    >>> next(redrawn(3, 100, np.random.default_rng(5))) == float(np.var((q * k).sum(-1)))
    True
    """
    yield from _HINT.get(_state(d_k, n, rng), ())  # a case's, measured with the cases
    dims = (2, n, d_k)
    for dtype in (np.float64, np.float32):
        draws = copy.deepcopy(rng).standard_normal(2 * n * d_k, dtype=dtype)
        for axes in _LAYOUTS:
            x = draws.reshape([dims[a] for a in axes]).transpose(np.argsort(axes))
            dots = (x[0].astype(np.float64) * x[1]).sum(-1)  # (n,): one q · k per pair
            squares = float(np.dot(dots, dots))
            yield float(np.var(dots))
            yield float(np.var(dots, ddof=1))
            yield squares / n
            yield squares / max(n - 1, 1)


def redraw_problem(case: Case, args: tuple, out) -> tuple[str, str] | None:
    """(diagnosis, problem) when ``out`` (the result on ``args``, the case's own generator)
    is not the measurement :func:`redrawn` re-draws, else None."""
    got = _as_number(out)
    d_k, n, rng = args
    if got is None or any(abs(got - v) <= REDRAW_RTOL * max(1.0, abs(v))
                          for v in redrawn(d_k, n, rng)):
        return None
    if case.hidden:  # no hidden case's data on a page (issue 47): its label, not its values
        return (REDRAWN, f"on the hidden case “{case.label}” your function's result is not "
                "the variance of the pairs drawn from the generator it was given. "
                f"{_REDRAWN_WHY}")
    mine = next(redrawn(d_k, n, rng))
    return (REDRAWN, f"on d_k={d_k}, n_samples={n} the grader drew the same {2 * n * d_k:,} "
            f"numbers from the generator you were given and measured Var(q · k) = "
            f"{mine:.6g}; your function returned {got:.6g}. {_REDRAWN_WHY}")


def _twin_stage(fn, hidden: bool) -> str | None:
    """Exercise 4.1's extra stage, in the kernel: the function on each seed's generators
    (``GENERATORS``: the case's own, its twin, one in the same state, one advanced), then on
    each case's generators again, against the grader's own measurement (:func:`redrawn`)."""
    outs = []
    for group in _twin_args():
        for args in group:
            case = Case("twin generators", args, None, kind="statistic")
            try:
                outs.append(_call_guarded(_VARIANCE, fn, case)[1])
            except Exception as e:
                return f"on the twin generators your function raised {type(e).__name__}: {e}"
    found = _twin_problem(*outs) or _redraw_stage(fn, hidden)
    return f"{found[1]}\n  Likely mistake: {found[0]}." if found else None


def _redraw_stage(fn, hidden: bool) -> tuple[str, str] | None:
    """The function on each case's own generator, against the grader's own measurement
    (:func:`redraw_problem`); the hidden cases too when ``hidden``."""
    for case in _VARIANCE.cases if hidden else (c for c in _VARIANCE.cases if not c.hidden):
        try:
            out = _call_guarded(_VARIANCE, fn, case)[1]
        except Exception as e:
            return "raised " + type(e).__name__, \
                f"on {case.label} your function raised {type(e).__name__}: {e}"
        found = redraw_problem(case, case.call(), out)
        if found:
            return found
    return None


_VARIANCE = Check(
    **table.identity(__name__, "score_variance"),
    reference_off=True,
    cases=_variance_cases,
    mistakes=(
        Mistake(
            "returned the standard deviation",
            "np.std is sqrt(variance); use np.var (the variance grows like d_k, the sd like "
            "sqrt(d_k)).",
            lambda d_k, n, rng: float(np.std(_dots(d_k, n, rng))),
        ),
        Mistake(
            "scaled the scores by 1/sqrt(d_k)",
            "Measure the raw q · k: the point is to see the variance grow with d_k before scaling.",
            lambda d_k, n, rng: float(np.var(_dots(d_k, n, rng) / math.sqrt(d_k))),
        ),
        Mistake(
            "returned the mean",
            "The mean of q · k is about 0; the exercise asks for the variance.",
            lambda d_k, n, rng: float(np.mean(_dots(d_k, n, rng))),
        ),
        Mistake(
            "returned d_k instead of measuring it",
            "Draw the samples and compute the sample variance; the check wants a measurement.",
            lambda d_k, n, rng: float(d_k),
        ),
        # classes of wrong answers the mutation report (python -m bench.mutation) found unnamed
        Mistake(
            "summed over the samples, not over the d_k components",
            "q · k adds up the d_k products of ONE pair: with q, k of shape (n_samples, d_k), "
            "np.sum(q * k, axis=-1) gives the n_samples dot products whose variance you want. "
            "Summing over axis 0 adds up the samples instead (d_k sums of n_samples products).",
            lambda d_k, n, rng: float(np.var(_products(d_k, n, rng).sum(axis=0))),
        ),
        Mistake(
            "averaged the d_k products instead of summing them",
            "q · k is the SUM of the d_k products q_i k_i (np.sum(q * k, axis=-1)); their mean "
            "is q · k / d_k, whose variance is d_k / d_k² = 1 / d_k.",
            lambda d_k, n, rng: float(np.var(_products(d_k, n, rng).mean(axis=-1))),
        ),
    ),
    post=_twin_stage,
)
check_score_variance = register(_VARIANCE)

# the grader's side of the twin stage: the probe records the extra calls, post judges them
DRIVEN = {
    _VARIANCE.key: Driven(
        extra=tuple(
            (f"twin generators {i + 1} of {len(TWINS)}: d_k={a[0]}, {which}", a)
            for i, group in enumerate(_twin_args())  # only ever encoded, never drawn from
            for which, a in zip(GENERATORS, group)
        ),
        post=_twin_problem,
        redraw=redraw_problem,
    ),
}


# ====================================================================== Exercise 5.1
def _qkv(seed, q_shape, k_shape, v_shape, *, dtype=torch.float64, scale=1.0):
    """Seeded q, k, v (seeds ``seed``, ``seed + 1``, ``seed + 2``); ``scale`` scales q and k."""
    return (_t_rand(seed, *q_shape, dtype=dtype, scale=scale),
            _t_rand(seed + 1, *k_shape, dtype=dtype, scale=scale),
            _t_rand(seed + 2, *v_shape, dtype=dtype))


def _sdpa_cases():
    cases = []
    f32 = torch.float32

    def add(label, q, k, v, mask=None, scale=None, hidden=False):
        kw = {}
        if mask is not None:
            kw["mask"] = mask
        if scale is not None:
            kw["scale"] = scale
        cases.append(Case(label, (q, k, v), _sdpa(q, k, v, **kw), kwargs=kw, hidden=hidden))

    add("T_q = T_k = d_k = 4, float64", *_qkv(4, (4, 4), (4, 4), (4, 3)))
    add("q (2, 4), k (3, 4), v (3, 2), float64", *_qkv(1, (2, 4), (3, 4), (3, 2)))
    add(
        "batch 2, T_q=3, T_k=6, d_k=8, float32",
        *_qkv(7, (2, 3, 8), (2, 6, 8), (2, 6, 5), dtype=f32),
    )
    add(
        "(B, H) = (2, 4) heads, d_k=8 (d_model=32), T_q=3, T_k=5, float32",
        *_qkv(10, (2, 4, 3, 8), (2, 4, 5, 8), (2, 4, 5, 8), dtype=f32),
    )
    add(
        "a causal mask, batch 2, T=5, float32",
        *_qkv(13, (2, 5, 6), (2, 5, 6), (2, 5, 3), dtype=f32),
        mask=_causal(5),
    )
    add(
        "a padding mask (B, 1, 1, T_k), 4 heads, float64",
        *_qkv(16, (2, 4, 5, 8), (2, 4, 5, 8), (2, 4, 5, 8)),
        mask=transformer_ref.padding_mask_from_lengths(torch.tensor([3, 5]), 5),
    )
    add(
        "scale=1.0 (unscaled, the lecture notes [S1] and the wiki page [S3]), float64",
        *_qkv(19, (3, 4), (5, 4), (5, 2)),
        scale=1.0,
    )
    add(
        "large inputs (|q|, |k| ~ 30), float32",
        *_qkv(22, (4, 8), (4, 8), (4, 3), dtype=f32, scale=30.0),
    )
    # the goal's "zero output for fully masked rows" and "gradients flowing to q, k, v" are
    # requirements the exercise states: visible cases, so a ✔ never hides them (issue 32)
    full = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])
    add(
        "a fully masked query row (its output must be 0, not nan)",
        *_qkv(31, (3, 4), (3, 4), (3, 2)),
        mask=full,
    )
    # gradients through a causal mask plus one fully masked row
    q, k, v = _qkv(40, (2, 4, 4), (2, 4, 4), (2, 4, 3))
    mask = _causal(4).clone()
    mask[0] = False
    probe = _t_rand(43, 2, 4, 3)
    cases.append(
        grad_case("gradients w.r.t. q, k, v (causal mask, a fully masked row)", _sdpa,
                  (q, k, v), probe, kwargs={"mask": mask}, hidden=False)
    )
    # ---- hidden: what the visible cases do not show
    add("one token", *_qkv(25, (1, 1, 8), (1, 1, 8), (1, 1, 4)), hidden=True)
    add(
        "one head (B, 1, T, d_k), causal, T_q=2 < T_k=5",
        *_qkv(28, (2, 1, 2, 8), (2, 1, 5, 8), (2, 1, 5, 8)),
        mask=_causal(2, 5),
        hidden=True,
    )
    add(
        "large inputs (|q|, |k| ~ 1000), float64",
        *_qkv(34, (2, 3, 4), (2, 5, 4), (2, 5, 3), scale=1e3),
        hidden=True,
    )
    add(
        "five dimensions (2, 2, 2, T, d_k), scale=0.5",
        *_qkv(37, (2, 2, 2, 3, 4), (2, 2, 2, 4, 4), (2, 2, 2, 4, 2)),
        scale=0.5,
        hidden=True,
    )
    return tuple(cases)


def _naive_softmax_t(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def _with_scale(q, k, v, mask, scale):
    return _sdpa(q, k, v, mask=mask, scale=scale)


def _sdpa_d_model(q, k, v, mask=None, scale=None):
    if q.dim() < 4 or q.shape[-3] == 1:
        raise ValueError("d_model only differs from d_k with several heads")
    d_model = q.shape[-3] * q.shape[-1]
    return _sdpa(q, k, v, mask=mask, scale=1.0 / math.sqrt(d_model) if scale is None else scale)


def _sdpa_wrong_axis(q, k, v, mask=None, scale=None):
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return _t_softmax(s, dim=-2) @ v


def _sdpa_mask_after(q, k, v, mask=None, scale=None):
    if mask is None:
        raise ValueError("needs a mask")
    w = _sdpa(q, k, torch.eye(k.shape[-2], dtype=q.dtype), scale=scale)
    return w.masked_fill(~mask, 0.0) @ v


def _sdpa_mask_inverted(q, k, v, mask=None, scale=None):
    if mask is None:
        raise ValueError("needs a mask")
    return _sdpa(q, k, v, mask=~mask, scale=scale)


def _sdpa_no_transpose(q, k, v, mask=None, scale=None):
    s = q @ k * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return _t_softmax(s) @ v


def _sdpa_unstable(q, k, v, mask=None, scale=None):
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return _naive_softmax_t(s) @ v


def _sdpa_nan_rows(q, k, v, mask=None, scale=None):
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - m)
    return e / e.sum(dim=-1, keepdim=True) @ v


def _sdpa_steps(q, k, v, mask=None, scale=None, *, d_k_axis=-1, inverse_scale=False,
                fill=float("-inf"), masked=True, max_dim=-1, max_keepdim=True, normalise=True,
                sum_dim=-1, sum_keepdim=True, shift_reversed=False):
    """The solution's steps, each of which one keyword gets wrong (a mutant class)."""
    if scale is None:
        d_k = q.shape[d_k_axis]
        scale = math.sqrt(d_k) if inverse_scale else 1.0 / math.sqrt(d_k)
    s = q @ k.transpose(-2, -1) * scale
    if mask is not None and masked:
        s = s.masked_fill(~mask, fill)
    m = s.amax(dim=max_dim, keepdim=max_keepdim)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(m - s) if shift_reversed else torch.exp(s - m)
    if not normalise:
        return e @ v
    total = e.sum(dim=sum_dim, keepdim=sum_keepdim)
    return e / torch.where(total == 0, torch.ones_like(total), total) @ v


def _steps(*, needs_mask=False, **change):
    """The mistake of :func:`_sdpa_steps` that ``change`` (its keywords) makes; with
    ``needs_mask``, one that only shows with a mask (without one it raises, so a case with no
    mask names nothing)."""

    def f(q, k, v, mask=None, scale=None):
        if needs_mask and mask is None:
            raise ValueError("needs a mask")
        return _sdpa_steps(q, k, v, mask, scale, **change)

    return f


_SDPA_MISTAKES = (
    Mistake(
        "no scaling",
        "Divide the scores by sqrt(d_k) (d_k = q.shape[-1]) when scale is None: without it "
        "the variance of q · k grows like d_k and the softmax saturates.",
        lambda q, k, v, mask=None, scale=None: _with_scale(
            q, k, v, mask, 1.0 if scale is None else scale
        ),
    ),
    Mistake(
        "scaled by sqrt(d_model) instead of sqrt(d_k)",
        "With H heads each head has d_k = d_model / H; the scale is 1/sqrt(d_k) with "
        "d_k = q.shape[-1], the size of one head's query.",
        _sdpa_d_model,
    ),
    Mistake(
        "ignored the `scale` argument",
        "Use 1/sqrt(d_k) only when scale is None; otherwise multiply the scores by scale.",
        lambda q, k, v, mask=None, scale=None: _sdpa(q, k, v, mask=mask),
    ),
    Mistake(
        "divided by d_k instead of sqrt(d_k)",
        "The variance of q · k is d_k, so its standard deviation is sqrt(d_k): divide by that.",
        lambda q, k, v, mask=None, scale=None: _with_scale(
            q, k, v, mask, 1.0 / q.shape[-1] if scale is None else scale
        ),
    ),
    Mistake(
        "softmax over the wrong axis (over queries)",
        "Each query's weights must sum to one over the keys: softmax over the last axis "
        "(dim=-1) of the (..., T_q, T_k) scores.",
        _sdpa_wrong_axis,
    ),
    Mistake(
        "mask applied after the softmax",
        "Zeroing weights after the softmax leaves rows that no longer sum to one. Put -inf "
        "into the scores where mask is False *before* the softmax.",
        _sdpa_mask_after,
    ),
    Mistake(
        "mask inverted",
        "In this course a boolean mask is True where a query MAY attend (like PyTorch's "
        "F.scaled_dot_product_attention): fill -inf where the mask is False, "
        "scores.masked_fill(~mask, float('-inf')).",
        _sdpa_mask_inverted,
    ),
    Mistake(
        "missing transpose of K",
        "The scores are q @ kᵀ over the last two axes: q @ k.transpose(-2, -1). q @ k only "
        "runs when T_k == d_k, and computes something else.",
        _sdpa_no_transpose,
    ),
    Mistake(
        "unstable softmax overflowing",
        "exp() of large scores overflows to inf and inf/inf = nan. Subtract each row's "
        "maximum before exponentiating.",
        _sdpa_unstable,
    ),
    Mistake(
        "a fully masked row gives nan",
        "When every key of a query is masked, the row max is -inf and exp(-inf - -inf) is nan. "
        "Shift by 0 where the max is -inf and divide by 1 where the sum is 0, so the row's "
        "weights (and its output) are 0.",
        _sdpa_nan_rows,
    ),
    Mistake(
        "returned the attention weights instead of the output",
        "Multiply the weights (..., T_q, T_k) by v (..., T_k, d_v).",
        lambda q, k, v, mask=None, scale=None: _sdpa(
            q, k, v, mask=mask, scale=scale, return_weights=True
        )[1],
    ),
    # classes of wrong answers the mutation report (python -m bench.mutation) found unnamed
    Mistake(
        "multiplied the scores by sqrt(d_k) instead of dividing",
        "The default scale is 1 / sqrt(d_k): scores * (1 / math.sqrt(d_k)), or scores / "
        "math.sqrt(d_k); multiplying by sqrt(d_k) makes the softmax even more peaked.",
        _steps(inverse_scale=True),
    ),
    Mistake(
        "d_k read from the wrong axis",
        "d_k is the size of the last axis of q (q.shape[-1]); q.shape[-2] is T_q and "
        "q.shape[0] a batch size.",
        _steps(d_k_axis=-2),
    ),
    Mistake(
        "weights not normalised (no division by the row sum)",
        "After exp(), divide each row by its sum over the keys so the weights sum to one; "
        "only a fully masked row (sum 0) is divided by 1.",
        _steps(normalise=False),
    ),
    Mistake(
        "normalised over the queries (sum over the wrong axis)",
        "Each query's weights sum to one over the keys: e.sum(dim=-1, keepdim=True).",
        _steps(sum_dim=-2),
    ),
    Mistake(
        "row sums without keepdim=True",
        "e.sum(dim=-1) has shape (..., T_q) and divides along the *keys* axis; keep the axis "
        "(keepdim=True) so each row is divided by its own sum.",
        _steps(sum_keepdim=False),
    ),
    Mistake(
        "maximum subtracted over the wrong axis",
        "Subtract each row's own maximum (amax(dim=-1, keepdim=True)): a per-column shift "
        "does not cancel in a row's softmax.",
        _steps(max_dim=-2),
    ),
    Mistake(
        "row maximum without keepdim=True",
        "scores.amax(dim=-1) has shape (..., T_q) and is subtracted along the keys axis; "
        "keep the axis (keepdim=True) so each row is shifted by its own maximum.",
        _steps(max_keepdim=False),
    ),
    Mistake(
        "exp(max - scores) instead of exp(scores - max)",
        "Shift the scores down by their maximum, exp(scores - max): exp(max - scores) "
        "reverses which keys get the most weight.",
        _steps(shift_reversed=True),
    ),
    Mistake(
        "mask ignored",
        "When a mask is given, put -inf into the scores where it is False before the "
        "softmax: scores.masked_fill(~mask, float('-inf')).",
        _steps(needs_mask=True, masked=False),
    ),
    Mistake(
        "masked scores set to 0 instead of -inf",
        "A score of 0 still gets weight exp(0 - max) > 0: fill -inf so exp() gives exactly 0.",
        _steps(needs_mask=True, fill=0.0),
    ),
    Mistake(
        "a large negative number instead of -inf (a fully masked row attends everywhere)",
        "With -1e9 a fully masked row gets equal weights and returns the mean of v; with "
        "-inf its weights are 0 (shift by 0 and divide by 1 there) and so is its output.",
        _steps(needs_mask=True, fill=-1e9),
    ),
)

_TRANSPOSE_HINT = ErrorHint(
    "the shapes of a matrix product do not line up (transpose of K?)",
    "q is (..., T_q, d_k) and k is (..., T_k, d_k): the scores are "
    "q @ k.transpose(-2, -1) (k.T reverses every axis of a batched tensor).",
    _is_matmul_mismatch,
)

_SDPA = Check(
    **table.identity(__name__, "scaled_dot_product_attention"),
    reference_off=True,
    cases=_sdpa_cases,
    probes=(
        _mm.ignored("mask", "the mask", _mm.opened, _sdpa,
                    "Add -inf to the scores where the mask is False, before the softmax.",
                    how="every key allowed"),
        _mm.ignored("scale", "`scale`", lambda s: None if s is None else 2 * s, _sdpa,
                    "When `scale` is given, multiply the scores by it instead of "
                    "1/sqrt(d_k).", how="scale doubled"),
        _mm.future_leak(_mm.causal_length(lambda case: case.kwargs.get("mask")),
                        _mm.perturb_at(1, 2), _sdpa,
                        "Apply the mask to the scores of every query (True: may attend)."),
    ),
    mistakes=_SDPA_MISTAKES,
    error_hints=(_TRANSPOSE_HINT,),
    forbidden=(
        "scaled_dot_product_attention",
        "multi_head_attention_forward",
        "_scaled_dot_product_attention_math",
    ),
    forbidden_hint="Compute softmax(q kᵀ · scale + mask) v yourself.",
)
check_scaled_dot_product_attention = register(_SDPA)


# ====================================================================== Exercise 6.1
def _col_cases():
    cases = []
    specs = [
        (3, 4, 2, torch.float64, 1.0, False),
        (8, 5, 4, torch.float32, 1.0, False),
        (4, 4, 4, torch.float64, 1.0, False),
        (6, 1, 3, torch.float64, 1.0, True),
        # the goal asks for a stable softmax: scores of several hundred, a visible case
        (5, 6, 5, torch.float64, 15.0, False),
    ]
    for i, (d, n, dp, dt, s, hidden) in enumerate(specs):
        X = _t_rand(600 + i, d, n, dtype=dt, scale=s)
        Q, K, V = (_t_rand(610 + 3 * i + j, dp, d, dtype=dt) for j in range(3))
        label = f"d={d}, n={n}, d'={dp}, {str(dt)[6:]}"
        label += f", inputs scaled by {s:g}" if s != 1 else ""
        cases.append(
            Case(label, (X, Q, K, V), _col_form(X, Q, K, V, return_weights=True), hidden=hidden)
        )
    X = _t_rand(650, 4, 3)  # d=4, n=3
    Q, K, V = (_t_rand(651 + j, 2, 4) for j in range(3))  # d'=2
    Xg = X.clone().requires_grad_(True)
    Y, A = _col_form(Xg, Q, K, V, return_weights=True)
    probe = _t_rand(660, 2, 3)  # like Y: (d', n)
    (Y * probe).sum().backward()
    cases.append(
        Case(
            "gradient w.r.t. X_cols",
            (X, Q, K, V),
            (Y.detach(), (Xg.grad,)),
            kind="grad",
            grad_args=(0,),
            probe=probe,
            hidden=True,
        )
    )
    return tuple(cases)


def _col_variant(X, Q, K, V, *, dim=0, transpose_scores=False, scale=1.0, swap_sum=False):
    S = (K @ X).T @ (Q @ X)
    if transpose_scores:
        S = S.T
    A = _t_softmax(S * scale, dim=dim)
    Y = (V @ X) @ (A.T if swap_sum else A)
    return Y, A


def _col_softmax_slip(X, Q, K, V, *, max_dim=0, sum_dim=0, normalise=True):
    """[S1]'s softmax over i written with one slip: the shift's or the sum's axis, or no sum."""
    S = (K @ X).T @ (Q @ X)
    e = torch.exp(S - S.amax(dim=max_dim, keepdim=True))
    A = e / e.sum(dim=sum_dim, keepdim=True) if normalise else e
    return (V @ X) @ A, A


_COLUMN = Check(
    **table.identity(__name__, "column_form_self_attention"),
    reference_off=True,
    cases=_col_cases,
    mistakes=(
        Mistake(
            "softmax over j instead of over i",
            "The lecture notes [S1] normalise over the *first* index: A_ij = exp(s_ij) "
            "/ sum_k exp(s_kj), "
            "so every column of A sums to one (softmax over dim=0).",
            lambda X, Q, K, V: _col_variant(X, Q, K, V, dim=1),
        ),
        Mistake(
            "scores transposed",
            "s_ij = x_iᵀ Kᵀ Q x_j = (K x_i) · (Q x_j): rows are indexed by the key i, columns "
            "by the query j, so S = (K X)ᵀ (Q X).",
            lambda X, Q, K, V: _col_variant(X, Q, K, V, transpose_scores=True),
        ),
        Mistake(
            "scaled the scores",
            "The lecture notes [S1] do not scale: A_ij = softmax_i(x_iᵀ Kᵀ Q x_j), no "
            "1/sqrt(d').",
            lambda X, Q, K, V: _col_variant(X, Q, K, V, scale=1.0 / math.sqrt(Q.shape[0])),
        ),
        Mistake(
            "summed over the wrong index in y_j",
            "y_j = sum_i A_ij V x_i, i.e. Y = (V X) A, not (V X) Aᵀ.",
            lambda X, Q, K, V: _col_variant(X, Q, K, V, swap_sum=True),
        ),
        Mistake(
            "returned (A, Y) instead of (Y, A)",
            "Return the outputs first, then the weights.",
            lambda X, Q, K, V: _col_variant(X, Q, K, V)[::-1],
        ),
        Mistake(
            "unstable softmax overflowing",
            "Subtract the maximum over i (dim=0, keepdim=True) before exponentiating.",
            lambda X, Q, K, V: (
                (V @ X) @ _naive_softmax_t((K @ X).T @ (Q @ X), dim=0),
                _naive_softmax_t((K @ X).T @ (Q @ X), dim=0),
            ),
        ),
        # classes of wrong answers the mutation report (python -m bench.mutation) found unnamed
        Mistake(
            "maximum subtracted over the wrong axis (over j)",
            "The shift must be one constant per column, along the axis the softmax runs over "
            "(i, dim=0): S - S.amax(dim=0, keepdim=True). A maximum over j (dim=1) shifts the "
            "entries of a column by different amounts, which changes the softmax.",
            lambda X, Q, K, V: _col_softmax_slip(X, Q, K, V, max_dim=1),
        ),
        Mistake(
            "divided by the sum over j instead of over i",
            "A_ij = exp(s_ij) / sum_k exp(s_kj): divide by the sum over i, "
            "e.sum(dim=0, keepdim=True), so that every column of A sums to one.",
            lambda X, Q, K, V: _col_softmax_slip(X, Q, K, V, sum_dim=1),
        ),
        Mistake(
            "weights not normalised (no division by the sum over i)",
            "exp(s_ij - max) alone is not a softmax: divide by its sum over i, "
            "A = e / e.sum(dim=0, keepdim=True), so every column of A sums to one.",
            lambda X, Q, K, V: _col_softmax_slip(X, Q, K, V, normalise=False),
        ),
    ),
    error_hints=(
        ErrorHint(
            "the shapes of a matrix product do not line up",
            "Here tokens are columns: X_cols is (d, n) and Q, K, V are (d', d), so Q X_cols "
            "is (d', n) and the scores (K X)ᵀ (Q X) are (n, n).",
            _is_matmul_mismatch,
        ),
    ),
    forbidden=("scaled_dot_product_attention", "multi_head_attention_forward"),
    forbidden_hint="Write out [S1]'s formula.",
)
check_column_form_self_attention = register(_COLUMN)


# ====================================================================== Exercise 7.1
def _cos_cases():
    cases = []

    def add(label, q, k, v, hidden=False, **kw):
        cases.append(Case(label, (q, k, v), _cos_attn(q, k, v, **kw), kwargs=kw, hidden=hidden))

    add("q (2, 4), k (3, 4), v (3, 2), float64", *_qkv(70, (2, 4), (3, 4), (3, 2)))
    add(
        "batch 2, T_q=3, T_k=5, float32",
        *_qkv(73, (2, 3, 8), (2, 5, 8), (2, 5, 4), dtype=torch.float32),
    )
    add(
        "temperature=0.1, 2 heads, causal mask",
        *_qkv(76, (2, 2, 4, 6), (2, 2, 4, 6), (2, 2, 4, 3)),
        temperature=0.1,
        mask=_causal(4),
    )
    zero_q = _t_rand(79, 3, 4)
    zero_q[1] = 0.0
    add(  # the goal states it ("a zero vector stays zero"): a visible case
        "a zero query vector (guard with eps)",
        zero_q,
        _t_rand(80, 4, 4),
        _t_rand(81, 4, 2),
    )
    add(
        "large inputs (~1e3: cosine does not care)",
        *_qkv(82, (3, 4), (5, 4), (5, 2), scale=1e3),
        hidden=True,
    )
    add(
        "a fully masked row",
        *_qkv(85, (3, 4), (3, 4), (3, 2)),
        mask=torch.tensor([[True, True, False], [False, False, False], [True, False, True]]),
        hidden=True,
    )
    q, k, v = _qkv(88, (3, 5), (4, 5), (4, 2))
    cases.append(
        grad_case("gradients w.r.t. q, k, v", _cos_attn, (q, k, v), _t_rand(91, 3, 2))
    )
    return tuple(cases)


def _cos_variant(
    q, k, v, mask=None, temperature=1.0, eps=1e-8, *, norm_q=True, norm_k=True, scale=None, dim=-1
):
    if norm_q:
        q = q / q.norm(dim=dim, keepdim=True).clamp_min(eps)
    if norm_k:
        k = k / k.norm(dim=dim, keepdim=True).clamp_min(eps)
    return _sdpa(q, k, v, mask=mask, scale=(1.0 / temperature) if scale is None else scale)


def _cos_no_eps(q, k, v, mask=None, temperature=1.0, eps=1e-8):
    q = q / q.norm(dim=-1, keepdim=True)
    k = k / k.norm(dim=-1, keepdim=True)
    return _sdpa(q, k, v, mask=mask, scale=1.0 / temperature)


def _cos_slip(which: str, *, dim: int = -1, times: bool = False):
    """Cosine attention with one of the two unit vectors (``which``: "q" or "k") written
    wrong: its norm taken over the axis ``dim``, or the vector multiplied by its norm."""

    def f(q, k, v, mask=None, temperature=1.0, eps=1e-8):
        def unit(x, slip):
            n = x.norm(dim=dim if slip else -1, keepdim=True).clamp_min(eps)
            return x * n if slip and times else x / n

        return _sdpa(unit(q, which == "q"), unit(k, which == "k"), v, mask=mask,
                     scale=1.0 / temperature)

    return f


_COSINE = Check(
    **table.identity(__name__, "cosine_similarity_attention"),
    uses=table.uses(__name__, "scaled_dot_product_attention"),
    reference_off=True,
    cases=_cos_cases,
    mistakes=(
        Mistake(
            "normalised only the queries",
            "cos(q, k) = q · k / (|q| |k|): divide the keys by their norms too.",
            lambda q, k, v, mask=None, temperature=1.0, eps=1e-8: _cos_variant(
                q, k, v, mask, temperature, eps, norm_k=False
            ),
        ),
        Mistake(
            "normalised only the keys",
            "cos(q, k) = q · k / (|q| |k|): divide the queries by their norms too.",
            lambda q, k, v, mask=None, temperature=1.0, eps=1e-8: _cos_variant(
                q, k, v, mask, temperature, eps, norm_q=False
            ),
        ),
        Mistake(
            "multiplied by the temperature instead of dividing",
            "The scores are cos(q_i, k_j) / temperature: a small temperature sharpens.",
            lambda q, k, v, mask=None, temperature=1.0, eps=1e-8: _cos_variant(
                q, k, v, mask, temperature, eps, scale=temperature
            ),
        ),
        Mistake(
            "ignored the temperature",
            "The scores are cos(q_i, k_j) / temperature: pass scale=1.0 / temperature (a "
            "temperature of 0.1 makes the weights much sharper).",
            lambda q, k, v, mask=None, temperature=1.0, eps=1e-8: _cos_variant(
                q, k, v, mask, temperature, eps, scale=1.0
            ),
        ),
        Mistake(
            "also divided by sqrt(d_k)",
            "Cosine scores already lie in [-1, 1] whatever d_k: the only scale is 1/temperature.",
            lambda q, k, v, mask=None, temperature=1.0, eps=1e-8: _cos_variant(
                q, k, v, mask, temperature, eps, scale=1.0 / (temperature * math.sqrt(q.shape[-1]))
            ),
        ),
        Mistake(
            "normalised over the wrong axis",
            "Each vector is one row: take the norm over the last axis (dim=-1, keepdim=True).",
            lambda q, k, v, mask=None, temperature=1.0, eps=1e-8: _cos_variant(
                q, k, v, mask, temperature, eps, dim=-2
            ),
        ),
        # one of the two norms over the wrong axis, or a vector multiplied by its norm
        # (classes of wrong answers the mutation report found unnamed)
        *(Mistake(
            "normalised over the wrong axis",
            "Each vector is one row: take the norm over the last axis (dim=-1, keepdim=True), "
            "for the queries and for the keys.",
            _cos_slip(which, dim=-2),
        ) for which in ("q", "k")),
        *(Mistake(
            "multiplied by the norm instead of dividing",
            "A unit vector is x / |x|: q / q.norm(dim=-1, keepdim=True).clamp_min(eps), and "
            "the same for k. x * |x| makes long vectors longer instead of unit length.",
            _cos_slip(which, times=True),
        ) for which in ("q", "k")),
        Mistake(
            "a zero vector gives nan",
            "|0| = 0 and 0/0 = nan: divide by norm.clamp_min(eps) so a zero vector stays zero.",
            _cos_no_eps,
        ),
    ),
    forbidden=(
        "scaled_dot_product_attention",
        "multi_head_attention_forward",
        "cosine_similarity",
        "normalize",
    ),
    forbidden_hint="Normalise with .norm() and reuse your own attention from Exercise 5.1.",
)
check_cosine_similarity_attention = register(_COSINE)


# ====================================================================== Exercise 8.1
def _dominance_ref(weights: torch.Tensor) -> float:
    n = weights.shape[-1]
    hits = weights.argmax(dim=-1) == torch.arange(n)
    return hits.double().mean().item()


# The answer is a fraction k / N (N queries, at most 147 here). A float32 mean, the hint's
# natural answer (.float().mean()), is within a few 1e-8 of it (2/3 -> 0.6666666865);
# the nearest wrong fraction is at least 1/147 ~ 7e-3 away. 1e-6 accepts the one, never the other.
_DOMINANCE_ATOL = 1e-6


def _dominance_cases():
    cases = []
    hand = torch.tensor([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.1, 0.1, 0.8]], dtype=torch.float64)
    cases.append(
        Case(
            "a (3, 3) example", (hand,), _dominance_ref(hand), kind="scalar", atol=_DOMINANCE_ATOL
        )
    )
    for i, (shape, hidden) in enumerate(
        [((2, 6, 6), False), ((2, 4, 5, 5), False), ((1, 1), True), ((3, 7, 7), True)]
    ):
        w = _t_softmax(
            _t_rand(800 + i, *shape, scale=2.0) + 1.5 * torch.eye(shape[-1], dtype=torch.float64),
            dim=-1,
        )
        cases.append(
            Case(
                f"weights {shape}",
                (w,),
                _dominance_ref(w),
                kind="scalar",
                hidden=hidden,
                atol=_DOMINANCE_ATOL,
            )
        )
    return tuple(cases)


_DOMINANCE = Check(
    **table.identity(__name__, "self_score_dominance"),
    reference_off=True,
    cases=_dominance_cases,
    mistakes=(
        Mistake(
            "argmax over the wrong axis",
            "Query i's largest weight is the argmax over keys, the last axis (dim=-1).",
            lambda w: (w.argmax(dim=-2) == torch.arange(w.shape[-1])).double().mean().item(),
        ),
        Mistake(
            "returned a count instead of a fraction",
            "Divide by the number of queries (take the mean).",
            lambda w: float((w.argmax(dim=-1) == torch.arange(w.shape[-1])).sum().item()),
        ),
        Mistake(
            "returned the mean self-weight A_ii",
            "The question is how often A_ii is the *largest* weight in row i, not its size.",
            lambda w: w.diagonal(dim1=-2, dim2=-1).mean().item(),
        ),
    ),
)
check_self_score_dominance = register(_DOMINANCE)
