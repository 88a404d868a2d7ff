"""Right answers to notebook 01's exercises, written out here as a student would.

The checks switch transformer_ref off while they run (calling it is not building it), so
tests that need a correct or a deliberately broken implementation start from these.
"""

import math

import numpy as np
import torch


def np_softmax(x, axis=-1):
    """Stable softmax along ``axis``; an all -inf slice gives zeros.

    >>> np_softmax(np.array([0.0, np.log(3.0)])).tolist()
    [0.25, 0.75]
    """
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0).astype(x.dtype))
    s = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(s == 0, 1, s).astype(x.dtype)


def t_softmax(x, dim=-1):
    """The same in torch.

    >>> t_softmax(torch.tensor([[0.0, float("-inf")], [float("-inf")] * 2])).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    m = x.amax(dim=dim, keepdim=True)
    e = torch.exp(x - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


def scores(Q, K):
    return Q @ np.swapaxes(K, -1, -2)


def self_attention(X, W_Q, W_K, W_V):
    return np_softmax(scores(X @ W_Q, X @ W_K)) @ (X @ W_V)


def variance(d_k, n, rng):
    q, k = rng.standard_normal((n, d_k)), rng.standard_normal((n, d_k))
    return float(np.var((q * k).sum(-1)))


def sdpa(q, k, v, mask=None, scale=None):
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return t_softmax(s) @ v


def column(X, Q, K, V):
    A = t_softmax((K @ X).T @ (Q @ X), dim=0)
    return (V @ X) @ A, A


def cosine(q, k, v, mask=None, temperature=1.0, eps=1e-8):
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(eps)
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(eps)
    return sdpa(q, k, v, mask=mask, scale=1 / temperature)


def dominance(w):
    return (w.argmax(-1) == torch.arange(w.shape[-1])).double().mean().item()
