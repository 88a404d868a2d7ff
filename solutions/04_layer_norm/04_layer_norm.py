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
# # Chapter 4 — Layer normalization
#
# **By the end of this chapter you can** read a paper's LayerNorm formula critically ([S1]'s
# has two slips), write LayerNorm in numpy and PyTorch so that it matches `torch.nn.LayerNorm`
# to the last digit, derive and code its backward pass by hand, write RMSNorm and say what it
# drops, and explain with a measurement why deep Transformers normalise at all.
#
# **Builds on:** chapter 1 (numpy/torch broadcasting, `keepdims`); a little calculus (the chain
# rule) for section 3. Attention itself is not needed here.
#
# **Time:** about 1½ hours (4 exercises, ~60 minutes of coding; section 3 is the hard one).
#
# **Points: 9 in total** — Ex 2.1 (2), 2.2 (2), 3.1 (4, harder), 4.1 (1).
#
# **How to work.** Run the cells from the top. Replace `raise NotImplementedError()` with your
# code, run that cell, then the check cell below it. A failed check says what is wrong, often by
# name ("unbiased variance (divided by d - 1)"). Grading runs more (hidden) cases: a token whose
# features are all equal, `d = 1`, features offset by $10^4$ in float32, gradients. PyTorch's own
# `layer_norm` is switched off while a check runs.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup (read-only). Run this cell first: it loads the libraries and this chapter's checks.
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from autograder.checks import requires
from autograder.checks.layer_norm import (
    check_layer_norm,
    check_layer_norm_backward,
    check_layer_norm_np,
    check_rms_norm,
)

np.set_printoptions(precision=3, suppress=True)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## 1. [S1]'s definition, read carefully
#
# A Transformer adds the output of every sublayer to its input (chapter 5). Without care the
# size of the numbers drifts from layer to layer: up, down, differently per token. Layer
# normalisation (Ba et al., 2016) resets every token to mean 0 and variance 1 across its $d$
# features, then lets the network choose a scale and shift per feature.
#
# The lecture notes [S1] define it like this ($x_k \in \mathbb{R}^d$ is token $k$):
#
# $$\text{LN}(x) = \gamma\,\bar{x} + \beta, \qquad
# \bar{x}_{ki} = \frac{1}{\sqrt{\text{var}(x_k)}}\Big(x_{ki} - \sum_{j=1}^{d} x_{kj}\Big),
# \qquad \gamma \in \mathbb{R},\ \beta \in \mathbb{R}^d .$$
#
# Read it twice. Two things are off compared with the LayerNorm every library implements:
#
# 1. **A sum where the mean is meant.** $x_{ki} - \sum_j x_{kj}$ does not centre the token: for
#    $x_k = (1, 2, 3, 4)$ the sum is 10 and $\bar{x}_k$ has mean $2.5 - 10 = -7.5$ (times
#    $1/\sigma$). The intended term is the mean $\mu_k = \frac{1}{d}\sum_j x_{kj}$.
# 2. **A scalar gain.** $\gamma \in \mathbb{R}$ scales every feature alike, while $\beta \in
#    \mathbb{R}^d$ is a vector. In `torch.nn.LayerNorm(d)` both are vectors of length $d$
#    (`weight` and `bias`), one scale and one shift **per feature**; [S1]'s scalar is the
#    special case $\gamma\,\mathbf{1}$.
#
# [S1] also leaves two details open that matter for matching PyTorch: the variance is the
# **biased** one (divide by $d$, not $d-1$), and a small $\varepsilon$ goes **inside** the square
# root so a token with equal features does not give $0/0$.
#
# **Our form** (row vectors, $X \in \mathbb{R}^{n\times d}$, every row normalised on its own):
#
# $$\mu_k = \frac{1}{d}\sum_{i} x_{ki},\qquad \sigma_k^2 = \frac{1}{d}\sum_i (x_{ki} - \mu_k)^2,\qquad
# \text{LN}(x_k) = \gamma \odot \frac{x_k - \mu_k}{\sqrt{\sigma_k^2 + \varepsilon}} + \beta,\qquad
# \gamma, \beta \in \mathbb{R}^d .$$
#
# Mapping: [S1]'s $\sum_j x_{kj}$ is our $d\,\mu_k$ (replace by $\mu_k$), its $\gamma \in
# \mathbb{R}$ is our $\gamma = \gamma\mathbf{1} \in \mathbb{R}^d$, its $\text{var}(x_k)$ is our
# $\sigma_k^2$ (biased), plus $\varepsilon$.

# %% tags=["demo"]
x = np.array([1.0, 2.0, 3.0, 4.0])
sigma = x.std()  # biased: divides by d
as_written = (x - x.sum()) / sigma  # as written
ours = (x - x.mean()) / sigma
print("[S1] as written:", as_written, " mean", as_written.mean().round(3))
print("with the mean:  ", ours, "   mean", ours.mean().round(3), " var", ours.var().round(3))
print("torch.nn.LayerNorm(4): weight", tuple(torch.nn.LayerNorm(4).weight.shape),
      "bias", tuple(torch.nn.LayerNorm(4).bias.shape), "-> one gain and one shift per feature")


# %% [markdown]
# ## 2. LayerNorm in numpy, then in PyTorch
#
# The normalisation runs over the **last** axis (the features of one token) and must broadcast
# over every leading axis: `(n, d)`, `(B, T, d)`, `(B, H, T, d)` all work the same. Keep the
# axis with `keepdims=True` (numpy) / `keepdim=True` (torch) so `x - mu` broadcasts per token.

# %% [markdown]
# ### Exercise 2.1 — LayerNorm in numpy  *(2 points, ~10 min)*
#
# **Goal:** `layer_norm_np(x, gamma, beta, eps)` for a numpy array `x` of shape `(..., d)`:
# biased variance, `eps` inside the square root, vector `gamma` and `beta` of shape `(d,)`.
# Keep the input's dtype.
#
# <details><summary>Hint</summary>
#
# Normalise each row of features on its own: subtract its mean, divide by its standard deviation
# (with eps inside the square root, and the biased variance), then scale by gamma and shift by
# beta.
#
# <details><summary>The key line</summary>
#
# `mu = x.mean(axis=-1, keepdims=True)`, `var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)`
# (or `x.var(axis=-1, keepdims=True)`, whose default `ddof=0` is the biased one), then
# `gamma * (x - mu) / np.sqrt(var + eps) + beta`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def layer_norm_np(x, gamma, beta, eps=1e-5):
    """gamma * (x - mean) / sqrt(var + eps) + beta over the last axis (biased variance).

    x: (..., d), gamma: (d,), beta: (d,)  ->  (..., d), same dtype as x
    Example: layer_norm_np(np.array([1., 3.]), np.ones(2), np.zeros(2)) -> [-1., 1.] (about)
    """
    ### BEGIN SOLUTION
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # (..., 1), divides by d
    return gamma * (x - mu) / np.sqrt(var + eps) + beta  # (..., d)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_1_layer_norm_np", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.1 (2 points)
check_layer_norm_np(layer_norm_np)

# %% [markdown]
# **Look.** Three tokens on very different scales come out on the same scale: every row of
# the output has mean 0 and variance (almost) 1 — almost, because of $\varepsilon$.

# %% tags=["demo"]
X = np.array([[1.0, 2.0, 3.0, 4.0], [100.0, 300.0, 200.0, 400.0], [-0.01, 0.0, 0.01, 0.02]])
with requires("Exercise 2.1"):
    Y = layer_norm_np(X, np.ones(4), np.zeros(4))
    print(Y)
    print("row means:    ", Y.mean(axis=-1))
    print("row variances:", Y.var(axis=-1), " <- the last token's var 1.25e-4 is not >> eps")


# %% [markdown]
# ### Exercise 2.2 — LayerNorm in PyTorch  *(2 points, ~5 min)*
#
# **Goal:** the same function for torch tensors, differentiable (autograd must see every step),
# equal to `torch.nn.LayerNorm` within float tolerance. `torch.nn.functional.layer_norm` is
# switched off during the check.
#
# <details><summary>Hint</summary>
#
# The numpy version translated to torch. Two traps: torch's variance is not the biased one
# unless you ask, and the shortcut mean of squares minus squared mean loses all precision in
# float32 when the values share a large offset.
#
# <details><summary>The key line</summary>
#
# The numpy code with `dim=-1, keepdim=True` and `torch.sqrt`. Careful: `x.var(dim=-1)` in
# torch is the **unbiased** variance by default; pass `unbiased=False` or write the mean of
# squares yourself. Don't compute the variance as `mean(x²) - mean²`: in float32 it loses all
# digits when the features share a large offset.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def layer_norm(x, gamma, beta, eps=1e-5):
    """torch LayerNorm over the last axis: gamma * (x - mu) / sqrt(var + eps) + beta.

    x: (..., d), gamma: (d,), beta: (d,)  ->  (..., d); var is the biased variance.
    Example: layer_norm(torch.tensor([[0., 2.]]), torch.ones(2), torch.zeros(2)) -> [[-1., 1.]]
    """
    ### BEGIN SOLUTION
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_2_layer_norm", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.2 (2 points)
check_layer_norm(layer_norm)

# %% [markdown]
# **Look.** Your function against the built-in module with random (learned-looking) weights,
# in float32 on a batch of sequences. Outside the check the built-in works again.

# %% tags=["demo"]
with requires("Exercise 2.2"):
    torch.manual_seed(0)
    ln = torch.nn.LayerNorm(16)
    with torch.no_grad():
        ln.weight.normal_(1.0, 0.3)
        ln.bias.normal_(0.0, 0.3)
    x = torch.randn(4, 10, 16) * 3 + 1
    mine = layer_norm(x, ln.weight, ln.bias, eps=ln.eps)
    print("max |yours - nn.LayerNorm| =", (mine - ln(x)).abs().max().item())


# %% [markdown]
# ## 3. The backward pass, by hand  *(harder)*
#
# Autograd gives LayerNorm's gradient for free, but writing it out shows *why* normalisation
# changes how gradients flow: $\mu$ and $\sigma$ depend on every feature of the token, so a
# change in one feature moves all outputs.
#
# For one token write $\hat{x} = (x - \mu)/\sigma$ with $\sigma = \sqrt{v + \varepsilon}$, where
# $v = \frac{1}{d}\sum_k (x_k - \mu)^2$ is its biased variance (section 1's $\sigma_k^2$),
# and $y = \gamma\odot\hat{x} + \beta$. Given the upstream gradient $dy = \partial L/\partial y$,
# let $g = dy \odot \gamma$ (the gradient reaching $\hat{x}$). With $\partial \mu/\partial x_j = 1/d$
# and $\partial \sigma/\partial x_j = (x_j - \mu)/(d\,\sigma) = \hat{x}_j / d$,
#
# $$\frac{\partial \hat{x}_i}{\partial x_j} = \frac{1}{\sigma}\Big(\delta_{ij} - \frac{1}{d} - \frac{\hat{x}_i \hat{x}_j}{d}\Big)
# \quad\Rightarrow\quad
# dx = \frac{1}{\sigma}\Big(g - \overline{g} - \hat{x}\odot\overline{g\odot\hat{x}}\Big),$$
#
# where $\overline{\,\cdot\,}$ is the mean over the $d$ features. The three terms: the direct path,
# the path through $\mu$, the path through $\sigma$. The parameters are shared by every token, so
# their gradients are **sums over all tokens** (all leading axes):
#
# $$d\gamma = \sum_{\text{tokens}} dy \odot \hat{x}, \qquad d\beta = \sum_{\text{tokens}} dy .$$
#
# A useful sanity check: $dx$ sums to 0 over the features (shifting a token by a constant does
# not change its normalised value) and is orthogonal to $\hat{x}$ (scaling it does not either).

# %% [markdown]
# ### Exercise 3.1 — LayerNorm's gradient without autograd  *(4 points, ~25 min, harder)*
#
# **Goal:** `layer_norm_backward(dy, x, gamma, eps)` returns `(dx, dgamma, dbeta)` for
# $y = $ `layer_norm(x, gamma, beta, eps)` (the gradient does not depend on `beta`). `dx` has
# the shape of `x`; `dgamma`, `dbeta` have shape `(d,)`. `.backward()` and `torch.autograd.grad`
# are switched off during the check: compute it from the formulas above.
#
# <details><summary>Hint</summary>
#
# Recompute the forward quantities (mean, standard deviation, the normalised x). The input
# gradient has three terms: the upstream gradient through gamma, minus its mean, minus its
# projection on the normalised x, all over the standard deviation. The parameters' gradients sum
# over every axis but the features.
#
# <details><summary>The key line</summary>
#
# Recompute `mu`, `sigma = torch.sqrt(var + eps)` and `xhat` (all with `keepdim=True`), then
# `g = dy * gamma`; `dx = (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)) / sigma`.
# For the parameters sum over every axis but the last: `dims = tuple(range(x.dim() - 1))`,
# `(dy * xhat).sum(dim=dims)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def layer_norm_backward(dy, x, gamma, eps=1e-5):
    """Gradients of LayerNorm: (dx, dgamma, dbeta) given dy = dL/dy.

    dy, x: (..., d), gamma: (d,)  ->  dx (..., d), dgamma (d,), dbeta (d,)
    dx = (g - mean(g) - xhat * mean(g * xhat)) / sigma with g = dy * gamma (means over d).
    Example: for x of shape (3, 5), dx.sum(-1) is 0 for every token (up to rounding).
    """
    ### BEGIN SOLUTION
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    sigma = torch.sqrt(((x - mu) ** 2).mean(dim=-1, keepdim=True) + eps)  # (..., 1)
    xhat = (x - mu) / sigma  # (..., d)
    g = dy * gamma  # gradient reaching xhat, (..., d)
    dx = (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True)) / sigma
    dims = tuple(range(x.dim() - 1))  # every token shares gamma and beta
    return dx, (dy * xhat).sum(dim=dims), dy.sum(dim=dims)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_1_layer_norm_backward", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.1 (4 points)
check_layer_norm_backward(layer_norm_backward)

# %% [markdown]
# **Look.** Your hand-derived gradient next to autograd's (through your `layer_norm`), and the
# two properties from above: $dx$ sums to zero per token and is orthogonal to $\hat{x}$ (exactly
# so for $\varepsilon = 0$, which this cell uses; with $\varepsilon > 0$, up to a term of order
# $\varepsilon/\sigma^2$).

# %% tags=["demo"]
with requires("Exercise 3.1 and Exercise 2.2"):
    torch.manual_seed(1)
    x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    gamma = torch.randn(8, dtype=torch.float64, requires_grad=True)
    beta = torch.randn(8, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(2, 3, 8, dtype=torch.float64)
    (layer_norm(x, gamma, beta, eps=0.0) * dy).sum().backward()
    dx, dgamma, dbeta = layer_norm_backward(dy, x.detach(), gamma.detach(), eps=0.0)
    for name, mine, auto in [("dx", dx, x.grad), ("dgamma", dgamma, gamma.grad), ("dbeta", dbeta, beta.grad)]:
        print(f"max |{name:6s} - autograd| = {(mine - auto).abs().max().item():.2e}")
    xd = x.detach()
    xhat = (xd - xd.mean(-1, keepdim=True)) / xd.std(-1, unbiased=False, keepdim=True)
    print("sum of dx over features (per token):", dx.sum(-1).abs().max().item())
    print("dx · xhat (per token):              ", (dx * xhat).sum(-1).abs().max().item())


# %% [markdown]
# ## 4. RMSNorm: what it drops
#
# RMSNorm (Zhang & Sennrich, 2019), used by LLaMA, T5 and most recent models, keeps only the
# rescaling:
#
# $$\text{RMSNorm}(x_k) = \gamma \odot \frac{x_k}{\sqrt{\frac{1}{d}\sum_i x_{ki}^2 + \varepsilon}} .$$
#
# It **drops the centring** (no $-\mu$) and **the shift** $\beta$. The authors found the
# re-centring contributes little to training; dropping it saves one reduction per token and the
# output is no longer forced to mean 0. Note the *mean* square: dividing by $\lVert x\rVert$
# instead would make every token of length 1, not of RMS 1 — a factor $\sqrt{d}$ apart.

# %% [markdown]
# ### Exercise 4.1 — RMSNorm  *(1 point, ~5 min)*
#
# **Goal:** `rms_norm(x, gamma, eps)` over the last axis, `gamma` of shape `(d,)`, `eps`
# inside the square root.
#
# <details><summary>Hint</summary>
#
# Like LayerNorm but with no mean subtracted and no beta: divide by the root of the mean square
# of the features (eps inside the root), then scale by gamma.
#
# <details><summary>The key line</summary>
#
# `x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * gamma`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex4_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def rms_norm(x, gamma, eps=1e-6):
    """gamma * x / sqrt(mean(x²) + eps) over the last axis (no centring, no shift).

    x: (..., d), gamma: (d,)  ->  (..., d)
    Example: rms_norm(torch.tensor([3., -3.]), torch.ones(2), eps=0.0) -> [1., -1.]
    """
    ### BEGIN SOLUTION
    ms = (x * x).mean(dim=-1, keepdim=True)  # mean square, (..., 1)
    return gamma * x / torch.sqrt(ms + eps)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex4_1_rms_norm", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 4.1 (1 point)
check_rms_norm(rms_norm)

# %% [markdown]
# **Look.** The same token through both norms. LayerNorm removes the token's offset (mean 0);
# RMSNorm keeps it and only rescales, so the RMS of the output is 1 but its mean is not 0.

# %% tags=["demo"]
x = torch.tensor([[3.0, 4.0, 5.0, 6.0]])  # a token with a large common offset
ones, zeros = torch.ones(4), torch.zeros(4)
with requires("Exercise 4.1 and Exercise 2.2"):
    for name, y in [("LayerNorm", layer_norm(x, ones, zeros)), ("RMSNorm", rms_norm(x, ones))]:
        print(f"{name:9s} {y[0].numpy()}  mean {y.mean().item():+.3f}  rms {y.pow(2).mean().sqrt().item():.3f}")


# %% [markdown]
# ## 5. Why normalise: activations through a deep stack
#
# An experiment with nothing but linear maps. 48 layers, $d = 256$, weights drawn with standard
# deviation $c/\sqrt{d}$. Each layer multiplies the scale of the activations by about $c$, so
# after $L$ layers it is $c^L$: with $c = 1.2$ that is $1.2^{48} \approx 6000$, with $c = 0.8$
# about $2\cdot 10^{-5}$. Only $c = 1$ exactly keeps it, and real training moves the weights
# away from any careful initialisation. With your `layer_norm` after every layer, the scale
# entering each layer is 1 *whatever* the weights do.

# %% tags=["demo"]
def activation_scale(c, depth=48, d=256, n=64, norm=None, seed=0):
    # Standard deviation of the activations after each of `depth` random linear layers.
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    stds = []
    for _ in range(depth):
        x = x @ (torch.randn(d, d, generator=g) * c / math.sqrt(d))
        if norm is not None:
            x = norm(x)
        stds.append(x.std().item())
    return stds


with requires("Exercise 2.2"):
    ln = lambda h: layer_norm(h, torch.ones(h.shape[-1]), torch.zeros(h.shape[-1]))  # noqa: E731
    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    for c, color in [(0.8, "tab:blue"), (1.0, "tab:gray"), (1.2, "tab:red")]:
        ax.plot(activation_scale(c), color=color, label=f"c = {c}, no norm")
        ax.plot(activation_scale(c, norm=ln), color=color, ls="--", label=f"c = {c}, LayerNorm")
    ax.set_yscale("log"); ax.set_xlabel("layer"); ax.set_ylabel("std of activations")
    ax.legend(fontsize=8, ncol=2); ax.set_title("48 random linear layers, d = 256")
    plt.tight_layout(); plt.show()

# %% [markdown]
# Read the plot: without a norm the three curves fan out exponentially (a factor of $10^8$
# between them after 48 layers); with LayerNorm the dashed lines sit at 1 for every $c$. In a
# Transformer the same thing happens to the residual stream, and gradients scale with the
# activations, which is why every block normalises (where exactly — before or after the
# residual addition — is chapter 5's question).
#
# ![Post-LN and pre-LN Transformer blocks side by side](figures/pre_post_ln.svg)
#
# *A preview of chapter 5: the two places a block puts its LayerNorms (blue: the residual paths).*
#
# ## Summary
#
# - LayerNorm: per token, over the $d$ features, $\gamma\odot(x-\mu)/\sqrt{\sigma^2+\varepsilon}+\beta$
#   with the **biased** variance, $\varepsilon$ **inside** the root, $\gamma,\beta\in\mathbb{R}^d$.
# - The lecture notes [S1] write a **sum** where the mean is meant and a **scalar** $\gamma$; PyTorch's gain is
#   a vector (one per feature).
# - Its gradient has three paths (direct, through $\mu$, through $\sigma$); $\gamma,\beta$ collect
#   theirs over every token.
# - RMSNorm drops the centring and the shift; it rescales by the root *mean* square.
# - Without normalisation the scale of activations in a deep stack is $c^L$; with it, 1.
#
# **Going further.** BatchNorm normalises each feature over the *batch* (axis 0) — fine for
# images, awkward for variable-length sequences and batch size 1 at generation time. Xiong et
# al. (2020), "On Layer Normalization in the Transformer Architecture", analyse where the norm
# should go (chapter 5). Fused LayerNorm kernels compute $\mu$ and $\sigma^2$ in one pass with
# Welford's algorithm, which avoids the $\text{mean}(x^2)-\mu^2$ cancellation you were warned about.
