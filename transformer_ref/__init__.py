"""transformer_ref: the course's reference implementation of every Transformer component.

Each module is one idea, written from the formulas and tested against PyTorch's built-ins.
"""

from transformer_ref.attention import (
    column_form_self_attention,
    cosine_similarity_attention,
    mask_to_additive,
    scaled_dot_product_attention,
    softmax,
)
from transformer_ref.blocks import DecoderBlock, EncoderBlock, SelfAttentionBlock
from transformer_ref.ffn import FeedForward
from transformer_ref.masks import (
    causal_mask,
    combine_masks,
    padding_mask_from_ids,
    padding_mask_from_lengths,
)
from transformer_ref.mha import LayerKVCache, MultiHeadAttention
from transformer_ref.models import (
    GPT,
    Decoder,
    Encoder,
    GPTConfig,
    KVCache,
    Transformer,
    TransformerConfig,
)
from transformer_ref.norms import LayerNorm, RMSNorm, layer_norm, rms_norm
from transformer_ref.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEmbedding,
    apply_rope,
    sinusoidal_encoding,
)

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "cosine_similarity_attention",
    "column_form_self_attention",
    "mask_to_additive",
    "causal_mask",
    "padding_mask_from_lengths",
    "padding_mask_from_ids",
    "combine_masks",
    "layer_norm",
    "rms_norm",
    "LayerNorm",
    "RMSNorm",
    "FeedForward",
    "sinusoidal_encoding",
    "SinusoidalPositionalEmbedding",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "apply_rope",
    "MultiHeadAttention",
    "LayerKVCache",
    "EncoderBlock",
    "SelfAttentionBlock",
    "DecoderBlock",
    "Encoder",
    "Decoder",
    "KVCache",
    "GPTConfig",
    "GPT",
    "TransformerConfig",
    "Transformer",
]
