"""Turning next-token logits into tokens: temperature, top-k, top-p (nucleus), and generation.

A language model gives logits ``z`` over the vocabulary for the next token. Sampling draws
from ``p = softmax(z / T)``, optionally restricted to a subset of the vocabulary and
renormalised there:

- **temperature** ``T``: ``p_i ∝ exp(z_i / T)``. ``T -> 0`` tends to the argmax (greedy
  decoding; ``T = 0`` *is* greedy here), ``T = 1`` is the model's distribution, ``T > 1``
  flattens it.
- **top-k** (Fan et al., 2018): keep the ``k`` largest logits, set the others to ``-inf``.
- **top-p / nucleus** (Holtzman et al., 2019): sort probabilities in decreasing order and keep
  the smallest prefix whose mass reaches ``p``; everything after it gets ``-inf``.

The filters are applied in the order temperature -> top-k -> top-p (the nucleus is measured
on the temperature-scaled, top-k-restricted distribution). All randomness goes through an
optional ``torch.Generator`` so a fixed seed gives fixed samples.

:func:`generate` runs the autoregressive loop with the model's KV cache
(``model.init_cache(B)`` then ``model(chunk, cache=cache)``): the prompt is run once, then
one token per step. ``use_cache=False`` re-runs the whole (cropped) context every step; both
give the same tokens under greedy decoding.
"""

from __future__ import annotations

import torch

__all__ = [
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "filter_logits",
    "sample_next_token",
    "generate",
]


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Scale logits by ``1 / T``: ``softmax(z / T)`` is the tempered distribution.

    >>> apply_temperature(torch.tensor([2.0, 4.0]), 2.0)
    tensor([1., 2.])
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (greedy: sample_next_token), got {temperature}")
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of the last axis, set the rest to ``-inf``.

    Logits tied with the k-th largest are kept too (so ties can leave more than ``k``).

    >>> top_k_filter(torch.tensor([1.0, 3.0, 2.0, 0.0]), 2)
    tensor([-inf, 3., 2., -inf])
    """
    if k <= 0:
        raise ValueError(f"top_k must be >= 1, got {k}")
    k = min(k, logits.size(-1))
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most probable tokens whose mass is ``>= p``.

    Sort ``softmax(z)`` in decreasing order; token ``j`` (in sorted order) is kept when the
    mass *before* it, ``sum_{i<j} p_(i)``, is ``< p``. The most probable token is always kept.

    >>> z = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    >>> torch.isfinite(top_p_filter(z, 0.75))  # 0.5 < 0.75, 0.5 + 0.3 >= 0.75: keep two
    tensor([ True,  True, False, False])
    """
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {p}")
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs  # exclusive cumulative sum
    drop_sorted = mass_before >= p
    drop_sorted[..., 0] = False  # never drop the argmax
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocab order
    return logits.masked_fill(drop, float("-inf"))


def filter_logits(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """Temperature, then top-k, then top-p; ``softmax`` of the result is the sampling law.

    >>> filter_logits(torch.tensor([0.0, 2.0, 4.0]), temperature=2.0, top_k=2)
    tensor([-inf, 1., 2.])
    """
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None and top_p < 1.0:
        logits = top_p_filter(logits, top_p)
    return logits


def sample_next_token(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token per row from ``logits (B, V)``; returns ``(B, 1)`` int64.

    ``temperature == 0`` means greedy decoding (argmax), the ``T -> 0`` limit.

    >>> sample_next_token(torch.tensor([[0.1, 5.0, 0.2]]), temperature=0.0)
    tensor([[1]])
    """
    if temperature == 0.0:
        return logits.argmax(dim=-1, keepdim=True)
    probs = torch.softmax(filter_logits(logits.float(), temperature, top_k, top_p), dim=-1)
    if generator is not None and generator.device != probs.device:
        # the generator lives on one device; draw there and move the indices back
        return torch.multinomial(probs.to(generator.device), 1, generator=generator).to(
            probs.device
        )
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)


def _block_size(model: torch.nn.Module) -> int | None:
    config = getattr(model, "config", None)
    return getattr(config, "block_size", None)


@torch.no_grad()
def generate(
    model: torch.nn.Module,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Append ``max_new_tokens`` sampled tokens to ``idx (B, T)``; returns ``(B, T + n)``.

    With ``use_cache`` the prompt is prefilled once into ``model.init_cache(B)`` and each step
    feeds only the newest token. The context never exceeds ``model.config.block_size``: once it
    would, the cache is rebuilt from the last ``block_size`` tokens (exactly what the uncached
    loop sees after cropping), so cached and uncached decoding agree token for token.
    """
    was_training = model.training
    model.eval()
    block = _block_size(model)
    B = idx.size(0)
    cache = None
    cache_len = 0  # tokens currently held in the cache
    for _ in range(max_new_tokens):
        ctx = idx if block is None else idx[:, -block:]  # (B, <= block)
        if not use_cache:
            logits = model(ctx)
        elif cache is None or (block is not None and cache_len + 1 > block):
            cache = model.init_cache(B)  # (re)prefill from the cropped context
            logits = model(ctx, cache=cache)
            cache_len = ctx.size(1)
        else:
            logits = model(idx[:, -1:], cache=cache)  # only the newest token
            cache_len += 1
        nxt = sample_next_token(logits[:, -1, :], temperature, top_k, top_p, generator)
        idx = torch.cat([idx, nxt.to(idx.device)], dim=1)
    model.train(was_training)
    return idx
