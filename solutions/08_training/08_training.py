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
# # Chapter 8 — Training a GPT on Shakespeare
#
# **By the end of this chapter you can** turn a text into training batches, write the loss a
# language model is trained on (numerically stable), the warm-up + cosine learning-rate schedule,
# one clipped training step, the AdamW optimizer itself, an honest evaluation, checkpoints that
# resume *exactly*, and a sampler with temperature, top-k and top-p; then you train a GPT on Shakespeare — on a GPU
# when there is one (bf16, TF32, `torch.compile`, fused attention), on your laptop's CPU when
# there is not — and measure how fast it learns (tokens/s, MFU).
#
# **Builds on:** chapter 6 (the GPT: `forward(idx (B, T)) -> logits (B, T, V)`, and RoPE) and
# chapter 7 (tokenizers). The checks of the loop's exercises run your functions on a tiny model
# made of `torch.nn` modules (no chapter's answer, so they run in every student kit); the
# training run of section 7 trains **your own GPT** (your chapter 1–6 answers, your RoPE
# included, read from your saved notebooks) with **your own loop** from this notebook, the
# reference trainer beside it, and, where the budget allows, a second one on the tokens of
# your chapter 7 tokenizer. A
# piece that is missing or fails its check is replaced by the given one, and the run says so;
# where there is no given one (the student kit), the cells that need it say which exercise to
# finish and are skipped. An unfinished chapter does not block you.
#
# **Time:** about 2 hours (8 exercises, ~95 minutes of coding) plus the training run: on a CPU
# it is fitted to `MAX_SECONDS`, 8 minutes unless you change it at the top (a quarter more
# if you continue it); on one H100 GPU it took 2 minutes.
#
# **Points: 20 in total** — Ex 1.1 (2), 2.1 (2), 3.1 (2), 3.2 (3), 3.3 (3), 4.1 (2), 5.1 (3), 6.1 (3).
#
# **How to work.** Run the cells from the top. Replace `raise NotImplementedError()` with your
# code, run that cell, then the check cell below it. A failed check names the mistake when it
# is a known one ("cosine decays to 0 instead of min_lr"). Grading runs more (hidden) cases.
# PyTorch's own `cross_entropy`/`log_softmax`/`logsumexp` and `clip_grad_norm_` are switched off
# while the checks of the exercises that replace them run. The training run itself is not graded.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup (read-only). Run this cell first: it loads the libraries and this chapter's checks.
import math
import os
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from autograder.checks import requires, yours
from autograder.checks.training import (
    check_AdamW,
    check_checkpoint,
    check_cross_entropy,
    check_estimate_loss,
    check_get_batch,
    check_get_lr,
    check_sample_next_token,
    check_train_step,
)
from transformer_ref.corpus import load_shakespeare
from transformer_ref.models import GPT, GPTConfig
from transformer_ref.sampling import sample_next_token as reference_sample_next_token
from transformer_ref.train import Trainer, pick_device, prepare_data, preset
from transformer_ref.train.budget import fit_run, outlook
from transformer_ref.train.data import get_batch as reference_get_batch
from transformer_ref.train.trainer import configure_optimizer, peak_flops_for
from transformer_ref.train.trainer import get_lr as reference_get_lr

torch.set_printoptions(precision=4, sci_mode=False)

# %% tags=["demo"]
# Your setting: the training run's time budget in seconds (section 7). None: 8 minutes on a
# CPU, 4 on a GPU. More time trains a better model: section 7 says what loss to expect from
# the time you give it, and what would help.
MAX_SECONDS = None

# %% [markdown]
# ## 0. Which run: GPU, CPU, or a smoke test
#
# The same notebook trains on whatever it finds. `pick_device()` returns CUDA if there is an
# NVIDIA GPU, else Apple's MPS, else the CPU; the configuration follows:
#
# | run | when | model | steps | tokens per step | target |
# |---|---|---|---|---|---|
# | `gpu` | CUDA | 6 layers, $d$ = 384, 6 heads, context 256 (10.7 M parameters) | 5000 | 16 384 | val loss ≤ 1.50 in ≤ 3 min (H100) |
# | `cpu` | no GPU | 4 layers, $d$ = 128, 4 heads, context 128 (0.8 M) | 3000, fitted to 8 min | 2 048 | val loss ≤ 1.60 in ≤ 8 min (2 cores) |
# | `smoke` | `COURSE_SMOKE=1` or grading | 2 layers, $d$ = 64, context 64 | 20 | 1 024 | the notebook runs in seconds |
#
# The smoke size is for the automatic tests and the grader (the long run is not graded): set
# `COURSE_SMOKE=1` in the environment before starting Jupyter to get it yourself. Every run
# puts positions in as RoPE (chapter 06), your GPT and the reference alike (section 7).

# %% tags=["demo"]
DEVICE = pick_device()  # cuda > mps > cpu
GRADING = any(os.environ.get(v) for v in ("NBGRADER_EXECUTION", "COURSE_GRADE_JOB"))
SMOKE = os.environ.get("COURSE_SMOKE") == "1" or GRADING  # the grader never trains for long
RUN = "smoke" if SMOKE else ("gpu" if DEVICE.type == "cuda" else "cpu")
if RUN == "smoke":
    DEVICE = torch.device("cpu")
OUT = Path(os.environ.get("COURSE_OUT", Path(tempfile.gettempdir()) / "course-08-training"))
common = dict(data_dir=str(OUT / "data"), out_dir=str(OUT / RUN), progress=False, plot=False,
              progress_seconds=7, device=str(DEVICE))  # a line every ~7 s while it trains
if RUN == "gpu":
    cfg = preset("gpu_char", **common)  # bf16 autocast, TF32, torch.compile, SDPA attention
    default_seconds = 240
elif RUN == "cpu":
    cfg = preset("cpu_char", **common)
    default_seconds = 8 * 60  # on a slow laptop the run is shortened to fit (section 7)
else:
    cfg = preset("cpu_smoke", max_iters=20, eval_interval=10, eval_iters=1, **common)
    default_seconds = 30
# the budget: your setting at the top (or COURSE_MAX_SECONDS), else the run's default; the
# smoke run always keeps its 30 s
try:
    chosen = MAX_SECONDS or os.environ.get("COURSE_MAX_SECONDS")
except NameError:  # the setting's cell was not run
    chosen = os.environ.get("COURSE_MAX_SECONDS")
MAX_SECONDS = default_seconds if SMOKE or not chosen else float(chosen)
print(f"run: {RUN} on {DEVICE}  |  {cfg.n_layer} layers, d_model {cfg.d_model}, "
      f"context {cfg.block_size}, batch {cfg.batch_size}, at most {cfg.max_iters} steps in "
      f"{MAX_SECONDS:.0f} s")

# %% [markdown]
# ## 1. From text to batches
#
# Shakespeare's plays (from the course's offline corpus, `transformer_ref.corpus`) become one
# long array of token ids. We use **characters** as tokens here — 71 of them — because a
# character model learns visible structure (words, line breaks, speaker names) within minutes;
# chapter 7's BPE works the same way (`prepare_data("bpe")`) with fewer, longer tokens. The
# split is **by play**: the validation text comes from four plays the model never trains on.
#
# The arrays are stored as `uint16` memmaps on disk, so only the windows a batch touches are
# read. A training example is a window of $T+1$ consecutive ids starting at a random $i$:
# the model reads $x = (t_i, \dots, t_{i+T-1})$ and at every position $j$ is scored on
# predicting the *next* id, $y_j = t_{i+j+1}$. One window gives $T$ predictions at once —
# the causal mask (chapter 2) makes position $j$ see only $x_{\le j}$.

# %% tags=["demo"]
data = prepare_data("char", cfg.data_dir)  # tokenized once, then reused from disk
tok = data.tokenizer
print(f"vocabulary: {data.vocab_size} characters: {''.join(tok.chars)!r}")
print(f"train: {len(data.train):,} tokens, val: {len(data.val):,} tokens ({data.train.dtype})")
print(tok.decode(data.train[:200]))


# %% [markdown]
# ### Exercise 1.1 — `get_batch`  *(2 points, ~10 min)*
#
# **Goal:** `get_batch(data, batch_size, block_size, generator)` returns `(x, y)`, two
# `(B, T)` int64 tensors: `B` random windows `x = data[i : i + T]` and `y = data[i + 1 : i + T + 1]`.
# Draw the starts with `torch.randint(len(data) - block_size, (batch_size,), generator=generator)`
# (the check replays your generator, so draw exactly this, once).
#
# <details><summary>Hint</summary>
#
# Pick random start positions from the given generator so that x and its one-step-shifted y both
# fit, slice the array, and return int64 tensors stacked into a batch.
#
# <details><summary>The key line</summary>
#
# The last valid start is `len(data) - block_size - 1` (y needs one token more than x), and
# `torch.randint(high, ...)` excludes `high`. For each start `i` (use `ix.tolist()`), slice the
# numpy array and convert: `torch.from_numpy(data[i : i + block_size].astype(np.int64))`; then
# `torch.stack` the rows. The memmap holds `uint16`; embeddings and the loss want `int64`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex1_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def get_batch(data, batch_size, block_size, generator=None):
    """Random windows of a token array: x = data[i:i+T], y = data[i+1:i+T+1].

    data: 1-d numpy array of N token ids (e.g. a uint16 memmap)
    returns x, y: (B, T) int64 tensors; starts i ~ torch.randint(N - T, (B,), generator=generator)
    Example: data = np.arange(10), T = 3, a start at 2 -> x = [2, 3, 4], y = [3, 4, 5]
    """
    ### BEGIN SOLUTION
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    x = torch.stack([torch.from_numpy(data[i : i + block_size].astype(np.int64))
                     for i in ix.tolist()])  # (B, T)
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block_size].astype(np.int64))
                     for i in ix.tolist()])  # (B, T)
    return x, y
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex1_1_get_batch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 1.1 (2 points)
check_get_batch(get_batch)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
from autograder.checks.training import probe as _probe
_hidden_check("training.get_batch", _probe("training.get_batch", get_batch))
### END HIDDEN TESTS

# %% [markdown]
# **Look.** One window of the training text: `y` is `x` shifted left by one character, so the
# model learns "after `ROMEO:\n` comes ..." at every position at once.

# %% tags=["demo"]
with requires("Exercise 1.1"):
    x, y = get_batch(data.train, 2, 48, generator=torch.Generator().manual_seed(0))
    print("x:", repr(tok.decode(x[0])))
    print("y:", repr(tok.decode(y[0])))
    print("shapes", tuple(x.shape), tuple(y.shape), x.dtype)


# %% [markdown]
# ## 2. The loss: cross-entropy from logits, stably
#
# For each of the $N = B \cdot T$ positions the GPT outputs a row of **logits**
# $z \in \mathbb{R}^{V}$ (row vectors: all of them form $Z \in \mathbb{R}^{N \times V}$). The
# model's probability of the next token is $\text{softmax}(z)$ over the vocabulary (the last
# axis), and the loss is the mean negative log-probability of the right tokens $y$:
#
# $$\mathcal{L} = -\frac{1}{N}\sum_{n=1}^{N} \log \text{softmax}(z_n)_{y_n}
# = \frac{1}{N}\sum_{n=1}^{N}\Big(\log\sum_{v=1}^{V} e^{z_{nv}} - z_{n y_n}\Big).$$
#
# The blog post [S5] writes training as $W^\star = \arg\min_W \mathcal{L}(f(x; W), y)$; here $f(x; W)$ is
# the GPT's logits $Z$ and $\mathcal{L}$ is the formula above. A useful number: a model that
# knows nothing predicts $1/V$ everywhere and has loss $\log V = \log 71 \approx 4.26$ nats.
#
# **Stability.** $e^{z}$ overflows for $z > 88$ in float32 (and $z > 709$ in float64), and
# $\log(\text{softmax})$ computed in two steps gives $\log 0 = -\infty$ for a token far below the
# best one. The log-sum-exp trick subtracts each row's max $m = \max_v z_v$ first:
# $\log\sum_v e^{z_v} = m + \log\sum_v e^{z_v - m}$ — every exponent is $\le 0$ and one is $0$,
# so the sum is in $[1, V]$.

# %% [markdown]
# ### Exercise 2.1 — `cross_entropy`  *(2 points, ~10 min)*
#
# **Goal:** `cross_entropy(logits, targets)`: logits `(..., V)`, integer targets `(...)` → the
# mean loss over all positions as a 0-dim tensor (same dtype as the logits), computed with the
# log-sum-exp trick, differentiable. `F.cross_entropy`, `log_softmax` and `logsumexp` are
# switched off during the check.
#
# <details><summary>Hint</summary>
#
# Flatten batch and time, compute the log-softmax stably (subtract each row's maximum, log-sum-
# exp), pick each row's target entry and average the negatives.
#
# <details><summary>The key line</summary>
#
# Flatten: `z = logits.reshape(-1, V)`, `t = targets.reshape(-1)`. Then
# `m = z.max(dim=-1, keepdim=True).values`, `lse = m + torch.log(torch.exp(z - m).sum(-1, keepdim=True))`,
# `logp = z - lse`, and pick the target entries with `logp[torch.arange(len(t)), t]`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def cross_entropy(logits, targets):
    """Mean of logsumexp(z_n) - z_n[y_n] over every position n, stable for any logits.

    logits: (..., V) float, targets: (...) int64  ->  0-dim tensor, logits' dtype
    Example: cross_entropy(torch.zeros(2, 4), torch.tensor([0, 3])) -> log 4 = 1.3863
    """
    ### BEGIN SOLUTION
    V = logits.shape[-1]
    z = logits.reshape(-1, V)  # (N, V)
    t = targets.reshape(-1)  # (N,)
    m = z.max(dim=-1, keepdim=True).values  # (N, 1) per-row max
    lse = m + torch.log(torch.exp(z - m).sum(dim=-1, keepdim=True))  # (N, 1)
    logp = z - lse  # (N, V) log-probabilities
    return -logp[torch.arange(t.numel()), t].mean()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_1_cross_entropy", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.1 (2 points)
check_cross_entropy(cross_entropy)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
from autograder.checks.training import probe as _probe
_hidden_check("training.cross_entropy", _probe("training.cross_entropy", cross_entropy))
### END HIDDEN TESTS

# %% [markdown]
# **Look.** An untrained GPT (weights $\sim \mathcal{N}(0, 0.02)$) predicts nearly uniform
# probabilities, so its loss on a real batch is close to $\log V$: your function and PyTorch's
# agree on it.

# %% tags=["demo"]
with requires("Exercise 2.1 and Exercise 1.1"):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=data.vocab_size, block_size=64, n_layer=2, n_head=2,
                          d_model=64))
    x, y = get_batch(data.train, 8, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(x)  # (B, T, V)
    print(f"yours {cross_entropy(logits, y).item():.4f}   "
          f"F.cross_entropy {F.cross_entropy(logits.reshape(-1, data.vocab_size), y.reshape(-1)).item():.4f}   "
          f"log V = {math.log(data.vocab_size):.4f}")


# %% [markdown]
# ## 3. Optimisation: the schedule and one step
#
# **AdamW** (Loshchilov & Hutter, 2019) keeps for every weight a running mean of its gradient
# and of its square and steps by their ratio, so each weight moves by about the learning rate
# whatever the scale of its gradient; weight decay shrinks matrices (not biases or norm gains)
# a little every step. It is what every GPT is trained with.
#
# **The learning rate** follows a schedule. Early on the gradients are large and AdamW's
# second-moment estimates are poor, so a full-size step can throw the model into a bad region:
# a **linear warm-up** over the first $W$ steps ramps it up. Afterwards a **cosine decay** lowers
# it smoothly to `min_lr` at step $D$ (`max_iters`), so the end of training takes small, careful
# steps. With the step $t$ counted from 0:
#
# $$\eta_t = \begin{cases}
# \eta_{\max}\,\dfrac{t+1}{W} & t < W \\[6pt]
# \eta_{\min} + \tfrac12\big(1 + \cos(\pi r)\big)(\eta_{\max} - \eta_{\min}),\quad r = \dfrac{t - W}{D - W} & W \le t < D \\[6pt]
# \eta_{\min} & t \ge D
# \end{cases}$$

# %% [markdown]
# ### Exercise 3.1 — warm-up + cosine `get_lr`  *(2 points, ~10 min)*
#
# **Goal:** `get_lr(step, max_lr, min_lr, warmup_iters, max_iters)` returns the learning rate
# $\eta_t$ above as a Python float. `warmup_iters` may be 0 (no warm-up).
#
# <details><summary>Hint</summary>
#
# Three regimes: a linear warm-up, a cosine decay from the maximum to the minimum, then the
# minimum. Decide carefully which side of each boundary a step falls on.
#
# <details><summary>The key line</summary>
#
# Three branches in this order: `step < warmup_iters`, `step >= max_iters`, else the cosine with
# `r = (step - warmup_iters) / (max_iters - warmup_iters)` and `math.cos(math.pi * r)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def get_lr(step, max_lr, min_lr, warmup_iters, max_iters):
    """Linear warm-up to max_lr over warmup_iters steps, cosine to min_lr at max_iters.

    step: int, counted from 0  ->  float
    Example: get_lr(0, 1.0, 0.0, 10, 110) -> 0.1; get_lr(60, 1.0, 0.0, 10, 110) -> 0.5
    """
    ### BEGIN SOLUTION
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step >= max_iters:
        return min_lr
    r = (step - warmup_iters) / max(1, max_iters - warmup_iters)  # 0 -> 1 over the decay
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (max_lr - min_lr)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_1_get_lr", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.1 (2 points)
check_get_lr(get_lr)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
from autograder.checks.training import probe as _probe
_hidden_check("training.get_lr", _probe("training.get_lr", get_lr))
### END HIDDEN TESTS

# %% [markdown]
# **Look.** The schedule of this notebook's run (the configuration chosen in section 0).

# %% tags=["demo"]
with requires("Exercise 3.1"):
    steps = np.arange(cfg.max_iters + 1)
    lrs = [get_lr(int(s), cfg.learning_rate, cfg.min_lr, cfg.warmup_iters, cfg.max_iters)
           for s in steps]
    fig, ax = plt.subplots(figsize=(6.5, 3))
    ax.plot(steps, lrs)
    ax.axvline(cfg.warmup_iters, color="gray", ls=":", label=f"end of warm-up ({cfg.warmup_iters})")
    ax.set_xlabel("optimizer step"); ax.set_ylabel("learning rate")
    ax.set_title(f"warm-up + cosine, {RUN} run"); ax.legend(); plt.tight_layout(); plt.show()


# %% [markdown]
# **Gradient clipping.** Now and then a batch produces a huge gradient (a rare character, a
# loss spike); one such step can undo hours of training. Clipping rescales the *whole* gradient
# when its global norm exceeds $c$:
#
# $$g \leftarrow g \cdot \min\Big(1, \frac{c}{\lVert g\rVert_2}\Big), \qquad
# \lVert g\rVert_2 = \sqrt{\textstyle\sum_{p}\sum_i g_{p,i}^2} \text{ over all parameters } p .$$
#
# Its direction is kept, only the length is capped. One training step is then:
# clear the gradients, forward, loss, backward, clip, optimizer step.

# %% [markdown]
# ### Exercise 3.2 — one training step with gradient clipping  *(3 points, ~15 min)*
#
# **Goal:** `train_step(model, optimizer, x, y, grad_clip)` performs one step on the batch
# `(x, y)` and returns the loss *of that batch* (before the update) as a Python float. Use your
# `cross_entropy`. Clip the global gradient norm to `grad_clip` yourself:
# `torch.nn.utils.clip_grad_norm_` is switched off during the check.
#
# <details><summary>Hint</summary>
#
# Zero the old gradients, forward, backward; then compute one global norm over all gradients and
# shrink them all by the same factor when it is too large, before the optimiser steps.
#
# <details><summary>The key line</summary>
#
# `optimizer.zero_grad(set_to_none=True)`; `loss = cross_entropy(model(x), y)`; `loss.backward()`;
# then inside `with torch.no_grad():` collect `grads = [p.grad for p in model.parameters() if p.grad is not None]`,
# `norm = torch.sqrt(sum((g * g).sum() for g in grads))`, `scale = min(1.0, grad_clip / (norm.item() + 1e-6))`,
# `g.mul_(scale)` for each; finally `optimizer.step()` and `return loss.item()`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def train_step(model, optimizer, x, y, grad_clip):
    """zero_grad, forward, loss, backward, clip the global grad norm to grad_clip, step.

    x, y: (B, T) int64  ->  the batch's loss before the update (float)
    Example: a fresh GPT with V = 71 returns about log 71 = 4.26 on its first step
    """
    ### BEGIN SOLUTION
    optimizer.zero_grad(set_to_none=True)
    loss = cross_entropy(model(x), y)  # logits (B, T, V)
    loss.backward()
    with torch.no_grad():
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = torch.sqrt(sum((g * g).sum() for g in grads))  # global L2 norm
        scale = min(1.0, grad_clip / (norm.item() + 1e-6))
        for g in grads:
            g.mul_(scale)
    optimizer.step()
    return loss.item()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_2_train_step", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.2 (3 points)
check_train_step(train_step)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
# the given earlier functions, in place of yours if they fail their checks
_given = {
    'cross_entropy': 'def cross_entropy(logits, targets):\n    """Mean of logsumexp(z_n) - z_n[y_n] over every position n, stable for any logits.\n\n    logits: (..., V) float, targets: (...) int64  ->  0-dim tensor, logits\' dtype\n    Example: cross_entropy(torch.zeros(2, 4), torch.tensor([0, 3])) -> log 4 = 1.3863\n    """\n    V = logits.shape[-1]\n    z = logits.reshape(-1, V)  # (N, V)\n    t = targets.reshape(-1)  # (N,)\n    m = z.max(dim=-1, keepdim=True).values  # (N, 1) per-row max\n    lse = m + torch.log(torch.exp(z - m).sum(dim=-1, keepdim=True))  # (N, 1)\n    logp = z - lse  # (N, V) log-probabilities\n    return -logp[torch.arange(t.numel()), t].mean()',
}
from autograder.checks.training import probe as _probe
_hidden_check("training.train_step", _probe("training.train_step", train_step), given=_given)
del _given
### END HIDDEN TESTS

# %% [markdown]
# **Look.** The classic first test of a training loop: a model must be able to memorise a
# single batch. If this loss does not fall towards 0, something in the step is broken.

# %% tags=["demo"]
model = None  # the memorising model, built below
with requires("Exercise 3.2 and Exercise 1.1"):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=data.vocab_size, block_size=32, n_layer=2, n_head=2,
                          d_model=64))
    opt = configure_optimizer(model, 0.0, 3e-3, (0.9, 0.99))
    x, y = get_batch(data.train, 4, 32, generator=torch.Generator().manual_seed(2))
    losses, said = [], time.perf_counter()
    for step in range(40 if SMOKE else 150):
        losses.append(train_step(model, opt, x, y, grad_clip=1.0))
        if time.perf_counter() - said >= 5:  # a slow machine shows progress
            print(f"  step {step + 1}: loss {losses[-1]:.3f}", flush=True)
            said = time.perf_counter()
    print("loss on the same batch, every 10 steps:", np.round(losses[::10], 3))


# %% [markdown]
# **AdamW, step by step.** For each parameter tensor $\theta$ with gradient $g_t$ at its
# $t$-th step ($t = 1, 2, \dots$), learning rate $\eta$ (the group's current one), betas
# $(\beta_1, \beta_2)$, $\epsilon$ and weight decay $\lambda$, all entrywise:
#
# $$m_t = \beta_1 m_{t-1} + (1-\beta_1)\,g_t, \qquad v_t = \beta_2 v_{t-1} + (1-\beta_2)\,g_t^2
# \qquad (m_0 = v_0 = 0),$$
#
# $$\hat m_t = \frac{m_t}{1-\beta_1^t}, \qquad \hat v_t = \frac{v_t}{1-\beta_2^t}, \qquad
# \theta \leftarrow \theta\,(1 - \eta\lambda), \qquad
# \theta \leftarrow \theta - \eta\,\frac{\hat m_t}{\sqrt{\hat v_t} + \epsilon}.$$
#
# $m$ and $v$ start at 0, so for small $t$ they underestimate the averages: the **bias
# correction** divides that out. The **decay is decoupled**: the weights shrink directly by the
# factor $1 - \eta\lambda$, instead of adding $\lambda\theta$ to the gradient (that is "Adam with
# L2", where the decay would be divided by $\sqrt{\hat v_t}$ like the rest and big-gradient
# weights would barely decay — the point of Loshchilov & Hutter's paper).
#
# **Parameter groups.** An optimizer takes either a list of parameters or a list of *groups*,
# dicts `{"params": [...], "weight_decay": ...}` whose entries override the constructor's
# defaults. This chapter's optimizer (`configure_optimizer`) builds two: matrices (linear and
# embedding weights, `p.dim() >= 2`) decay with `weight_decay`, vectors (biases, LayerNorm
# gains, `p.dim() < 2`) get `weight_decay = 0.0`. `torch.optim.Optimizer` stores the groups
# in `self.param_groups` (each with every setting filled in) and gives you `self.state`, a
# dict with one entry per parameter for $m$, $v$ and $t$.

# %% [markdown]
# ### Exercise 3.3 — AdamW from scratch  *(3 points, ~20 min)*
#
# **Goal:** `AdamW`, a subclass of `torch.optim.Optimizer` with the constructor of
# `torch.optim.AdamW`: `AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
# weight_decay=1e-2)`, where `params` is a list of parameters or of parameter groups. Its
# `step()` applies the update above to every parameter that has a gradient, with the settings
# of its own group (read them inside `step()`: a schedule changes `group["lr"]` between
# steps); a parameter whose `.grad` is `None` is skipped. The check runs your class and
# `torch.optim.AdamW` side by side for up to 10 steps on the kinds of parameter a GPT has
# (an embedding, linear weights and biases, a LayerNorm's gain) with the two groups above (and with one list, and with the defaults) and compares the weights after every step
# (rtol 1e-5, atol 1e-6). `torch.optim.Adam`/`AdamW` themselves may not do the work.
#
# <details><summary>Hint</summary>
#
# Per parameter, keep a step count and two running averages (of the gradient and of its square);
# decay the weights directly (decoupled), correct the averages' bias, then update. No gradient
# tracking inside the step.
#
# <details><summary>The key line</summary>
#
# `__init__`: `super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))`.
# `step()`, decorated with `@torch.no_grad()`: `for group in self.param_groups:`, then
# `for p in group["params"]:` skip `p.grad is None`; `state = self.state[p]`, on the first step
# `state["step"] = 0` and `torch.zeros_like(p)` for $m$ and $v$; `state["step"] += 1`;
# `p.mul_(1 - lr * wd)`; `m.mul_(beta1).add_(g, alpha=1 - beta1)`;
# `v.mul_(beta2).addcmul_(g, g, value=1 - beta2)`; then
# `p.sub_(lr * (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt() + eps))`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_3_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
class AdamW(torch.optim.Optimizer):
    """AdamW (decoupled weight decay, bias correction) with torch.optim.AdamW's constructor.

    params: parameters or parameter groups; lr, betas, eps, weight_decay: the defaults of
    every group. step() updates each parameter that has a gradient, with its group's settings.
    Example: AdamW(model.parameters(), lr=3e-4) matches torch.optim.AdamW(model.parameters(), lr=3e-4)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        ### BEGIN SOLUTION
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)  # self.param_groups, self.state
        ### END SOLUTION

    @torch.no_grad()
    def step(self, closure=None):
        ### BEGIN SOLUTION
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            eps, wd = group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]  # this parameter's own m, v and step count
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t, m, v, g = state["step"], state["exp_avg"], state["exp_avg_sq"], p.grad
                p.mul_(1 - lr * wd)  # decoupled weight decay
                m.mul_(beta1).add_(g, alpha=1 - beta1)  # m_t
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)  # v_t
                m_hat = m / (1 - beta1**t)  # bias corrections
                v_hat = v / (1 - beta2**t)
                p.sub_(lr * m_hat / (v_hat.sqrt() + eps))
        return loss
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_3_AdamW", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.3 (3 points)
check_AdamW(AdamW)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
from autograder.checks.training import probe as _probe
_hidden_check("training.AdamW", _probe("training.AdamW", AdamW))
### END HIDDEN TESTS

# %% [markdown]
# **Look.** The same small GPT trained on the same batches twice, once with PyTorch's AdamW and
# once with yours, both with this chapter's two groups: the losses agree step for step. The
# weights agree up to float32 rounding, which Adam magnifies in weights whose gradient is
# close to 0 ($\hat m_t/\sqrt{\hat v_t}$ is about $\pm 1$ whatever the gradient's size).

# %% tags=["demo"]
with requires("Exercise 3.3"):
    runs = {}
    for name, opt_class in [("torch.optim.AdamW", torch.optim.AdamW), ("your AdamW", AdamW)]:
        print(f"20 steps with {name} ...", flush=True)  # seconds each on a busy laptop
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=data.vocab_size, block_size=32, n_layer=2, n_head=2,
                              d_model=64))
        params = [p for p in model.parameters() if p.requires_grad]
        opt = opt_class([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                        lr=3e-3, betas=(0.9, 0.99))
        g, losses = torch.Generator().manual_seed(3), []
        for _ in range(20):
            x, y = reference_get_batch(data.train, 4, 32, "cpu", g)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        runs[name] = (losses, torch.cat([p.detach().flatten() for p in model.parameters()]))
    for name, (losses, _) in runs.items():
        print(f"{name:18s} loss every 5 steps:", np.round(losses[::5], 4))
    (_, w_torch), (_, w_yours) = runs.values()
    print("largest weight difference after 20 steps:", (w_torch - w_yours).abs().max().item())


# %% [markdown]
# ## 4. Evaluation
#
# The training loss of the current batch is noisy and measured *while* the weights change. To
# compare models (and to notice overfitting), average the loss over `eval_iters` batches of each
# split with the model in **eval mode** (dropout off) and **without autograd** (no graph is kept,
# which halves the memory and time), then put the model back in the mode it was in.

# %% [markdown]
# ### Exercise 4.1 — `estimate_loss`  *(2 points, ~10 min)*
#
# **Goal:** `estimate_loss(model, data, batch_size, block_size, eval_iters, generator)` returns
# the mean of your `cross_entropy` over `eval_iters` batches from your `get_batch(data, ...,
# generator=generator)`, as a float; evaluation mode and `torch.no_grad()` inside, the model's
# previous mode restored at the end.
#
# <details><summary>Hint</summary>
#
# Evaluate without gradients and in eval mode, average the losses over a few batches, and leave
# the model in the mode you found it in.
#
# <details><summary>The key line</summary>
#
# `was_training = model.training`; `model.eval()`; in `with torch.no_grad():` loop, append
# `cross_entropy(model(x), y).item()`; `model.train(was_training)`; return the mean.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex4_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def estimate_loss(model, data, batch_size, block_size, eval_iters, generator=None):
    """Mean cross-entropy over eval_iters random batches, in eval mode without autograd.

    data: 1-d token array  ->  float; the model's train/eval mode is restored afterwards
    Example: an untrained GPT with V = 71 gives about 4.26 on any split
    """
    ### BEGIN SOLUTION
    was_training = model.training
    model.eval()
    losses = []
    with torch.no_grad():
        for _ in range(eval_iters):
            x, y = get_batch(data, batch_size, block_size, generator)
            losses.append(cross_entropy(model(x), y).item())
    model.train(was_training)
    return sum(losses) / len(losses)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex4_1_estimate_loss", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 4.1 (2 points)
check_estimate_loss(estimate_loss)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
# the given earlier functions, in place of yours if they fail their checks
_given = {
    'get_batch': 'def get_batch(data, batch_size, block_size, generator=None):\n    """Random windows of a token array: x = data[i:i+T], y = data[i+1:i+T+1].\n\n    data: 1-d numpy array of N token ids (e.g. a uint16 memmap)\n    returns x, y: (B, T) int64 tensors; starts i ~ torch.randint(N - T, (B,), generator=generator)\n    Example: data = np.arange(10), T = 3, a start at 2 -> x = [2, 3, 4], y = [3, 4, 5]\n    """\n    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)\n    x = torch.stack([torch.from_numpy(data[i : i + block_size].astype(np.int64))\n                     for i in ix.tolist()])  # (B, T)\n    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block_size].astype(np.int64))\n                     for i in ix.tolist()])  # (B, T)\n    return x, y',
    'cross_entropy': 'def cross_entropy(logits, targets):\n    """Mean of logsumexp(z_n) - z_n[y_n] over every position n, stable for any logits.\n\n    logits: (..., V) float, targets: (...) int64  ->  0-dim tensor, logits\' dtype\n    Example: cross_entropy(torch.zeros(2, 4), torch.tensor([0, 3])) -> log 4 = 1.3863\n    """\n    V = logits.shape[-1]\n    z = logits.reshape(-1, V)  # (N, V)\n    t = targets.reshape(-1)  # (N,)\n    m = z.max(dim=-1, keepdim=True).values  # (N, 1) per-row max\n    lse = m + torch.log(torch.exp(z - m).sum(dim=-1, keepdim=True))  # (N, 1)\n    logp = z - lse  # (N, V) log-probabilities\n    return -logp[torch.arange(t.numel()), t].mean()',
}
from autograder.checks.training import probe as _probe
_hidden_check("training.estimate_loss", _probe("training.estimate_loss", estimate_loss), given=_given)
del _given
### END HIDDEN TESTS

# %% [markdown]
# **Look.** The memorising model of section 3: tiny loss on the batch it saw, but on random
# windows of the training and validation text it is worse than chance (a loss above
# log V, the loss of a uniform guess) — memorising one
# batch is not learning the language.

# %% tags=["demo"]
with requires("Exercise 4.1 and Exercise 3.2"):
    for split in ("train", "val"):
        loss = estimate_loss(yours.built(model, "the memorising model of section 3"),
                             getattr(data, split), 8, 32, 5, torch.Generator().manual_seed(3))
        print(f"{split}: {loss:.3f}")


# %% [markdown]
# ## 5. Checkpoints that resume exactly
#
# Long runs get interrupted (a laptop lid, a preempted GPU). A checkpoint must hold
# *everything* the next step depends on, or the resumed run silently differs from the one that
# never stopped:
#
# - the model's weights (`model.state_dict()`);
# - the optimizer's state (`optimizer.state_dict()`): AdamW's two running averages per weight
#   and its step count;
# - the step number, because the learning rate depends on it;
# - the state of every random generator that is still to be used (here the one that draws the
#   batches: `generator.get_state()`; with dropout also `torch.get_rng_state()`).
#
# The test of a checkpoint is **resume equality**: train $k$ steps, save, train $n$ more; then
# load into a *fresh* model, optimizer and generator and train the same $n$ steps: the losses
# must be identical.

# %% [markdown]
# ### Exercise 5.1 — `save_checkpoint` and `load_checkpoint`  *(3 points, ~10 min)*
#
# **Goal:** `save_checkpoint(path, model, optimizer, step, generator)` writes one file with
# `torch.save`; `load_checkpoint(path, model, optimizer, generator)` restores the model, the
# optimizer and the generator in place and returns the step (an int). The check resumes a
# run with them into a different model and compares with the uninterrupted run.
#
# <details><summary>Hint</summary>
#
# A checkpoint must restore everything the run depends on: the model, the optimiser's state, the
# step and the random generator's state. Save them together in one dict, and load each back into
# its object.
#
# <details><summary>The key line</summary>
#
# Save a dict: `{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
# "generator": generator.get_state()}`. Load with `ck = torch.load(path)`, then
# `model.load_state_dict(ck["model"])`, `optimizer.load_state_dict(ck["optimizer"])`,
# `generator.set_state(ck["generator"])` and `return ck["step"]`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex5_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def save_checkpoint(path, model, optimizer, step, generator):
    """Write the full training state (model, optimizer, step, batch generator) to path."""
    ### BEGIN SOLUTION
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "step": step, "generator": generator.get_state()}, path)
    ### END SOLUTION


def load_checkpoint(path, model, optimizer, generator):
    """Restore model, optimizer and generator in place from path; return the saved step."""
    ### BEGIN SOLUTION
    ck = torch.load(path)
    model.load_state_dict(ck["model"])
    optimizer.load_state_dict(ck["optimizer"])
    generator.set_state(ck["generator"])
    return ck["step"]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_1_checkpoint", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 5.1 (3 points)
checkpoint_functions = (save_checkpoint, load_checkpoint)
check_checkpoint(checkpoint_functions)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
from autograder.checks.training import probe as _probe
_hidden_check("training.checkpoint", _probe("training.checkpoint", save_checkpoint, load_checkpoint))
### END HIDDEN TESTS

# %% [markdown]
# **Look.** Resume equality with your own functions, on Shakespeare: 4 steps, a checkpoint,
# 4 more steps — and the same 4 steps again after loading into a brand-new model.

# %% tags=["demo"]
def small_run(seed):
    torch.manual_seed(seed)
    m = GPT(GPTConfig(vocab_size=data.vocab_size, block_size=32, n_layer=1, n_head=2, d_model=32))
    return m, configure_optimizer(m, 0.1, 3e-3, (0.9, 0.99))


with requires("Exercise 5.1, Exercise 3.2 and Exercise 1.1"):
    path = OUT / "resume-demo.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    m, opt = small_run(0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(4):
        train_step(m, opt, *get_batch(data.train, 4, 32, gen), grad_clip=1.0)
    save_checkpoint(path, m, opt, 4, gen)
    straight = [train_step(m, opt, *get_batch(data.train, 4, 32, gen), 1.0) for _ in range(4)]
    m2, opt2 = small_run(123)  # different weights: everything must come from the file
    gen2 = torch.Generator().manual_seed(999)
    step = load_checkpoint(path, m2, opt2, gen2)
    resumed = [train_step(m2, opt2, *get_batch(data.train, 4, 32, gen2), 1.0) for _ in range(4)]
    print("step", step)
    print("uninterrupted:", np.round(straight, 6))
    print("resumed:      ", np.round(resumed, 6), " identical:", straight == resumed)


# %% [markdown]
# ## 6. Sampling: temperature, top-k, top-p
#
# To generate text, run the model on the context, turn the logits of the **last** position into
# a distribution, draw a token, append it, repeat. Three knobs shape the distribution:
#
# - **temperature** $\tau$: $p_v \propto e^{z_v/\tau}$. $\tau < 1$ sharpens (safer, more
#   repetitive), $\tau > 1$ flattens (more surprising, more errors); $\tau = 0$ is greedy
#   decoding (the argmax), the limit $\tau \to 0$.
# - **top-k** (Fan et al., 2018): keep the $k$ largest logits, set the others to $-\infty$.
# - **top-p**, the nucleus (Holtzman et al., 2019): sort the probabilities in decreasing order
#   and keep the smallest prefix whose mass reaches $p$ — a token is kept when the mass
#   *before* it is $< p$, so the token that crosses $p$ is in. The most probable token is
#   always kept.
#
# Order: temperature, then top-k, then top-p (the nucleus is measured on the tempered, top-k
# distribution); then sample from $\text{softmax}$ of what is left.

# %% [markdown]
# ### Exercise 6.1 — `sample_next_token`  *(3 points, ~20 min)*
#
# **Goal:** `sample_next_token(logits, temperature, top_k, top_p, generator)`: logits `(B, V)`
# → one token id per row, a `(B, 1)` int64 tensor drawn with
# `torch.multinomial(probs, 1, generator=generator)`; `temperature == 0` returns the argmax;
# `top_k`/`top_p` of `None` mean "off"; a `top_k` larger than `V` keeps every token. The check draws 40,000 tokens per case with a fixed
# generator and compares the frequencies with the exact probabilities (tolerance 0.012).
#
# <details><summary>Hint</summary>
#
# Scale the logits by the temperature, then remove the tokens outside the top k and outside the
# smallest set whose probability reaches top_p, and draw from what is left with the given
# generator.
#
# <details><summary>The key line</summary>
#
# `z = logits / temperature`. Top-k: `kth = torch.topk(z, min(k, V)).values[..., -1:]`,
# `z = z.masked_fill(z < kth, float("-inf"))`. Top-p: `zs, order = torch.sort(z, descending=True)`,
# `p = torch.softmax(zs, -1)`, `drop = (torch.cumsum(p, -1) - p) >= top_p`, `drop[..., 0] = False`,
# back to vocabulary order with `torch.zeros_like(drop).scatter(-1, order, drop)`, then
# `masked_fill`. Finally `torch.multinomial(torch.softmax(z, -1), 1, generator=generator)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex6_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """One token per row from softmax of the tempered, top-k then top-p filtered logits.

    logits: (B, V)  ->  (B, 1) int64; temperature 0 is greedy (argmax)
    Example: logits [[0., 5., 1.]], temperature=0 -> [[1]]
    """
    ### BEGIN SOLUTION
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    z = logits.float() / temperature  # (B, V)
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]  # (B, 1)
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None:
        zs, order = torch.sort(z, dim=-1, descending=True)  # (B, V)
        p = torch.softmax(zs, dim=-1)
        drop = (torch.cumsum(p, dim=-1) - p) >= top_p  # mass *before* each token
        drop[..., 0] = False  # always keep the most probable token
        z = z.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))
    return torch.multinomial(torch.softmax(z, dim=-1), 1, generator=generator)  # (B, 1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex6_1_sample_next_token", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 6.1 (3 points)
check_sample_next_token(sample_next_token)
### BEGIN HIDDEN TESTS
from autograder.checks._core import hidden_check as _hidden_check
from autograder.checks.training import probe as _probe
_hidden_check("training.sample_next_token", _probe("training.sample_next_token", sample_next_token))
### END HIDDEN TESTS

# %% [markdown]
# **Look.** Frequencies of 20,000 draws from your sampler for the same six logits: a low
# temperature piles the mass on the best token, a high one spreads it; top-p = 0.7 keeps only
# the nucleus.

# %% tags=["demo"]
with requires("Exercise 6.1"):
    z = torch.log(torch.tensor([[0.15, 0.06, 0.40, 0.04, 0.25, 0.10]]))
    settings = [dict(temperature=0.5), dict(temperature=1.0), dict(temperature=2.0),
                dict(temperature=1.0, top_p=0.7)]
    fig, ax = plt.subplots(figsize=(7, 3))
    for i, kw in enumerate(settings):
        ids = sample_next_token(z.repeat(20_000, 1), generator=torch.Generator().manual_seed(i), **kw)
        freq = torch.bincount(ids[:, 0], minlength=6).float() / 20_000
        ax.bar(np.arange(6) + 0.2 * i - 0.3, freq.numpy(), width=0.2, label=str(kw))
    ax.set_xlabel("token"); ax.set_ylabel("frequency"); ax.legend(fontsize=7)
    plt.tight_layout(); plt.show()


# %% [markdown]
# ## 7. The training run: your GPT, your loop
#
# Now all the pieces together, at the size chosen in section 0 — and they are **yours**. The
# model is the GPT you built: `yours.model_parts()` reads your *saved* notebooks of chapters
# 01–06 (save them first), runs your answer cells and each piece's visible check, and
# `yours.YourGPT` assembles your `gpt_logits` (06) over blocks that are your `pre_ln_block`
# (05) around your `multi_head_attention` (03, with your `scaled_dot_product_attention` of 01
# inside), your `layer_norm` (04) and your `feed_forward` (05); its weights are laid out like
# `transformer_ref.GPT`'s, so the two load each other's `state_dict`. Positions enter as
# **RoPE** (chapter 06, section 2): nothing is added to $X$, and every block rotates its
# heads' queries and keys with **your** `apply_rope` (06 Exercise 2.2) before the scores,
# the query at position $m$ by $R_m$, so a score depends on $m - n$ only; the reference
# beside it is `transformer_ref.GPT` with `pos="rope"`. (Without a usable `apply_rope`,
# yours or given, your GPT learns a position table `wpe` instead, and the line says so.)
# The loop is the one you
# wrote in this notebook: your `get_lr` sets each step's rate, your `get_batch` draws the batch,
# your `train_step` (your `cross_entropy`, your clipping) steps your `AdamW` (decay on matrices
# only), and your `estimate_loss` evaluates. A piece that fails its check is replaced by the
# given one, and the line above the run says so (`✘ your layer_norm fails its check ...:
# using the given one instead`): the run works, and you see which parts are yours. In the
# student kit the given parts of the kit's own exercises are left out: there a part that is
# neither yours nor given stops this cell with one line naming the exercise to finish
# (`This cell is skipped: finish 04 Exercise 2.2 ...`), and the cells that use the run skip too.
# It trains in chunks and samples after each evaluation with **your** sampler (the reference
# one until Exercise 6.1 passes), to watch the text take shape.
#
# **The time budget.** The run trains for `MAX_SECONDS` (your setting at the top of the
# chapter) whatever this machine's speed. It first times a few steps and one evaluation (a
# line before the timing and one after it), with PyTorch's threads and with one thread: on a
# laptop whose cores other programs keep busy, two threads wait for each other at every
# operation and one thread was 7 times faster here (it keeps the faster, and tries the other
# again every two minutes). It plans the schedule from these timings and says what loss
# to expect in that time (measured with `python bench/train.py --expect ...`) and, for a weak
# model, what would help. Then it trains in chunks of about 7 s, each sized from the slowest
# step it has just seen, so a line comes at least every 10 s even when the steps suddenly get
# three times slower (a single step that takes longer than 10 s is named in the line after
# it). After each chunk it prints a line, saves your model with **your** `save_checkpoint`
# (Exercise 5.1), and plans the schedule again from the time that chunk took and the time
# left: when another program slows the machine down, the run gets fewer steps, and when it
# speeds up, more. The warm-up keeps its share of the run until it is over and is then fixed;
# the cosine always ends at `min_lr` on the run's last step. So warm-up and decay both
# complete within the budget, instead of a run that stops in its warm-up or in the middle of
# its decay. Six times in the run (the last at its end) your `estimate_loss` evaluates it (on
# as many batches as fit a chunk) and your sampler writes a few lines.
# (`transformer_ref.train.budget.fit_run` does the planning; `refit` is its rule.)

# %% tags=["demo"]
import dataclasses

CKPT = OUT / RUN / "your-gpt.pt"  # your model, saved with your save_checkpoint every chunk


def pick_sampler():
    try:
        sample_next_token(torch.zeros(1, 3))
        return sample_next_token
    except NotImplementedError:
        print("(Exercise 6.1 is not finished: the samples use transformer_ref's sampler.)")
        return reference_sample_next_token


@torch.no_grad()
def generate_text(model, prompt, n_tokens, temperature=0.8, top_k=None, top_p=None, seed=0):
    # Autoregressive sampling: crop the context to block_size, sample the last position.
    sampler = SAMPLER
    model.eval()
    idx = torch.tensor([tok.encode(prompt)], device=DEVICE)  # (1, T)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(n_tokens):
        logits = model(idx[:, -model.config.block_size:])[:, -1, :].float().cpu()  # (1, V)
        nxt = sampler(logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=gen)
        idx = torch.cat([idx, nxt.to(DEVICE)], dim=1)
    model.train()
    return tok.decode(idx[0, len(prompt):].tolist())


def build_run():
    # A fresh GPT of your pieces and a run of your loop on its own copy of cfg: (model, run).
    yours.need(parts, yours.MODEL_PIECES)  # else: which exercise to finish; the cell stops
    yours.need(loop, yours.LOOP_PIECES)
    torch.manual_seed(cfg.seed)
    model = yours.YourGPT(GPTConfig(vocab_size=data.vocab_size, block_size=cfg.block_size,
                                    n_layer=cfg.n_layer, n_head=cfg.n_head,
                                    d_model=cfg.d_model, d_ff=cfg.d_ff, pos=cfg.pos), parts)
    return model, yours.YourRun(model, loop, data, dataclasses.replace(cfg), DEVICE)


def save_your_model(run):
    # After every chunk: your save_checkpoint (Exercise 5.1), while it is finished.
    global SAVE
    if SAVE is not None:
        try:
            SAVE(CKPT, run.model, run.optimizer, run.step, run.gen)
        except NotImplementedError:
            print("(Exercise 5.1 is not finished: your model is not saved.)")
            SAVE = None


def say(line):
    print(line, flush=True)


SAMPLER, SAVE = pick_sampler(), save_checkpoint
CKPT.parent.mkdir(parents=True, exist_ok=True)
print("Your GPT, from your saved notebooks of chapters 01-06:")
parts = yours.model_parts("08_training", extra=("apply_rope",))  # 06 Ex 2.2: your RoPE too
cfg.pos = yours.position_scheme(parts, say=say)  # "rope" (the reference's run too), else learned
print("Your training loop, from this notebook:")
loop = yours.loop_parts(dict(get_batch=get_batch, cross_entropy=cross_entropy, get_lr=get_lr,
                             train_step=train_step, estimate_loss=estimate_loss, AdamW=AdamW))

# %% tags=["demo"]
samples, n_sample = [], {"smoke": 40, "cpu": 120, "gpu": 240}[RUN]  # characters per sample
your_model = run = char_eval = None  # built below when every part is usable (yours or given)
with requires("the exercises named above"):
    t0 = time.perf_counter()
    your_model, run = build_run()
    print(f"{sum(p.numel() for p in your_model.parameters()) / 1e6:.2f} M parameters, "
          f"{cfg.tokens_per_step:,} tokens per step, float32", flush=True)

    def after_eval(ev):  # your sampler writes after each evaluation
        say(f"--- step {run.step} ({time.perf_counter() - t0:.0f} s): train {ev['train']:.3f}, "
            f"val {ev['val']:.3f} ({ev['val_bpb']:.3f} bits/byte); your model writes: ---")
        text = generate_text(your_model, "\n", n_sample)
        samples.append((run.step, ev["val"], text))
        say(f"{text}\n")

    def after_plan(plan):  # in words: what this budget can reach on this machine
        if RUN == "cpu":
            say(outlook(plan["max_iters"], plan["step_seconds"], MAX_SECONDS))

    fitted = fit_run(run, cfg, MAX_SECONDS - (time.perf_counter() - t0),
                     probe_steps=3 if SMOKE else 5, after_eval=after_eval,
                     after_chunk=save_your_model, after_plan=after_plan, say=say)
    run.seconds, ev, rc = fitted["seconds"], fitted["eval"], run.cfg
    char_eval = ev  # what the BPE run at the end of this section compares with
    print(f"your {RUN} run: {run.step} steps in {time.perf_counter() - t0:.0f} s, final train "
          f"{ev['train']:.4f}, val {ev['val']:.4f}, "
          f"{rc.tokens_per_step / fitted['plans'][-1]['step_seconds']:,.0f} tokens/s; warm-up "
          f"({rc.warmup_iters} steps) and decay to {rc.min_lr:g} complete"
          + (f"; saved to {CKPT}" if SAVE is not None else ""))

# %% [markdown]
# **The reference beside it.** `transformer_ref.train.Trainer` runs the same configuration with
# the course's reference code: the same kind of step, plus what section 8 is about (device
# placement, bf16 autocast, TF32, `torch.compile`, fused attention) and a checkpoint every
# evaluation. On a GPU it gets the same budget as your run; on a CPU half of it, so the
# notebook stays under 15 minutes there: its schedule is fitted to its own budget the same
# way, so its curve ends earlier, and the comparison to read is the height of the two curves
# at the same training time. On a CPU it too prints a line at most ~10 s apart (its timing and
# each evaluation take only the batches that fit), but it plans its schedule once, from the
# timing, and does not re-plan when the machine slows down.

# %% tags=["demo"]
REF_SECONDS = MAX_SECONDS if RUN != "cpu" else MAX_SECONDS / 2
trainer = None  # the student kit of chapter 06 has no reference GPT: then this cell is skipped
with requires("the exercises of this chapter"):
    trainer = Trainer(cfg, data=data)
    t_ref = time.perf_counter()
    trainer.fit_to_time(REF_SECONDS, probe_steps=3 if SMOKE else 10)
    ref_summary = trainer.train(max_seconds=max(REF_SECONDS - (time.perf_counter() - t_ref), 1))
    ref_seconds = time.perf_counter() - t_ref
    print(f"reference {RUN} run: {trainer.step} steps in {ref_seconds:.0f} s, final val "
          f"{ref_summary['eval']['val']:.4f}, {ref_summary['tokens_per_s']:,.0f} tokens/s"
          + (f", MFU {100 * ref_summary['mfu']:.1f}%" if ref_summary["mfu"] else ""))

# %% [markdown]
# **Look.** One plot, both runs, against training time: the per-step training loss (a moving
# average) and the validation loss at every evaluation, yours and the reference's. Then the
# samples your model wrote after each chunk.

# %% tags=["demo"]
def smooth(values, w):
    return np.convolve(values, np.ones(w) / w, "valid") if w > 1 else np.asarray(values)


runs = []  # the runs above that trained (a skipped cell trained nothing)
if run is not None and run.history["eval"]:
    runs.append(("yours", run.history["train"], run.history["eval"], run.seconds / run.step,
                 "C0"))
if trainer is not None and trainer.history["eval"]:
    runs.append(("reference", trainer.history["train"], trainer.history["eval"],
                 ref_seconds / trainer.step, "C1"))
if not runs:
    print("(This cell is skipped: neither run above trained; their cells say why.)")
else:
    fig, ax = plt.subplots(figsize=(9, 4))
    for name, train_hist, evals, per_step, color in runs:
        steps_, losses_ = zip(*train_hist)
        w = max(1, len(losses_) // 30)
        ax.plot(np.asarray(steps_[w - 1:]) * per_step, smooth(losses_, w), color=color,
                alpha=0.5, label=f"{name}: train ({w}-step mean)")
        ax.plot([e["step"] * per_step for e in evals], [e["val"] for e in evals], "o-",
                color=color, label=f"{name}: validation (final {evals[-1]['val']:.3f})")
    ax.axhline(math.log(data.vocab_size), color="gray", ls=":", label="log V (chance)")
    ax.set_xlabel("training time (s)"); ax.set_ylabel("cross-entropy (nats / char)")
    ax.set_title(f"{RUN} run: " + " vs ".join(name for name, *_ in runs)); ax.legend(fontsize=8)
    plt.tight_layout(); plt.show()
    print("; ".join(f"{name}: val {evals[-1]['val']:.3f} after {evals[-1]['step']} steps"
                    for name, _, evals, *_ in runs))
for step, val, text in samples:
    print(f"[step {step}, val {val:.2f}] {text[:120]!r}")


# %% [markdown]
# **Look: what a head of your model learned.** The attention weights of each head of your
# model's last block on a line of Shakespeare (row = the query character, column = the key
# character it reads; the causal mask blanks the upper triangle). Trained heads have roles:
# some look one or two characters back, some at the start of the current word or at the
# previous space — unlike the random weights of chapter 3. They are computed with the
# attention your model runs (`yours.attention_weights`: your attention with the identity as
# values returns its weights). One panel per head, numbered as in chapter 06 (layer 1 is the
# first), one colour scale from 0 to 1 (the bar on the right), every few characters labelled.

# %% tags=["demo"]
line = "ROMEO:\nBut soft, what light through yonder window breaks?"[:cfg.block_size]
with requires("the exercises named in section 7"):
    w = yours.attention_weights(yours.built(your_model, "your GPT of section 7"),
                                torch.tensor([tok.encode(line)]), layer=cfg.n_layer - 1)
    yours.plot_attention(w, [repr(ch)[1:-1] for ch in line], layer=cfg.n_layer)  # (H, T, T)
    plt.show()


# %% [markdown]
# **Continue training.** Your model was saved after every chunk, so it outlives the kernel.
# This cell loads the last checkpoint into a fresh GPT of your pieces with **your**
# `load_checkpoint` (Exercise 5.1) and trains it for `CONTINUE_SECONDS` more, re-planned the
# same way. The longer schedule starts where the cosine of a run planned that long from the
# start would be now, so the rate first rises a little from `min_lr` (a warm restart, as in
# SGDR, Loshchilov & Hutter 2017) and decays to `min_lr` again at the end. Run it again for
# more. After a restart of the kernel, run the cells above except the two training runs,
# then this one.

# %% tags=["demo"]
CONTINUE_SECONDS = 10 if SMOKE else MAX_SECONDS / 4
with requires("the exercises named in section 7"):
    yours.built(CKPT if CKPT.exists() else None, "your saved model (section 7's run)")
    your_model, run = build_run()
    step = load_checkpoint(CKPT, run.model, run.optimizer, run.gen)  # your Exercise 5.1
    run.step = int(step)
    print(f"loaded your GPT at step {run.step} from {CKPT} with your load_checkpoint")
    more = dataclasses.replace(cfg, max_iters=run.step + cfg.max_iters,
                               warmup_iters=min(cfg.warmup_iters, run.step))
    t0 = time.perf_counter()
    fitted = fit_run(run, more, CONTINUE_SECONDS, n_evals=1, probe_steps=3 if SMOKE else 5,
                     after_chunk=save_your_model, say=say)
    ev = fitted["eval"]
    print(f"continued to step {run.step} in {time.perf_counter() - t0:.0f} s: train "
          f"{ev['train']:.4f}, val {ev['val']:.4f}")

# %% [markdown]
# **Talk to your model.** Write the start of a scene in `PROMPT`; your GPT goes on from it,
# one character at a time, with your sampler. Try a speaker's name in capitals and a colon,
# a lower `temperature` (safer, more repetitive) or a higher one.

# %% tags=["demo"]
PROMPT = "ROMEO:\nWhat light is this"
with requires("the exercises named in section 7"):
    model = yours.built(your_model, "your GPT of section 7")
    print(PROMPT + generate_text(model, PROMPT, 60 if SMOKE else 400, temperature=0.8, seed=1))


# %% [markdown]
# **A second run on your own BPE tokens (chapter 07).** Characters are one way to cut the
# text; chapter 7's byte-level BPE gives fewer, longer tokens, so a context of $T$ tokens
# holds more text, and each prediction is a harder choice among more tokens. Their losses per
# token cannot be compared, but **bits per byte** can: with a mean loss $\mathcal{L}$ nats per
# token over $N$ tokens that encode $M$ bytes,
#
# $$\text{bpb} = \frac{\mathcal{L}}{\ln 2}\cdot\frac{N}{M}.$$
#
# This cell trains a fresh GPT of your pieces, the same size and the same budget as section
# 7's, on the ids of **your** tokenizer: your `train_bpe_fast` learns 512 tokens on the
# training plays, your `encode` turns both splits into ids (each piece whose check fails is
# replaced by the given one, said so). Then both models' validation bits per byte, side by
# side. It takes as long again as section 7's run (plus about a minute of tokenizing), so it
# runs on a GPU, or on a CPU when you gave the chapter at least 15 minutes (`MAX_SECONDS` at
# the top); `BPE_RUN = True` runs it anyway, `False` never.

# %% tags=["demo"]
BPE_RUN = None  # None: on a GPU, or a CPU budget of 15 min or more; True / False: your choice
BPE_VOCAB = 512
bpe_rows = []  # (tokens, vocabulary, val loss per token, val bits per byte)
if not (BPE_RUN if BPE_RUN is not None else RUN != "cpu" or MAX_SECONDS >= 15 * 60):
    print(f"Skipped: on this CPU the BPE run would take another {MAX_SECONDS / 60:.0f} min; set "
          "BPE_RUN = True in this cell (or MAX_SECONDS = 900 or more at the top) to run it.")
else:
    with requires("the exercises named in section 7"):
        yours.built(char_eval, "section 7's run")
        print("Your tokenizer, from your saved notebook of chapter 07:")
        bpe_parts = yours.tokenizer_parts(say=say)
        yours.need(bpe_parts, yours.TOKENIZER_PIECES)  # else: which exercise to finish
        texts = [load_shakespeare(split=split) for split in ("train", "val")]
        if SMOKE:  # a slice: the smoke run only shows the way
            texts = [texts[0][:50_000], texts[1][:10_000]]
        bpe_data = yours.bpe_data(bpe_parts, *texts, vocab_size=BPE_VOCAB,
                                  folder=OUT / RUN / "your-bpe", say=say)
        torch.manual_seed(cfg.seed)
        bpe_model = yours.YourGPT(GPTConfig(
            vocab_size=bpe_data.vocab_size, block_size=cfg.block_size, n_layer=cfg.n_layer,
            n_head=cfg.n_head, d_model=cfg.d_model, d_ff=cfg.d_ff, pos=cfg.pos), parts)
        bpe_training = yours.YourRun(bpe_model, loop, bpe_data, dataclasses.replace(cfg), DEVICE)
        bpe_fit = fit_run(bpe_training, cfg, 10 if SMOKE else MAX_SECONDS,
                          probe_steps=3 if SMOKE else 5, say=say)
        bpe_rows = [("characters", data.vocab_size, char_eval),
                    ("your BPE", bpe_data.vocab_size, bpe_fit["eval"])]
        print(f"\n{'tokens':12s}{'vocabulary':>11s}{'val loss / token':>18s}"
              f"{'val bits / byte':>17s}")
        for name, vocab_size, e in bpe_rows:
            print(f"{name:12s}{vocab_size:11d}{e['val']:18.3f}{e['val_bpb']:17.3f}")
        print("(lower bits per byte is better: the same validation text, compressed harder)")


# %% [markdown]
# ## 8. Making it fast
#
# Training speed is **tokens per second**. Its ceiling is the hardware's peak FLOP/s: training a
# model with $N$ weights costs about $6N$ FLOPs per token (2 for the forward matmuls, 4 for the
# backward) plus $12\,L\,d\,T$ for attention over a context of $T$ (PaLM, appendix B). The
# **model FLOPs utilisation** is
#
# $$\text{MFU} = \frac{\text{FLOPs per token} \times \text{tokens/s}}{\text{peak FLOP/s}} ,$$
#
# typically 30–50 % for a well-tuned GPU run and a few % for a small model that leaves the GPU
# waiting on Python. The knobs, in the order they matter on a GPU:
#
# 1. **Device selection.** `pick_device()`: CUDA, else MPS, else CPU; the model and every batch
#    go to it (`.to(device)`, batches via pinned memory and `non_blocking=True`).
# 2. **bf16 autocast.** `with torch.autocast("cuda", dtype=torch.bfloat16):` runs the matmuls in
#    bfloat16 (8 exponent bits like float32, so no loss scaling is needed; 8 mantissa bits) on the
#    tensor cores — 2× less memory traffic, up to ~15× the float32 FLOP/s on an H100 — while
#    reductions such as softmax and the loss stay in float32. The weights stay float32.
# 3. **TF32.** `torch.backends.cuda.matmul.fp32_precision = "tf32"` lets the float32 matmuls that
#    remain use tensor cores with a 10-bit mantissa.
# 4. **`torch.compile(model)`** traces the model once and fuses elementwise operations (GELU,
#    bias add, dropout, LayerNorm) into a few kernels: fewer trips to memory and less Python.
#    The first steps are slow (compilation, ~1 min); on a CPU it rarely pays for a short run.
# 5. **Fused attention.** `F.scaled_dot_product_attention` (FlashAttention on a GPU) never
#    writes the $T \times T$ score matrix to memory; your from-scratch attention (chapter 1)
#    materialises it. Same numbers, very different speed for long contexts.
#
# The cell below measures tokens/s of a few training steps of the run's model with the
# from-scratch attention and with the fused one, and the MFU where the peak is known (NVIDIA
# data-sheet numbers for common GPUs; a CPU has no such table, so we print achieved FLOP/s).

# %% tags=["demo"]
def measure(attn_impl, steps):
    # tokens/s of `steps` training steps (after 2 warm-up steps) with the run's model size
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=data.vocab_size, block_size=cfg.block_size, n_layer=cfg.n_layer,
                      n_head=cfg.n_head, d_model=cfg.d_model, attn_impl=attn_impl)).to(DEVICE)
    opt = configure_optimizer(m, 0.1, 1e-3, (0.9, 0.99), DEVICE.type)
    use_bf16 = DEVICE.type == "cuda" and torch.cuda.is_bf16_supported()
    gen = torch.Generator().manual_seed(0)
    for i in range(steps + 2):
        if i == 2:
            if DEVICE.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
        x, y = (b.to(DEVICE) for b in data_batch(gen))
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=use_bf16):
            loss = F.cross_entropy(m(x).float().reshape(-1, data.vocab_size), y.reshape(-1))
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
    tok_s = steps * cfg.batch_size * cfg.block_size / (time.perf_counter() - t)
    return tok_s, m.flops_per_token()


def data_batch(gen):
    return reference_get_batch(data.train, cfg.batch_size, cfg.block_size, generator=gen)


n_steps = {"smoke": 2, "cpu": 5, "gpu": 30}[RUN]
peak = peak_flops_for(DEVICE)
with requires("the exercises of this chapter"):
    for impl in ("scratch", "sdpa"):
        print(f"measuring {impl} attention ({n_steps} + 2 steps) ...", flush=True)
        tok_s, fpt = measure(impl, n_steps)
        achieved = fpt * tok_s
        mfu = f"MFU {100 * achieved / peak:.1f}%" if peak else "MFU n/a (no known peak for this device)"
        print(f"{impl:8s} attention: {tok_s:12,.0f} tokens/s, {achieved / 1e9:8.2f} GFLOP/s achieved, {mfu}")
if DEVICE.type == "cuda":
    print("GPU:", torch.cuda.get_device_name(), f"peak {peak / 1e12:.0f} TFLOP/s" if peak else "")

# %% [markdown]
# **bf16 in numbers.** Autocast also works on a CPU, which lets us see what bfloat16 does to a
# matmul's accuracy: about 2–3 correct decimal digits, plenty for training (the gradient noise
# of a batch is far larger).

# %% tags=["demo"]
a, b = torch.randn(256, 256), torch.randn(256, 256)
exact = a.double() @ b.double()
with torch.autocast("cpu", dtype=torch.bfloat16):
    low = a @ b
print(f"dtype under autocast: {low.dtype}; relative error vs float64: "
      f"bf16 {((low.double() - exact).norm() / exact.norm()).item():.1e}, "
      f"float32 {(((a @ b).double() - exact).norm() / exact.norm()).item():.1e}")

# %% [markdown]
# ### Several GPUs: `torchrun` and DDP
#
# With $W$ GPUs, **data parallelism** (DDP) puts a full copy of the model on each; every process
# takes a different slice of the batch, computes its gradients, and an **all-reduce** averages
# them across processes during `backward()` (overlapped with the computation), so every copy
# takes the same optimizer step. The effective batch is $W \times$ `batch_size`; tokens/s grows
# almost $W$-fold while the model fits on one GPU.
#
# `torchrun` starts the $W$ processes and tells each its `RANK`, `LOCAL_RANK` and `WORLD_SIZE`;
# the trainer then calls `dist.init_process_group("nccl")`, wraps the model in
# `DistributedDataParallel`, and lets only rank 0 evaluate, print and save. The reference trainer
# draws the *same* global batch on every rank from an identically seeded generator and keeps its
# own slice, so 8 processes with batch 64 take exactly the steps of one process with batch 512:
#
# ```bash
# # one machine, 8 GPUs (the same entry point as a single-process run)
# torchrun --standalone --nproc_per_node 8 -m transformer_ref.train --preset gpu_char
# # try the mechanics on a CPU: 2 processes, gloo backend
# torchrun --standalone --nproc_per_node 2 -m transformer_ref.train --preset cpu_smoke --device cpu
# ```
#
# With gradient accumulation (`--grad_accum_steps A`) each process runs $A$ micro-batches before
# a step; DDP's `no_sync()` skips the all-reduce on all but the last one.

# %% [markdown]
# ## Summary
#
# - A batch is $B$ random windows of $T+1$ tokens: $x$ the first $T$, $y$ the last $T$ — every
#   position is a next-token prediction.
# - The loss is the mean of $\log\sum_v e^{z_v} - z_y$, computed with the row max subtracted
#   (no overflow, no $\log 0$); chance level is $\log V$.
# - Warm-up then cosine: $\eta_{\max}(t+1)/W$, then $\eta_{\min} + \frac12(1+\cos\pi r)(\eta_{\max}-\eta_{\min})$.
# - One step: zero_grad, forward, loss, backward, clip the **global** norm, AdamW step.
# - Evaluate in eval mode without autograd on many batches; restore the mode.
# - A checkpoint holds weights, optimizer state, step and RNG states — test it by resume equality.
# - Sampling: temperature, then top-k, then top-p (exclusive cumulative mass), then multinomial.
# - Speed is tokens/s; MFU compares it with the hardware's peak: bf16, TF32, compile, fused
#   attention, and DDP over several GPUs.
#
# **Recorded runs** (the `cpu` and `gpu` rows of section 0; numbers from the course's own runs,
# made with learned positions, the table `wpe`, before section 7's GPT took your RoPE; the RoPE
# runs are not recorded here yet. On the `cpu` model with the schedule fitted to 200 steps, the
# reference trainer reached val 2.123 with RoPE against 2.463 with the learned table, same seed
# and batches: `python bench/train.py --expect 200 --threads 1 --pos rope`, then `--pos
# learned`):
#
# - CPU (`cpu_char`, this notebook's `cpu` run, run as is on an otherwise idle 2-core machine,
#   torch's default 2 threads): 3000 steps (the full schedule) in **403 s**, 0.82 M parameters,
#   6.1 M training tokens seen, 15,700 tokens/s: final **train loss 1.424, validation loss
#   1.573** nats per character (2.27 bits/byte; chance is 4.26). Validation at steps 500 …
#   3000: 2.128, 1.853, 1.722, 1.646, 1.592, 1.573, so the target (≤ 1.60) is reached by step
#   2500, well inside the 8-minute budget. The learning rate (3e-3 down to 1e-4) was chosen by
#   measurement: 2e-3 down to 2e-4 ended at 1.611 on the same 3000 steps. The whole notebook
#   ran in 7 min. An excerpt of the final sample (temperature 0.8):
#
#   ```text
#   one bank of loving conceit?
#   When I content did me too the service:
#   Statural, what did he thou hast does at meanest,
#   And her come to wear, but his righness of her stall
#   Greets forbide a starts casel in untone.
#   ```
#
#   Speaker names in capitals, verse lines, real words and Shakespeare's rhythm; the meaning is
#   still missing — a bigger model and more steps (the `gpu` run) get much closer.
# - GPU (`gpu_char`, this notebook's `gpu` run, run as is on one NVIDIA H100 80GB HBM3 with
#   PyTorch 2.11 and CUDA 13): 10.77 M parameters in bfloat16 autocast, compiled; 5000 steps
#   (the full schedule) in **119 s** including the evaluations, 994,000 tokens/s, MFU 7.2%:
#   final **train loss 1.073, validation loss 1.331** (1.92 bits/byte). Validation at steps
#   500 … 5000: 1.738, 1.511, 1.442, 1.407, 1.379, 1.361, 1.348, 1.338, 1.333, 1.331, so the
#   target (≤ 1.50) is reached by step 1500, after about 50 s. Section 8's speed table on the
#   same GPU: 434,000 tokens/s with the from-scratch attention and 682,000 with SDPA (not
#   compiled; MFU 3.1% and 4.9%). A model this small leaves the H100 mostly waiting on Python
#   and kernel launches: `python bench/train.py --preset gpu --compile` there gave 2,010,000
#   tokens/s with SDPA compiled (MFU 14.5%) against 670,000 not compiled. An excerpt of the
#   final sample:
#
#   ```text
#   First Lord:
#   Had he not obey'd him.
#
#   Second Lord:
#   But what, are you so deep? that is the news of your
#   own way by the cap on what you are laid now.
#   ```
#
#   Validation (1.33) stays well above train (1.07): the validation plays are ones the model
#   never saw, and the bigger model has started to learn the training plays' own names and
#   phrases. (These two rows are the reference trainer's runs.)
# - **Your GPT and your loop** (section 7's run, with this chapter's and chapters 01–06's
#   solution answers, all checks passing; measured with the run cell's code minus the sampling
#   between chunks). CPU: two idle cores of an Intel Xeon server (`taskset` to 2 cores, 2
#   threads), the `cpu` configuration fitted to a 330 s budget: 0.186 s per step, 1512 steps
#   (warm-up 50) in 291 s, 11,200 tokens/s, validation at steps 252 … 1512: 2.377, 2.073,
#   1.891, 1.783, 1.722, **1.693**, under 1.70 in less than the 8 minutes the notebook gives
#   it. GPU: one H100, the `gpu` configuration (float32 with TF32, not compiled, no dropout:
#   your blocks have none) fitted to 240 s: 3299 steps in 211 s, 275,500 tokens/s, validation
#   lowest **1.388** at step 1980 and **1.438** at the end (under 1.50 from step 990 on; without
#   dropout it overfits after step 2000, train 0.96). Side by side on one CPU thread, a step of
#   your GPT and loop took about 1.4 times the reference trainer's (0.90 s against 0.61 s): the
#   reference uses the fused attention kernel (section 8), your attention materialises the
#   scores and your softmax makes several passes over them.
# - **Your GPT on a busy laptop** (the same 2-core machine while a test run kept it busy, load
#   average 7–37; docs/benchmarks.md has the rows and their commands). With PyTorch's two
#   threads a step took 9.9 s and the run trained 24 steps (val 3.25); section 7's run now
#   times one thread as well (2.5 s a step against 16 s with two), keeps the faster, and
#   re-planned every ~10 s: 170 steps in 448 s to val 2.54, warm-up and decay complete, and it
#   said at its start that this would be a weak model and what would help. At load 3–6 (two
#   to four programs beside it on the two cores): 0.50 s a step with one thread against 3.99 s
#   with two, 521 steps in 466 s to **val 2.069**. Val ≤ 2.1 needs about 550 steps of this
#   model (`python bench/train.py --expect 150,300,600`).
#
# **Going further.** Give the BPE run of section 7 a larger vocabulary (`BPE_VOCAB`) and
# compare in **bits per byte** (`val_bpb`), which, unlike loss per token, does not depend on
# the tokenizer; `prepare_data("bpe", bpe_vocab_size=512)` gives the reference tokenizer's
# stream for the reference trainer. Try dropout 0.2 and watch the gap between the train and
# validation curves. nanoGPT (Karpathy) and the "Chinchilla" paper (Hoffmann et al., 2022) on how to split
# a compute budget between model size and tokens. FlashAttention (Dao et al., 2022) for why
# fused attention is fast. PyTorch's FSDP for models that do not fit on one GPU.
