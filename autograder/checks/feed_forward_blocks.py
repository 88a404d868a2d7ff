"""Checks for notebook 05 (feed-forward networks and Transformer blocks), with mistake catalogues.

The block checks hand the student's function sublayers (``attn``, ``ffn``, ``norm1``,
``norm2``: ``_builders.Sublayer`` objects holding the weights of a seeded
``torch.nn.TransformerEncoderLayer``) and compare with that torch layer's own output, for
``norm_first=False`` (post-LN) and ``True`` (pre-LN); Exercise 3.1 gets ``_builders``
encoder blocks with ``transformer_ref.EncoderBlock``'s weights and is compared with
``transformer_ref``'s gradients. Everything is built here, on first use (in a notebook at
import: ``_core._Cases``).

>>> check_ffn_param_count(lambda d, f, a: (3 if a == "swiglu" else 2) * d * f
...     + (2 * f if a == "swiglu" else f) + d)  # doctest: +ELLIPSIS
✔ Exercise 1.3 `ffn_param_count`: all ... cases match the reference.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.checks import _metamorphic as _mm
from autograder.checks import table
from autograder.checks._builders import EncoderBlock, Sublayer
from autograder.checks._cases import is_layer_input_mismatch as _is_matmul_mismatch
from autograder.checks._cases import t_rand as _t_rand
from autograder.checks._core import Case, Check, ErrorHint, Mistake, register

# trusted references: bound here, at import, before any student cell runs
from transformer_ref import EncoderBlock as _EncoderBlock
from transformer_ref import FeedForward as _FeedForward

__all__ = [
    "check_feed_forward",
    "check_ffn_as_conv1d",
    "check_ffn_param_count",
    "check_swiglu_ffn",
    "check_post_ln_block",
    "check_pre_ln_block",
    "check_grad_norm_per_layer",
]

_relu, _gelu, _silu, _sigmoid = F.relu, F.gelu, F.silu, torch.sigmoid


def _act(name):
    return {"relu": _relu, "gelu": _gelu}[name]


# ====================================================================== Exercise 1.1
def _ffn(x, W1, b1, W2, b2, activation="relu", *, where="between", act=None, bias=True):
    """``bias``: True, False, which one bias is kept ("b1" / "b2"), or which one is
    subtracted ("-b1" / "-b2")."""
    a = _act(activation) if act is None else act
    if where == "before":
        x = a(x)
    h = x @ W1 + (b1 if bias in (True, "b1", "-b2") else -b1 if bias == "-b1" else 0)
    if where in ("between", "both"):
        h = a(h)
    y = h @ W2 + (b2 if bias in (True, "b2", "-b1") else -b2 if bias == "-b2" else 0)
    return a(y) if where in ("after", "both") else y


def _ffn_v(**kw):
    return lambda x, W1, b1, W2, b2, activation="relu": _ffn(x, W1, b1, W2, b2, activation, **kw)


def _ffn_case(label, shape, d_ff, seed, activation=None, dtype=torch.float64, hidden=False):
    d = shape[-1]
    x = _t_rand(seed, *shape, dtype=dtype)
    W1 = _t_rand(seed + 1, d, d_ff, dtype=dtype, scale=1 / math.sqrt(d))
    b1 = _t_rand(seed + 2, d_ff, dtype=dtype, scale=0.5)
    W2 = _t_rand(seed + 3, d_ff, d, dtype=dtype, scale=1 / math.sqrt(d_ff))
    b2 = _t_rand(seed + 4, d, dtype=dtype, scale=0.5)
    kw = {} if activation is None else {"activation": activation}
    return Case(label, (x, W1, b1, W2, b2), _ffn(x, W1, b1, W2, b2, **kw), kwargs=kw,
                hidden=hidden)


def _ffn_cases():
    c = _ffn_case
    return (
        c("x (2, 5, 8), d_ff = 32, relu (default), float64", (2, 5, 8), 32, 500),
        c("x (3, 6), d_ff = 24, gelu, float32", (3, 6), 24, 510, "gelu", torch.float32),
        c("x (2, 4, 8), d_ff = 32, relu, float32", (2, 4, 8), 32, 520, "relu", torch.float32),
        c("x (2, 4, 8), d_ff = 32, gelu, float64", (2, 4, 8), 32, 530, "gelu"),
        c("one token, d_model = 4, d_ff = 16, gelu", (1, 1, 4), 16, 540, "gelu", hidden=True),
        c("x (2, 3, 4, 8) (extra axes), relu", (2, 3, 4, 8), 32, 550, "relu", hidden=True),
    )


_SWAP_HINT = ErrorHint(
    "d_ff and d_model swapped in weight shapes",
    "In row form x (..., d_model) @ W_1 (d_model, d_ff) expands and @ W_2 (d_ff, d_model) "
    "contracts. nn.Linear stores its weight as (out, in), i.e. W_1ᵀ: x @ W_1 here, "
    "x @ linear.weight.T there; nn.Linear(d_model, d_ff) is the first layer.",
    _is_matmul_mismatch,
)

_FFN = Check(
    **table.identity(__name__, "feed_forward"),
    cases=_ffn_cases,
    probes=(
        _mm.ignored(2, "the first bias `b1`", lambda b: b + 1, _ffn,
                    "Add b1 to x W1 before the activation.", how="b1 + 1"),
        _mm.ignored(4, "the second bias `b2`", lambda b: b + 1, _ffn,
                    "Add b2 to the second layer's output.", how="b2 + 1"),
        _mm.ignored("activation", "`activation`", lambda a: "gelu" if a == "relu" else "relu",
                    _ffn, "Apply the activation the argument names (relu or gelu).",
                    how="relu and gelu swapped", default="relu"),
    ),
    mistakes=(
        Mistake(
            "activation after the second linear layer",
            "FFN(x) = act(x W_1 + b_1) W_2 + b_2: the nonlinearity sits *between* the two linear "
            "maps, on the d_ff-wide hidden layer; the output is linear.",
            _ffn_v(where="after"),
        ),
        Mistake(
            "activation after both linear layers",
            "FFN(x) = act(x W_1 + b_1) W_2 + b_2: one activation, on the d_ff-wide hidden "
            "layer only. The second linear map's output goes out as it is (a ReLU there would "
            "clip every negative output feature to 0).",
            _ffn_v(where="both"),
        ),
        Mistake(
            "activation before the first linear layer",
            "Apply the activation to x W_1 + b_1 (the expanded hidden layer), not to the input.",
            _ffn_v(where="before"),
        ),
        Mistake(
            "no activation",
            "Without the nonlinearity two linear maps are one linear map (W_1 W_2): apply ReLU "
            "or GELU to the hidden layer.",
            _ffn_v(where="none"),
        ),
        Mistake(
            "ignored the `activation` argument (always ReLU)",
            "activation='gelu' means the exact GELU, torch.nn.functional.gelu(h).",
            lambda x, W1, b1, W2, b2, activation="relu": _ffn(x, W1, b1, W2, b2, act=_relu),
        ),
        Mistake(
            "activations swapped (GELU for relu, ReLU for gelu)",
            "activation='relu' asks for F.relu(h), activation='gelu' for F.gelu(h): check the "
            "comparison that picks one (== vs !=, or the string it compares with).",
            lambda x, W1, b1, W2, b2, activation="relu": _ffn(
                x, W1, b1, W2, b2, act=_gelu if activation == "relu" else _relu),
        ),
        Mistake(
            "GELU where ReLU is asked (always GELU)",
            "activation='relu' (the default) means F.relu(h); GELU only for activation='gelu'.",
            lambda x, W1, b1, W2, b2, activation="relu": _ffn(x, W1, b1, W2, b2, act=_gelu),
        ),
        Mistake(
            "forgot b_1 (the first layer's bias)",
            "FFN(x) = act(x W_1 + b_1) W_2 + b_2: add b_1 to x @ W1 before the activation.",
            _ffn_v(bias="b2"),
        ),
        Mistake(
            "forgot b_2 (the second layer's bias)",
            "FFN(x) = act(x W_1 + b_1) W_2 + b_2: add b_2 to h @ W2 at the end.",
            _ffn_v(bias="b1"),
        ),
        Mistake(
            "GELU's tanh approximation",
            "torch.nn.GELU() and F.gelu default to the exact x·Φ(x) (erf form); "
            "approximate='tanh' is GPT-2's faster variant and differs by up to ~1e-3.",
            lambda x, W1, b1, W2, b2, activation="relu": _ffn(
                x, W1, b1, W2, b2, act=(lambda h: _gelu(h, approximate="tanh"))
                if activation == "gelu" else _relu),
        ),
        Mistake(
            "forgot the biases",
            "x W_1 + b_1 and h W_2 + b_2: both linear maps have a bias.",
            _ffn_v(bias=False),
        ),
        # issue 32 (mutation report): a bias subtracted, in either linear map
        *(Mistake(
            "subtracted a bias instead of adding it",
            "A linear map is x W + b: FFN(x) = act(x W_1 + b_1) W_2 + b_2, both biases added "
            "(x @ W1 + b1, h @ W2 + b2), not subtracted.",
            _ffn_v(bias=which),
        ) for which in ("-b1", "-b2")),
    ),
    error_hints=(_SWAP_HINT,),
    forbidden=("linear",),
    forbidden_hint="Write the two matrix products yourself: x @ W1 + b1.",
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_feed_forward = register(_FFN)


# ====================================================================== Exercise 1.2
def _conv_cases():
    c = _ffn_case
    return (
        c("x (2, 5, 8), d_ff = 32, float64", (2, 5, 8), 32, 560),
        c("x (3, 4, 6), d_ff = 24, float32", (3, 4, 6), 24, 570, dtype=torch.float32),
        c("one token, d_model = 4, d_ff = 16", (1, 1, 4), 16, 580, hidden=True),
        c("x (2, 9, 8), d_ff = 8 (no expansion), float64", (2, 9, 8), 8, 590, hidden=True),
    )


def _reshaped(W):
    """``W`` (in, out) as the matrix a kernel ``W.reshape(out, in, 1)`` applies: the right
    shape, the numbers in ``W``'s row order (not its transpose)."""
    return W.reshape(W.shape[1], W.shape[0]).T


_RESHAPED = "conv1d kernel made with reshape instead of a transpose (its weights scrambled)"
_RESHAPED_WHY = (
    "W1 is (d_model, d_ff) and conv1d wants (d_ff, d_model, 1): W1.reshape(d_ff, d_model, 1) "
    "has that shape but keeps W1's numbers in their row order, so output channel j does not "
    "get column j of W1. Transpose instead: W1.T.unsqueeze(-1), and W2.T.unsqueeze(-1)."
)


_CONV_FORBIDDEN = ("linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "einsum",
                   "tensordot", "addmm", "baddbmm", "matrix_power", "inner", "mv")

_CONV = Check(
    **table.identity(__name__, "ffn_as_conv1d"),
    cases=_conv_cases,
    mistakes=(
        Mistake(
            "activation after the second convolution",
            "conv1 -> ReLU -> conv2, with no activation on the output.",
            lambda x, W1, b1, W2, b2: _ffn(x, W1, b1, W2, b2, where="after"),
        ),
        Mistake(
            "forgot the biases",
            "Pass bias=b1 and bias=b2 to F.conv1d.",
            lambda x, W1, b1, W2, b2: _ffn(x, W1, b1, W2, b2, bias=False),
        ),
        Mistake(
            "GELU instead of ReLU",
            "This exercise's FFN uses ReLU (it has no `activation` argument): F.relu between "
            "the two convolutions.",
            lambda x, W1, b1, W2, b2: _ffn(x, W1, b1, W2, b2, act=_gelu),
        ),
        Mistake(
            "transposed back with .T (every axis reversed)",
            "On a 3-d tensor .T (or transpose(0, 2)) reverses every axis: (B, d_model, T) "
            "becomes (T, d_model, B). Swap back only the last two: y.transpose(1, 2).",
            lambda x, W1, b1, W2, b2: _ffn(x, W1, b1, W2, b2).permute(1, 2, 0),
        ),
        # issue 32: a kernel of the right shape from reshape (both, or one of the two)
        *(Mistake(_RESHAPED, _RESHAPED_WHY,
                  lambda x, W1, b1, W2, b2, one=one, two=two: _ffn(
                      x, _reshaped(W1) if one else W1, b1, _reshaped(W2) if two else W2, b2))
          for one, two in ((True, True), (True, False), (False, True))),
    ),
    error_hints=(
        ErrorHint(
            "conv1d weight or input in the wrong layout",
            "F.conv1d wants input (B, C_in, T) — channels = features, so x.transpose(1, 2) — "
            "and weight (C_out, C_in, k): for W_1 (d_model, d_ff) that is W1.T.unsqueeze(-1), "
            "shape (d_ff, d_model, 1). Transpose the result back to (B, T, d_model).",
            lambda e: any(t in str(e) for t in ("channels", "weight of size", "Expected",
                                                "expected", "to have")),
        ),
    ),
    forbidden=_CONV_FORBIDDEN,
    forbidden_hint="Matrix products are switched off here: use F.conv1d with kernel size 1.",
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_ffn_as_conv1d = register(_CONV)


# ====================================================================== Exercise 1.3
def _count_ref(d_model, d_ff, activation):
    with torch.device("meta"):  # shapes only: no memory for a 4096-wide FFN
        ffn = _FeedForward(d_model, d_ff, activation=activation)
    return float(sum(p.numel() for p in ffn.parameters()))


def _count_cases():
    out = []
    for d, f, a, hidden in [
        (8, 32, "relu", False), (512, 2048, "relu", False), (768, 3072, "gelu", False),
        (512, 1365, "swiglu", False), (1, 4, "gelu", True), (4096, 11008, "swiglu", True),
    ]:
        out.append(Case(f"d_model={d}, d_ff={f}, {a}", (d, f, a), _count_ref(d, f, a),
                        kind="scalar", hidden=hidden))
    return tuple(out)


def _count_parts(case) -> dict:
    d, f, a = case.args
    parts = {"W1": d * f, "b1": f, "W2": f * d, "b2": d}
    return parts | ({"the gate W3": d * f, "its bias b3": f} if a == "swiglu" else {})


_COUNT = Check(
    **table.identity(__name__, "ffn_param_count"),
    probes=(_mm.count_parts(_count_parts,
                            "Count every weight matrix (d_in * d_out) and every bias (d_out) of "
                            "the FFN: W1, b1, W2, b2, and for SwiGLU the gate W3 and b3."),),
    cases=_count_cases,
    mistakes=(
        Mistake(
            "forgot the biases",
            "Each linear map also has a bias: d_ff for the expanding ones, d_model for W_2.",
            lambda d, f, a: float((3 if a == "swiglu" else 2) * d * f),
        ),
        Mistake(
            "counted SwiGLU with two matrices",
            "SwiGLU has three: W_1 and the gate W_3 (both d_model x d_ff, with biases here) "
            "and W_2 (d_ff x d_model).",
            lambda d, f, a: float(2 * d * f + f + d),
        ),
        Mistake(
            "counted only one weight matrix",
            "There are two linear maps (three for SwiGLU): W_1 (d_model x d_ff) and W_2 "
            "(d_ff x d_model), plus biases.",
            lambda d, f, a: float(d * f + f + d),
        ),
        Mistake(
            "forgot b_1 (the bias of each expanding map)",
            "W_1 (and SwiGLU's gate W_3) each have a bias of d_ff entries: "
            "d_model * d_ff + d_ff per expanding map.",
            lambda d, f, a: float((3 if a == "swiglu" else 2) * d * f + d),
        ),
        Mistake(
            "forgot b_2 (the output bias)",
            "W_2 (d_ff x d_model) has a bias of d_model entries: + d_model.",
            lambda d, f, a: float((3 if a == "swiglu" else 2) * d * f
                                  + (2 if a == "swiglu" else 1) * f),
        ),
        Mistake(
            "counted a gate W_3 for ReLU and GELU too",
            "Only SwiGLU has the gate W_3 (and its bias): ReLU and GELU have two linear maps.",
            lambda d, f, a: float(3 * d * f + 2 * f + d),
        ),
        Mistake(
            "counted SwiGLU with four matrices (W and V on top of W_1 and W_2)",
            "SwiGLU's W and V (the paper's names) *are* W_1 and the gate W_3: it has three "
            "matrices, W_1, W_3 (d_model x d_ff, each with a d_ff bias here) and W_2 "
            "(d_ff x d_model). Two expanding maps, not three, plus the output map.",
            lambda d, f, a: float((3 if a == "swiglu" else 1) * (d * f + f) + f * d + d),
        ),
        Mistake(  # issue 32
            "forgot W_3's bias (SwiGLU's gate)",
            "Here each matrix has a bias (unlike Exercise 1.4's bias-free SwiGLU): the gate "
            "W_3 adds d_model * d_ff weights and d_ff bias entries, like W_1.",
            lambda d, f, a: float((3 if a == "swiglu" else 2) * d * f + f + d),
        ),
        Mistake(
            "both biases of size d_ff",
            "b_2 belongs to the output, which has d_model features.",
            lambda d, f, a: float((3 if a == "swiglu" else 2) * d * f
                                  + (3 if a == "swiglu" else 2) * f),
        ),
        # issue 32 (mutation report): one weight matrix counted as a vector along one side
        *(Mistake(
            "a weight matrix counted by one side only (d_model or d_ff, not d_model * d_ff)",
            "A weight matrix has one entry per (input, output) pair: W_1 (and SwiGLU's W_3) "
            "has d_model * d_ff weights, W_2 d_ff * d_model. Only the biases are vectors "
            "(d_ff entries for each expanding map, d_model for W_2).",
            lambda d, f, a, w_in=w_in, w_out=w_out: float(
                (2 if a == "swiglu" else 1) * (w_in(d, f) + f) + w_out(d, f) + d),
        ) for w_in, w_out in (
            (lambda d, f: d, lambda d, f: d * f), (lambda d, f: f, lambda d, f: d * f),
            (lambda d, f: d * f, lambda d, f: f), (lambda d, f: d * f, lambda d, f: d),
        )),
    ),
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_ffn_param_count = register(_COUNT)


# ====================================================================== Exercise 1.4
def _swiglu(x, W1, W3, W2, *, gate=_silu, swap=False, after=False, linear=True):
    a, b = (x @ W3, x @ W1) if swap else (x @ W1, x @ W3)
    if not linear:  # the x W_3 branch left out: a SiLU FFN without biases
        return gate(a) @ W2
    if after:
        return gate(a * b) @ W2
    return (gate(a) * b) @ W2


def _swiglu_cases():
    cases = []
    for i, (shape, f, dt, hidden) in enumerate([
        ((2, 5, 8), 16, torch.float64, False), ((3, 6), 12, torch.float32, False),
        ((1, 1, 4), 8, torch.float64, True), ((2, 3, 4, 8), 20, torch.float64, True),
    ]):
        d, s = shape[-1], 600 + 10 * i
        x = _t_rand(s, *shape, dtype=dt)
        W1 = _t_rand(s + 1, d, f, dtype=dt, scale=1 / math.sqrt(d))
        W3 = _t_rand(s + 2, d, f, dtype=dt, scale=1 / math.sqrt(d))
        W2 = _t_rand(s + 3, f, d, dtype=dt, scale=1 / math.sqrt(f))
        cases.append(Case(f"x {shape}, d_ff = {f}, {str(dt)[6:]}", (x, W1, W3, W2),
                          _swiglu(x, W1, W3, W2), hidden=hidden))
    return tuple(cases)


_SWIGLU = Check(
    **table.identity(__name__, "swiglu_ffn"),
    cases=_swiglu_cases,
    mistakes=(
        Mistake(
            "gate on the wrong branch",
            "SwiGLU(x) = (SiLU(x W_1) ⊙ x W_3) W_2: the SiLU goes on x W_1, x W_3 is the "
            "linear branch.",
            lambda x, W1, W3, W2: _swiglu(x, W1, W3, W2, swap=True),
        ),
        Mistake(
            "sigmoid instead of SiLU (that is GLU)",
            "Swish/SiLU is z · sigmoid(z), not sigmoid(z) alone.",
            lambda x, W1, W3, W2: _swiglu(x, W1, W3, W2, gate=_sigmoid),
        ),
        Mistake(
            "SiLU applied to the product",
            "Gate first, then multiply: SiLU(x W_1) ⊙ (x W_3).",
            lambda x, W1, W3, W2: _swiglu(x, W1, W3, W2, after=True),
        ),
        Mistake(
            "left out the linear branch x W_3 (a plain SiLU FFN)",
            "SwiGLU multiplies the gate by a second, linear projection: "
            "(SiLU(x W_1) ⊙ x W_3) W_2. SiLU(x W_1) W_2 alone is an ordinary FFN.",
            lambda x, W1, W3, W2: _swiglu(x, W1, W3, W2, linear=False),
        ),
        Mistake(
            "left out the gate SiLU(x W_1) (a linear FFN)",
            "SwiGLU(x) = (SiLU(x W_1) ⊙ x W_3) W_2: the linear branch x W_3 is multiplied by "
            "the gate SiLU(x W_1). (x W_3) W_2 alone has no nonlinearity at all.",
            lambda x, W1, W3, W2: (x @ W3) @ W2,
        ),
    ),
    error_hints=(_SWAP_HINT,),
    forbidden=("linear",),
    forbidden_hint="Write the matrix products yourself.",
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_swiglu_ffn = register(_SWIGLU)


# ====================================================================== Exercises 2.1, 2.2
def _randomize(mod: nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # norms start at 1/0 in torch: make every parameter count
        for p in mod.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)


def _sublayers(seed, d, H, d_ff, norm_first, dtype=torch.float64, activation="relu",
               causal=False):
    """(torch layer, attn, ffn, norm1, norm2): the sublayers hold the torch layer's weights
    (copied through ``transformer_ref.EncoderBlock.load_from_torch``) and are builders, so a
    graded kernel gets them as plain data."""
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(d, H, d_ff, dropout=0.0, activation=activation,
                                       batch_first=True, norm_first=norm_first).to(dtype)
    _randomize(layer, seed)
    layer.train()  # dropout is 0; train mode keeps torch off its fused inference path
    blk = _EncoderBlock(d, H, d_ff, activation=activation, norm_first=norm_first).to(dtype)
    blk.load_from_torch(layer)
    return (layer, *_parts_of(blk, d, H, d_ff, activation, causal))


def _parts_of(blk, d, H, d_ff, activation, causal):
    state = {k: v.detach().clone() for k, v in blk.state_dict().items()}

    def part(prefix):
        return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}

    return (
        Sublayer("attn", "attn", {"d_model": d, "n_head": H, "causal": causal}, part("attn.")),
        Sublayer("ffn", "ffn", {"d_model": d, "d_ff": d_ff, "activation": activation},
                 part("ffn.")),
        Sublayer("norm1", "norm", {"d_model": d, "eps": float(blk.norm1.eps)}, part("norm1.")),
        Sublayer("norm2", "norm", {"d_model": d, "eps": float(blk.norm2.eps)}, part("norm2.")),
    )


def _block_cases(norm_first: bool):
    cases = []
    for i, (B, T, d, H, f, dt, causal, hidden) in enumerate([
        (2, 5, 8, 2, 32, torch.float64, False, False),
        (3, 4, 16, 4, 64, torch.float32, False, False),
        (2, 6, 8, 2, 16, torch.float64, True, False),
        (1, 1, 8, 1, 32, torch.float64, False, True),
        (2, 7, 12, 3, 48, torch.float32, True, True),
    ]):
        seed = 700 + 20 * i + (10 if norm_first else 0)
        layer, attn, ffn, n1, n2 = _sublayers(seed, d, H, f, norm_first, dt, causal=causal)
        x = _t_rand(seed + 1, B, T, d, dtype=dt)
        with torch.no_grad():
            if causal:
                m = nn.Transformer.generate_square_subsequent_mask(T, dtype=dt)
                expected = layer(x, src_mask=m, is_causal=True)
            else:
                expected = layer(x)
        label = f"x ({B}, {T}, {d}), {H} heads, d_ff={f}, {str(dt)[6:]}"
        label += ", causal attention" if causal else ""
        cases.append(Case(label, (x, attn, ffn, n1, n2), expected, hidden=hidden))
    return tuple(cases)


def _post(x, attn, ffn, n1, n2):
    x = n1(x + attn(x))
    return n2(x + ffn(x))


def _pre(x, attn, ffn, n1, n2):
    x = x + attn(n1(x))
    return x + ffn(n2(x))


def _post_norm_on_branch(x, attn, ffn, n1, n2):
    x = x + n1(attn(x))
    return x + n2(ffn(x))


def _pre_residual_from_normed(x, attn, ffn, n1, n2):
    h = n1(x)
    x = h + attn(h)
    h = n2(x)
    return h + ffn(h)


def _left_out(x, attn, ffn, n1, n2, *, pre, which):
    """The block with one sublayer's call left out (its output never added)."""
    a = (lambda h: 0 * h) if which == "attn" else attn
    f = (lambda h: 0 * h) if which == "ffn" else ffn
    if pre:
        x = x + a(n1(x))
        return x + f(n2(x))
    x = n1(x + a(x))
    return n2(x + f(x))


def _no_residual(x, attn, ffn, n1, n2, *, pre):
    if pre:
        return ffn(n2(attn(n1(x))))
    return n2(ffn(n1(attn(x))))


def _ffn_on_input(x, attn, ffn, n1, n2, *, pre):
    if pre:
        h = x + attn(n1(x))
        return h + ffn(n2(x))
    h = n1(x + attn(x))
    return n2(h + ffn(x))


def _subtracted(x, attn, ffn, n1, n2, *, pre, which):
    """The block with one sublayer's output subtracted from the residual stream."""
    a = (lambda h: -attn(h)) if which == "attn" else attn
    f = (lambda h: -ffn(h)) if which == "ffn" else ffn
    return (_pre if pre else _post)(x, a, f, n1, n2)


def _subtracted_mistakes(pre: bool):
    first = "x = x + attn(norm1(x))" if pre else "x = norm1(x + attn(x))"
    second = "x + ffn(norm2(x))" if pre else "norm2(x + ffn(x))"
    return tuple(
        Mistake(  # issue 32 (mutation report)
            "sublayer output subtracted from the residual (x - sublayer)",
            f"A residual connection *adds* the sublayer's output to its input: {first}, then "
            f"{second}; x - attn(...) or x - ffn(...) is another function.",
            lambda x, attn, ffn, n1, n2, which=which: _subtracted(
                x, attn, ffn, n1, n2, pre=pre, which=which),
        )
        for which in ("attn", "ffn")
    )


def _swapped_norms(fn):
    return lambda x, attn, ffn, n1, n2: fn(x, attn, ffn, n2, n1)


def _left_out_mistake(which: str, *, pre: bool) -> Mistake:
    """Either block with sublayer ``which`` ("attn" / "ffn") never added to the stream."""
    name, line = {"attn": ("attention", "first"), "ffn": ("feed-forward", "second")}[which]
    return Mistake(
        f"{name} sublayer left out",
        "The block has two sublayers: attention first, then the FFN, each added to the "
        f"residual stream. {which}(...) is never added here: check the {line} line.",
        lambda x, attn, ffn, n1, n2: _left_out(x, attn, ffn, n1, n2, pre=pre, which=which),
    )


# what both blocks' checks forbid and say about it
_BLOCK_RULES = dict(
    forbidden=("layer_norm", "_transformer_encoder_layer_fwd", "multi_head_attention_forward"),
    forbidden_hint="Combine the sublayers you are given (attn, ffn, norm1, norm2).",
    reference_off=True,  # transformer_ref is in the kernel for the demos
)

_POST = Check(
    **table.identity(__name__, "post_ln_block"),
    cases=lambda: _block_cases(norm_first=False),
    mistakes=(
        Mistake(
            "norm inside the residual branch (that is pre-LN)",
            "Post-LN (the tutorial [S2]) normalises the *sum*: x = norm1(x + attn(x)), then "
            "norm2(x + ffn(x)). Normalising the branch input, x + attn(norm1(x)), is pre-LN.",
            _pre,
        ),
        Mistake(
            "norm on the sublayer output only (norm placed inside the residual)",
            "LayerNorm(x + Sublayer(x)): add first, then normalise the sum; x + norm(attn(x)) "
            "leaves the residual stream unnormalised.",
            _post_norm_on_branch,
        ),
        Mistake(
            "skipped the residual connection",
            "Each sublayer is wrapped as x + Sublayer(x) before the norm.",
            lambda x, attn, ffn, n1, n2: _no_residual(x, attn, ffn, n1, n2, pre=False),
        ),
        _left_out_mistake("attn", pre=False),
        Mistake(
            "attention sublayer and norm1 left out (only the FFN line)",
            "The post-LN block has two add & norm steps: x = norm1(x + attn(x)) first, then "
            "norm2(x + ffn(x)). Only the second is here: write the first line too.",
            lambda x, attn, ffn, n1, n2: n2(x + ffn(x)),
        ),
        _left_out_mistake("ffn", pre=False),
        Mistake(
            "FFN applied to the block input instead of the attention sublayer's output",
            "The sublayers run in sequence: the FFN sees x after the first add & norm.",
            lambda x, attn, ffn, n1, n2: _ffn_on_input(x, attn, ffn, n1, n2, pre=False),
        ),
        Mistake(
            "norm1 and norm2 swapped",
            "norm1 belongs to the attention sublayer, norm2 to the FFN (as in "
            "torch.nn.TransformerEncoderLayer).",
            _swapped_norms(_post),
        ),
        *_subtracted_mistakes(pre=False),
    ),
    **_BLOCK_RULES,
)
check_post_ln_block = register(_POST)

_PRE = Check(
    **table.identity(__name__, "pre_ln_block"),
    cases=lambda: _block_cases(norm_first=True),
    mistakes=(
        Mistake(
            "residual added after the norm (that is post-LN)",
            "Pre-LN ([S1]'s R(MSA ∘ LN)) normalises only the branch "
            "input: "
            "x = x + attn(norm1(x)); norm1(x + attn(x)) is post-LN.",
            _post,
        ),
        Mistake(
            "residual taken from the normalised input",
            "R(f)(x) = x + f(x) adds the *un-normalised* x: h = norm1(x); x = x + attn(h), "
            "not h + attn(h). Otherwise the residual stream is normalised at every block and "
            "pre-LN's clean identity path is lost.",
            _pre_residual_from_normed,
        ),
        Mistake(
            "norm on the sublayer output only (norm placed inside the residual the wrong way)",
            "In pre-LN the norm comes *before* the sublayer: x + attn(norm1(x)), not "
            "x + norm1(attn(x)).",
            _post_norm_on_branch,
        ),
        Mistake(
            "skipped the residual connection",
            "[S1]'s R(f)(x) = x + f(x): add the block input back "
            "after each sublayer.",
            lambda x, attn, ffn, n1, n2: _no_residual(x, attn, ffn, n1, n2, pre=True),
        ),
        _left_out_mistake("attn", pre=True),
        _left_out_mistake("ffn", pre=True),
        Mistake(
            "FFN applied to the block input instead of the attention sublayer's output",
            "The lecture notes [S1] compose: R(Φ ∘ LN) ∘ R(MSA ∘ LN), so the FFN's "
            "input is x after the "
            "attention residual.",
            lambda x, attn, ffn, n1, n2: _ffn_on_input(x, attn, ffn, n1, n2, pre=True),
        ),
        Mistake(
            "norm1 and norm2 swapped",
            "norm1 belongs to the attention sublayer, norm2 to the FFN.",
            _swapped_norms(_pre),
        ),
        *_subtracted_mistakes(pre=True),
    ),
    **_BLOCK_RULES,
)
check_pre_ln_block = register(_PRE)


# ====================================================================== Exercise 3.1
def _stack(seed, depth, d, H, f, norm_first):
    """``depth`` encoder blocks: ``transformer_ref``'s initialisation, as builders (trainable
    modules with the same parameters) that a graded kernel gets as plain data."""
    torch.manual_seed(seed)
    ref = [_EncoderBlock(d, H, f, norm_first=norm_first).double() for _ in range(depth)]
    config = {"d_model": d, "n_head": H, "d_ff": f, "activation": "relu",
              "norm_first": norm_first}
    return ref, [EncoderBlock(config, {k: v.detach().clone() for k, v in b.state_dict().items()})
                 for b in ref]


def _grad_norms(blocks, x, target, *, reduce="global", params="all", squared_error=True,
                with_target=True):
    with torch.enable_grad():
        for b in blocks:
            b.zero_grad(set_to_none=True)
        h = x
        for b in blocks:
            h = b(h)
        err = h - target if with_target else h
        (err.pow(2) if squared_error else err).mean().backward()
        out = []
        for b in blocks:
            ps = [p for n, p in b.named_parameters()
                  if params == "all" or (p.dim() == 2)]
            sq = [p.grad.pow(2).mean() if reduce == "mean" else p.grad.pow(2).sum()
                  for p in ps]
            if reduce in ("global", "mean"):
                out.append(torch.stack(sq).sum().sqrt())
            elif reduce == "squared":
                out.append(torch.stack(sq).sum())
            else:  # sum of per-tensor norms
                out.append(torch.stack([s.sqrt() for s in sq]).sum())
        return torch.stack(out).detach()


def _gn_call(seed, depth, d, H, f, norm_first, B, T):
    def make():  # fresh blocks (no gradients yet) for every call
        return (_stack(seed, depth, d, H, f, norm_first)[1], _t_rand(seed + 1, B, T, d),
                _t_rand(seed + 2, B, T, d))
    return make


def _gn_cases():
    cases = []
    for i, (depth, d, H, f, nf, B, T, hidden) in enumerate([
        (3, 8, 2, 32, False, 2, 4, False),
        (3, 8, 2, 32, True, 2, 4, False),
        (1, 4, 1, 16, True, 1, 3, True),
        (5, 8, 2, 16, False, 2, 5, True),
    ]):
        seed = 800 + 10 * i
        make = _gn_call(seed, depth, d, H, f, nf, B, T)
        _, x, target = make()
        blocks = _stack(seed, depth, d, H, f, nf)[0]  # the expected value: transformer_ref's
        label = f"{depth} {'pre' if nf else 'post'}-LN blocks, d_model={d}, x ({B}, {T}, {d})"
        cases.append(Case(label, (f"[{depth} EncoderBlocks]", x, target),
                          _grad_norms(blocks, x, target),
                          call=make, hidden=hidden))
    return tuple(cases)


def _gn_mistake(**kw):
    return lambda blocks, x, target: _grad_norms(blocks, x, target, **kw)


_GRADNORM = Check(
    **table.identity(__name__, "grad_norm_per_layer"),
    cases=_gn_cases,
    mistakes=(
        Mistake(
            "returned the squared norm",
            "The gradient norm of a block is sqrt(sum over its parameters of sum(grad²)).",
            _gn_mistake(reduce="squared"),
        ),
        Mistake(
            "added up the norms of the separate parameters",
            "Treat all of a block's parameters as one long vector: sqrt(sum of every "
            "squared gradient entry), not the sum of each tensor's norm.",
            _gn_mistake(reduce="sum"),
        ),
        Mistake(
            "mean of the squared gradients instead of their sum",
            "The norm is sqrt(sum of every squared gradient entry): `.sum()` each tensor's "
            "squares, not `.mean()` (that divides each tensor by its size).",
            _gn_mistake(reduce="mean"),
        ),
        Mistake(
            "only the weight matrices",
            "Include every parameter of the block (biases and LayerNorm gains too): "
            "block.parameters().",
            _gn_mistake(params="matrices"),
        ),
        Mistake(
            "the error not squared in the loss",
            "The loss is the mean *squared* error: ((h - target) ** 2).mean(). "
            "(h - target).mean() has other gradients (the same for every output entry).",
            _gn_mistake(squared_error=False),
        ),
        Mistake(
            "the target left out of the loss",
            "The loss compares the blocks' output with the target: ((h - target) ** 2).mean(). "
            "(h ** 2).mean() pulls every output towards 0 and has other gradients.",
            _gn_mistake(with_target=False),
        ),
    ),
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_grad_norm_per_layer = register(_GRADNORM)
