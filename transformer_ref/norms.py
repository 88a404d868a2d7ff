"""Layer normalization and RMS normalization, written out from the formulas.

LayerNorm (Ba et al., 2016), per token over the feature axis (the last one):

    LN(x) = gamma * (x - mu) / sqrt(var + eps) + beta
    mu  = mean_i x_i,   var = mean_i (x_i - mu)^2      (biased: divide by d, not d - 1)

``gamma`` and ``beta`` are *vectors* in R^d (one scale and shift per feature), as in
``torch.nn.LayerNorm``; the lecture notes [S1] write a scalar gamma, which is the special
case of a
constant vector. ``eps`` sits *inside* the square root.

RMSNorm (Zhang & Sennrich, 2019) drops the centring and the shift:

    RMSNorm(x) = gamma * x / sqrt(mean_i x_i^2 + eps)
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["layer_norm", "rms_norm", "LayerNorm", "RMSNorm", "make_norm"]


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5) -> torch.Tensor:
    """``weight * (x - mean) / sqrt(var + eps) + bias`` over the last axis (biased variance).

    >>> layer_norm(torch.tensor([1.0, 3.0]))
    tensor([-1.0000,  1.0000])
    """
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
    y = (x - mu) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x, weight=None, eps: float = 1e-6) -> torch.Tensor:
    """``weight * x / sqrt(mean(x^2) + eps)`` over the last axis.

    >>> rms_norm(torch.tensor([3.0, -3.0]), eps=0.0)
    tensor([ 1., -1.])
    """
    y = x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)
    return y if weight is None else y * weight


class LayerNorm(nn.Module):
    """LayerNorm over the last axis with learnable vector ``weight`` (gamma) and ``bias`` (beta).

    ``bias=False`` drops beta (as nanoGPT allows). Same parameters and result as
    ``torch.nn.LayerNorm(d, eps)``. ``fused=True`` computes it with PyTorch's one-kernel
    ``F.layer_norm`` instead of the formula of :func:`layer_norm` (the same values up to
    rounding; the training presets use it, as they use SDPA for attention: on a CPU the
    written-out form's elementwise kernels cost about 12% of a training step).

    >>> LayerNorm(2)(torch.tensor([[0.0, 2.0]]))
    tensor([[-1.0000,  1.0000]], grad_fn=<AddBackward0>)
    """

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True, fused: bool = False):
        super().__init__()
        self.eps, self.fused = eps, fused
        self.weight = nn.Parameter(torch.ones(d))  # gamma, (d,)
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None  # beta, (d,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.weight.shape[0]}, eps={self.eps}, bias={self.bias is not None}"
                + (", fused" if self.fused else ""))


class RMSNorm(nn.Module):
    """RMSNorm over the last axis with a learnable vector ``weight`` (gamma).

    ``eps`` defaults to 1e-6 (``torch.nn.RMSNorm`` defaults to the dtype's machine epsilon;
    pass ``eps`` explicitly to both when comparing).

    >>> RMSNorm(2, eps=0.0)(torch.tensor([[2.0, 2.0]]))
    tensor([[1., 1.]], grad_fn=<MulBackward0>)
    """

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))  # gamma, (d,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def make_norm(kind: str, d: int, bias: bool = True, eps: float | None = None,
              fused: bool = False) -> nn.Module:
    """``"layer"`` -> :class:`LayerNorm` (``fused``: PyTorch's kernel), ``"rms"`` ->
    :class:`RMSNorm` (RMSNorm has no bias).

    >>> type(make_norm("rms", 4)).__name__
    'RMSNorm'
    """
    if kind == "layer":
        return LayerNorm(d, eps=1e-5 if eps is None else eps, bias=bias, fused=fused)
    if kind == "rms":
        return RMSNorm(d, eps=1e-6 if eps is None else eps)
    raise ValueError(f"norm must be 'layer' or 'rms', got {kind!r}")
