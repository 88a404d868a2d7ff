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
from transformer_ref.masks import (
    causal_mask,
    combine_masks,
    padding_mask_from_ids,
    padding_mask_from_lengths,
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
]
