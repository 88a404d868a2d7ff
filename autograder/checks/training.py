"""Checks for notebook 08 (training a GPT on Shakespeare), each with its mistake catalogue.

Eight exercises: ``get_batch``, ``cross_entropy``, ``get_lr`` (warm-up + cosine),
``train_step`` (with global-norm gradient clipping), ``AdamW`` (an optimizer class written
from scratch, compared with ``torch.optim.AdamW`` step by step), ``estimate_loss``, checkpoint
``save_checkpoint``/``load_checkpoint`` (resume equality) and ``sample_next_token``
(temperature, top-k, top-p; frequencies with a fixed RNG). Expected values come from
``transformer_ref`` (``transformer_ref.train`` and ``transformer_ref.sampling``) and, for
``AdamW``, from ``torch.optim.AdamW``; they are computed here, on first use (in a notebook
at import, before any student cell runs: ``_core._Cases``).

Exercises whose result is a *behaviour* rather than a return value (a training step, an
optimizer, a resumed run, a sampler) are checked through a *probe*: a small experiment built
around the student's function that returns tensors (the losses of a few steps and the final
weights, the frequencies of 40 000 draws). A catalogued mistake is the same experiment around
a wrong implementation, so the usual diagnosis names it. ``check_train_step(train_step)`` wraps the
student's function in its probe; hidden tests do the same through :func:`graded`.

>>> from transformer_ref.sampling import sample_next_token as ref
>>> check_sample_next_token(ref)  # doctest: +ELLIPSIS
running Exercise 6.1's check: 9 cases, tens of thousands of draws per setting, ...
✔ Exercise 6.1 `sample_next_token`: all ... cases match the reference.
"""

from __future__ import annotations

import copy
import math
import re as _re
import sys

import numpy as np
import torch
import torch.nn.functional as F

from autograder.checks import _metamorphic as _mm
from autograder.checks import _training_drivers as _drivers
from autograder.checks import table
from autograder.checks._codec import Opaque
from autograder.checks._core import (
    Case,
    Check,
    ErrorHint,
    Mistake,
    _SealedModule,
    hidden_check,
    register,
)
from autograder.checks._judge import Driven
from transformer_ref.sampling import filter_logits as _ref_filter
from transformer_ref.train import TrainConfig
from transformer_ref.train.data import get_batch as _ref_get_batch_full
from transformer_ref.train.trainer import get_lr as _ref_get_lr_cfg

__all__ = [
    "check_get_batch",
    "check_cross_entropy",
    "check_get_lr",
    "check_train_step",
    "check_AdamW",
    "check_estimate_loss",
    "check_checkpoint",
    "check_sample_next_token",
    "graded",
    "probe",
]

# Trusted references, bound before any student cell runs.
_F_ce = F.cross_entropy
_clip = torch.nn.utils.clip_grad_norm_
_clip_value = torch.nn.utils.clip_grad_value_
_save, _load = torch.save, torch.load
_softmax = torch.softmax
_cat = torch.cat
_tensor = torch.tensor
_deepcopy = copy.deepcopy
_no_grad = torch.no_grad
_Gen = torch.Generator
_enable_grad = torch.enable_grad
_sqrt = torch.sqrt


def _ref_get_batch(data, batch_size, block_size, generator=None):
    return _ref_get_batch_full(data, batch_size, block_size, "cpu", generator)


def _ref_get_lr(step, max_lr, min_lr, warmup_iters, max_iters):
    cfg = TrainConfig(learning_rate=max_lr, min_lr=min_lr, warmup_iters=warmup_iters,
                      max_iters=max_iters)
    return _ref_get_lr_cfg(step, cfg)


_tokens, _gen, _tiny_lm = _drivers.tokens, _drivers.gen, _drivers.tiny_lm
_ref_optimizer = _drivers.make_optimizer  # transformer_ref's configure_optimizer on the CPU
# Calls into these parts of transformer_ref (the chapter's reference) while a graded function
# runs make it score 0 in course-grade (recorded in the kernel: best-effort, see README).
_REFERENCE = ("transformer_ref/train/", "transformer_ref/sampling.py")


def _type_name(x) -> str:
    return x.type_name if isinstance(x, Opaque) else type(x).__name__


def _plain(raw, *keys) -> dict:
    """A driver's record (a dict with ``keys``), else ValueError: the record is malformed."""
    if type(raw) is not dict or any(k not in raw for k in keys):
        raise ValueError("the experiment's record is malformed")
    return raw


def _ref_step(model, optimizer, x, y, grad_clip):
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = _F_ce(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
    loss.backward()
    if grad_clip:
        _clip(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


# ====================================================================== Exercise 1.1
def _gb_variant(kind):
    def f(data, batch_size, block_size, generator=None):
        high = len(data) - block_size - (1 if kind == "high-1" else 0)
        high = len(data) if kind == "whole" else high
        ix = torch.randint(high, (batch_size,), generator=generator)
        rows = [np.asarray(data[i : i + block_size + 1]) for i in ix.tolist()]
        xy = np.stack(rows)
        if kind == "uint16":
            return torch.from_numpy(xy[:, :-1].copy()), torch.from_numpy(xy[:, 1:].copy())
        if kind in ("x-uint16", "y-uint16"):
            x, y = xy[:, :-1].copy(), xy[:, 1:].copy()
            x = x if kind == "x-uint16" else x.astype(np.int64)
            y = y if kind == "y-uint16" else y.astype(np.int64)
            return torch.from_numpy(x), torch.from_numpy(y)
        xy = torch.from_numpy(xy.astype(np.int64))
        x, y = xy[:, :-1], xy[:, 1:]
        if kind == "y=x":
            return x, x.clone()
        if kind == "swap":
            return y, x
        if kind == "x-long":
            return xy, y
        return x, y

    return f


def _gb_cases():
    cases = []

    def add(label, seed, n, vocab, B, T, hidden=False):
        data = _tokens(seed, n, vocab)

        def call(data=data, B=B, T=T, seed=seed):
            return (data, B, T, _gen(seed))

        expected = _ref_get_batch(*call())
        cases.append(Case(label, (data, B, T), expected, call=call, hidden=hidden, kind="allclose"))

    add("1000 tokens, batch 4, block 8", 810, 1000, 65, 4, 8)
    add("500 tokens, batch 2, block 16", 811, 500, 30, 2, 16)
    add("2000 tokens, batch 8, block 1", 812, 2000, 65, 8, 1, hidden=True)
    add("50 tokens, block 48 (two possible windows)", 813, 50, 65, 16, 48, hidden=True)
    add("one sequence, block 32", 814, 300, 200, 1, 32, hidden=True)
    return tuple(cases)


_GET_BATCH = Check(
    **table.identity(__name__, "get_batch"),
    cases=_gb_cases,
    mistakes=(
        Mistake("y not shifted (y = x)",
                "The target of position t is the *next* token: y = data[i + 1 : i + T + 1].",
                _gb_variant("y=x")),
        Mistake("x and y swapped",
                "x is the input data[i : i + T]; y, one token later, is what it must predict.",
                _gb_variant("swap")),
        Mistake("starts drawn below len(data) - block_size - 1 (off by one)",
                "The last valid start is len(data) - block_size - 1 (y needs one token more "
                "than x), so draw torch.randint(len(data) - block_size, ...): randint's upper "
                "bound is exclusive.",
                _gb_variant("high-1")),
        Mistake("x has block_size + 1 tokens",
                "Take a window of T + 1 tokens, then split it: x = window[:-1], y = window[1:].",
                _gb_variant("x-long")),
        Mistake("ids kept as the data's uint16",
                "The memmap stores uint16 to save space; embedding lookups and the loss want "
                "int64: convert with .astype(np.int64) or torch.from_numpy(...).long().",
                _gb_variant("uint16")),
        Mistake("starts drawn from the whole of data (randint(len(data)))",
                "A window starting near the end runs past it: the last valid start is "
                "len(data) - block_size - 1, so draw torch.randint(len(data) - block_size, ...) "
                "(randint's upper bound is exclusive).",
                _gb_variant("whole")),
        # mutation testing (issue 32): one of the two conversions left out
        Mistake("x left as the data's uint16 (only y converted to int64)",
                "x goes through the embedding and y into the loss: both must be int64, so "
                "convert each slice with .astype(np.int64) (or build both from one int64 "
                "window).",
                _gb_variant("x-uint16")),
        Mistake("y left as the data's uint16 (only x converted to int64)",
                "cross_entropy wants int64 targets, like the embedding wants int64 inputs: "
                "convert y's slice with .astype(np.int64) too (or build both from one int64 "
                "window).",
                _gb_variant("y-uint16")),
    ),
)
check_get_batch = register(_GET_BATCH)


# ====================================================================== Exercise 2.1
def _ce_variant(kind):
    def f(logits, targets):
        V = logits.shape[-1]
        z = logits.reshape(-1, V)
        t = targets.reshape(-1)
        if kind == "naive":
            logp = z - torch.log(torch.exp(z).sum(-1, keepdim=True))
        elif kind == "naive-ratio":
            logp = torch.log(torch.exp(z) / torch.exp(z).sum(-1, keepdim=True))
        elif kind == "log-softmax":
            logp = torch.log(_softmax(z, dim=-1))
        elif kind == "global-max":
            m = z.max()
            logp = z - (m + torch.log(torch.exp(z - m).sum(-1, keepdim=True)))
        elif kind == "axis0":
            m = z.max(0, keepdim=True).values
            logp = z - (m + torch.log(torch.exp(z - m).sum(0, keepdim=True)))
        elif kind == "no-lse":
            logp = z
        elif kind in ("max-axis0", "sum-axis0", "lse-mean"):
            m = z.max(0 if kind == "max-axis0" else -1, keepdim=True).values
            e = torch.exp(z - m)
            s = (e.sum(0, keepdim=True) if kind == "sum-axis0"
                 else e.mean(-1, keepdim=True) if kind == "lse-mean" else e.sum(-1, keepdim=True))
            logp = z - (m + torch.log(s))
        else:
            m = z.max(-1, keepdim=True).values
            shifted = {"plus-m": z + m, "m-minus-z": m - z, "added-back": z}.get(kind, z - m)
            s = torch.log(torch.exp(shifted).sum(-1, keepdim=True))
            lse = m if kind == "lse-max" else m - s if kind == "m-minus-log" else m + s
            logp = z + lse if kind == "z-plus-lse" else z - lse
        picked = logp[torch.arange(t.numel()), t]
        if kind == "sum":
            return -picked.sum()
        if kind == "sign":
            return picked.mean()
        return -picked.mean()

    return f


def _ce_cases():
    cases = []
    f32 = torch.float32

    def rand(seed, *shape, dtype=torch.float64, scale=1.0):
        return (torch.randn(*shape, generator=_gen(seed), dtype=torch.float64) * scale).to(dtype)

    def tgt(seed, shape, V):
        return torch.randint(V, shape, generator=_gen(seed))

    def add(label, logits, targets, hidden=False):
        V = logits.shape[-1]
        exp = _F_ce(logits.reshape(-1, V), targets.reshape(-1))
        cases.append(Case(label, (logits, targets), exp, hidden=hidden))

    add("logits (3, 5), float64", rand(820, 3, 5), tgt(821, (3,), 5))
    add("logits (4, 10), float32", rand(822, 4, 10, dtype=f32), tgt(823, (4,), 10))
    add("logits (2, 3, 7) (batch, time, vocab), float32", rand(824, 2, 3, 7, dtype=f32),
        tgt(825, (2, 3), 7))
    add("large logits (x ~ 1000), float32", rand(826, 4, 6, dtype=f32, scale=1000.0),
        tgt(827, (4,), 6))
    add("rows on very different scales",
        torch.tensor([[0.0, 1.0, 2.0], [-3000.0, -2999.0, -2998.0]]), torch.tensor([2, 0]))
    add("a target 120 below the row's max, float32",
        torch.tensor([[120.0, 0.0, 60.0], [1.0, 2.0, 3.0]]), torch.tensor([1, 2]))
    add("one token, vocab 1", torch.tensor([[0.5]], dtype=torch.float64), torch.tensor([0]),
        hidden=True)
    add("very negative logits (x ~ -1e4), float32", rand(828, 3, 8, dtype=f32) - 1e4,
        tgt(829, (3,), 8), hidden=True)
    add("logits (4, 16, 65) (a real batch shape), float32", rand(830, 4, 16, 65, dtype=f32),
        tgt(831, (4, 16), 65), hidden=True)
    z, t = rand(832, 5, 7), tgt(833, (5,), 7)
    leaf = z.clone().requires_grad_(True)
    out = _F_ce(leaf, t)
    probe = torch.tensor(1.0, dtype=torch.float64)
    (out * probe).backward()
    # the goal asks for it "differentiable": a visible case (issue 32)
    cases.append(Case("gradient with respect to the logits", (z, t), (out.detach(), (leaf.grad,)),
                      kind="grad", grad_args=(0,), probe=probe))
    return tuple(cases)


_CE = Check(
    **table.identity(__name__, "cross_entropy"),
    cases=_ce_cases,
    probes=(_mm.factor(lambda case: {"N (the number of targets)": case.args[1].numel(),
                                     "ln 2": math.log(2)},
                       "The loss is the mean over every target of -log softmax(logits)[target], "
                       "with the natural log."),),
    mistakes=(
        Mistake("not stabilised: exp of the raw logits overflows",
                "exp(1000) is inf in any float type. Subtract each row's max first: "
                "logsumexp(z) = m + log(sum(exp(z - m))) with m = max(z) over the vocabulary.",
                _ce_variant("naive")),
        Mistake("not stabilised: exp of the raw logits overflows",
                "exp(1000) is inf, and inf / inf is nan. Subtract each row's max first: "
                "logsumexp(z) = m + log(sum(exp(z - m))) with m = max(z) over the vocabulary.",
                _ce_variant("naive-ratio")),
        Mistake("log of softmax in two steps (log 0 = -inf)",
                "softmax(z) underflows to 0 for a logit far below the max and log(0) = -inf. "
                "Compute log-probabilities directly: z - logsumexp(z).",
                _ce_variant("log-softmax")),
        Mistake("subtracted the global max instead of each row's max",
                "One max for the whole batch leaves rows far below it with exp(...) = 0: take "
                "the max over the vocabulary axis, per row (keepdim=True).",
                _ce_variant("global-max")),
        Mistake("normalised over the batch axis (axis 0) instead of the vocabulary",
                "Each row is one token's distribution over the vocabulary: the log-sum-exp runs "
                "over the last axis.",
                _ce_variant("axis0")),
        Mistake("left out the log-sum-exp (loss = -z[target])",
                "Logits are not log-probabilities: subtract logsumexp(z) from them first.",
                _ce_variant("no-lse")),
        Mistake("summed instead of averaged over the tokens",
                "The loss is the mean over all B * T positions, so it does not grow with the "
                "batch size.",
                _ce_variant("sum")),
        Mistake("forgot the minus sign",
                "Cross-entropy is -mean(log p[target]); log-probabilities are <= 0, so the loss "
                "is >= 0.",
                _ce_variant("sign")),
        Mistake("the max taken over the batch axis (dim=0)",
                "The stabilising max is each row's own, over the vocabulary: "
                "z.max(dim=-1, keepdim=True).values; a column max does not cancel inside the "
                "row's log-sum-exp.",
                _ce_variant("max-axis0")),
        Mistake("exp(z - m) summed over the batch axis (dim=0)",
                "The log-sum-exp of a row sums its own V entries: "
                "torch.exp(z - m).sum(dim=-1, keepdim=True).",
                _ce_variant("sum-axis0")),
        Mistake("mean instead of sum inside the log-sum-exp",
                "logsumexp(z) = m + log(sum(exp(z - m))): a sum over the vocabulary; .mean() "
                "subtracts log(V) from it.",
                _ce_variant("lse-mean")),
        # mutation testing (issue 32): the shift's sign, the max added back, the signs
        # around the log of the sum
        Mistake("exp(z + m): the max added inside exp instead of subtracted",
                "logsumexp(z) = m + log(sum(exp(z - m))) with m the row's max: subtract it "
                "inside exp (every shifted logit <= 0, no overflow), add it back outside.",
                _ce_variant("plus-m")),
        Mistake("exp(m - z) instead of exp(z - m)",
                "The shift subtracts the row's max from every logit, z - m (the largest becomes "
                "0); m - z flips the sign of every logit.",
                _ce_variant("m-minus-z")),
        Mistake("the max added back but never subtracted inside exp",
                "m + log(sum(exp(z))) counts the max twice: shift first, then add it back, "
                "m + log(sum(exp(z - m))).",
                _ce_variant("added-back")),
        Mistake("m - log(sum(exp(z - m))): the log of the sum subtracted from the max",
                "logsumexp(z) = m + log(sum(exp(z - m))): the sum is at least exp(0) = 1, so "
                "the log-sum-exp is at least the max, never below it.",
                _ce_variant("m-minus-log")),
        Mistake("the row's max used as the log-sum-exp (the log of the sum left out)",
                "The max is only the largest term: logsumexp(z) = m + log(sum(exp(z - m))), "
                "and log p = z - logsumexp(z).",
                _ce_variant("lse-max")),
        Mistake("log p = z + logsumexp(z) (the normaliser added instead of subtracted)",
                "Dividing exp(z) by the sum of the exponentials subtracts its log: "
                "log p = z - logsumexp(z), which is <= 0.",
                _ce_variant("z-plus-lse")),
    ),
    forbidden=("cross_entropy", "nll_loss", "log_softmax", "logsumexp", "special_logsumexp",
               "special_log_softmax"),
    forbidden_hint="Write it with max, exp, log, sum and indexing (z[torch.arange(N), targets]).",
)
check_cross_entropy = register(_CE)


# ====================================================================== Exercise 3.1
def _lr_variant(kind):
    def f(step, max_lr, min_lr, warmup_iters, max_iters):
        W, D = warmup_iters, max_iters
        if kind == "warm-from-0" and step < W:
            return max_lr * step / W
        if kind == "warm-flat" and step < W:
            return max_lr / W
        if kind == "warm-to-1" and step < W:
            return (step + 1) / W
        if kind == "warm-inverted" and step < W:
            return max_lr * W / (step + 1)
        if kind not in ("no-warmup", "warm-from-0", "no-warmup-branch") and step < W:
            return max_lr * (step + 1) / W
        if step >= D and kind != "no-clamp":
            return 0.0 if kind == "to-zero" else min_lr
        r = step / D if kind == "no-warmup" or kind == "from-0" else (step - W) / max(1, D - W)
        if kind == "over-max-iters":
            r = (step - W) / max(1, D)
        elif kind == "unscaled":
            r = step - W
        elif kind == "step-over-decay":
            r = step / max(1, D - W)
        if kind == "linear":
            return min_lr + (1 - r) * (max_lr - min_lr)
        c = 0.5 * (1 + math.cos(math.pi * r))
        if kind == "no-pi":
            c = 0.5 * (1 + math.cos(r))
        if kind == "no-half":
            c = 1 + math.cos(math.pi * r)
        if kind == "half":
            c = math.cos(math.pi * r / 2)
        if kind == "one-minus":
            c = 0.5 * (1 - math.cos(math.pi * r))
        if kind == "no-one":
            c = 0.5 * math.cos(math.pi * r)
        if kind == "no-r":
            c = 0.5 * (1 + math.cos(math.pi))
        if kind == "no-decay":
            c = 1.0
        if kind == "minus":
            return min_lr - c * (max_lr - min_lr)
        if kind == "to-zero":
            return c * max_lr
        if kind == "amplitude":
            return min_lr + c * max_lr
        return min_lr + c * (max_lr - min_lr)

    return f


def _lr_cases():
    cases = []

    def add(step, lr, lo, W, D, hidden=False):
        label = f"step {step} (max_lr={lr:g}, min_lr={lo:g}, warm-up {W}, max_iters {D})"
        cases.append(Case(label, (step, lr, lo, W, D), _ref_get_lr(step, lr, lo, W, D),
                          kind="scalar", rtol=1e-9, atol=1e-15, hidden=hidden))

    for s in (0, 4, 9, 10, 35, 60, 109, 110, 150):
        add(s, 1.0, 0.1, 10, 110)
    for s in (0, 99, 100, 1050, 1999, 2000):
        add(s, 1e-3, 1e-4, 100, 2000, hidden=s in (99, 1999))
    for s in (0, 1, 25, 50, 80):  # no warm-up at all ("warmup_iters may be 0": visible too)
        add(s, 6e-4, 0.0, 0, 50, hidden=s not in (0, 25))
    add(3, 2e-3, 2e-4, 1, 4, hidden=True)
    return tuple(cases)


def _lr_phases(case) -> tuple:
    """One step in each phase of the case's schedule: warm-up, cosine decay, end."""
    _, lr, lo, W, D = case.args
    out = [("warm-up", (W // 2, lr, lo, W, D))] if W > 0 else []
    if D - W > 2:
        out.append(("cosine decay", ((W + D) // 2, lr, lo, W, D)))
    return (*out, ("end (step >= max_iters)", (D + 3, lr, lo, W, D)))


_LR = Check(
    **table.identity(__name__, "get_lr"),
    cases=_lr_cases,
    probes=(
        _mm.ignored(2, "`min_lr`", lambda lo: lo + 0.5 * (lo + 1e-4), _ref_get_lr,
                    "The cosine decays from max_lr to min_lr, and after max_iters it stays "
                    "at min_lr.", how="min_lr raised"),
        _mm.ignored(3, "`warmup_iters`", lambda w: 2 * w + 2, _ref_get_lr,
                    "Warm-up lasts warmup_iters steps, and the decay's progress counts from "
                    "its end.", how="warm-up longer"),
        _mm.ignored(4, "`max_iters`", lambda d: 2 * d, _ref_get_lr,
                    "The decay's progress is (step - warmup_iters) / (max_iters - "
                    "warmup_iters).", how="max_iters doubled"),
        _mm.phases(_lr_phases, _ref_get_lr, {
            "warm-up": "During warm-up (step < warmup_iters) lr = max_lr * (step + 1) / "
                       "warmup_iters: it reaches max_lr at the last warm-up step.",
            "cosine decay": "From warmup_iters to max_iters, lr = min_lr + (1 + cos(pi r)) / 2 "
                            "* (max_lr - min_lr), r = (step - warmup_iters) / (max_iters - "
                            "warmup_iters) going from 0 to 1.",
            "end (step >= max_iters)": "From max_iters on, lr stays at min_lr.",
        }),
    ),
    mistakes=(
        Mistake("warm-up starts at 0 (max_lr * step / warmup_iters)",
                "With step counted from 0, step 0 would get learning rate 0 and waste a step: "
                "use max_lr * (step + 1) / warmup_iters, which reaches max_lr at the last "
                "warm-up step.",
                _lr_variant("warm-from-0")),
        Mistake("cosine decays to 0 instead of min_lr",
                "lr = min_lr + (1 + cos(pi r)) / 2 * (max_lr - min_lr): it ends at min_lr.",
                _lr_variant("to-zero")),
        Mistake("cosine amplitude is max_lr instead of max_lr - min_lr",
                "At r = 0 the rate must be max_lr, not max_lr + min_lr: the cosine term "
                "multiplies (max_lr - min_lr).",
                _lr_variant("amplitude")),
        Mistake("cosine progress measured from step 0, not from the end of the warm-up",
                "r = (step - warmup_iters) / (max_iters - warmup_iters), so the decay starts at "
                "max_lr right after the warm-up.",
                _lr_variant("from-0")),
        Mistake("no warm-up",
                "The first warmup_iters steps ramp linearly: max_lr * (step + 1) / warmup_iters.",
                _lr_variant("no-warmup")),
        Mistake("warm-up branch left out (the cosine also runs during the warm-up)",
                "For step < warmup_iters return max_lr * (step + 1) / warmup_iters before the "
                "cosine part: there r would be negative.",
                _lr_variant("no-warmup-branch")),
        Mistake("cosine factor without the 1/2",
                "(1 + cos(pi r)) goes from 2 to 0: halve it, 0.5 * (1 + cos(pi r)), so the "
                "rate starts at max_lr and ends at min_lr.",
                _lr_variant("no-half")),
        Mistake("half a cosine (cos(pi r / 2))",
                "The schedule uses half a period of the cosine, (1 + cos(pi r)) / 2, which goes "
                "smoothly from 1 to 0 with zero slope at both ends.",
                _lr_variant("half")),
        Mistake("linear decay instead of cosine",
                "Between the warm-up and max_iters the rate follows (1 + cos(pi r)) / 2.",
                _lr_variant("linear")),
        Mistake("the cosine comes back up after max_iters",
                "cos(pi r) rises again for r > 1: return min_lr for step >= max_iters.",
                _lr_variant("no-clamp")),
        Mistake("cosine progress divided by max_iters, not by the decay's length",
                "The decay runs from warmup_iters to max_iters: r = (step - warmup_iters) / "
                "(max_iters - warmup_iters), which reaches 1 exactly at max_iters.",
                _lr_variant("over-max-iters")),
        Mistake("cosine progress from step 0 over the decay's length",
                "Both ends of r must be measured from the end of the warm-up: r = "
                "(step - warmup_iters) / (max_iters - warmup_iters).",
                _lr_variant("step-over-decay")),
        Mistake("cos(r) instead of cos(pi r)",
                "r runs from 0 to 1, and the cosine must go through half a period: "
                "0.5 * (1 + math.cos(math.pi * r)).",
                _lr_variant("no-pi")),
        # mutation testing (issue 32): the warm-up's ramp, r's scale, the cosine factor's
        # parts and the sign of the cosine term
        Mistake("the warm-up does not ramp (step left out: max_lr / warmup_iters throughout)",
                "The warm-up rate grows with the step: max_lr * (step + 1) / warmup_iters, "
                "from max_lr / warmup_iters at step 0 to max_lr at the last warm-up step.",
                _lr_variant("warm-flat")),
        Mistake("the warm-up ramps to 1, not to max_lr (max_lr left out)",
                "(step + 1) / warmup_iters is the fraction of the warm-up done; the rate is that "
                "fraction of max_lr: max_lr * (step + 1) / warmup_iters.",
                _lr_variant("warm-to-1")),
        Mistake("the warm-up fraction upside down (warmup_iters / (step + 1))",
                "The rate grows during the warm-up: max_lr * (step + 1) / warmup_iters, with "
                "the step in the numerator, never above max_lr.",
                _lr_variant("warm-inverted")),
        Mistake("cosine progress not divided by the decay's length (r = step - warmup_iters)",
                "r is the fraction of the decay done, from 0 to 1: r = (step - warmup_iters) / "
                "(max_iters - warmup_iters). A whole number of steps puts cos(pi r) at +1 or -1, "
                "so the rate jumps between max_lr and min_lr.",
                _lr_variant("unscaled")),
        Mistake("no decay after the warm-up (the rate stays at max_lr)",
                "Between warmup_iters and max_iters the rate falls from max_lr to min_lr: "
                "min_lr + 0.5 * (1 + cos(pi r)) * (max_lr - min_lr).",
                _lr_variant("no-decay")),
        Mistake("the rate drops to min_lr right after the warm-up (cos(pi) without r?)",
                "The cosine's argument grows with the progress: cos(pi * r), r = (step - "
                "warmup_iters) / (max_iters - warmup_iters). cos(pi) alone is -1, which makes "
                "the factor 0.5 * (1 + cos) zero at every step of the decay.",
                _lr_variant("no-r")),
        Mistake("1 - cos(pi r) instead of 1 + cos(pi r): the rate rises after the warm-up",
                "The factor must go from 1 (r = 0) down to 0 (r = 1): 0.5 * (1 + cos(pi r)). "
                "With 1 - cos the schedule runs backwards, from min_lr up to max_lr.",
                _lr_variant("one-minus")),
        Mistake("0.5 * cos(pi r) without the 1 +",
                "0.5 * cos(pi r) runs from 0.5 to -0.5; shift it up by 1 first, "
                "0.5 * (1 + cos(pi r)), which runs from 1 to 0.",
                _lr_variant("no-one")),
        Mistake("the cosine term subtracted from min_lr (the rate goes below min_lr)",
                "min_lr is the floor and the cosine term, 0.5 * (1 + cos(pi r)) * "
                "(max_lr - min_lr), is added to it: min_lr + ..., with max_lr - min_lr in that "
                "order (it is positive).",
                _lr_variant("minus")),
    ),
    error_hints=(
        ErrorHint("division by zero without a warm-up",
                  "warmup_iters may be 0: only use the warm-up branch when step < warmup_iters.",
                  lambda e: isinstance(e, ZeroDivisionError)),
    ),
)
check_get_lr = register(_LR)


# ====================================================================== Exercise 3.2
def _step_probe(step_fn):
    """Run ``step_fn`` ``n`` times on one batch of a tiny model; return (losses, weights)."""
    drive = _drivers.train_step(step_fn)

    def train_step(seed, n_steps, grad_clip, lr, weights=True):
        return _step_output(drive(seed, n_steps, grad_clip, lr, weights))

    train_step.__name__ = "train_step"
    train_step.student = step_fn
    return train_step


def _step_output(raw) -> tuple:
    """(losses, weights) from what the driver recorded (TypeError: a loss is not a number)."""
    losses = []
    for loss in _plain(raw, "losses", "weights")["losses"]:
        if isinstance(loss, torch.Tensor):
            loss = loss.item()
        if not isinstance(loss, (int, float)):
            raise TypeError(f"train_step should return the loss as a number, got "
                            f"{_type_name(loss)}")
        losses.append(float(loss))
    # after many steps Adam amplifies rounding differences in weights whose gradient is
    # ~0 (m / sqrt(v) is O(1) whatever their size): compare the losses only there
    w = raw["weights"]
    return _tensor(losses, dtype=torch.float64), w if w is not None else _tensor([0.0])


def _step_wrong(kind):
    def f(model, optimizer, x, y, grad_clip):
        if kind != "no-zero":
            optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        loss = _F_ce(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        if kind == "zero-mid":
            optimizer.zero_grad(set_to_none=True)
        if kind == "per-param":
            for p in model.parameters():
                if p.grad is not None:
                    _clip([p], grad_clip)
        elif kind == "value":
            _clip_value(model.parameters(), grad_clip)
        elif kind in ("no-sqrt", "mean-sq"):  # the global norm by hand, one slip in it
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            with _no_grad():
                sq = sum(((g * g).mean() if kind == "mean-sq" else (g * g).sum())
                         for g in grads)
                norm = sq if kind == "no-sqrt" else _sqrt(sq)
                scale = min(1.0, grad_clip / (norm.item() + 1e-6))
                for g in grads:
                    g.mul_(scale)
        elif kind != "no-clip":
            _clip(model.parameters(), grad_clip)
        optimizer.step()
        if kind == "loss-after":
            with _no_grad():
                logits = model(x)
                return _F_ce(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item()
        return loss.item()

    return _step_probe(f)


def _step_cases():
    probe = _step_probe(_ref_step)
    cases = []
    for label, args, hidden in [
        ("3 steps, clip 0.1, lr 1e-2", (840, 3, 0.1, 1e-2), False),
        ("5 steps, clip 0.5, lr 3e-3", (841, 5, 0.5, 3e-3), False),
        ("overfit one batch: 20 steps, clip 1.0, lr 2e-2 (losses)", (842, 20, 1.0, 2e-2, False),
         True),
        ("clip far above the gradient norm (no effect)", (843, 3, 1e6, 1e-2), False),
        # AdamW's first step is lr * g / (|g| + 1e-8), about lr * sign(g) for a gradient
        # near norm 1: the clipping scale grad_clip / (norm + eps) all but cancels. Clipped to
        # 1e-6, each entry is about AdamW's own 1e-8 and the step follows the scale: eps = 1e-3
        # moves the weights 7.6 to 9.2 times the tolerance (seeds 844, 846, 848, 850), eps = 0,
        # a float64 norm or clip_grad_norm_ 0.01 times at most (more steps: chaotic at this lr).
        ("clip 1e-6, far below the gradient norm, one step of lr 10", (844, 1, 1e-6, 10.0),
         True),
    ]:
        cases.append(Case(label, args, probe(*args), hidden=hidden, rtol=1e-4, atol=1e-4))
    return tuple(cases)


_TRAIN_STEP = Check(
    **table.identity(__name__, "train_step"),
    call_text=lambda c: (
        f"train_step(model, optimizer, x, y, grad_clip={c.args[2]:g}) "
        f"{'once' if c.args[1] == 1 else f'{c.args[1]} times'} on one "
        f"batch x, y (4, 8) of a tiny model (seed {c.args[0]}), AdamW with lr {c.args[3]:g}"),
    uses=table.uses(__name__, "cross_entropy"),
    cases=_step_cases,
    mistakes=(
        Mistake("forgot optimizer.zero_grad(): gradients accumulate across steps",
                ".backward() *adds* into .grad; clear it at the start of every step.",
                _step_wrong("no-zero")),
        Mistake("zero_grad() between backward() and step()",
                "Clearing the gradients after backward() leaves the optimizer nothing to do: "
                "zero_grad, forward, backward, clip, step.",
                _step_wrong("zero-mid")),
        Mistake("no gradient clipping in effect (none, before backward(), or after step())",
                "Scale every gradient by min(1, grad_clip / ||g||) with ||g|| the norm over all "
                "parameters together, between backward() and optimizer.step(): clipping "
                "before backward() acts on gradients that zero_grad() just cleared (backward() "
                "then writes fresh, unclipped ones), and clipping after the step is too late.",
                _step_wrong("no-clip")),
        Mistake("clipped each parameter's gradient separately instead of the global norm",
                "The norm is over *all* gradients together, ||g|| = sqrt(sum_p sum(g_p²)), and "
                "every gradient is scaled by the same factor (the direction is kept).",
                _step_wrong("per-param")),
        Mistake("clipped gradient values instead of the norm",
                "clamp(-c, c) on each entry changes the direction of the gradient; clipping the "
                "norm only shortens it.",
                _step_wrong("value")),
        Mistake("clipped by the squared norm (no square root)",
                "The global norm is sqrt(sum_p sum(g_p²)): without the square root a norm "
                "above 1 clips too hard and one below 1 too little.",
                _step_wrong("no-sqrt")),
        Mistake("the norm from each gradient's mean of squares instead of the sum",
                "The global norm adds every squared entry: sum_p (g_p * g_p).sum(); .mean() "
                "divides each parameter's share by its size, so the norm comes out too small "
                "and too little is clipped.",
                _step_wrong("mean-sq")),
        Mistake("returned the loss after the update",
                "Return the loss of the forward pass this step trained on (before step()); "
                "a second forward pass costs time and reports a better number than the one "
                "the gradient came from.",
                _step_wrong("loss-after")),
    ),
    error_hints=(
        ErrorHint("a gradient is None (clipped before backward()?)",
                  "After zero_grad(set_to_none=True) every .grad is None until backward() "
                  "fills it: the order is zero_grad, forward, backward, clip, step (and skip "
                  "parameters whose .grad is None).",
                  lambda e: "NoneType" in str(e)),
        ErrorHint("no gradient to clip (loss.backward() missing?)",
                  "The list of gradients came out empty, so the sum of their squares is the "
                  "int 0: call loss.backward() before clipping, and keep the parameters whose "
                  ".grad is *not* None.",
                  lambda e: "must be Tensor, not int" in str(e)),
    ),
    forbidden=("_foreach_norm", "_foreach_mul_", "clip_grad_norm_", "get_total_norm",
               "clip_grads_with_norm_"),
    forbidden_hint="Compute the global norm sqrt(sum of g² over every parameter) yourself and "
                   "multiply each p.grad by min(1, grad_clip / (norm + 1e-6)) inside "
                   "torch.no_grad().",
)
_check_train_step = register(_TRAIN_STEP)


# The four checks of this chapter that take seconds: what their visible cases run and how long
# that took on an idle 2-core CPU (rounded up). Each says so before it starts (issue 32 item 8).
_LONG = {
    "train_step": ("training steps of a tiny language model, compared with the reference's", 3),
    "estimate_loss": ("evaluations of a tiny language model with dropout", 1),
    "save_checkpoint": ("train, save, restore into fresh objects, train on", 2),
    "sample_next_token": ("tens of thousands of draws per setting, compared by frequency", 5),
}


def _announce(check: Check, fn) -> None:
    """One line before a long check starts: what it runs and about how long it takes."""
    if not callable(fn):
        return
    what, seconds = _LONG[check.name]
    n = sum(not c.hidden for c in check.cases)
    print(f"running {check.exercise}'s check: {n} case{'s' * (n != 1)}, {what} (takes "
          f"~{seconds} s; naming "
          "a mistake, if there is one, takes longer) ...", flush=True)


def _visible(check: Check, run, wrap, name: str):
    """``check_<name>(<name>)``, the visible check of a long behaviour check: says what it
    runs (:func:`_announce`), then runs ``run`` on the student's function wrapped in its
    driver (``wrap``)."""

    def visible(fn):
        __tracebackhide__ = True  # noqa: F841
        _announce(check, fn)
        run(wrap(fn) if callable(fn) else fn)

    visible.__name__ = visible.__qualname__ = f"check_{name}"
    visible.__doc__ = (f"Run the visible check of {check.exercise}: "
                       f"``check_{name}({name})``.")
    return visible


check_train_step = _visible(_TRAIN_STEP, _check_train_step, _step_probe, "train_step")


# ====================================================================== Exercise 3.3
_Optimizer = torch.optim.Optimizer
_TorchAdamW = torch.optim.AdamW
_zeros_like, _ones_like = torch.zeros_like, torch.ones_like


def _adamw_probe(opt_cls):
    """Run the optimizer class ``opt_cls`` for a few steps on a tiny model's parameters
    (``_drivers.tiny_params``) with seeded random gradients; return the weights after each
    step, ``(n_steps, P)``."""
    drive = _drivers.adamw(opt_cls)

    def adamw(seed, n_steps, lr, betas, eps, weight_decay, layout="groups", grad_scale=1.0,
              lrs=()):
        return _adamw_output(drive(seed, n_steps, lr, betas, eps, weight_decay, layout,
                                   grad_scale, lrs))

    adamw.__name__ = "AdamW"
    adamw.student = opt_cls
    return adamw


def _adamw_output(raw) -> torch.Tensor:
    """The weights the driver recorded (TypeError: the update is torch's own AdamW)."""
    if _plain(raw, "weights", "torch_adam")["torch_adam"]:
        raise TypeError("AdamW handed the update to PyTorch's own Adam code (a subclass of "
                        "torch.optim.AdamW or Adam, or a call into it): subclass "
                        "torch.optim.Optimizer and write step() yourself")
    return raw["weights"]


def _adamw_variant(kind):
    """An AdamW class with one mistake ``kind`` (``""``: right, like torch.optim.AdamW)."""

    default_decay = 0.0 if kind == "adam-defaults" else 1e-2

    class Variant(_Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                     weight_decay=default_decay):
            self.init_lr, self.count = lr, 0  # count: "global-t", one for every parameter
            super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                      "weight_decay": weight_decay})

        @_no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                lr = self.init_lr if kind == "init-lr" else group["lr"]
                b1, b2 = group["betas"]
                if kind == "betas-swapped":
                    b1, b2 = b2, b1
                eps = group["eps"]
                wd = self.defaults["weight_decay"] if kind == "groups-ignored" \
                    else group["weight_decay"]
                for p in group["params"]:
                    if (p.grad is not None) if kind == "skip-all" else (p.grad is None):
                        continue
                    g = p.grad
                    st = self.state[p]
                    if not st:
                        st["t"] = 1 if kind == "t-from-2" else 0
                        st["m"] = (_ones_like if kind == "m-ones" else _zeros_like)(p)
                        st["v"] = (_ones_like if kind == "v-ones" else _zeros_like)(p)
                    st["t"] += 1
                    self.count += 1
                    t = self.count if kind == "global-t" else st["t"]
                    if kind == "l2":
                        g = g + wd * p
                    elif kind == "no-lr-decay":
                        p.mul_(1 - wd)
                    elif kind == "decay-sign":
                        p.mul_(1 + lr * wd)
                    elif kind == "decay-no-wd":
                        p.mul_(1 - lr)
                    elif kind not in ("decay-after", "no-decay"):
                        p.mul_(1 - lr * wd)
                    st["m"].mul_(b1).add_(g, alpha=1.0 if kind == "m-no-factor" else 1 - b1)
                    st["v"].mul_(b2).add_(g * g, alpha=1.0 if kind == "v-no-factor" else 1 - b2)
                    c1 = 1 + b1**t if kind == "m-corr-plus" else 1 - b1**t
                    c2 = 1 + b2**t if kind == "v-corr-plus" else 1 - b2**t
                    if kind == "no-bias-correction":
                        m_hat, v_hat = st["m"], st["v"]
                    else:
                        m_hat = {"m-uncorrected": st["m"], "m-corr-mult": st["m"] * c1}.get(
                            kind, st["m"] / c1)
                        v_hat = {"v-uncorrected": st["v"], "v-corr-mult": st["v"] * c2}.get(
                            kind, st["v"] / c2)
                    if kind == "eps-in-sqrt":
                        denom = (v_hat + eps).sqrt()
                    elif kind == "eps-before-correction":
                        denom = (st["v"].sqrt() + eps) / math.sqrt(c2)
                    elif kind == "no-sqrt":
                        denom = v_hat + eps
                    elif kind == "no-eps":
                        denom = v_hat.sqrt()
                    else:
                        denom = v_hat.sqrt() + eps
                    update = (1.0 if kind == "no-lr" else lr) * m_hat
                    if kind == "no-m":
                        update = lr * _ones_like(m_hat)
                    if kind == "times-denominator":
                        update = update * denom
                    elif kind != "no-denominator":
                        update = update / denom
                    if kind == "ascent":
                        p.add_(update)
                    elif kind != "no-update":
                        p.sub_(update)
                    if kind == "decay-after":
                        p.mul_(1 - lr * wd)
            return None

    Variant.__name__ = "AdamW"
    return Variant


def _adamw_cases():
    drive = _drivers.adamw(_TorchAdamW)  # the reference: PyTorch's own AdamW

    def probe(*args):
        return drive(*args)["weights"]

    cases = []
    # (label, (seed, n_steps, lr, betas, eps, weight_decay, layout, grad_scale, lrs), hidden)
    for label, args, hidden in [
        ("two groups (matrices decay 0.1, vectors 0), 5 steps, lr 1e-2, betas (0.9, 0.99)",
         (860, 5, 1e-2, (0.9, 0.99), 1e-8, 0.1, "groups", 1.0, ()), False),
        ("one list of parameters, weight_decay 0.5, lr 0.1, eps 1e-3, gradients ~0.01",
         (861, 5, 0.1, (0.9, 0.999), 1e-3, 0.5, "list", 0.01, ()), False),
        ("AdamW(params) with torch.optim.AdamW's defaults, 4 steps",
         (862, 4, 1e-3, (0.9, 0.999), 1e-8, 1e-2, "defaults", 1.0, ()), False),
        ("two groups, a schedule sets group['lr'] before each step",
         (863, 5, 1e-2, (0.9, 0.95), 1e-8, 0.1, "schedule", 1.0,
          (1e-2, 3e-2, 5e-2, 2e-2, 1e-3)), False),
        ("two groups, the vectors have no gradient at every other step",
         (864, 6, 2e-2, (0.9, 0.99), 1e-8, 0.2, "no_grad", 1.0, ()), False),
        ("two groups, 10 steps, betas (0.8, 0.9), weight_decay 1.0, lr 0.05",
         (865, 10, 5e-2, (0.8, 0.9), 1e-6, 1.0, "groups", 3.0, ()), True),
        ("one list, weight_decay 0 (plain Adam), eps 1e-2, one step",
         (866, 1, 1e-2, (0.9, 0.999), 1e-2, 0.0, "list", 0.1, ()), True),
        ("two groups, 3 steps, lr 0.3, eps 1e-4, gradients ~0.001",
         (867, 3, 0.3, (0.9, 0.999), 1e-4, 0.05, "groups", 1e-3, ()), True),
    ]:
        cases.append(Case(label, args, probe(*args), hidden=hidden, rtol=1e-5, atol=1e-6))
    return tuple(cases)


def _adamw_call_text(c) -> str:
    seed, n, lr, betas, eps, wd, layout, scale, lrs = c.args
    made = {"defaults": "AdamW(params)",
            "list": f"AdamW(params, lr={lr:g}, betas={betas}, eps={eps:g}, weight_decay={wd:g})"}
    made = made.get(layout, f"AdamW([{{'params': matrices, 'weight_decay': {wd:g}}}, "
                            f"{{'params': vectors, 'weight_decay': 0.0}}], lr={lr:g}, "
                            f"betas={betas}, eps={eps:g}, weight_decay={wd:g})")
    extra = {"schedule": f"; group['lr'] set to {list(lrs)} before the steps",
             "no_grad": "; the vectors' .grad is None at every other step"}.get(layout, "")
    return (f"{made} over a tiny model's parameters (seed {seed}), then step() {n} times with "
            f"random gradients of size ~{scale:g}{extra}; the weights after every step are "
            "compared with torch.optim.AdamW's")


def _adamw_ref(*args) -> torch.Tensor:
    return _drivers.adamw(_TorchAdamW)(*args)["weights"]


def _rows_agree(case, a, b) -> list:
    """Per step (row of the weights), whether ``a`` and ``b`` agree at the case's tolerance."""
    a, b = _mm._t(a), _mm._t(b)
    if a is None or b is None or a.shape != b.shape or a.dim() != 2:
        return []
    with torch._C.DisableTorchFunction():
        return [bool(torch.allclose(x.double(), y.double(), rtol=case.rtol, atol=case.atol))
                for x, y in zip(a, b)]


_ADAM_STEP_WHY = (
    "At step 1 the corrected averages are m_hat = g and v_hat = g², so each weight moves by "
    "about lr: check the averages' factors 1 - beta1 and 1 - beta2, the corrections "
    "1 - beta^t with t = 1 at the first step, and the step lr * m_hat / (sqrt(v_hat) + eps).")
_ADAM_STATE_WHY = (
    "What carries over from step to step is wrong: m and v are moving averages kept in "
    "self.state[p] and updated in place, and t counts this parameter's steps (1, 2, 3 ...).")


def _adamw_steps(case, got, decay_right: bool):
    """Which step first differs from torch's: (name, observation, suggestion) or None."""
    agree = _rows_agree(case, got, case.expected)
    if not agree or all(agree):
        return None
    k = agree.index(False) + 1
    if k == 1 and decay_right:
        return ("the Adam step is wrong from the first step",
                "with every gradient 0 your weights match torch.optim.AdamW's (the decay is "
                "right), but after the first step with gradients they differ", _ADAM_STEP_WHY)
    if k == 1:
        return ("the first step is wrong", "your weights differ from torch.optim.AdamW's "
                "after the first step already", "Each step first shrinks the weights of a "
                "decayed group by the factor 1 - lr * weight_decay. " + _ADAM_STEP_WHY)
    return ("the state kept between steps is wrong", f"your weights match torch.optim."
            f"AdamW's after the first {k - 1} step{'s' * (k > 2)}, not after step {k}",
            _ADAM_STATE_WHY)


def _zero_grads(case):
    return ((*case.args[:7], 0.0, *case.args[8:]), dict(case.kwargs)),


def _adamw_zero_read(case, got, outs):
    """Issue 49 item 1: the weights with every gradient 0, where only the decay acts."""
    if not outs or outs[0] is None:
        return None
    out, ref = _mm._t(outs[0]), _mm._t(_adamw_ref(*_zero_grads(case)[0][0]))
    if out is None or ref is None or out.shape != ref.shape:
        return None
    with torch._C.DisableTorchFunction():
        blown = bool((~torch.isfinite(out) & torch.isfinite(ref)).any())
    if blown:
        return _mm.Finding("the step divides by m (0 for a zero gradient)", (
            f"{_mm.MARK} with every gradient 0 your weights become inf or nan, where "
            "torch.optim.AdamW's only decay. The step is lr * m_hat / (sqrt(v_hat) + eps): 0 "
            "for a zero gradient; m and m_hat are never divisors."))
    if not all(_rows_agree(case, out, ref)):
        return _mm.Finding("the weight decay is wrong", (
            f"{_mm.MARK} with every gradient 0, where the Adam step is 0 and only the decay "
            "acts, your weights differ from torch.optim.AdamW's. Each step first shrinks every "
            "weight of a decayed group by the factor 1 - lr * weight_decay (p.mul_(1 - lr * "
            "weight_decay)), then subtracts the Adam step."))
    found = _adamw_steps(case, got, True)
    return None if found is None else _mm.Finding(found[0], f"{_mm.MARK} {found[1]}. {found[2]}")


# AdamW's catalogue: (the variant's kind, the mistake's name, why)
_ADAMW_MISTAKES = (
    ("l2", "L2 penalty added to the gradient (Adam + L2) instead of decoupled decay",
     "AdamW decouples the decay from the gradient: shrink the weights directly, "
     "p <- p - lr * weight_decay * p, and feed the plain gradient to m and v. "
     "Adding weight_decay * p to the gradient is Adam with L2, whose decay is "
     "divided by sqrt(v) like the rest (Loshchilov & Hutter)."),
    ("no-bias-correction", "no bias correction",
     "m and v start at 0, so early on they are too small by the factors "
     "1 - beta1^t and 1 - beta2^t: divide by them, with t the parameter's step "
     "count starting at 1."),
    ("no-lr-decay", "weight decay not multiplied by the learning rate",
     "The decoupled decay is p <- p * (1 - lr * weight_decay): torch.optim.AdamW "
     "scales it with the (scheduled) learning rate."),
    ("eps-in-sqrt", "eps inside the square root",
     "The denominator is sqrt(v_hat) + eps: eps is added after the square root."),
    ("eps-before-correction", "eps added before the bias correction of v",
     "torch.optim.AdamW adds eps to the *corrected* root: sqrt(v / (1 - beta2^t)) "
     "+ eps, not (sqrt(v) + eps) / sqrt(1 - beta2^t) (the Adam paper's variant)."),
    ("no-sqrt", "update divided by v_hat, not its square root",
     "The step is lr * m_hat / (sqrt(v_hat) + eps): v is a mean of *squared* "
     "gradients, its root has the gradient's scale."),
    ("groups-ignored", "every group decayed with the constructor's weight_decay (groups ignored)",
     "Each parameter group carries its own settings: read "
     "group['weight_decay'] (and lr, betas, eps) inside the loop over "
     "self.param_groups. The vectors' group has weight_decay 0 and must not "
     "shrink."),
    ("no-decay", "no weight decay",
     "AdamW shrinks each weight by the factor 1 - lr * weight_decay every step, "
     "before the Adam update."),
    ("decay-after", "decay applied after the Adam update (to the updated weights)",
     "torch.optim.AdamW first shrinks the weights, p <- p * (1 - lr * "
     "weight_decay), then subtracts the Adam step: the other order also decays "
     "the step itself."),
    ("global-t", "one step counter shared by all parameters",
     "Bias correction needs the number of steps *this* parameter has taken: keep "
     "t in self.state[p], incremented once per step(), not a counter that every "
     "parameter advances."),
    ("betas-swapped", "beta1 and beta2 swapped",
     "betas = (beta1, beta2): beta1 (0.9) averages the gradients into m, beta2 "
     "(0.999) the squared gradients into v."),
    ("m-uncorrected", "bias correction of m left out",
     "Both averages start at 0: divide m by 1 - beta1^t as well as v by "
     "1 - beta2^t."),
    ("v-uncorrected", "bias correction of v left out",
     "Both averages start at 0: divide v by 1 - beta2^t as well as m by "
     "1 - beta1^t."),
    ("m-corr-mult", "m multiplied by 1 - beta1^t instead of divided",
     "The correction undoes m's start at 0, which makes it too small: "
     "m_hat = m / (1 - beta1^t)."),
    ("v-corr-mult", "v multiplied by 1 - beta2^t instead of divided",
     "The correction undoes v's start at 0, which makes it too small: "
     "v_hat = v / (1 - beta2^t)."),
    ("m-no-factor", "m accumulates g without the factor 1 - beta1",
     "m is an exponential moving *average*: m <- beta1 * m + (1 - beta1) * g, "
     "not beta1 * m + g."),
    ("v-no-factor", "v accumulates g² without the factor 1 - beta2",
     "v is an exponential moving *average* of g²: v <- beta2 * v + "
     "(1 - beta2) * g * g, not beta2 * v + g * g."),
    ("ascent", "the step goes up the gradient (the update's sign flipped)",
     "Descend: p <- p - lr * m_hat / (sqrt(v_hat) + eps), with m and its "
     "correction 1 - beta1^t positive."),
    ("decay-sign", "weight decay with the wrong sign (the weights grow)",
     "Decay shrinks the weights: p <- p * (1 - lr * weight_decay)."),
    ("no-lr", "learning rate left out of the Adam step",
     "The step is lr * m_hat / (sqrt(v_hat) + eps): m_hat / sqrt(v_hat) is about "
     "1 per entry, the learning rate sets its size."),
    ("no-m", "m_hat left out of the Adam step (lr / (sqrt(v_hat) + eps))",
     "The step is lr * m_hat / (sqrt(v_hat) + eps): m_hat gives its direction; "
     "without it every weight moves down at every step, whatever its gradient's "
     "sign."),
    ("no-eps", "eps left out of the denominator",
     "The denominator is sqrt(v_hat) + eps: eps keeps the step finite where v is "
     "(nearly) 0, and changes it where gradients are as small as eps."),
    ("no-update", "the Adam step never applied (the weights only decay)",
     "After updating m and v, subtract the step: p.sub_(lr * m_hat / "
     "(v_hat.sqrt() + eps))."),
    ("skip-all", "no parameter updated (the p.grad is None test inverted?)",
     "Skip the parameters *without* a gradient: if p.grad is None: continue."),
    ("t-from-2", "step count off by one (t = 2 at the first step)",
     "Start each parameter's count at 0 and add 1 before using it, so the first "
     "step has t = 1 (its bias corrections are 1 - beta1 and 1 - beta2)."),
    ("m-ones", "m started at 1 instead of 0",
     "The moving averages start at 0: state['m'] = torch.zeros_like(p) (that is "
     "why the bias correction is needed)."),
    ("v-ones", "v started at 1 instead of 0",
     "The moving averages start at 0: state['v'] = torch.zeros_like(p) (that is "
     "why the bias correction is needed)."),
    ("decay-no-wd", "decay factor 1 - lr (weight_decay left out)",
     "The weights shrink by the factor 1 - lr * weight_decay: with 1 - lr every "
     "group decays, at a rate that has nothing to do with weight_decay."),
    ("times-denominator", "the step multiplied by sqrt(v_hat) + eps instead of divided",
     "Adam normalises each entry by its gradient's typical size: "
     "lr * m_hat / (sqrt(v_hat) + eps)."),
    ("no-denominator", "the step not divided by sqrt(v_hat) + eps (momentum SGD)",
     "Adam's step is lr * m_hat / (sqrt(v_hat) + eps): without the denominator "
     "it is SGD with momentum, and v is computed for nothing."),
    ("m-corr-plus", "m corrected by 1 + beta1^t",
     "The correction is 1 - beta1^t (the weight m's start at 0 leaves out): "
     "m_hat = m / (1 - beta1^t)."),
    ("v-corr-plus", "v corrected by 1 + beta2^t",
     "The correction is 1 - beta2^t (the weight v's start at 0 leaves out): "
     "v_hat = v / (1 - beta2^t)."),
    ("adam-defaults", "constructor defaults of Adam (weight_decay 0) instead of AdamW's 1e-2",
     "torch.optim.AdamW's signature is (params, lr=1e-3, betas=(0.9, 0.999), "
     "eps=1e-8, weight_decay=1e-2)."),
    ("init-lr", "learning rate read once in __init__ (a schedule's group['lr'] ignored)",
     "A schedule writes group['lr'] before each step: read the learning rate from "
     "the group inside step(), not from a copy kept at construction."),
)

_ADAMW_PROBES = (
    _mm.Probe("every gradient 0", _zero_grads, _adamw_zero_read),
    # the verdict has no variant for a driven check: which step first differs, only
    _mm.seen("the first step that differs", lambda case, got: _adamw_steps(case, got, False)),
)

_ADAMW = Check(
    **table.identity(__name__, "AdamW"),
    call_text=_adamw_call_text,
    cases=_adamw_cases,
    probes=_ADAMW_PROBES,
    mistakes=tuple(Mistake(name, why, _adamw_probe(_adamw_variant(kind)))
                   for kind, name, why in _ADAMW_MISTAKES),
    error_hints=(
        ErrorHint("step() changes the weights with autograd on",
                  "Updating a parameter in place is refused while autograd records: decorate "
                  "step() with @torch.no_grad() (or wrap its body in with torch.no_grad():).",
                  lambda e: "leaf Variable that requires grad" in str(e)),
        ErrorHint("division by a weight decay of 0",
                  "A group may have weight_decay 0 (the vectors' group does): the decay is "
                  "the factor 1 - lr * weight_decay, a product; nothing is divided by it.",
                  lambda e: isinstance(e, ZeroDivisionError)),
        ErrorHint("super().__init__ not called",
                  "torch.optim.Optimizer.__init__(params, defaults) builds self.param_groups "
                  "and self.state: call super().__init__(params, dict(lr=lr, betas=betas, "
                  "eps=eps, weight_decay=weight_decay)) in __init__.",
                  lambda e: any(f"has no attribute '{a}'" in str(e)
                                for a in ("param_groups", "state", "defaults"))),
        ErrorHint("a parameter without a gradient (p.grad is None)",
                  "A parameter may have no gradient at some step (p.grad is None): skip it, "
                  "as torch.optim.AdamW does (no decay, no change of its state).",
                  lambda e: "NoneType" in str(e)),
    ),
)
_check_adamw = register(_ADAMW)


def check_AdamW(AdamW):  # noqa: N802,N803 - named after the exercise's class
    """Run the visible check of Exercise 3.3: ``check_AdamW(AdamW)``."""
    __tracebackhide__ = True  # noqa: F841
    _check_adamw(_adamw_probe(AdamW) if callable(AdamW) else AdamW)


# ====================================================================== Exercise 4.1
def _eval_probe(eval_fn):
    """Evaluate a tiny language model with dropout 0.5 on random tokens with ``eval_fn``."""
    drive = _drivers.estimate_loss(eval_fn)

    def estimate_loss(seed, batch_size, block_size, eval_iters):
        return _eval_output(drive(seed, batch_size, block_size, eval_iters))

    estimate_loss.__name__ = "estimate_loss"
    estimate_loss.student = eval_fn
    return estimate_loss


@torch.no_grad()
def _ref_estimate(model, data, batch_size, block_size, eval_iters, generator):
    was = model.training
    model.eval()
    losses = []
    for _ in range(eval_iters):
        x, y = _ref_get_batch(data, batch_size, block_size, generator)
        logits = model(x)
        losses.append(_F_ce(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item())
    model.train(was)
    return sum(losses) / len(losses)


def _eval_wrong(kind):
    def f(model, data, batch_size, block_size, eval_iters, generator):
        if kind != "no-eval":
            model.eval()
        losses = []
        with _no_grad():
            n = {"one": 1, "one-more": eval_iters + 1, "one-less": eval_iters - 1}
            for _ in range(n.get(kind, eval_iters)):
                x, y = _ref_get_batch(data, batch_size, block_size, generator)
                logits = model(x)
                losses.append(_F_ce(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item())
        model.train()
        if kind == "last":
            return losses[-1]
        if kind == "sum":
            return sum(losses)
        return sum(losses) / len(losses)

    return _eval_probe(f)


def _eval_output(out):
    if isinstance(out, torch.Tensor) and out.dim() == 0:
        out = out.item()
    return out


_AFTER = ("after the cases: the model's mode and autograd", ("after", 850))


def _after_problem(raw) -> tuple[str, str] | None:
    """(diagnosis, problem) from the driver's record of the mode/autograd experiment."""
    after = _plain(raw, "training_after", "grad_enabled", "training_after_eval")
    if after["training_after"] is not True:
        return ("model left in eval mode",
                "the model is still in eval mode afterwards: remember model.training before "
                "model.eval() and call model.train(was_training) at the end, or training "
                "continues without dropout.")
    seen = after["grad_enabled"]
    if type(seen) is not list or any(s is not False for s in seen):
        return ("forward passes with autograd on",
                "the forward passes ran with gradients enabled: evaluate inside "
                "torch.no_grad() (or decorate the function with @torch.no_grad()), or every "
                "batch keeps its whole autograd graph in memory.")
    if after["training_after_eval"] is not False:
        return ("mode not restored (always training)",
                "a model that was in eval mode is in training mode afterwards: restore the "
                "mode it had (model.train(was_training)), not always training.")
    return None


def _eval_post(probe, hidden):
    """After the cases: the model is back in training mode and no graph was built."""
    found = _after_problem(_drivers.estimate_loss(probe.student)(*_AFTER[1]))
    return f"{found[1]}\n  Likely mistake: {found[0]}." if found else None


def _eval_cases():
    probe = _eval_probe(_ref_estimate)
    cases = []
    for label, args, hidden in [
        ("dropout 0.5, batch 4, block 8, 3 batches", (853, 4, 8, 3), False),
        ("dropout 0.5, batch 2, block 6, 5 batches", (854, 2, 6, 5), False),
        ("one batch of one sequence", (855, 1, 8, 1), True),
        ("batch 8, block 4, 10 batches", (856, 8, 4, 10), True),
    ]:
        cases.append(Case(label, args, probe(*args), kind="scalar", rtol=1e-5, atol=1e-6,
                          hidden=hidden))
    return tuple(cases)


_ESTIMATE = Check(
    **table.identity(__name__, "estimate_loss"),
    call_text=lambda c: (
        f"estimate_loss(model, data, batch_size={c.args[1]}, block_size={c.args[2]}, "
        f"eval_iters={c.args[3]}, generator) on a tiny model with dropout 0.5 (seed {c.args[0]}),"
        " data 400 random tokens"),
    uses=table.uses(__name__, "get_batch", "cross_entropy"),
    cases=_eval_cases,
    mistakes=(
        Mistake("forgot model.eval(): dropout is still on",
                "In training mode dropout zeroes activations at random, so the loss is noisy "
                "and too high; model.eval() switches it off.",
                _eval_wrong("no-eval")),
        Mistake("returned the last batch's loss, not the mean",
                "Average the eval_iters batch losses: one batch is a noisy estimate.",
                _eval_wrong("last")),
        Mistake("summed the batch losses instead of averaging",
                "Divide by eval_iters: the estimate must not depend on how many batches you "
                "used.",
                _eval_wrong("sum")),
        Mistake("evaluated one batch only (eval_iters ignored)",
                "Loop eval_iters times, drawing a new batch each time from the generator.",
                _eval_wrong("one")),
        # mutation testing (issue 32): the loop's bounds
        Mistake("one batch too many (range(eval_iters + 1))",
                "range(eval_iters) already runs eval_iters times (0 to eval_iters - 1): "
                "average exactly eval_iters batches.",
                _eval_wrong("one-more")),
        Mistake("one batch too few (range(1, eval_iters))",
                "range(1, eval_iters) runs eval_iters - 1 times: use range(eval_iters), "
                "which runs eval_iters times.",
                _eval_wrong("one-less")),
    ),
    error_hints=(
        ErrorHint("no loss collected (the list of losses stays empty)",
                  "Append each batch's loss inside the loop, losses.append(loss.item()), "
                  "then average: sum(losses) / len(losses).",
                  lambda e: isinstance(e, ZeroDivisionError)),
    ),
    post=_eval_post,
)
_check_estimate_loss = register(_ESTIMATE)


check_estimate_loss = _visible(_ESTIMATE, _check_estimate_loss, _eval_probe, "estimate_loss")


# ====================================================================== Exercise 5.1
def _resume_probe(save_fn, load_fn):
    """Train k steps, save, restore into a *different* model/optimizer/generator, train n more.

    Returns (the n losses after the restore, the final weights, the restored step). The
    student's functions only run in the driver (save, then load); the training before and
    after is the reference's.
    """
    drive = _drivers.checkpoint(save_fn, load_fn)

    def checkpoint(seed, k, n):
        with _enable_grad():  # the diagnosis runs mistakes under no_grad
            return _resume_output(seed, n, drive(seed, _pretrain(seed, k)))

    checkpoint.__name__ = "save_checkpoint"
    return checkpoint


def _pretrain(seed: int, k: int) -> dict:
    """The training state after ``k`` reference steps (plain data: what the driver loads)."""
    with _enable_grad():
        data = _tokens(seed, 600, 13)
        model = _tiny_lm(seed)
        opt = _ref_optimizer(model, 0.1, 1e-2, (0.9, 0.99))
        gen = _gen(seed + 1)
        for step in range(k):
            _train_one(model, opt, data, gen, step)
    return {"model": {name: v.detach().clone() for name, v in model.state_dict().items()},
            "optimizer": _deepcopy(opt.state_dict()), "generator": gen.get_state(), "step": k}


_SWAPPED = ("load_checkpoint replaced the model's parameters (or the optimizer's) with new "
            "tensor objects instead of loading the saved values into them: the optimizer "
            "would go on updating the old ones")


def _resume_output(seed: int, n: int, raw) -> tuple:
    """Restore what the driver recorded into a fresh model/AdamW/generator and train ``n``
    reference steps from the step ``load_checkpoint`` returned."""
    raw = _plain(raw, "step", "model", "optimizer", "generator")
    if raw.get("in_place") is not True:
        raise ValueError(_SWAPPED)
    step = raw["step"]
    if isinstance(step, torch.Tensor):
        step = int(step.item())
    if not isinstance(step, int):
        raise TypeError(f"load_checkpoint should return the step (an int), got "
                        f"{_type_name(step)}")
    with _enable_grad():
        data = _tokens(seed, 600, 13)
        model2 = _tiny_lm(seed + 100)
        opt2 = _ref_optimizer(model2, 0.1, 1e-2, (0.9, 0.99))
        gen2 = _Gen()
        model2.load_state_dict(raw["model"])
        opt2.load_state_dict(raw["optimizer"])
        gen2.set_state(raw["generator"])
        losses = [_train_one(model2, opt2, data, gen2, step + i) for i in range(n)]
    weights = _cat([p.detach().reshape(-1) for p in model2.parameters()])
    return _tensor(losses, dtype=torch.float64), weights, _tensor(float(step))


def _train_one(model, opt, data, gen, step):
    lr = _ref_get_lr(step, 1e-2, 1e-3, 10, 40)
    for group in opt.param_groups:
        group["lr"] = lr
    x, y = _ref_get_batch(data, 4, 8, gen)
    return _ref_step(model, opt, x, y, 1.0)


def _ref_save(path, model, optimizer, step, generator):
    _save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
           "generator": generator.get_state()}, path)


def _ref_load(path, model, optimizer, generator):
    ck = _load(path)
    model.load_state_dict(ck["model"])
    optimizer.load_state_dict(ck["optimizer"])
    generator.set_state(ck["generator"])
    return ck["step"]


def _ck_wrong(kind):
    def save(path, model, optimizer, step, generator):
        state = {"model": model.state_dict(), "step": step, "generator": generator.get_state()}
        if kind != "model-only":
            state["optimizer"] = optimizer.state_dict()
        if kind == "no-gen":
            del state["generator"]
        _save(state, path)

    def load(path, model, optimizer, generator):
        ck = _load(path)
        if kind != "no-model":
            model.load_state_dict(ck["model"])
        if "optimizer" in ck:
            optimizer.load_state_dict(ck["optimizer"])
        if "generator" in ck:
            generator.set_state(ck["generator"])
        return 0 if kind == "no-step" else ck["step"]

    return _resume_probe(save, load)


def _ck_cases():
    probe = _resume_probe(_ref_save, _ref_load)
    cases = []
    for label, args, hidden in [
        ("save after 3 steps, 4 more steps after the restore", (860, 3, 4), False),
        ("save after 12 steps (past the warm-up), 3 more", (861, 12, 3), True),
        ("save after 0 steps", (862, 0, 3), True),
    ]:
        cases.append(Case(label, args, probe(*args), hidden=hidden, rtol=1e-4, atol=1e-4))
    return tuple(cases)


_CHECKPOINT = Check(
    **table.identity(__name__, "checkpoint"),
    call_text=lambda c: (
        f"save_checkpoint(path, model, optimizer, step={c.args[1]}, generator) after "
        f"{c.args[1]} training steps, load_checkpoint(path, model2, optimizer2, generator2) "
        f"into fresh ones, then {c.args[2]} more steps (seed {c.args[0]})"),
    cases=_ck_cases,
    mistakes=(
        Mistake("saved the model only (AdamW's moments restart at zero)",
                "AdamW keeps two running averages per weight (exp_avg, exp_avg_sq) and a step "
                "count; without optimizer.state_dict() the first steps after a resume are "
                "different. Save and load the optimizer too.",
                _ck_wrong("model-only")),
        Mistake("the step was not restored (the schedule restarts at warm-up)",
                "Save the step and return it from load_checkpoint: the learning rate of the "
                "next step depends on it.",
                _ck_wrong("no-step")),
        Mistake("the batch generator's state was not saved (other batches after the resume)",
                "The windows come from a torch.Generator; save generator.get_state() and "
                "restore it with generator.set_state(...) to draw the same batches.",
                _ck_wrong("no-gen")),
        Mistake("the model's weights were not loaded",
                "load_checkpoint must restore the model too: model.load_state_dict(ck['model']) "
                "(the fresh model's own random weights are not the ones you saved).",
                _ck_wrong("no-model")),
    ),
    error_hints=(
        ErrorHint("parameters replaced, not loaded in place",
                  "The optimizer holds the model's parameter objects: load the values into "
                  "them with model.load_state_dict(ck['model']) (not assign=True, not new "
                  "nn.Parameter objects) and optimizer.load_state_dict(ck['optimizer']).",
                  lambda e: "replaced the model's parameters" in str(e)),
        ErrorHint("saved the generator object instead of its state",
                  "torch.Generator cannot be pickled: save generator.get_state() (a uint8 "
                  "tensor) and restore it with generator.set_state(state).",
                  lambda e: "Generator" in str(e)),
        ErrorHint("torch.load refuses a Python object (weights_only)",
                  "torch.load only unpickles tensors, numbers, strings, lists and dicts by "
                  "default: store plain values (state_dict(), get_state(), ints).",
                  lambda e: "weights_only" in str(e) or "Weights only" in str(e)),
        ErrorHint("nothing was written to path (torch.save missing?)",
                  "save_checkpoint must write the file load_checkpoint reads: "
                  "torch.save({...}, path).",
                  lambda e: isinstance(e, FileNotFoundError)),
    ),
)
_check_checkpoint = register(_CHECKPOINT)


def check_checkpoint(save_checkpoint, load_checkpoint=None):
    """The visible check of Exercise 5.1: ``check_checkpoint((save_checkpoint, load_checkpoint))``
    (or the two functions as two arguments)."""
    __tracebackhide__ = True  # noqa: F841
    if load_checkpoint is None and isinstance(save_checkpoint, (tuple, list)):
        save_checkpoint, load_checkpoint = save_checkpoint
    fns = (save_checkpoint, load_checkpoint)
    if all(callable(f) for f in fns):
        _announce(_CHECKPOINT, save_checkpoint)
    _check_checkpoint(_resume_probe(*fns) if all(callable(f) for f in fns) else None)


# ====================================================================== Exercise 6.1
_N_DRAWS = _drivers.N_DRAWS


def _freq_probe(sample_fn):
    """Draw ``_N_DRAWS`` tokens per row of ``logits (R, V)``; return the frequencies (R, V)."""
    drive = _drivers.sample_next_token(sample_fn)

    def sample_next_token(logits, temperature, top_k, top_p, seed):
        return _freq_output(logits, drive(logits, temperature, top_k, top_p, seed))

    sample_next_token.__name__ = "sample_next_token"
    sample_next_token.student = sample_fn  # (the stage after the cases drives it again)
    return sample_next_token


def _freq_output(logits, out) -> torch.Tensor:
    """The frequencies (R, V) of the ids the driver recorded (ValueError: not (R * N, 1) int64
    ids below V)."""
    R, V = logits.shape
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (R * _N_DRAWS, 1):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else _type_name(out)
        raise ValueError(f"sample_next_token should return a (B, 1) tensor of token ids "
                         f"for logits (B, V); got {got} for B = {R * _N_DRAWS}")
    if out.dtype != torch.int64:
        raise ValueError(f"the token ids should be int64, got {out.dtype}")
    ids = out.reshape(R, _N_DRAWS)
    counts = torch.zeros(R, V, dtype=torch.float64)
    counts.scatter_add_(1, ids, torch.ones(R, _N_DRAWS, dtype=torch.float64))
    return counts / _N_DRAWS


def _exact_probs(logits, temperature, top_k, top_p, seed):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.shape[-1]).double()
    return _softmax(_ref_filter(logits.double(), temperature, top_k, top_p), dim=-1)


def _sample_wrong(kind):
    def f(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        if temperature == 0 or kind == "argmax":
            return logits.argmax(-1, keepdim=True)
        z = logits.float()
        if kind == "times-T":
            z = z * temperature
        elif kind != "no-T" and kind != "p-first":
            z = z / temperature
        fill = 0.0 if kind == "zero-fill" else float("-inf")
        if top_k is not None and kind != "k-none":
            k = min(top_k, z.size(-1))  # a top_k over V keeps every token
            kth = torch.topk(z, k, largest=kind != "k-smallest").values[..., -1:]
            z = z.masked_fill(z > kth if kind == "k-smallest" else z <= kth if kind == "k-le"
                              else z < kth, fill)
        if top_p is not None and kind != "p-none":
            if kind == "p-unsorted":
                p = _softmax(z, -1)
                drop = (torch.cumsum(p, -1) - p) >= top_p
                drop[..., 0] = False
                z = z.masked_fill(drop, fill)
            else:
                zs, order = torch.sort(z, -1, descending=kind != "p-ascending")
                p = _softmax(zs, -1)
                c = torch.cumsum(p, 0 if kind == "cumsum-batch" else -1)
                drop = c >= top_p if kind == "p-inclusive" else (c - p) >= top_p
                drop[..., 0] = False
                mask = torch.zeros_like(drop).scatter(-1, order, drop)
                z = z.masked_fill(~mask if kind == "p-inverted" else mask, fill)
        if kind == "p-first":
            z = z / temperature
        return torch.multinomial(_softmax(z, 0 if kind == "softmax-batch" else -1), 1,
                                 generator=generator)

    return _freq_probe(f)


# Probabilities chosen so that every filter boundary sits on a token of probability >= 0.06
# (so a wrong filter moves a frequency by far more than the sampling noise, sd <= 0.0025),
# in shuffled order (the filter must sort).
_P6 = torch.tensor([0.15, 0.06, 0.40, 0.04, 0.25, 0.10], dtype=torch.float64)
_Z6 = torch.log(_P6).float().unsqueeze(0)  # (1, 6)


def _sample_cases():
    cases = []
    two_rows = torch.stack([_Z6[0], _Z6[0].flip(-1) * 0.5])  # (2, 6)

    def add(label, logits, T=1.0, k=None, p=None, seed=870, hidden=False):
        args = (logits, T, k, p, seed)
        probs = _exact_probs(*args)
        # frequencies of random draws vary from one generator to the next (sd of an entry:
        # sqrt(p (1 - p) / N)); ids built from the probabilities would not: three more
        # generators, unless the case has only one possible token
        sd = float((probs * (1 - probs) / _N_DRAWS).sqrt().max())
        more = () if sd == 0 else tuple(
            (lambda s=seed + 1000 * j: (logits, T, k, p, s)) for j in (1, 2, 3))
        cases.append(Case(label, args, probs, hidden=hidden, atol=0.012, rtol=0.0,
                          samples=more, spread=sd if more else None))

    add("temperature 1 (frequencies of 40,000 draws)", _Z6)
    add("temperature 0.5", _Z6, T=0.5)
    add("temperature 2", _Z6, T=2.0)
    add("top_k = 3", _Z6, k=3)
    add("top_p = 0.7", _Z6, p=0.7)
    add("temperature 0.8, top_k = 4, top_p = 0.8 (temperature first)", _Z6, T=0.8, k=4, p=0.8)
    add("temperature 0 (greedy)", _Z6, T=0.0)
    # the goal states both: "a top_k larger than V keeps every token" and (the docstring)
    # temperature before top-p, which the next case's T = 3 shows (visible, issue 32)
    add("top_k = 10 (more than the 6 tokens: keep them all)", _Z6, k=10)
    add("temperature 3, top_p = 0.6", _Z6, T=3.0, p=0.6, seed=871)
    add("top_p = 0.3 (only the most probable token)", _Z6, p=0.3, hidden=True)
    add("top_k = 1", _Z6, k=1, hidden=True)
    add("two different rows, temperature 1.5, top_p = 0.9", two_rows, T=1.5, p=0.9,
        hidden=True)
    return tuple(cases)


# "drawn with torch.multinomial(probs, 1, generator=generator)" (issue 49): frequencies
# alone cannot tell the given generator from another one (the global one, a new one), so
# after the cases the function draws twice with generators in the same state: the same draws.
_SAME_STATE = (_Z6, 1.0, None, None, 872)
_SAME_DRAWS = tuple((f"after the cases: a generator seeded 872, {which}", _SAME_STATE)
                    for which in ("once", "again in the same state"))
NOT_GIVEN = "drew without the given generator"
_NOT_GIVEN_WHY = (
    "Draw with the generator you are given, `torch.multinomial(probs, 1, "
    "generator=generator)`: without it torch draws from its global generator (or a new "
    "one), so a generator in the same state cannot reproduce your tokens (a sampling run "
    "cannot be repeated, nor a checkpoint resumed).")


def _same_draws_problem(first, again) -> tuple[str, str] | None:
    """(diagnosis, problem) from the driver's two records on generators in the same state
    (``_SAME_DRAWS``), or None: the draws of the given generator are the same twice."""
    a, b = (_freq_output(_SAME_STATE[0], x) for x in (first, again))
    if torch.equal(a, b):
        return None
    return (NOT_GIVEN,
            "on two generators in the same state (seeded 872, temperature 1) your tokens "
            f"differ: {_NOT_GIVEN_WHY}")


def _sample_post(probe, hidden):
    """Exercise 6.1's extra stage, in the kernel: the same draws on two generators in one state.

    (The kit, which does not run it, names the stage by this first line.)"""
    drive = _drivers.sample_next_token(probe.student)
    found = _same_draws_problem(*(drive(*args) for _, args in _SAME_DRAWS))
    return f"{found[1]}\n  Likely mistake: {found[0]}." if found else None


_SAMPLE = Check(
    **table.identity(__name__, "sample_next_token"),
    call_text=lambda c: (
        f"sample_next_token(logits, temperature={c.args[1]}, top_k={c.args[2]}, "
        f"top_p={c.args[3]}, generator) on logits ({c.args[0].shape[0] * _N_DRAWS}, "
        f"{c.args[0].shape[1]}): each of these {c.args[0].shape[0]} rows repeated "
        f"{_N_DRAWS:,} times"),
    cases=_sample_cases,
    mistakes=(
        Mistake("multiplied the logits by the temperature instead of dividing",
                "p ∝ exp(z / T): a small T sharpens the distribution, a large T flattens it.",
                _sample_wrong("times-T")),
        Mistake("temperature ignored",
                "Divide the logits by the temperature before softmax.",
                _sample_wrong("no-T")),
        Mistake("top-p applied before the temperature",
                "The nucleus is measured on the distribution you sample from: temperature "
                "first, then top-k, then top-p.",
                _sample_wrong("p-first")),
        Mistake("kept the k smallest logits",
                "top-k keeps the k *largest* logits (torch.topk's default, largest=True).",
                _sample_wrong("k-smallest")),
        Mistake("top-p drops the token that crosses p",
                "Keep a token while the mass *before* it is < p (exclusive cumulative sum): "
                "the token that takes the total over p is part of the nucleus.",
                _sample_wrong("p-inclusive")),
        Mistake("top-p measured on the unsorted probabilities",
                "The nucleus is the most probable tokens: sort the probabilities in decreasing "
                "order before the cumulative sum, then map the decision back to vocabulary "
                "order (scatter with the sort's indices).",
                _sample_wrong("p-unsorted")),
        Mistake("top-k filter not applied (masked_fill's result not kept?)",
                "masked_fill returns a new tensor: z = z.masked_fill(z < kth, float('-inf')) "
                "(and kth is the k-th largest of min(top_k, V) values).",
                _sample_wrong("k-none")),
        Mistake("top-k keeps k - 1 tokens (<= instead of <)",
                "kth is the k-th largest logit itself: drop what is *below* it, z < kth, so "
                "that k tokens stay.",
                _sample_wrong("k-le")),
        Mistake("filtered logits set to 0 instead of -inf",
                "A logit of 0 is still a probability exp(0) / sum > 0 (more than any negative "
                "logit): masked_fill(..., float('-inf')) gives exactly 0 after softmax.",
                _sample_wrong("zero-fill")),
        Mistake("top-p on the probabilities sorted in increasing order",
                "torch.sort sorts in increasing order by default: the nucleus is the most "
                "probable tokens, sort(..., descending=True).",
                _sample_wrong("p-ascending")),
        Mistake("top-p filter not applied (masked_fill's result not kept?)",
                "Map the sorted decision back to vocabulary order and apply it: "
                "z = z.masked_fill(mask, float('-inf')).",
                _sample_wrong("p-none")),
        Mistake("top-p mask inverted (the nucleus dropped, the tail kept)",
                "drop is True for the tokens *outside* the nucleus: masked_fill(drop, ...) "
                "removes those, not ~drop.",
                _sample_wrong("p-inverted")),
        Mistake("softmax over the batch axis (dim=0) instead of the vocabulary",
                "Each row is one distribution over the V tokens: torch.softmax(z, dim=-1). "
                "Over dim=0 every row of identical logits becomes uniform.",
                _sample_wrong("softmax-batch")),
        Mistake("top-p's cumulative mass summed down the batch (dim=0)",
                "The mass before a token is a sum along its own row of sorted probabilities: "
                "torch.cumsum(p, dim=-1). Down the batch it passes p after the first row, so "
                "every later row keeps only its most probable token.",
                _sample_wrong("cumsum-batch")),
        # mutation testing (issue 32)
        Mistake("took the most probable token instead of drawing one (argmax, not a sample)",
                "Sampling draws each token with its probability: torch.multinomial(torch."
                "softmax(z, dim=-1), 1, generator=generator). argmax is greedy decoding, only "
                "for temperature 0.",
                _sample_wrong("argmax")),
    ),
    error_hints=(
        ErrorHint("temperature 0 divides by zero",
                  "temperature == 0 means greedy decoding: return "
                  "logits.argmax(dim=-1, keepdim=True) before dividing.",
                  lambda e: "inf" in str(e) and "nan" in str(e)),
        ErrorHint("the ids returned as (B,), not (B, 1) (keepdim=True left out?)",
                  "argmax(dim=-1) drops the vocabulary axis: logits.argmax(dim=-1, "
                  "keepdim=True) keeps it, like torch.multinomial(probs, 1) does.",
                  lambda e: _re.search(r"; got \(\d+,\) for B = ", str(e)) is not None),
        ErrorHint("the greedy ids taken along the batch axis (argmax over dim=0)",
                  "Each row's token is the argmax over its own vocabulary: "
                  "logits.argmax(dim=-1, keepdim=True), one id per row, (B, 1).",
                  lambda e: _re.search(r"; got \(1, \d+\) for B = ", str(e)) is not None),
        ErrorHint("top_k larger than the vocabulary (k not capped at V)",
                  "torch.topk refuses k > V; a top_k above the vocabulary size keeps every "
                  "token: torch.topk(z, min(top_k, z.size(-1)), dim=-1).",
                  lambda e: "selected index k out of range" in str(e)),
    ),
    post=_sample_post,
)
_check_sample = register(_SAMPLE)


check_sample_next_token = _visible(_SAMPLE, _check_sample, _freq_probe, "sample_next_token")


# ====================================================================== graded path
# course-grade: the kernel's stub hands the student's functions to ``_training_drivers``; the
# probe records what the drivers return; ``_judge`` turns that into the probe's output here,
# in the grader's process (the expected values and the mistakes stay here).
_KEY = table.keys(__name__)  # {function: check key}
DRIVEN = {
    _KEY["get_batch"]: Driven(reference=_REFERENCE),
    _KEY["cross_entropy"]: Driven(reference=_REFERENCE),
    _KEY["get_lr"]: Driven(reference=_REFERENCE),
    _KEY["train_step"]: Driven(output=lambda case, raw: _step_output(raw),
                               reference=_REFERENCE),
    _KEY["AdamW"]: Driven(output=lambda case, raw: _adamw_output(raw), reference=_REFERENCE),
    _KEY["estimate_loss"]: Driven(output=lambda case, raw: _eval_output(raw),
                                  extra=(_AFTER,), post=_after_problem, reference=_REFERENCE),
    _KEY["checkpoint"]: Driven(
        args=lambda case: (case.args[0], _pretrain(case.args[0], case.args[1])),
        output=lambda case, raw: _resume_output(case.args[0], case.args[2], raw),
        reference=_REFERENCE),
    _KEY["sample_next_token"]: Driven(output=lambda case, raw: _freq_output(case.args[0], raw),
                                      extra=_SAME_DRAWS, post=_same_draws_problem,
                                      reference=_REFERENCE),
}
_PROBES = {
    _KEY["train_step"]: _step_probe,
    _KEY["AdamW"]: _adamw_probe,
    _KEY["estimate_loss"]: _eval_probe,
    _KEY["checkpoint"]: _resume_probe,
    _KEY["sample_next_token"]: _freq_probe,
}


def probe(key: str, *fns):
    """What the hidden tests hand to ``hidden_check(key, ...)``: the student's function, or for
    a behaviour check its probe (``None`` if an argument is not callable)."""
    wrap = _PROBES.get(key)
    if wrap is None:
        return fns[0]
    return wrap(*fns) if all(callable(f) for f in fns) else None


def graded(key: str, *fns) -> None:
    """Hidden tests: visible and hidden cases of check ``key`` on the student's function(s)."""
    __tracebackhide__ = True  # noqa: F841
    wrap = _PROBES.get(key)
    if wrap is None:
        hidden_check(key, *fns)
    elif all(callable(f) for f in fns):
        hidden_check(key, wrap(*fns))
    else:
        hidden_check(key, None)


sys.modules[__name__].__class__ = _SealedModule
