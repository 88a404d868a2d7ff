"""Checks for notebook 03 (multi-head attention), each with its catalogue of known mistakes.

Weights are in the course's row form: ``Q = X W_Q`` with ``W_Q`` of shape
``(d_model, H * d_k)``, heads side by side in the columns (head h owns columns
``h*d_k .. (h+1)*d_k - 1``). Expected outputs come from ``transformer_ref`` (its
``MultiHeadAttention`` is tested against ``nn.MultiheadAttention``), computed on first use
(in a notebook at import: ``_core._Cases``).

>>> check_mha_parameter_count(lambda d, h, bias=True: 4 * d * d + (4 * d if bias else 0))
... # doctest: +ELLIPSIS
✔ Exercise 3.2 `mha_parameter_count`: all ... cases match the reference.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from autograder.checks import _metamorphic as _mm
from autograder.checks import table
from autograder.checks._builders import MultiheadAttention
from autograder.checks._cases import grad_case, message_has
from autograder.checks._cases import t_rand as _t_rand
from autograder.checks._core import Case, Check, ErrorHint, Mistake, register

# trusted references: bound here, at import, before any student cell runs
from transformer_ref import MultiHeadAttention as _MHA
from transformer_ref import causal_mask as _causal
from transformer_ref import padding_mask_from_lengths as _pad_len
from transformer_ref import scaled_dot_product_attention as _sdpa

__all__ = [
    "check_msa_loop",
    "check_split_heads",
    "check_merge_heads",
    "check_multi_head_attention",
    "check_mha_parameter_count",
    "check_fused_qkv",
    "check_weights_from_torch",
]


_FORBIDDEN = (
    "scaled_dot_product_attention",
    "multi_head_attention_forward",
    "_native_multi_head_attention",
    "_scaled_dot_product_attention_math",
)


def _is_shape_mismatch(e: BaseException) -> bool:
    return message_has(
        e, "is invalid for input of size", "Expected size for first two dimensions of batch2"
    )


# ====================================================================== Exercise 1.1
def _cat_features(outs):
    return torch.cat(outs, dim=-1)


def _msa_ref(X, heads, *, scale=1.0, join=_cat_features):
    """[S1]'s MSA; ``scale`` and ``join`` (how the heads' outputs are put together) are what
    the catalogue's mistakes change."""
    return join([_sdpa(X @ Wq, X @ Wk, X @ Wv, scale=scale) for Wq, Wk, Wv in heads])


def _msa_cases():
    cases = []
    specs = [
        # (leading, n, d, H, d', dtype, hidden)
        ((), 4, 6, 2, 3, torch.float64, False),
        ((2,), 5, 6, 3, 2, torch.float32, False),
        ((), 3, 8, 4, 2, torch.float64, False),
        ((), 4, 6, 1, 6, torch.float64, True),  # one head: MSA is plain self-attention
        ((), 1, 4, 2, 2, torch.float64, True),  # one token
        # d' != d / H is allowed by the lecture notes [S1]
        ((2,), 4, 6, 2, 4, torch.float32, True),
    ]
    for i, (lead, n, d, H, dp, dt, hidden) in enumerate(specs):
        X = _t_rand(100 + i, *lead, n, d, dtype=dt)
        heads = tuple(  # a tuple (not a list), so the check can hand out private copies
            tuple(_t_rand(110 + 10 * i + 3 * h + j, d, dp, dtype=dt) / math.sqrt(d)
                  for j in range(3))
            for h in range(H)
        )
        label = f"X {(*lead, n, d)}, H={H} heads of d'={dp}, {str(dt)[6:]}"
        cases.append(Case(label, (X, heads), _msa_ref(X, heads), hidden=hidden))
    return tuple(cases)


_MSA = Check(
    **table.identity(__name__, "msa_loop"),
    cases=_msa_cases,
    mistakes=(
        Mistake(
            "heads concatenated in the wrong order",
            "MSA = [SA(head 1), ..., SA(head H)]: head h's output goes into columns "
            "h*d' .. (h+1)*d' - 1, in the order of the list.",
            lambda X, heads: _msa_ref(X, heads[::-1]),
        ),
        Mistake(
            "scaled the scores by 1/sqrt(d')",
            "[S1]'s heads are unscaled: softmax(X W_Q (X W_K)ᵀ) X "
            "W_V, no 1/sqrt(d').",
            lambda X, heads: _msa_ref(X, heads, scale=None),
        ),
        Mistake(
            "summed the heads instead of concatenating",
            "The heads sit side by side: torch.cat(outputs, dim=-1) gives (..., n, H d').",
            lambda X, heads: _msa_ref(X, heads, join=sum),
        ),
        Mistake(
            "stacked the heads on a new axis",
            "torch.stack adds an axis; concatenate along the feature axis instead: "
            "torch.cat(outputs, dim=-1).",
            lambda X, heads: _msa_ref(X, heads, join=torch.stack),
        ),
        Mistake(
            "heads concatenated along the first axis (torch.cat without dim=-1)",
            "torch.cat joins along dim=0 unless told otherwise: that stacks the heads' rows "
            "(the tokens, for X of shape (n, d)). Put them side by side along the feature "
            "axis: torch.cat(outputs, dim=-1) gives (..., n, H d').",
            lambda X, heads: _msa_ref(X, heads, join=torch.cat),
        ),
        Mistake(
            "passed scale=0 for 'no scaling'",
            "scale multiplies the scores: scale=0 makes them all 0, so every token attends "
            "uniformly (each head returns the mean of its values). [S1]'s unscaled heads "
            "multiply by 1: attention(..., scale=1.0).",
            lambda X, heads: _msa_ref(X, heads, scale=0.0),
        ),
    ),
    forbidden=_FORBIDDEN,
    forbidden_hint="Loop over the heads and write each head's attention yourself.",
)
check_msa_loop = register(_MSA)


# ====================================================================== Exercise 2.1
def _split_ref(x, n_head):
    B, T, D = x.shape
    return x.view(B, T, n_head, D // n_head).transpose(1, 2)


def _split_cases():
    specs = [
        ((2, 5, 8), 2, torch.float64, False),
        ((1, 3, 12), 4, torch.float32, False),
        ((2, 4, 6), 3, torch.float64, False),
        ((2, 3, 4), 1, torch.float64, True),  # one head
        ((3, 1, 8), 4, torch.float32, True),  # one token
        ((2, 4, 4), 4, torch.float64, True),  # d_k = 1
    ]
    return tuple(
        Case(f"x {shape}, n_head={H}, {str(dt)[6:]}", (_t_rand(200 + i, *shape, dtype=dt), H),
             _split_ref(_t_rand(200 + i, *shape, dtype=dt), H), hidden=hidden)
        for i, (shape, H, dt, hidden) in enumerate(specs)
    )


_SPLIT = Check(
    **table.identity(__name__, "split_heads"),
    cases=_split_cases,
    mistakes=(
        Mistake(
            "reshape to heads without transposing (heads mixed across positions)",
            "x.reshape(B, H, T, d_k) reads the memory of (B, T, D) as if heads came first, so "
            "a 'head' gets pieces of several positions. Split the last axis first, "
            "x.view(B, T, H, d_k), then swap: .transpose(1, 2) -> (B, H, T, d_k).",
            lambda x, H: x.reshape(x.shape[0], H, x.shape[1], x.shape[2] // H),
        ),
        Mistake(
            "forgot the transpose",
            "x.view(B, T, H, d_k) is (B, T, H, d_k); attention wants (B, H, T, d_k): "
            "add .transpose(1, 2).",
            lambda x, H: x.view(x.shape[0], x.shape[1], H, x.shape[2] // H),
        ),
        Mistake(
            "heads interleaved instead of contiguous",
            "Head h owns the contiguous columns h*d_k .. (h+1)*d_k - 1, so split D as "
            "(H, d_k): view(B, T, H, d_k), not (d_k, H).",
            lambda x, H: x.view(x.shape[0], x.shape[1], x.shape[2] // H, H).permute(0, 3, 1, 2),
        ),
        Mistake(
            "transposed the wrong pair of axes",
            "x.view(B, T, H, d_k) has T on axis 1 and H on axis 2: swap exactly those, "
            ".transpose(1, 2) -> (B, H, T, d_k). Swapping axis 3 (d_k) in scrambles the shape.",
            lambda x, H: x.view(x.shape[0], x.shape[1], H, x.shape[2] // H).transpose(1, 3),
        ),
    ),
)
check_split_heads = register(_SPLIT)


# ====================================================================== Exercise 2.2
def _merge_ref(x):
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)


def _merge_cases():
    specs = [
        ((2, 2, 5, 4), torch.float64, False),
        ((1, 4, 3, 3), torch.float32, False),
        ((2, 3, 4, 2), torch.float64, False),
        ((2, 1, 3, 4), torch.float64, True),
        ((3, 4, 1, 2), torch.float32, True),
    ]
    return tuple(
        Case(f"x {shape}, {str(dt)[6:]}", (_t_rand(300 + i, *shape, dtype=dt),),
             _merge_ref(_t_rand(300 + i, *shape, dtype=dt)), hidden=hidden)
        for i, (shape, dt, hidden) in enumerate(specs)
    )


_MERGE = Check(
    **table.identity(__name__, "merge_heads"),
    cases=_merge_cases,
    mistakes=(
        Mistake(
            "reshape without transposing (heads mixed across positions)",
            "(B, H, T, d_k).reshape(B, T, H*d_k) glues rows of different positions together. "
            "Bring T next to B first: x.transpose(1, 2) is (B, T, H, d_k); then reshape "
            "(it is not contiguous any more, so .reshape or .contiguous().view).",
            lambda x: x.reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3]),
        ),
        Mistake(
            "heads concatenated in the wrong order",
            "Concat(head_1, ..., head_H): head 0 first. Do not reverse or reorder the head axis.",
            lambda x: _merge_ref(x.flip(1)),
        ),
        Mistake(
            "heads interleaved instead of concatenated",
            "Each head's d_k features must stay together: (B, T, H, d_k) -> (B, T, H*d_k). "
            "Permuting to (B, T, d_k, H) first interleaves the heads' features.",
            lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1),
        ),
        # transpose(0, 2) or transpose(1, 3) instead of transpose(1, 2)
        *(Mistake(
            "transposed the wrong pair of axes",
            "x is (B, H, T, d_k): bring T next to B by swapping axes 1 and 2, "
            "x.transpose(1, 2) -> (B, T, H, d_k), then reshape. Another pair (0 and 2, 1 and 3) "
            "reshapes numbers of other sequences or other features into each row.",
            fn,
        ) for fn in (lambda x: x.transpose(0, 2).reshape(x.shape[0], x.shape[2], -1),
                     lambda x: x.transpose(1, 3).reshape(x.shape[0], x.shape[2], -1))),
    ),
)
check_merge_heads = register(_MERGE)


# ====================================================================== Exercise 3.1
def _ref_module(W_Q, W_K, W_V, W_O, n_head):
    d_model = W_Q.shape[0]
    m = _MHA(d_model, n_head, bias=False).to(W_Q.dtype)
    with torch.no_grad():
        for lin, W in ((m.q_proj, W_Q), (m.k_proj, W_K), (m.v_proj, W_V), (m.out_proj, W_O)):
            lin.weight.copy_(W.T)  # nn.Linear stores (out, in): y = x Wᵀ
    return m


def _mha_ref(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    with torch.no_grad():
        return _ref_module(W_Q, W_K, W_V, W_O, n_head)(x_q, context=x_kv, mask=mask)


def _mha_cases():
    cases = []
    f32 = torch.float32
    specs = [
        # (label, B, T_q, T_k, d_model, H, dtype, mask kind, cross, hidden)
        ("self-attention, B=2, T=5, d_model=8, H=2", 2, 5, 5, 8, 2, torch.float64, None,
         False, False),
        ("self-attention, causal mask, B=3, T=4, d_model=12, H=3 (B == H)", 3, 4, 4, 12, 3, f32,
         "causal", False, False),
        ("cross-attention T_q=3, T_k=6 with key padding (lengths 6, 4), d_model=8, H=2", 2, 3,
         6, 8, 2, torch.float64, "pad", True, False),
        ("self-attention, one head", 2, 4, 4, 6, 1, torch.float64, None, False, True),
        ("one token", 1, 1, 1, 8, 4, torch.float64, None, False, True),
        ("cross-attention T_q=1, T_k=7, H=4, d_model=16", 2, 1, 7, 16, 4, f32, "pad", True,
         True),
        ("d_model=32, H=8, causal, T=6", 1, 6, 6, 32, 8, f32, "causal", False, True),
    ]
    for i, (label, B, Tq, Tk, D, H, dt, mk, cross, hidden) in enumerate(specs):
        s = 500 + 10 * i
        x_q = _t_rand(s, B, Tq, D, dtype=dt)
        x_kv = _t_rand(s + 1, B, Tk, D, dtype=dt) if cross else x_q
        Ws = tuple(_t_rand(s + 2 + j, D, D, dtype=dt) / math.sqrt(D) for j in range(4))
        kw = {}
        if mk == "causal":
            kw["mask"] = _causal(Tq)
        elif mk == "pad":
            kw["mask"] = _pad_len(torch.tensor([Tk] + [max(1, Tk - 2)] * (B - 1)), Tk)
        args = (x_q, x_kv, *Ws, H)
        cases.append(
            Case(f"{label}, {str(dt)[6:]}", args, _mha_ref(*args, **kw), kwargs=kw,
                 hidden=hidden)
        )
    # cross-attention without a mask, before the padded one: keys and values projected from
    # x_q give an output there (named), not the padded case's shape error (issue 32)
    x_q, x_kv = _t_rand(570, 2, 2, 8), _t_rand(571, 2, 5, 8)
    args = (x_q, x_kv, *(_t_rand(572 + j, 8, 8) / math.sqrt(8) for j in range(4)), 2)
    cases.insert(2, Case("cross-attention T_q=2, T_k=5, no mask, d_model=8, H=2, float64", args,
                         _mha_ref(*args)))
    # gradients w.r.t. both inputs and all four weights, cross-attention with key padding
    B, Tq, Tk, D, H = 2, 3, 4, 8, 2
    args = (_t_rand(590, B, Tq, D), _t_rand(591, B, Tk, D),
            *(_t_rand(592 + j, D, D) / math.sqrt(D) for j in range(4)), H)
    kw = {"mask": _pad_len(torch.tensor([4, 2]), Tk)}
    cases.append(grad_case(
        "gradients w.r.t. x_q, x_kv, W_Q, W_K, W_V, W_O (cross-attention, padding)",
        # the same function as _mha_ref, written out for autograd
        lambda x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask: _mha_parts(
            x_q, x_kv, W_Q, W_K, W_V, n_head, mask)[1] @ W_O,
        args, _t_rand(599, B, Tq, D), grad_args=range(6), kwargs=kw))
    return tuple(cases)


def _mha_parts(x_q, x_kv, W_Q, W_K, W_V, n_head, mask=None, *, scale=None, split=None,
               merge=None):
    """Heads (B, H, T_q, d_k) and their merge, with swappable split/merge/scale."""
    B, T_q, D = x_q.shape
    d_k = D // n_head
    split = split or (lambda t: t.view(B, t.shape[1], n_head, d_k).transpose(1, 2))
    q, k, v = split(x_q @ W_Q), split(x_kv @ W_K), split(x_kv @ W_V)  # (B, H, T, d_k)
    heads = _sdpa(q, k, v, mask=mask, scale=scale)  # (B, H, T_q, d_k)
    merge = merge or (lambda h: h.transpose(1, 2).reshape(B, T_q, D))
    return heads, merge(heads)


def _mha_no_transpose(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    B, T_q, D = x_q.shape
    _, y = _mha_parts(
        x_q, x_kv, W_Q, W_K, W_V, n_head, mask,
        split=lambda t: t.reshape(B, n_head, t.shape[1], D // n_head),
        merge=lambda h: h.reshape(B, T_q, D),
    )
    return y @ W_O


def _mha_no_transpose_split(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    B, _, D = x_q.shape
    _, y = _mha_parts(
        x_q, x_kv, W_Q, W_K, W_V, n_head, mask,
        split=lambda t: t.reshape(B, n_head, t.shape[1], D // n_head),
    )
    return y @ W_O


def _mha_d_model(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    if n_head == 1:
        raise ValueError("the same as the right answer with one head")
    _, y = _mha_parts(x_q, x_kv, W_Q, W_K, W_V, n_head, mask,
                      scale=1.0 / math.sqrt(x_q.shape[-1]))
    return y @ W_O


def _mha_no_wo(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    return _mha_parts(x_q, x_kv, W_Q, W_K, W_V, n_head, mask)[1]


def _mha_wo_per_head(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    heads, _ = _mha_parts(x_q, x_kv, W_Q, W_K, W_V, n_head, mask)  # (B, H, T_q, d_k)
    D = W_O.shape[0]
    per_head = heads @ W_O.view(n_head, D // n_head, D)  # (B, H, T_q, d_model)
    return per_head.mean(dim=1)


def _mha_kv_from_x_q(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    return _mha_ref(x_q, x_q, W_Q, W_K, W_V, W_O, n_head, mask=mask)  # a key mask: raises


def _mha_reversed(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    B, T_q, D = x_q.shape
    _, y = _mha_parts(x_q, x_kv, W_Q, W_K, W_V, n_head, mask,
                      merge=lambda h: h.flip(1).transpose(1, 2).reshape(B, T_q, D))
    return y @ W_O


_TRANSPOSE_NAME = "reshape to heads without transposing (heads mixed across positions)"
_TRANSPOSE_WHY = (
    "(B, T, d_model).reshape(B, H, T, d_k) runs, but each 'head' then holds pieces of several "
    "positions. Split with .view(B, T, H, d_k).transpose(1, 2) and merge with "
    ".transpose(1, 2).reshape(B, T, d_model) (your split_heads and merge_heads)."
)

_MHA_CHECK = Check(
    **table.identity(__name__, "multi_head_attention"),
    uses=table.uses(__name__, "split_heads", "merge_heads"),
    cases=_mha_cases,
    probes=(
        _mm.ignored("mask", "the mask", _mm.opened, _mha_ref,
                    "Pass the mask on to the attention of every head (it broadcasts over "
                    "the head axis).", how="every key allowed"),
        _mm.future_leak(_mm.causal_length(lambda case: case.kwargs.get("mask")),
                        _mm.perturb_at(1), _mha_ref,
                        "Pass the mask to the attention of every head, on the (B, H, T_q, "
                        "T_k) scores."),
    ),
    mistakes=(
        Mistake(_TRANSPOSE_NAME, _TRANSPOSE_WHY, _mha_no_transpose),
        Mistake(_TRANSPOSE_NAME, _TRANSPOSE_WHY, _mha_no_transpose_split),
        Mistake(
            "scaled by sqrt(d_model) instead of sqrt(d_k)",
            "Each head computes its scores in d_k = d_model / H dimensions, so their variance "
            "is d_k: divide by sqrt(d_k) = sqrt(q.shape[-1]) after splitting the heads.",
            _mha_d_model,
        ),
        Mistake(
            "forgot W_O",
            "MultiHead = Concat(head_1, ..., head_H) W_O: multiply the merged heads by W_O.",
            _mha_no_wo,
        ),
        Mistake(
            "applied W_O per head",
            "Concat(head_1..head_H) W_O = sum over h of head_h W_O[h*d_k:(h+1)*d_k, :]: the "
            "heads' contributions are ADDED, each with its own block of rows of W_O. "
            "Projecting each head and averaging divides by H; merge first, then @ W_O.",
            _mha_wo_per_head,
        ),
        Mistake(
            "heads concatenated in the wrong order",
            "Head h's output belongs in columns h*d_k .. (h+1)*d_k - 1 of the concatenation, "
            "the columns W_O expects it in.",
            _mha_reversed,
        ),
        Mistake(
            "keys and values projected from x_q instead of x_kv",
            "In cross-attention the queries come from x_q and the keys and values from x_kv: "
            "k = split_heads(x_kv @ W_K, n_head), v = split_heads(x_kv @ W_V, n_head). With "
            "x_q the layer attends over the queries' own sequence (self-attention).",
            _mha_kv_from_x_q,
        ),
    ),
    error_hints=(
        ErrorHint(
            "used the query length for the key dimension in cross-attention",
            "In cross-attention the keys and values come from x_kv with T_k positions, "
            "T_k != T_q: split k and v with their own length (x_kv.shape[1]), not x_q's.",
            _is_shape_mismatch,
        ),
    ),
    forbidden=_FORBIDDEN,
    forbidden_hint="Write softmax(q kᵀ / sqrt(d_k) + mask) v per head yourself "
    "(torch.softmax is fine).",
)
check_multi_head_attention = register(_MHA_CHECK)


# ====================================================================== Exercise 3.2
def _count_ref(d_model, n_head, bias=True):
    m = _MHA(d_model, n_head, bias=bias)
    return sum(p.numel() for p in m.parameters())


def _count_cases():
    specs = [((512, 8), {}, False), ((64, 4), {"bias": False}, False),
             ((768, 12), {"bias": True}, False), ((8, 1), {}, True),
             ((1024, 16), {"bias": False}, True), ((6, 3), {"bias": True}, True)]
    return tuple(
        Case(f"d_model={a[0]}, n_head={a[1]}" + (f", bias={kw['bias']}" if kw else ""),
             a, _count_ref(*a, **kw), kwargs=kw, kind="scalar", atol=0.5, hidden=hidden)
        for a, kw, hidden in specs
    )


_COUNT = Check(
    **table.identity(__name__, "mha_parameter_count"),
    cases=_count_cases,
    mistakes=(
        Mistake(
            "a full d_model x d_model projection per head",
            "Each head projects to d_k = d_model / H, so W_Q, W_K, W_V of ALL heads together are "
            "d_model x d_model each: the count does not grow with H.",
            lambda d, h, bias=True: 3 * h * d * d + d * d + (3 * h * d + d if bias else 0),
        ),
        Mistake(
            "forgot W_O",
            "Four projections: W_Q, W_K, W_V and the output projection W_O (d_model x d_model).",
            lambda d, h, bias=True: 3 * d * d + (3 * d if bias else 0),
        ),
        Mistake(
            "forgot the biases",
            "With bias=True each of the four projections has a bias of d_model entries.",
            lambda d, h, bias=True: 4 * d * d,
        ),
        Mistake(
            "one bias for all four projections",
            "Each of W_Q, W_K, W_V and W_O has its own bias of d_model entries: 4 * d_model.",
            lambda d, h, bias=True: 4 * d * d + (d if bias else 0),
        ),
        Mistake(
            "forgot W_O's bias",
            "The output projection W_O has a bias too: four biases of d_model entries.",
            lambda d, h, bias=True: 4 * d * d + (3 * d if bias else 0),
        ),
        Mistake(
            "counted each bias as one parameter",
            "A bias is a vector of d_model entries (one per output feature), not one number: "
            "4 * d_model with bias=True.",
            lambda d, h, bias=True: 4 * d * d + (4 if bias else 0),
        ),
        Mistake(
            "forgot W_O's weight (but counted its bias)",
            "Four d_model x d_model weight matrices: W_Q, W_K, W_V and the output projection W_O.",
            lambda d, h, bias=True: 3 * d * d + (4 * d if bias else 0),
        ),
        Mistake(
            "counted one weight matrix, not four",
            "W_Q, W_K, W_V and W_O are four d_model x d_model matrices: 4 * d_model * d_model "
            "weights.",
            lambda d, h, bias=True: d * d + (4 * d if bias else 0),
        ),
        Mistake(
            "counted each weight matrix as d_model entries",
            "A projection maps d_model features to d_model features: its weight is a "
            "d_model x d_model matrix, d_model * d_model entries (only a bias has d_model).",
            lambda d, h, bias=True: 4 * d + (4 * d if bias else 0),
        ),
    ),
)
check_mha_parameter_count = register(_COUNT)


# ====================================================================== Exercise 3.3
def _fused_ref(x, W_QKV):
    return tuple(t.contiguous() for t in (x @ W_QKV).split(W_QKV.shape[1] // 3, dim=-1))


_SPLIT3 = "split(3) cut pieces of 3 columns (its argument is the piece size, not the count)"


def _fused_cases():
    # d = 5, not 4: with d = 4, .split(3)'s pieces (3 wide) looked like an off-by-one (issue 32)
    specs = [((2, 3, 5), torch.float64, False), ((1, 6, 8), torch.float32, False),
             ((2, 1, 6), torch.float64, True), ((3, 5, 2), torch.float32, True)]
    cases = []
    for i, (shape, dt, hidden) in enumerate(specs):
        x = _t_rand(600 + i, *shape, dtype=dt)
        W = _t_rand(610 + i, shape[-1], 3 * shape[-1], dtype=dt)
        cases.append(Case(f"x {shape}, W_QKV {tuple(W.shape)}, {str(dt)[6:]}", (x, W),
                          _fused_ref(x, W), hidden=hidden))
    return tuple(cases)


_FUSED = Check(
    **table.identity(__name__, "fused_qkv"),
    cases=_fused_cases,
    mistakes=(
        Mistake(
            "split along the wrong axis",
            "x @ W_QKV is (B, T, 3 d_model): split the LAST axis into three blocks of d_model "
            "(.split(d_model, dim=-1) or .chunk(3, dim=-1)).",
            lambda x, W: tuple((x @ W).chunk(3, dim=1)),
        ),
        Mistake(
            "took every third column",
            "W_QKV = [W_Q | W_K | W_V] side by side: q is the first d_model columns, not "
            "columns 0, 3, 6, ...",
            lambda x, W: tuple((x @ W)[..., j::3] for j in range(3)),
        ),
        # .split(3): the first three pieces kept, or all of them returned (issue 32)
        *(Mistake(
            _SPLIT3,
            ".split(size, dim) takes the size of each piece: .split(d_model, dim=-1) with "
            "d_model = W_QKV.shape[1] // 3, or .chunk(3, dim=-1), which takes the count.",
            fn,
        ) for fn in (lambda x, W: tuple((x @ W).split(3, dim=-1)[:3]),
                     lambda x, W: tuple((x @ W).split(3, dim=-1)))),
    ),
    error_hints=(
        ErrorHint(
            "split into the wrong number of pieces",
            "q, k, v = ... needs exactly three pieces. .split(size, dim) takes the size of "
            "each piece, d_model = W_QKV.shape[1] // 3 (not the count 3, not W_QKV.shape[0] "
            "// 3), and splits dim 0 unless you pass dim=-1; .chunk(3, dim=-1) takes the count.",
            lambda e: "values to unpack (expected 3" in str(e),
        ),
        ErrorHint(
            "split size is a float (/ instead of //)",
            "W_QKV.shape[1] / 3 is a float; .split needs an int size: W_QKV.shape[1] // 3.",
            lambda e: "must be tuple of ints, not float" in str(e),
        ),
        ErrorHint(
            "split size is 0 (3 // width instead of width // 3)",
            "Each piece is d_model = W_QKV.shape[1] // 3 columns wide; 3 // W_QKV.shape[1] is 0 "
            "for any width above 3.",
            lambda e: "split_size can only be 0 if dimension size is 0" in str(e),
        ),
    ),
)
check_fused_qkv = register(_FUSED)


# ====================================================================== Exercise 5.1
def _torch_mha(seed: int, d_model: int, n_head: int, dtype=torch.float32) -> nn.MultiheadAttention:
    """A seeded ``nn.MultiheadAttention(d_model, n_head, bias=False, batch_first=True)`` (a
    builder: it reaches a graded kernel as its two weight tensors)."""
    return MultiheadAttention(_t_rand(seed, 3 * d_model, d_model, dtype=dtype),
                              _t_rand(seed + 1, d_model, d_model, dtype=dtype), n_head)


def _weights_ref(m):
    W_q, W_k, W_v = m.in_proj_weight.detach().chunk(3, dim=0)  # (out, in) each
    return (W_q.T, W_k.T, W_v.T, m.out_proj.weight.detach().T)  # row form (in, out)


def _weights_cases():
    specs = [(8, 2, torch.float32, False), (12, 3, torch.float64, False),
             (4, 1, torch.float64, True), (16, 4, torch.float32, True)]
    cases = []
    for i, (D, H, dt, hidden) in enumerate(specs):
        m = _torch_mha(700 + 2 * i, D, H, dt)
        exp = tuple(t.clone() for t in _weights_ref(m))
        cases.append(Case(f"nn.MultiheadAttention({D}, {H}, bias=False), {str(dt)[6:]}",
                          (m,), exp, hidden=hidden))
    return tuple(cases)


_WEIGHTS = Check(
    **table.identity(__name__, "weights_from_torch"),
    cases=_weights_cases,
    mistakes=(
        Mistake(
            "transposed weight convention (W vs Wᵀ)",
            "PyTorch stores a Linear weight as (out, in) and computes x Wᵀ; our row form "
            "computes x W with W (in, out). Transpose every block: W_Q = in_proj_weight[:d].T.",
            lambda m: tuple(t.T for t in _weights_ref(m)),
        ),
        Mistake(
            "W_O not transposed",
            "out_proj.weight is (out, in) too: W_O = out_proj.weight.T.",
            lambda m: (*_weights_ref(m)[:3], m.out_proj.weight.detach()),
        ),
        Mistake(
            "split in_proj_weight along the wrong axis",
            "in_proj_weight is [W_Q; W_K; W_V] stacked along the rows, (3 d_model, d_model): "
            "chunk(3, dim=0), then transpose each block.",
            lambda m: (*(t.T for t in m.in_proj_weight.detach().chunk(3, dim=1)),
                       m.out_proj.weight.detach().T),
        ),
    ),
    error_hints=(
        ErrorHint(
            "in_proj_weight split into the wrong number of pieces",
            "in_proj_weight is [W_Q; W_K; W_V], three blocks of d_model rows: "
            "W_q, W_k, W_v = m.in_proj_weight.chunk(3, dim=0). Unpacking the tensor itself "
            "(or chunking into another count) does not give three blocks.",
            lambda e: "values to unpack (expected 3" in str(e),
        ),
    ),
)
check_weights_from_torch = register(_WEIGHTS)
