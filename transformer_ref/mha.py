"""Multi-head attention (Vaswani et al., 2017, section 3.2.2; the lecture notes [S1], the
tutorial [S2] and the blog post [S5]).

    head_h       = Attention(X_q W_Q^h, X_kv W_K^h, X_kv W_V^h)          h = 1 .. H
    MultiHead    = Concat(head_1, ..., head_H) W_O

Each head works in ``d_k = d_model / H`` dimensions, so all heads together cost about as
much as one full-width head. Self-attention uses ``X_kv = X_q``; cross-attention (decoder
attending to the encoder) takes queries from the decoder and keys/values from the encoder
output ("memory").

Configurations:

- separate ``q_proj, k_proj, v_proj`` (default) or one fused ``qkv_proj`` whose weight is the
  three stacked, ``[W_Q; W_K; W_V]`` -- the layout of ``nn.MultiheadAttention.in_proj_weight``;
- ``bias`` on or off for all projections;
- ``output_projection=False`` with ``scale=1.0``: [S1]'s MSA, the heads
concatenated with
  no ``W_O`` and unscaled scores (see :meth:`MultiHeadAttention.seed000_msa`);
- ``attn_impl="scratch"`` (:func:`transformer_ref.attention.scaled_dot_product_attention`) or
  ``"sdpa"`` (``torch.nn.functional.scaled_dot_product_attention``, which may use a fused
  flash kernel on GPU).

Masks are *keep* masks (True = may attend) or additive float masks, broadcastable to
``(B, H, T_q, T_k)`` -- the opposite of ``nn.MultiheadAttention``'s boolean convention,
where True means "masked out".
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_ref.attention import mask_to_additive, scaled_dot_product_attention
from transformer_ref.masks import causal_mask

__all__ = ["MultiHeadAttention", "LayerKVCache", "merge_causal", "multi_head_attention"]


class LayerKVCache:
    """Keys and values of one attention layer seen so far, ``(B, H, T_past, d_k)`` each.

    >>> c = LayerKVCache()
    >>> k, v = c.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    >>> c.length, k.shape[-2]
    (3, 3)
    """

    def __init__(self):
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def update(self, k: torch.Tensor, v: torch.Tensor):
        """Append the new ``k, v`` (along the time axis) and return all keys and values."""
        self.k = k if self.k is None else torch.cat((self.k, k), dim=-2)  # (B, H, T_past+T, d_k)
        self.v = v if self.v is None else torch.cat((self.v, v), dim=-2)
        return self.k, self.v


def merge_causal(mask: torch.Tensor | None, T_q: int, T_k: int, device, dtype) -> torch.Tensor:
    """Combine ``mask`` (keep or additive) with the causal mask for T_q queries, T_k keys.

    The causal mask is aligned bottom-right: query i is position ``T_k - T_q + i``.

    >>> merge_causal(None, 1, 3, None, torch.float32).int()
    tensor([[1, 1, 1]], dtype=torch.int32)
    """
    causal = causal_mask(T_q, T_k, device=device)  # (T_q, T_k)
    if mask is None:
        return causal
    if mask.dtype == torch.bool:
        return mask & causal
    return mask.to(dtype) + mask_to_additive(causal, dtype)


class MultiHeadAttention(nn.Module):
    """Multi-head (self- or cross-) attention on batch-first inputs ``(B, T, d_model)``.

    >>> mha = MultiHeadAttention(d_model=8, n_head=2)
    >>> mha(torch.randn(3, 5, 8)).shape
    torch.Size([3, 5, 8])
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        bias: bool = True,
        fused_qkv: bool = False,
        output_projection: bool = True,
        d_k: int | None = None,
        scale: float | None = None,
        dropout: float = 0.0,
        attn_impl: str = "scratch",
    ):
        super().__init__()
        if d_k is None:
            if d_model % n_head:
                raise ValueError(f"d_model={d_model} is not divisible by n_head={n_head}")
            d_k = d_model // n_head
        if attn_impl not in ("scratch", "sdpa"):
            raise ValueError(f"attn_impl must be 'scratch' or 'sdpa', got {attn_impl!r}")
        self.d_model, self.n_head, self.d_k = d_model, n_head, d_k
        self.scale, self.dropout, self.attn_impl = scale, dropout, attn_impl
        inner = n_head * d_k  # width of the concatenated heads
        if fused_qkv:
            self.qkv_proj = nn.Linear(d_model, 3 * inner, bias=bias)  # [W_Q; W_K; W_V]
        else:
            self.q_proj = nn.Linear(d_model, inner, bias=bias)  # W_Q, all heads side by side
            self.k_proj = nn.Linear(d_model, inner, bias=bias)  # W_K
            self.v_proj = nn.Linear(d_model, inner, bias=bias)  # W_V
        self.fused_qkv = fused_qkv
        self.out_proj = nn.Linear(inner, d_model, bias=bias) if output_projection else None  # W_O

    @classmethod
    def seed000_msa(cls, d: int, H: int, d_prime: int | None = None) -> MultiHeadAttention:
        """[S1]'s MSA(d, H): H unscaled heads with ``Q_h, K_h, V_h in
        R^{d' x d}``, no bias,
        outputs concatenated (``H * d'`` features, ``d' = d / H`` by default), no ``W_O``."""
        return cls(d, H, bias=False, output_projection=False, d_k=d_prime, scale=1.0)

    # --- projections -------------------------------------------------------------------
    def _project(self, x_q: torch.Tensor, x_kv: torch.Tensor):
        if not self.fused_qkv:
            return self.q_proj(x_q), self.k_proj(x_kv), self.v_proj(x_kv)
        if x_kv is x_q:  # self-attention: one matmul, then split
            return self.qkv_proj(x_q).split(self.n_head * self.d_k, dim=-1)
        w_q, w_k, w_v = self.qkv_proj.weight.chunk(3, dim=0)
        b = self.qkv_proj.bias
        b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3, dim=0)
        return F.linear(x_q, w_q, b_q), F.linear(x_kv, w_k, b_k), F.linear(x_kv, w_v, b_v)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, H*d_k) -> (B, H, T, d_k)
        B, T, _ = x.shape
        return x.view(B, T, self.n_head, self.d_k).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        cache: LayerKVCache | None = None,
        rope=None,
        positions: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """``x (B, T_q, d_model)``; ``context (B, T_k, d_model)`` for cross-attention.

        ``mask``: keep (bool) or additive, broadcastable to ``(B, H, T_q, T_k)``.
        ``is_causal``: add the causal mask (bottom-right aligned, so it is right with a cache).
        ``cache``: a :class:`LayerKVCache`; the new keys/values are appended to it.
        ``rope, positions``: a :class:`~transformer_ref.positional.RotaryEmbedding` applied
        to q and k at absolute ``positions (T_q,)`` or ``(B, T_q)`` (self-attention only).
        Returns ``(B, T_q, d_model)``, and with ``need_weights`` also ``(B, H, T_q, T_k)``.
        """
        B, T_q, _ = x.shape
        x_kv = x if context is None else context
        q, k, v = self._project(x, x_kv)  # (B, T, H*d_k) each
        q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)  # (B,H,T,d_k)
        if rope is not None:
            q, k = rope(q, positions), rope(k, positions)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, T_past + T_q, d_k)
        T_k = k.shape[-2]
        dropout_p = self.dropout if self.training else 0.0

        weights = None
        if self.attn_impl == "sdpa" and not need_weights:
            if is_causal and mask is None and T_q == T_k:
                y = F.scaled_dot_product_attention(
                    q, k, v, dropout_p=dropout_p, is_causal=True, scale=self.scale
                )
            else:
                if is_causal and not (mask is None and T_q == 1):  # one query sees all keys
                    mask = merge_causal(mask, T_q, T_k, q.device, q.dtype)
                if mask is not None and mask.dtype != torch.bool:
                    mask = mask.to(q.dtype)
                y = F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=self.scale
                )
        else:
            if is_causal:
                mask = merge_causal(mask, T_q, T_k, q.device, q.dtype)
            y, weights = scaled_dot_product_attention(
                q, k, v, mask=mask, scale=self.scale, return_weights=True, dropout_p=dropout_p
            )  # (B, H, T_q, d_k), (B, H, T_q, T_k)

        y = y.transpose(1, 2).reshape(B, T_q, self.n_head * self.d_k)  # concatenate the heads
        if self.out_proj is not None:
            y = self.out_proj(y)  # (B, T_q, d_model)
        return (y, weights) if need_weights else y

    # --- weights from PyTorch ------------------------------------------------------------
    @torch.no_grad()
    def load_from_torch(self, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` (same d_model, heads, bias).

        ``in_proj_weight`` is ``[W_Q; W_K; W_V]`` stacked, ``(3 d_model, d_model)``, in the
        ``nn.Linear`` (out, in) layout -- split for separate projections, copied as is for
        the fused one.
        """
        if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
            raise ValueError("only nn.MultiheadAttention without kdim/vdim/add_bias_kv/zero_attn")
        if m.embed_dim != self.d_model or m.num_heads != self.n_head or self.out_proj is None:
            raise ValueError("shape mismatch: need same d_model, n_head and an output projection")
        if (m.in_proj_bias is None) != (self._bias() is None):
            raise ValueError("bias setting differs from the source module")
        if self.fused_qkv:
            self.qkv_proj.weight.copy_(m.in_proj_weight)
            if m.in_proj_bias is not None:
                self.qkv_proj.bias.copy_(m.in_proj_bias)
        else:
            for lin, w in zip((self.q_proj, self.k_proj, self.v_proj), m.in_proj_weight.chunk(3)):
                lin.weight.copy_(w)
            if m.in_proj_bias is not None:
                for lin, b in zip((self.q_proj, self.k_proj, self.v_proj), m.in_proj_bias.chunk(3)):
                    lin.bias.copy_(b)
        self.out_proj.weight.copy_(m.out_proj.weight)
        if m.out_proj.bias is not None:
            self.out_proj.bias.copy_(m.out_proj.bias)
        return self

    def _bias(self):
        return self.qkv_proj.bias if self.fused_qkv else self.q_proj.bias


def multi_head_attention(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    """Functional multi-head attention with row-form weights ``(d_in, d_model)`` (no biases).

    ``x_q (B, T_q, d_in)``, ``x_kv (B, T_k, d_in)``; ``mask`` a keep mask broadcastable to
    ``(B, H, T_q, T_k)``. The given part that chapters after 03 use when the learner's own
    ``multi_head_attention`` is not there or fails its check.

    >>> x = torch.randn(2, 3, 4)
    >>> multi_head_attention(x, x, *(torch.eye(4),) * 4, n_head=2).shape
    torch.Size([2, 3, 4])
    """
    def split(t):  # (B, T, H*d_k) -> (B, H, T, d_k)
        return t.view(t.shape[0], t.shape[1], n_head, t.shape[-1] // n_head).transpose(1, 2)

    q, k, v = split(x_q @ W_Q), split(x_kv @ W_K), split(x_kv @ W_V)
    y = scaled_dot_product_attention(q, k, v, mask=mask)  # (B, H, T_q, d_k)
    return y.transpose(1, 2).reshape(x_q.shape[0], x_q.shape[1], -1) @ W_O
