"""Softmax and attention, written out from the formulas.

Notation (the course's one notation): row vectors. A sequence of n tokens is a matrix
``X`` of shape ``(n, d)``; queries ``Q = X W_Q`` are ``(T_q, d_k)``, keys ``K`` are
``(T_k, d_k)``, values ``V`` are ``(T_k, d_v)``, and the softmax runs over the keys
(the last axis), so every row of the attention matrix sums to one:

    Attention(Q, K, V) = softmax(Q K^T * scale + M) V,   scale = 1 / sqrt(d_k)

The lecture notes [S1] and the wiki page [S3] leave the scores unscaled
(``scale=1.0``); the tutorial [S2] and the survey [S4] divide by
sqrt(d_k) (the default). The lecture notes [S1] write the same thing with column vectors,
normalising
over the *first* index: see :func:`column_form_self_attention`.

Masks follow PyTorch's ``F.scaled_dot_product_attention``: a boolean mask is True where a
query MAY attend to a key; a floating mask is added to the scores (0 keeps, -inf drops, as
in [S4]'s ``[0, 0, -inf, -inf]``). A query whose keys are all masked gets
attention
weights of exactly zero, hence an output of zero, never NaN.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "cosine_similarity_attention",
    "column_form_self_attention",
    "mask_to_additive",
]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax: ``exp(x - max) / sum(exp(x - max))``.

    Subtracting the row maximum changes nothing mathematically (it cancels) but keeps
    ``exp`` from overflowing. A slice that is entirely ``-inf`` (a fully masked row)
    returns zeros instead of NaN.

    >>> softmax(torch.tensor([1000.0, 1000.0]))
    tensor([0.5000, 0.5000])
    """
    x_max = x.amax(dim=dim, keepdim=True)
    # A fully masked row has max = -inf; shift by 0 instead so exp gives 0, not NaN.
    x_max = torch.where(torch.isfinite(x_max), x_max, torch.zeros_like(x_max))
    e = torch.exp(x - x_max)
    denom = e.sum(dim=dim, keepdim=True)
    # Where every entry was -inf the sum is 0: divide by 1 so the row stays all-zero.
    return e / torch.where(denom == 0, torch.ones_like(denom), denom)


def mask_to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Boolean keep-mask (True = may attend) -> additive mask (0 where kept, -inf where dropped).

    >>> mask_to_additive(torch.tensor([True, True, False]))
    tensor([0., 0., -inf])
    """
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return out.masked_fill(~mask, float("-inf"))


def _apply_mask(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    return scores + mask.to(scores.dtype)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    return_weights: bool = False,
    dropout_p: float = 0.0,
):
    """``softmax(q k^T * scale + mask) v`` over any leading (batch, head, ...) dimensions.

    Shapes: q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)``;
    mask broadcastable to ``(..., T_q, T_k)``. Returns ``(..., T_q, d_v)`` and, with
    ``return_weights=True``, also the weights ``(..., T_q, T_k)``.

    ``scale=None`` uses ``1/sqrt(d_k)`` (the tutorial [S2] and the survey [S4]);
    pass ``scale=1.0`` for the
    unscaled form of the lecture notes [S1] and the wiki page [S3]. ``dropout_p > 0``
    drops attention weights (training
    only; the returned weights are the ones before dropout).

    >>> q = k = v = torch.eye(2)
    >>> scaled_dot_product_attention(q, k, v, scale=1.0).round(decimals=4)
    tensor([[0.7311, 0.2689],
            [0.2689, 0.7311]])
    """
    d_k = q.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T_q, T_k)
    scores = _apply_mask(scores, mask)
    weights = softmax(scores, dim=-1)  # rows sum to 1 (or are all 0 if fully masked)
    dropped = torch.nn.functional.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = dropped @ v  # (..., T_q, d_v)
    return (out, weights) if return_weights else out


def cosine_similarity_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    temperature: float = 1.0,
    eps: float = 1e-8,
    return_weights: bool = False,
):
    """Attention with cosine-similarity scores (the blog post [S5]): ``cos(q_i, k_j)
    / temperature``.

    ``cos(q, k) = q.k / (|q| |k|)``, so every score lies in [-1, 1] whatever the size of
    d_k; ``eps`` guards zero vectors.

    >>> e = torch.eye(2)
    >>> w = cosine_similarity_attention(e, e, e, return_weights=True)[1]
    >>> w.round(decimals=4)
    tensor([[0.7311, 0.2689],
            [0.2689, 0.7311]])
    """
    qn = q / q.norm(dim=-1, keepdim=True).clamp_min(eps)
    kn = k / k.norm(dim=-1, keepdim=True).clamp_min(eps)
    return scaled_dot_product_attention(
        qn, kn, v, mask=mask, scale=1.0 / temperature, return_weights=return_weights
    )


def column_form_self_attention(
    X_cols: torch.Tensor,
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    return_weights: bool = False,
):
    """[S1]'s self-attention, literally, with tokens as *columns*.

    ``X_cols`` is ``(d, n)``: column j is token x_j. ``Q, K, V`` are ``(d', d)``.

        A_ij = exp(x_i^T K^T Q x_j) / sum_k exp(x_k^T K^T Q x_j)      (softmax over i)
        y_j  = sum_i A_ij V x_i

    Returns ``Y`` of shape ``(d', n)`` (column j is y_j) and optionally ``A`` ``(n, n)``,
    whose *columns* sum to one. It is the row form transposed: with ``X = X_cols^T``,
    ``W_Q = Q^T`` etc., ``A = (softmax_rows(X W_Q (X W_K)^T))^T`` and ``Y = (A^T X W_V)^T``
    -- [S1]'s A_ij is the weight query j gives key i, unscaled.
    """
    S = (K @ X_cols).transpose(0, 1) @ (Q @ X_cols)  # S_ij = x_i^T K^T Q x_j, (n, n)
    A = softmax(S, dim=0)  # normalise over i: every column sums to 1
    Y = (V @ X_cols) @ A  # y_j = sum_i A_ij V x_i, (d', n)
    return (Y, A) if return_weights else Y
