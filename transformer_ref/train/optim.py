"""AdamW written out (Loshchilov & Hutter, 2019): the reference of notebook 08's Exercise 3.3.

The trainer uses ``torch.optim.AdamW`` (fused on CUDA); this class is the same update in plain
tensor operations, with ``torch.optim.AdamW``'s constructor, for each parameter ``p`` with a
gradient ``g`` at its ``t``-th step (learning rate ``lr`` and the rest from ``p``'s group):

    m <- beta1 m + (1 - beta1) g            v <- beta2 v + (1 - beta2) g²
    p <- p (1 - lr weight_decay)            (decoupled weight decay)
    p <- p - lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)

>>> _ = torch.manual_seed(0); a = torch.nn.Linear(3, 2); b = copy.deepcopy(a)
>>> groups = lambda m: [{"params": [m.weight], "weight_decay": 0.1},
...                     {"params": [m.bias], "weight_decay": 0.0}]
>>> ours, theirs = AdamW(groups(a), lr=0.1), torch.optim.AdamW(groups(b), lr=0.1)
>>> for _ in range(3):
...     for m, opt in ((a, ours), (b, theirs)):
...         opt.zero_grad(); m(torch.ones(1, 3)).pow(2).sum().backward(); opt.step()
>>> all(torch.allclose(p, q, atol=1e-7) for p, q in zip(a.parameters(), b.parameters()))
True
"""

from __future__ import annotations

import copy  # noqa: F401 - the doctest's

import torch

__all__ = ["AdamW"]


class AdamW(torch.optim.Optimizer):
    """``torch.optim.AdamW``'s update (no amsgrad, no maximize), written out."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                  "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:  # no gradient this step: no decay, state unchanged
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t, m, v, g = state["step"], state["exp_avg"], state["exp_avg_sq"], p.grad
                p.mul_(1 - lr * weight_decay)
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                denom = (v / (1 - beta2**t)).sqrt().add_(eps)
                p.addcdiv_(m, denom, value=-lr / (1 - beta1**t))
        return loss
