"""Whole models: a decoder-only GPT and the encoder-decoder Transformer (Vaswani et al., 2017).

GPT (Radford et al., 2018/2019), pre-LN, in the style of nanoGPT:

    x_0    = E[idx] + P[positions]                   (P omitted for RoPE)
    x_l    = Block_l(x_{l-1})                         causal self-attention + FFN, pre-LN
    logits = LN_f(x_L) W_E^T                          (LM head tied to the token embedding)

Incremental decoding keeps the keys and values of every layer in a :class:`KVCache`; a
forward call with a cache processes only the new tokens, at positions that continue from the
cache length, and gives the same logits as running the whole sequence again.

The encoder-decoder Transformer embeds source and target tokens (scaled by ``sqrt(d_model)``,
section 3.4), adds sinusoidal positions, runs N encoder blocks over the source and N decoder
blocks (causal self-attention, cross-attention to the encoder output) over the target, and
projects to target-vocabulary logits. Post-LN by default, as in the paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from transformer_ref import sampling
from transformer_ref.blocks import DecoderBlock, SelfAttentionBlock, _copy_norm
from transformer_ref.masks import padding_mask_from_ids
from transformer_ref.mha import LayerKVCache
from transformer_ref.norms import make_norm
from transformer_ref.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEmbedding,
)

__all__ = [
    "KVCache",
    "GPTConfig",
    "GPT",
    "TransformerConfig",
    "Transformer",
    "Encoder",
    "Decoder",
    "gpt_logits",
]

POS_KINDS = ("learned", "sinusoidal", "rope")


class KVCache:
    """One :class:`~transformer_ref.mha.LayerKVCache` per layer; ``length`` = tokens seen.

    >>> KVCache(n_layer=2).length
    0
    """

    def __init__(self, n_layer: int):
        self.layers = [LayerKVCache() for _ in range(n_layer)]

    @property
    def length(self) -> int:
        return self.layers[0].length

    def __getitem__(self, i: int) -> LayerKVCache:
        return self.layers[i]


def _positional(kind: str, max_len: int, d_model: int, n_head: int, rope_base: float = 10000.0):
    """(additive position module or None, rotary module or None) for ``kind``."""
    if kind == "learned":
        return LearnedPositionalEmbedding(max_len, d_model), None
    if kind == "sinusoidal":
        return SinusoidalPositionalEmbedding(max_len, d_model), None
    if kind == "rope":
        return None, RotaryEmbedding(d_model // n_head, max_len, base=rope_base)
    raise ValueError(f"pos must be one of {POS_KINDS}, got {kind!r}")


# ---------------------------------------------------------------------------------------
# GPT
# ---------------------------------------------------------------------------------------
@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int = 256
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    d_ff: int | None = None  # None -> 4 * d_model
    dropout: float = 0.0
    bias: bool = True
    norm: str = "layer"  # "layer" | "rms"
    ffn: str = "gelu"  # "relu" | "gelu" | "swiglu"
    pos: str = "learned"  # "learned" | "sinusoidal" | "rope"
    tie_weights: bool = True
    attn_impl: str = "scratch"  # "scratch" (transformer_ref attention) | "sdpa" (flash path)
    rope_base: float = 10000.0  # RoPE's theta (pos="rope"): pair i turns at base^(-2i/d_k)
    norm_eps: float | None = None  # every norm's eps; None -> 1e-5 (layer) / 1e-6 (rms)
    norm_impl: str = "scratch"  # "scratch" (transformer_ref.layer_norm) | "fused" (F.layer_norm)
    qkv_impl: str = "separate"  # "separate" (W_Q, W_K, W_V) | "fused" (one [W_Q; W_K; W_V])


class GPT(nn.Module):
    """Decoder-only language model: ``forward(idx (B, T)) -> logits (B, T, vocab_size)``.

    >>> model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8))
    >>> model(torch.zeros(2, 5, dtype=torch.long)).shape
    torch.Size([2, 5, 11])
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        c = self.config = config
        self.wte = nn.Embedding(c.vocab_size, c.d_model)  # token embedding E, (V, d)
        self.wpe, self.rope = _positional(c.pos, c.block_size, c.d_model, c.n_head, c.rope_base)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            SelfAttentionBlock(
                c.d_model, c.n_head, c.d_ff, dropout=c.dropout, activation=c.ffn,
                norm_first=True, norm=c.norm, bias=c.bias, eps=c.norm_eps, attn_impl=c.attn_impl,
                fused_norm=c.norm_impl == "fused", fused_qkv=c.qkv_impl == "fused",
            )
            for _ in range(c.n_layer)
        )
        self.ln_f = make_norm(c.norm, c.d_model, bias=c.bias, eps=c.norm_eps,
                              fused=c.norm_impl == "fused")
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.wte.weight  # one Parameter, used twice

        # GPT-2 initialisation: N(0, 0.02) everywhere, zero biases, and the projections that
        # write into the residual stream scaled down by 1/sqrt(2 * n_layer).
        self.apply(self._init_weights)
        for blk in self.blocks:
            nn.init.normal_(blk.attn.out_proj.weight, 0.0, 0.02 / math.sqrt(2 * c.n_layer))
            nn.init.normal_(blk.ffn.w2.weight, 0.0, 0.02 / math.sqrt(2 * c.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, 0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 0.02)

    def init_cache(self, batch_size: int) -> KVCache:
        """An empty cache; its tensors (batch ``batch_size``) are made by the first forward."""
        del batch_size  # tensors are created on the first forward call with the cache
        return KVCache(self.config.n_layer)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        B, T = idx.shape
        past = 0 if cache is None else cache.length
        if past + T > self.config.block_size:
            raise ValueError(f"sequence length {past + T} > block_size {self.config.block_size}")
        positions = torch.arange(past, past + T, device=idx.device)  # (T,)
        x = self.wte(idx)  # (B, T, d_model)
        if self.wpe is not None:
            x = x + self.wpe(positions)  # (T, d_model) broadcasts over the batch
        x = self.drop(x)
        for i, blk in enumerate(self.blocks):
            layer_cache = None if cache is None else cache[i]
            x = blk(x, is_causal=True, cache=layer_cache, rope=self.rope, positions=positions)
        x = self.ln_f(x)
        return self.lm_head(x)  # (B, T, vocab_size)

    def num_params(self, non_embedding: bool = True) -> int:
        """Number of parameters (a tied matrix counts once).

        ``non_embedding=True`` leaves out the lookup tables -- the position table, and the
        token table unless it is tied to the LM head (then it counts once, as the head's
        weight, like nanoGPT).
        """
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            if isinstance(self.wpe, nn.Embedding):
                n -= self.wpe.weight.numel()
            if not self.config.tie_weights:
                n -= self.wte.weight.numel()
        return n

    def flops_per_token(self) -> int:
        """Training FLOPs per token (forward + backward): ``6 N + 12 L d T`` (PaLM appendix B,
        as in nanoGPT): 6 per weight, plus the attention score and value matmuls over a
        context of ``T = block_size``."""
        c = self.config
        return 6 * self.num_params(non_embedding=True) + 12 * c.n_layer * c.d_model * c.block_size

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        generator: torch.Generator | None = None,
        use_cache: bool = True,
    ) -> torch.Tensor:
        """Append ``max_new_tokens`` sampled tokens to ``idx (B, T)`` and return ``(B, T + n)``.

        Each step conditions on at most the last ``block_size`` tokens. With the KV cache only
        the new token is run through the model; when the cache reaches ``block_size`` it is
        rebuilt from the last ``block_size`` tokens (the same context the uncached loop uses).
        ``temperature=0`` is greedy decoding. Runs in eval mode (no dropout). The loop and the
        sampling filters are :func:`transformer_ref.sampling.generate`.
        """
        return sampling.generate(
            self, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache
        )


# ---------------------------------------------------------------------------------------
# Encoder-decoder Transformer
# ---------------------------------------------------------------------------------------
class Encoder(nn.Module):
    """A stack of :class:`~transformer_ref.blocks.SelfAttentionBlock` with an optional final norm.

    >>> Encoder(n_layer=2, d_model=8, n_head=2)(torch.randn(1, 3, 8)).shape
    torch.Size([1, 3, 8])
    """

    def __init__(self, n_layer: int, d_model: int, n_head: int, final_norm: bool = False,
                 norm: str = "layer", bias: bool = True, **block_kw):
        super().__init__()
        self.blocks = nn.ModuleList(
            SelfAttentionBlock(d_model, n_head, norm=norm, bias=bias, **block_kw)
            for _ in range(n_layer)
        )
        eps = block_kw.get("eps")
        self.norm = make_norm(norm, d_model, bias=bias, eps=eps) if final_norm else None

    def forward(self, x, mask=None, rope=None, positions=None) -> torch.Tensor:
        for blk in self.blocks:
            x = blk(x, mask=mask, rope=rope, positions=positions)
        return x if self.norm is None else self.norm(x)

    def load_from_torch(self, enc: nn.TransformerEncoder) -> Encoder:
        """Copy weights from ``torch.nn.TransformerEncoder`` (its layers and final norm)."""
        if len(enc.layers) != len(self.blocks) or (enc.norm is None) != (self.norm is None):
            raise ValueError("layer count or final norm differs from the source encoder")
        for mine, theirs in zip(self.blocks, enc.layers):
            mine.load_from_torch(theirs)
        if enc.norm is not None:
            _copy_norm(self.norm, enc.norm)
        return self


class Decoder(nn.Module):
    """A stack of :class:`DecoderBlock` with an optional final norm.

    >>> Decoder(n_layer=2, d_model=8, n_head=2)(torch.randn(1, 3, 8), torch.randn(1, 4, 8)).shape
    torch.Size([1, 3, 8])
    """

    def __init__(self, n_layer: int, d_model: int, n_head: int, final_norm: bool = False,
                 norm: str = "layer", bias: bool = True, **block_kw):
        super().__init__()
        self.blocks = nn.ModuleList(
            DecoderBlock(d_model, n_head, norm=norm, bias=bias, **block_kw) for _ in range(n_layer)
        )
        eps = block_kw.get("eps")
        self.norm = make_norm(norm, d_model, bias=bias, eps=eps) if final_norm else None

    def forward(self, x, memory, self_mask=None, memory_mask=None, cache: KVCache | None = None,
                rope=None, positions=None) -> torch.Tensor:
        for i, blk in enumerate(self.blocks):
            x = blk(x, memory, self_mask=self_mask, memory_mask=memory_mask, is_causal=True,
                    cache=None if cache is None else cache[i], rope=rope, positions=positions)
        return x if self.norm is None else self.norm(x)

    def load_from_torch(self, dec: nn.TransformerDecoder) -> Decoder:
        """Copy weights from ``torch.nn.TransformerDecoder`` (its layers and final norm)."""
        if len(dec.layers) != len(self.blocks) or (dec.norm is None) != (self.norm is None):
            raise ValueError("layer count or final norm differs from the source decoder")
        for mine, theirs in zip(self.blocks, dec.layers):
            mine.load_from_torch(theirs)
        if dec.norm is not None:
            _copy_norm(self.norm, dec.norm)
        return self


@dataclass
class TransformerConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    max_len: int = 512
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    n_head: int = 8
    d_model: int = 512
    d_ff: int | None = None  # None -> 4 * d_model (2048 in the base model)
    dropout: float = 0.1
    bias: bool = True
    norm: str = "layer"  # "layer" | "rms"
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN
    final_norm: bool | None = None  # a norm after each stack; None -> same as norm_first
    ffn: str = "relu"  # "relu" | "gelu" | "swiglu"
    pos: str = "sinusoidal"  # "learned" | "sinusoidal" | "rope"
    share_embeddings: bool = False  # one table for source and target (needs equal vocabularies)
    tie_weights: bool = True  # output projection = target embedding (section 3.4)
    pad_id: int | None = None  # if set, padding masks are derived from the ids
    attn_impl: str = "scratch"
    rope_base: float = 10000.0  # RoPE's theta (pos="rope")
    norm_eps: float | None = None  # every norm's eps; None -> 1e-5 (layer) / 1e-6 (rms)


class Transformer(nn.Module):
    """Encoder-decoder Transformer: ``forward(src (B, S), tgt (B, T)) -> logits (B, T, V_tgt)``.

    >>> cfg = TransformerConfig(13, 11, max_len=16, n_encoder_layers=1, n_decoder_layers=1,
    ...                         n_head=2, d_model=8)
    >>> src, tgt = torch.zeros(2, 6, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long)
    >>> Transformer(cfg)(src, tgt).shape
    torch.Size([2, 4, 11])
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        if c.share_embeddings:
            if c.src_vocab_size != c.tgt_vocab_size:
                raise ValueError("share_embeddings needs src_vocab_size == tgt_vocab_size")
            self.tgt_embed = self.src_embed
        else:
            self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.pos, self.rope = _positional(c.pos, c.max_len, c.d_model, c.n_head, c.rope_base)
        self.drop = nn.Dropout(c.dropout)
        final_norm = c.norm_first if c.final_norm is None else c.final_norm
        kw = dict(d_ff=c.d_ff, dropout=c.dropout, activation=c.ffn, norm_first=c.norm_first,
                  norm=c.norm, bias=c.bias, eps=c.norm_eps, attn_impl=c.attn_impl,
                  final_norm=final_norm)
        self.encoder = Encoder(c.n_encoder_layers, c.d_model, c.n_head, **kw)
        self.decoder = Decoder(c.n_decoder_layers, c.d_model, c.n_head, **kw)
        self.lm_head = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)

        for p in self.parameters():  # Xavier for matrices, as torch.nn.Transformer does
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        # embeddings are multiplied by sqrt(d_model): start them at unit scale after that
        nn.init.normal_(self.src_embed.weight, 0.0, c.d_model**-0.5)
        nn.init.normal_(self.tgt_embed.weight, 0.0, c.d_model**-0.5)
        if c.tie_weights:
            self.lm_head.weight = self.tgt_embed.weight

    def _embed(self, ids: torch.Tensor, table: nn.Embedding, start: int = 0):
        positions = torch.arange(start, start + ids.size(1), device=ids.device)  # (T,)
        x = table(ids) * math.sqrt(self.config.d_model)  # (B, T, d_model), section 3.4
        if self.pos is not None:
            x = x + self.pos(positions)
        return self.drop(x), positions

    def _pad_mask(self, ids: torch.Tensor):
        pad = self.config.pad_id
        return None if pad is None else padding_mask_from_ids(ids, pad)  # (B, 1, 1, T)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``src (B, S)`` -> memory ``(B, S, d_model)``; ``src_mask`` keep mask or from pad_id."""
        src_mask = self._pad_mask(src) if src_mask is None else src_mask
        x, positions = self._embed(src, self.src_embed)
        return self.encoder(x, mask=src_mask, rope=self.rope, positions=positions)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """``tgt (B, T)`` -> logits ``(B, T, V_tgt)``, causal; with a cache only new tokens.

        ``memory_mask`` masks source keys (pass the source padding mask); ``tgt_mask`` is an
        extra keep mask on target keys (the causal mask is always added). Right-padded
        targets need no tgt_mask: the causal mask already hides later pads from real tokens.
        """
        start = 0 if cache is None else cache.length
        x, positions = self._embed(tgt, self.tgt_embed, start)
        x = self.decoder(x, memory, self_mask=tgt_mask, memory_mask=memory_mask, cache=cache,
                         rope=self.rope, positions=positions)
        return self.lm_head(x)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_mask = self._pad_mask(src)
        memory = self.encode(src, src_mask)
        return self.decode(tgt, memory, memory_mask=src_mask)

    def init_cache(self, batch_size: int) -> KVCache:
        del batch_size
        return KVCache(self.config.n_decoder_layers)

    def load_from_torch(self, t: nn.Transformer) -> Transformer:
        """Copy the encoder and decoder stacks of a ``torch.nn.Transformer`` (which has no
        embeddings or output layer, and always a final norm: build with ``final_norm=True``)."""
        self.encoder.load_from_torch(t.encoder)
        self.decoder.load_from_torch(t.decoder)
        return self

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, bos_id: int, max_new_tokens: int) -> torch.Tensor:
        """Greedy translation with the KV cache: returns ``(B, 1 + max_new_tokens)`` from BOS."""
        src_mask = self._pad_mask(src)
        memory = self.encode(src, src_mask)
        out = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
        cache = self.init_cache(src.size(0))
        for _ in range(max_new_tokens):
            logits = self.decode(out[:, -1:], memory, memory_mask=src_mask, cache=cache)
            out = torch.cat((out, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
        return out


def gpt_logits(idx, model, start=0, cache=None):
    """The GPT forward pass from ``model``'s parts (``wte``, ``wpe``, ``blocks``, ``ln_f``,
    ``lm_head``; learned positions), ``idx`` at positions ``start .. start + T - 1``.

    >>> m = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8))
    >>> idx = torch.zeros(1, 3, dtype=torch.long)
    >>> torch.allclose(gpt_logits(idx, m), m(idx))
    True
    """
    positions = torch.arange(start, start + idx.shape[1], device=idx.device)
    x = model.wte(idx) + model.wpe(positions)
    for i, blk in enumerate(model.blocks):
        x = blk(x, is_causal=True, cache=None if cache is None else cache[i])
    return model.lm_head(model.ln_f(x))
