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
# # Chapter 3 — Multi-head attention
#
# **By the end of this chapter you can** build multi-head attention three ways — [S1]'s loop
# over independent heads, the batched version with `reshape` and `transpose`, and the full
# layer with the output projection $W_O$ — count its parameters, use one fused QKV projection,
# run it as cross-attention between a decoder and an encoder, and load the weights of PyTorch's
# `nn.MultiheadAttention` into your own code and get the same numbers.
#
# **Builds on:** chapter 1 (scaled dot-product attention) and chapter 2 (masks, broadcasting
# over `(B, H, T_q, T_k)`).
#
# **Time:** about 90 minutes (7 exercises, ~60 minutes of coding).
#
# **Points: 12 in total** — Ex 1.1 (2), 2.1 (1), 2.2 (1), 3.1 (4), 3.2 (1), 3.3 (1), 5.1 (2).
#
# **How to work.** Run the cells from the top. Replace `raise NotImplementedError()` with your
# code, run the cell, then its check. A failed check names the mistake when it recognises it
# ("scaled by sqrt(d_model) instead of sqrt(d_k)"). Grading runs more (hidden) cases.
#
# **Notation.** Tokens are rows: $X \in \mathbb{R}^{T\times d_\text{model}}$ (with a batch axis,
# `(B, T, d_model)`), $Q = XW_Q$, and attention is
# $\text{softmax}(QK^\top/\sqrt{d_k} + M)\,V$ with the softmax over the keys. $H$ heads of
# width $d_k = d_\text{model}/H$ each.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup (read-only). Run this cell first: it loads the libraries and this chapter's checks.
import math

import matplotlib.pyplot as plt
import torch
import torch.nn as nn

from autograder.checks import requires
from autograder.checks.multihead_attention import (
    check_fused_qkv,
    check_merge_heads,
    check_mha_parameter_count,
    check_msa_loop,
    check_multi_head_attention,
    check_split_heads,
    check_weights_from_torch,
)

torch.set_printoptions(precision=3, sci_mode=False)


def attention(q, k, v, mask=None, scale=None):
    # chapter 1's softmax(q kᵀ · scale + M) v, given here so this chapter can use it.
    # (No fully masked rows occur in this chapter.)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (..., T_q, d_v)


# %% [markdown]
# ## 1. Several heads: [S1]'s definition
#
# One attention "head" computes one set of weights: each query gets *one* distribution over the
# keys. But a token may need several things at once — its verb, the noun an adjective belongs
# to, the previous word. The tutorial [S2]: multi-head attention "allows the model to jointly attend to
# information from different representation subspaces". Give the model $H$ heads, each with its
# own projections, and let each look for something else.
#
# The lecture notes [S1] define it with column vectors, $Q_h, K_h, V_h \in \mathbb{R}^{d'\times d}$ for
# $h = 1, \dots, H$:
#
# $$\text{MSA}(Q, K, V) = [\text{SA}(Q_1, K_1, V_1), \dots, \text{SA}(Q_H, K_H, V_H)],$$
#
# and notes that "generally the embedding dimension of each head is chosen as $d/H$". Each SA is
# chapter 1's unscaled column-form self-attention, and the $[\,\cdot\,]$ stacks the $H$
# outputs of size $d'$ into one vector of size $H d'$ per token.
#
# **In our row form** a head is $W_Q^{(h)} = Q_h^\top \in \mathbb{R}^{d\times d'}$ (and the same
# for $K$, $V$), $\text{head}_h = \text{softmax}\big(XW_Q^{(h)} (XW_K^{(h)})^\top\big) XW_V^{(h)}
# \in \mathbb{R}^{T\times d'}$, and the heads are concatenated along the feature axis:
#
# $$\text{MSA}(X) = \big[\text{head}_1 \;|\; \text{head}_2 \;|\; \dots \;|\; \text{head}_H\big] \in \mathbb{R}^{T \times H d'} .$$
#
# With $d' = d/H$ the output has the input's width $d$, and all heads together cost about as
# much as one head of width $d$.

# %% [markdown]
# ### Exercise 1.1 — [S1]'s MSA as a loop over heads  *(2 points, ~10 min)*
#
# **Goal:** `msa_loop(X, heads)` where `heads` is a sequence of `(W_Q, W_K, W_V)` triples, each
# `(d, d')`: run each head's **unscaled** self-attention (the lecture notes [S1] do not divide by
# $\sqrt{d'}$) and concatenate the outputs in order along the last axis.
#
# <details><summary>Hint</summary>
#
# Each head is one call of your attention on its own projections of X. Run them one by one and
# put the heads' outputs side by side along the feature axis.
#
# <details><summary>The key line</summary>
#
# `attention(X @ W_Q, X @ W_K, X @ W_V, scale=1.0)` is one head, `(..., T, d')`. Collect them
# in a list and `torch.cat(outputs, dim=-1)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def msa_loop(X, heads):
    """[S1]'s MSA in row form: [head_1 | ... | head_H], each head unscaled self-attention.

    X: (..., T, d); heads: sequence of H triples (W_Q, W_K, W_V), each (d, d')
    -> (..., T, H * d')
    Example: one head with W_Q = W_K = W_V = torch.eye(d) -> softmax(X Xᵀ) X
    """
    ### BEGIN SOLUTION
    outputs = [attention(X @ W_Q, X @ W_K, X @ W_V, scale=1.0) for W_Q, W_K, W_V in heads]
    return torch.cat(outputs, dim=-1)  # (..., T, H * d'), head 1 first
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_1_msa_loop", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.1 (2 points)
check_msa_loop(msa_loop)

# %% [markdown]
# ## 2. All heads at once: split and merge
#
# A Python loop over heads is slow on a GPU and clumsy. Notice that the $H$ matrices
# $W_Q^{(h)} \in \mathbb{R}^{d\times d_k}$ placed side by side form **one** matrix
# $W_Q = [W_Q^{(1)} | \dots | W_Q^{(H)}] \in \mathbb{R}^{d\times H d_k}$, and $XW_Q$ holds every
# head's queries at once: head $h$ owns columns $h\,d_k, \dots, (h+1)\,d_k - 1$.
#
# To run attention on all heads in one batched call we need the head to be an axis of its
# own, *before* the time axis:
#
# ```
# (B, T, d_model) --view--> (B, T, H, d_k) --transpose(1, 2)--> (B, H, T, d_k)     split_heads
# (B, H, T, d_k) --transpose(1, 2)--> (B, T, H, d_k) --reshape--> (B, T, H*d_k)     merge_heads
# ```
#
# Why not directly `reshape(B, H, T, d_k)`? A reshape never moves numbers; it only re-reads the
# same memory with new axis sizes. The memory of `(B, T, d_model)` is ordered position by
# position, so reading its first $T\cdot d_k$ numbers as "head 0" gives head 0 the features of
# *several positions*. Only `view` on the last axis plus a `transpose` keeps each head's
# numbers at their own positions.
#
# ![Split and merge heads: (B, T, d_model) to (B, H, T, d_k) and back, then W_O](figures/split_merge_heads.svg)
#
# *Four heads: each owns d_k adjacent columns of Q (and of K and V); split_heads makes the head an axis, merge_heads puts the heads side by side again, W_O mixes them.*

# %% [markdown]
# ### Exercise 2.1 — split the heads  *(1 point, ~5 min)*
#
# **Goal:** `(B, T, d_model)` → `(B, H, T, d_k)` with `d_k = d_model // n_head`; head `h` gets
# features `h*d_k .. (h+1)*d_k - 1` of every position.
#
# <details><summary>Hint</summary>
#
# The feature axis is really (heads, features per head). Cut it in two, then move the head axis
# in front of the time axis.
#
# <details><summary>The key line</summary>
#
# `x.view(B, T, n_head, d_k).transpose(1, 2)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def split_heads(x, n_head):
    """(B, T, d_model) -> (B, H, T, d_k): head h gets features h*d_k .. (h+1)*d_k - 1.

    Example: x = torch.arange(4.).view(1, 1, 4), n_head=2 -> [[[[0, 1]], [[2, 3]]]]
    """
    ### BEGIN SOLUTION
    B, T, d_model = x.shape
    return x.view(B, T, n_head, d_model // n_head).transpose(1, 2)  # (B, H, T, d_k)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_1_split_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.1 (1 point)
check_split_heads(split_heads)

# %% [markdown]
# ### Exercise 2.2 — merge the heads  *(1 point, ~5 min)*
#
# **Goal:** the inverse, `(B, H, T, d_k)` → `(B, T, H*d_k)`: Concat(head_1, ..., head_H) for
# every position, head 0's features first.
#
# <details><summary>Hint</summary>
#
# Undo Exercise 2.1 step by step in reverse order. After swapping axes the memory is no longer
# in order: which reshaping operation copes with that?
#
# <details><summary>The key line</summary>
#
# `x.transpose(1, 2)` is `(B, T, H, d_k)` but no longer contiguous in memory, so use
# `.reshape(B, T, H * d_k)` (or `.contiguous().view(...)`).
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def merge_heads(x):
    """(B, H, T, d_k) -> (B, T, H * d_k): the heads concatenated along the features.

    Example: merge_heads(split_heads(x, n_head)) == x
    """
    ### BEGIN SOLUTION
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)  # (B, T, H*d_k)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_2_merge_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.2 (1 point)
check_merge_heads(merge_heads)

# %% [markdown]
# **Look: the batched version equals the loop.** Put the heads' matrices side by side, split,
# attend (unscaled, as the lecture notes [S1]), merge — and compare with your `msa_loop`. Then the bug from
# above: `reshape` straight to `(B, H, T, d_k)`.

# %% tags=["demo"]
with requires("Exercise 2.1, Exercise 2.2 and Exercise 1.1"):
    torch.manual_seed(0)
    B, T, d, H = 2, 5, 8, 2
    X = torch.randn(B, T, d, dtype=torch.float64)
    heads = [tuple(torch.randn(d, d // H, dtype=torch.float64) for _ in range(3)) for _ in range(H)]
    W_Q, W_K, W_V = (torch.cat([h[j] for h in heads], dim=1) for j in range(3))  # (d, H*d_k)
    q, k, v = split_heads(X @ W_Q, H), split_heads(X @ W_K, H), split_heads(X @ W_V, H)
    batched = merge_heads(attention(q, k, v, scale=1.0))
    print("max |batched - loop| =", (batched - msa_loop(X, heads)).abs().max().item())
    bad = [t.reshape(B, H, T, d // H) for t in (X @ W_Q, X @ W_K, X @ W_V)]
    wrong = attention(*bad, scale=1.0).reshape(B, T, d)
    print("max |reshape without transpose - loop| =", (wrong - msa_loop(X, heads)).abs().max().item())


# %% [markdown]
# ## 3. The output projection $W_O$, parameters, and a fused QKV
#
# The tutorial [S2] and the blog post [S5] (and Vaswani et al., 2017) add one more matrix after the concatenation:
#
# $$\text{MultiHead}(X_q, X_{kv}) = \text{Concat}(\text{head}_1, \dots, \text{head}_H)\,W_O,\qquad
# \text{head}_h = \text{softmax}\!\left(\frac{Q_h K_h^\top}{\sqrt{d_k}} + M\right) V_h ,$$
#
# with $Q = X_q W_Q$, $K = X_{kv} W_K$, $V = X_{kv} W_V$ split into heads and
# $W_O \in \mathbb{R}^{H d_k \times d_\text{model}}$. The tutorial [S2] writes
# $\text{head}_i = \text{Attention}(QW_i^Q, KW_i^K, VW_i^V)$ — the same thing, with its $Q, K, V$
# meaning the layer's inputs. The blog post [S5] writes the projection per token as
# $\tilde z_i = W_O z_i$ with $W_O \in \mathbb{R}^{d_\text{model}\times d_v}$ and, for all
# tokens, $\tilde Z = Z W_O^\top$: its $W_O$ is stored the other way round (out, in), exactly
# like PyTorch's (section 5). Ours is $W_O^{\text{ours}} = (W_O^{\text{[S5]}})^\top$.
#
# **What $W_O$ adds.** Without it, output feature $c$ comes from exactly one head — the heads
# never talk to each other, and [S1]'s output is just their results side by side. Since
# $\text{Concat}(\text{head}_1..\text{head}_H)\,W_O = \sum_h \text{head}_h\, W_O^{[h]}$ (where
# $W_O^{[h]}$ is the block of rows $h\,d_k .. (h+1)\,d_k-1$), $W_O$ lets every output feature
# mix the findings of **all** heads, and it maps the $H d_k$ concatenated features back to
# $d_\text{model}$ even when $H d_k \neq d_\text{model}$.
#
# **The scale.** Each head's scores live in $d_k$ dimensions, so their variance is $d_k$ (chapter
# 1): divide by $\sqrt{d_k}$, *not* $\sqrt{d_\text{model}}$.
#
# **Cross-attention** (the survey [S4]: the decoder "uses the encoder's output as the key-value pairs
# and its own hidden state as the query") is the same layer with $X_q \neq X_{kv}$: $T_q$
# queries from the decoder, $T_k$ keys and values from the encoder, scores of shape
# `(B, H, T_q, T_k)`. Self-attention is the case $X_{kv} = X_q$.

# %% [markdown]
# ### Exercise 3.1 — multi-head attention  *(4 points, ~20 min)*
#
# **Goal:** the full layer for batch-first inputs. `x_q (B, T_q, d_model)`,
# `x_kv (B, T_k, d_model)` (pass `x_kv = x_q` for self-attention), all four weights
# `(d_model, d_model)` in row form, `mask` a boolean keep mask broadcastable to
# `(B, H, T_q, T_k)` or `None`. Use your `split_heads`, `merge_heads` and the given
# `attention` (it scales by $1/\sqrt{d_k}$ with $d_k$ = the last axis of its `q`).
#
# <details><summary>Hint</summary>
#
# Project, split into heads, attend, merge, project out. Queries come from one input, keys and
# values from the other; every function you need is already written.
#
# <details><summary>The key line</summary>
#
# `q = split_heads(x_q @ W_Q, n_head)`, and `k`, `v` from `x_kv` — `split_heads` reads `T`
# from its own argument, so $T_k \ne T_q$ needs no special care. `attention(q, k, v, mask)` is
# `(B, H, T_q, d_k)`; `merge_heads(...) @ W_O`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def multi_head_attention(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    """Concat(head_1, ..., head_H) W_O with head_h = softmax(Q_h K_hᵀ / sqrt(d_k) + M) V_h.

    x_q: (B, T_q, d_model), x_kv: (B, T_k, d_model); W_Q, W_K, W_V, W_O: (d_model, d_model);
    mask: bool, broadcastable to (B, H, T_q, T_k), True = may attend  ->  (B, T_q, d_model)
    Example: with W_O = I and n_head = 1 it is chapter 1's attention of x_q W_Q, x_kv W_K, x_kv W_V
    """
    ### BEGIN SOLUTION
    q = split_heads(x_q @ W_Q, n_head)  # (B, H, T_q, d_k)
    k = split_heads(x_kv @ W_K, n_head)  # (B, H, T_k, d_k)
    v = split_heads(x_kv @ W_V, n_head)  # (B, H, T_k, d_k)
    heads = attention(q, k, v, mask)  # (B, H, T_q, d_k), scaled by 1/sqrt(d_k)
    return merge_heads(heads) @ W_O  # (B, T_q, H*d_k) @ (H*d_k, d_model)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_1_multi_head_attention", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.1 (4 points)
check_multi_head_attention(multi_head_attention)

# %% [markdown]
# **Look: attention maps per head.** Six tokens, four heads, causal mask. Each head has its own
# $W_Q^{(h)}, W_K^{(h)}$, so each spreads its attention differently over the same past.
# (The weights are random, not trained: the maps differ, but no head has "learned" a role.)

# %% tags=["demo"]
tokens = ["the", "cat", "sat", "on", "the", "mat"]
with requires("Exercise 2.1"):
    torch.manual_seed(3)
    T, d_model, H = len(tokens), 16, 4
    x = torch.randn(1, T, d_model)
    Wq, Wk = (torch.randn(d_model, d_model) * 1.5 / math.sqrt(d_model) for _ in range(2))
    q, k = split_heads(x @ Wq, H), split_heads(x @ Wk, H)  # (1, H, T, d_k)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    weights = attention(q, k, torch.eye(T).expand(1, H, T, T), causal)  # v = I -> the weights
    fig, axes = plt.subplots(1, H, figsize=(13, 3.4))
    for h, ax in enumerate(axes):
        im = ax.imshow(weights[0, h], vmin=0, vmax=1, cmap="viridis")
        ax.set_title(f"head {h}")
        ax.set_xticks(range(T), tokens, rotation=90)
        ax.set_yticks(range(T), tokens if h == 0 else [])
    fig.colorbar(im, ax=axes, shrink=0.8, label="weight")
    plt.show()


# %% [markdown]
# ### Counting parameters
#
# The four projections are $d_\text{model}\times d_\text{model}$ each, plus (optionally) a bias
# of $d_\text{model}$ each: $4d_\text{model}^2 + 4d_\text{model}$. The number of heads does not
# appear — more heads means *narrower* heads, not more weights. For the original Transformer
# ($d_\text{model} = 512$, $H = 8$) that is 1,050,624 per attention layer.

# %% [markdown]
# ### Exercise 3.2 — parameters of a multi-head attention layer  *(1 point, ~3 min)*
#
# **Goal:** the number of parameters of one layer with $d_k = d_\text{model}/H$, as an `int`:
# $W_Q, W_K, W_V, W_O$ and, if `bias`, their four biases.
#
# <details><summary>Hint</summary>
#
# Count the four projection matrices' entries, plus the four bias vectors when there are biases.
# Does the number of heads change any of their shapes?
#
# <details><summary>The key line</summary>
#
# It does not depend on `n_head`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mha_parameter_count(d_model, n_head, bias=True):
    """Parameters of W_Q, W_K, W_V, W_O (d_model x d_model each) and their biases.

    Example: mha_parameter_count(512, 8) -> 1050624
    """
    ### BEGIN SOLUTION
    weights = 4 * d_model * d_model  # all heads together: d_model x (H * d_k) per projection
    biases = 4 * d_model if bias else 0
    return weights + biases
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_2_mha_parameter_count", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.2 (1 point)
check_mha_parameter_count(mha_parameter_count)

# %% [markdown]
# ### A fused QKV projection
#
# In self-attention $Q$, $K$ and $V$ are all projections of the same $X$. Putting
# $W_{QKV} = [W_Q \,|\, W_K \,|\, W_V] \in \mathbb{R}^{d\times 3d}$ side by side computes all three
# with one matrix product — one large kernel instead of three small ones, which is faster on a
# GPU — and then splits the result. (Cross-attention cannot fuse $Q$ with $K, V$: they come
# from different inputs.)

# %% [markdown]
# ### Exercise 3.3 — fused QKV  *(1 point, ~3 min)*
#
# **Goal:** `x (B, T, d)`, `W_QKV (d, 3d)` → the tuple `(q, k, v)`, each `(B, T, d)`.
#
# <details><summary>Hint</summary>
#
# One product with the fused matrix gives the three projections side by side along the last
# axis; cut that axis into three equal parts.
#
# <details><summary>The key line</summary>
#
# `(x @ W_QKV).split(d, dim=-1)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_3_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def fused_qkv(x, W_QKV):
    """q, k, v = x W_Q, x W_K, x W_V from one product with W_QKV = [W_Q | W_K | W_V].

    x: (B, T, d), W_QKV: (d, 3d)  ->  (q, k, v), each (B, T, d)
    """
    ### BEGIN SOLUTION
    d = W_QKV.shape[1] // 3
    q, k, v = (x @ W_QKV).split(d, dim=-1)  # (B, T, 3d) -> three (B, T, d)
    return q, k, v
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_3_fused_qkv", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.3 (1 point)
check_fused_qkv(fused_qkv)

# %% tags=["demo"]
with requires("Exercise 3.3 and Exercise 3.2"):
    torch.manual_seed(4)
    d_model, H = 16, 4
    Ws = [torch.randn(d_model, d_model) / 4 for _ in range(4)]
    x = torch.randn(2, 5, d_model)
    q, k, v = fused_qkv(x, torch.cat(Ws[:3], dim=1))
    print("fused q == x @ W_Q:", torch.allclose(q, x @ Ws[0]),
          "  k:", torch.allclose(k, x @ Ws[1]), "  v:", torch.allclose(v, x @ Ws[2]))
    print("weights in Ws:", sum(W.numel() for W in Ws))
    for H in (1, 2, 4, 8, 16):
        print(f"mha_parameter_count(16, {H:2d}, bias=False) =", mha_parameter_count(16, H, bias=False))

# %% [markdown]
# ## 4. Cross-attention: a decoder reading an encoder
#
# A translation model encodes a source sentence of $T_k = 7$ tokens (two of them padding) and
# decodes a target of $T_q = 4$ tokens so far. Each decoder position queries the encoder's
# outputs; the key padding mask (chapter 2) hides the encoder's pad positions. The scores are
# $T_q \times T_k$ — not square. The maps below are each head's weights for sequence 0.

# %% tags=["demo"]
with requires("Exercise 3.1 and Exercise 2.1"):
    torch.manual_seed(5)
    B, T_q, T_k, d_model, H = 2, 4, 7, 16, 2
    decoder_states = torch.randn(B, T_q, d_model)  # queries
    encoder_out = torch.randn(B, T_k, d_model)  # keys and values ("memory")
    lengths = torch.tensor([5, 7])
    key_padding = (torch.arange(T_k) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
    W_Q, W_K, W_V, W_O = (torch.randn(d_model, d_model) / 4 for _ in range(4))
    y = multi_head_attention(decoder_states, encoder_out, W_Q, W_K, W_V, W_O, H, key_padding)
    print("output:", tuple(y.shape), "= (B, T_q, d_model)")
    q, k = split_heads(decoder_states @ W_Q, H), split_heads(encoder_out @ W_K, H)
    weights = attention(q, k, torch.eye(T_k).expand(B, H, T_k, T_k), key_padding)
    fig, axes = plt.subplots(1, H, figsize=(9, 2.8))
    for h, ax in enumerate(axes):
        ax.imshow(weights[0, h], vmin=0, vmax=1, cmap="viridis")
        ax.set_title(f"head {h}: decoder -> encoder")
        ax.set_xlabel("encoder position (5, 6 = padding)")
    axes[0].set_ylabel("decoder position")
    plt.tight_layout()
    plt.show()


# %% [markdown]
# ## 5. Loading PyTorch's weights
#
# `torch.nn.MultiheadAttention` computes the same function. If you can load its weights into
# your layer and get the same output, your layer is right *and* you can read other people's
# checkpoints. Two conventions to translate:
#
# - PyTorch's `nn.Linear` stores its weight as `(out_features, in_features)` and computes
#   $y = xW^\top$ ([S5]'s form $\tilde Z = ZW_O^\top$). Our row form computes $y = xW$ with
#   $W$ of shape `(in, out)`. So **ours = theirs transposed**. With square matrices the wrong
#   choice still runs and silently computes something else.
# - `in_proj_weight` is $W_Q, W_K, W_V$ (in PyTorch's layout) **stacked along the rows**:
#   shape `(3 d_model, d_model)`, rows $0..d-1$ for $Q$, then $K$, then $V$. `out_proj.weight`
#   is $W_O$ (also `(out, in)`).
#
# (Its boolean masks are the opposite of ours: `True` = blocked. We pass none here.)

# %% [markdown]
# ### Exercise 5.1 — PyTorch's weights in our row form  *(2 points, ~10 min)*
#
# **Goal:** given `m = nn.MultiheadAttention(d_model, H, bias=False, batch_first=True)`, return
# `(W_Q, W_K, W_V, W_O)`, each `(d_model, d_model)` in row form, so that your
# `multi_head_attention(x, x, W_Q, W_K, W_V, W_O, H)` equals `m(x, x, x)[0]`.
#
# <details><summary>Hint</summary>
#
# PyTorch stores the three input projections stacked in one (out, in) matrix, while our form
# multiplies rows by (in, out) matrices. Cut the stack in three and turn each piece around; the
# output projection the same way.
#
# <details><summary>The key line</summary>
#
# `m.in_proj_weight.detach().chunk(3, dim=0)` gives the three `(out, in)` blocks; transpose
# each (`.T`). Same for `m.out_proj.weight`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex5_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def weights_from_torch(m):
    """Row-form (W_Q, W_K, W_V, W_O) of an nn.MultiheadAttention without biases.

    m.in_proj_weight: (3 d_model, d_model) = [W_Q; W_K; W_V] in (out, in) layout
    -> four (d_model, d_model) tensors with  Q = x @ W_Q  etc.
    """
    ### BEGIN SOLUTION
    W_q, W_k, W_v = m.in_proj_weight.detach().chunk(3, dim=0)  # (out, in) each
    return W_q.T, W_k.T, W_v.T, m.out_proj.weight.detach().T  # (in, out): x @ W
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_1_weights_from_torch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 5.1 (2 points)
check_weights_from_torch(weights_from_torch)

# %% [markdown]
# **Look: the same numbers as PyTorch.** Self-attention, cross-attention, and a causal mask
# (converted to PyTorch's convention with `~`).

# %% tags=["demo"]
with requires("Exercise 5.1 and Exercise 3.1"):
    torch.manual_seed(6)
    d_model, H = 16, 4
    m = nn.MultiheadAttention(d_model, H, bias=False, batch_first=True)
    Ws = weights_from_torch(m)
    x, memory = torch.randn(2, 5, d_model), torch.randn(2, 9, d_model)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    with torch.no_grad():
        pairs = {
            "self-attention": (multi_head_attention(x, x, *Ws, H), m(x, x, x)[0]),
            "cross-attention": (multi_head_attention(x, memory, *Ws, H), m(x, memory, memory)[0]),
            "causal": (multi_head_attention(x, x, *Ws, H, mask=causal),
                       m(x, x, x, attn_mask=~causal)[0]),  # PyTorch: True = blocked
        }
    for name, (ours, theirs) in pairs.items():
        print(f"{name:16s} max |ours - nn.MultiheadAttention| = {(ours - theirs).abs().max():.2e}")

# %% [markdown]
# ## Summary
#
# - [S1]'s multi-head self-attention is $H$ independent heads of width $d/H$, outputs
#   concatenated. The batched form computes the same thing with one projection per role:
#   `view(B, T, H, d_k).transpose(1, 2)` to split, the inverse to merge. A `reshape` without the
#   transpose runs and mixes positions.
# - The tutorial [S2] and the blog post [S5] add $W_O$: $\text{Concat}(\text{heads})W_O = \sum_h \text{head}_h W_O^{[h]}$
#   mixes information across heads and maps back to $d_\text{model}$.
# - Scale each head by $1/\sqrt{d_k}$, not $1/\sqrt{d_\text{model}}$.
# - Parameters: $4d_\text{model}^2$ (+ $4d_\text{model}$ biases), whatever $H$. A fused QKV
#   projection is one $(d, 3d)$ matrix product.
# - Cross-attention: queries from the decoder, keys and values from the encoder, scores
#   $T_q\times T_k$, key padding on the last axis.
# - PyTorch stores weights as (out, in): ours are theirs transposed; `in_proj_weight` stacks
#   $W_Q; W_K; W_V$ along the rows.
#
# **Going further.** `transformer_ref.MultiHeadAttention` (the same layer as an `nn.Module`, with
# biases, a fused option, a KV cache and `load_from_torch`); multi-query and grouped-query
# attention (Shazeer, 2019; Ainslie et al., 2023) share keys and values between heads to shrink
# the KV cache; "Are Sixteen Heads Really Better than One?" (Michel et al., 2019) prunes heads
# after training.
