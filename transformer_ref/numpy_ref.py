"""NumPy versions of softmax, attention and layer norm (the first notebooks start here).

Same conventions as the torch modules: row vectors, softmax over the last axis, boolean
masks True = keep, fully masked rows give zeros.
"""

from __future__ import annotations

import numpy as np

__all__ = ["softmax", "scaled_dot_product_attention", "layer_norm"]


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Stable softmax along ``axis``; all ``-inf`` slices give zeros.

    >>> softmax(np.array([0.0, np.log(3.0)]))
    array([0.25, 0.75])
    """
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(s == 0, 1.0, s)


def scaled_dot_product_attention(q, k, v, mask=None, scale=None, return_weights=False):
    """``softmax(q k^T * scale + mask) v``; ``scale=None`` means ``1/sqrt(d_k)``.

    >>> out = scaled_dot_product_attention(np.eye(2), np.eye(2), np.eye(2), scale=1.0)
    >>> np.round(out, 4).tolist()  # a list: numpy's print options (a notebook's) do not apply
    [[0.7311, 0.2689], [0.2689, 0.7311]]
    """
    q, k, v = (np.asarray(a) for a in (q, k, v))
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    scores = (q @ np.swapaxes(k, -1, -2)) * scale  # (..., T_q, T_k)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype == bool:
            scores = np.where(mask, scores, -np.inf)
        else:
            scores = scores + mask
    w = softmax(scores, axis=-1)
    out = w @ v  # (..., T_q, d_v)
    return (out, w) if return_weights else out


def layer_norm(x, gamma=None, beta=None, eps: float = 1e-5):
    """``gamma * (x - mean) / sqrt(var + eps) + beta`` over the last axis (biased variance).

    >>> np.round(layer_norm(np.array([1.0, 3.0])), 3)
    array([-1.,  1.])
    """
    x = np.asarray(x)
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)  # biased: divides by d, like torch.nn.LayerNorm
    y = (x - mu) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y
