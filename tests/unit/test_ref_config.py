"""Model knobs people expect (issue 17, item 3): RoPE base and norm eps in the configs, passed
down to every module; RoPE positions of a shape that would broadcast wrongly are refused; the
block shared by the encoder and the GPT has a name that fits both."""

import pytest
import torch

import transformer_ref
from transformer_ref.blocks import EncoderBlock, SelfAttentionBlock
from transformer_ref.models import GPT, GPTConfig, Transformer, TransformerConfig
from transformer_ref.norms import LayerNorm, RMSNorm
from transformer_ref.positional import RotaryEmbedding
from transformer_ref.train import TrainConfig
from transformer_ref.train.trainer import build_model

SMALL = dict(vocab_size=13, block_size=16, n_layer=2, n_head=2, d_model=8)


def norms_of(model):
    return [m for m in model.modules() if isinstance(m, (LayerNorm, RMSNorm))]


@pytest.mark.parametrize("norm, default", [("layer", 1e-5), ("rms", 1e-6)])
def test_norm_eps_reaches_every_norm(norm, default):
    assert {m.eps for m in norms_of(GPT(GPTConfig(**SMALL, norm=norm)))} == {default}
    model = GPT(GPTConfig(**SMALL, norm=norm, norm_eps=1e-3))
    eps = [m.eps for m in norms_of(model)]
    assert len(eps) == 2 * SMALL["n_layer"] + 1 and set(eps) == {1e-3}  # blocks and ln_f
    tcfg = TransformerConfig(13, 11, max_len=16, n_encoder_layers=1, n_decoder_layers=1,
                             n_head=2, d_model=8, norm=norm, norm_first=True, norm_eps=1e-3)
    eps = [m.eps for m in norms_of(Transformer(tcfg))]
    assert len(eps) == 2 + 3 + 2 and set(eps) == {1e-3}  # encoder, decoder, final norms


def test_norm_eps_changes_the_output_like_editing_the_modules():
    torch.manual_seed(0)
    idx = torch.randint(13, (2, 7))
    torch.manual_seed(1)
    built = GPT(GPTConfig(**SMALL, norm="rms", norm_eps=0.5))
    torch.manual_seed(1)
    edited = GPT(GPTConfig(**SMALL, norm="rms"))
    for m in norms_of(edited):
        m.eps = 0.5  # what one had to do before the config had the knob
    torch.testing.assert_close(built(idx), edited(idx), rtol=0, atol=0)
    torch.manual_seed(1)
    default = GPT(GPTConfig(**SMALL, norm="rms"))
    assert (built(idx) - default(idx)).abs().max() > 1e-3


def test_rope_base_reaches_the_rotary_tables():
    model = GPT(GPTConfig(**SMALL, pos="rope", rope_base=500_000.0))
    d_k = SMALL["d_model"] // SMALL["n_head"]
    expect = RotaryEmbedding(d_k, SMALL["block_size"], base=500_000.0)
    torch.testing.assert_close(model.rope.cos, expect.cos, rtol=0, atol=0)
    default = GPT(GPTConfig(**SMALL, pos="rope")).rope
    assert (model.rope.cos - default.cos).abs().max() > 1e-2
    # and the angle really is position * base^(-2i/d_k)
    t = torch.tensor(5.0, dtype=torch.float64)
    assert torch.allclose(model.rope.cos[5, 1], torch.cos(t * 500_000.0 ** (-2 / d_k)))
    tcfg = TransformerConfig(13, 11, max_len=16, n_encoder_layers=1, n_decoder_layers=1,
                             n_head=2, d_model=8, pos="rope", rope_base=50.0)
    torch.testing.assert_close(Transformer(tcfg).rope.cos, RotaryEmbedding(4, 16, 50.0).cos)


def test_train_config_passes_the_knobs_to_the_model():
    cfg = TrainConfig(block_size=16, n_layer=1, n_head=2, d_model=8, pos="rope", norm="rms",
                      rope_base=1234.0, norm_eps=1e-4)
    model = build_model(cfg, 13, torch.device("cpu"))
    assert model.config.rope_base == 1234.0 and model.config.norm_eps == 1e-4
    assert {m.eps for m in norms_of(model)} == {1e-4}
    torch.testing.assert_close(model.rope.cos, RotaryEmbedding(4, 16, 1234.0).cos)


def test_rope_positions_per_sequence_do_not_line_up_with_heads():
    # B == H == 2: a (B, T) table indexed as-is broadcasts (B, T, d/2) against (B, H, T, d/2),
    # i.e. sequence b's positions land on head b of *every* sequence, silently.
    rope = RotaryEmbedding(4, max_len=32)
    torch.manual_seed(0)
    q = torch.randn(2, 2, 5, 4)  # (B, H, T, d_k)
    pos = torch.stack([torch.arange(5), torch.arange(10, 15)])  # (B, T): different offsets
    out = rope(q, pos)
    for b in range(2):
        torch.testing.assert_close(out[b], rope(q[b], pos[b]), rtol=0, atol=0)
    torch.testing.assert_close(rope(q, pos[:1]), rope(q, pos[0]), rtol=0, atol=0)  # (1, T)


@pytest.mark.parametrize("shape", [(3, 5), (2, 6), (5, 1), (6,), (2, 2, 5)])
def test_rope_rejects_positions_that_could_broadcast_wrongly(shape):
    rope = RotaryEmbedding(4, max_len=32)
    q = torch.randn(2, 2, 5, 4)
    pos = torch.zeros(shape, dtype=torch.long)
    with pytest.raises(ValueError, match=r"RoPE positions must have shape \(T,\) = \(5,\)"):
        rope(q, pos)


def test_gpt_with_rope_accepts_per_sequence_positions_through_attention():
    model = GPT(GPTConfig(**SMALL, pos="rope")).eval()
    x = model.wte(torch.randint(13, (2, 6)))
    blk = model.blocks[0]
    one = blk(x, is_causal=True, rope=model.rope, positions=torch.arange(6))
    per_seq = blk(x, is_causal=True, rope=model.rope, positions=torch.arange(6).repeat(2, 1))
    torch.testing.assert_close(one, per_seq, rtol=0, atol=0)
    with pytest.raises(ValueError, match="RoPE positions"):
        blk(x, is_causal=True, rope=model.rope, positions=torch.arange(6).repeat(3, 1))


def test_the_shared_block_has_a_name_that_fits_encoder_and_gpt():
    assert EncoderBlock is SelfAttentionBlock  # the old name still works (chapters 5 and 6)
    assert transformer_ref.SelfAttentionBlock is SelfAttentionBlock
    assert transformer_ref.EncoderBlock is SelfAttentionBlock
    gpt = GPT(GPTConfig(**SMALL))
    assert {type(b).__name__ for b in gpt.blocks} == {"SelfAttentionBlock"}
