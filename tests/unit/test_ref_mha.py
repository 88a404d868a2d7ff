"""transformer_ref.mha.MultiHeadAttention against torch.nn.MultiheadAttention."""

import pytest
import torch
import torch.nn as nn
from torch.func import functional_call

from transformer_ref.attention import column_form_self_attention, mask_to_additive
from transformer_ref.masks import causal_mask
from transformer_ref.mha import LayerKVCache, MultiHeadAttention

TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def maxerr(a, b) -> float:
    return (a - b).abs().max().item()


def pair(d_model, n_head, dtype, bias=True, fused=False, seed=0, **kw):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(d_model, n_head, bias=bias, batch_first=True).to(dtype)
    with torch.no_grad():  # torch zero-inits the biases; make them matter
        for p in ref.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    ours = MultiHeadAttention(d_model, n_head, bias=bias, fused_qkv=fused, **kw).to(dtype)
    return ours.load_from_torch(ref), ref


# (B, T_q, T_k, d_model, n_head): one head, d_k = 1 (d_model == n_head), batch 1, T_q != T_k
CASES = [(2, 5, 5, 8, 2), (1, 3, 6, 4, 1), (3, 4, 2, 3, 3), (1, 1, 4, 6, 2)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_matches_nn_multihead_attention(case, bias, fused, dtype):
    B, T_q, T_k, d, H = case
    ours, ref = pair(d, H, dtype, bias=bias, fused=fused)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T_q, d, generator=g, dtype=dtype)
    mem = torch.randn(B, T_k, d, generator=g, dtype=dtype)
    tol = TOL[dtype]
    if T_q == T_k:  # self-attention
        assert maxerr(ours(x), ref(x, x, x, need_weights=False)[0]) <= tol
    # cross-attention
    assert maxerr(ours(x, context=mem), ref(x, mem, mem, need_weights=False)[0]) <= tol
    # torch's key_padding_mask: True = ignore; ours: keep masks broadcast to (B, H, T_q, T_k)
    kpm = torch.zeros(B, T_k, dtype=torch.bool)
    kpm[0, T_k // 2 + 1 :] = True
    attn_mask = torch.rand(T_q, T_k, generator=g) < 0.3
    attn_mask[:, 0] = False  # every query keeps key 0, so no row is fully masked
    keep = ~kpm[:, None, None, :] & ~attn_mask
    out_ref = ref(x, mem, mem, key_padding_mask=kpm, attn_mask=attn_mask, need_weights=False)[0]
    assert maxerr(ours(x, context=mem, mask=keep), out_ref) <= tol
    # additive float attn_mask
    add = torch.randn(T_q, T_k, generator=g, dtype=dtype)
    out_ref = ref(x, mem, mem, attn_mask=add, need_weights=False)[0]
    assert maxerr(ours(x, context=mem, mask=add), out_ref) <= tol


def test_attention_weights_match_torch():
    ours, ref = pair(8, 4, torch.float64)
    x, mem = torch.randn(2, 3, 8, dtype=torch.float64), torch.randn(2, 5, 8, dtype=torch.float64)
    out, w = ours(x, context=mem, need_weights=True)
    out_r, w_r = ref(x, mem, mem, average_attn_weights=False)
    assert w.shape == (2, 4, 3, 5)
    assert maxerr(out, out_r) <= 1e-10 and maxerr(w, w_r) <= 1e-10
    assert maxerr(w.mean(1), ref(x, mem, mem)[1]) <= 1e-10  # torch's default: head average


def test_causal_matches_torch_is_causal():
    ours, ref = pair(8, 2, torch.float64)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    m = nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.float64)
    out_ref = ref(x, x, x, attn_mask=m, is_causal=True, need_weights=False)[0]
    assert maxerr(ours(x, is_causal=True), out_ref) <= 1e-10
    assert maxerr(ours(x, mask=causal_mask(6)), out_ref) <= 1e-10


def test_fully_masked_query_gives_zero_attention_not_nan():
    ours, ref = pair(4, 2, torch.float64, bias=False)
    x = torch.randn(1, 3, 4, dtype=torch.float64)
    keep = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    keep[..., 1, :] = False
    out = ours(x, mask=keep)
    assert not torch.isnan(out).any()
    assert torch.all(out[0, 1] == 0)  # no bias: zero attention output -> zero after W_O
    out_ref = ref(x, x, x, attn_mask=~keep[0, 0], need_weights=False)[0]
    rows = torch.tensor([0, 2])
    assert maxerr(out[:, rows], out_ref[:, rows]) <= 1e-10


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_scratch_and_sdpa_agree(dtype):
    torch.manual_seed(0)
    a = MultiHeadAttention(12, 3, attn_impl="scratch").to(dtype)
    b = MultiHeadAttention(12, 3, attn_impl="sdpa").to(dtype)
    b.load_state_dict(a.state_dict())
    x, mem = torch.randn(2, 5, 12, dtype=dtype), torch.randn(2, 7, 12, dtype=dtype)
    keep = torch.rand(2, 1, 5, 7) < 0.7
    keep[..., 0] = True
    tol = TOL[dtype]
    assert maxerr(a(x), b(x)) <= tol
    assert maxerr(a(x, is_causal=True), b(x, is_causal=True)) <= tol
    assert maxerr(a(x, context=mem, mask=keep), b(x, context=mem, mask=keep)) <= tol
    add = mask_to_additive(keep, dtype)
    assert maxerr(a(x, context=mem, mask=add), b(x, context=mem, mask=add)) <= tol
    kp = keep[:, :, :1, :5]  # key padding + causal together
    assert maxerr(a(x, mask=kp, is_causal=True), b(x, mask=kp, is_causal=True)) <= tol


@pytest.mark.parametrize("attn_impl", ["scratch", "sdpa"])
def test_kv_cache_incremental_equals_full(attn_impl):
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, attn_impl=attn_impl).double()
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    full = mha(x, is_causal=True)
    cache = LayerKVCache()
    steps = [mha(x[:, :3], is_causal=True, cache=cache)]
    steps += [mha(x[:, t : t + 1], is_causal=True, cache=cache) for t in range(3, 5)]
    steps += [mha(x[:, 5:], is_causal=True, cache=cache)]  # a 2-token chunk after the cache
    assert cache.length == 7
    assert maxerr(torch.cat(steps, dim=1), full) <= 1e-10


def test_seed000_msa_is_concatenated_column_form_heads():
    torch.manual_seed(0)
    d, H, n = 6, 3, 5
    msa = MultiHeadAttention.seed000_msa(d, H).double()
    assert msa.out_proj is None and msa.q_proj.bias is None
    X = torch.randn(n, d, dtype=torch.float64)  # n tokens as rows
    heads = []
    for h in range(H):
        rows = slice(h * (d // H), (h + 1) * (d // H))  # Q_h in R^{d' x d}
        Q_h, K_h, V_h = (lin.weight[rows] for lin in (msa.q_proj, msa.k_proj, msa.v_proj))
        heads.append(column_form_self_attention(X.T, Q_h, K_h, V_h).T)  # (n, d')
    assert maxerr(msa(X[None])[0], torch.cat(heads, dim=-1)) <= 1e-10
    wide = MultiHeadAttention.seed000_msa(4, 2, d_prime=5)  # any d', output H * d'
    assert wide(torch.randn(1, 3, 4)).shape == (1, 3, 10)


@pytest.mark.parametrize("fused", [False, True])
def test_gradcheck_float64(fused):
    torch.manual_seed(0)
    mha = MultiHeadAttention(4, 2, fused_qkv=fused).double()
    params = {k: v.detach().requires_grad_(True) for k, v in mha.named_parameters()}
    names = list(params)
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    mem = torch.randn(2, 2, 4, dtype=torch.float64, requires_grad=True)
    keep = torch.tensor([[True, False]])

    def f(x, mem, *ps):  # inputs and every weight
        return functional_call(mha, dict(zip(names, ps)), (x,), {"context": mem, "mask": keep})

    assert torch.autograd.gradcheck(f, (x, mem, *params.values()))
    assert torch.autograd.gradcheck(lambda x: mha(x, is_causal=True), (x,))


def test_load_from_torch_rejects_mismatch():
    ref = nn.MultiheadAttention(8, 2, bias=False, batch_first=True)
    with pytest.raises(ValueError):
        MultiHeadAttention(8, 2, bias=True).load_from_torch(ref)
    with pytest.raises(ValueError):
        MultiHeadAttention(8, 4, bias=False).load_from_torch(ref)
    with pytest.raises(ValueError):
        MultiHeadAttention(7, 2)
