"""Chapter answers for ``tests/unit/test_checks_transformer.py`` (and the verdict tests that
judge the same answers through a record): the right and the catalogued wrong
implementations, written as a student would."""

import math

import torch

from autograder.checks import table

# {function: check key} of the chapter (the exercise table)
KEY = table.keys("06_transformer")


# every exercise of the chapter: {check key: its Check declaration} (the exercise table)
CHECKS = table.declarations("06_transformer")


# ---------------------------------------------------------------- right answers
def good_gap(f, x, perm):
    with torch.no_grad():
        return float(torch.max(torch.abs(f(x.index_select(1, perm)) - f(x).index_select(1, perm))))


def good_sin(max_len, d_model):
    # plain Python trigonometry, row by row (lists: a tensor written one element at a time
    # costs seconds for the 4096-position case)
    rows = []
    for p in range(max_len):
        row = []
        for i in range(0, d_model, 2):
            a = p / 10000 ** (i / d_model)
            row.append(math.sin(a))
            if i + 1 < d_model:
                row.append(math.cos(a))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64).reshape(max_len, d_model).float()


def good_rope(x, positions, base=10000.0):
    # one 2x2 rotation per pair, with plain Python trigonometry
    d = x.shape[-1]
    out = torch.empty_like(x)
    for t, m in enumerate(positions.tolist()):
        for i in range(d // 2):
            ang = m * base ** (-2 * i / d)
            c, s = math.cos(ang), math.sin(ang)
            a, b = x[..., t, 2 * i], x[..., t, 2 * i + 1]
            out[..., t, 2 * i] = a * c - b * s
            out[..., t, 2 * i + 1] = a * s + b * c
    return out


def good_dec(x, memory, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    T = x.size(1)
    h = x + self_attn(norm1(x), mask=~torch.ones(T, T, dtype=torch.bool).triu(1))
    h = h + cross_attn(norm2(h), context=memory)
    return h + ffn(norm3(h))


def good_gpt(idx, model, start=0, cache=None):
    pos = torch.arange(idx.shape[1]) + start
    h = model.wte(idx) + model.wpe(pos)[None]
    for i in range(len(model.blocks)):
        h = model.blocks[i](h, is_causal=True, cache=cache[i] if cache is not None else None)
    return model.lm_head(model.ln_f(h))


def gpt_like_the_reference(idx, model, start=0, cache=None):
    """transformer_ref.GPT.forward copied line by line (issue 32: `x = model.drop(x)` and
    the blocks' `rope=`, `positions=` must work on the check's model)."""
    B, T = idx.shape
    if start + T > model.config.block_size:
        raise ValueError(f"sequence length {start + T} > block_size {model.config.block_size}")
    positions = torch.arange(start, start + T, device=idx.device)  # (T,)
    x = model.wte(idx)  # (B, T, d_model)
    if model.wpe is not None:
        x = x + model.wpe(positions)
    x = model.drop(x)
    for i, blk in enumerate(model.blocks):
        layer_cache = None if cache is None else cache[i]
        x = blk(x, is_causal=True, cache=layer_cache, rope=model.rope, positions=positions)
    x = model.ln_f(x)
    return model.lm_head(x)


def make_incremental(gpt, shift=0, use_cache=True, prefix=False, cat=1, one_based=False):
    def f(model, idx):
        B, T = idx.shape
        cache = model.init_cache(B)
        out = []
        for t in range(T):
            if prefix:
                out.append(gpt(idx[:, : t + 1], model, 0, cache)[:, -1:])
            elif one_based:  # token t taken as idx[:, t-1:t]: empty at t = 0
                out.append(gpt(idx[:, t - 1 : t], model, t, cache))
            else:
                out.append(gpt(idx[:, t : t + 1], model, t + shift, cache if use_cache else None))
        return torch.cat(out) if cat is None else torch.cat(out, cat)

    return f


GOOD = {
    KEY["equivariance_gap"]: good_gap,
    KEY["sinusoidal_encoding"]: good_sin,
    KEY["apply_rope"]: good_rope,
    KEY["decoder_block"]: good_dec,
    KEY["gpt_logits"]: good_gpt,
    KEY["incremental_logits"]: make_incremental(good_gpt),
}


# ---------------------------------------------------------------- students' wrong answers
def gap(kind):
    def f(fn, x, perm):
        if kind == "inverse":
            inv = torch.empty_like(perm)
            inv[perm] = torch.arange(len(perm))
            return (fn(x[:, perm]) - fn(x)[:, inv]).abs().max().item()
        if kind == "batch":
            return (fn(x[perm]) - fn(x)[perm]).abs().max().item()
        if kind == "min":
            return torch.min(torch.abs(fn(x[:, perm]) - fn(x)[:, perm])).item()
        if kind == "plus":
            return (fn(x[:, perm]) + fn(x)[:, perm]).abs().max().item()
        if kind == "no_diff":
            return fn(x[:, perm]).abs().max().item()
        return (fn(x[:, perm]) - fn(x)[:, perm]).abs().mean().item()

    return f


def sin(kind):
    def f(max_len, d_model):
        if kind == "float32":  # all in float32, as the default dtype gives
            pos = torch.arange(max_len).float()[:, None]
            ang = pos / 10000 ** (torch.arange(0, d_model, 2).float() / d_model)
            pe = torch.zeros(max_len, d_model)
            pe[:, 0::2], pe[:, 1::2] = ang.sin(), ang.cos()
            return pe
        pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        start = 1 if kind == "from1" else 0
        pos = pos + start
        if kind == "col":
            j = torch.arange(d_model, dtype=torch.float64)
            ang = pos / 10000 ** (j / d_model)
            pe = torch.sin(ang)
            pe[:, 1::2] = torch.cos(ang[:, 1::2])
            return pe.float()
        k = torch.arange(0, d_model, 2, dtype=torch.float64)
        if kind == "k_no_dtype":  # 2i left as integers: 2i / d_model is float32
            k = torch.arange(0, d_model, 2)
        if kind == "i":
            k = k / 2
        div = 10000 ** k if kind == "raw_exponent" else 10000 ** (k / d_model)
        ang = pos * div if kind == "times" else pos / div
        s, c = torch.sin(ang), torch.cos(ang)
        if kind == "swap":
            s, c = c, s
        if kind == "concat":
            return torch.cat([s, c], dim=1).float()
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        if kind != "no_sin":  # the line that fills the even columns forgotten
            pe[:, 0::2] = s
        if kind == "cos_even":  # the sin line copied, only sin changed to cos
            pe[:, 0::2] = c
        elif kind != "no_cos":
            pe[:, 1::2] = c
        return pe.float()

    return f


def sin_bad_shapes(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    ang = pos / 10000 ** (torch.arange(d_model, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang)
    return pe


def rope(kind):
    def f(x, positions, base=10000.0):
        d = x.shape[-1]
        if kind == "no_base":  # the constant from the paper instead of the argument
            base = 10000
        if kind == "float32":  # .float() everywhere, as the default dtype suggests
            idx = torch.arange(0, d, 2).float()
            freqs = 1.0 / base ** (idx / d)
            ang = torch.outer(positions.float(), freqs)
        else:
            idx = torch.arange(d // 2, dtype=torch.float64)
            if kind == "i_over_d":
                freqs = base ** (-idx / d)
            elif kind == "inverted":
                freqs = base ** (2 * idx / d)
            else:
                freqs = 1.0 / base ** (2 * idx / d)
            pos = torch.arange(x.shape[-2]) if kind == "arange" else positions
            ang = torch.outer(pos.double(), freqs)
        if kind == "degrees":
            ang = torch.deg2rad(ang)
        c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        if kind == "backwards":
            s = -s
        if kind == "halves":  # GPT-NeoX / Hugging Face's rotate_half
            x1, x2 = x[..., : d // 2], x[..., d // 2 :]
            return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
        even, odd = x[..., ::2], x[..., 1::2]
        new_even, new_odd = even * c - odd * s, even * s + odd * c
        if kind == "cat_back":
            return torch.cat([new_even, new_odd], dim=-1)
        y = torch.empty_like(x)
        y[..., ::2], y[..., 1::2] = new_even, new_odd
        return y

    return f


def rope_slips(kind):
    # slips in a vectorised answer
    def f(x, positions, base=10000.0):
        d = x.size(-1)
        k = torch.arange(1 if kind == "odd" else 0, d, 2, dtype=torch.float64)
        if kind == "int_arange":
            k = torch.arange(0, d, 2)  # int64: base ** (-k / d) comes out float32
        inv_freq = base ** (-k) if kind == "raw" else base ** (-k / d)
        m = positions.double().unsqueeze(-1)  # (T, 1)
        if kind == "no_theta":
            ang = m.repeat(1, len(inv_freq))
        elif kind == "no_pos":
            ang = inv_freq.expand(len(positions), -1)
        else:
            ang = m * inv_freq
        c, s = torch.cos(ang).type(x.dtype), torch.sin(ang).type(x.dtype)
        a, b = x[..., 0::2], x[..., 1::2]
        if kind == "odd_twice":
            a, b = x[..., 1::2], x[..., 1::2]
        elif kind == "even_twice":
            a, b = x[..., 0::2], x[..., 0::2]
        if kind in ("a_cos", "b_sin", "a_sin", "b_cos"):  # one factor forgotten
            f = {"a_cos": (a, b * s, a * s, b * c), "b_sin": (a * c, b, a * s, b * c),
                 "a_sin": (a * c, b * s, a, b * c), "b_cos": (a * c, b * s, a * s, b)}[kind]
            return torch.stack([f[0] - f[1], f[2] + f[3]], -1).reshape(x.shape)
        first = a * c + b * s if kind == "plus" else a * c - b * s
        if kind == "neg_first":
            first = b * s - a * c
        elif kind == "no_b_sin":
            first = a * c
        second = a * s - b * c if kind == "minus" else a * s + b * c
        if kind == "no_b_cos":
            second = a * s
        if kind == "no_flatten":
            return torch.stack([first, second], -1)
        if kind == "stack_default":
            return torch.stack([first, second]).flatten(-2)
        return torch.stack([first, second], -1).reshape(x.shape)

    return f


def rope_per_feature(x, positions, base=10000.0):
    # one angle per feature instead of per pair: (T, d) against (..., T, d/2)
    d = x.shape[-1]
    ang = positions.double()[:, None] * base ** (-torch.arange(d, dtype=torch.float64) / d)
    even, odd = x[..., ::2], x[..., 1::2]
    return torch.cat([even * ang.cos() - odd * ang.sin(), even * ang.sin() + odd * ang.cos()], -1)


def dec(kind):
    def f(x, memory, self_attn, cross_attn, ffn, norm1, norm2, norm3):
        T = x.shape[1]
        ones = torch.ones(T, T, dtype=torch.bool)
        # "pytorch": nn.Transformer's convention (True = masked) passed as True = may attend
        mask = {"nomask": None, "triu": ones.triu(), "pytorch": ones.triu(diagonal=1),
                "float": torch.tril(torch.ones(T, T)),
                "zeros": torch.tril(torch.zeros(T, T, dtype=torch.bool))}.get(kind, ones.tril())
        if kind in ("minus_self", "minus_cross", "minus_ffn"):
            x = x - self_attn(norm1(x), mask=mask) if kind == "minus_self" \
                else x + self_attn(norm1(x), mask=mask)
            c = cross_attn(norm2(x), memory)
            x = x - c if kind == "minus_cross" else x + c
            return x - ffn(norm3(x)) if kind == "minus_ffn" else x + ffn(norm3(x))
        if kind == "post_ln":  # the original paper's Add & Norm
            x = norm1(x + self_attn(x, mask=mask))
            x = norm2(x + cross_attn(x, memory))
            return norm3(x + ffn(x))
        if kind == "no_residual":
            h = self_attn(norm1(x), mask=mask)
            h = cross_attn(norm2(h), memory)
            return ffn(norm3(h))
        if kind == "no_self":  # a sublayer's line forgotten
            x = x + cross_attn(norm2(x), memory)
            return x + ffn(norm3(x))
        if kind == "no_cross":
            x = x + self_attn(norm1(x), mask=mask)
            return x + ffn(norm3(x))
        if kind == "no_ffn":
            x = x + self_attn(norm1(x), mask=mask)
            return x + cross_attn(norm2(x), memory)
        if kind == "ca_first":
            x = x + cross_attn(norm2(x), memory)
            x = x + self_attn(norm1(x), mask=mask)
            return x + ffn(norm3(x))
        x = x + self_attn(norm1(x), mask=mask)
        h = norm2(x)
        if kind == "kv_decoder":
            x = x + cross_attn(h, h)
        elif kind == "norm_memory":
            x = x + cross_attn(h, norm2(memory))
        else:
            x = x + cross_attn(h, memory)
        return x + ffn(norm3(x))

    return f


def gpt(kind):
    def f(idx, model, start=0, cache=None):
        T = idx.shape[1]
        pos = {"plus1": torch.arange(1, T + 1) + start, "zero": torch.arange(T)}.get(
            kind, torch.arange(start, start + T))
        if kind == "countdown":
            pos = torch.arange(start, start - T)
        x = model.wte(idx)
        if kind == "ids":
            x = x + model.wpe(idx)
        elif kind == "minus":
            x = x - model.wpe(pos)
        elif kind not in ("after_first", "nopos"):
            x = x + model.wpe(pos)
        for i, blk in enumerate(model.blocks):
            if kind == "noblocks":
                break
            x = blk(x, is_causal=kind != "noncausal", cache=None if cache is None else cache[i])
            if kind == "after_first" and i == 0:
                x = x + model.wpe(pos)
        return model.lm_head(x if kind == "no_lnf" else model.ln_f(x))

    return f


# (check key, wrong implementation, catalogue name expected in the message, graded path only)
WRONG = [
    (KEY["equivariance_gap"], gap("inverse"),
     "permuted the output with the inverse permutation", False),
    (KEY["equivariance_gap"], gap("batch"), "permuted the batch axis instead of the tokens",
     False),
    (KEY["equivariance_gap"], gap("mean"), "returned the mean difference", False),
    (KEY["equivariance_gap"], gap("min"), "returned the smallest difference (min instead of max)",
     False),
    (KEY["equivariance_gap"], gap("plus"), "the two outputs added instead of subtracted", False),
    (KEY["equivariance_gap"], gap("no_diff"),
     "returned max |f(x[:, perm])| (the difference left out)", False),
    (KEY["sinusoidal_encoding"], sin("concat"),
     "sin and cos concatenated instead of interleaved", False),
    (KEY["sinusoidal_encoding"], sin("swap"), "sin and cos swapped", False),
    (KEY["sinusoidal_encoding"], sin("i"),
     "frequency exponent i / d_model instead of 2i / d_model", False),
    (KEY["sinusoidal_encoding"], sin("col"),
     "frequency exponent from the column index (odd columns off)", False),
    (KEY["sinusoidal_encoding"], sin("times"),
     "multiplied by 10000^(2i/d) instead of dividing", False),
    (KEY["sinusoidal_encoding"], sin("from1"), "positions start at 1", False),
    # mutation testing (issue 18)
    (KEY["sinusoidal_encoding"], sin("raw_exponent"), "exponent 2i not divided by d_model",
     False),
    (KEY["sinusoidal_encoding"], sin("no_sin"), "sin columns never filled (left at 0)",
     False),
    (KEY["sinusoidal_encoding"], sin("no_cos"), "cos columns never filled (left at 0)",
     False),
    (KEY["sinusoidal_encoding"], sin("float32"), "angles computed in float32", False),
    (KEY["sinusoidal_encoding"], sin("k_no_dtype"),
     "frequencies computed in float32 (2i without dtype=torch.float64)", False),
    (KEY["sinusoidal_encoding"], sin("cos_even"),
     "cosines written into the even columns too (pe[:, 0::2] twice)", False),
    (KEY["sinusoidal_encoding"], sin_bad_shapes,
     "shape mismatch when filling the even/odd columns", False),
    (KEY["apply_rope"], rope("halves"),
     "half-split pairing (rotate_half) instead of interleaved pairs", False),
    (KEY["apply_rope"], rope("cat_back"),
     "rotated pairs written back as halves (torch.cat) instead of interleaved", False),
    (KEY["apply_rope"], rope("i_over_d"), "theta exponent i / d_k instead of 2i / d_k", False),
    (KEY["apply_rope"], rope("inverted"),
     "theta = base^(+2i/d_k) (frequencies grow instead of shrink)", False),
    (KEY["apply_rope"], rope("degrees"), "angles taken as degrees", False),
    (KEY["apply_rope"], rope("backwards"), "rotated the wrong way (sign of sin flipped)",
     False),
    (KEY["apply_rope"], rope("arange"),
     "positions ignored: rows rotated by 0 .. T-1 (the KV cache offset lost)", False),
    (KEY["apply_rope"], rope("float32"), "angles computed in float32", False),
    (KEY["apply_rope"], rope("no_base"), "base ignored (10000 always)", False),
    (KEY["apply_rope"], rope_per_feature,
     "cos and sin of the wrong shape (one angle per feature, not per pair?)", False),
    (KEY["apply_rope"], rope_slips("raw"), "theta exponent not divided by d_k", False),
    (KEY["apply_rope"], rope_slips("neg_first"), "first component negated (b sin - a cos)",
     False),
    (KEY["apply_rope"], rope_slips("a_cos"), "cos left out of the a cos term", False),
    (KEY["apply_rope"], rope_slips("b_sin"), "sin left out of the b sin term", False),
    (KEY["apply_rope"], rope_slips("a_sin"), "sin left out of the a sin term", False),
    (KEY["apply_rope"], rope_slips("b_cos"), "cos left out of the b cos term", False),
    (KEY["apply_rope"], rope_slips("odd_twice"),
     "both features of a pair read from the odd columns (x[..., 1::2] twice)", False),
    (KEY["apply_rope"], rope_slips("even_twice"),
     "both features of a pair read from the even columns (x[..., 0::2] twice)", False),
    (KEY["apply_rope"], rope_slips("stack_default"),
     "rotated pairs stacked on axis 0 (torch.stack without dim=-1)", False),
    (KEY["apply_rope"], rope_slips("no_flatten"),
     "rotated pairs stacked but not flattened back to (..., T, d_k)", False),
    (KEY["apply_rope"], rope_slips("int_arange"),
     "theta computed in float32 (2i without dtype=torch.float64)", False),
    (KEY["apply_rope"], rope_slips("odd"),
     "theta exponent from the odd feature index (2i+1)/d_k", False),
    (KEY["apply_rope"], rope_slips("no_theta"), "theta left out: every pair turns by m radians",
     False),
    (KEY["apply_rope"], rope_slips("no_pos"),
     "positions left out: every row turned as if at position 1", False),
    (KEY["apply_rope"], rope_slips("plus"), "not a rotation: a cos + b sin in the first component",
     False),
    (KEY["apply_rope"], rope_slips("minus"),
     "not a rotation: a sin - b cos in the second component", False),
    (KEY["decoder_block"], dec("nomask"), "decoder self-attention not causal", False),
    (KEY["decoder_block"], dec("triu"),
     "causal mask upside down (future allowed, past hidden)", False),
    (KEY["decoder_block"], dec("kv_decoder"), "cross-attention keys taken from the decoder",
     False),
    (KEY["decoder_block"], dec("norm_memory"), "memory normalised with the decoder's norm2",
     False),
    (KEY["decoder_block"], dec("ca_first"), "cross-attention before self-attention", False),
    # mutation testing (issue 18): one sublayer left out
    (KEY["decoder_block"], dec("no_self"), "self-attention sublayer left out", False),
    (KEY["decoder_block"], dec("no_cross"), "cross-attention sublayer left out", False),
    (KEY["decoder_block"], dec("no_ffn"), "feed-forward sublayer left out", False),
    (KEY["decoder_block"], dec("pytorch"),
     "PyTorch's mask convention (True = masked)", False),
    (KEY["decoder_block"], dec("float"),
     "causal mask not boolean (a 0/1 float mask is added, not applied)", False),
    (KEY["decoder_block"], dec("post_ln"), "post-LN order (norm after the residual add)",
     False),
    (KEY["decoder_block"], dec("no_residual"), "residual connections left out", False),
    (KEY["gpt_logits"], gpt("after_first"), "positions added after the first block", False),
    (KEY["gpt_logits"], gpt("nopos"), "no position embeddings", False),
    (KEY["gpt_logits"], gpt("ids"), "position embeddings looked up with the token ids",
     False),
    (KEY["gpt_logits"], gpt("plus1"), "KV cache positions off by one (start + 1)", False),
    (KEY["gpt_logits"], gpt("zero"), "positions restart at 0 with a KV cache", False),
    (KEY["gpt_logits"], gpt("noncausal"),
     "blocks called without is_causal=True (decoder self-attention not causal)", False),
    (KEY["gpt_logits"], gpt("no_lnf"), "final LayerNorm missing", False),
    (KEY["gpt_logits"], gpt("minus"), "position embeddings subtracted", False),
    (KEY["gpt_logits"], gpt("noblocks"), "no block applied (embeddings straight to the head)",
     False),
    (KEY["gpt_logits"], gpt("countdown"),
     "positions counted down (torch.arange(start, start - T))", False),
    (KEY["decoder_block"], dec("zeros"),
     "causal mask built from torch.zeros (no key may be attended)", False),
    (KEY["decoder_block"], dec("minus_self"), "self-attention output subtracted from the stream",
     False),
    (KEY["decoder_block"], dec("minus_cross"),
     "cross-attention output subtracted from the stream", False),
    (KEY["decoder_block"], dec("minus_ffn"), "feed-forward output subtracted from the stream",
     False),
    (KEY["apply_rope"], rope_slips("no_b_sin"), "the b sin term left out", False),
    (KEY["apply_rope"], rope_slips("no_b_cos"), "the b cos term left out", False),
    (KEY["incremental_logits"], make_incremental(good_gpt, shift=1),
     "KV cache positions off by one", False),
    (KEY["incremental_logits"], make_incremental(good_gpt, use_cache=False),
     "no cache passed (each token sees only itself)", False),
    (KEY["incremental_logits"], make_incremental(good_gpt, prefix=True),
     "the whole prefix fed again with the cache", False),
    (KEY["incremental_logits"], make_incremental(good_gpt, cat=None),
     "steps concatenated along the batch axis (torch.cat without dim=1)", False),
    (KEY["incremental_logits"], make_incremental(good_gpt, cat=-1),
     "steps concatenated along the vocabulary axis (dim=-1)", False),
    (KEY["incremental_logits"], make_incremental(good_gpt, one_based=True),
     "a step fed no tokens (an empty slice of idx)", False),
]

