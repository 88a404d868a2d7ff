"""Statistical and exact tests of the samplers in transformer_ref.sampling (fixed generators).

The chi-square checks compare empirical counts of N draws with the expected law; the critical
value is the Wilson-Hilferty approximation of the chi-square quantile at significance 1e-4,
so a correct sampler fails with probability ~1e-4 for a given seed (the seeds are fixed, so
the outcome is deterministic). Each such test also checks that a *wrong* law is rejected by
the same bound, so the bound has power.
"""

import math

import pytest
import torch

from transformer_ref.sampling import (
    filter_logits,
    generate,
    sample_next_token,
    top_k_filter,
    top_p_filter,
)

from helpers.train import one_thread  # noqa: F401 - a fixture (autouse: one torch thread)

N = 40_000  # draws per statistical test (one multinomial call, a few ms)
Z_1E4 = 3.719  # standard normal quantile at 1 - 1e-4


def chi2_stat(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's sum (O - E)^2 / E over the categories with E > 0."""
    n = counts.sum()
    keep = probs > 0
    expected = n * probs[keep]
    return float(((counts[keep] - expected) ** 2 / expected).sum())


def chi2_critical(df: int, z: float = Z_1E4) -> float:
    """Wilson-Hilferty: chi2_q(df) ~ df (1 - 2/(9 df) + z sqrt(2/(9 df)))^3."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + z * math.sqrt(a)) ** 3


def draw_counts(logits: torch.Tensor, seed: int, **kw) -> torch.Tensor:
    """Counts of N tokens drawn by sample_next_token from one row of logits (V,)."""
    g = torch.Generator().manual_seed(seed)
    draws = sample_next_token(logits.expand(N, -1), generator=g, **kw)  # (N, 1)
    return torch.bincount(draws.view(-1), minlength=logits.numel()).double()


def test_chi2_critical_matches_known_quantiles():
    # chi-square quantiles at 1 - 1e-4 from standard tables: df=1 -> 15.14, df=10 -> 35.56;
    # W-H errs on the high (conservative) side this far in the tail: +1.2% at df=10, +7% at 1
    assert 35.56 < chi2_critical(10) < 35.56 * 1.02
    assert 15.14 < chi2_critical(1) < 15.14 * 1.08


def test_unfiltered_frequencies_match_softmax():
    logits = torch.randn(12, generator=torch.Generator().manual_seed(0)) * 1.5
    counts = draw_counts(logits, seed=1)
    probs = torch.softmax(logits.double(), -1)
    assert chi2_stat(counts, probs) < chi2_critical(11)
    # power: a slightly tempered law (T = 1.15) is rejected by the same bound
    wrong = torch.softmax(logits.double() / 1.15, -1)
    assert chi2_stat(counts, wrong) > chi2_critical(11)


def test_top_k_never_leaves_the_top_k_and_renormalises():
    V, k = 30, 5
    logits = torch.randn(V, generator=torch.Generator().manual_seed(2)) * 2.0
    counts = draw_counts(logits, seed=3, top_k=k)
    top = set(torch.topk(logits, k).indices.tolist())
    assert set(torch.nonzero(counts).view(-1).tolist()) <= top
    assert len(set(torch.nonzero(counts).view(-1).tolist())) == k  # all k are reachable
    expected = torch.zeros(V, dtype=torch.float64)
    idx = torch.tensor(sorted(top))
    expected[idx] = torch.softmax(logits[idx].double(), -1)
    assert chi2_stat(counts, expected) < chi2_critical(k - 1)
    # power: the un-renormalised full softmax restricted to the top k is rejected
    full = torch.softmax(logits.double(), -1)
    wrong = torch.zeros_like(full)
    wrong[idx] = full[idx] + (1 - full[idx].sum()) / k  # leftover mass spread evenly
    assert chi2_stat(counts, wrong) > chi2_critical(k - 1)


def test_top_k_filter_exact_and_batched():
    z = torch.tensor([[0.1, 0.5, -1.0, 2.0], [3.0, 2.0, 1.0, 0.0]])
    out = top_k_filter(z, 2)
    assert torch.isfinite(out).tolist() == [[False, True, False, True], [True, True, False, False]]
    assert torch.equal(out[torch.isfinite(out)], z[torch.isfinite(out)])  # kept logits unchanged
    assert torch.equal(top_k_filter(z, 10), z)  # k >= V keeps everything


def test_top_p_keeps_the_minimal_nucleus_and_renormalises():
    probs = torch.tensor([0.05, 0.30, 0.02, 0.25, 0.15, 0.13, 0.10], dtype=torch.float64)
    logits = probs.log().float()
    p = 0.7
    kept = torch.isfinite(top_p_filter(logits, p))
    # sorted: .30 .25 .15 | .13 .10 .05 .02 -> .30+.25 = .55 < .7, + .15 = .70 >= .7: stop
    assert kept.tolist() == [False, True, False, True, True, False, False]
    mass = probs[kept].sum()
    assert mass >= p - 1e-6 and mass - probs[kept].min() < p  # reaches p, and minimal
    counts = draw_counts(logits, seed=4, top_p=p)
    assert counts[~kept].sum() == 0
    expected = torch.where(kept, probs / mass, torch.zeros_like(probs))
    assert chi2_stat(counts, expected) < chi2_critical(int(kept.sum()) - 1)
    # power: the unfiltered law is rejected
    assert chi2_stat(counts, probs) > chi2_critical(int(kept.sum()) - 1)


def test_top_p_edge_cases():
    z = torch.tensor([3.0, 1.0, 0.0, -1.0])
    assert torch.isfinite(top_p_filter(z, 1e-6)).tolist() == [True, False, False, False]
    assert torch.isfinite(top_p_filter(z, 1.0)).all()
    shuffled = torch.tensor([[0.0, 3.0, -1.0, 1.0]])  # same values, another order
    assert torch.isfinite(top_p_filter(shuffled, 0.9)).tolist() == [
        torch.isfinite(top_p_filter(z, 0.9))[[2, 0, 3, 1]].tolist()
    ]


def test_temperature_to_zero_is_argmax_and_temperature_scales_the_law():
    logits = torch.tensor([1.0, 1.3, 0.2, 1.25])
    assert sample_next_token(logits[None], temperature=0.0).item() == 1
    counts = draw_counts(logits, seed=5, temperature=1e-3)  # gap 0.05 / 1e-3 = 50 nats
    assert counts[1] == N
    # T = 2: frequencies follow softmax(z / 2)
    counts = draw_counts(logits, seed=6, temperature=2.0)
    assert chi2_stat(counts, torch.softmax(logits.double() / 2, -1)) < chi2_critical(3)
    assert chi2_stat(counts, torch.softmax(logits.double(), -1)) > chi2_critical(3)
    # entropy grows with T
    ent = [float(-(torch.softmax(filter_logits(logits, t), -1).log_softmax(-1)
                   * torch.softmax(filter_logits(logits, t), -1)).sum()) for t in (0.1, 1.0, 10.0)]
    assert ent[0] < ent[1] < ent[2]


def test_filters_compose_in_order_temperature_topk_topp():
    z = torch.tensor([4.0, 3.0, 2.0, 1.0, 0.0])
    # T = 1: top-3 probs ~ (.665, .245, .090); p = .8 keeps two. T = 4 flattens: keeps three.
    assert torch.isfinite(filter_logits(z, 1.0, top_k=3, top_p=0.8)).tolist() == [
        True, True, False, False, False]
    assert torch.isfinite(filter_logits(z, 4.0, top_k=3, top_p=0.8)).tolist() == [
        True, True, True, False, False]


def test_same_generator_seed_gives_same_samples():
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(7))
    a = sample_next_token(logits, 0.9, 10, 0.9, torch.Generator().manual_seed(8))
    b = sample_next_token(logits, 0.9, 10, 0.9, torch.Generator().manual_seed(8))
    assert torch.equal(a, b)


# ----------------------------------------------------------------------------- generation
@pytest.fixture(scope="module")
def gpt():
    from transformer_ref.models import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=23, block_size=12, n_layer=2, n_head=2, d_model=16))
    # sharpen the random model so greedy choices are not near-ties
    with torch.no_grad():
        model.wte.weight.mul_(20)
    return model.eval()


def test_cached_and_uncached_greedy_generation_agree(gpt):
    idx = torch.randint(23, (3, 5), generator=torch.Generator().manual_seed(1))
    # 5 + 20 tokens crosses block_size = 12: the cache is rebuilt from the cropped context
    cached = generate(gpt, idx, 20, temperature=0.0, use_cache=True)
    uncached = generate(gpt, idx, 20, temperature=0.0, use_cache=False)
    assert cached.shape == (3, 25)
    assert torch.equal(cached[:, :5], idx)
    assert torch.equal(cached, uncached)


def test_cached_and_uncached_sampling_agree_with_same_seed(gpt):
    idx = torch.zeros(2, 1, dtype=torch.long)
    kw = dict(temperature=1.0, top_k=10, top_p=0.95)
    a = generate(gpt, idx, 15, generator=torch.Generator().manual_seed(3), use_cache=True, **kw)
    b = generate(gpt, idx, 15, generator=torch.Generator().manual_seed(3), use_cache=False, **kw)
    assert torch.equal(a, b)


def test_generate_agrees_with_the_models_own_generate(gpt):
    """The model's ``generate`` (transformer_ref.models) must draw the same tokens as ours."""
    idx = torch.randint(23, (2, 3), generator=torch.Generator().manual_seed(4))
    ours = generate(gpt, idx, 16, temperature=0.0)
    theirs = gpt.generate(idx, 16, temperature=0.0)
    assert torch.equal(ours, theirs)
    kw = dict(temperature=0.8, top_k=8, top_p=0.9)
    ours = generate(gpt, idx, 16, generator=torch.Generator().manual_seed(5), **kw)
    theirs = gpt.generate(idx, 16, generator=torch.Generator().manual_seed(5), **kw)
    assert torch.equal(ours, theirs)


def test_generate_restores_training_mode(gpt):
    gpt.train()
    generate(gpt, torch.zeros(1, 1, dtype=torch.long), 2, temperature=0.0)
    assert gpt.training
    gpt.eval()
