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
# # Chapter 1 — Attention, built from scratch
#
# **By the end of this chapter you can** compute dot-product similarities, write a softmax that
# never overflows, build self-attention in numpy and scaled dot-product attention (with masks,
# batches and heads) in PyTorch, explain *why* the scores are divided by $\sqrt{d_k}$, translate
# a paper's column-vector formula into the row form used here, and read an attention heatmap.
#
# **Builds on:** Python, numpy arrays, matrix products. No PyTorch experience is assumed; the
# torch part only uses tensors like numpy arrays.
#
# **Time:** about 2 hours (8 exercises, ~90 minutes of coding, the rest reading and looking).
#
# **Points: 16 in total** — Ex 1.1 (1), 2.1 (2), 3.1 (2), 4.1 (1), 5.1 (4), 6.1 (3), 7.1 (2), 8.1 (1).
#
# **How to work.** Run the cells from the top. Each exercise has a cell where you replace
# `raise NotImplementedError()` with your code, then a *check* cell: it runs your function on
# many inputs and compares it with a reference implementation. A failed check tells you what is
# wrong, often by name ("softmax over the wrong axis"). When grading, more (hidden) cases are
# run: one token, fully masked rows, huge values, gradients. From a terminal,
# `course-check notebooks/01_attention/01_attention.ipynb` runs all checks and prints a summary.
#
# **Notation used throughout the course:** tokens are *rows*. A sequence of $n$ tokens is
# $X \in \mathbb{R}^{n \times d}$, queries $Q = X W_Q$, keys $K = X W_K$, values $V = X W_V$, and
#
# $$\text{Attention}(Q, K, V) = \text{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V,$$
#
# with the softmax over the keys (the last axis).
#
# **Sources.** The chapters quote five short texts on Transformers, each in its own notation,
# and map their formulas onto this one. They cite them by tag: [S1] the lecture notes (column
# vectors), [S2] the tutorial (row form), [S3] the wiki page, [S4] the survey (encoder-decoder)
# and [S5] the blog post (a Transformer block). The **Sources** section at the end of this
# chapter says what each text is and how it writes attention, and gives every passage the course
# quotes from it.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup (read-only). Run this cell first: it loads the libraries and this chapter's checks.
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from autograder.checks import requires
from autograder.checks.attention import (
    check_column_form_self_attention,
    check_cosine_similarity_attention,
    check_dot_product_scores,
    check_scaled_dot_product_attention,
    check_score_variance,
    check_self_attention_unscaled,
    check_self_score_dominance,
    check_softmax,
)

np.set_printoptions(precision=3, suppress=True)
torch.set_printoptions(precision=3, sci_mode=False)


# %% [markdown]
# ## 1. Similarity as a dot product
#
# Attention lets every token look at every other token and decide how much of it to take in.
# To decide, it needs a number for "how relevant is token $j$ to token $i$". The simplest such
# number is the dot product of two vectors,
#
# $$q \cdot k = \sum_{m=1}^{d} q_m k_m = \lVert q\rVert\,\lVert k\rVert \cos\theta ,$$
#
# large and positive when the vectors point the same way, near zero when they are unrelated,
# negative when they point apart. Token $i$ asks with a *query* $q_i$; token $j$ answers with a
# *key* $k_j$. Stack the queries as rows of $Q \in \mathbb{R}^{T_q \times d}$ and the keys as
# rows of $K \in \mathbb{R}^{T_k \times d}$: all the scores at once are one matrix product,
#
# $$S = Q K^\top \in \mathbb{R}^{T_q \times T_k}, \qquad S_{ij} = q_i \cdot k_j .$$
#
# Row $i$ of $S$ holds query $i$'s scores against every key.

# %% [markdown]
# ### Exercise 1.1 — all pairwise dot products  *(1 point, ~5 min)*
#
# **Goal:** compute $S = QK^\top$ for queries and keys that may carry extra leading (batch)
# axes, e.g. `Q` of shape `(B, T_q, d)` and `K` of shape `(B, T_k, d)`.
#
# <details><summary>Hint</summary>
#
# Entry (i, j) pairs row i of Q with row j of K, so one matrix product does it once K's last two
# axes trade places. Which operation swaps only those two, leaving any batch axes where they
# are?
#
# <details><summary>The key line</summary>
#
# `@` multiplies the last two axes and broadcasts the rest. `K.T` reverses *all* axes of a
# 3-d array; `np.swapaxes(K, -1, -2)` swaps only the last two.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def dot_product_scores(Q, K):
    """All pairwise dot products S = Q Kᵀ:  S[..., i, j] = Q[..., i, :] · K[..., j, :].

    Q: (..., T_q, d), K: (..., T_k, d)  ->  S: (..., T_q, T_k)
    Example: dot_product_scores(np.eye(2), np.array([[1., 2.]])) -> [[1.], [2.]]
    """
    ### BEGIN SOLUTION
    return Q @ np.swapaxes(K, -1, -2)  # (..., T_q, d) @ (..., d, T_k)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_1_dot_product_scores", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.1 (1 point)
check_dot_product_scores(dot_product_scores)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
_hidden_check("attention.dot_product_scores", dot_product_scores)
### END HIDDEN TESTS

# %% [markdown]
# **Look.** Four made-up word vectors with hand-picked features (animal, pet, vehicle, big).
# Similar words get large scores; unrelated ones score near zero.

# %% tags=["demo"]
words = ["cat", "dog", "car", "truck"]
E = np.array([
    [0.9, 0.8, 0.1, 0.0],  # cat:   animal, pet
    [0.9, 0.9, 0.0, 0.2],  # dog:   animal, pet, a bit bigger
    [0.0, 0.1, 0.9, 0.3],  # car:   vehicle
    [0.0, 0.0, 0.9, 0.9],  # truck: vehicle, big
])
with requires("Exercise 1.1"):
    S = dot_product_scores(E, E)  # queries = keys = the word vectors themselves
    print("        " + "  ".join(f"{w:>6}" for w in words))
    for w, row in zip(words, S):
        print(f"{w:>6}  " + "  ".join(f"{s:6.2f}" for s in row))

# %% [markdown]
# ## 2. From scores to weights: a softmax that never overflows
#
# Scores can be any real numbers. To *mix* tokens we want weights that are positive and sum
# to one, and that keep the order of the scores. The softmax does exactly that:
#
# $$\text{softmax}(s)_j = \frac{e^{s_j}}{\sum_{m} e^{s_m}} .$$
#
# Written literally it breaks: `np.exp(1000.0)` is `inf` in float64 (anything above about 709
# overflows; in float32 above about 88), and `inf / inf` is `nan`. The fix costs nothing: for
# any constant $c$,
#
# $$\frac{e^{s_j - c}}{\sum_m e^{s_m - c}} = \frac{e^{-c}\,e^{s_j}}{e^{-c}\sum_m e^{s_m}} = \text{softmax}(s)_j ,$$
#
# so subtract $c = \max_m s_m$: the largest exponent becomes $e^0 = 1$ and nothing overflows.
#
# Masking (section 5) sets some scores to $-\infty$, whose weight $e^{-\infty} = 0$ is exactly
# what we want. If a *whole* slice is $-\infty$ (a query that may attend to nothing), the max is
# $-\infty$ and $-\infty - (-\infty)$ is `nan`. This course defines that slice's softmax as all
# zeros (so the query's output is zero, never `nan`).

# %% tags=["demo"]
s = np.array([1000.0, 1001.0, 1002.0])
with np.errstate(over="ignore", invalid="ignore"):
    print("literal formula:", np.exp(s) / np.exp(s).sum())
print("shifted by max: ", np.exp(s - s.max()) / np.exp(s - s.max()).sum())


# %% [markdown]
# ### Exercise 2.1 — a numerically stable softmax  *(2 points, ~15 min)*
#
# **Goal:** `softmax(x, axis=-1)` for numpy arrays of any shape, along any axis: never
# overflows, a slice of all `-inf` gives zeros, keeps the input's dtype, does not modify `x`.
# PyTorch's softmax is switched off while the check runs: build it from `np.exp`, `np.max`,
# `np.sum`.
#
# <details><summary>Hint</summary>
#
# Softmax does not change when the same number is subtracted from a whole slice. Subtract the
# slice's largest value first, so no exponential overflows, then think about the two edge cases:
# a slice that is all minus infinity, and a sum that comes out zero.
#
# <details><summary>The key line</summary>
#
# `m = np.max(x, axis=axis, keepdims=True)` keeps the axis so `x - m` broadcasts. Where `m` is
# not finite (all `-inf`), shift by 0 instead: `np.where(np.isfinite(m), m, 0)`. Then
# `e = np.exp(x - m)`, `s = e.sum(axis=axis, keepdims=True)`, and divide by
# `np.where(s == 0, 1, s)` so an all-zero slice stays zero.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def softmax(x, axis=-1):
    """Stable softmax along `axis`: exp(x - max) / sum(exp(x - max)).

    x: numpy array of any shape -> same shape and dtype; every slice along `axis` sums to 1
    (a slice that is all -inf gives zeros).
    Example: softmax(np.array([0.0, np.log(3.0)])) -> [0.25, 0.75]
    """
    ### BEGIN SOLUTION
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0).astype(x.dtype)  # all -inf slice: shift by 0
    e = np.exp(x - m)  # largest entry becomes exp(0) = 1
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total).astype(x.dtype)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_1_softmax", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.1 (2 points)
check_softmax(softmax)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
_hidden_check("attention.softmax", softmax)
### END HIDDEN TESTS

# %% [markdown]
# **Look.** The same four scores at three sizes. Multiplying scores by a factor $t$ changes
# the softmax from nearly uniform to nearly one-hot. Keep this picture in mind for section 4:
# scores that are too large make attention pick a single token and stop learning.

# %% tags=["demo"]
scores = np.array([1.0, 2.0, 3.0, 4.0])
with requires("Exercise 2.1"):
    sizes = [0.25, 1.0, 4.0]
    weights = [softmax(t * scores) for t in sizes]
    fig, axes = plt.subplots(1, 3, figsize=(9, 2.4), sharey=True)
    for ax, t, w in zip(axes, sizes, weights):
        ax.bar(range(4), w)
        ax.set_title(f"softmax({t:g} · s)")
        ax.set_xticks(range(4))
    axes[0].set_ylabel("weight")
    plt.tight_layout()
    plt.show()


# %% [markdown]
# ## 3. Self-attention, unscaled (the wiki page [S3])
#
# Now each token mixes the others. The wiki page [S3] writes it for token $i$, with column vectors:
#
# $$\mathbf{y}_i = \sum_{j=1}^{N} \frac{\exp(\mathbf{q}_i^\top \mathbf{k}_j)}{\sum_{k=1}^{N} \exp(\mathbf{q}_i^\top \mathbf{k}_k)}\,\mathbf{v}_j,
# \qquad \mathbf{q}_i = \mathbf{W}_q \mathbf{x}_i,\; \mathbf{k}_i = \mathbf{W}_k \mathbf{x}_i,\; \mathbf{v}_i = \mathbf{W}_v \mathbf{x}_i .$$
#
# The fraction is a softmax over $j$ of row $i$ of the scores. In our row notation the tokens
# are the rows of $X \in \mathbb{R}^{n\times d}$, a column vector $\mathbf{W}_q \mathbf{x}_i$ becomes the row
# $x_i W_Q$ with $W_Q = \mathbf{W}_q^\top \in \mathbb{R}^{d \times d_k}$, and all tokens at once are
#
# $$Q = XW_Q,\quad K = XW_K,\quad V = XW_V,\qquad Y = \text{softmax}(QK^\top)\,V ,$$
#
# softmax over each row. The output has one row per token: $y_i$ is a weighted average of the
# value rows, with weights from query $i$'s scores. The wiki page [S3] does **not** divide the scores by
# anything; section 4 shows why later papers do.

# %% [markdown]
# ### Exercise 3.1 — self-attention in numpy (the wiki page [S3])  *(2 points, ~10 min)*
#
# **Goal:** $Y = \text{softmax}(XW_Q (XW_K)^\top)\,XW_V$, unscaled, using your
# `dot_product_scores` and `softmax`. `X` may have leading batch axes.
#
# <details><summary>Hint</summary>
#
# Three projections of X, then the two functions you already wrote: scores, a softmax across the
# keys (the last axis), and a weighted sum of the values.
#
# <details><summary>The key line</summary>
#
# Three matrix products give `Q, K, V`; `dot_product_scores(Q, K)` gives the `(…, n, n)`
# scores; `softmax(…, axis=-1)` turns each row into weights; `@ V` mixes the values.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def self_attention_unscaled(X, W_Q, W_K, W_V):
    """[S3]'s self-attention in row form: softmax(X W_Q (X W_K)ᵀ) X W_V, no scaling.

    X: (..., n, d), W_Q, W_K: (d, d_k), W_V: (d, d_v)  ->  Y: (..., n, d_v)
    Example: with X = W_Q = W_K = W_V = np.eye(2), Y[0] = [0.731, 0.269]
    """
    ### BEGIN SOLUTION
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (..., n, d_k), (..., n, d_k), (..., n, d_v)
    A = softmax(dot_product_scores(Q, K), axis=-1)  # (..., n, n), each row sums to 1
    return A @ V  # (..., n, d_v)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_1_self_attention_unscaled", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.1 (2 points)
check_self_attention_unscaled(self_attention_unscaled)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
# the given earlier functions, in place of yours if they fail their checks
_given = {
    'dot_product_scores': 'def dot_product_scores(Q, K):\n    """All pairwise dot products S = Q Kᵀ:  S[..., i, j] = Q[..., i, :] · K[..., j, :].\n\n    Q: (..., T_q, d), K: (..., T_k, d)  ->  S: (..., T_q, T_k)\n    Example: dot_product_scores(np.eye(2), np.array([[1., 2.]])) -> [[1.], [2.]]\n    """\n    return Q @ np.swapaxes(K, -1, -2)  # (..., T_q, d) @ (..., d, T_k)',
    'softmax': 'def softmax(x, axis=-1):\n    """Stable softmax along `axis`: exp(x - max) / sum(exp(x - max)).\n\n    x: numpy array of any shape -> same shape and dtype; every slice along `axis` sums to 1\n    (a slice that is all -inf gives zeros).\n    Example: softmax(np.array([0.0, np.log(3.0)])) -> [0.25, 0.75]\n    """\n    m = np.max(x, axis=axis, keepdims=True)\n    m = np.where(np.isfinite(m), m, 0.0).astype(x.dtype)  # all -inf slice: shift by 0\n    e = np.exp(x - m)  # largest entry becomes exp(0) = 1\n    total = np.sum(e, axis=axis, keepdims=True)\n    return e / np.where(total == 0, 1.0, total).astype(x.dtype)',
}
_hidden_check("attention.self_attention_unscaled", self_attention_unscaled, given=_given)
del _given
### END HIDDEN TESTS

# %% [markdown]
# **Look.** Self-attention over the four words, with $W_Q = W_K = W_V = I$ (no projection):
# each output row is a mix of word vectors, weighted by similarity. "cat" takes most of its
# mix from "cat" and "dog" and less from the vehicles; these small vectors give scores close
# together, so the mixing is soft.

# %% tags=["demo"]
with requires("Exercise 3.1"):
    I4 = np.eye(4)
    Y = self_attention_unscaled(E, I4, I4, I4)
    A = softmax(dot_product_scores(E, E))  # the weights behind Y
    for w, row in zip(words, A):
        print(f"{w:>6} takes  " + ", ".join(f"{a:.2f} of {v}" for a, v in zip(row, words)))
    print("\ny_cat =", Y[0], "  vs  x_cat =", E[0])


# %% [markdown]
# ## 4. Why divide by $\sqrt{d_k}$: the variance experiment
#
# Take a query and a key whose $d_k$ entries are independent with mean 0 and variance 1 (what
# random initialisation and normalised activations roughly give). Then
#
# $$q\cdot k = \sum_{m=1}^{d_k} q_m k_m, \qquad \mathbb{E}[q_m k_m] = 0,\qquad \text{Var}(q_m k_m) = \mathbb{E}[q_m^2]\,\mathbb{E}[k_m^2] = 1,$$
#
# and a sum of $d_k$ independent terms of variance 1 has variance $d_k$. So the scores spread out
# like $\sqrt{d_k}$: with $d_k = 64$ a typical score is $\pm 8$, and we saw in section 2 what the
# softmax does to large scores — it becomes nearly one-hot, and its gradient (which is
# $\text{diag}(p) - pp^\top$) nearly vanishes. The tutorial [S2] says it in words ("scaled by the square
# root of the dimension $d_k$ to prevent gradient vanishing during the softmax"); the original
# Transformer paper (Vaswani et al., 2017, §3.2.1) gives the same variance argument.
#
# Dividing by $\sqrt{d_k}$ brings the variance back to 1 whatever $d_k$ is. Before believing
# it, measure it.

# %% [markdown]
# ### Exercise 4.1 — measure Var(q · k)  *(1 point, ~5 min)*
#
# **Goal:** draw `n_samples` pairs $(q, k)$ of standard-normal vectors of dimension `d_k` from
# the given random generator and return the sample variance of $q\cdot k$ as a Python float.
# The check expects a *measurement*: close to, but not exactly, $d_k$. It draws the same
# numbers from the same generator and measures them too, so take exactly your samples from
# `rng` (2 × `n_samples` × `d_k` standard normals) and nothing else.
#
# <details><summary>Hint</summary>
#
# Draw every sample from the rng you are given (not a new one), one q and one k per sample, take
# each pair's dot product and measure how spread out those numbers are.
#
# <details><summary>The key line</summary>
#
# `rng.standard_normal((n_samples, d_k))` twice, multiply elementwise, sum over the last axis,
# `np.var` of the result.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex4_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def score_variance(d_k, n_samples, rng):
    """Sample variance of q · k for q, k ~ N(0, I_{d_k}): about d_k.

    d_k: int, n_samples: int, rng: np.random.Generator  ->  float
    Example: score_variance(16, 20_000, np.random.default_rng(0)) is about 16
    """
    ### BEGIN SOLUTION
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))  # one dot product per sample
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex4_1_score_variance", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 4.1 (1 point)
check_score_variance(score_variance)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
_hidden_check("attention.score_variance", score_variance)
### END HIDDEN TESTS

# %% [markdown]
# **Look.** Left: the measured variance follows the line $\text{Var} = d_k$; divided by
# $\sqrt{d_k}$ it stays at 1. Right: what that does to attention. For 10 keys, the average
# largest softmax weight — unscaled scores quickly make attention one-hot, scaled ones do not.

# %% tags=["demo"]
dims = [1, 4, 16, 64, 256]
with requires("Exercise 4.1 and Exercise 2.1"):
    rng = np.random.default_rng(0)
    var = [score_variance(d, 4000, rng) for d in dims]
    top_raw, top_scaled = [], []
    for d in dims:
        q = rng.standard_normal((500, 1, d))   # 500 queries
        k = rng.standard_normal((500, 10, d))  # 10 keys each
        s = (q @ np.swapaxes(k, -1, -2))[:, 0]  # (500, 10) raw scores
        top_raw.append(softmax(s).max(axis=-1).mean())
        top_scaled.append(softmax(s / math.sqrt(d)).max(axis=-1).mean())
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.2))
    a1.loglog(dims, var, "o-", label="measured Var(q·k)")
    a1.loglog(dims, dims, "k--", label="d_k")
    a1.loglog(dims, np.array(var) / np.array(dims), "s-", label="Var(q·k / sqrt(d_k))")
    a1.set_xlabel("d_k"); a1.legend()
    a2.semilogx(dims, top_raw, "o-", label="unscaled")
    a2.semilogx(dims, top_scaled, "s-", label="scaled by 1/sqrt(d_k)")
    a2.axhline(0.1, color="gray", ls=":", label="uniform (1/10)")
    a2.set_xlabel("d_k"); a2.set_ylabel("mean largest weight"); a2.legend()
    plt.tight_layout()
    plt.show()
    for d, v in zip(dims, var):
        print(f"d_k={d:4d}: Var(q·k) = {v:7.2f}")


# %% [markdown]
# ## 5. Scaled dot-product attention in PyTorch (the tutorial [S2] and the survey [S4])
#
# From here on we use PyTorch tensors: the same arrays, plus automatic gradients (needed to
# train) and batched operations. The tutorial [S2] and the survey [S4] state the formula we now build:
#
# $$\text{Attention}(Q,K,V) = \text{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V .$$
#
# ![Scaled dot-product attention: Q and K give the scores QKᵀ, scaled by 1/√d_k, masked, a softmax over the keys, times V](figures/attention.svg)
#
# *Scaled dot-product attention step by step (the mask is optional): the scores and weights
# are $T_q \times T_k$, one row per query and one column per key; the output $Y = AV$ is
# $T_q \times d_v$, one row per query.*
#
# **Masks.** The survey [S4] writes the causal mask as an *additive* matrix $M$: for the query at
# position 2 of a 4-token sequence the row is $[0, 0, -\infty, -\infty]$ — adding $-\infty$
# gives weight $e^{-\infty}=0$, so the token cannot look ahead. We pass masks as **booleans,
# True where the query may attend** (as PyTorch's `F.scaled_dot_product_attention` does); the
# additive form is $M = 0$ where True and $-\infty$ where False. A mask broadcasts against the
# scores `(…, T_q, T_k)`: a causal mask is `(T, T)`, a padding mask `(B, 1, 1, T_k)`.
#
# **Shapes.** `q` is `(…, T_q, d_k)`, `k` is `(…, T_k, d_k)`, `v` is `(…, T_k, d_v)`. The
# leading axes are usually `(B, H)`: batch and heads. With $H$ heads of a model of width
# $d_\text{model}$, each head has $d_k = d_\text{model}/H$ (the lecture notes [S1]: "the embedding dimension of
# each head is chosen as $d/H$") — and the scale uses that per-head $d_k$ = `q.shape[-1]`.
#
# **Edge cases.** `scale=None` means $1/\sqrt{d_k}$; `scale=1.0` gives the unscaled form of
# the lecture notes [S1] and the wiki page [S3]. A query whose keys are all masked gets zero weights and a zero output.

# %% [markdown]
# ### Exercise 5.1 — scaled dot-product attention  *(4 points, ~25 min)*
#
# **Goal:** `scaled_dot_product_attention(q, k, v, mask=None, scale=None)` for any number of
# leading axes, with an optional boolean mask, stable for large scores, zero output for fully
# masked rows, gradients flowing to `q`, `k`, `v`. `F.scaled_dot_product_attention` is switched
# off while the check runs.
#
# <details><summary>Hint</summary>
#
# The same three steps as Exercise 3.1 with torch tensors: scaled scores, the mask, a stable
# softmax, the weighted values. A fully masked row must give zeros, not nan: which built-in
# softmax fails there?
#
# <details><summary>The key line</summary>
#
# `scores = q @ k.transpose(-2, -1) * scale`; `scores.masked_fill(~mask, float("-inf"))` drops
# the masked pairs; then the same stable softmax as Exercise 2.1 along `dim=-1`, with
# `amax`, `torch.where(torch.isfinite(m), m, torch.zeros_like(m))`, `torch.exp`, `sum` (keep
# the dim); finally `weights @ v`. `torch.softmax` gives `nan` for a fully masked row.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex5_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    """softmax(q kᵀ · scale + M) v, with M = -inf where the boolean `mask` is False.

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v),
    mask: bool, broadcastable to (..., T_q, T_k), True = may attend   ->   (..., T_q, d_v)
    scale=None means 1/sqrt(d_k). A query with every key masked gets an output of 0.
    Example: q = k = v = torch.eye(2), scale=1.0 -> [[0.731, 0.269], [0.269, 0.731]]
    """
    ### BEGIN SOLUTION
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # fully masked row: shift by 0
    e = torch.exp(scores - m)
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total == 0, torch.ones_like(total), total)  # rows sum to 1 (or 0)
    return weights @ v  # (..., T_q, d_v)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_1_scaled_dot_product_attention", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 5.1 (4 points)
check_scaled_dot_product_attention(scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
_hidden_check("attention.scaled_dot_product_attention", scaled_dot_product_attention)
### END HIDDEN TESTS

# %% [markdown]
# **Look.** [S4]'s causal mask for 4 tokens, its additive form, and your attention
# weights: feeding the identity matrix as `v` makes the output *equal* to the weight matrix
# (row $i$ of $A I$ is row $i$ of $A$) — a trick we use for every heatmap. Outside the check
# the built-in is available again, so we compare with it too.

# %% tags=["demo"]
T = 4
causal = torch.ones(T, T, dtype=torch.bool).tril()  # True = may attend (j <= i)
additive = torch.zeros(T, T).masked_fill(~causal, float("-inf"))
print("boolean mask:\n", causal.int())
print("additive form, row of the 2nd token ([S4]'s 'position 2'):", additive[1])
with requires("Exercise 5.1"):
    torch.manual_seed(0)
    q, k = torch.randn(T, 8), torch.randn(T, 8)
    weights = scaled_dot_product_attention(q, k, torch.eye(T), mask=causal)
    print("\nyour causal attention weights (rows sum to 1, nothing above the diagonal):\n", weights)
    v = torch.randn(T, 3)
    builtin = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causal)
    yours = scaled_dot_product_attention(q, k, v, mask=causal)
    print("max |yours - F.scaled_dot_product_attention| =", (yours - builtin).abs().max().item())


# %% [markdown]
# ## 6. The same thing with column vectors (the lecture notes [S1])
#
# The lecture notes [S1] write tokens as **columns** $x_j \in \mathbb{R}^d$ and maps
# $Q, K, V \in \mathbb{R}^{d'\times d}$:
#
# $$A_{ij} = \frac{\exp(x_i^\top K^\top Q\, x_j)}{\sum_{k=1}^{n} \exp(x_k^\top K^\top Q\, x_j)},\qquad
# y_j = \sum_{i=1}^{n} A_{ij}\, V x_i,\qquad \sum_{i=1}^n A_{ij} = 1 .$$
#
# **Derivation of the mapping.** $x_i^\top K^\top Q x_j = (Kx_i)\cdot(Qx_j) = k_i \cdot q_j$: the
# score of *query j* against *key i*. The softmax runs over $i$, the first index, so each
# **column** of $A$ sums to one. With $X = X_\text{cols}^\top$ (tokens as rows) and
# $W_Q = Q^\top$, $W_K = K^\top$, $W_V = V^\top$, our row form computes
# $A^\text{row}_{ji} = \text{softmax}_i(q_j\cdot k_i)$, so
#
# $$A = (A^\text{row})^\top, \qquad Y_\text{cols} = (V X_\text{cols})\,A = \big(A^\text{row}\, X W_V\big)^\top ,$$
#
# unscaled (scale = 1). Same numbers, transposed bookkeeping.

# %% [markdown]
# ### Exercise 6.1 — [S1]'s formula, literally  *(3 points, ~15 min)*
#
# **Goal:** implement [S1]'s equations as written, with tokens as columns, and return both
# $Y$ (column $j$ is $y_j$) and $A$ (columns sum to one). Use a stable softmax over $i$
# (`dim=0`).
#
# <details><summary>Hint</summary>
#
# In [S1]'s form the inputs are columns, and the softmax runs over i (the keys), which is down
# each column of the score matrix, not along its rows. Build the score matrix so that entry (i,
# j) is key i against query j.
#
# <details><summary>The key line</summary>
#
# `S = (K @ X_cols).T @ (Q @ X_cols)` has `S[i, j] = (K x_i) · (Q x_j)`. Subtract
# `S.amax(dim=0, keepdim=True)`, exponentiate, divide by the column sums. Then
# `Y = (V @ X_cols) @ A`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex6_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def column_form_self_attention(X_cols, Q, K, V):
    """The lecture notes [S1]: A_ij = softmax over i of x_iᵀ Kᵀ Q x_j;  y_j = sum_i A_ij V x_i.

    X_cols: (d, n), column j is token x_j; Q, K, V: (d', d)
    -> (Y, A): Y (d', n), column j is y_j; A (n, n), every column sums to 1.
    Example: X_cols = Q = K = V = torch.eye(2) -> A = [[0.731, 0.269], [0.269, 0.731]]
    """
    ### BEGIN SOLUTION
    S = (K @ X_cols).T @ (Q @ X_cols)  # S[i, j] = (K x_i) · (Q x_j), (n, n)
    e = torch.exp(S - S.amax(dim=0, keepdim=True))  # stable softmax over i (dim 0)
    A = e / e.sum(dim=0, keepdim=True)  # every column sums to 1
    Y = (V @ X_cols) @ A  # y_j = sum_i A_ij V x_i, (d', n)
    return Y, A
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex6_1_column_form_self_attention", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 6.1 (3 points)
check_column_form_self_attention(column_form_self_attention)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
_hidden_check("attention.column_form_self_attention", column_form_self_attention)
### END HIDDEN TESTS

# %% [markdown]
# **Look: the two forms agree.** The same tokens and maps, once as the lecture notes [S1] write them and
# once through your row-form `scaled_dot_product_attention` with $W = $ ([S1]'s map)ᵀ and
# `scale=1.0`.

# %% tags=["demo"]
with requires("Exercise 6.1 and Exercise 5.1"):
    torch.manual_seed(1)
    d, n, d2 = 6, 5, 4
    X_cols = torch.randn(d, n, dtype=torch.float64)
    Qm, Km, Vm = (torch.randn(d2, d, dtype=torch.float64) for _ in range(3))
    Y_cols, A_cols = column_form_self_attention(X_cols, Qm, Km, Vm)
    X = X_cols.T  # tokens as rows
    Y_rows = scaled_dot_product_attention(X @ Qm.T, X @ Km.T, X @ Vm.T, scale=1.0)
    A_rows = scaled_dot_product_attention(X @ Qm.T, X @ Km.T, torch.eye(n, dtype=X.dtype), scale=1.0)
    print("column sums of A (the lecture notes [S1]):", A_cols.sum(dim=0))
    print("max |Y_cols - Y_rowsᵀ| =", (Y_cols - Y_rows.T).abs().max().item())
    print("max |A_cols - A_rowsᵀ| =", (A_cols - A_rows.T).abs().max().item())


# %% [markdown]
# ## 7. Cosine-similarity attention (the blog post [S5])
#
# The blog post [S5] notes that some slides score with the cosine instead of the raw dot product:
#
# $$\cos(q_i, k_j) = \frac{q_i^\top k_j}{\lVert q_i\rVert\,\lVert k_j\rVert} \in [-1, 1] .$$
#
# Normalising removes the length of the vectors, so the scores cannot grow with $d_k$ and need
# no $\sqrt{d_k}$. But scores confined to $[-1, 1]$ give weights that are never far from uniform
# (at most $e^2 \approx 7.4$ times apart), so a **temperature** $\tau$ divides them:
# $\text{softmax}(\cos(q_i,k_j)/\tau)$; a small $\tau$ sharpens. Some published models learn $\tau$.

# %% [markdown]
# ### Exercise 7.1 — cosine-similarity attention  *(2 points, ~10 min)*
#
# **Goal:** normalise every query and key row to unit length (a zero vector stays zero: divide
# by `norm.clamp_min(eps)`), then reuse your `scaled_dot_product_attention` with
# `scale = 1 / temperature`. `F.normalize` and `F.cosine_similarity` are switched off during the
# check.
#
# <details><summary>Hint</summary>
#
# Cosine similarity is the dot product of unit vectors: divide every query row and every key row
# by its own length before the dot products.
#
# <details><summary>The key line</summary>
#
# `q.norm(dim=-1, keepdim=True)` is `(…, T_q, 1)`; dividing by it normalises each row.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex7_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def cosine_similarity_attention(q, k, v, mask=None, temperature=1.0, eps=1e-8):
    """softmax(cos(q_i, k_j) / temperature + M) v  ([S5]'s cosine scores).

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v), mask as in Exercise 5.1
    -> (..., T_q, d_v). Rows with norm < eps are treated as norm eps (a zero row stays 0).
    Example: q = k = v = torch.eye(2) -> [[0.731, 0.269], [0.269, 0.731]]
    """
    ### BEGIN SOLUTION
    q_hat = q / q.norm(dim=-1, keepdim=True).clamp_min(eps)  # unit rows
    k_hat = k / k.norm(dim=-1, keepdim=True).clamp_min(eps)
    return scaled_dot_product_attention(q_hat, k_hat, v, mask=mask, scale=1.0 / temperature)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex7_1_cosine_similarity_attention", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 7.1 (2 points)
check_cosine_similarity_attention(cosine_similarity_attention)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
# the given earlier functions, in place of yours if they fail their checks
_given = {
    'scaled_dot_product_attention': 'def scaled_dot_product_attention(q, k, v, mask=None, scale=None):\n    """softmax(q kᵀ · scale + M) v, with M = -inf where the boolean `mask` is False.\n\n    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v),\n    mask: bool, broadcastable to (..., T_q, T_k), True = may attend   ->   (..., T_q, d_v)\n    scale=None means 1/sqrt(d_k). A query with every key masked gets an output of 0.\n    Example: q = k = v = torch.eye(2), scale=1.0 -> [[0.731, 0.269], [0.269, 0.731]]\n    """\n    if scale is None:\n        scale = 1.0 / math.sqrt(q.shape[-1])\n    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T_q, T_k)\n    if mask is not None:\n        scores = scores.masked_fill(~mask, float("-inf"))\n    m = scores.amax(dim=-1, keepdim=True)\n    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # fully masked row: shift by 0\n    e = torch.exp(scores - m)\n    total = e.sum(dim=-1, keepdim=True)\n    weights = e / torch.where(total == 0, torch.ones_like(total), total)  # rows sum to 1 (or 0)\n    return weights @ v  # (..., T_q, d_v)',
}
_hidden_check("attention.cosine_similarity_attention", cosine_similarity_attention, given=_given)
del _given
### END HIDDEN TESTS

# %% [markdown]
# **Look.** Cosine attention over the four words at two temperatures. At $\tau = 1$ the weights
# stay close to uniform (all four scores lie in $[-1, 1]$); at $\tau = 0.1$ each word attends
# mostly to the words it resembles.

# %% tags=["demo"]
with requires("Exercise 7.1 and Exercise 5.1"):
    Et = torch.tensor(E)
    for tau in (1.0, 0.1):
        W_cos = cosine_similarity_attention(Et, Et, torch.eye(4, dtype=Et.dtype), temperature=tau)
        print(f"temperature {tau:g}:")
        for w, row in zip(words, W_cos):
            print(f"  {w:>6} takes " + ", ".join(f"{a:.2f} of {v}" for a, v in zip(row.tolist(), words)))


# %% [markdown]
# ## 8. Does a token attend mostly to itself? (the blog post [S5])
#
# The blog post [S5, §7] observes that "the self-score tends to be large": $e_{ii} = q_i^\top k_i$ is
# often bigger than $q_i^\top k_j$, so $\alpha_{ii}$ dominates and $z_i$ stays close to "self".
# Is that a property of attention, or of particular $W_Q, W_K$? Let us measure how often the
# largest weight in row $i$ is the diagonal one.

# %% [markdown]
# ### Exercise 8.1 — how often does the diagonal win?  *(1 point, ~5 min)*
#
# **Goal:** given attention weights of shape `(…, n, n)` (rows = queries), return the fraction
# of queries, over all rows and leading axes, whose largest weight is on their own position
# (as a Python float).
#
# <details><summary>Hint</summary>
#
# For each query, find the key with the largest weight, and ask how often that key is the query
# itself. Both are one tensor operation each.
#
# <details><summary>The key line</summary>
#
# `weights.argmax(dim=-1)` is the key each query weighs most; compare with `torch.arange(n)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex8_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def self_score_dominance(weights):
    """Fraction of queries i whose largest weight is A[..., i, i].

    weights: (..., n, n), rows are queries  ->  float in [0, 1]
    Example: self_score_dominance(torch.tensor([[0.7, 0.3], [0.6, 0.4]])) -> 0.5
    """
    ### BEGIN SOLUTION
    n = weights.shape[-1]
    top = weights.argmax(dim=-1)  # (..., n): the key each query weighs most
    return (top == torch.arange(n)).double().mean().item()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex8_1_self_score_dominance", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 8.1 (1 point)
check_self_score_dominance(self_score_dominance)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
_hidden_check("attention.self_score_dominance", self_score_dominance)
### END HIDDEN TESTS

# %% [markdown]
# **Measure.** 16 random token embeddings of width 64, 50 draws each, three ways of making
# queries and keys: (a) cosine scores of the raw embeddings ($q_i = k_i = x_i$);
# (b) one shared random projection, $W_Q = W_K$; (c) independent random $W_Q$ and $W_K$, as at
# initialisation. Chance level is $1/16 \approx 0.06$.

# %% tags=["demo"]
with requires("Exercise 8.1, Exercise 7.1 and Exercise 5.1"):
    torch.manual_seed(2)
    n, d_model, d_k, draws = 16, 64, 16, 50
    I_n = torch.eye(n)
    result = {"(a) cosine, q = k = x": [], "(b) shared W_Q = W_K": [], "(c) independent W_Q, W_K": []}
    for _ in range(draws):
        X = torch.randn(n, d_model)
        W, W2 = torch.randn(d_model, d_k), torch.randn(d_model, d_k)
        result["(a) cosine, q = k = x"].append(self_score_dominance(cosine_similarity_attention(X, X, I_n, temperature=0.1)))
        result["(b) shared W_Q = W_K"].append(self_score_dominance(scaled_dot_product_attention(X @ W, X @ W, I_n)))
        result["(c) independent W_Q, W_K"].append(self_score_dominance(scaled_dot_product_attention(X @ W, X @ W2, I_n)))
    for name, fr in result.items():
        print(f"{name:28s} diagonal wins in {np.mean(fr):5.1%} of rows")

# %% [markdown]
# Read the three numbers. With cosine scores of identical queries and keys, $\cos(x_i, x_i) = 1$
# is the maximum possible, so the diagonal must win. With a shared projection $q_i = k_i$, and
# $q_i\cdot q_i = \lVert q_i\rVert^2$ usually beats $q_i \cdot q_j$ in high dimension. With
# independent projections nothing favours the diagonal. So [S5]'s observation holds when
# queries and keys resemble each other ($W_Q W_K^\top$ close to positive definite); it is not a
# law of attention. (In a full Transformer, "staying close to self" is also carried by the
# residual connection $x + \text{Attention}(x)$, which a later chapter builds.)

# %% [markdown]
# ## 9. Looking at attention: a heatmap
#
# A heatmap of the weight matrix shows who looks at whom: row = query, column = key, colour =
# weight. Below, a 6-token sentence: each word of the vocabulary gets a random embedding (so
# both "the" tokens get the *same* vector), queries and keys use a shared projection, and your
# `scaled_dot_product_attention` computes the weights (with `v = I`, the output is the weight
# matrix), without and with the causal mask.

# %% tags=["demo"]
tokens = ["the", "cat", "sat", "on", "the", "mat"]
with requires("Exercise 5.1"):
    torch.manual_seed(3)
    T = len(tokens)
    vocab = sorted(set(tokens))
    embedding = torch.randn(len(vocab), 32)  # one row per word of the vocabulary
    X = embedding[[vocab.index(t) for t in tokens]]  # (T, 32)
    W = torch.randn(32, 16) / math.sqrt(32)
    q = k = X @ W
    masks = {"no mask": None, "causal mask": torch.ones(T, T, dtype=torch.bool).tril()}
    maps = {title: scaled_dot_product_attention(q, k, torch.eye(T), mask=m) for title, m in masks.items()}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (title, A) in zip(axes, maps.items()):
        im = ax.imshow(A, vmin=0, vmax=1, cmap="viridis")
        ax.set_xticks(range(T), tokens); ax.set_yticks(range(T), tokens)
        ax.set_xlabel("key"); ax.set_title(title)
    axes[0].set_ylabel("query")
    fig.colorbar(im, ax=axes, shrink=0.8, label="weight")
    plt.show()
    gap = (maps["no mask"][0] - maps["no mask"][4]).abs().max().item()
    print(f"without a mask, the two 'the' rows differ by at most {gap:.1e}")

# %% [markdown]
# Without a mask the two "the" rows are the same (up to rounding): attention compares *contents* only and has
# no idea where a token sits in the sentence. The causal mask breaks the tie (the first "the"
# sees only itself), and a later chapter adds positional encodings so that order matters
# everywhere.

# %% [markdown]
# ## Summary
#
# - Scores are dot products $S = QK^\top$; row $i$ is query $i$ against every key.
# - Softmax turns each row into weights; subtract the row maximum so `exp` never overflows, and
#   define a fully masked row as zeros.
# - Self-attention (the wiki page [S3]) is $\text{softmax}(QK^\top)V$; the variance of $q\cdot k$ grows
#   like $d_k$, so the tutorial [S2] and the survey [S4] divide by $\sqrt{d_k}$ (the per-head $d_k$).
# - Masks: boolean, True = may attend; [S4]'s additive $M$ is the same thing.
# - [S1]'s column form is the row form transposed: softmax over $i$, columns sum to one.
# - Cosine scores (the blog post [S5]) are bounded and need a temperature instead of $\sqrt{d_k}$.
# - Self-score dominance is a property of the projections, not of attention itself.
#
# **Going further.** Multi-head attention and the output projection $W_O$ (a later chapter);
# how masks combine (padding AND causal, `transformer_ref.masks`); FlashAttention (Dao et al.,
# 2022) computes exactly this softmax one block at a time with a running maximum — the same
# max-subtraction trick as Exercise 2.1, applied piece by piece.

# %% [markdown]
# ## Sources
#
# The chapters quote five short texts on Transformers and cite each by a tag, [S1] to [S5]. Each
# text has its own notation, and the chapters map its formulas onto the course's row form (tokens
# are rows, $Q = XW_Q$, the softmax runs over the keys, the scores are divided by $\sqrt{d_k}$).
# The course does not reprint the texts. For each one, this section says what it is and how it
# writes attention, and gives the passages the chapters quote word for word (spelling as in the
# original; formulas retypeset in the course's LaTeX).
#
# ### [S1] the lecture notes: column vectors, no scaling, pre-LN
#
# Mathematical lecture notes, the preliminaries section of a longer LaTeX document. It gives
# definitions (self-attention, multi-headed self-attention, layer normalization) and numbered
# equations, and ends with a Transformer block.
#
# - **Notation.** Tokens are **column** vectors $x_k \in \mathbb{R}^d$, and the maps
#   $Q, K, V \in \mathbb{R}^{d'\times d}$ act from the left. The weights
#   $A_{ij} = \exp(x_i^\top K^\top Q x_j) / \sum_{k=1}^n \exp(x_k^\top K^\top Q x_j)$ are
#   normalised over $i$, the key. So each **column** of $A$ sums to one (the softmax runs over
#   the keys, down the columns). The output is $y_j = \sum_i A_{ij} V x_i$. The scores are **not
#   scaled**. Multi-head attention is
#   $\text{MSA} = [\text{SA}(Q_1, K_1, V_1), \dots, \text{SA}(Q_H, K_H, V_H)]$, the heads side by
#   side **without** an output projection $W_O$. Layer normalization is
#   $\text{LN}(x) = \gamma\bar{x} + \beta$ with a **scalar** $\gamma \in \mathbb{R}$, and
#   $\bar{x}_{ki} = (x_{ki} - \sum_j x_{kj})/\sqrt{\text{var}(x_k)}$ has a **sum** where the mean
#   is meant and no $\varepsilon$. The block is **pre-LN**,
#   $\text{TransfomerBlock} = R(\Phi\circ\text{LN})\circ R(\text{MSA}(d, H)\circ\text{LN})$, with
#   the residual map $R(f)(x) = x + f(x)$.
# - **Quoted** (chapters 1, 3, 4 and 5): the equations above, and
#   - "Given a numer of heads $H \in \mathbb N$ generally the embedding dimension of each head is
#     chosen as $\frac{d}{H}$."
#   - "where $\Phi: \mathbb{R}^d \to \mathbb{R}^d$ is some neural network, typically with only a
#     few number of layers."
#
# ### [S2] the tutorial: row form, scaled, $W^O$, post-LN
#
# A prose tutorial that goes through scaled dot-product attention, multi-head attention, the
# position-wise feed-forward network, and residual connections with layer normalization.
#
# - **Notation.** It uses the course's row form: $X \in \mathbb{R}^{n\times d}$,
#   $W^Q, W^K, W^V \in \mathbb{R}^{d\times d_k}$ and $Q = XW^Q$. Attention is
#   $\text{softmax}(QK^T/\sqrt{d_k})V$: **scaled**, with the softmax over the keys (along each
#   row). Multi-head attention is $\text{Concat}(\text{head}_1, \dots, \text{head}_h)W^O$ with
#   $\text{head}_i = \text{Attention}(QW_i^Q, KW_i^K, VW_i^V)$. Here $Q, K, V$ stand for the
#   layer's inputs, and $W^O$ comes **after** the heads. The feed-forward network is
#   $\text{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2$ with $d_{ff} = 4\,d_{model}$. The block is
#   **post-LN**: $\text{LayerNorm}(x + \text{Sublayer}(x))$.
# - **Quoted** (chapters 1, 3 and 5):
#   - "scaled by the square root of the dimension $d_k$ to prevent gradient vanishing during the
#     softmax operation"
#   - "Multi-Head Attention (MHA) extends this by allowing the model to jointly attend to
#     information from different representation subspaces."
#   - "The 'position-wise' aspect means the same network is applied to each token independently
#     (identically), which can be viewed as a $1 × 1$ convolution."
#   - "The output of a layer is formulated as $\text{LayerNorm}(x + \text{Sublayer}(x))$."
#
# ### [S3] the wiki page: bold column vectors, no scaling
#
# A short personal notes page, published from a personal wiki. It describes the self-attention
# and feed-forward layers in prose around one formula.
#
# - **Notation.** It uses bold column vectors, $\mathbf{q}_i = \mathbf{W}_q\mathbf{x}_i$ for
#   token $i$. The softmax runs over the keys $j$, the scores are **not scaled**, and there is one
#   head with no output projection. In the course's row form this is $\text{softmax}(QK^\top)V$
#   with $W_Q = \mathbf{W}_q^\top$.
# - **Quoted** (chapter 1, section 3 and Exercise 3.1): its formula,
#
#   $$\mathbf{y}_i = \sum_{j=1}^{N} \frac{\exp(\mathbf{q}_i^T \mathbf{k}_j)}{\sum_{k=1}^{N} \exp(\mathbf{q}_i^T \mathbf{k}_k)}\mathbf{v}_j, \qquad \mathbf{q}_i = \mathbf{W}_q \mathbf{x}_i,\; \mathbf{k}_i = \mathbf{W}_k \mathbf{x}_i,\; \mathbf{v}_i = \mathbf{W}_v \mathbf{x}_i .$$
#
# ### [S4] the survey: encoder-decoder, additive mask, BPE
#
# One section of a survey, "High-Level Overview of Transformers". It covers the original
# encoder-decoder Transformer (Vaswani et al., 2017), the steps of self-attention with a causal
# mask, and byte-pair encoding.
#
# - **Notation.** The weight matrices $W_X, W_Y, W_Z$ produce the queries, keys and values. The
#   formula is $G = \text{softmax}(QK^\top/\sqrt{d_k} + M)V$: **scaled**, with the softmax over
#   the keys and an **additive** causal mask $M$ of $0$ and $-\infty$. Positions count from 1:
#   "Example for position 2: $\text{causal\_mask} = [0, 0, -\infty, -\infty]$". Each sublayer is
#   followed by "Add & Norm" (**post-LN**). BPE starts from characters plus an end-of-word symbol
#   `_`.
# - **Quoted** (chapters 1, 2, 3, 6 and 7):
#   - "The decoder attends to its own previous outputs, but masking is applied to prevent
#     attending to future tokens (to maintain causality during generation)."
#   - "At each decoding step, the decoder uses the encoder's output as the key-value pairs and its
#     own hidden state as the query to compute attention scores."
#   - "Input tokens are represented as embeddings, added to positional encodings to retain order
#     information."
#   - "It is designed to balance the trade-off between vocabulary size and the ability to
#     represent rare and unseen words."
#   - "Start with a vocabulary of individual characters and a special end-of-word symbol (e.g.,
#     `_`)." and "Stop after a predefined number of merges or when no frequent pairs remain."
#
# ### [S5] the blog post: a Transformer block step by step
#
# A blog post titled "Transformer Block". It reviews MLPs and RNNs, then builds self-attention
# and one Transformer block step by step, in numbered sections §0 to §10.
#
# - **Notation.** Per token, the vectors are columns: $q_i = W_Q x_i$ with
#   $W_Q \in \mathbb{R}^{d_k\times d_{\text{model}}}$. The matrix form uses rows:
#   $X \in \mathbb{R}^{N\times d_{\text{model}}}$, $Q = XW_Q^\top$ and $E = QK^\top$, then a
#   **row-wise** softmax (over the keys). The scores are **not scaled**. Then $Z = AV$, followed
#   by the output projection $\tilde{Z} = ZW_O^\top$. The course's $W_O$ is the transpose of this
#   one.
# - **Quoted** (chapters 1, 3 and 8):
#   - "Many examples show that the self-score tends to be large" (§7)
#   - "(Some slides use cosine similarity. If you want cosine explicitly:)
#     $\cos(q_i,k_j) = \frac{q_i^\top k_j}{\|q_i\|\;\|k_j\|}$" (§5)
#   - "$\tilde{Z} = ZW_O^\top$" (§6), and training as
#     "$W^\star = \arg\min_W \; \mathcal{L}\big(f(x;W), y\big)$" (§0)
