"""Position-wise feed-forward network (Vaswani et al., 2017, section 3.3; the tutorial [S2]).

The same two-layer MLP is applied to every token independently:

    FFN(x)        = act(x W_1 + b_1) W_2 + b_2            act = ReLU (paper) or GELU (GPT-2)
    FFN_SwiGLU(x) = (SiLU(x W_1) * (x W_3)) W_2           (Shazeer, 2020, "GLU variants")

``W_1 in R^{d_model x d_ff}`` expands, ``W_2 in R^{d_ff x d_model}`` contracts back;
``d_ff = 4 * d_model`` by default (also for SwiGLU: the same default for every activation, so
SwiGLU then has 1.5x the parameters; pass ``d_ff`` to change it). Because it acts per
position, it is exactly a ``Conv1d`` with kernel size 1 over the sequence axis (the row-form
tutorial's
"1x1 convolution" remark; see ``tests/unit/test_ref_ffn.py``).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["FeedForward", "ACTIVATIONS", "feed_forward"]

ACTIVATIONS = ("relu", "gelu", "swiglu")


class FeedForward(nn.Module):
    """``act(x W_1 + b_1) W_2 + b_2`` (or SwiGLU), acting on the last axis.

    Linear layers hold weights as ``(out, in)`` like ``nn.Linear``, so ``x W_1`` is
    ``x @ w1.weight.T``. GELU is the exact (erf) form, as in ``torch.nn.GELU()``.

    >>> ffn = FeedForward(8)
    >>> ffn.w1.out_features, ffn(torch.zeros(2, 3, 8)).shape
    (32, torch.Size([2, 3, 8]))
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int | None = None,
        activation: str = "gelu",
        bias: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.activation = activation
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)  # W_1: expand
        self.w3 = nn.Linear(d_model, d_ff, bias=bias) if activation == "swiglu" else None  # gate
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)  # W_2: contract
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (..., d_model)
        h = self.w1(x)  # (..., d_ff)
        if self.activation == "relu":
            h = F.relu(h)
        elif self.activation == "gelu":
            h = F.gelu(h)
        else:  # swiglu: Swish_1(x W_1) elementwise-times x W_3
            h = F.silu(h) * self.w3(x)
        return self.dropout(self.w2(h))  # (..., d_model)


def feed_forward(x, W1, b1, W2, b2, activation="relu"):
    """Functional FFN with row-form weights: ``act(x W1 + b1) W2 + b2``, act ReLU or exact GELU.

    >>> feed_forward(torch.tensor([[1.0, -1.0]]), torch.eye(2), torch.zeros(2), torch.eye(2),
    ...              torch.zeros(2))
    tensor([[1., 0.]])
    """
    h = x @ W1 + b1
    h = F.relu(h) if activation == "relu" else F.gelu(h)
    return h @ W2 + b2
