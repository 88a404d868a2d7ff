# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   language_info:
#     name: python
# ---

# %% [markdown]
# # Chapter 6 — The full Transformer
#
# **By the end of this chapter you can** show that attention alone cannot tell token order,
# build sinusoidal positional encodings and rotary ones (RoPE), say what learned ones do, write
# the decoder block with masked self-attention and cross-attention (the survey [S4]), run a
# decoder-only GPT forward pass with and without a KV cache, and train a small GPT on your laptop
# until it reverses 99 % of digit strings it has never seen, every digit right.
#
# **Builds on:** chapter 1 (attention and masks), chapter 4 (layer norm), chapter 5 (pre-LN
# blocks). What *you* write here is how the parts are put together: positions (sinusoidal and
# rotary), the decoder block, the GPT forward pass and incremental decoding. The GPT trained in
# section 5 is **your own**: your `gpt_logits` over your chapter 1–5 answers, read from your
# saved notebooks (a piece that is missing or fails its check is replaced by the given one, and
# the cell says so). The short demos of sections 1 and 3 use the course's reference modules
# (`transformer_ref.EncoderBlock`, `DecoderBlock`, `MultiHeadAttention`).
#
# **Time:** about 2 hours (6 exercises, ~90 minutes of coding; the training cell takes a few
# seconds on a laptop CPU).
#
# **Points: 13 in total** — Ex 1.1 (1), 2.1 (2), 2.2 (2), 3.1 (3), 4.1 (3), 5.1 (2).
#
# **How to work.** Run the cells from the top. Replace `raise NotImplementedError()` with your
# code, run that cell, then the check cell below it. A failed check names the mistake when it
# recognises it ("KV cache positions off by one"). Grading runs more (hidden) cases: one token,
# one layer with four heads, longer cached prefixes.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup (read-only). Run this cell first: it loads the libraries and this chapter's checks.
import math
import time

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F

import transformer_ref
from autograder.checks import requires, yours
from autograder.checks.transformer import (
    check_decoder_block,
    check_equivariance_gap,
    check_gpt_logits,
    check_incremental_logits,
    check_apply_rope,
    check_sinusoidal_encoding,
)

torch.set_printoptions(precision=4, sci_mode=False)


# %% [markdown]
# ## 1. Attention does not know where a token is
#
# Shuffle the tokens of a sentence and feed them to self-attention: the outputs are the same
# vectors, shuffled the same way. Proof, in our notation: a permutation of the $n$ rows of
# $X \in \mathbb{R}^{n\times d}$ is $PX$ with a permutation matrix $P$ ($P^\top P = I$). Then
#
# $$\text{SA}(PX) = \text{softmax}\big(PXW_Q\,(PXW_K)^\top/\sqrt{d_k}\big)\,PXW_V
# = \text{softmax}\big(P\,S\,P^\top\big)\,P\,XW_V = P\,\text{softmax}(S)\,P^\top P\,XW_V = P\,\text{SA}(X),$$
#
# because the row-wise softmax of $PSP^\top$ is the softmax of $S$ with rows and columns
# permuted the same way. The FFN and LayerNorm act on each row alone, so they commute with $P$
# too: **a Transformer without positional information is permutation-equivariant**, "dog bites
# man" and "man bites dog" get the same set of vectors. A causal mask breaks the symmetry (token
# $t$ sees a different set of tokens), and so do positional encodings, which is their job.

# %% [markdown]
# ### Exercise 1.1 — measure equivariance  *(1 point, ~5 min)*
#
# **Goal:** `equivariance_gap(f, x, perm)` for a function `f` of sequences `x` of shape
# `(B, T, d)` and a permutation `perm` of the `T` token positions: return
# $\max |f(x_{[:,\text{perm}]}) - f(x)_{[:,\text{perm}]}|$ as a Python float (0 up to rounding when
# `f` is permutation-equivariant).
#
# <details><summary>Hint</summary>
#
# Permute the tokens of the input, run the model, and compare with the model's output permuted
# the same way; report the largest difference.
#
# <details><summary>The key line</summary>
#
# `x[:, perm]` permutes the tokens; `(a - b).abs().max().item()`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def equivariance_gap(f, x, perm):
    """max |f(x[:, perm]) - f(x)[:, perm]|: 0 (up to rounding) iff f commutes with perm here.

    f: (B, T, d) -> (B, T, d'), x: (B, T, d), perm: (T,) a permutation  ->  float
    Example: equivariance_gap(lambda h: 2 * h, x, torch.tensor([1, 0])) -> 0.0
    """
    ### BEGIN SOLUTION
    with torch.no_grad():
        return (f(x[:, perm]) - f(x)[:, perm]).abs().max().item()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_1_equivariance_gap", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.1 (1 point)
check_equivariance_gap(equivariance_gap)

# %% [markdown]
# **Look.** The gap for four maps on the same random sequence: self-attention and a whole
# (unmasked) Transformer block are equivariant; a causal mask or added positions are not.

# %% tags=["demo"]
with requires("Exercise 1.1"):
    torch.manual_seed(0)
    d, T = 16, 6
    x, perm = torch.randn(2, T, d), torch.randperm(T)
    mha = transformer_ref.MultiHeadAttention(d, 4)
    block = transformer_ref.EncoderBlock(d, 4, norm_first=True)
    positions = torch.randn(T, d)
    for name, f in [("self-attention", mha), ("a whole Transformer block", block),
                    ("causal self-attention", lambda h: mha(h, is_causal=True)),
                    ("self-attention on x + positions", lambda h: mha(h + positions))]:
        print(f"{name:32s} gap = {equivariance_gap(f, x, perm):.1e}")


# %% [markdown]
# ## 2. Positional encodings
#
# **Sinusoidal** (Vaswani et al., 2017; the survey [S4]: "input tokens are represented as embeddings,
# added to positional encodings"). A fixed table $PE \in \mathbb{R}^{T_\text{max}\times d}$ is
# added to the token embeddings, $X \leftarrow X + PE_{[0:n]}$. Feature pair $i$ (columns $2i$
# and $2i+1$) is a sine and a cosine of the position at one frequency:
#
# $$PE_{p,\,2i} = \sin\!\big(p / 10000^{2i/d}\big), \qquad PE_{p,\,2i+1} = \cos\!\big(p / 10000^{2i/d}\big).$$
#
# Wavelengths grow geometrically from $2\pi$ (pair 0) to $10000\cdot 2\pi$: like the hands of a
# clock, fast ones tell nearby positions apart, slow ones far ones. Because
# $\sin(a+b)$ and $\cos(a+b)$ are linear in $\sin a, \cos a$, the encoding of $p + k$ is a fixed
# rotation of that of $p$, for every $p$ — relative offsets are easy for attention to read.

# %% [markdown]
# ### Exercise 2.1 — the sinusoidal table  *(2 points, ~10 min)*
#
# **Goal:** `sinusoidal_encoding(max_len, d_model)` returns the float32 table of shape
# `(max_len, d_model)`, rows = positions $0, 1, \dots$, sine on even columns, cosine on odd.
# Compute it in float64 and convert at the end (positions up to thousands lose digits in
# float32 angles).
#
# <details><summary>Hint</summary>
#
# Each position gets sines in the even columns and cosines in the odd ones; the frequency falls
# with the column pair's index as a power of 10000. Compute in float64 and build the whole table
# with broadcasting.
#
# <details><summary>The key line</summary>
#
# `pos = torch.arange(max_len, dtype=torch.float64)[:, None]`,
# `two_i = torch.arange(0, d_model, 2, dtype=torch.float64)`, `angle = pos / 10000 ** (two_i / d_model)`;
# fill `pe[:, 0::2] = torch.sin(angle)` and `pe[:, 1::2] = torch.cos(angle)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sinusoidal_encoding(max_len, d_model):
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)).

    max_len, d_model: int (d_model even)  ->  (max_len, d_model) float32
    Example: sinusoidal_encoding(2, 4)[1] -> [0.8415, 0.5403, 0.0100, 0.9999]
    """
    ### BEGIN SOLUTION
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,)
    angle = pos / 10000.0 ** (two_i / d_model)  # (T, d/2)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.to(torch.float32)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_1_sinusoidal_encoding", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.1 (2 points)
check_sinusoidal_encoding(sinusoidal_encoding)

# %% [markdown]
# **Look.** Left: your table for 64 positions and $d = 64$ — fast stripes on the left columns,
# slow ones on the right. Right: the dot product $PE_p\cdot PE_q$ depends only on $|p - q|$ and
# is largest at $p = q$: nearby positions look alike.

# %% tags=["demo"]
with requires("Exercise 2.1"):
    pe = sinusoidal_encoding(64, 64).detach().numpy()  # matplotlib wants numpy arrays
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    im = axes[0].imshow(pe, cmap="RdBu", aspect="auto", vmin=-1, vmax=1)
    axes[0].set_xlabel("feature"); axes[0].set_ylabel("position"); axes[0].set_title("PE")
    fig.colorbar(im, ax=axes[0])
    for p in (10, 30, 50):
        axes[1].plot(pe @ pe[p], label=f"PE · PE[{p}]")
    axes[1].set_xlabel("position q"); axes[1].legend(); axes[1].set_title("similarity of positions")
    plt.tight_layout(); plt.show()

# %% [markdown]
# **Learned positions** (BERT, GPT-2): the table is a parameter,
# `nn.Embedding(max_len, d_model)`, trained like the token embeddings. Simple and as good in
# practice, but it knows nothing about positions beyond `max_len`. It is what the GPT in
# section 4 uses (`model.wpe`).
#
# **RoPE** (Su et al., 2021; LLaMA and most recent models) adds nothing to $X$. Inside every
# attention layer it *rotates* each query and key of a head, $q, k \in \mathbb{R}^{d_k}$, pair
# by pair: feature pair $i$ ($i = 0, \dots, d_k/2 - 1$) of the vector at position $m$ turns by
# the angle $m\theta_i$,
#
# $$\theta_i = 10000^{-2i/d_k}, \qquad
# \begin{pmatrix} a' \\ b' \end{pmatrix} =
# \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}
# \begin{pmatrix} a \\ b \end{pmatrix} —$$
#
# the sinusoid frequencies again. Write $R_m$ for the whole rotation at position $m$ (one
# $2\times 2$ block per pair). Rotations keep lengths and $R_m^\top R_n = R_{n-m}$, so the score
# of a query at $m$ and a key at $n$ is
#
# $$(R_m q)\cdot(R_n k) = q^\top R_m^\top R_n\, k = q^\top R_{n-m}\, k,$$
#
# a function of the **relative** position $m - n$ only. The values $V$ are not rotated: they
# carry content, not positions.
#
# **Which features form pair $i$** is a convention. This course (and `transformer_ref`, like the
# RoFormer paper and Meta's original LLaMA code) pairs neighbours: pair $i$ is features
# $(2i, 2i+1)$, *interleaved*. GPT-NeoX and Hugging Face's LLaMA pair feature $i$ with
# $i + d_k/2$ (*half-split*, "rotate_half"): the same rotation after permuting the features, but
# not the same numbers, so weights trained with one convention do not work with the other.

# %% [markdown]
# ### Exercise 2.2 — rotary positions (RoPE)  *(2 points, ~15 min)*
#
# **Goal:** `apply_rope(x, positions, base=10000.0)` rotates `x` of shape `(..., T, d_k)` —
# queries or keys, typically `(B, H, T, d_k)` — where row $t$ sits at the absolute position
# `positions[t]` (`positions`: an integer tensor of shape `(T,)`). Pair $i$ is features
# `(2i, 2i+1)` (interleaved) and turns by `positions[t]` $\cdot\,\theta_i$ with
# $\theta_i = \text{base}^{-2i/d_k}$. Return a tensor of `x`'s shape and dtype. With a KV cache
# the new rows sit at `torch.arange(start, start + T)`, not at $0 \dots T-1$: that is why the
# positions are an argument. Compute the angles in float64 (as in Exercise 2.1) and cast
# $\cos$ and $\sin$ to `x.dtype`.
#
# <details><summary>Hint</summary>
#
# Features come in adjacent pairs (0, 1), (2, 3), ...; each pair is rotated by the position
# times its own frequency. Compute the angles, rotate the pairs as 2-d vectors, and put them
# back in the same interleaved order.
#
# <details><summary>The key line</summary>
#
# `theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)` (shape `(d_k/2,)`);
# `angle = positions.to(torch.float64)[:, None] * theta` (shape `(T, d_k/2)`); the pairs are
# `a, b = x[..., 0::2], x[..., 1::2]`; the rotated pair is `a * cos - b * sin`,
# `a * sin + b * cos`; put them back interleaved with
# `torch.stack((a2, b2), dim=-1).flatten(-2)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def apply_rope(x, positions, base=10000.0):
    """Rotate feature pairs (2i, 2i+1) of each row t of x by positions[t] * base^(-2i/d_k).

    x: (..., T, d_k) queries or keys (d_k even), positions: (T,) int  ->  x's shape and dtype
    Example: apply_rope(torch.tensor([[1.0, 0.0]]), torch.tensor([1])) -> [[0.5403, 0.8415]]
    """
    ### BEGIN SOLUTION
    d_k = x.shape[-1]
    theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # (d_k/2,)
    angle = positions.to(torch.float64)[:, None] * theta  # (T, d_k/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_k/2) each: pair i = features (2i, 2i+1)
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., T, d_k/2, 2)
    return rotated.flatten(-2)  # back to the order 2i, 2i+1
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_2_apply_rope", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.2 (2 points)
check_apply_rope(apply_rope)

# %% [markdown]
# **Look: your RoPE inside attention.** Each head's queries and keys are rotated by your
# `apply_rope` before the scores $QK^\top/\sqrt{d_k}$; the values are not. First the score of
# one query and one key placed at positions $m$ and $n$: it depends on $m - n$ only. Then a
# whole causal attention over a sequence, run once at positions $0..7$ and once shifted to
# $100..107$: the same outputs, because only offsets enter the scores.

# %% tags=["demo"]
def rope_attention(q, k, v, positions):
    # causal attention with RoPE: q, k, v (B, H, T, d_k), positions (T,)
    q, k = apply_rope(q, positions), apply_rope(k, positions)  # v stays as it is
    T, d_k = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, H, T, T)
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    return scores.masked_fill(~keep, float("-inf")).softmax(dim=-1) @ v


with requires("Exercise 2.2"):
    torch.manual_seed(1)
    q1, k1 = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    for m, n in [(3, 1), (12, 10), (50, 48), (5, 1)]:
        qm = apply_rope(q1[None], torch.tensor([m]))  # (1, d_k): one row at position m
        kn = apply_rope(k1[None], torch.tensor([n]))
        print(f"query at {m:2d}, key at {n:2d} (offset {m - n}): score {(qm * kn).sum().item():+.4f}")
    q, k, v = torch.randn(3, 1, 2, 8, 8, dtype=torch.float64).unbind(0)  # (B, H, T, d_k) each
    y0 = rope_attention(q, k, v, torch.arange(8))
    y100 = rope_attention(q, k, v, torch.arange(100, 108))
    print("same sequence at positions 0..7 and 100..107: outputs differ by",
          f"{(y0 - y100).abs().max().item():.1e}")
    swap = [1, 0, *range(2, 8)]  # tokens 0 and 1 trade places (keys and values)
    for name, pos in [("without rotation", torch.zeros(8, dtype=torch.long)),
                      ("with your RoPE", torch.arange(8))]:
        moved = rope_attention(q, k[:, :, swap], v[:, :, swap], pos) - rope_attention(q, k, v, pos)
        print(f"{name:16s}: swapping tokens 0 and 1 moves outputs 2..7 by "
              f"{moved[..., 2:, :].abs().max().item():.2f}")


# %% [markdown]
# ## 3. Encoder, decoder block, encoder–decoder
#
# The survey [S4] describes the original architecture. The **encoder** is a stack of identical
# layers, each self-attention and a feed-forward network with "Add & Norm" — chapter 5's block,
# stacked (6 layers in the paper). Its output, one vector per source token, is the **memory**.
# The **decoder** is a stack of layers with *three* sublayers:
#
# 1. **masked** self-attention: target position $t$ attends to positions $\le t$ only (the
#    causal mask of chapter 1, [S4]'s $M$), so training on whole sequences cannot peek;
# 2. **cross-attention**: queries from the decoder, keys and values from the encoder output —
#    the survey [S4]: "the decoder uses the encoder's output as the key-value pairs and its own hidden
#    state as the query";
# 3. the FFN.
#
# In pre-LN form (chapter 5), with $Z$ the memory and $M$ the causal mask:
#
# $$x \leftarrow x + \text{MHA}(\text{LN}_1 x,\ \text{LN}_1 x;\ M),\quad
# x \leftarrow x + \text{MHA}(\text{LN}_2 x,\ Z),\quad x \leftarrow x + \text{FFN}(\text{LN}_3 x),$$
#
# where $\text{MHA}(\text{queries}, \text{keys/values})$.

# %% [markdown]
# ### Exercise 3.1 — the decoder block  *(3 points, ~15 min)*
#
# **Goal:** `decoder_block(x, memory, self_attn, cross_attn, ffn, norm1, norm2, norm3)` for the
# decoder stream `x (B, T, d)` and the encoder output `memory (B, S, d)`, pre-LN, matching
# `torch.nn.TransformerDecoderLayer(norm_first=True)` with a causal target mask. You are given:
# `self_attn(h, mask=None)` (multi-head self-attention over `h`; `mask` boolean `(T, T)`, True =
# may attend), `cross_attn(h, context)` (queries from `h`, keys and values from `context`), and
# `ffn`, `norm1`, `norm2`, `norm3`.
#
# <details><summary>Hint</summary>
#
# Three pre-LN residual sublayers in order: causal self-attention, cross-attention to the
# encoder's memory, the FFN. The self-attention mask is the causal one.
#
# <details><summary>The key line</summary>
#
# `mask = torch.ones(T, T, dtype=torch.bool).tril()`; then three residual lines:
# `x = x + self_attn(norm1(x), mask=mask)`, `x = x + cross_attn(norm2(x), memory)`,
# `x = x + ffn(norm3(x))`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decoder_block(x, memory, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    """Pre-LN decoder block (the survey [S4]): masked self-attention, cross-attention, FFN.

    x: (B, T, d) decoder stream, memory: (B, S, d) encoder output  ->  (B, T, d)
    self_attn(h, mask), cross_attn(h, context), ffn, norm1..3: the sublayers.
    Example: output t does not change when target tokens after t change.
    """
    ### BEGIN SOLUTION
    T = x.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T): key j <= query t
    x = x + self_attn(norm1(x), mask=causal)
    x = x + cross_attn(norm2(x), memory)  # queries: decoder; keys, values: encoder
    return x + ffn(norm3(x))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_1_decoder_block", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.1 (3 points)
check_decoder_block(decoder_block)

# %% [markdown]
# **Look: an encoder–decoder from these parts.** A 2-layer encoder (`transformer_ref.Encoder`,
# pre-LN, with a final norm) turns a source sequence into the memory; two decoder layers run
# *your* `decoder_block` with the sublayers of `transformer_ref.DecoderBlock`. Then two
# properties: changing a *later* target token leaves earlier outputs alone (causal), changing
# the source changes every output (cross-attention).

# %% tags=["demo"]
def sublayers(blk):
    # the six sublayers of a transformer_ref.DecoderBlock, as decoder_block takes them
    return (lambda h, mask=None: blk.self_attn(h, mask=mask),
            lambda h, context: blk.cross_attn(h, context=context),
            blk.ffn, blk.norm1, blk.norm2, blk.norm3)


with requires("Exercise 3.1"), torch.no_grad():
    torch.manual_seed(2)
    d, H = 32, 4
    encoder = transformer_ref.Encoder(2, d, H, final_norm=True, norm_first=True)
    decoder_layers = [transformer_ref.DecoderBlock(d, H, norm_first=True) for _ in range(2)]

    def encode_decode(src, tgt):
        memory = encoder(src)  # (B, S, d)
        y = tgt
        for blk in decoder_layers:
            y = decoder_block(y, memory, *sublayers(blk))
        return y  # (B, T, d)

    src, tgt = torch.randn(1, 7, d), torch.randn(1, 5, d)
    y = encode_decode(src, tgt)
    tgt2 = tgt.clone(); tgt2[:, 3:] = torch.randn(1, 2, d)  # change target tokens 3 and 4
    src2 = src + 0.5 * torch.randn_like(src)
    print("shapes: src", tuple(src.shape), "tgt", tuple(tgt.shape), "-> out", tuple(y.shape))
    print("changed targets 3-4: outputs 0-2 moved by", (encode_decode(src, tgt2) - y)[:, :3].abs().max().item())
    print("changed the source:  outputs 0-4 moved by", (encode_decode(src2, tgt) - y).abs().max().item())


# %% [markdown]
# ## 4. The decoder-only GPT
#
# Drop the encoder and the cross-attention and keep only masked self-attention blocks: that is
# GPT (Radford et al., 2018/2019), a language model that predicts token $t+1$ from tokens
# $\le t$. Its forward pass, for token ids `idx (B, T)`:
#
# $$X = E_{[\text{idx}]} + P_{[0:T]},\qquad X \leftarrow \text{Block}_\ell(X)\ \ (\ell = 1..L,\ \text{causal}),\qquad
# \text{logits} = \text{LN}_f(X)\,W_\text{head}^\top$$
#
# with token table $E$ (`model.wte`), learned position table $P$ (`model.wpe`), pre-LN blocks
# (`model.blocks`, chapter 5's block with `is_causal=True`), the final norm `model.ln_f` and
# the head `model.lm_head` (GPT-2 ties it to $E$).
#
# ![The GPT forward pass: token ids, embeddings plus positions, L causal pre-LN blocks, final norm, LM head, logits](figures/gpt_forward.svg)
#
# *The decoder-only forward pass, with each step's shape and the `model` attribute that holds it.*
#
# **KV cache.** When generating, token $t$'s keys and values never change once computed (the
# mask stops them from seeing the future). So each block can keep them in a cache and the next
# step only runs the *new* token: its queries attend to the cached keys plus its own. Then the
# new tokens are not at positions $0..T-1$ but at `start, ..., start + T - 1`, where `start` is
# the number of tokens already in the cache.

# %% [markdown]
# ### Exercise 4.1 — the GPT forward pass  *(3 points, ~15 min)*
#
# **Goal:** `gpt_logits(idx, model, start=0, cache=None)` with the parts of a
# `transformer_ref.GPT` (learned positions): embeddings plus positions `start .. start + T - 1`,
# every block called as `blk(x, is_causal=True, cache=...)` with `cache[i]` for block `i` (or
# `None` without a cache), final norm, head. Returns logits `(B, T, vocab_size)`.
#
# <details><summary>Hint</summary>
#
# Token embeddings plus position embeddings (positions counted from start), then every block in
# order, then the final norm and the output head.
#
# <details><summary>The key line</summary>
#
# `positions = torch.arange(start, start + T)`; `x = model.wte(idx) + model.wpe(positions)`;
# loop `for i, blk in enumerate(model.blocks)`; `model.lm_head(model.ln_f(x))`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex4_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gpt_logits(idx, model, start=0, cache=None):
    """GPT forward pass with the parts of `model`; with `cache`, idx are the *new* tokens.

    idx: (B, T) token ids at positions start .. start + T - 1; cache: model.init_cache(B)
    or None  ->  logits (B, T, vocab_size)
    Example: gpt_logits(idx, model) equals model(idx)
    """
    ### BEGIN SOLUTION
    T = idx.shape[1]
    positions = torch.arange(start, start + T)  # absolute positions of the new tokens
    x = model.wte(idx) + model.wpe(positions)  # (B, T, d) + (T, d)
    for i, blk in enumerate(model.blocks):
        x = blk(x, is_causal=True, cache=None if cache is None else cache[i])
    return model.lm_head(model.ln_f(x))  # (B, T, vocab_size)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex4_1_gpt_logits", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 4.1 (3 points)
check_gpt_logits(gpt_logits)

# %% [markdown]
# ## 5. Train it: reversing digit strings
#
# A task that needs both attention and positions: read six digits, a separator, and write them
# in reverse. `3 1 4 1 5 9 | 9 5 1 4 1 3`. The model sees the whole sequence (teacher forcing)
# and is trained with cross-entropy on the six answer positions only; a sequence counts as
# correct when all six predicted digits are right (exact match). Output position $t$ must copy
# the input token at position $11 - t$ — a pure position-to-position lookup, impossible for a
# permutation-equivariant model.
#
# The model is **your GPT**: `yours.YourGPT` runs your `gpt_logits` over blocks made of your
# `pre_ln_block`, `multi_head_attention`, `layer_norm` and `feed_forward`, read from your saved
# notebooks of chapters 1–5 (each one whose visible check passes; the cell says which, and uses
# the given one for any other). Its weights are laid out like `transformer_ref.GPT`'s. It is a
# 2-layer GPT with $d_\text{model} = 64$ (about 100 k parameters). Training stops as soon as 99 % of 1000 held-out
# strings are reversed exactly (checked every 25 steps, at most 400 steps). The accuracy is
# measured with the true answer digits as inputs (teacher forcing); section 6 generates the
# answers freely, one digit at a time.

# %% tags=["demo"]
N_DIGITS, SEP = 6, 10  # tokens 0-9 are digits, 10 is the separator
VOCAB, SEQ = 11, 2 * N_DIGITS + 1


def reversal_batch(batch_size, generator=None):
    digits = torch.randint(0, 10, (batch_size, N_DIGITS), generator=generator)
    seq = torch.cat([digits, torch.full((batch_size, 1), SEP), digits.flip(1)], dim=1)
    return seq[:, :-1], seq[:, 1:]  # inputs, next-token targets: (B, 12) each


def exact_match(model, x, y):
    with torch.no_grad():
        pred = gpt_logits(x, model)[:, N_DIGITS:].argmax(-1)  # the six answer positions
    return (pred == y[:, N_DIGITS:]).all(dim=1).float().mean().item()


with requires("Exercise 4.1"):
    parts = yours.model_parts("06_transformer", own=dict(gpt_logits=gpt_logits))  # 01-05, 4.1
    torch.manual_seed(0)
    model = yours.YourGPT(transformer_ref.GPTConfig(
        vocab_size=VOCAB, block_size=SEQ, n_layer=2, n_head=4, d_model=64), parts)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x_val, y_val = reversal_batch(1000, torch.Generator().manual_seed(123))
    losses, t0, cpu0 = [], time.perf_counter(), time.process_time()
    said = t0  # a line at least every 5 s, so a slow machine shows progress
    for step in range(1, 401):
        x, y = reversal_batch(128)
        logits = gpt_logits(x, model)[:, N_DIGITS:]  # (B, 6, V): the answer positions
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y[:, N_DIGITS:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 25 == 0:
            acc = exact_match(model, x_val, y_val)
            print(f"step {step:3d}  loss {loss.item():.4f}  exact match {acc:.1%}", flush=True)
            said = time.perf_counter()
            if acc >= 0.99:
                break
        elif time.perf_counter() - said >= 5:
            print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)
            said = time.perf_counter()
    print(f"trained in {time.perf_counter() - t0:.1f} s wall, {time.process_time() - cpu0:.1f} s CPU, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters")
    plt.figure(figsize=(5, 2.5)); plt.semilogy(losses); plt.xlabel("step"); plt.ylabel("loss")
    plt.title("reversal: training loss"); plt.tight_layout(); plt.show()


# %% [markdown]
# **Look: what the trained model attends to.** Below, the attention weights of every head of
# both layers on one held-out string, recomputed from each block's own query and key
# projections: $\text{softmax}(QK^\top/\sqrt{d_k})$ with the causal mask, chapter 1's formula
# applied to the normalised input the block hands its attention. Row $t$ is the query at
# position $t$ (it predicts token $t + 1$), column $s$ the key at position $s$.
#
# **What to look for:** rows 6–11 (the separator and the answer digits). In the heads that do
# the copying, each of these rows has one bright cell, at column $11 - t$: an
# **anti-diagonal**. The query that writes answer digit $t - 5$ looks up its mirrored input
# digit, exactly the position-to-position lookup the task needs. **Why** it can: a digit's
# content says nothing about where its mirror is, so the lookup runs on the positions.
# Training shaped $W_Q$ and $W_K$ so that the position vector of row $t$ meets that of
# $11 - t$ with the largest score of the row. Rows 0–5 are the input digits; no loss is put on
# them, so their weights show no task. Each title gives the head's mean weight on the
# mirrored position over rows 6–11 of all 1000 held-out strings.

# %% tags=["demo"]
def attention_maps(model, idx):
    """Every block's attention weights for idx, (L, B, H, T, T), from its q/k projections."""
    seen = []  # the input each block hands its attention: LN_1(x)
    hooks = [blk.attn.register_forward_pre_hook(lambda mod, args: seen.append(args[0]))
             for blk in model.blocks]
    try:
        gpt_logits(idx, model)
    finally:
        for hook in hooks:
            hook.remove()
    maps = []
    for blk, h in zip(model.blocks, seen):
        B, T, _ = h.shape
        q, k = (proj(h).view(B, T, blk.attn.n_head, -1).transpose(1, 2)  # (B, H, T, d_k)
                for proj in (blk.attn.q_proj, blk.attn.k_proj))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        maps.append(scores.masked_fill(~causal, float("-inf")).softmax(dim=-1))
    return torch.stack(maps)


with requires("Exercise 4.1"), torch.no_grad():
    maps = attention_maps(model, x_val)  # (L, 1000, H, 12, 12): the held-out strings
    rows = torch.arange(N_DIGITS, 2 * N_DIGITS)  # 6..11: the separator and the answer digits
    on_mirror = maps[:, :, :, rows, 2 * N_DIGITS - 1 - rows].mean(dim=(1, 3))  # (L, H)
    labels = [str(v) if v < 10 else "|" for v in x_val[0].tolist()]
    L, H = on_mirror.shape
    fig, axes = plt.subplots(L, H, figsize=(2.6 * H, 2.7 * L), squeeze=False)
    for layer in range(L):
        for head in range(H):
            ax = axes[layer][head]
            ax.imshow(maps[layer, 0, head], vmin=0, vmax=1, cmap="viridis")
            ax.set_xticks(range(len(labels)), labels, fontsize=7)
            ax.set_yticks(range(len(labels)), labels, fontsize=7)
            ax.set_title(f"layer {layer + 1}, head {head + 1}: {on_mirror[layer, head]:.0%}",
                         fontsize=9)
    fig.supxlabel("key s (the input token at position s)")
    fig.supylabel("query t (predicts token t + 1)")
    plt.tight_layout(); plt.show()
    layer, head = divmod(on_mirror.argmax().item(), H)
    print(f"clearest: layer {layer + 1}, head {head + 1}, {on_mirror.max():.0%} of its weight on "
          f"position 11 - t (rows 6-11; uniform weights would give {(1 / (rows + 1.0)).mean():.0%})")


# %% [markdown]
# ## 6. Generation with a KV cache
#
# Greedy generation appends the most likely next token and repeats. Without a cache, step $t$
# reruns all $t$ tokens through every layer; with one it runs only the new token — same
# logits, far less work for long sequences.
#
# ### Exercise 5.1 — logits token by token  *(2 points, ~10 min)*
#
# **Goal:** `incremental_logits(model, idx)` feeds `idx (B, T)` one token at a time through
# your `gpt_logits` with one KV cache (`model.init_cache(B)`) and returns the logits of all
# steps concatenated, `(B, T, vocab_size)` — equal to the full pass `gpt_logits(idx, model)`.
# `model.init_cache(B)` returns an empty `KVCache`: one per-layer cache per block (`cache[i]`,
# which `gpt_logits` hands to block `i`), filled in place by each call. It has no `len()`
# (`cache.length` counts the tokens seen): pass the position `start=t` yourself.
#
# <details><summary>Hint</summary>
#
# Feed one token at a time, telling the model its position, with one cache that all steps share;
# the per-step logits, joined along time, must equal the full forward pass.
#
# <details><summary>The key line</summary>
#
# `cache = model.init_cache(B)`; for `t in range(T)`:
# `gpt_logits(idx[:, t:t+1], model, start=t, cache=cache)`; `torch.cat(..., dim=1)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex5_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def incremental_logits(model, idx):
    """Logits of idx computed one token at a time with a KV cache (= the full pass).

    model: transformer_ref.GPT, idx: (B, T)  ->  (B, T, vocab_size)
    Example: incremental_logits(model, idx) is close to gpt_logits(idx, model)
    """
    ### BEGIN SOLUTION
    cache = model.init_cache(idx.shape[0])
    steps = [gpt_logits(idx[:, t : t + 1], model, start=t, cache=cache)  # (B, 1, V) each
             for t in range(idx.shape[1])]
    return torch.cat(steps, dim=1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_1_incremental_logits", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 5.1 (2 points)
check_incremental_logits(incremental_logits)

# %% [markdown]
# **Look.** On the trained model: the cached logits equal the full pass, and greedy generation
# with the cache reverses new strings — it writes the answer one digit at a time, each step
# running a single token.

# %% tags=["demo"]
with requires("Exercise 5.1 and Exercise 4.1"), torch.no_grad():
    x, _ = reversal_batch(4, torch.Generator().manual_seed(7))
    print("max |cached - full| logits:", (incremental_logits(model, x) - gpt_logits(x, model)).abs().max().item())
    prompt = torch.cat([x[:, :N_DIGITS], torch.full((4, 1), SEP)], dim=1)  # digits + separator
    cache = model.init_cache(4)
    logits = gpt_logits(prompt, model, start=0, cache=cache)  # the prompt in one go
    out = [logits[:, -1].argmax(-1, keepdim=True)]
    for t in range(N_DIGITS - 1):  # then one new token per step
        logits = gpt_logits(out[-1], model, start=prompt.shape[1] + t, cache=cache)
        out.append(logits[:, -1].argmax(-1, keepdim=True))
    answer = torch.cat(out, dim=1)
    for digits, rev in zip(prompt[:, :N_DIGITS], answer):
        print("".join(map(str, digits.tolist())), "->", "".join(map(str, rev.tolist())))

# %% [markdown]
# ## Summary
#
# - Without positions, attention (and so the whole Transformer) is permutation-equivariant:
#   $\text{SA}(PX) = P\,\text{SA}(X)$.
# - Sinusoidal encodings: sine on even, cosine on odd features, pair $i$ at wavelength
#   $10000^{2i/d}\cdot 2\pi$, added to the embeddings; learned tables are trained instead; RoPE
#   rotates query and key pairs $(2i, 2i+1)$ by $m\theta_i$ (values untouched), so scores depend
#   on relative positions only.
# - Decoder block (the survey [S4]): masked self-attention, cross-attention (queries from the decoder,
#   keys and values from the encoder), FFN — each in a residual branch.
# - GPT: embeddings + positions, causal pre-LN blocks, final norm, head. With a KV cache the new
#   tokens sit at positions `start, start + 1, …`.
# - A 100 k-parameter GPT learns to reverse digit strings in a few dozen steps, seconds on a CPU;
#   its attention maps show how: output position $t$ looks up input position $11 - t$ (an
#   anti-diagonal), a lookup by position that only positional encodings make possible.
#
# **Going further.** Sampling (temperature, top-k, top-p) instead of greedy decoding
# (`transformer_ref.sampling`); RoPE inside the GPT (`GPTConfig(pos="rope")`); longer strings
# or sorting instead of reversing; `torch.nn.functional.scaled_dot_product_attention`'s fused
# kernels for speed (chapter 8 trains a GPT on real text; chapter 7 first builds its tokenizer).
