"""transformer_ref.positional: sinusoidal table, learned table, RoPE (rotation property)."""

import math

import pytest
import torch

from transformer_ref.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEmbedding,
    apply_rope,
    sinusoidal_encoding,
)


def maxerr(a, b) -> float:
    return (a - b).abs().max().item()


@pytest.mark.parametrize("d_model", [8, 7, 1])
def test_sinusoidal_matches_formula(d_model):
    T = 20
    pe = sinusoidal_encoding(T, d_model)
    assert pe.shape == (T, d_model)
    for pos in (0, 1, 13):
        for j in range(d_model):
            i2 = j - j % 2  # 2i
            angle = pos / 10000 ** (i2 / d_model)
            expect = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, j].item() - expect) <= 1e-6


def test_sinusoidal_shift_is_a_rotation():
    # PE[pos + k] is PE[pos] with each (sin, cos) pair rotated by k * omega_i (Vaswani 3.5)
    d, k = 8, 5
    pe = sinusoidal_encoding(40, d).double()
    omega = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    sin_p, cos_p = pe[:-k, 0::2], pe[:-k, 1::2]
    assert maxerr(pe[k:, 0::2], sin_p * c + cos_p * s) <= 1e-6
    assert maxerr(pe[k:, 1::2], cos_p * c - sin_p * s) <= 1e-6


def test_position_modules():
    sin_mod = SinusoidalPositionalEmbedding(16, 6)
    assert torch.equal(sin_mod(torch.arange(3, 7)), sinusoidal_encoding(16, 6)[3:7])
    assert len(list(sin_mod.parameters())) == 0 and "pe" not in sin_mod.state_dict()
    learned = LearnedPositionalEmbedding(16, 6)
    assert learned.weight.requires_grad and learned(torch.arange(4)).shape == (4, 6)


def test_rope_scores_depend_only_on_relative_position():
    torch.manual_seed(0)
    rope = RotaryEmbedding(8, max_len=64).double()
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)

    def score(m, n):
        qm = rope(q[None], torch.tensor([m]))[0]
        kn = rope(k[None], torch.tensor([n]))[0]
        return (qm @ kn).item()

    for m, n in [(3, 1), (10, 2), (0, 5)]:
        for shift in (1, 7, 30):
            assert abs(score(m, n) - score(m + shift, n + shift)) <= 1e-10
    assert abs(score(3, 1) - score(4, 1)) > 1e-4  # and it does depend on m - n


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
def test_rope_is_a_rotation(pairing):
    torch.manual_seed(1)
    rope = RotaryEmbedding(6, max_len=16, pairing=pairing).double()
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64)  # (B, H, T, d_k)
    y = rope(x, torch.arange(5))
    assert maxerr(y.norm(dim=-1), x.norm(dim=-1)) <= 1e-12
    assert maxerr(y[:, :, 0], x[:, :, 0]) == 0  # position 0: no rotation
    z = rope(x, torch.arange(5) + 3)
    assert maxerr(y @ y.transpose(-1, -2), z @ z.transpose(-1, -2)) <= 1e-10  # same shift


def test_rope_interleaved_is_complex_multiplication():
    # Interleaved pairs (2i, 2i+1) as complex numbers x_{2i} + i x_{2i+1}, times e^{i m theta_i}
    torch.manual_seed(2)
    d, T = 8, 6
    rope = RotaryEmbedding(d, max_len=T).double()
    x = torch.randn(2, T, d, dtype=torch.float64)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones(T, d // 2, dtype=torch.float64), torch.arange(T)[:, None] * theta)
    ref = torch.view_as_real(torch.view_as_complex(x.reshape(2, T, d // 2, 2)) * rot).flatten(-2)
    assert maxerr(rope(x, torch.arange(T)), ref) <= 1e-10


def test_rope_half_is_interleaved_after_permutation():
    torch.manual_seed(3)
    d = 8
    x = torch.randn(4, d, dtype=torch.float64)
    perm = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))  # interleaved -> half order
    angle = torch.rand(4, d // 2, dtype=torch.float64) * 6
    inter = apply_rope(x, torch.cos(angle), torch.sin(angle), "interleaved")
    half = apply_rope(x[:, perm], torch.cos(angle), torch.sin(angle), "half")
    assert maxerr(inter[:, perm], half) <= 1e-12
    assert maxerr(inter, apply_rope(x, torch.cos(angle), torch.sin(angle), "half")) > 1e-3


def test_rope_rejects_odd_head_size():
    with pytest.raises(ValueError):
        RotaryEmbedding(5, max_len=4)
