"""Attention masks as boolean *keep* masks (True = the query may attend to the key).

All masks broadcast to ``(B, H, T_q, T_k)``. Convert to [S4]'s additive form
(0 / -inf) with :func:`transformer_ref.attention.mask_to_additive`.

Padding is a property of *keys*: a padded position must not be attended to, so padding
masks have shape ``(B, 1, 1, T_k)`` and broadcast over heads and queries.
"""

from __future__ import annotations

import torch

__all__ = [
    "causal_mask",
    "padding_mask_from_lengths",
    "padding_mask_from_ids",
    "combine_masks",
]


def causal_mask(T_q: int, T_k: int | None = None, device=None) -> torch.Tensor:
    """``(T_q, T_k)`` lower-triangular keep mask: query i sees keys j <= i + (T_k - T_q).

    The offset lets the last T_q queries of a longer sequence (KV-cache decoding) see
    every earlier key.

    >>> causal_mask(3).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    """
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(diagonal=T_k - T_q)


def padding_mask_from_lengths(lengths, T_k: int | None = None, device=None) -> torch.Tensor:
    """``(B, 1, 1, T_k)`` keep mask from true sequence lengths.

    >>> padding_mask_from_lengths(torch.tensor([2, 3]), 3)[:, 0, 0].int()
    tensor([[1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    """
    lengths = torch.as_tensor(lengths, device=device)
    T_k = int(lengths.max()) if T_k is None else T_k
    pos = torch.arange(T_k, device=lengths.device)
    keep = pos[None, :] < lengths[:, None]  # (B, T_k)
    return keep[:, None, None, :]


def padding_mask_from_ids(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``(B, 1, 1, T)`` keep mask that is False wherever ``ids == pad_id``.

    >>> padding_mask_from_ids(torch.tensor([[5, 7, 0]]), pad_id=0)[:, 0, 0].int()
    tensor([[1, 1, 0]], dtype=torch.int32)
    """
    return (ids != pad_id)[:, None, None, :]


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of keep masks (``None`` entries ignored), broadcast together.

    >>> combine_masks(causal_mask(2), torch.tensor([True, False])).int()
    tensor([[1, 0],
            [1, 0]], dtype=torch.int32)
    """
    out = None
    for m in masks:
        if m is None:
            continue
        out = m if out is None else (out & m)
    return out
