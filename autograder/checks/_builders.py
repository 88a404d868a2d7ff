"""Input objects that travel to a graded kernel as plain data ("builders").

Some exercises take an object, not only arrays: a ``torch.nn.MultiheadAttention`` whose
weights the student reads (chapter 03), the sublayers a block combines (chapter 05), a GPT
and its KV cache (chapter 06). The grader cannot send an object (``_codec`` carries no
pickle), so such an input is an instance of a class registered here with :func:`builder`:
``_codec`` writes it as the builder's name and the plain-data arguments it was made from
(``plain_args()``: tensors, numbers, strings), and the kernel calls the same class on them.
The in-kernel checks (self-learners) hand the student the very same classes, so both paths
test the same thing. Nothing here is an expected value: this module is part of the graded
kernel's package (and of ``transformer_ref``'s nothing: it imports only torch).

>>> from autograder.checks import _codec
>>> m = MultiheadAttention(torch.eye(6, 2, dtype=torch.float64), torch.eye(2).double(), 1)
>>> copy = _codec.loads(_codec.dumps(m))
>>> type(copy).__name__, torch.equal(copy.in_proj_weight, m.in_proj_weight)
('MultiheadAttention', True)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn as nn

BUILDERS: dict[str, Callable] = {}  # builder name -> the class (called on the plain args)
BUILT_TYPES: dict[type, str] = {}  # the exact class -> its builder name


def builder(name: str):
    """Register a class whose instances ``_codec`` carries as ``(name, plain_args())``."""

    def register(cls):
        BUILDERS[name] = cls
        BUILT_TYPES[cls] = name
        return cls

    return register


def _tensor(x, what: str, dim: int) -> torch.Tensor:
    """A plain floating tensor of ``dim`` dimensions (a builder's argument), else ValueError."""
    if type(x) is not torch.Tensor or x.dim() != dim or not x.is_floating_point():
        raise ValueError(f"{what} should be a {dim}-d floating tensor")
    return x


# ---------------------------------------------------------------- chapter 02 (masking)
_MASKS = {
    "causal": lambda T: torch.ones(T, T, dtype=torch.bool).tril(),
    "none": lambda T: None,
    "one step ahead": lambda T: torch.ones(T, T, dtype=torch.bool).tril(1),
}


@builder("masking.attention_layer")
class AttentionLayer:
    """A fixed attention layer x -> softmax(x W_Q (x W_K)ᵀ / sqrt(d) + M) x W_V, where M
    drops what the mask kind forbids: the ``f`` of chapter 02's Exercises 4.1 and 4.2.

    >>> W = torch.eye(2)
    >>> f = AttentionLayer("causal_layer", "causal", W, 2 * W, 3 * W)
    >>> x = torch.arange(6.0).reshape(3, 2)
    >>> from autograder.checks import _codec
    >>> copy = _codec.loads(_codec.dumps(f))
    >>> type(copy).__name__, repr(copy), torch.equal(copy(x), f(x))
    ('AttentionLayer', 'causal_layer', True)
    """

    def __init__(self, name, mask, W_Q, W_K, W_V):
        if type(name) is not str or mask not in _MASKS:
            raise ValueError(f"unknown mask kind {mask!r}")
        self.name, self.mask = name, mask
        self.W = tuple(_tensor(W, "a weight", 2) for W in (W_Q, W_K, W_V))  # each (d, d)

    def plain_args(self) -> tuple:
        return (self.name, self.mask, *self.W)

    def __call__(self, x):  # (..., T, d) -> (..., T, d)
        W_Q, W_K, W_V = self.W
        q, k, v = x @ W_Q, x @ W_K, x @ W_V
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, T)
        keep = _MASKS[self.mask](x.shape[-2])
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    def __repr__(self):
        return self.name


# ---------------------------------------------------------------- chapter 03 (mha)
@builder("mha.torch_multihead_attention")
class MultiheadAttention(nn.MultiheadAttention):
    """``torch.nn.MultiheadAttention(d_model, n_head, bias=False, batch_first=True)`` holding
    the given weights: the input of chapter 03's Exercise 5.1 (it *is* torch's class)."""

    def __init__(self, in_proj_weight, out_proj_weight, n_head):
        W_in = _tensor(in_proj_weight, "in_proj_weight", 2)  # (3 d_model, d_model)
        W_out = _tensor(out_proj_weight, "out_proj_weight", 2)  # (d_model, d_model)
        d = W_out.shape[0]
        if type(n_head) is not int or not 0 < n_head <= d or d % n_head or d > 4096 \
                or W_in.shape != (3 * d, d) or W_out.shape != (d, d):
            raise ValueError("inconsistent multi-head attention shapes")
        super().__init__(d, n_head, bias=False, batch_first=True, dtype=W_in.dtype)
        with torch.no_grad():
            self.in_proj_weight.copy_(W_in)
            self.out_proj.weight.copy_(W_out)

    def plain_args(self) -> tuple:
        return (self.in_proj_weight.detach().clone(), self.out_proj.weight.detach().clone(),
                self.num_heads)
