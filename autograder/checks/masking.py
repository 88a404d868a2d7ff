"""Checks for notebook 02 (masking), each with its catalogue of known mistakes.

Masks in this course are boolean *keep* masks (True = the query may attend to the key) that
broadcast to ``(B, H, T_q, T_k)``; [S4]'s additive form puts 0 where kept
and -inf
where dropped. Expected outputs are computed here, on first use (in a notebook at import, in its
locked first cell: ``_core._Cases``), from ``transformer_ref``.

>>> check_causal_mask(transformer_ref.causal_mask)  # doctest: +ELLIPSIS
✔ Exercise 1.1 `causal_mask`: all ... cases match the reference.
"""

from __future__ import annotations

import math

import torch

import transformer_ref  # noqa: F401 - the example above
from autograder.checks import _metamorphic as _mm
from autograder.checks import table
from autograder.checks._builders import AttentionLayer
from autograder.checks._cases import grad_case, message_has
from autograder.checks._cases import is_broadcast_error as _is_broadcast_error
from autograder.checks._cases import t_rand as _t_rand
from autograder.checks._core import Case, Check, ErrorHint, Mistake, register

# trusted references: bound here, at import, before any student cell runs
from transformer_ref import causal_mask as _causal
from transformer_ref import mask_to_additive as _additive
from transformer_ref import padding_mask_from_ids as _pad_ids
from transformer_ref import padding_mask_from_lengths as _pad_len
from transformer_ref import scaled_dot_product_attention as _sdpa
from transformer_ref import softmax as _softmax

__all__ = [
    "check_causal_mask",
    "check_to_additive",
    "check_padding_mask_from_lengths",
    "check_padding_mask_from_ids",
    "check_decoder_self_attention_mask",
    "check_masked_attention",
    "check_future_leak",
    "check_grad_of_position",
]

_NEG_INF = float("-inf")


# ====================================================================== Exercise 1.1
def _causal_cases():
    return tuple(
        Case(f"T={T}", (T,), _causal(T), hidden=hidden)
        for T, hidden in ((4, False), (2, False), (6, False), (1, True), (9, True))
    )


_CAUSAL = Check(
    **table.identity(__name__, "causal_mask"),
    cases=_causal_cases,
    mistakes=(
        Mistake(
            "off-by-one diagonal (a token cannot see itself)",
            "Query i may attend to keys j <= i, its own position included: keep the diagonal "
            "(torch.tril(..., diagonal=0)), otherwise the first token attends to nothing.",
            lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1),
        ),
        Mistake(
            "off-by-one diagonal (a token sees the next one)",
            "diagonal=1 lets query i see key i + 1, one step into the future.",
            lambda T: torch.ones(T, T, dtype=torch.bool).tril(1),
        ),
        Mistake(
            "mask inverted (True meaning drop instead of keep)",
            "In this course True means 'may attend' (as in F.scaled_dot_product_attention; "
            "nn.MultiheadAttention uses the opposite). The past and the diagonal are True.",
            lambda T: torch.ones(T, T, dtype=torch.bool).triu(1),
        ),
        Mistake(
            "upper triangle (each token sees the future, not the past)",
            "Row i is query i, column j is key j: keep j <= i, the lower triangle (torch.tril).",
            lambda T: torch.ones(T, T, dtype=torch.bool).triu(0),
        ),
        Mistake(
            "not a boolean mask",
            "Return dtype torch.bool (True = may attend); build it from "
            "torch.ones(T, T, dtype=torch.bool).",
            lambda T: torch.ones(T, T).tril(),
        ),
        Mistake(
            "additive mask instead of a boolean one",
            "This exercise wants the boolean keep mask; the additive 0/-inf form is Exercise 1.2.",
            lambda T: torch.zeros(T, T).masked_fill(torch.ones(T, T).triu(1) > 0, _NEG_INF),
        ),
    ),
)
check_causal_mask = register(_CAUSAL)


# ====================================================================== Exercise 1.2
def _additive_cases():
    cases = []

    def add(label, mask, dtype=None, hidden=False):
        kw = {} if dtype is None else {"dtype": dtype}
        exp = _additive(mask, torch.float32 if dtype is None else dtype)
        cases.append(Case(label, (mask,), exp, kwargs=kw, hidden=hidden))

    add("a causal mask (4, 4), default dtype", _causal(4))
    add("a padding mask (2, 1, 1, 5), dtype=float64", _pad_len(torch.tensor([3, 5]), 5),
        torch.float64)
    rows = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])
    add("(3, 3) with a fully masked row, dtype=float64", rows, torch.float64)
    add("a single key (1, 1)", torch.tensor([[True]]), hidden=True)
    add("float16, padding & causal (2, 1, 4, 4)",
        _causal(4) & _pad_len(torch.tensor([2, 4]), 4), torch.float16, hidden=True)
    add("bfloat16, a fully masked (1, 3)", torch.zeros(1, 3, dtype=torch.bool), torch.bfloat16,
        hidden=True)
    return tuple(cases)


_ADDITIVE = Check(
    **table.identity(__name__, "to_additive"),
    cases=_additive_cases,
    mistakes=(
        Mistake(
            "mask inverted (-inf where the mask is True)",
            "True means 'may attend': those entries add 0; -inf goes where the mask is False "
            "(masked_fill(~mask, float('-inf'))).",
            lambda mask, dtype=torch.float32: torch.zeros(mask.shape, dtype=dtype).masked_fill(
                mask, _NEG_INF
            ),
        ),
        Mistake(
            "a large finite number instead of -inf",
            "[S4]'s mask is exactly -inf, so exp gives exactly 0. A "
            "finite -1e9 gives a "
            "fully masked row uniform weights over keys it must not see, and in float16 it "
            "overflows to -inf anyway; use float('-inf').",
            lambda mask, dtype=torch.float32: torch.zeros(mask.shape, dtype=dtype).masked_fill(
                ~mask, -1e9
            ),
        ),
        Mistake(
            "returned the mask as 1.0 / 0.0",
            "mask.float() is 1 where kept and 0 where masked: adding it to the scores masks "
            "nothing. The additive form is 0 where kept and -inf where masked.",
            lambda mask, dtype=torch.float32: mask.to(dtype),
        ),
        Mistake(
            "ignored the dtype argument",
            "Build the zeros with dtype=dtype (the scores' dtype), not the default float32.",
            lambda mask, dtype=torch.float32: torch.zeros(mask.shape).masked_fill(~mask, _NEG_INF),
        ),
    ),
)
check_to_additive = register(_ADDITIVE)


# ====================================================================== Exercise 2.1
def _lengths_cases():
    specs = [
        ([3, 5], 5, False),
        ([1, 4, 2], 4, False),
        ([2, 3], 6, False),  # T longer than every sequence
        ([0, 3], 3, True),  # an empty sequence: every key masked
        ([1], 1, True),
        ([7, 2, 5, 1], 7, True),
    ]
    return tuple(
        Case(f"lengths={lens}, T={T}", (torch.tensor(lens), T), _pad_len(torch.tensor(lens), T),
             hidden=hidden)
        for lens, T, hidden in specs
    )


def _keep_from_lengths(lengths, T):  # (B, T)
    return torch.arange(T)[None, :] < lengths[:, None]


_NOT_BROADCAST = (
    "mask not broadcast over heads",
    "A padding mask must broadcast to (B, H, T_q, T_k). Broadcasting aligns axes from the "
    "right, so a (B, T_k) mask lines B up with T_q (an error, or a wrong mask when B == T_q). "
    "Give it the shape (B, 1, 1, T_k): mask[:, None, None, :].",
)
_BATCH_AS_HEADS = (
    "mask not broadcast over heads (batch lined up with heads)",
    "A (B, 1, T_k) mask broadcast against (B, H, T_q, T_k) scores puts B on the head axis: "
    "with B == H head h silently gets sequence h's padding. Use (B, 1, 1, T_k).",
)
_QUERY_AXIS = (
    "padding applied on the query axis instead of the key axis",
    "Padding is a property of keys: no query may attend TO a padded position, so the mask "
    "varies along the last axis (T_k): shape (B, 1, 1, T_k), not (B, 1, T, 1).",
)


_LENGTHS = Check(
    **table.identity(__name__, "padding_mask_from_lengths"),
    cases=_lengths_cases,
    mistakes=(
        Mistake(
            "off-by-one length (<= instead of <)",
            "A sequence of length L occupies positions 0 .. L-1: keep position j when j < L.",
            lambda lengths, T: (torch.arange(T)[None, :] <= lengths[:, None])[:, None, None, :],
        ),
        Mistake(
            "mask inverted (True at the padding)",
            "True means 'may attend': the real tokens (j < L) are True, the padding False.",
            lambda lengths, T: ~_keep_from_lengths(lengths, T)[:, None, None, :],
        ),
        Mistake(*_QUERY_AXIS, lambda lengths, T: _keep_from_lengths(lengths, T)[:, None, :, None]),
        Mistake(*_NOT_BROADCAST, _keep_from_lengths),
        Mistake(*_BATCH_AS_HEADS, lambda lengths, T: _keep_from_lengths(lengths, T)[:, None, :]),
    ),
)
check_padding_mask_from_lengths = register(_LENGTHS)


# ====================================================================== Exercise 2.2
def _ids_cases():
    specs = [
        ("right-padded, pad_id=0", [[5, 7, 2, 0, 0], [3, 9, 4, 8, 6]], 0, False),
        ("left-padded, pad_id=1", [[1, 1, 4, 7], [1, 5, 6, 2], [9, 8, 3, 2]], 1, False),
        ("no padding at all", [[4, 2, 3]], 0, True),
        ("a sequence of only padding", [[0, 0, 0], [2, 0, 0]], 0, True),
        ("one token, pad_id=50256", [[50256]], 50256, True),
    ]
    return tuple(
        Case(label, (torch.tensor(ids), pad), _pad_ids(torch.tensor(ids), pad), hidden=hidden)
        for label, ids, pad, hidden in specs
    )


_IDS = Check(
    **table.identity(__name__, "padding_mask_from_ids"),
    cases=_ids_cases,
    mistakes=(
        Mistake(
            "mask inverted (True at the padding)",
            "True means 'may attend': keep tokens with ids != pad_id.",
            lambda ids, pad_id: (ids == pad_id)[:, None, None, :],
        ),
        Mistake(
            "pad id hard-coded to 0",
            "Compare with the pad_id argument: tokenizers use different pad ids (GPT-2 often "
            "reuses 50256).",
            lambda ids, pad_id: (ids != 0)[:, None, None, :],
        ),
        Mistake(*_QUERY_AXIS, lambda ids, pad_id: (ids != pad_id)[:, None, :, None]),
        Mistake(*_NOT_BROADCAST, lambda ids, pad_id: ids != pad_id),
        Mistake(*_BATCH_AS_HEADS, lambda ids, pad_id: (ids != pad_id)[:, None, :]),
        Mistake(  # issue 32
            "assumed right padding (kept the first n positions, n = the real tokens)",
            "Padding may be on the left (the goal says so): counting the real tokens and "
            "keeping the first that many is the lengths mask of Exercise 2.1, right only for "
            "right padding. Compare every id with pad_id: ids != pad_id.",
            lambda ids, pad_id: (torch.arange(ids.shape[-1])
                                 < (ids != pad_id).sum(-1, keepdim=True))[:, None, None, :],
        ),
    ),
)
check_padding_mask_from_ids = register(_IDS)


# ====================================================================== Exercise 2.3
def _decoder_ref(ids, pad_id):
    T = ids.shape[-1]
    return (_pad_ids(ids, pad_id) & _causal(T)).expand(ids.shape[0], 1, T, T)


def _decoder_cases():
    specs = [
        ("right-padded, pad_id=0", [[5, 7, 2, 0, 0], [3, 9, 4, 8, 6]], 0, False),
        ("left-padded, pad_id=1", [[1, 1, 4, 7], [1, 5, 6, 2], [9, 8, 3, 2]], 1, False),
        ("one token", [[3]], 0, True),
        ("padding in the middle, pad_id=0", [[4, 0, 5, 0, 6, 7]], 0, True),
    ]
    return tuple(
        Case(label, (torch.tensor(ids), pad), _decoder_ref(torch.tensor(ids), pad), hidden=hidden)
        for label, ids, pad, hidden in specs
    )


def _dec_variant(ids, pad_id, *, op="and", pad=None, causal=True):
    B, T = ids.shape
    keep = ids != pad_id
    p = {"key": keep[:, None, None, :], "query": keep[:, None, :, None], None: None}[pad]
    c = _causal(T) if causal else None
    if p is None:
        out = c
    elif c is None:
        out = p
    else:
        out = (p | c) if op == "or" else (p & c)
    return out.expand(B, 1, T, T)


_DECODER = Check(
    **table.identity(__name__, "decoder_self_attention_mask"),
    uses=table.uses(__name__, "padding_mask_from_ids", "causal_mask"),
    cases=_decoder_cases,
    mistakes=(
        Mistake(
            "combined the masks with OR instead of AND",
            "A key may be attended only if it is BOTH not padding AND not in the future: "
            "padding & causal. OR lets queries see future tokens and padding.",
            lambda ids, pad_id: _dec_variant(ids, pad_id, op="or", pad="key"),
        ),
        Mistake(
            "padding applied on the query axis instead of the key axis",
            "Padding masks the keys: (B, 1, 1, T) & causal (T, T). On the query axis the "
            "padded queries lose every key while real queries still read padded keys.",
            lambda ids, pad_id: _dec_variant(ids, pad_id, pad="query"),
        ),
        Mistake(
            "forgot the padding mask",
            "A decoder batch has padding too: AND the causal mask with the padding mask.",
            lambda ids, pad_id: _dec_variant(ids, pad_id, pad=None),
        ),
        Mistake(
            "forgot the causal mask",
            "A decoder must not attend to future tokens: AND with the (T, T) causal mask.",
            lambda ids, pad_id: _dec_variant(ids, pad_id, pad="key", causal=False),
        ),
        Mistake(
            "mask not broadcast over heads",
            "Return (B, 1, T, T) so the mask broadcasts over the H heads of (B, H, T, T) "
            "scores; a (B, T, T) mask lines B up with the head axis.",
            lambda ids, pad_id: _dec_variant(ids, pad_id, pad="key")[:, 0],
        ),
    ),
)
check_decoder_self_attention_mask = register(_DECODER)


# ====================================================================== Exercise 3.1
def _masked_cases():
    cases = []
    f32 = torch.float32

    def add(label, q, k, v, mask, hidden=False):
        cases.append(Case(label, (q, k, v, mask), _sdpa(q, k, v, mask=mask), hidden=hidden))

    add(
        "causal boolean mask, T=4, float64",
        _t_rand(1, 4, 8), _t_rand(2, 4, 8), _t_rand(3, 4, 3), _causal(4),
    )
    add(
        "padding mask (B, 1, 1, T_k), B=2, H=3, float32",
        _t_rand(4, 2, 3, 5, 4, dtype=f32), _t_rand(5, 2, 3, 5, 4, dtype=f32),
        _t_rand(6, 2, 3, 5, 2, dtype=f32), _pad_len(torch.tensor([3, 5]), 5),
    )
    add(
        "[S4]'s additive causal mask (0 / -inf), float64",
        _t_rand(7, 2, 5, 4), _t_rand(8, 2, 5, 4), _t_rand(9, 2, 5, 3),
        _additive(_causal(5), torch.float64),
    )
    ids = torch.tensor([[1, 1, 4, 7], [5, 6, 2, 9]])
    add(
        "left padding AND causal: query 0 of sequence 0 sees no key, float64",
        _t_rand(10, 2, 2, 4, 4), _t_rand(11, 2, 2, 4, 4), _t_rand(12, 2, 2, 4, 3),
        _decoder_ref(ids, 1),
    )
    # ---- hidden
    add("one token", _t_rand(13, 1, 4), _t_rand(14, 1, 4), _t_rand(15, 1, 2), _causal(1),
        hidden=True)
    add(
        "an additive mask with a fully masked row, float32",
        _t_rand(16, 3, 4, dtype=f32), _t_rand(17, 3, 4, dtype=f32), _t_rand(18, 3, 2, dtype=f32),
        torch.tensor([[0.0, _NEG_INF, 0.0], [_NEG_INF] * 3, [0.0, 0.0, 0.0]]),
        hidden=True,
    )
    add(
        "large scores (|q|, |k| ~ 100), causal, float32",
        _t_rand(19, 5, 8, dtype=f32, scale=100.0), _t_rand(20, 5, 8, dtype=f32, scale=100.0),
        _t_rand(21, 5, 3, dtype=f32), _causal(5), hidden=True,
    )
    add(
        "cross-attention T_q=2, T_k=5 with key padding, float64",
        _t_rand(22, 2, 2, 2, 4), _t_rand(23, 2, 2, 5, 4), _t_rand(24, 2, 2, 5, 3),
        _pad_len(torch.tensor([5, 2]), 5), hidden=True,
    )
    # gradients: a fully masked row must give 0 gradients, not nan
    q, k, v = _t_rand(25, 4, 4), _t_rand(26, 4, 4), _t_rand(27, 4, 3)
    mask = _causal(4).clone()
    mask[0] = False
    probe = _t_rand(28, 4, 3)
    cases.append(grad_case("gradients w.r.t. q, k, v with a fully masked row (0, not nan)",
                           _sdpa, (q, k, v, mask), probe, grad_args=(0, 1, 2)))
    # the same with an additive 0 / -inf mask: nan_to_num on the weights repairs the output
    # but not the gradients w.r.t. q and k (the -inf row's softmax backward is nan). The goal
    # states it ("its gradients must be finite too"): a visible case (issue 32)
    cases.append(grad_case("gradients w.r.t. q, k, v with an additive mask and a fully masked "
                           "row (0, not nan)", _sdpa, (q, k, v, _additive(mask, torch.float64)),
                           probe, grad_args=(0, 1, 2), hidden=False))
    return tuple(cases)


def _scores(q, k):
    return (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])


def _as_additive(mask, dtype):
    return _additive(mask, dtype) if mask.dtype == torch.bool else mask.to(dtype)


def _masked_after_softmax(q, k, v, mask):
    keep = mask if mask.dtype == torch.bool else mask == 0
    return _softmax(_scores(q, k)).masked_fill(~keep, 0.0) @ v


def _masked_inverted(q, k, v, mask):
    keep = mask if mask.dtype == torch.bool else mask == 0
    return _sdpa(q, k, v, mask=~keep)


def _masked_nan_rows(q, k, v, mask):
    s = _scores(q, k) + _as_additive(mask, q.dtype)
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True) @ v


def _masked_patched(q, k, v, mask, *, where):
    """torch.softmax's nan for a fully masked row, set to 0 afterwards by nan_to_num (on the
    weights or on the output): the output is right, the backward pass still meets the nan."""
    w = torch.softmax(_scores(q, k) + _as_additive(mask, q.dtype), dim=-1)
    if where == "weights":
        return torch.nan_to_num(w, nan=0.0) @ v
    return torch.nan_to_num(w @ v, nan=0.0)


_NAN_TO_NUM = "nan_to_num patch (the output is 0, its gradients are still nan)"
_NAN_TO_NUM_WHY = (
    "nan_to_num repairs a fully masked row's output, not the backward pass: the softmax of an "
    "all -inf row still computes exp(-inf - (-inf)) = nan, and the gradient flowing back "
    "through it is nan. Keep the forward pass finite instead: shift by 0 where the row max is "
    "-inf and divide by 1 where the row sum is 0."
)


def _masked_multiplied(q, k, v, mask):
    keep = mask if mask.dtype == torch.bool else mask == 0
    return _softmax(_scores(q, k) * keep.to(q.dtype)) @ v


def _safe_softmax(s):
    """softmax over the last axis; a row of -inf gives weights 0 (as the exercise asks)."""
    m = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def _masked_ignored(q, k, v, mask):
    return _safe_softmax(_scores(q, k)) @ v


def _masked_bool_added(q, k, v, mask):  # a boolean mask added as 0 / 1, not turned into -inf
    return _safe_softmax(_scores(q, k) + mask.to(q.dtype)) @ v


def _masked_additive_as_bool(q, k, v, mask):  # right for boolean masks, inverted for additive
    return _sdpa(q, k, v, mask=mask.bool())


def _masked_steps(*, d_k_axis=-1, d_k_power=0.5, inverse_scale=False, max_dim=-1,
                  max_keepdim=True, sum_dim=-1, sum_keepdim=True, normalise=True):
    """The exercise's steps with one of them slipped (the scale's d_k, the shift's or the
    sum's axis or keepdim, or no division by the row sum)."""

    def f(q, k, v, mask):
        d_k = q.shape[d_k_axis] ** d_k_power
        s = q @ k.transpose(-2, -1)
        s = (s * d_k if inverse_scale else s / d_k) + _as_additive(mask, q.dtype)
        m = s.amax(dim=max_dim, keepdim=max_keepdim)
        e = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
        if not normalise:
            return e @ v
        total = e.sum(dim=sum_dim, keepdim=sum_keepdim)
        return (e / torch.where(total == 0, torch.ones_like(total), total)) @ v

    return f


def _masked_ref(q, k, v, mask):
    return _sdpa(q, k, v, mask=mask)


_MASKED_PROBES = (
    _mm.ignored(3, "the mask", _mm.opened, _masked_ref,
                "Use it on the scores before the softmax: -inf where it is False (or add the "
                "additive mask as it is).", how="every key allowed"),
    _mm.future_leak(_mm.causal_length(lambda case: case.args[3]), _mm.perturb_at(1, 2),
                    _masked_ref,
                    "Check which entries your mask blocks (a diagonal offset, tril vs triu, "
                    "< vs <=), and that it reaches the scores of every query."),
)

_MASKED = Check(
    **table.identity(__name__, "masked_attention"),
    uses=table.uses(__name__, "to_additive"),
    cases=_masked_cases,
    probes=_MASKED_PROBES,
    mistakes=(
        Mistake(
            "mask applied after the softmax",
            "Zeroing weights after the softmax leaves rows that no longer sum to one (the "
            "masked keys' share is simply lost). Add the mask (-inf) to the scores BEFORE the "
            "softmax, so the remaining keys share all of the weight.",
            _masked_after_softmax,
        ),
        Mistake(
            "mask inverted (True meaning drop instead of keep)",
            "True means 'may attend': put -inf where the mask is False "
            "(scores.masked_fill(~mask, float('-inf'))).",
            _masked_inverted,
        ),
        Mistake(
            "-inf producing NaN rows",
            "A query whose keys are all masked has a row of -inf; its max is -inf and "
            "-inf - (-inf) is nan (torch.softmax gives nan too). Shift by 0 where the row max "
            "is -inf and divide by 1 where the row sum is 0: the row's weights and output "
            "are then 0.",
            _masked_nan_rows,
        ),
        Mistake(
            "mask ignored",
            "The scores get the mask before the softmax: scores + M, with M = 0 where a key "
            "may be attended and -inf where it may not.",
            _masked_ignored,
        ),
        Mistake(
            "boolean mask added as 0 / 1 (not converted to 0 / -inf)",
            "A boolean mask (True = may attend) must become the additive 0 / -inf mask first "
            "(your to_additive from Exercise 1.2): adding True/False adds 1 or 0 to the scores.",
            _masked_bool_added,
        ),
        Mistake(
            "multiplied the scores by the mask",
            "scores * mask sets masked scores to 0, and exp(0) = 1 is still a real weight. "
            "Masked scores must be -inf (exp(-inf) = 0).",
            _masked_multiplied,
        ),
        Mistake(
            "additive mask used as a boolean",
            "A float mask is [S4]'s additive M (0 = keep, -inf = drop): "
            "add it to the "
            "scores. mask.bool() turns 0 into False and -inf into True, the opposite.",
            _masked_additive_as_bool,
        ),
        Mistake(
            "no scaling",
            "The scores are q kᵀ / sqrt(d_k), as in chapter 1, before the mask is added.",
            lambda q, k, v, mask: _sdpa(q, k, v, mask=mask, scale=1.0),
        ),
        # classes of wrong answers the mutation report (python -m bench.mutation) found unnamed
        Mistake(
            "d_k read from the wrong axis",
            "d_k is the size of the last axis of q (q.shape[-1]); q.shape[-2] is T_q and "
            "q.shape[0] a batch size.",
            _masked_steps(d_k_axis=-2),
        ),
        Mistake(
            "divided by d_k instead of sqrt(d_k)",
            "The variance of q · k is d_k, so its standard deviation is sqrt(d_k): divide the "
            "scores by math.sqrt(q.shape[-1]).",
            _masked_steps(d_k_power=1.0),
        ),
        Mistake(
            "multiplied the scores by sqrt(d_k) instead of dividing",
            "The scores are q kᵀ / sqrt(d_k); multiplying by sqrt(d_k) makes the softmax even "
            "more peaked.",
            _masked_steps(inverse_scale=True),
        ),
        Mistake(
            "maximum subtracted over the wrong axis",
            "Subtract each row's own maximum (amax(dim=-1, keepdim=True)): a per-column shift "
            "does not cancel in a row's softmax.",
            _masked_steps(max_dim=-2),
        ),
        Mistake(
            "row maximum without keepdim=True",
            "scores.amax(dim=-1) has shape (..., T_q) and is subtracted along the keys axis; "
            "keep the axis (keepdim=True) so each row is shifted by its own maximum.",
            _masked_steps(max_keepdim=False),
        ),
        Mistake(
            "normalised over the queries (sum over the wrong axis)",
            "Each query's weights sum to one over the keys: e.sum(dim=-1, keepdim=True).",
            _masked_steps(sum_dim=-2),
        ),
        Mistake(
            "row sums without keepdim=True",
            "e.sum(dim=-1) has shape (..., T_q) and divides along the *keys* axis; keep the "
            "axis (keepdim=True) so each row is divided by its own sum.",
            _masked_steps(sum_keepdim=False),
        ),
        Mistake(
            "weights not normalised (no division by the row sum)",
            "After exp(), divide each row by its sum over the keys so the weights sum to one; "
            "only a fully masked row (sum 0) is divided by 1: "
            "torch.where(total == 0, torch.ones_like(total), total), not the other way round.",
            _masked_steps(normalise=False),
        ),
        # issue 32: right outputs, nan gradients (named on a gradient case)
        *(Mistake(_NAN_TO_NUM, _NAN_TO_NUM_WHY,
                  lambda q, k, v, mask, where=where: _masked_patched(q, k, v, mask, where=where),
                  grad=True) for where in ("weights", "output")),
    ),
    error_hints=(
        ErrorHint(
            "a float mask passed to masked_fill or ~",
            "The mask may be boolean (True = keep) or additive float (0 / -inf): check "
            "mask.dtype == torch.bool and convert a boolean mask with your to_additive.",
            lambda e: message_has(
                e, "bitwise_not", "operator.invert", "masked_fill_ only supports boolean"
            ),
        ),
        ErrorHint(
            "mask not broadcast over heads",
            "The mask must broadcast to the (…, T_q, T_k) scores, aligned from the right.",
            _is_broadcast_error,
        ),
    ),
    forbidden=(
        "scaled_dot_product_attention",
        "multi_head_attention_forward",
        "_scaled_dot_product_attention_math",
    ),
    forbidden_hint="Compute softmax(q kᵀ / sqrt(d_k) + M) v yourself (torch.softmax is fine, "
    "but mind the fully masked rows).",
)
check_masked_attention = register(_MASKED)


# ====================================================================== Exercise 4.1
def _layer(seed: int, d: int, mask: str, name: str) -> AttentionLayer:
    """A fixed attention layer (the f under test); it travels to a graded kernel as plain data
    (its weights and mask kind, see ``_builders``)."""
    W = tuple(_t_rand(seed + j, d, d) / math.sqrt(d) for j in range(3))
    return AttentionLayer(name, mask, *W)


_CAUSAL_F = _layer(400, 6, "causal", "causal_layer")
_OPEN_F = _layer(410, 6, "none", "unmasked_layer")
_LEAKY_F = _layer(420, 6, "one step ahead", "layer_seeing_one_step_ahead")


def _leak_ref(f, x, t, delta):
    y = f(x)
    x2 = x.clone()
    x2[..., t + 1:, :] += delta[..., t + 1:, :]  # perturb only the future of t
    return (f(x2)[..., : t + 1, :] - y[..., : t + 1, :]).abs().max().item()


def _leak_cases():
    specs = [
        ("a causal layer, T=5, t=2", _CAUSAL_F, (5, 6), 2, False),
        ("an unmasked layer, T=5, t=1", _OPEN_F, (5, 6), 1, False),
        ("a layer that sees one step ahead, batch 2, T=6, t=3", _LEAKY_F, (2, 6, 6), 3, False),
        ("a causal layer, batch 3, T=7, t=0", _CAUSAL_F, (3, 7, 6), 0, False),
        ("a layer that sees one step ahead, t=T-2", _LEAKY_F, (4, 6), 2, True),
        ("an unmasked layer, t=0", _OPEN_F, (2, 3, 6), 0, True),
    ]
    cases = []
    for i, (label, f, shape, t, hidden) in enumerate(specs):
        x, delta = _t_rand(430 + i, *shape), _t_rand(440 + i, *shape)
        cases.append(
            Case(label, (f, x, t, delta), _leak_ref(f, x, t, delta), kind="scalar",
                 atol=1e-9, rtol=1e-6, hidden=hidden)
        )
    return tuple(cases)


def _leak_variant(f, x, t, delta, *, start, cmp):
    y = f(x)
    x2 = x.clone()
    if start == "past":
        x2[..., : t + 1, :] += delta[..., : t + 1, :]
    else:
        x2[..., start(t):, :] += delta[..., start(t):, :]
    y2 = f(x2)
    sel = {"past": slice(0, t + 1), "all": slice(None)}[cmp]
    return (y2[..., sel, :] - y[..., sel, :]).abs().max().item()


_LEAK = Check(
    **table.identity(__name__, "future_leak"),
    cases=_leak_cases,
    mistakes=(
        Mistake(
            "perturbed token t too (off by one)",
            "Token t is not in the future of position t: perturb only positions t+1 .. T-1 "
            "(x2[..., t+1:, :]). A causal output t does depend on token t.",
            lambda f, x, t, delta: _leak_variant(f, x, t, delta, start=lambda t: t, cmp="past"),
        ),
        Mistake(
            "compared every position",
            "Outputs after t may change (they see the perturbed tokens): the question is "
            "whether the EARLIER outputs change. Compare only positions 0 .. t "
            "([..., :t+1, :]), not all of them and not [..., t+1:, :].",
            lambda f, x, t, delta: _leak_variant(
                f, x, t, delta, start=lambda t: t + 1, cmp="all"
            ),
        ),
        Mistake(
            "perturbed the past instead of the future",
            "Add delta to the tokens AFTER t (x2[..., t+1:, :] += delta[..., t+1:, :]).",
            lambda f, x, t, delta: _leak_variant(f, x, t, delta, start="past", cmp="past"),
        ),
    ),
)
check_future_leak = register(_LEAK)


# ====================================================================== Exercise 4.2
def _grad_ref(f, x, t):
    x = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x)[..., t, :].sum(), x)
    return g


def _grad_cases():
    specs = [
        ("a causal layer, T=5, t=2", _CAUSAL_F, (5, 6), 2, False),
        ("an unmasked layer, T=4, t=1", _OPEN_F, (4, 6), 1, False),
        ("a causal layer, batch 2, T=6, t=4", _CAUSAL_F, (2, 6, 6), 4, False),
        ("a layer that sees one step ahead, t=0", _LEAKY_F, (5, 6), 0, True),
        ("a causal layer, t=T-1", _CAUSAL_F, (3, 7, 6), 6, True),
    ]
    cases = []
    for i, (label, f, shape, t, hidden) in enumerate(specs):
        x = _t_rand(450 + i, *shape)
        cases.append(Case(label, (f, x, t), _grad_ref(f, x, t), hidden=hidden))
    return tuple(cases)


def _grad_of(f, x, pick):
    with torch.enable_grad():
        x = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(pick(f(x)).sum(), x)
    return g


_GRAD = Check(
    **table.identity(__name__, "grad_of_position"),
    cases=_grad_cases,
    mistakes=(
        Mistake(
            "gradient of every output, not of position t",
            "Sum only output t: f(x)[..., t, :].sum(). The sum of all outputs depends on every "
            "token even in a causal layer.",
            lambda f, x, t: _grad_of(f, x, lambda y: y),
        ),
        Mistake(
            "indexed the feature axis instead of the time axis",
            "x and f(x) are (..., T, d): position t is [..., t, :], feature t is [..., t].",
            lambda f, x, t: _grad_of(f, x, lambda y: y[..., t]),
        ),
        Mistake(
            "gradient of the positions up to t",
            "Take output t alone, f(x)[..., t, :], not f(x)[..., :t+1, :].",
            lambda f, x, t: _grad_of(f, x, lambda y: y[..., : t + 1, :]),
        ),
    ),
)
check_grad_of_position = register(_GRAD)
