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
# # Chapter 2 — Masking: who may look at whom
#
# **By the end of this chapter you can** build the two masks every Transformer uses — the
# causal mask of a decoder and the padding mask of a batch — as boolean matrices and in [S4]'s additive $0/-\infty$ form, combine them and broadcast them over heads, write masked
# attention that never produces `nan`, and *prove* that a layer is causal, once by perturbing
# the future and once with gradients.
#
# **Builds on:** chapter 1 (`scaled_dot_product_attention`, the stable softmax, the notation).
#
# **Time:** about 75 minutes (8 exercises, ~50 minutes of coding).
#
# **Points: 10 in total** — Ex 1.1 (1), 1.2 (1), 2.1 (1), 2.2 (1), 2.3 (1), 3.1 (3), 4.1 (1), 4.2 (1).
#
# **How to work.** Run the cells from the top. Replace `raise NotImplementedError()` with your
# code, run the cell, then run the check below it. A failed check says what is wrong, often by
# name ("off-by-one diagonal"). Grading runs more (hidden) cases: one token, fully masked rows,
# gradients.
#
# **Notation** (as in chapter 1): tokens are rows, $X \in \mathbb{R}^{n\times d}$, and
#
# $$\text{Attention}(Q, K, V) = \text{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V ,$$
#
# softmax over the keys (the last axis). Scores and masks have the shape `(B, H, T_q, T_k)`:
# batch, head, query position, key position. Row $i$ of a mask belongs to query $i$, column $j$
# to key $j$.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup (read-only). Run this cell first: it loads the libraries and this chapter's checks.
import math

import matplotlib.pyplot as plt
import torch

from autograder.checks import requires
from autograder.checks.masking import (
    check_causal_mask,
    check_decoder_self_attention_mask,
    check_future_leak,
    check_grad_of_position,
    check_masked_attention,
    check_padding_mask_from_ids,
    check_padding_mask_from_lengths,
    check_to_additive,
)

torch.set_printoptions(precision=3, sci_mode=False)


# %% [markdown]
# ## 1. Why masks, and the causal mask
#
# Attention lets every query look at every key. Two situations forbid some of those looks:
#
# 1. **Causality.** A decoder generates text one token at a time; when it learns to predict
#    token $i+1$ it must not peek at it. The survey [S4]: "The decoder attends to its own previous
#    outputs, but masking is applied to prevent attending to future tokens (to maintain
#    causality during generation)." Query $i$ may see keys $j \le i$ only.
# 2. **Padding.** Sentences in a batch have different lengths; the short ones are filled up
#    with a *pad* token so the batch is a rectangle. Those pad positions are not words: no
#    query should take anything from them (section 2).
#
# In this course a mask is a **boolean keep mask**: `True` where query $i$ *may* attend to key
# $j$ — the convention of `torch.nn.functional.scaled_dot_product_attention`. (Careful:
# `nn.MultiheadAttention`'s boolean masks mean the opposite, `True` = *blocked*.) For $T = 4$
# the causal mask is the lower triangle, diagonal included — a token may look at itself:
#
# $$\begin{pmatrix} 1&0&0&0\\ 1&1&0&0\\ 1&1&1&0\\ 1&1&1&1 \end{pmatrix}$$

# %% [markdown]
# ### Exercise 1.1 — the causal mask  *(1 point, ~5 min)*
#
# **Goal:** `causal_mask(T)` returns a `(T, T)` `torch.bool` tensor, `True` where key
# $j \le$ query $i$.
#
# <details><summary>Hint</summary>
#
# Position i may look at positions 0 to i: that is the lower triangle of a square of True
# values, diagonal included.
#
# <details><summary>The key line</summary>
#
# `torch.ones(T, T, dtype=torch.bool)` and `torch.tril` (lower triangle). Its `diagonal`
# argument shifts the line: `diagonal=0` keeps the main diagonal.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def causal_mask(T):
    """Boolean causal keep mask: M[i, j] = (j <= i).

    T: int  ->  (T, T) torch.bool, True = query i may attend to key j
    Example: causal_mask(2) -> [[True, False], [True, True]]
    """
    ### BEGIN SOLUTION
    return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T), diagonal kept
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_1_causal_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.1 (1 point)
check_causal_mask(causal_mask)

# %% [markdown]
# ### The additive form (the survey [S4])
#
# The survey [S4] writes the mask as a matrix $M$ that is **added** to the scores, $0$ where a key is
# allowed and $-\infty$ where it is not, and gives the row of "position 2" for four tokens:
#
# $$\text{causal\_mask} = [0,\ 0,\ -\infty,\ -\infty] .$$
#
# The survey [S4] counts positions from 1, so this is row index 1 of our `(4, 4)` mask: query 2 sees
# keys 1 and 2. Adding $-\infty$ to a score makes its weight $e^{-\infty} = 0$ after the
# softmax; adding 0 changes nothing. So the two forms carry the same information:
#
# | boolean keep mask | additive $M$ |
# |---|---|
# | `True` (may attend) | $0$ |
# | `False` (blocked) | $-\infty$ |
#
# Boolean → additive: $M = 0$ where `True`, $-\infty$ where `False`. Additive → boolean:
# `M == 0` (or `torch.isfinite(M)`).

# %% [markdown]
# ### Exercise 1.2 — boolean to additive  *(1 point, ~5 min)*
#
# **Goal:** `to_additive(mask, dtype)` turns a boolean keep mask of any shape into [S4]'s
# $M$: a float tensor of the given `dtype`, 0 where `mask` is `True`, `-inf` where it is `False`.
#
# <details><summary>Hint</summary>
#
# Start from zeros of the mask's shape in the dtype you are given, then put minus infinity
# wherever the boolean mask says False.
#
# <details><summary>The key line</summary>
#
# `torch.zeros(mask.shape, dtype=dtype)` then `.masked_fill(~mask, float("-inf"))`:
# `masked_fill` writes the value where its (boolean) argument is `True`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def to_additive(mask, dtype=torch.float32):
    """[S4]'s additive mask: 0 where mask is True, -inf where it is False.

    mask: torch.bool, any shape  ->  same shape, `dtype`
    Example: to_additive(torch.tensor([True, False])) -> [0., -inf]
    """
    ### BEGIN SOLUTION
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_2_to_additive", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.2 (1 point)
check_to_additive(to_additive)

# %% [markdown]
# **Look.** Your causal mask for 4 tokens, its additive form, [S4]'s row for position 2,
# and the way back.

# %% tags=["demo"]
with requires("Exercise 1.1 and Exercise 1.2"):
    keep = causal_mask(4)
    M = to_additive(keep)
    print("boolean keep mask (1 = may attend):\n", keep.int())
    print("additive M:\n", M)
    print("[S4]'s 'position 2' = row index 1:", M[1])
    print("back to boolean (M == 0) equals the mask:", torch.equal(M == 0, keep))


# %% [markdown]
# ## 2. Padding masks and broadcasting
#
# A batch of token ids is a rectangle `(B, T)`; shorter sequences are filled with a pad id:
#
# ```
# "the cat sat"       -> [ 12,  7, 31,  0,  0]     length 3
# "a dog ran off fast"-> [  4, 19, 25,  8, 40]     length 5
# ```
#
# The pads must not be attended to. Which axis does that concern? Padding is a property of a
# **key**: position 4 of sentence 0 holds no word, so *no query* may read from it. The mask
# therefore varies along the last axis, $T_k$, and is the same for every query and every head.
# Its shape is `(B, 1, 1, T_k)`.
#
# **Broadcasting** makes that shape work. PyTorch lines up the axes of two tensors *from the
# right*; an axis of size 1 is repeated to match. Against scores of shape `(B, H, T_q, T_k)`:
#
# ```
# scores       (B, H, T_q, T_k)
# padding mask (B, 1,   1, T_k)   -> repeated over heads and queries: right
# mask (B, T_k)        (B, T_k)   -> B is lined up with T_q: an error, or silently wrong if B == T_q
# mask (B, 1, T_k)  (B, 1, T_k)   -> B is lined up with H: silently wrong if B == H
# ```
#
# The last two are the classic bugs: they run without an error whenever the sizes happen to
# agree, and each head or query gets *another* sequence's padding.

# %% [markdown]
# ### Exercise 2.1 — padding mask from lengths  *(1 point, ~5 min)*
#
# **Goal:** given the true lengths of the `B` sequences and the padded length `T`, return the
# `(B, 1, 1, T)` boolean keep mask: `True` at positions $j <$ length.
#
# <details><summary>Hint</summary>
#
# A position is real when its index is below that sequence's length. Compare a row of positions
# with a column of lengths and let broadcasting make the (B, T) table, then give it the two axes
# attention needs.
#
# <details><summary>The key line</summary>
#
# `torch.arange(T)` is `(T,)`; `lengths[:, None]` is `(B, 1)`; comparing them broadcasts to
# `(B, T)`. Then add the two axes: `[:, None, None, :]`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def padding_mask_from_lengths(lengths, T):
    """Key padding keep mask: M[b, 0, 0, j] = (j < lengths[b]).

    lengths: (B,) int tensor, T: int  ->  (B, 1, 1, T) torch.bool
    Example: padding_mask_from_lengths(torch.tensor([2]), 3)[0, 0, 0] -> [True, True, False]
    """
    ### BEGIN SOLUTION
    keep = torch.arange(T)[None, :] < lengths[:, None]  # (B, T)
    return keep[:, None, None, :]  # (B, 1, 1, T): broadcasts over heads and queries
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_1_padding_mask_from_lengths", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.1 (1 point)
check_padding_mask_from_lengths(padding_mask_from_lengths)

# %% [markdown]
# ### Exercise 2.2 — padding mask from token ids  *(1 point, ~5 min)*
#
# **Goal:** the same mask, read from the ids themselves: `True` where `ids != pad_id`.
# Padding may be on the left or on the right (some models pad on the left for generation).
#
# <details><summary>Hint</summary>
#
# A token is real when it is not the padding id. That gives a (B, T) table; attention wants (B,
# 1, 1, T).
#
# <details><summary>The key line</summary>
#
# `ids != pad_id` is `(B, T)`; give it the shape `(B, 1, 1, T)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def padding_mask_from_ids(ids, pad_id):
    """Key padding keep mask from a padded batch: M[b, 0, 0, j] = (ids[b, j] != pad_id).

    ids: (B, T) int tensor, pad_id: int  ->  (B, 1, 1, T) torch.bool
    Example: padding_mask_from_ids(torch.tensor([[5, 0]]), 0)[0, 0, 0] -> [True, False]
    """
    ### BEGIN SOLUTION
    return (ids != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_2_padding_mask_from_ids", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.2 (1 point)
check_padding_mask_from_ids(padding_mask_from_ids)

# %% [markdown]
# **Look: the silent broadcasting bug.** Two sequences, two heads ($B = H = 2$). A mask of shape
# `(B, 1, T)` runs without complaint — and gives head 0 the padding of sequence 0 and head 1
# the padding of sequence 1, in *both* sequences.

# %% tags=["demo"]
with requires("Exercise 2.1"):
    lengths, T, H = torch.tensor([2, 4]), 4, 2
    right = padding_mask_from_lengths(lengths, T)  # (B, 1, 1, T)
    wrong = right[:, 0]  # (B, 1, T): one axis short
    scores = torch.zeros(2, H, T, T)
    print("right mask", tuple(right.shape), "-> sequence 0, head 1, query 0:",
          (scores.masked_fill(~right, -1.0) == 0)[0, 1, 0].int().tolist())
    print("wrong mask", tuple(wrong.shape), "   -> sequence 0, head 1, query 0:",
          (scores.masked_fill(~wrong, -1.0) == 0)[0, 1, 0].int().tolist(),
          " (sequence 1's padding!)")


# %% [markdown]
# ### Combining masks
#
# A decoder batch needs both masks at once: query $i$ of sequence $b$ may attend to key $j$
# only if $j \le i$ **and** $j$ is not padding. Keep masks combine with a logical AND, and
# broadcasting does the rest:
#
# ```
# padding (B, 1, 1, T) & causal (T, T)  ->  (B, 1, T, T)
# ```
#
# (In the additive form the same combination is a sum: $0 + 0 = 0$, anything $+\,(-\infty) = -\infty$.)

# %% [markdown]
# ### Exercise 2.3 — the decoder's self-attention mask  *(1 point, ~5 min)*
#
# **Goal:** from a padded batch of ids, the `(B, 1, T, T)` keep mask of a decoder: causal AND
# not padding (on the key axis). Use your functions from 1.1 and 2.2.
#
# <details><summary>Hint</summary>
#
# A decoder position may look at a key only if the key is real and not in the future: combine
# your two earlier masks with a logical and, and let broadcasting do the shapes.
#
# <details><summary>The key line</summary>
#
# `padding_mask_from_ids(ids, pad_id) & causal_mask(T)` broadcasts `(B, 1, 1, T)` with
# `(T, T)` to `(B, 1, T, T)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_3_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decoder_self_attention_mask(ids, pad_id):
    """Causal AND key-padding keep mask of a decoder batch.

    ids: (B, T) int tensor, pad_id: int  ->  (B, 1, T, T) torch.bool
    Example: ids = [[7, 0]], pad_id 0 -> [[[[True, False], [True, False]]]]
    """
    ### BEGIN SOLUTION
    T = ids.shape[-1]
    return padding_mask_from_ids(ids, pad_id) & causal_mask(T)  # (B,1,1,T) & (T,T) -> (B,1,T,T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_3_decoder_self_attention_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.3 (1 point)
check_decoder_self_attention_mask(decoder_self_attention_mask)

# %% [markdown]
# **Look: the masks.** One right-padded and one left-padded sequence (pad id 0). Yellow = may
# attend. Row = query, column = key. In the left-padded sequence, queries 0 and 1 are pads
# and every key they may see ($j \le i$) is a pad too: their rows are **empty**. Keep those
# rows in mind.

# %% tags=["demo"]
ids = torch.tensor([[12, 7, 31, 0, 0], [0, 0, 4, 19, 25]])
with requires("Exercise 1.1, Exercise 2.2 and Exercise 2.3"):
    T = ids.shape[1]
    pictures = {
        "causal (T, T)": causal_mask(T),
        "padding, seq 0 (1, T)": padding_mask_from_ids(ids, 0)[0, 0],
        "decoder mask, seq 0": decoder_self_attention_mask(ids, 0)[0, 0],
        "decoder mask, seq 1 (left pad)": decoder_self_attention_mask(ids, 0)[1, 0],
    }
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.2))
    for ax, (title, m) in zip(axes, pictures.items()):
        ax.imshow(m.expand(T, T).int(), vmin=0, vmax=1, cmap="viridis")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("key j")
        ax.set_xticks(range(T))
        ax.set_yticks(range(T))
    axes[0].set_ylabel("query i")
    plt.tight_layout()
    plt.show()

# %% [markdown]
# ## 3. Masked attention, and the row that becomes `nan`
#
# With a mask, attention is [S4]'s formula
#
# $$G = \text{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V .$$
#
# The mask goes into the scores **before** the softmax, so that the allowed keys share all of
# the weight. Zeroing weights *after* the softmax leaves rows that no longer sum to one.
#
# The empty row above is the trap. If every key of a query is masked, its scores are all
# $-\infty$; the row maximum is $-\infty$ and $-\infty - (-\infty) =$ `nan`. PyTorch's own
# softmax returns `nan` for such a row, and one `nan` poisons everything it touches: the output,
# the loss, every gradient. Such rows really occur — left padding with a causal mask, an empty
# sequence in a batch. This course defines a fully masked row's weights (and so its output) as
# zeros, exactly as the stable softmax of chapter 1 does.
#
# ![Masked attention: the mask M is added to the scaled scores before the softmax over the keys](figures/masked_attention.svg)
#
# *Where the mask enters: added to the scaled scores, before the softmax over the keys (here a causal M).*

# %% tags=["demo"]
scores = torch.tensor([[0.5, -1.0, 2.0], [1.0, 2.0, 3.0]])
keep = torch.tensor([[True, False, True], [False, False, False]])  # query 1 sees nothing
masked = scores.masked_fill(~keep, float("-inf"))
print("torch.softmax of the masked scores:\n", torch.softmax(masked, dim=-1))


# %% [markdown]
# ### Exercise 3.1 — masked attention that never gives `nan`  *(3 points, ~15 min)*
#
# **Goal:** $\text{softmax}(qk^\top/\sqrt{d_k} + M)\,v$ where `mask` is either a boolean keep
# mask or [S4]'s additive float mask, broadcastable to `(..., T_q, T_k)`. A fully masked
# row gives an output of 0 — and its gradients must be finite too (no `nan_to_num` patch
# afterwards: the `nan` is still in the backward pass). `torch.softmax` is allowed, but think
# about what it does to an all-$-\infty$ row; `F.scaled_dot_product_attention` is switched off
# during the check.
#
# <details><summary>Hint</summary>
#
# Bring both mask kinds to one form (additive), add it to the scores, then reuse chapter 1's
# stable softmax, including its care for a row where nothing is allowed.
#
# <details><summary>The key line</summary>
#
# Turn a boolean mask into the additive form with your `to_additive(mask, scores.dtype)` (or
# `masked_fill(~mask, -inf)`); add a float mask as it is. Then the stable softmax of chapter 1:
# `m = s.amax(-1, keepdim=True)`, replace a non-finite `m` by 0 (`torch.where(torch.isfinite(m), m, 0)`),
# `e = torch.exp(s - m)`, divide by the row sum, using 1 where the sum is 0.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def masked_attention(q, k, v, mask):
    """softmax(q kᵀ / sqrt(d_k) + M) v with a boolean keep mask or an additive float mask.

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v),
    mask: torch.bool (True = may attend) or float (0 / -inf), broadcastable to (..., T_q, T_k)
    -> (..., T_q, d_v); a query with every key masked gets 0.
    Example: q = k = v = torch.eye(2), mask = causal_mask(2) -> [[1, 0], [0.33, 0.67]]
    """
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    if mask.dtype == torch.bool:
        mask = to_additive(mask, scores.dtype)
    scores = scores + mask  # the survey [S4]: + M
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # fully masked row: shift by 0
    e = torch.exp(scores - m)  # masked keys: exp(-inf) = 0
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total == 0, torch.ones_like(total), total)  # empty row stays 0
    return weights @ v  # (..., T_q, d_v)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_1_masked_attention", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.1 (3 points)
check_masked_attention(masked_attention)

# %% [markdown]
# **Look: attention maps before and after masking.** The same queries and keys for the
# left-padded sequence above, without a mask, with the causal mask, and with the decoder mask
# (feeding `v = I` makes the output equal to the weight matrix). Masked entries become exactly
# 0 and each row is renormalised over the keys that remain; the empty rows are all zeros, not
# `nan`.

# %% tags=["demo"]
with requires("Exercise 3.1 and Exercise 2.3"):
    torch.manual_seed(0)
    T = ids.shape[1]
    x = torch.randn(T, 16)
    W = torch.randn(16, 8) / 4
    q = k = x @ W
    I = torch.eye(T)  # v = I: the output is the weight matrix
    maps = {
        "no mask": masked_attention(q, k, I, torch.ones(T, T, dtype=torch.bool)),
        "causal": masked_attention(q, k, I, causal_mask(T)),
        "decoder mask (seq 1)": masked_attention(
            q, k, I, decoder_self_attention_mask(ids, 0)[1, 0]
        ),
    }
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, (title, A) in zip(axes, maps.items()):
        im = ax.imshow(A, vmin=0, vmax=1, cmap="viridis")
        ax.set_title(title)
        ax.set_xlabel("key j")
    axes[0].set_ylabel("query i")
    fig.colorbar(im, ax=axes, shrink=0.8, label="weight")
    plt.show()
    print("row sums with the decoder mask:", maps["decoder mask (seq 1)"].sum(-1))


# %% [markdown]
# ## 4. Proving that a layer is causal
#
# "I applied a causal mask" is a claim; a test makes it a fact. Two ways to test it, both
# used on real models:
#
# 1. **Perturb the future.** Change tokens $t+1, \dots, T-1$ and rerun the layer: outputs
#    $0, \dots, t$ must not move *at all* (not approximately: masked weights are exactly 0).
# 2. **Gradients.** Output $t$ must not depend on later inputs, so
#    $\partial\, y_t / \partial x_j = 0$ for every $j > t$. One backward pass from $y_t$ shows it
#    for all $j$ at once.
#
# The layers `f` below map `(..., T, d)` to `(..., T, d)`; you do not need to know what is
# inside them.

# %% [markdown]
# ### Exercise 4.1 — perturb the future  *(1 point, ~5 min)*
#
# **Goal:** return, as a float, the largest absolute change of the outputs at positions
# $0..t$ when `delta` is added to the inputs at positions $t+1..T-1$ only (on the time axis,
# the second to last). A causal `f` gives exactly `0.0`.
#
# <details><summary>Hint</summary>
#
# Change only the inputs after position t, on a copy, and see how far the outputs up to t move.
# For a causal f the answer is zero.
#
# <details><summary>The key line</summary>
#
# `x2 = x.clone()`, then `x2[..., t+1:, :] += delta[..., t+1:, :]`. Compare
# `f(x2)[..., :t+1, :]` with `f(x)[..., :t+1, :]`; `.abs().max().item()`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex4_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def future_leak(f, x, t, delta):
    """max |f(x')[..., :t+1, :] - f(x)[..., :t+1, :]| where x' = x + delta on positions > t.

    f: (..., T, d) -> (..., T, d'), x and delta: (..., T, d), t: int  ->  float (0.0 if causal)
    Example: future_leak(lambda x: x.cumsum(-2), x, 1, delta) -> 0.0
    """
    ### BEGIN SOLUTION
    x2 = x.clone()
    x2[..., t + 1 :, :] += delta[..., t + 1 :, :]  # change the future of position t only
    change = f(x2)[..., : t + 1, :] - f(x)[..., : t + 1, :]  # outputs 0 .. t
    return change.abs().max().item()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex4_1_future_leak", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 4.1 (1 point)
check_future_leak(future_leak)

# %% [markdown]
# **Look.** Your `masked_attention` as a layer, with and without the causal mask, and with a
# mask that is off by one (`diagonal=1`, a token sees the next one). Only the truly causal
# layer leaks nothing, for every $t$.

# %% tags=["demo"]
T, d = 6, 8


def make_layers(seed=1):
    # three attention layers x (..., T, d) -> (..., T, d) built on your masked_attention
    g = torch.Generator().manual_seed(seed)
    W_Q, W_K, W_V = (torch.randn(d, d, generator=g) / math.sqrt(d) for _ in range(3))

    def layer(mask):
        return lambda x: masked_attention(x @ W_Q, x @ W_K, x @ W_V, mask)

    return {
        "causal": layer(causal_mask(T)),
        "no mask": layer(torch.ones(T, T, dtype=torch.bool)),
        "off by one (diagonal=1)": layer(torch.ones(T, T, dtype=torch.bool).tril(1)),
    }


with requires("Exercise 4.1, Exercise 3.1 and Exercise 1.1"):
    layers = make_layers()
    torch.manual_seed(1)
    x, delta = torch.randn(2, T, d), torch.randn(2, T, d)
    for name, f in layers.items():
        leaks = [future_leak(f, x, t, delta) for t in range(T - 1)]
        print(f"{name:24s} leak for t = 0..{T - 2}:", " ".join(f"{v:.3f}" for v in leaks))


# %% [markdown]
# ### Exercise 4.2 — the gradient view  *(1 point, ~5 min)*
#
# **Goal:** return $\partial\big(\sum_c y_{t,c}\big)/\partial x$, the gradient of the sum of
# output $t$ (all its features, every batch entry) with respect to the whole input `x`; same
# shape as `x`. For a causal `f`, its rows $j > t$ are exactly zero.
#
# <details><summary>Hint</summary>
#
# Ask autograd for the gradient of output row t with respect to the whole input; a causal f
# gives zeros for every later row.
#
# <details><summary>The key line</summary>
#
# `x = x.clone().requires_grad_(True)`, `y = f(x)`, then
# `torch.autograd.grad(y[..., t, :].sum(), x)[0]` (or `.backward()` and `x.grad`).
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex4_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def grad_of_position(f, x, t):
    """d(sum of f(x)[..., t, :]) / dx: how much output t depends on each input.

    f: (..., T, d) -> (..., T, d'), x: (..., T, d), t: int  ->  (..., T, d)
    Example: f = lambda x: x.cumsum(-2), t = 0 -> 1 in row 0, 0 in rows 1..T-1
    """
    ### BEGIN SOLUTION
    x = x.clone().requires_grad_(True)
    y = f(x)  # (..., T, d')
    (grad,) = torch.autograd.grad(y[..., t, :].sum(), x)
    return grad  # (..., T, d)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex4_2_grad_of_position", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 4.2 (1 point)
check_grad_of_position(grad_of_position)

# %% [markdown]
# **Look.** For each output position $t$ (rows), the size $\lVert \partial y_t / \partial x_j\rVert$
# for each input position $j$ (columns). The causal layer's picture is a lower triangle: the
# upper part is exactly zero. The off-by-one layer has one extra diagonal above it.

# %% tags=["demo"]
with requires("Exercise 4.2, Exercise 3.1 and Exercise 1.1"):
    layers = make_layers()
    x1 = torch.randn(T, d, generator=torch.Generator().manual_seed(2))
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, (name, f) in zip(axes, layers.items()):
        G = torch.stack([grad_of_position(f, x1, t).norm(dim=-1) for t in range(T)])  # (T, T)
        ax.imshow(G > 0, cmap="viridis", vmin=0, vmax=1)
        ax.set_title(f"{name}: dy_t/dx_j != 0", fontsize=9)
        ax.set_xlabel("input position j")
    axes[0].set_ylabel("output position t")
    plt.tight_layout()
    plt.show()
    G = torch.stack([grad_of_position(layers["causal"], x1, t).norm(dim=-1) for t in range(T)])
    print("largest gradient above the diagonal (causal layer):", G.triu(1).max().item())

# %% [markdown]
# ## Summary
#
# - A mask says which keys each query may use. This course uses boolean **keep** masks
#   (`True` = may attend); [S4]'s additive $M$ is the same information as $0/-\infty$.
# - Causal: lower triangle *with* the diagonal (`torch.tril`). Padding: a property of **keys**,
#   shape `(B, 1, 1, T_k)`. Combine keep masks with AND (additive masks with +).
# - Broadcasting aligns axes from the right: a mask one axis short runs silently whenever the
#   sizes happen to agree — give every mask its head and query axes.
# - The mask goes in **before** the softmax. A fully masked row must give zeros, not `nan`,
#   in the forward and in the backward pass.
# - Causality is testable: perturb the future and see nothing earlier move; or check that
#   $\partial y_t/\partial x_j = 0$ for $j > t$.
#
# **Going further.** `transformer_ref.masks` (the same functions, with a causal mask for
# $T_q \ne T_k$ aligned bottom-right, as a KV cache needs); PyTorch's
# `F.scaled_dot_product_attention(..., is_causal=True)` builds the causal mask itself and lets
# fused kernels skip the masked blocks entirely; "packing" several short sequences into one row
# with a block-diagonal mask replaces padding in large-scale training.
