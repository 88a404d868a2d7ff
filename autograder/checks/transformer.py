"""Checks for notebook 06 (the full Transformer), each with its catalogue of known mistakes.

References: ``transformer_ref`` (sinusoidal table, RoPE, multi-head attention, GPT with KV cache)
and ``torch.nn.TransformerDecoderLayer`` for the decoder block; built here, on first use (in
a notebook at import). The objects the student's functions get (the ``f`` of Exercise 1.1,
the decoder's sublayers, the GPT and its KV cache) are ``_builders`` objects holding the same
weights: plain data to a graded kernel, and no ``transformer_ref`` (nor a model's own forward
pass) inside them.

>>> check_equivariance_gap(lambda f, x, perm: (f(x[:, perm]) - f(x)[:, perm]).abs().max().item())
... # doctest: +ELLIPSIS
✔ Exercise 1.1 `equivariance_gap`: all ... cases match the reference.
"""

from __future__ import annotations

import torch
import torch.nn as nn

import transformer_ref
from autograder.checks import _metamorphic as _mm
from autograder.checks import table
from autograder.checks._builders import GPT, KVCache, Sublayer
from autograder.checks._cases import t_rand as _t_rand
from autograder.checks._core import Case, Check, ErrorHint, Mistake, register

# trusted references: bound here, at import, before any student cell runs
from transformer_ref import DecoderBlock as _DecoderBlock
from transformer_ref import GPTConfig as _GPTConfig
from transformer_ref import MultiHeadAttention as _MHA
from transformer_ref import RotaryEmbedding as _Rotary
from transformer_ref import sinusoidal_encoding as _sinusoidal

__all__ = [
    "check_equivariance_gap",
    "check_sinusoidal_encoding",
    "check_apply_rope",
    "check_decoder_block",
    "check_gpt_logits",
    "check_incremental_logits",
]


class _Model(transformer_ref.GPT):
    """transformer_ref.GPT with a one-line repr for check messages."""

    def __repr__(self) -> str:
        c = self.config
        return f"GPT(vocab_size={c.vocab_size}, n_layer={c.n_layer}, n_head={c.n_head}, " \
               f"d_model={c.d_model}, block_size={c.block_size})"


def _randomize(mod: nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in mod.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)


# ====================================================================== Exercise 1.1
def _gap(f, x, perm, *, inverse=False, axis=1, reduce="max", combine="sub"):
    with torch.no_grad():
        if axis == 1:
            y_of_perm = f(x[:, perm])
            out_perm = f(x)[:, torch.argsort(perm) if inverse else perm]
        else:
            y_of_perm = f(x[perm])
            out_perm = f(x)[perm]
        d = {"sub": y_of_perm - out_perm, "add": y_of_perm + out_perm,
             "first": y_of_perm}[combine].abs()
        return float({"max": d.max, "mean": d.mean, "min": d.min}[reduce]())


def _gap_functions():
    """(reference f, the same f as a builder) pairs: the expected gap is measured on the
    first (``transformer_ref``), the student gets the second (plain data to a graded kernel)."""
    torch.manual_seed(900)
    mha = _MHA(8, 2).double()
    _randomize(mha, 901)
    mha.requires_grad_(False)
    pe = _sinusoidal(16, 8).double()
    state = {k: v.detach().clone() for k, v in mha.state_dict().items()}
    cfg = {"d_model": 8, "n_head": 2}

    def attention(x):
        return mha(x)

    def causal_attention(x):
        return mha(x, is_causal=True)

    def attention_with_positions(x):
        return mha(x + pe[: x.shape[1]])

    def scale_tokens(x):
        return x * torch.arange(1, x.shape[1] + 1, dtype=x.dtype)[:, None]

    return (
        (attention, Sublayer("self_attention", "attn", {**cfg, "causal": False}, state)),
        (causal_attention,
         Sublayer("causal_self_attention", "attn", {**cfg, "causal": True}, state)),
        (attention_with_positions, Sublayer("attention_on_x_plus_positions", "attn",
                                            {**cfg, "causal": False},
                                            {**state, "positions": pe.clone()})),
        (scale_tokens, Sublayer("scale_token_t_by_t", "scale_tokens", {}, {})),
    )


def _gap_cases():
    fns = _gap_functions()
    cases = []
    specs = [
        (fns[0], "self-attention, no positions", (2, 5, 8), False),
        (fns[1], "causal self-attention", (2, 5, 8), False),
        (fns[2], "self-attention on x + sinusoidal positions", (2, 6, 8), False),
        (fns[3], "x_t scaled by t (a position-dependent map)", (1, 4, 8), True),
        (fns[0], "self-attention, batch 1, 7 tokens", (1, 7, 8), True),
    ]
    for i, ((ref, f), what, shape, hidden) in enumerate(specs):
        x = _t_rand(910 + i, *shape)
        perm = torch.randperm(shape[1], generator=torch.Generator().manual_seed(920 + i))
        if torch.equal(perm, torch.arange(shape[1])):
            perm = perm.flip(0)
        cases.append(Case(f"{what}, x {shape}, perm {perm.tolist()}", (f, x, perm),
                          _gap(ref, x, perm), kind="scalar", atol=1e-9, rtol=1e-6,
                          hidden=hidden))
    return tuple(cases)


_GAP = Check(
    **table.identity(__name__, "equivariance_gap"),
    cases=_gap_cases,
    mistakes=(
        Mistake(
            "permuted the output with the inverse permutation",
            "Equivariance says f(x[:, perm]) == f(x)[:, perm]: index both with the same perm.",
            lambda f, x, perm: _gap(f, x, perm, inverse=True),
        ),
        Mistake(
            "returned the mean difference",
            "Return the largest absolute difference, (a - b).abs().max(), as a float.",
            lambda f, x, perm: _gap(f, x, perm, reduce="mean"),
        ),
        Mistake(
            "returned the smallest difference (min instead of max)",
            "The gap is the *largest* absolute difference, (a - b).abs().max(): one entry "
            "that moves is enough to break equivariance.",
            lambda f, x, perm: _gap(f, x, perm, reduce="min"),
        ),
        Mistake(
            "the two outputs added instead of subtracted",
            "Measure how far apart they are: (f(x[:, perm]) - f(x)[:, perm]).abs().max().",
            lambda f, x, perm: _gap(f, x, perm, combine="add"),
        ),
        Mistake(
            "returned max |f(x[:, perm])| (the difference left out)",
            "Compare the two outputs: subtract f(x)[:, perm] from f(x[:, perm]) before the "
            "absolute value and the max.",
            lambda f, x, perm: _gap(f, x, perm, combine="first"),
        ),
    ),
    error_hints=(
        ErrorHint(
            "permuted the batch axis instead of the tokens",
            "x is (B, T, d) and perm permutes the T tokens: index axis 1, x[:, perm] "
            "(x[perm] indexes the batch).",
            lambda e: "out of bounds for dimension 0" in str(e),
        ),
    ),
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_equivariance_gap = register(_GAP)


# ====================================================================== Exercise 2.1
def _sin_variant(max_len, d_model, base=10000.0, *, layout="interleaved", swap=False,
                 exponent="2i", start=0, invert=False, dtype=torch.float64, per_d=True,
                 missing="", freq_dtype=None, cos_on_even=False):
    pos = torch.arange(start, start + max_len, dtype=dtype)[:, None]
    i = torch.arange((d_model + 1) // 2, dtype=freq_dtype or dtype)
    two_i = {"2i": 2 * i, "i": i}[exponent] if exponent != "col" else None
    if exponent == "col":
        j = torch.arange(d_model, dtype=torch.float64)
        freq = base ** (j / d_model)
        angle = pos * freq if invert else pos / freq  # (T, d)
        pe = torch.where(j.long() % 2 == 0, torch.sin(angle), torch.cos(angle))
        return pe.to(torch.float32)
    freq = base ** (two_i / d_model) if per_d else base**two_i
    angle = pos * freq if invert else pos / freq  # (T, ceil(d/2))
    s, c = torch.sin(angle), torch.cos(angle)
    if missing:  # one half of the columns never filled: left at 0
        s, c = (0 * s, c) if missing == "sin" else (s, 0 * c)
    if swap:
        s, c = c, s
    pe = torch.zeros(max_len, d_model, dtype=dtype)
    if cos_on_even:  # both lines write pe[:, 0::2]: the cosines overwrite the sines
        pe[:, 0::2] = c
        return pe.to(torch.float32)
    if layout == "interleaved":
        pe[:, 0::2] = s
        pe[:, 1::2] = c[:, : d_model // 2]
    else:  # [sin | cos] halves
        h = (d_model + 1) // 2
        pe[:, :h] = s
        pe[:, h:] = c[:, : d_model - h]
    return pe.to(torch.float32)


def _sv(**kw):
    return lambda max_len, d_model: _sin_variant(max_len, d_model, **kw)


def _sin_cases():
    out = []
    # the goal asks for float64 angles because "positions up to thousands lose digits in
    # float32 angles": a visible case that far out (issue 32)
    for (T, d, hidden) in [(6, 8, False), (50, 16, False), (10, 64, False),
                           (4096, 16, False), (1, 4, True), (128, 32, True), (7, 2, True)]:
        out.append(Case(f"max_len={T}, d_model={d}", (T, d),
                        _sinusoidal(T, d).to(torch.float32), hidden=hidden))
    return tuple(out)


_SIN = Check(
    **table.identity(__name__, "sinusoidal_encoding"),
    probes=(_mm.keeps(lambda case, out: _pairs_of_length(out, None),
                      "(sin, cos) pairs: features 2i and 2i+1 of a row have squares summing to 1",
                      "Feature 2i is sin(pos * w_i) and feature 2i+1 is cos(pos * w_i), with the "
                      "same angle in both."),),
    cases=_sin_cases,
    mistakes=(
        Mistake(
            "sin and cos concatenated instead of interleaved",
            "PE[pos, 2i] = sin(...) and PE[pos, 2i+1] = cos(...): even columns sin, odd columns "
            "cos (pe[:, 0::2] and pe[:, 1::2]), not all sines then all cosines.",
            _sv(layout="halves"),
        ),
        Mistake(
            "sin and cos swapped",
            "Even columns (2i) hold the sine, odd columns (2i+1) the cosine.",
            _sv(swap=True),
        ),
        Mistake(
            "frequency exponent i / d_model instead of 2i / d_model",
            "Pair i (columns 2i and 2i+1) uses the wavelength 10000^(2i/d_model): with "
            "torch.arange(0, d_model, 2) as 2i, divide it by d_model, do not halve it again.",
            _sv(exponent="i"),
        ),
        Mistake(
            "frequency exponent from the column index (odd columns off)",
            "Both columns of a pair share one frequency: column 2i+1 uses 10000^(2i/d_model), "
            "not 10000^((2i+1)/d_model).",
            _sv(exponent="col"),
        ),
        Mistake(
            "multiplied by 10000^(2i/d) instead of dividing",
            "The angle is pos / 10000^(2i/d_model): wavelengths grow from 2π to 10000·2π.",
            _sv(invert=True),
        ),
        Mistake(
            "angles computed in float32",
            "Positions in the thousands divided in float32 lose digits (sin and cos are off "
            "by about 1e-4 at position 4000): build pos and 2i with dtype=torch.float64 and "
            "convert the finished table with .to(torch.float32).",
            _sv(dtype=torch.float32),
        ),
        Mistake(
            "frequencies computed in float32 (2i without dtype=torch.float64)",
            "torch.arange(0, d_model, 2) without a dtype gives integers, and 2i / d_model is "
            "then float32: the frequencies 10000^(2i/d_model) carry float32 rounding, which "
            "positions in the thousands multiply (about 1e-4 off at position 4000). Give "
            "2i dtype=torch.float64 too, like pos.",
            _sv(freq_dtype=torch.float32),
        ),
        Mistake(
            "exponent 2i not divided by d_model",
            "The wavelength of pair i is 10000^(2i / d_model): the exponent is a fraction "
            "between 0 and 1, 10000.0 ** (two_i / d_model), not 10000 ** two_i.",
            _sv(per_d=False),
        ),
        *(
            Mistake(
                f"{f} columns never filled (left at 0)",
                "Fill both halves of the table: pe[:, 0::2] = torch.sin(angle) (even columns) "
                "and pe[:, 1::2] = torch.cos(angle) (odd columns).",
                _sv(missing=f),
            )
            for f in ("sin", "cos")
        ),
        Mistake(
            "cosines written into the even columns too (pe[:, 0::2] twice)",
            "The cosines go into the odd columns, pe[:, 1::2] = torch.cos(angle): written to "
            "pe[:, 0::2] they overwrite the sines and the odd columns stay 0.",
            _sv(cos_on_even=True),
        ),
        Mistake(
            "positions start at 1",
            "Row pos is position pos, starting at 0: PE[0] = [0, 1, 0, 1, ...].",
            _sv(start=1),
        ),
    ),
    error_hints=(
        ErrorHint(
            "shape mismatch when filling the even/odd columns",
            "pe[:, 0::2] has ceil(d/2) columns and pe[:, 1::2] floor(d/2): compute the angles "
            "for 2i in torch.arange(0, d_model, 2), shape (max_len, d_model // 2) for even d.",
            lambda e: any(t in str(e) for t in ("shape mismatch", "must match the size",
                                                "must match the existing size")),
        ),
    ),
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_sinusoidal_encoding = register(_SIN)


# ====================================================================== Exercise 2.2
def _ref_rope(x, positions, base=10000.0):
    """transformer_ref's RoPE (interleaved pairs) of ``x (..., T, d_k)`` at ``positions (T,)``."""
    p = torch.as_tensor(positions)
    rope = _Rotary(x.shape[-1], int(p.max()) + 1, base=base)
    return rope(x, p)


def _rope_variant(x, positions, base=10000.0, *, pairing="interleaved", exponent="2i",
                  sign=1.0, degrees=False, pos="given", angle_dtype=torch.float64,
                  write="interleaved", use_base=True, invert=False, signs="-+",
                  theta_dtype=None, drop="", read="", drop_term=""):
    d_k = x.shape[-1]
    b = base if use_base else 10000.0
    two_i = torch.arange(1 if exponent == "odd" else 0, d_k, 2,
                         dtype=theta_dtype or angle_dtype)
    e = {"2i": two_i, "i": two_i / 2, "odd": two_i, "raw": two_i * d_k}[exponent]
    theta = b ** (e / d_k) if invert else b ** (-e / d_k)  # (d_k/2,)
    p = torch.arange(x.shape[-2]) if pos == "arange" else torch.as_tensor(positions)
    angle = p.to(angle_dtype)[:, None] * theta  # (T, d_k/2)
    if pos == "none":  # every row turned as if at position 1
        angle = theta.expand_as(angle)
    elif pos == "no_theta":  # every pair turned by m radians
        angle = p.to(angle_dtype)[:, None].expand_as(angle)
    if degrees:
        angle = angle * (torch.pi / 180)
    cos, sin = torch.cos(angle).to(x.dtype), (sign * torch.sin(angle)).to(x.dtype)
    if pairing == "interleaved":
        xa, xb = x[..., 0::2], x[..., 1::2]
        if read == "odd":  # x[..., 1::2] written twice
            xa = xb
        elif read == "even":  # x[..., 0::2] written twice
            xb = xa
    else:  # rotate_half: pairs (i, i + d_k/2)
        xa, xb = x.chunk(2, dim=-1)
    one = torch.ones((), dtype=x.dtype)
    c_a, s_b, s_a, c_b = (one if drop == t else f for t, f in
                          (("a cos", cos), ("b sin", sin), ("a sin", sin), ("b cos", cos)))
    s1, s2 = (-1 if signs[0] == "-" else 1), (-1 if signs[1] == "-" else 1)
    ya, yb = xa * c_a + s1 * xb * s_b, xa * s_a + s2 * xb * c_b
    if signs == "neg-first":
        ya = xb * sin - xa * cos
    if drop_term == "b sin":
        ya = xa * cos
    elif drop_term == "b cos":
        yb = xa * sin
    if write == "stacked":
        return torch.stack((ya, yb), dim=-1)
    if write == "axis0":  # torch.stack's default dim=0, then flatten(-2)
        return torch.stack((ya, yb)).flatten(-2)
    if write == "interleaved" and pairing == "interleaved":
        return torch.stack((ya, yb), dim=-1).flatten(-2)
    return torch.cat((ya, yb), dim=-1)


def _rv(**kw):
    return lambda x, positions, base=10000.0: _rope_variant(x, positions, base, **kw)


def _rope_cases():
    out = []
    specs = [
        # (label, x shape, dtype, positions, base, hidden)
        ("one head, 4 positions", (1, 1, 4, 4), torch.float64, range(4), None, False),
        ("(B, H, T, d_k) = (2, 3, 5, 8), float32", (2, 3, 5, 8), torch.float32, range(5),
         None, False),
        ("3 new rows after 7 cached (positions 7, 8, 9)", (1, 2, 3, 8), torch.float64,
         range(7, 10), None, False),
        ("positions far out (1000, 2500, 4095)", (1, 1, 3, 16), torch.float64,
         (1000, 2500, 4095), None, False),
        ("base 100 (LLaMA 3 uses 500000)", (1, 2, 3, 8), torch.float64, range(2, 5), 100.0,
         False),
        ("one row at position 11, d_k 2", (2, 1, 1, 2), torch.float64, (11,), None, True),
        ("d_k 32, 6 positions, base 500", (1, 2, 6, 32), torch.float64, range(6), 500.0,
         True),
        ("(T, d_k) without batch and head axes, positions 3 .. 8", (6, 12), torch.float32,
         range(3, 9), None, True),
        ("keys of a cache: positions 20 .. 29, d_k 64", (1, 1, 10, 64), torch.float64,
         range(20, 30), None, True),
    ]
    for i, (what, shape, dt, positions, base, hidden) in enumerate(specs):
        x = _t_rand(940 + i, *shape, dtype=dt)
        p = torch.tensor(list(positions))
        kwargs = {} if base is None else {"base": base}
        out.append(Case(f"{what}: x {shape}, positions {p.tolist()}"
                        + ("" if base is None else f", base={base:g}"),
                        (x, p), _ref_rope(x, p, **kwargs), kwargs=kwargs, hidden=hidden))
    return tuple(out)


def _pairs_of_length(out, x) -> bool:
    """Whether each pair (2i, 2i+1) of ``out`` has the length of the same pair of ``x`` (of 1
    when ``x`` is None)."""
    if type(out) is not torch.Tensor or out.dim() == 0 or out.shape[-1] % 2 or not (
            out.is_floating_point()) or (x is not None and out.shape != x.shape):
        return False
    with torch.no_grad():
        def lengths(t):
            return t.detach().double().unflatten(-1, (-1, 2)).norm(dim=-1)
        want = torch.ones_like(lengths(out)) if x is None else lengths(x)
        return bool(torch.allclose(lengths(out), want, rtol=1e-4, atol=1e-6))


def _pair_lengths_kept(case, out) -> bool:
    """Whether ``out`` has the shape of x and each pair (2i, 2i+1) of it keeps its length."""
    return _pairs_of_length(out, case.args[0])


_ROPE = Check(
    **table.identity(__name__, "apply_rope"),
    cases=_rope_cases,
    probes=(
        _mm.ignored(1, "`positions`", lambda p: p + 1, _ref_rope,
                    "Rotate row t by the angles of its own position positions[t] (a cache's "
                    "new rows start after the cached ones), not by its index.",
                    how="every position + 1"),
        _mm.answer_for(lambda case: ((case.args[0], -case.args[1]), dict(case.kwargs)),
                       "the negated positions", _ref_rope,
                       "Each pair turns by +angle: (a cos - b sin, a sin + b cos); a sign on "
                       "the sines swapped turns it the other way."),
        _mm.keeps(_pair_lengths_kept, "the length of each feature pair (2i, 2i+1)",
                  "RoPE rotates each pair: (a cos - b sin, a sin + b cos) with a = x[..., 0::2], "
                  "b = x[..., 1::2], written back in place of the same two features."),
        _mm.ignored("base", "`base`", lambda b: b / 100, _ref_rope,
                    "The frequencies are base ** (-2i / d_k) with the given base.",
                    how="base / 100", default=10000.0),
    ),
    mistakes=(
        Mistake(
            "half-split pairing (rotate_half) instead of interleaved pairs",
            "This course (and transformer_ref) pairs neighbouring features: pair i is "
            "(x[..., 2i], x[..., 2i+1]), i.e. x[..., 0::2] and x[..., 1::2]. GPT-NeoX and "
            "Hugging Face's LLaMA pair feature i with i + d_k/2 (x.chunk(2, -1)): the same "
            "idea, another convention, other numbers.",
            _rv(pairing="half"),
        ),
        Mistake(
            "rotated pairs written back as halves (torch.cat) instead of interleaved",
            "The pairs were read as x[..., 0::2], x[..., 1::2]: put the rotated values back in "
            "the same places, torch.stack((ya, yb), dim=-1).flatten(-2), not "
            "torch.cat((ya, yb), -1), which moves every feature.",
            _rv(write="halves"),
        ),
        Mistake(
            "theta exponent i / d_k instead of 2i / d_k",
            "theta_i = base^(-2i/d_k) for pair i = 0 .. d_k/2 - 1: with "
            "torch.arange(0, d_k, 2) as 2i, divide it by d_k, do not halve it again.",
            _rv(exponent="i"),
        ),
        Mistake(
            "theta = base^(+2i/d_k) (frequencies grow instead of shrink)",
            "theta_i = base^(-2i/d_k): pair 0 turns fastest (1 radian per position), the "
            "last pairs slowest. Divide by base^(2i/d_k), do not multiply.",
            _rv(invert=True),
        ),
        Mistake(
            "theta exponent not divided by d_k",
            "theta_i = base^(-2i/d_k): the exponent is a fraction between 0 and 1, "
            "-torch.arange(0, d_k, 2) / d_k, not -2i itself (which leaves every pair but the "
            "first standing still).",
            _rv(exponent="raw"),
        ),
        Mistake(
            "theta exponent from the odd feature index (2i+1)/d_k",
            "Pair i is features (2i, 2i+1) and turns at theta_i = base^(-2i/d_k): the even "
            "index, torch.arange(0, d_k, 2), not torch.arange(1, d_k, 2).",
            _rv(exponent="odd"),
        ),
        Mistake(
            "theta left out: every pair turns by m radians",
            "The angle of pair i at position m is m * theta_i, with theta_i = "
            "base^(-2i/d_k): multiply the positions by theta (an outer product, shape "
            "(T, d_k/2)).",
            _rv(pos="no_theta"),
        ),
        Mistake(
            "positions left out: every row turned as if at position 1",
            "The angle of row t is positions[t] * theta_i: multiply theta by the positions "
            "(positions[:, None] * theta, shape (T, d_k/2)).",
            _rv(pos="none"),
        ),
        Mistake(
            "not a rotation: a cos + b sin in the first component",
            "The rotated pair is (a cos - b sin, a sin + b cos): the first component "
            "subtracts b sin. With + the matrix is no rotation (lengths change).",
            _rv(signs="++"),
        ),
        Mistake(
            "not a rotation: a sin - b cos in the second component",
            "The rotated pair is (a cos - b sin, a sin + b cos): the second component adds "
            "b cos. With - the matrix is a reflection, not a rotation.",
            _rv(signs="--"),
        ),
        Mistake(
            "first component negated (b sin - a cos)",
            "The rotated pair is (a cos - b sin, a sin + b cos): the first component is "
            "a cos - b sin, the operands of the subtraction in this order.",
            _rv(signs="neg-first"),
        ),
        Mistake(
            "rotated pairs stacked but not flattened back to (..., T, d_k)",
            "torch.stack((a2, b2), dim=-1) has shape (..., T, d_k/2, 2): .flatten(-2) merges "
            "the last two axes back into d_k features in the order 2i, 2i+1.",
            _rv(write="stacked"),
        ),
        *(
            Mistake(
                f"the {term} term left out",
                "The rotated pair is (a cos - b sin, a sin + b cos): "
                f"{'a cos - b sin' if term == 'b sin' else 'a sin + b cos'}, not "
                f"{'a cos' if term == 'b sin' else 'a sin'} alone.",
                _rv(drop_term=term),
            )
            for term in ("b sin", "b cos")
        ),
        *(
            Mistake(
                f"{term.split()[1]} left out of the {term} term",
                "The rotated pair is (a cos - b sin, a sin + b cos): each of the four terms "
                f"multiplies a feature by cos or sin; here {term} became just "
                f"{term.split()[0]}.",
                _rv(drop=term),
            )
            for term in ("a cos", "b sin", "a sin", "b cos")
        ),
        Mistake(
            "both features of a pair read from the odd columns (x[..., 1::2] twice)",
            "Pair i is (x[..., 2i], x[..., 2i+1]): a = x[..., 0::2] (even features), "
            "b = x[..., 1::2] (odd features).",
            _rv(read="odd"),
        ),
        Mistake(
            "both features of a pair read from the even columns (x[..., 0::2] twice)",
            "Pair i is (x[..., 2i], x[..., 2i+1]): a = x[..., 0::2] (even features), "
            "b = x[..., 1::2] (odd features).",
            _rv(read="even"),
        ),
        Mistake(
            "rotated pairs stacked on axis 0 (torch.stack without dim=-1)",
            "torch.stack's default is dim=0, a new first axis: stack the rotated halves on a "
            "new *last* axis, torch.stack((a2, b2), dim=-1), then .flatten(-2).",
            _rv(write="axis0"),
        ),
        Mistake(
            "angles taken as degrees",
            "The angle m * theta_i is in radians, as torch.cos and torch.sin expect: do not "
            "convert it with pi / 180 (or torch.deg2rad).",
            _rv(degrees=True),
        ),
        Mistake(
            "rotated the wrong way (sign of sin flipped)",
            "Pair (a, b) turns by +m theta_i: (a cos - b sin, a sin + b cos). With the signs "
            "of the sines swapped every vector turns backwards.",
            _rv(sign=-1.0),
        ),
        Mistake(
            "positions ignored: rows rotated by 0 .. T-1 (the KV cache offset lost)",
            "Rotate row t by positions[t], the absolute position it gets: with a KV cache "
            "the new rows sit at start, start + 1, ..., not at 0 .. T-1.",
            _rv(pos="arange"),
        ),
        Mistake(
            "angles computed in float32",
            "Positions in the thousands times theta in float32 lose digits (angles off by "
            "about 1e-4 at position 4000): build theta and the positions with "
            "dtype=torch.float64 and cast cos and sin to x.dtype at the end.",
            _rv(angle_dtype=torch.float32),
        ),
        Mistake(
            "theta computed in float32 (2i without dtype=torch.float64)",
            "torch.arange(0, d_k, 2) without a dtype gives integers, and -2i / d_k is then "
            "float32: theta carries float32 rounding, which positions in the thousands "
            "multiply. Give the arange dtype=torch.float64.",
            _rv(theta_dtype=torch.float32),
        ),
        Mistake(
            "base ignored (10000 always)",
            "theta_i = base^(-2i/d_k) with the base the function is given (LLaMA 3 uses "
            "500000): use the argument, not the constant 10000.",
            _rv(use_base=False),
        ),
    ),
    error_hints=(
        ErrorHint(
            "cos and sin of the wrong shape (one angle per feature, not per pair?)",
            "There are d_k/2 pairs, so d_k/2 angles per position: theta from "
            "torch.arange(0, d_k, 2), cos and sin of shape (T, d_k/2), which broadcast "
            "against x[..., 0::2] (..., T, d_k/2).",
            lambda e: "must match the size of tensor" in str(e),
        ),
    ),
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_apply_rope = register(_ROPE)


# ====================================================================== Exercise 3.1
def _dec_parts(seed, d, H, f, dtype):
    """(torch layer, its six sublayers as builders holding its weights)."""
    torch.manual_seed(seed)
    layer = nn.TransformerDecoderLayer(d, H, f, dropout=0.0, batch_first=True,
                                       norm_first=True).to(dtype)
    _randomize(layer, seed)
    layer.train()
    blk = _DecoderBlock(d, H, f, norm_first=True).to(dtype)
    blk.load_from_torch(layer)
    state = {k: v.detach().clone() for k, v in blk.state_dict().items()}

    def part(prefix):
        return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}

    attn = {"d_model": d, "n_head": H}
    norms = tuple(Sublayer(f"norm{i}", "norm", {"d_model": d, "eps": float(n.eps)},
                           part(f"norm{i}."))
                  for i, n in ((1, blk.norm1), (2, blk.norm2), (3, blk.norm3)))
    return layer, (Sublayer("self_attn", "self_attn", attn, part("self_attn.")),
                   Sublayer("cross_attn", "cross_attn", attn, part("cross_attn.")),
                   Sublayer("ffn", "ffn", {"d_model": d, "d_ff": f, "activation": "relu"},
                            part("ffn.")), *norms)


def _dec(x, memory, sa, ca, ffn, n1, n2, n3, *, causal="tril", kv="memory", order="sa",
         norm_memory=False, left_out="", layout="pre", minus=""):
    T = x.shape[1]
    keep = torch.ones(T, T, dtype=torch.bool)
    mask = {"tril": keep.tril(), "none": None, "triu": keep.triu(),
            "zeros": torch.zeros(T, T, dtype=torch.bool).tril(),
            "pytorch": keep.triu(diagonal=1),
            "float": torch.ones(T, T).tril()}[causal]  # 1/0 floats: added to the scores

    if layout == "post":  # the original Transformer's order: norm(x + sublayer(x))
        x = n1(x + sa(x, mask=mask))
        x = n2(x + ca(x, memory))
        return n3(x + ffn(x))
    if layout == "no_residual":  # each sublayer's output replaces the stream
        x = sa(n1(x), mask=mask)
        x = ca(n2(x), memory)
        return ffn(n3(x))

    def self_part(h):
        return h - sa(n1(h), mask=mask) if minus == "self" else h + sa(n1(h), mask=mask)

    def cross_part(h):
        q = n2(h)
        ctx = {"memory": memory, "decoder": q}[kv]
        out = ca(q, n2(ctx) if norm_memory else ctx)
        return h - out if minus == "cross" else h + out

    if left_out:  # one sublayer's line forgotten: its output never added to the stream
        parts = {"self": self_part, "cross": cross_part,
                 "ffn": lambda h: h + ffn(n3(h))}  # fmt: skip
        for name in ("self", "cross", "ffn"):
            x = x if name == left_out else parts[name](x)
        return x
    if order == "sa":
        x = cross_part(self_part(x))
    else:
        x = self_part(cross_part(x))
    return x - ffn(n3(x)) if minus == "ffn" else x + ffn(n3(x))


def _dv(**kw):
    return lambda x, memory, sa, ca, ffn, n1, n2, n3: _dec(x, memory, sa, ca, ffn, n1, n2, n3,
                                                          **kw)


def _dec_cases():
    out = []
    for i, (B, T, S, d, H, f, dt, hidden) in enumerate([
        (2, 5, 6, 8, 2, 32, torch.float64, False),
        (3, 4, 3, 16, 4, 64, torch.float32, False),
        (1, 1, 4, 8, 2, 16, torch.float64, True),
        (2, 7, 7, 12, 3, 48, torch.float64, True),
    ]):
        seed = 1000 + 10 * i
        layer, parts = _dec_parts(seed, d, H, f, dt)
        x, mem = _t_rand(seed + 1, B, T, d, dtype=dt), _t_rand(seed + 2, B, S, d, dtype=dt)
        with torch.no_grad():
            m = nn.Transformer.generate_square_subsequent_mask(T, dtype=dt)
            expected = layer(x, mem, tgt_mask=m, tgt_is_causal=True)
        out.append(Case(f"x ({B}, {T}, {d}), memory ({B}, {S}, {d}), {H} heads, {str(dt)[6:]}",
                        (x, mem, *parts), expected, hidden=hidden))
    return tuple(out)


_DEC = Check(
    **table.identity(__name__, "decoder_block"),
    cases=_dec_cases,
    mistakes=(
        Mistake(
            "decoder self-attention not causal",
            "Masked self-attention: position t may only attend to positions <= t. Pass "
            "mask=torch.ones(T, T, dtype=torch.bool).tril() (True = may attend).",
            _dv(causal="none"),
        ),
        Mistake(
            "causal mask upside down (future allowed, past hidden)",
            "The allowed keys of query t are j <= t: the lower triangle, .tril(), not .triu().",
            _dv(causal="triu"),
        ),
        Mistake(
            "PyTorch's mask convention (True = masked)",
            "nn.Transformer's masks mark the *blocked* positions (triu(diagonal=1) is True "
            "above the diagonal); this course's attention takes True = may attend. Pass "
            "torch.ones(T, T, dtype=torch.bool).tril(), or invert PyTorch's mask with ~.",
            _dv(causal="pytorch"),
        ),
        Mistake(
            "causal mask not boolean (a 0/1 float mask is added, not applied)",
            "torch.ones(T, T).tril() is a float tensor, and attention adds a float mask to the "
            "scores (+1 on the past, 0 on the future): nothing is blocked. Build it with "
            "dtype=torch.bool: torch.ones(T, T, dtype=torch.bool).tril() (True = may attend).",
            _dv(causal="float"),
        ),
        Mistake(
            "cross-attention keys taken from the decoder",
            "In cross-attention the queries come from the decoder and the keys and values from "
            "the encoder output (memory): cross_attn(norm2(x), memory) (the encoder-decoder "
            "survey: the decoder "
            "'uses the encoder's output as the key-value pairs').",
            _dv(kv="decoder"),
        ),
        Mistake(
            "memory normalised with the decoder's norm2",
            "norm2 belongs to the decoder stream; pass the encoder output to cross-attention as "
            "it is (the encoder has its own final norm).",
            _dv(norm_memory=True),
        ),
        Mistake(
            "cross-attention before self-attention",
            "[S4]'s order: masked self-attention, then cross-attention, "
            "then the FFN.",
            _dv(order="ca"),
        ),
        *(
            Mistake(
                f"{what} sublayer left out",
                "The decoder block has three sublayers, each added to the stream in turn: "
                "masked self-attention, cross-attention (keys and values from memory), FFN. "
                f"The {what} is never added here.",
                _dv(left_out=which),
            )
            for which, what in (("self", "self-attention"), ("cross", "cross-attention"),
                                ("ffn", "feed-forward"))
        ),
        Mistake(
            "post-LN order (norm after the residual add)",
            "These sublayers come from a pre-LN block: normalise the sublayer's input and add "
            "its output to the untouched stream, x = x + self_attn(norm1(x), mask=...), not "
            "x = norm1(x + self_attn(x, ...)) (the original Transformer's post-LN order).",
            _dv(layout="post"),
        ),
        Mistake(
            "causal mask built from torch.zeros (no key may be attended)",
            "True = may attend: the mask is torch.ones(T, T, dtype=torch.bool).tril(); "
            "the lower triangle of zeros is all False and blocks every key.",
            _dv(causal="zeros"),
        ),
        *(
            Mistake(
                f"{what} output subtracted from the stream",
                "Each sublayer's output is *added* to the stream: x = x + sublayer(norm(x)).",
                _dv(minus=which),
            )
            for which, what in (("self", "self-attention"), ("cross", "cross-attention"),
                                ("ffn", "feed-forward"))
        ),
        Mistake(
            "residual connections left out",
            "Each sublayer's output is added to the stream, x = x + self_attn(norm1(x), ...), "
            "not assigned over it: without the residual x + ... the block forgets its input.",
            _dv(layout="no_residual"),
        ),
    ),
    forbidden=("_transformer_decoder_layer_fwd", "multi_head_attention_forward"),
    forbidden_hint="Combine the sublayers you are given.",
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_decoder_block = register(_DEC)


# ====================================================================== Exercises 4.1, 5.1
def _gpt(seed, V=13, T=12, L=2, H=2, d=16):
    """(the ``transformer_ref.GPT`` the expected logits come from, the same model as a
    builder: its parts with its weights, what the student's function gets)."""
    torch.manual_seed(seed)
    m = _Model(_GPTConfig(vocab_size=V, block_size=T, n_layer=L, n_head=H, d_model=d,
                        pos="learned")).double()
    _randomize(m, seed)  # every parameter (position table, norms) matters
    m.eval().requires_grad_(False)
    config = {"vocab_size": V, "block_size": T, "n_layer": L, "n_head": H, "d_model": d,
              "d_ff": 4 * d}
    return m, GPT(config, {k: v.detach().clone() for k, v in m.state_dict().items()})


def _ref_logits(idx, model, start=0, cache=None, *, pos="right", causal=True, final_norm=True,
                pos_after_first=False, subtract_pos=False, blocks=True):
    B, T = idx.shape
    positions = {"right": torch.arange(start, start + T), "plus1": torch.arange(start + 1,
                 start + 1 + T), "zero": torch.arange(T), "ids": None, "none": None}[pos]
    x = model.wte(idx)
    add = None if pos == "none" else (model.wpe(idx) if pos == "ids" else model.wpe(positions))
    if add is not None and not pos_after_first:
        x = x - add if subtract_pos else x + add
    for i, blk in enumerate(model.blocks if blocks else ()):
        x = blk(x, is_causal=causal, cache=None if cache is None else cache[i])
        if i == 0 and pos_after_first and add is not None:
            x = x + add
    if final_norm:
        x = model.ln_f(x)
    return model.lm_head(x)


def _gv(**kw):
    return lambda idx, model, start=0, cache=None: _ref_logits(idx, model, start, cache, **kw)


def _gpt_case(label, seed, B, T_prefix, T_new, hidden, **gpt_kw):
    ref, model = _gpt(seed, **gpt_kw)
    V = model.config.vocab_size
    full = torch.randint(0, V, (B, T_prefix + T_new), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        expected = ref(full)[:, T_prefix:]
    if T_prefix == 0:
        return Case(label, (full, model), expected, hidden=hidden)
    cache = ref.init_cache(B)
    with torch.no_grad():
        ref(full[:, :T_prefix], cache=cache)  # the prefix's keys and values, per layer
    prefix = tuple((c.k.clone(), c.v.clone()) for c in cache.layers)

    def make():  # a fresh cache already holding the prefix
        return (full[:, T_prefix:], model, T_prefix, KVCache(prefix))

    new, _, _, cache = make()
    return Case(label, (new, model, T_prefix, cache), expected, call=make, hidden=hidden)


def _gpt_cases():
    return (
        _gpt_case("idx (2, 6), 2 layers, no cache", 1100, 2, 0, 6, False),
        _gpt_case("idx (3, 12) (= block_size), no cache", 1110, 3, 0, 12, False),
        _gpt_case("3 new tokens after a cached prefix of 5 (start=5)", 1120, 2, 5, 3, False),
        _gpt_case("1 new token after a cached prefix of 8 (start=8)", 1130, 1, 8, 1, False),
        _gpt_case("one token, no cache", 1140, 1, 0, 1, True),
        _gpt_case("1 layer, 4 heads, 2 new tokens after 9 cached", 1150, 2, 9, 2, True, L=1,
                  H=4),
    )


_GPT_CHECK = Check(
    **table.identity(__name__, "gpt_logits"),
    cases=_gpt_cases,
    mistakes=(
        Mistake(
            "positions added after the first block",
            "Add the position embeddings to the token embeddings *before* the first block: "
            "x = wte(idx) + wpe(positions). Every block, the first included, needs to know "
            "where each token is.",
            _gv(pos_after_first=True),
        ),
        Mistake(
            "no position embeddings",
            "Without positions attention is permutation-equivariant (section 1): "
            "x = model.wte(idx) + model.wpe(positions).",
            _gv(pos="none"),
        ),
        Mistake(
            "position embeddings looked up with the token ids",
            "model.wpe is indexed by *positions* torch.arange(start, start + T), not by idx.",
            _gv(pos="ids"),
        ),
        Mistake(
            "KV cache positions off by one (start + 1)",
            "The new tokens sit at positions start, start + 1, ..., start + T - 1 "
            "(start = number of tokens already in the cache): torch.arange(start, start + T).",
            _gv(pos="plus1"),
        ),
        Mistake(
            "positions restart at 0 with a KV cache",
            "With a cache the new tokens come after `start` cached ones: "
            "torch.arange(start, start + T), not torch.arange(T).",
            _gv(pos="zero"),
        ),
        Mistake(
            "blocks called without is_causal=True (decoder self-attention not causal)",
            "A GPT block must not let position t see later tokens: blk(x, is_causal=True, ...).",
            _gv(causal=False),
        ),
        Mistake(
            "final LayerNorm missing",
            "A pre-LN stack ends with model.ln_f before the LM head.",
            _gv(final_norm=False),
        ),
        Mistake(
            "position embeddings subtracted",
            "The positions are *added* to the token embeddings: "
            "x = model.wte(idx) + model.wpe(positions).",
            _gv(subtract_pos=True),
        ),
        Mistake(
            "no block applied (embeddings straight to the head)",
            "Run every block in turn on the stream, x = blk(x, is_causal=True, cache=...), "
            "between the embeddings and the final norm.",
            _gv(blocks=False),
        ),
    ),
    error_hints=(
        ErrorHint(
            "positions counted down (torch.arange(start, start - T))",
            "The new tokens sit at start, start + 1, ..., start + T - 1: "
            "torch.arange(start, start + T).",
            lambda e: "inconsistent with step sign" in str(e),
        ),
    ),
    forbidden=("scaled_dot_product_attention",),
    forbidden_hint="Use the model's parts; its blocks compute attention themselves.",
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_gpt_logits = register(_GPT_CHECK)


def _ref_incremental(model, idx, *, start_shift=0, cache_on=True, prefix=False, last=False,
                     dim=1):
    B, T = idx.shape
    cache = model.init_cache(B)
    outs = []
    for t in range(T):
        if prefix:
            tok, s = idx[:, : t + 1], 0
        else:
            tok, s = idx[:, t : t + 1], t + start_shift
        y = _ref_logits(tok, model, s, cache if cache_on else None, pos="right")
        outs.append(y[:, -1:])
    return outs[-1] if last else torch.cat(outs, dim=dim)


def _iv(**kw):
    """The mistake of :func:`_ref_incremental` that ``kw`` (its keywords) makes."""
    return lambda model, idx: _ref_incremental(model, idx, **kw)


def _inc_cases():
    out = []
    for i, (B, T, hidden, kw) in enumerate([(2, 6, False, {}), (1, 12, False, {}),
                                            (3, 1, True, {}), (2, 7, True, {"L": 1, "H": 4})]):
        ref, model = _gpt(1200 + 10 * i, **kw)
        idx = torch.randint(0, model.config.vocab_size, (B, T),
                            generator=torch.Generator().manual_seed(1201 + 10 * i))
        with torch.no_grad():
            expected = ref(idx)
        out.append(Case(f"idx ({B}, {T})", (model, idx), expected, hidden=hidden))
    return tuple(out)


_INC = Check(
    **table.identity(__name__, "incremental_logits"),
    uses=table.uses(__name__, "gpt_logits"),
    cases=_inc_cases,
    mistakes=(
        Mistake(
            "KV cache positions off by one",
            "Token t is at position t; before it the cache holds t tokens: "
            "gpt_logits(idx[:, t:t+1], model, start=t, cache=cache).",
            _iv(start_shift=1),
        ),
        Mistake(
            "no cache passed (each token sees only itself)",
            "Make one cache with model.init_cache(B) before the loop and pass it at every step: "
            "it accumulates the keys and values of all earlier tokens.",
            _iv(cache_on=False),
        ),
        Mistake(
            "the whole prefix fed again with the cache",
            "With a cache, feed only the new token idx[:, t:t+1] at position t: the earlier "
            "ones are already in the cache (feeding them again appends them twice).",
            _iv(prefix=True),
        ),
        Mistake(
            "steps concatenated along the batch axis (torch.cat without dim=1)",
            "Each step's logits are (B, 1, vocab_size): join them along the token axis, "
            "torch.cat(steps, dim=1) -> (B, T, vocab_size). torch.cat's default is dim=0, "
            "the batch.",
            _iv(dim=0),
        ),
        Mistake(
            "steps concatenated along the vocabulary axis (dim=-1)",
            "Each step's logits are (B, 1, vocab_size): join them along the token axis, "
            "torch.cat(steps, dim=1) -> (B, T, vocab_size), not the last axis.",
            _iv(dim=-1),
        ),
    ),
    error_hints=(
        ErrorHint(
            "a step fed no tokens (an empty slice of idx)",
            "gpt_logits got a (B, 0) slice: a slice bound is off by one. The token at "
            "position t is idx[:, t:t+1], shape (B, 1).",
            lambda e: "to have non-zero size" in str(e),
        ),
    ),
    forbidden=("scaled_dot_product_attention",),
    forbidden_hint="Use your gpt_logits.",
    reference_off=True,  # transformer_ref is in the kernel for the demos
)
check_incremental_logits = register(_INC)
