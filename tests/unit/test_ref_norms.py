"""transformer_ref.norms against torch.nn.LayerNorm / torch.nn.RMSNorm."""

import pytest
import torch
import torch.nn as nn

from transformer_ref.norms import LayerNorm, RMSNorm, layer_norm, make_norm, rms_norm

TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def maxerr(a, b) -> float:
    return (a - b).abs().max().item()


def randomize(*mods, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in mods:
            for p in m.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape", [(2, 5, 8), (1, 1, 3), (4, 2)])
@pytest.mark.parametrize("bias", [True, False])
def test_layernorm_matches_torch(shape, dtype, bias):
    d = shape[-1]
    ours, ref = LayerNorm(d, eps=1e-5, bias=bias).to(dtype), nn.LayerNorm(d, bias=bias).to(dtype)
    randomize(ref)
    ours.load_state_dict(ref.state_dict())  # same parameter names: weight (gamma), bias (beta)
    x = torch.randn(shape, dtype=dtype) * 3 + 1
    assert maxerr(ours(x), ref(x)) <= TOL[dtype]


def test_layernorm_eps_inside_sqrt_and_biased_variance():
    x = torch.randn(4, 6, dtype=torch.float64)
    eps = 0.5  # large, so where eps goes matters
    ref = torch.nn.functional.layer_norm(x, (6,), eps=eps)
    assert maxerr(layer_norm(x, eps=eps), ref) <= 1e-12
    mu, var_b = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    eps_outside = (x - mu) / (var_b.sqrt() + eps)
    unbiased = (x - mu) / (x.var(-1, unbiased=True, keepdim=True) + eps).sqrt()
    assert maxerr(ref, eps_outside) > 1e-2 and maxerr(ref, unbiased) > 1e-2  # the check can fail


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("eps", [1e-6, 0.1])
def test_rmsnorm_matches_torch(dtype, eps):
    ours, ref = RMSNorm(8, eps=eps).to(dtype), nn.RMSNorm(8, eps=eps).to(dtype)
    randomize(ref)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(3, 5, 8, dtype=dtype) * 2
    assert maxerr(ours(x), ref(x)) <= TOL[dtype]
    ref_f = torch.nn.functional.rms_norm(x, (8,), eps=eps)
    assert maxerr(rms_norm(x, eps=eps), ref_f) <= TOL[dtype]


def test_gradcheck_norms_float64():
    x = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: layer_norm(x, w, b, 1e-5), (x, w, b))
    assert torch.autograd.gradcheck(lambda x, w: rms_norm(x, w, 1e-6), (x, w))


def test_norm_gradients_match_torch():
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    for ours, ref in ((LayerNorm(6), nn.LayerNorm(6)), (RMSNorm(6, eps=1e-6), nn.RMSNorm(6, 1e-6))):
        ours, ref = ours.double(), ref.double()
        randomize(ref)
        ours.load_state_dict(ref.state_dict())
        xo, xr = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        (ours(xo) ** 2).sum().backward()
        (ref(xr) ** 2).sum().backward()
        assert maxerr(xo.grad, xr.grad) <= 1e-10
        assert maxerr(ours.weight.grad, ref.weight.grad) <= 1e-10


def test_make_norm():
    assert isinstance(make_norm("layer", 4), LayerNorm) and make_norm("layer", 4).bias is not None
    assert make_norm("layer", 4, bias=False).bias is None
    assert isinstance(make_norm("rms", 4), RMSNorm)
    with pytest.raises(ValueError):
        make_norm("batch", 4)


def test_fused_layer_norm_matches_the_written_out_one():
    """``LayerNorm(fused=True)`` (F.layer_norm, the training presets' choice) gives the values
    and gradients of the written-out formula."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 5, 16, dtype=torch.float64, generator=g)
    for bias in (True, False):
        a, b = LayerNorm(16, bias=bias).double(), LayerNorm(16, bias=bias, fused=True).double()
        with torch.no_grad():
            a.weight.copy_(torch.randn(16, generator=g))
            b.weight.copy_(a.weight)
        xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ya, yb = a(xa), b(xb)
        torch.testing.assert_close(ya, yb)
        probe = torch.randn(ya.shape, dtype=torch.float64, generator=g)
        (ya * probe).sum().backward()
        (yb * probe).sum().backward()
        torch.testing.assert_close(xa.grad, xb.grad)
        torch.testing.assert_close(a.weight.grad, b.weight.grad)
    assert "fused" in repr(b) and "fused" not in repr(a)


def _two_gpts(field: str, values: tuple[str, str]):
    """Two small GPTs that differ in ``field`` only, and one batch of token ids."""
    from transformer_ref.models import GPT, GPTConfig

    torch.manual_seed(0)
    a, b = (GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, d_model=16,
                          **{field: v})) for v in values)
    return a, b, torch.randint(13, (2, 8), generator=torch.Generator().manual_seed(1))


def test_a_gpt_with_fused_norms_has_the_same_parameters_and_logits():
    a, b, idx = _two_gpts("norm_impl", ("scratch", "fused"))
    b.load_state_dict(a.state_dict())
    assert a.state_dict().keys() == b.state_dict().keys()
    torch.testing.assert_close(a(idx), b(idx), rtol=1e-5, atol=1e-5)


def test_a_gpt_with_a_fused_qkv_projection_computes_the_same_logits():
    """``qkv_impl="fused"``: one ``[W_Q; W_K; W_V]`` matmul, the same model as three."""
    a, b, idx = _two_gpts("qkv_impl", ("separate", "fused"))
    sa = a.state_dict()
    sb = {k: v for k, v in sa.items() if not any(f".{n}_proj." in k for n in "qkv")}
    for i in range(2):
        p = f"blocks.{i}.attn."
        for kind in ("weight", "bias"):
            sb[p + "qkv_proj." + kind] = torch.cat([sa[p + n + "_proj." + kind] for n in "qkv"])
    b.load_state_dict(sb)  # strict: exactly b's parameters
    assert "blocks.0.attn.qkv_proj.weight" in sb and "blocks.0.attn.q_proj.weight" not in sb
    torch.testing.assert_close(a(idx), b(idx), rtol=1e-5, atol=1e-5)


def test_the_training_presets_fuse_qkv_with_sdpa_and_keep_three_projections_from_scratch():
    from transformer_ref.train import preset
    from transformer_ref.train.trainer import build_model

    cpu = torch.device("cpu")
    sdpa = build_model(preset("cpu_char"), 11, cpu)  # attn_impl="sdpa"
    assert sdpa.config.qkv_impl == "fused" and hasattr(sdpa.blocks[0].attn, "qkv_proj")
    scratch = build_model(preset("cpu_char", attn_impl="scratch"), 11, cpu)
    assert scratch.config.qkv_impl == "separate" and hasattr(scratch.blocks[0].attn, "q_proj")
    forced = build_model(preset("cpu_char", qkv_impl="separate"), 11, cpu)
    assert forced.config.qkv_impl == "separate"
