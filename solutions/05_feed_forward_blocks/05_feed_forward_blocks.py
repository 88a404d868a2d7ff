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
# # Chapter 5 — Feed-forward networks and Transformer blocks
#
# **By the end of this chapter you can** write the position-wise feed-forward network (the tutorial [S2])
# as matrix products and as a 1×1 convolution, count its parameters, write SwiGLU, assemble a
# Transformer block in both of its historical forms — post-LN (the tutorial [S2]) and pre-LN (the lecture notes [S1])
# — so that it matches `torch.nn.TransformerEncoderLayer` exactly, and measure why modern models
# put the norm first.
#
# **Builds on:** chapter 3 (multi-head attention, with chapter 1's attention inside) and chapter
# 4 (layer norm). The blocks you assemble here run **your own** earlier answers: the demos read
# your saved notebooks of those chapters (`autograder.checks.yours`), use each function whose
# visible check passes, and say so line by line; a piece that is missing or fails its check is
# replaced by the given one, visibly. (Grading never does this: each chapter is graded on its
# own answers, with the given parts elsewhere.)
#
# **Time:** about 1½ hours (7 exercises, ~60 minutes of coding).
#
# **Points: 12 in total** — Ex 1.1 (2), 1.2 (2), 1.3 (1), 1.4 (1), 2.1 (2), 2.2 (2), 3.1 (2).
#
# **How to work.** Run the cells from the top. Replace `raise NotImplementedError()` with your
# code, run that cell, then the check cell below it. A failed check names the mistake when it
# recognises it ("activation after the second linear layer"). Grading runs more (hidden) cases:
# one token, extra leading axes, causal attention inside the block, deeper stacks.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup (read-only). Run this cell first: it loads the libraries and this chapter's checks.
import math

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F

import transformer_ref
from autograder.checks import requires, yours
from autograder.checks.feed_forward_blocks import (
    check_feed_forward,
    check_ffn_as_conv1d,
    check_ffn_param_count,
    check_grad_norm_per_layer,
    check_post_ln_block,
    check_pre_ln_block,
    check_swiglu_ffn,
)

torch.set_printoptions(precision=4, sci_mode=False)


# %% [markdown]
# ## 1. The position-wise feed-forward network (the tutorial [S2])
#
# Attention mixes tokens, but for each token its output is a weighted *average* of value
# vectors: a linear operation on the values. The feed-forward network (FFN) is where each token
# is transformed non-linearly, on its own. The tutorial [S2] writes it in row form, exactly as we do:
#
# $$\text{FFN}(x) = \max(0,\ xW_1 + b_1)\,W_2 + b_2, \qquad W_1 \in \mathbb{R}^{d_\text{model}\times d_\text{ff}},\ W_2 \in \mathbb{R}^{d_\text{ff}\times d_\text{model}},$$
#
# usually with $d_\text{ff} = 4\,d_\text{model}$ (2048 = 4 · 512 in the original Transformer): expand,
# apply a nonlinearity, contract back. GPT-2 and BERT use GELU, $x\,\Phi(x)$ with $\Phi$ the
# standard normal CDF, instead of ReLU. The lecture notes [S1] call the same sublayer
# $\Phi: \mathbb{R}^d \to \mathbb{R}^d$, "some neural network, typically with only a few number of layers" (sic).
#
# "Position-wise" means the *same* weights are applied to every token independently: for
# $X \in \mathbb{R}^{n\times d}$ the formula is applied row by row, which `X @ W1` does anyway.

# %% [markdown]
# ### Exercise 1.1 — the feed-forward network  *(2 points, ~10 min)*
#
# **Goal:** `feed_forward(x, W1, b1, W2, b2, activation="relu")` for `x` of shape
# `(..., d_model)`, with `activation` `"relu"` or `"gelu"` (the exact GELU, `F.gelu`).
# `F.linear` is switched off during the check: write the products.
#
# <details><summary>Hint</summary>
#
# Two linear maps with the activation between them, applied to every position alike. Where does
# the activation go, and where must it not?
#
# <details><summary>The key line</summary>
#
# `h = x @ W1 + b1` has shape `(..., d_ff)`; apply `F.relu(h)` or `F.gelu(h)`; return
# `h @ W2 + b2`. No activation on the output.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def feed_forward(x, W1, b1, W2, b2, activation="relu"):
    """Position-wise FFN (the tutorial [S2]): act(x W1 + b1) W2 + b2.

    x: (..., d_model), W1: (d_model, d_ff), b1: (d_ff,), W2: (d_ff, d_model), b2: (d_model,)
    -> (..., d_model). activation: "relu" or "gelu" (exact, erf form).
    Example: x = [[1., -1.]], W1 = W2 = I, b = 0, relu -> [[1., 0.]]
    """
    ### BEGIN SOLUTION
    h = x @ W1 + b1  # (..., d_ff): expand
    h = F.relu(h) if activation == "relu" else F.gelu(h)
    return h @ W2 + b2  # (..., d_model): contract
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_1_feed_forward", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.1 (2 points)
check_feed_forward(feed_forward)

# %% [markdown]
# **Look: position-wise.** Change every token of a sequence except the first: the first
# token's output does not move. (Attention's would.)

# %% tags=["demo"]
with requires("Exercise 1.1"):
    torch.manual_seed(0)
    d, d_ff = 8, 32
    W1, b1 = torch.randn(d, d_ff) / math.sqrt(d), torch.zeros(d_ff)
    W2, b2 = torch.randn(d_ff, d) / math.sqrt(d_ff), torch.zeros(d)
    x = torch.randn(5, d)
    x2 = x.clone()
    x2[1:] = torch.randn(4, d)  # new tokens 1..4, same token 0
    y, y2 = feed_forward(x, W1, b1, W2, b2), feed_forward(x2, W1, b1, W2, b2)
    print("token 0 output changed by", (y[0] - y2[0]).abs().max().item())
    print("tokens 1-4 changed by    ", (y[1:] - y2[1:]).abs().max().item())


# %% [markdown]
# ## 1.2 The same thing as a 1×1 convolution
#
# The tutorial [S2] remarks that the FFN "can be viewed as a $1\times 1$ convolution". A 1-d convolution
# with kernel size $k$ slides over the sequence and mixes $k$ neighbouring positions; with
# $k = 1$ it mixes nothing across positions and applies one matrix to every position's channels
# — exactly $xW_1 + b_1$. PyTorch's `F.conv1d` expects the input as `(B, C_in, T)` (channels
# first) and the weight as `(C_out, C_in, k)`.

# %% [markdown]
# ### Exercise 1.2 — FFN with `F.conv1d`  *(2 points, ~10 min)*
#
# **Goal:** `ffn_as_conv1d(x, W1, b1, W2, b2)` computes the ReLU FFN of Exercise 1.1 for
# `x` of shape `(B, T, d_model)` with two calls of `F.conv1d` (kernel size 1). Matrix products
# (`@`, `matmul`, `linear`, `einsum`) are switched off during the check.
#
# <details><summary>Hint</summary>
#
# A convolution with kernel size 1 is a linear map at each position. conv1d wants channels
# before time, and its weight is laid out (out, in, kernel): rearrange the input and the weights
# to fit, and the output back.
#
# <details><summary>The key line</summary>
#
# `x.transpose(1, 2)` is `(B, d_model, T)`. The first weight is `W1.T.unsqueeze(-1)`, shape
# `(d_ff, d_model, 1)`. After the second convolution transpose back to `(B, T, d_model)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def ffn_as_conv1d(x, W1, b1, W2, b2):
    """ReLU FFN as two kernel-size-1 convolutions over the sequence axis.

    x: (B, T, d_model), W1: (d_model, d_ff), b1: (d_ff,), W2: (d_ff, d_model), b2: (d_model,)
    -> (B, T, d_model), equal to feed_forward(x, W1, b1, W2, b2, "relu").
    Example: with W1 = W2 = I and zero biases, ffn_as_conv1d(x, ...) == x.clamp(min=0)
    """
    ### BEGIN SOLUTION
    h = F.conv1d(x.transpose(1, 2), W1.T.unsqueeze(-1), b1)  # (B, d_ff, T)
    y = F.conv1d(F.relu(h), W2.T.unsqueeze(-1), b2)  # (B, d_model, T)
    return y.transpose(1, 2)  # (B, T, d_model)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_2_ffn_as_conv1d", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.2 (2 points)
check_ffn_as_conv1d(ffn_as_conv1d)

# %% [markdown]
# **Look.** The same weights loaded into `nn.Conv1d(d_model, d_ff, kernel_size=1)` modules,
# against your matrix-product FFN.

# %% tags=["demo"]
with requires("Exercise 1.2 and Exercise 1.1"):
    torch.manual_seed(1)
    B, T = 2, 6
    conv1, conv2 = nn.Conv1d(d, d_ff, kernel_size=1), nn.Conv1d(d_ff, d, kernel_size=1)
    x = torch.randn(B, T, d)
    with torch.no_grad():
        by_conv_modules = conv2(F.relu(conv1(x.transpose(1, 2)))).transpose(1, 2)
        W1c, W2c = conv1.weight[:, :, 0].T, conv2.weight[:, :, 0].T  # (d, d_ff), (d_ff, d)
        by_matmul = feed_forward(x, W1c, conv1.bias, W2c, conv2.bias)
        got = ffn_as_conv1d(x, W1c, conv1.bias, W2c, conv2.bias)
    print("max |nn.Conv1d - feed_forward| =", (by_conv_modules - by_matmul).abs().max().item())
    print("max |ffn_as_conv1d - feed_forward| =", (got - by_matmul).abs().max().item())


# %% [markdown]
# ## 1.3 Counting parameters
#
# $W_1$ has $d_\text{model}\,d_\text{ff}$ entries, $b_1$ has $d_\text{ff}$, $W_2$ has
# $d_\text{ff}\,d_\text{model}$, $b_2$ has $d_\text{model}$. With $d_\text{ff} = 4d_\text{model}$ that
# is about $8d_\text{model}^2$ per block, twice the $4d_\text{model}^2$ of attention's $W_Q, W_K,
# W_V, W_O$: **two thirds of a Transformer block's weights are in the FFN.**
#
# ### Exercise 1.3 — FFN parameter count  *(1 point, ~5 min)*
#
# **Goal:** `ffn_param_count(d_model, d_ff, activation)` returns the number of parameters of the
# FFN with biases, for `"relu"`, `"gelu"` and `"swiglu"` (section 1.4: three matrices
# $W_1, W_3 \in \mathbb{R}^{d_\text{model}\times d_\text{ff}}$ and $W_2$; here each matrix
# has a bias, unlike the bias-free SwiGLU of Exercise 1.4).
#
# <details><summary>Hint</summary>
#
# Count each weight matrix's entries and each bias's length. For SwiGLU, which matrix is extra
# and does it come with a bias?
#
# <details><summary>The key line</summary>
#
# ReLU/GELU: $2\,d_\text{model}d_\text{ff} + d_\text{ff} + d_\text{model}$. SwiGLU adds one more
# $d_\text{model}\times d_\text{ff}$ matrix and its $d_\text{ff}$ bias.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_3_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def ffn_param_count(d_model, d_ff, activation):
    """Number of parameters of the FFN (weights and biases).

    d_model, d_ff: int, activation: "relu" | "gelu" | "swiglu"  ->  int
    Example: ffn_param_count(512, 2048, "relu") -> 2099712
    """
    ### BEGIN SOLUTION
    n_in = 2 if activation == "swiglu" else 1  # expanding maps: W1 (and the gate W3)
    return n_in * (d_model * d_ff + d_ff) + d_ff * d_model + d_model
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_3_ffn_param_count", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.3 (1 point)
check_ffn_param_count(ffn_param_count)

# %% [markdown]
# ## 1.4 SwiGLU, the modern variant
#
# Shazeer (2020, "GLU Variants Improve Transformer") replaces the activation by a *gated*
# linear unit: one branch goes through Swish/SiLU, $\text{SiLU}(z) = z\,\sigma(z)$, and
# multiplies a second, linear branch elementwise:
#
# $$\text{FFN}_\text{SwiGLU}(x) = \big(\text{SiLU}(xW_1) \odot xW_3\big)\,W_2 .$$
#
# LLaMA and most open models since use it (without biases). To keep the parameter count of a
# $4d$ ReLU FFN, they shrink $d_\text{ff}$ to $\frac{2}{3}\cdot 4d$.
#
# ### Exercise 1.4 — SwiGLU  *(1 point, ~5 min)*
#
# **Goal:** `swiglu_ffn(x, W1, W3, W2)` (no biases), `F.silu` allowed.
#
# <details><summary>Hint</summary>
#
# Two projections of x: one goes through SiLU and gates the other elementwise; a third matrix
# brings the product back to the model width.
#
# <details><summary>The key line</summary>
#
# `(F.silu(x @ W1) * (x @ W3)) @ W2`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_4_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def swiglu_ffn(x, W1, W3, W2):
    """SwiGLU FFN: (SiLU(x W1) * (x W3)) W2.

    x: (..., d_model), W1, W3: (d_model, d_ff), W2: (d_ff, d_model)  ->  (..., d_model)
    Example: all-zero x -> all-zero output
    """
    ### BEGIN SOLUTION
    return (F.silu(x @ W1) * (x @ W3)) @ W2  # gate (..., d_ff) times linear branch
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_4_swiglu_ffn", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.4 (1 point)
check_swiglu_ffn(swiglu_ffn)

# %% [markdown]
# **Look.** Parameter counts from your function for three published shapes, and the share of
# the FFN in a block (attention with biases: $4d^2 + 4d$; two LayerNorms: $4d$).

# %% tags=["demo"]
with requires("Exercise 1.3"):
    for name, d, f, act in [("Transformer base (2017)", 512, 2048, "relu"),
                            ("GPT-2 small", 768, 3072, "gelu"),
                            ("SwiGLU at d_ff = 8d/3", 768, 2048, "swiglu")]:
        n_ffn = ffn_param_count(d, f, act)
        n_block = n_ffn + 4 * d * d + 4 * d + 4 * d
        print(f"{name:25s} FFN {n_ffn / 1e6:5.2f} M parameters = {n_ffn / n_block:.0%} of the block")


# %% [markdown]
# ## 2. Residual connections and the two kinds of block
#
# A **residual connection** wraps a sublayer $f$ as $R(f)(x) = x + f(x)$: the sublayer only has
# to learn a *correction* to its input, and the gradient has a path through the $+$ that skips
# $f$ entirely. A Transformer block is two residual sublayers — attention (mixing tokens) and
# the FFN (per token) — with LayerNorms. Where the norm goes is the difference between the two
# forms in the texts the course quotes:
#
# **Post-LN** (the tutorial [S2], the original Transformer): "the output of a layer is
# formulated as $\text{LayerNorm}(x + \text{Sublayer}(x))$",
#
# $$x \leftarrow \text{LN}_1\big(x + \text{MHA}(x)\big),\qquad x \leftarrow \text{LN}_2\big(x + \text{FFN}(x)\big).$$
#
# **Pre-LN** (the lecture notes [S1], GPT-2 and nearly every model since):
# $\text{TransformerBlock} = R(\Phi\circ\text{LN}) \circ R(\text{MSA}(d,H)\circ\text{LN})$. Read the
# composition right to left — attention first — and expand $R$:
#
# $$x \leftarrow x + \text{MHA}\big(\text{LN}_1(x)\big),\qquad x \leftarrow x + \text{FFN}\big(\text{LN}_2(x)\big).$$
#
# Mapping the lecture notes [S1]: its $\Phi$ is our FFN, its $\text{MSA}(d, H)$ is multi-head attention ([S1]'s
# heads have no output projection $W_O$ — `transformer_ref.MultiHeadAttention.seed000_msa`
# builds that variant; PyTorch and we use $W_O$), and its two LN's are two *different* norms
# with their own $\gamma, \beta$. In pre-LN the residual stream $x$ itself is never normalised
# inside a block; GPT-2 adds one final LayerNorm after the last block.
#
# `torch.nn.TransformerEncoderLayer(norm_first=False)` is post-LN, `norm_first=True` pre-LN.
#
# ![Post-LN and pre-LN Transformer blocks side by side](figures/pre_post_ln.svg)
#
# *Post-LN normalises every sum; pre-LN normalises only what enters each sublayer, so the residual stream (blue) runs through the block untouched.*

# %% [markdown]
# ### Exercise 2.1 — the post-LN block (the tutorial [S2])  *(2 points, ~5 min)*
#
# **Goal:** `post_ln_block(x, attn, ffn, norm1, norm2)` combines the given sublayers (each a
# function `(B, T, d) -> (B, T, d)`; `attn` is self-attention) into a post-LN block. The check
# compares with `torch.nn.TransformerEncoderLayer(norm_first=False)` holding the same weights.
#
# <details><summary>Hint</summary>
#
# Post-LN: add the sublayer's output to its input first, then normalise the sum. Once for
# attention, once for the FFN.
#
# <details><summary>The key line</summary>
#
# Two lines: `x = norm1(x + attn(x))`, then the same with `norm2` and `ffn`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def post_ln_block(x, attn, ffn, norm1, norm2):
    """Post-LN block (the tutorial [S2]): x = LN1(x + MHA(x)); x = LN2(x + FFN(x)).

    x: (B, T, d_model); attn, ffn, norm1, norm2: functions (B, T, d_model) -> (B, T, d_model)
    Example: with attn = ffn = (lambda h: 0 * h), the block is norm2(norm1(x))
    """
    ### BEGIN SOLUTION
    x = norm1(x + attn(x))  # add, then normalise the sum
    return norm2(x + ffn(x))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_1_post_ln_block", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.1 (2 points)
check_post_ln_block(post_ln_block)

# %% [markdown]
# ### Exercise 2.2 — the pre-LN block (the lecture notes [S1])  *(2 points, ~5 min)*
#
# **Goal:** `pre_ln_block(x, attn, ffn, norm1, norm2)`: [S1]'s
# $R(\Phi\circ\text{LN}_2)\circ R(\text{MSA}\circ\text{LN}_1)$, checked against
# `torch.nn.TransformerEncoderLayer(norm_first=True)`.
#
# <details><summary>Hint</summary>
#
# Pre-LN moves the norm inside the branch: only the sublayer's input is normalised, and the
# residual path stays untouched.
#
# <details><summary>The key line</summary>
#
# Normalise only what goes *into* each sublayer; add the sublayer's output to the
# un-normalised `x`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def pre_ln_block(x, attn, ffn, norm1, norm2):
    """Pre-LN block (the lecture notes [S1]): x = x + MHA(LN1(x)); x = x + FFN(LN2(x)).

    x: (B, T, d_model); attn, ffn, norm1, norm2: functions (B, T, d_model) -> (B, T, d_model)
    Example: with attn = ffn = (lambda h: 0 * h), the block returns x unchanged
    """
    ### BEGIN SOLUTION
    x = x + attn(norm1(x))  # R(MSA o LN1)
    return x + ffn(norm2(x))  # R(Phi o LN2)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_2_pre_ln_block", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.2 (2 points)
check_pre_ln_block(pre_ln_block)

# %% [markdown]
# **Look: a block from your own parts.** The next cell loads your `multi_head_attention`
# (chapter 3) and `layer_norm` (chapter 4) from your saved notebooks (save them first; a
# missing or failing one is replaced by the given one, and the cell says so). The FFN is your
# `feed_forward`. All weights are copied from a randomly initialised
# `torch.nn.TransformerEncoderLayer`, for both values of `norm_first`, and the outputs compared.

# %% tags=["demo"]
earlier = yours.model_parts("05_feed_forward_blocks", own=dict(  # chapters 01, 03, 04: yours?
    feed_forward=feed_forward, pre_ln_block=pre_ln_block, post_ln_block=post_ln_block))


def parts_from_torch(layer):
    # attn, ffn, norm1, norm2 as plain functions holding the layer's weights
    d, H = layer.self_attn.embed_dim, layer.self_attn.num_heads
    W_Q, W_K, W_V = (w.T for w in layer.self_attn.in_proj_weight.chunk(3))  # (d, d) row form
    b_Q, b_K, b_V = layer.self_attn.in_proj_bias.chunk(3)
    W_O, b_O = layer.self_attn.out_proj.weight.T, layer.self_attn.out_proj.bias
    ones = lambda h: torch.cat([h, torch.ones(*h.shape[:-1], 1)], dim=-1)  # biases as a row

    def attn(h):
        W = [torch.cat([w, b[None]]) for w, b in ((W_Q, b_Q), (W_K, b_K), (W_V, b_V))]
        return earlier.multi_head_attention(ones(h), ones(h), *W, W_O, H) + b_O

    W1, b1 = layer.linear1.weight.T, layer.linear1.bias  # nn.Linear stores (out, in): transpose
    W2, b2 = layer.linear2.weight.T, layer.linear2.bias
    norm = earlier.layer_norm
    return (attn,
            lambda h: feed_forward(h, W1, b1, W2, b2, "relu"),
            lambda h: norm(h, layer.norm1.weight, layer.norm1.bias, layer.norm1.eps),
            lambda h: norm(h, layer.norm2.weight, layer.norm2.bias, layer.norm2.eps))


with requires("Exercise 2.1, Exercise 2.2 and Exercise 1.1"), torch.no_grad():
    torch.manual_seed(2)
    x = torch.randn(2, 7, 16)
    for norm_first, block in [(False, post_ln_block), (True, pre_ln_block)]:
        layer = nn.TransformerEncoderLayer(16, 4, 64, dropout=0.0, batch_first=True,
                                           norm_first=norm_first)
        for p in layer.parameters():  # move norms and biases off their 1/0 initial values
            p.add_(0.1 * torch.randn_like(p))
        layer.train()  # (dropout is 0) keeps torch on its plain, non-fused path
        got = block(x, *parts_from_torch(layer))
        print(f"norm_first={norm_first!s:5}: max |yours - nn.TransformerEncoderLayer| = "
              f"{(got - layer(x)).abs().max().item():.2e}")


# %% [markdown]
# ## 3. Pre-LN or post-LN? Gradients at initialisation
#
# In post-LN every path from the loss back to an early layer passes through a LayerNorm per
# block; in pre-LN there is a clean path through the residual additions alone. Xiong et al.
# (2020, "On Layer Normalization in the Transformer Architecture") showed that at initialisation
# post-LN's gradients are largest for the parameters near the output, which is why post-LN needs
# a learning-rate warm-up to train at all, while pre-LN's are similar across layers and it trains
# without one. Let us measure it.
#
# ### Exercise 3.1 — gradient norm per block  *(2 points, ~10 min)*
#
# **Goal:** `grad_norm_per_layer(blocks, x, target)`: run `x` through the modules in `blocks`
# in order, take the loss `((h - target) ** 2).mean()`, backpropagate, and return a 1-d tensor
# with one entry per module: the norm of the gradient of **all** of that module's parameters
# taken together, $\sqrt{\sum_{p}\sum (\partial L/\partial p)^2}$.
#
# <details><summary>Hint</summary>
#
# Backpropagate the loss once, then for each block gather every parameter's gradient and take
# one norm over all of them together (not a sum of per-parameter norms).
#
# <details><summary>The key line</summary>
#
# `loss.backward()`, then for each block
# `torch.sqrt(sum((p.grad ** 2).sum() for p in block.parameters()))`; `torch.stack` the list.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def grad_norm_per_layer(blocks, x, target):
    """One gradient norm per module of `blocks` for the loss mean((blocks(x) - target)²).

    blocks: list of nn.Module, x, target: (B, T, d_model)  ->  (len(blocks),) tensor
    Example: for 3 blocks it returns a tensor of 3 positive numbers
    """
    ### BEGIN SOLUTION
    h = x
    for block in blocks:
        h = block(h)
    ((h - target) ** 2).mean().backward()
    norms = [torch.sqrt(sum((p.grad ** 2).sum() for p in b.parameters())) for b in blocks]
    return torch.stack(norms)  # (L,)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_1_grad_norm_per_layer", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.1 (2 points)
check_grad_norm_per_layer(grad_norm_per_layer)

# %% [markdown]
# **Look.** Stacks of 24 blocks ($d_\text{model} = 64$, 4 heads, PyTorch's default
# initialisation), the same input and random target. The pre-LN stack ends with a final
# LayerNorm, as GPT-2 does (its gradient is not plotted).

# %% tags=["demo"]
with requires("Exercise 3.1"):
    torch.manual_seed(3)
    L, d = 24, 64
    x, target = torch.randn(8, 16, d), torch.randn(8, 16, d)
    curves = {}
    for norm_first in (False, True):
        blocks = [yours.YourBlock(d, 4, earlier, activation="relu", norm_first=norm_first)
                  for _ in range(L)]  # your attention, norms, FFN and blocks, PyTorch's init
        if norm_first:
            blocks.append(yours.YourNorm(d, earlier))  # the final norm of a pre-LN stack
        curves["pre-LN" if norm_first else "post-LN"] = grad_norm_per_layer(blocks, x, target)[:L]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for name, g in curves.items():
        ax.plot(range(1, L + 1), g.detach(), marker="o", ms=3, label=name)
        print(f"{name:8s} last block / first block gradient norm: {(g[-1] / g[0]).item():.2f}")
    ax.set_xlabel("block"); ax.set_ylabel("gradient norm"); ax.legend()
    ax.set_title("gradient norm per block at initialisation")
    plt.tight_layout(); plt.show()

# %% [markdown]
# Read the plot. Post-LN's last block gets a gradient several times larger than the blocks
# below it: a learning rate that suits the top is too large there, hence the warm-up. Pre-LN's
# gradients change slowly and smoothly from block to block. (Deeper stacks and other
# initialisations make the gap larger; Xiong et al. derive it as growing with depth.) The
# price of pre-LN: the residual stream grows with depth because nothing normalises it, hence
# the final LayerNorm.
#
# ## Summary
#
# - FFN (the tutorial [S2]): $\text{act}(xW_1 + b_1)W_2 + b_2$, $d_\text{ff} = 4d_\text{model}$, applied to
#   every token alone: a $1\times 1$ convolution. It holds about two thirds of a block's weights.
# - SwiGLU: $(\text{SiLU}(xW_1)\odot xW_3)W_2$, three matrices.
# - Residual: $R(f)(x) = x + f(x)$. Post-LN (the tutorial [S2]): $\text{LN}(x + f(x))$. Pre-LN (the lecture notes [S1]):
#   $x + f(\text{LN}(x))$ — the norm inside the branch, the stream untouched.
# - At initialisation post-LN concentrates gradient near the output (warm-up needed); pre-LN
#   spreads it evenly.
#
# **Going further.** RMSNorm instead of LayerNorm in pre-LN blocks (LLaMA); "sandwich" and
# DeepNorm variants that rescale the residual to train very deep post-LN models; mixture of
# experts replaces the one FFN by several, of which each token uses a few.
