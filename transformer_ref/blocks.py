"""Transformer blocks: the self-attention block (encoder and GPT) and the decoder block.

Pre-LN or post-LN.

Post-LN (Vaswani et al., 2017; the tutorial [S2]), each sublayer wrapped as ``LayerNorm(x +
Sublayer(x))``:

    x = LN_1(x + MHA(x))
    x = LN_2(x + FFN(x))

Pre-LN (GPT-2, Xiong et al., 2020; [S1]'s ``R(Phi o LN) o R(MSA o LN)``
with
``R(f)(x) = x + f(x)``), the norm moves inside the residual branch:

    x = x + MHA(LN_1(x))
    x = x + FFN(LN_2(x))

A decoder block has three sublayers: masked (causal) self-attention, cross-attention to the
encoder output ("memory"), and the FFN, each wrapped the same way. Dropout, if any, is
applied to each sublayer's output before the residual addition.

Weights can be copied from ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer``
(``norm_first=True`` is pre-LN, ``False`` post-LN) with ``load_from_torch``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_ref.ffn import FeedForward
from transformer_ref.mha import LayerKVCache, MultiHeadAttention
from transformer_ref.norms import LayerNorm, make_norm

__all__ = ["SelfAttentionBlock", "EncoderBlock", "DecoderBlock", "pre_ln_block", "post_ln_block"]


@torch.no_grad()
def _copy_linear(dst: nn.Linear, src: nn.Linear) -> None:
    dst.weight.copy_(src.weight)
    if (dst.bias is None) != (src.bias is None):
        raise ValueError("bias setting differs from the source module")
    if src.bias is not None:
        dst.bias.copy_(src.bias)


@torch.no_grad()
def _copy_norm(dst: nn.Module, src: nn.LayerNorm) -> None:
    if not isinstance(dst, LayerNorm):
        raise ValueError("torch layers use LayerNorm; build the block with norm='layer'")
    dst.eps = src.eps
    dst.weight.copy_(src.weight)
    if (dst.bias is None) != (src.bias is None):
        raise ValueError("bias setting differs from the source module")
    if src.bias is not None:
        dst.bias.copy_(src.bias)


def _check_activation(activation: str, layer: nn.Module) -> None:
    act = layer.activation
    name = {F.relu: "relu", F.gelu: "gelu"}.get(act)
    if isinstance(act, nn.ReLU):
        name = "relu"
    elif isinstance(act, nn.GELU) and act.approximate == "none":
        name = "gelu"
    if name != activation:
        raise ValueError(f"source layer uses {act}, this block uses {activation!r}")


class SelfAttentionBlock(nn.Module):
    """Self-attention + FFN, each in a residual branch; ``norm_first`` picks pre-LN.

    The encoder's block (bidirectional, post-LN in the paper) and the GPT's block
    (``norm_first=True``, called with ``is_causal=True``) are this one class;
    ``EncoderBlock`` is its older name. ``eps`` is the norms' epsilon (None: the norm's default).

    >>> blk = SelfAttentionBlock(d_model=8, n_head=2)
    >>> blk(torch.randn(2, 5, 8)).shape
    torch.Size([2, 5, 8])
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        norm: str = "layer",
        bias: bool = True,
        eps: float | None = None,
        fused_qkv: bool = False,
        attn_impl: str = "scratch",
        fused_norm: bool = False,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(
            d_model, n_head, bias=bias, fused_qkv=fused_qkv, dropout=dropout, attn_impl=attn_impl
        )
        self.ffn = FeedForward(d_model, d_ff, activation=activation, bias=bias)
        self.norm1 = make_norm(norm, d_model, bias=bias, eps=eps, fused=fused_norm)
        self.norm2 = make_norm(norm, d_model, bias=bias, eps=eps, fused=fused_norm)
        self.drop = nn.Dropout(dropout)  # residual dropout

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        cache: LayerKVCache | None = None,
        rope=None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:  # x: (B, T, d_model)
        def sa(h):
            return self.attn(
                h, mask=mask, is_causal=is_causal, cache=cache, rope=rope, positions=positions
            )

        if self.norm_first:
            x = x + self.drop(sa(self.norm1(x)))
            x = x + self.drop(self.ffn(self.norm2(x)))
        else:
            x = self.norm1(x + self.drop(sa(x)))
            x = self.norm2(x + self.drop(self.ffn(x)))
        return x

    def load_from_torch(self, layer: nn.TransformerEncoderLayer) -> SelfAttentionBlock:
        """Copy weights from ``torch.nn.TransformerEncoderLayer`` (same sizes and options)."""
        if layer.norm_first != self.norm_first:
            raise ValueError("norm_first differs from the source layer")
        _check_activation(self.ffn.activation, layer)
        self.attn.load_from_torch(layer.self_attn)
        _copy_linear(self.ffn.w1, layer.linear1)
        _copy_linear(self.ffn.w2, layer.linear2)
        _copy_norm(self.norm1, layer.norm1)
        _copy_norm(self.norm2, layer.norm2)
        return self


EncoderBlock = SelfAttentionBlock  # the older name, used by chapters 5 and 6


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to ``memory``, FFN; pre-LN or post-LN.

    >>> blk = DecoderBlock(d_model=8, n_head=2)
    >>> blk(torch.randn(2, 5, 8), memory=torch.randn(2, 7, 8)).shape
    torch.Size([2, 5, 8])
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        norm: str = "layer",
        bias: bool = True,
        eps: float | None = None,
        fused_qkv: bool = False,
        attn_impl: str = "scratch",
    ):
        super().__init__()
        self.norm_first = norm_first
        kw = dict(bias=bias, fused_qkv=fused_qkv, dropout=dropout, attn_impl=attn_impl)
        self.self_attn = MultiHeadAttention(d_model, n_head, **kw)
        self.cross_attn = MultiHeadAttention(d_model, n_head, **kw)
        self.ffn = FeedForward(d_model, d_ff, activation=activation, bias=bias)
        self.norm1 = make_norm(norm, d_model, bias=bias, eps=eps)
        self.norm2 = make_norm(norm, d_model, bias=bias, eps=eps)
        self.norm3 = make_norm(norm, d_model, bias=bias, eps=eps)
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        is_causal: bool = True,
        cache: LayerKVCache | None = None,
        rope=None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:  # x: (B, T_t, d_model), memory: (B, T_s, d_model)
        def sa(h):
            return self.self_attn(
                h, mask=self_mask, is_causal=is_causal, cache=cache, rope=rope, positions=positions
            )

        def ca(h):
            return self.cross_attn(h, context=memory, mask=memory_mask)

        if self.norm_first:
            x = x + self.drop(sa(self.norm1(x)))
            x = x + self.drop(ca(self.norm2(x)))
            x = x + self.drop(self.ffn(self.norm3(x)))
        else:
            x = self.norm1(x + self.drop(sa(x)))
            x = self.norm2(x + self.drop(ca(x)))
            x = self.norm3(x + self.drop(self.ffn(x)))
        return x

    def load_from_torch(self, layer: nn.TransformerDecoderLayer) -> DecoderBlock:
        """Copy weights from ``torch.nn.TransformerDecoderLayer`` (same sizes and options)."""
        if layer.norm_first != self.norm_first:
            raise ValueError("norm_first differs from the source layer")
        _check_activation(self.ffn.activation, layer)
        self.self_attn.load_from_torch(layer.self_attn)
        self.cross_attn.load_from_torch(layer.multihead_attn)
        _copy_linear(self.ffn.w1, layer.linear1)
        _copy_linear(self.ffn.w2, layer.linear2)
        for mine, theirs in ((self.norm1, layer.norm1), (self.norm2, layer.norm2),
                             (self.norm3, layer.norm3)):
            _copy_norm(mine, theirs)
        return self


def pre_ln_block(x, attn, ffn, norm1, norm2):
    """Functional pre-LN block from its sublayers: ``x + attn(norm1(x))``, then the FFN.

    >>> x = torch.randn(1, 2, 3)
    >>> bool((pre_ln_block(x, lambda h: 0 * h, lambda h: 0 * h, abs, abs) == x).all())
    True
    """
    x = x + attn(norm1(x))
    return x + ffn(norm2(x))


def post_ln_block(x, attn, ffn, norm1, norm2):
    """Functional post-LN block from its sublayers: ``norm1(x + attn(x))``, then the FFN.

    >>> x = torch.randn(1, 2, 3)
    >>> bool((post_ln_block(x, lambda h: 0 * h, lambda h: 0 * h, abs, abs) == x.abs()).all())
    True
    """
    x = norm1(x + attn(x))
    return norm2(x + ffn(x))
