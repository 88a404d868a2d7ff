"""transformer_ref.blocks against torch.nn.TransformerEncoderLayer / TransformerDecoderLayer."""

import pytest
import torch
import torch.nn as nn

from transformer_ref.blocks import DecoderBlock, EncoderBlock
from transformer_ref.masks import causal_mask

TOL = {torch.float64: 1e-10, torch.float32: 1e-5}
D, H, FF = 8, 2, 16


def maxerr(a, b) -> float:
    return (a - b).abs().max().item()


def randomize(mod, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # norms start at 1/0 and biases at 0 in torch: make every weight count
        for p in mod.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)


def torch_and_ours(torch_layer, our_block, seed, norm_first, activation, dtype):
    """torch's layer (after ``torch.manual_seed(seed)``, its weights randomized with ``seed``)
    and our block holding its weights."""
    torch.manual_seed(seed)
    ref = torch_layer(D, H, FF, dropout=0.0, activation=activation, batch_first=True,
                      norm_first=norm_first).to(dtype)
    randomize(ref, seed=seed)
    # train mode (dropout is 0) keeps torch on its plain path, not the fused inference kernel
    ref.train()
    ours = our_block(D, H, FF, activation=activation, norm_first=norm_first).to(dtype)
    ours.load_from_torch(ref)
    return ref, ours


def torch_causal(T, dtype):
    return nn.Transformer.generate_square_subsequent_mask(T, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_matches_torch(norm_first, activation, dtype):
    ref, ours = torch_and_ours(nn.TransformerEncoderLayer, EncoderBlock, 0, norm_first,
                               activation, dtype)
    x = torch.randn(2, 5, D, dtype=dtype)
    tol = TOL[dtype]
    assert maxerr(ours(x), ref(x)) <= tol
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])  # torch: True = pad
    out_ref = ref(x, src_key_padding_mask=kpm)
    assert maxerr(ours(x, mask=~kpm[:, None, None, :]), out_ref) <= tol
    out_ref = ref(x, src_mask=torch_causal(5, dtype), is_causal=True)
    assert maxerr(ours(x, is_causal=True), out_ref) <= tol
    assert maxerr(ours(x, mask=causal_mask(5)), out_ref) <= tol


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_matches_torch(norm_first, activation, dtype):
    ref, ours = torch_and_ours(nn.TransformerDecoderLayer, DecoderBlock, 1, norm_first,
                               activation, dtype)
    x, mem = torch.randn(2, 4, D, dtype=dtype), torch.randn(2, 6, D, dtype=dtype)
    mkpm = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    out_ref = ref(x, mem, tgt_mask=torch_causal(4, dtype), tgt_is_causal=True,
                  memory_key_padding_mask=mkpm)
    out = ours(x, mem, memory_mask=~mkpm[:, None, None, :])  # causal self-attention by default
    assert maxerr(out, out_ref) <= TOL[dtype]
    out_nc = ours(x, mem, is_causal=False)  # unmasked self-attention, as torch without tgt_mask
    assert maxerr(out_nc, ref(x, mem)) <= TOL[dtype]


def test_pre_and_post_ln_formulas():
    """Check the placement itself, independent of torch: post-LN output rows are normalised."""
    torch.manual_seed(2)
    x = torch.randn(2, 3, D, dtype=torch.float64) * 4 + 2
    post = EncoderBlock(D, H, FF, norm_first=False).double()
    y = post(x)
    assert maxerr(y.mean(-1), torch.zeros(2, 3, dtype=torch.float64)) <= 1e-10  # LN is last
    pre = EncoderBlock(D, H, FF, norm_first=True).double()
    h = x + pre.attn(pre.norm1(x))
    assert maxerr(pre(x), h + pre.ffn(pre.norm2(h))) <= 1e-12


def test_rms_norm_and_no_bias_blocks_run():
    blk = DecoderBlock(D, H, norm="rms", bias=False, activation="swiglu")
    assert all(n.endswith("weight") for n, _ in blk.named_parameters())
    assert blk(torch.randn(1, 3, D), torch.randn(1, 2, D)).shape == (1, 3, D)


def test_load_from_torch_rejects_mismatch():
    ref = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=True)
    with pytest.raises(ValueError):
        EncoderBlock(D, H, FF, norm_first=False).load_from_torch(ref)
    with pytest.raises(ValueError):
        EncoderBlock(D, H, FF, norm_first=True, activation="gelu").load_from_torch(ref)
    with pytest.raises(ValueError):
        EncoderBlock(D, H, FF, norm_first=True, norm="rms").load_from_torch(ref)
