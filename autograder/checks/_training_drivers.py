"""Notebook 08's experiments around the student's functions; each returns plain data only.

A training step, an evaluation, a checkpoint round trip and a sampler are behaviours rather
than return values. A *driver* runs the student's function(s) in a small experiment built from
plain parameters (seeds, sizes, a saved training state, logits) and returns what happened as
plain data: the values the function returned, parameter tensors after the steps, the restored
optimizer and generator states, the sampled token ids. A driver compares and decides nothing.

* In a self-learner's kernel, ``autograder.checks.training`` wraps the drivers (checks in the
  same process, as before).
* In a graded kernel (``course-grade``) the chapter's check module is a stub whose ``probe``
  is the one below: the probe (``_probe``) records what a driver returns, and the grader turns
  it into a verdict in its own process (``training.DRIVEN``, ``_judge``).

This module holds no expected value and none of the chapter's reference implementations (it
builds the model the exercises train with, :class:`TinyLM`, and an AdamW). The model is made of
``torch.nn`` modules alone, no chapter's answer (issue 49 item 3): a student kit that leaves
out the reference GPT (chapter 06's answer) still runs these experiments.

>>> ids = sample_next_token(lambda z, **kw: z.argmax(-1, keepdim=True))(
...     torch.zeros(1, 3), 1.0, None, None, 0)
>>> tuple(ids.shape)
(40000, 1)
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

__all__ = ["probe", "graded"]

N_DRAWS = 40_000  # draws per row of logits in the sampler experiment

# bound at import (the notebook's locked setup cell), before any student cell runs
_Gen = torch.Generator
_cat = torch.cat
_randint = torch.randint
_manual_seed = torch.manual_seed
_enable_grad = torch.enable_grad
_is_grad_enabled = torch.is_grad_enabled
_AdamW = torch.optim.AdamW
_mkdtemp, _rmtree, _join = tempfile.mkdtemp, shutil.rmtree, os.path.join
_deepcopy = copy.deepcopy
_arange = torch.arange


def tokens(seed: int, n: int, vocab: int) -> np.ndarray:
    """``n`` random token ids below ``vocab`` as the memmap stores them (uint16)."""
    return np.random.default_rng(seed).integers(0, vocab, n).astype(np.uint16)


def gen(seed: int) -> torch.Generator:
    return _Gen().manual_seed(seed)


class TinyLM(torch.nn.Module):
    """A tiny next-token model of ``torch.nn`` modules, called as the course's GPT is
    (``model(idx (B, T)) -> logits (B, T, vocab)``), with its kinds of parameter (embeddings,
    linear weights and biases, a LayerNorm's gain and bias) and dropout: token and position
    embeddings, one residual MLP (GELU) per position, a final LayerNorm and a linear head.
    It has no attention (a position sees its own token): what a training loop's check needs,
    and no chapter's answer.

    >>> tuple(tiny_lm(0)(torch.zeros(2, 8, dtype=torch.long)).shape)
    (2, 8, 13)
    """

    def __init__(self, vocab: int = 13, block_size: int = 8, d: int = 16,
                 dropout: float = 0.0):
        super().__init__()
        self.block_size = block_size
        self.wte = torch.nn.Embedding(vocab, d)
        self.wpe = torch.nn.Embedding(block_size, d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d, d))
        self.drop = torch.nn.Dropout(dropout)
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.wte(idx) + self.wpe(_arange(idx.shape[1])))
        x = x + self.drop(self.mlp(x))
        return self.head(self.ln(x))


def tiny_lm(seed: int, vocab: int = 13, dropout: float = 0.0) -> TinyLM:
    _manual_seed(seed)
    return TinyLM(vocab, dropout=dropout)


def tiny_params(seed: int, vocab: int = 13, d: int = 16) -> torch.nn.Module:
    """The parameter kinds of a tiny model, built from ``torch.nn`` alone (an embedding, a
    LayerNorm's gain and bias, linear weights with and without bias): what an optimizer
    check steps. It needs nothing of ``transformer_ref``, so it runs in a student kit whose
    reference GPT is left out."""
    _manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Embedding(vocab, d), torch.nn.LayerNorm(d), torch.nn.Linear(d, 2 * d),
        torch.nn.Linear(2 * d, d), torch.nn.Linear(d, vocab, bias=False))


def make_optimizer(model, weight_decay: float, lr: float, betas) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (the course's optimizer, on the CPU).

    >>> opt = make_optimizer(torch.nn.Linear(3, 2), 0.1, 1e-3, (0.9, 0.99))
    >>> [(g["weight_decay"], sum(p.numel() for p in g["params"])) for g in opt.param_groups]
    [(0.1, 6), (0.0, 2)]
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return _AdamW(groups, lr=lr, betas=betas)


def _weights(model) -> torch.Tensor:
    return _cat([p.detach().reshape(-1) for p in model.parameters()])


# ---------------------------------------------------------------- Exercise 3.2
def train_step(step_fn):
    """``run(seed, n_steps, grad_clip, lr, weights=True)``: ``n_steps`` calls of ``step_fn`` on
    one batch of a tiny model -> {"losses": what each call returned, "weights": the parameters
    after the last step, flattened (None when not asked)}."""

    def run(seed, n_steps, grad_clip, lr, weights=True):
        with _enable_grad():  # the diagnosis runs mistakes under no_grad
            model = tiny_lm(seed)
            opt = make_optimizer(model, 0.1, lr, (0.9, 0.99))
            g = gen(seed + 1)
            x = _randint(13, (4, 8), generator=g)
            y = _randint(13, (4, 8), generator=g)
            losses = [step_fn(model, opt, x, y, grad_clip) for _ in range(n_steps)]
        return {"losses": losses, "weights": _weights(model) if weights else None}

    run.__name__ = "train_step"
    return run


# ---------------------------------------------------------------- Exercise 3.3
# torch's own Adam code (torch.optim.AdamW and Adam call it): recorded when it runs
_ADAM_CODE = ("adam", "_single_tensor_adam", "_multi_tensor_adam", "_fused_adam")
_adam_module = sys.modules[torch.optim.Adam.__module__]  # torch/optim/adam.py
_randn = torch.randn
_stack = torch.stack
ADAMW_LAYOUTS = ("groups", "list", "defaults", "schedule", "no_grad")


def adamw(opt_cls):
    """``run(seed, n_steps, lr, betas, eps, weight_decay, layout, grad_scale, lrs)``: an
    optimizer ``opt_cls(...)`` (``torch.optim.AdamW``'s constructor) over the parameters of
    :func:`tiny_params` (a tiny model's kinds of parameter), given seeded random gradients
    (standard normal times ``grad_scale``) for ``n_steps`` calls of ``step()`` ->
    {"weights": the parameters after each step, flattened, ``(n_steps, P)``; "torch_adam":
    whether torch's own Adam code ran}.

    ``layout``: ``"groups"`` (two groups as ``make_optimizer`` builds them: matrices decay
    ``weight_decay``, vectors 0; the constructor also gets ``weight_decay``), ``"list"`` (one
    list of parameters, every argument to the constructor), ``"defaults"`` (one list, no other
    argument), ``"schedule"`` (groups; before step t every group's ``"lr"`` is set to
    ``lrs[t]``, as a schedule does), ``"no_grad"`` (groups; the vectors get no gradient,
    ``p.grad = None``, at every other step)."""

    def run(seed, n_steps, lr, betas, eps, weight_decay, layout="groups", grad_scale=1.0,
            lrs=()):
        model = tiny_params(seed)
        params = [p for p in model.parameters() if p.requires_grad]
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        seen, saved = [], {n: getattr(_adam_module, n) for n in _ADAM_CODE
                           if hasattr(_adam_module, n)}

        def watch(f):
            def watched(*a, **k):
                seen.append(True)
                return f(*a, **k)
            return watched

        for name, f in saved.items():
            setattr(_adam_module, name, watch(f))
        try:
            if layout == "defaults":
                opt = opt_cls(params)
            elif layout == "list":
                opt = opt_cls(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
            else:
                opt = opt_cls([{"params": decay, "weight_decay": weight_decay},
                               {"params": no_decay, "weight_decay": 0.0}],
                              lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
            g = gen(seed + 1)
            weights = []
            for t in range(n_steps):
                for p in params:
                    p.grad = _randn(p.shape, generator=g) * grad_scale
                if layout == "no_grad" and t % 2 == 1:
                    for p in no_decay:
                        p.grad = None
                if layout == "schedule":
                    for group in opt.param_groups:
                        group["lr"] = lrs[t]
                opt.step()
                weights.append(_weights(model))
        finally:
            for name, f in saved.items():
                setattr(_adam_module, name, f)
        builtin = any(getattr(c, "__module__", "").startswith("torch.optim.adam")
                      for c in type(opt).__mro__)
        return {"weights": _stack(weights), "torch_adam": bool(seen) or builtin}

    run.__name__ = "AdamW"
    return run


# ---------------------------------------------------------------- Exercise 4.1
def estimate_loss(eval_fn):
    """``run(seed, batch_size, block_size, eval_iters)``: what ``eval_fn`` returns for a tiny model
    with dropout 0.5 on random tokens; ``run("after", seed)``: the model's mode after a call
    in training mode and after one in eval mode, and whether autograd was on in the forward
    passes (plain booleans)."""

    def run(seed, *rest):
        if seed == "after":
            return _after(eval_fn, *rest)
        batch_size, block_size, eval_iters = rest
        model = tiny_lm(seed, dropout=0.5)
        data = tokens(seed + 1, 400, 13)
        _manual_seed(seed + 2)  # dropout, if (wrongly) left on, draws from here
        return eval_fn(model, data, batch_size, block_size, eval_iters, gen(seed + 3))

    run.__name__ = "estimate_loss"
    return run


def _after(eval_fn, seed: int) -> dict:
    model = tiny_lm(seed, dropout=0.5)
    seen: list = []
    model.register_forward_hook(lambda m, i, o: seen.append(bool(_is_grad_enabled())))
    model.train()
    eval_fn(model, tokens(seed + 1, 200, 13), 2, 8, 2, gen(seed + 2))
    training_after = bool(model.training)
    model.eval()
    eval_fn(model, tokens(seed + 1, 200, 13), 2, 8, 2, gen(seed + 2))
    return {"training_after": training_after, "grad_enabled": list(seen),
            "training_after_eval": bool(model.training)}


# ---------------------------------------------------------------- Exercise 5.1
def checkpoint(save_fn, load_fn):
    """``run(seed, state)``: load ``state`` (a training state: {"model", "optimizer",
    "generator", "step"}) into a tiny model, its AdamW and a generator, ``save_fn`` them, then
    ``load_fn`` into a *different* model, optimizer and generator -> {"step": what load_fn
    returned, "model", "optimizer", "generator": the restored states, "in_place": whether the
    model kept its parameter objects (and the optimizer holds them)}."""

    def run(seed, state):
        state = _deepcopy(state)  # the student's code gets its own tensors, never ours
        model = tiny_lm(seed)
        opt = make_optimizer(model, 0.1, 1e-2, (0.9, 0.99))
        g = _Gen()
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        g.set_state(state["generator"])
        tmp = _mkdtemp(prefix="ckpt-check-")
        try:
            path = _join(tmp, "ckpt.pt")
            save_fn(path, model, opt, state["step"], g)
            model2 = tiny_lm(seed + 100)  # other weights, fresh optimizer, other generator
            opt2 = make_optimizer(model2, 0.1, 1e-2, (0.9, 0.99))
            gen2 = gen(seed + 200)
            params = list(model2.parameters())
            step = load_fn(path, model2, opt2, gen2)
        finally:
            _rmtree(tmp, ignore_errors=True)
        # loaded in place: the model keeps its parameter objects, which the optimizer updates
        after = list(model2.parameters())
        held = [p for group in opt2.param_groups for p in group["params"]]
        in_place = (len(after) == len(params) and all(a is b for a, b in zip(after, params))
                    and len(held) == len(params)
                    and {id(p) for p in held} == {id(p) for p in params})
        return {"step": step, "model": {k: v.detach() for k, v in model2.state_dict().items()},
                "optimizer": opt2.state_dict(), "generator": gen2.get_state(),
                "in_place": bool(in_place)}

    run.__name__ = "save_checkpoint"
    return run


# ---------------------------------------------------------------- Exercise 6.1
def sample_next_token(sample_fn):
    """``run(logits (R, V), temperature, top_k, top_p, seed)``: the ids ``sample_fn`` returns
    for ``N_DRAWS`` copies of each row, drawn with a generator seeded ``seed``."""

    def run(logits, temperature, top_k, top_p, seed):
        rows = logits.repeat_interleave(N_DRAWS, dim=0)  # (R * N, V)
        return sample_fn(rows, temperature=temperature, top_k=top_k, top_p=top_p,
                         generator=gen(seed))

    run.__name__ = "sample_next_token"
    return run


# by the exercise's function, the last part of its check key (autograder/checks/table.py)
DRIVERS = {
    "train_step": train_step,
    "AdamW": adamw,
    "estimate_loss": estimate_loss,
    "checkpoint": checkpoint,
    "sample_next_token": sample_next_token,
}


def probe(key: str, *fns):
    """What a graded kernel's hidden test hands to ``hidden_check(key, ...)``: the student's
    function, or its driver (``None`` if an argument is not callable)."""
    if not fns or not all(callable(f) for f in fns):
        return None
    wrap = DRIVERS.get(key.rpartition(".")[2])
    if wrap is None:
        return fns[0]
    driver = wrap(*fns)
    # the student's function it drives: the probe records the earlier exercises' functions
    # that one calls (``Check.uses``, e.g. train_step -> cross_entropy) for the cascade
    driver.student = fns[0]
    return driver


def graded(key: str, *fns) -> None:
    """Hidden tests in a graded kernel: record the driver's data for ``key``."""
    from autograder.checks._core import hidden_check

    hidden_check(key, probe(key, *fns))
