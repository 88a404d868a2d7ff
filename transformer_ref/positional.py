"""Positional information: sinusoidal, learned, and rotary (RoPE).

Sinusoidal (Vaswani et al., 2017, section 3.5), added to the token embeddings:

    PE[pos, 2i]   = sin(pos / base^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / base^(2i / d_model)),        base = 10000

Learned (GPT-2): a trainable table ``wpe`` of shape ``(max_len, d_model)``, also added.

Rotary (RoPE, Su et al., 2021, "RoFormer") is not added to the embeddings: it rotates each
query and key *inside attention*, so that the score ``<rope(q, m), rope(k, n)>`` depends on
positions only through ``m - n``. Per head, feature pairs are rotated by the angle
``m * theta_i`` with ``theta_i = base^(-2i / d_k)``:

    (x_a, x_b) -> (x_a cos(m theta_i) - x_b sin(m theta_i),
                   x_a sin(m theta_i) + x_b cos(m theta_i))

**Pairing convention.** Which two features form pair i is a convention that differs between
codebases, and checkpoints are not interchangeable between them:

- ``"interleaved"`` (our default; the RoFormer paper's block-diagonal matrix, and Meta's
  original LLaMA code): pair i is features ``(2i, 2i + 1)``.
- ``"half"`` (GPT-NeoX, Hugging Face LLaMA): pair i is features ``(i, i + d_k/2)``
  ("rotate_half").

The two are the same rotation after permuting the features of q and k.
"""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = [
    "sinusoidal_encoding",
    "SinusoidalPositionalEmbedding",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "apply_rope",
]


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """``(max_len, d_model)`` table of Vaswani's sinusoids (sin on even, cos on odd features).

    >>> sinusoidal_encoding(2, 4)
    tensor([[0.0000, 1.0000, 0.0000, 1.0000],
            [0.8415, 0.5403, 0.0100, 0.9999]])
    """
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),)
    angle = pos / base ** (two_i / d_model)  # (T, ceil(d/2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # odd d_model: one fewer cos column
    return pe.to(torch.get_default_dtype())


class SinusoidalPositionalEmbedding(nn.Module):
    """Fixed sinusoidal table; ``forward(positions)`` returns ``PE[positions]``.

    >>> SinusoidalPositionalEmbedding(16, 4)(torch.arange(3)).shape
    torch.Size([3, 4])
    """

    def __init__(self, max_len: int, d_model: int, base: float = 10000.0):
        super().__init__()
        # Not a parameter and not saved in the state dict: it is recomputed from the formula.
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:  # (T,) -> (T, d_model)
        return self.pe[positions]


class LearnedPositionalEmbedding(nn.Embedding):
    """A trainable ``(max_len, d_model)`` table (GPT-2's ``wpe``); ``forward(positions)``.

    >>> LearnedPositionalEmbedding(16, 4)(torch.arange(3)).shape
    torch.Size([3, 4])
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__(max_len, d_model)


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str = "interleaved"
) -> torch.Tensor:
    """Rotate feature pairs of ``x (..., T, d_k)`` by angles with ``cos, sin`` of ``(T, d_k/2)``.

    >>> x = torch.tensor([[1.0, 0.0]])  # one position, one pair
    >>> apply_rope(x, torch.zeros(1, 1), torch.ones(1, 1))  # rotate by 90 degrees
    tensor([[0., 1.]])
    """
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if pairing == "interleaved":
        xa, xb = x[..., 0::2], x[..., 1::2]  # (..., T, d_k/2) each: pairs (2i, 2i+1)
    elif pairing == "half":
        xa, xb = x.chunk(2, dim=-1)  # pairs (i, i + d_k/2)
    else:
        raise ValueError(f"pairing must be 'interleaved' or 'half', got {pairing!r}")
    ya = xa * cos - xb * sin
    yb = xa * sin + xb * cos
    if pairing == "interleaved":
        return torch.stack((ya, yb), dim=-1).flatten(-2)  # back to (2i, 2i+1) order
    return torch.cat((ya, yb), dim=-1)


class RotaryEmbedding(nn.Module):
    """RoPE for heads of size ``d_k`` (even), positions ``0 .. max_len - 1``.

    ``forward(x, positions)`` rotates ``x (..., T, d_k)`` where ``positions (T,)`` are the
    absolute positions of those T rows (with a KV cache they continue from the cache length),
    or ``(B, T)`` per sequence for ``x (B, H, T, d_k)``. ``base`` is RoPE's theta.

    >>> rope = RotaryEmbedding(4, max_len=8)
    >>> q = torch.randn(1, 2, 3, 4)
    >>> torch.allclose(rope(q, torch.arange(3)).norm(dim=-1), q.norm(dim=-1))  # a rotation
    True
    """

    def __init__(
        self, d_k: int, max_len: int, base: float = 10000.0, pairing: str = "interleaved"
    ):
        super().__init__()
        if d_k % 2:
            raise ValueError(f"RoPE needs an even head size, got d_k={d_k}")
        self.pairing = pairing
        theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # (d_k/2,)
        angle = torch.arange(max_len, dtype=torch.float64)[:, None] * theta  # (max_len, d_k/2)
        # float64 tables (cast to the input's dtype on use), so a float64 model rotates exactly
        self.register_buffer("cos", torch.cos(angle), persistent=False)
        self.register_buffer("sin", torch.sin(angle), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x (..., T, d_k)``; ``positions`` is ``(T,)`` (shared by the whole batch) or,
        for ``x (B, H, T, d_k)``, ``(B, T)`` (one row per sequence). Any other shape is refused:
        a ``(B, T)`` table indexed as-is would broadcast its batch axis against the heads."""
        T = x.shape[-2]
        if positions.dim() == 1 and positions.shape[0] == T:
            cos, sin = self.cos[positions], self.sin[positions]  # (T, d_k/2)
        elif positions.dim() == 2 and x.dim() == 4 and positions.shape[1] == T and (
            positions.shape[0] in (1, x.shape[0])
        ):
            cos = self.cos[positions][:, None]  # (B, 1, T, d_k/2): one row per sequence
            sin = self.sin[positions][:, None]
        else:
            raise ValueError(
                f"RoPE positions must have shape (T,) = ({T},), or (B, T) = "
                f"({x.shape[0] if x.dim() == 4 else 'B'}, {T}) for x of shape (B, H, T, d_k); "
                f"got positions {tuple(positions.shape)} for x {tuple(x.shape)}")
        return apply_rope(x, cos, sin, self.pairing)
