"""transformer_ref.attention / masks / numpy_ref against PyTorch's built-ins."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from transformer_ref import numpy_ref
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

TOL = {torch.float64: 1e-10, torch.float32: 1e-5}

# (B, H, T_q, T_k, d_k, d_v): odd shapes included (T_q != T_k, one head, d_k = 1, batch 1)
SHAPES = [(2, 3, 4, 4, 8, 8), (1, 1, 3, 5, 1, 2), (1, 2, 7, 3, 5, 4), (3, 1, 1, 6, 4, 3)]


def maxerr(a, b) -> float:
    return (a - b).abs().max().item()


def qkv(shape, dtype, seed=0):
    B, H, T_q, T_k, d_k, d_v = shape
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T_q, d_k, generator=g, dtype=dtype)
    k = torch.randn(B, H, T_k, d_k, generator=g, dtype=dtype)
    v = torch.randn(B, H, T_k, d_v, generator=g, dtype=dtype)
    return q, k, v


def random_keep_mask(shape, seed=1, p=0.6):
    """Bool keep mask (B, H, T_q, T_k) with at least one key kept in every row."""
    B, H, T_q, T_k = shape[:4]
    g = torch.Generator().manual_seed(seed)
    m = torch.rand(B, H, T_q, T_k, generator=g) < p
    m[..., 0] = True
    return m


# --- softmax ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_softmax_matches_torch(dtype):
    x = torch.randn(3, 4, 7, dtype=dtype) * 5
    for dim in (-1, 0, 1):
        assert maxerr(softmax(x, dim=dim), torch.softmax(x, dim=dim)) <= TOL[dtype]


def test_softmax_is_stable_and_fully_masked_rows_are_zero():
    x = torch.tensor([[1000.0, 1001.0, 999.0], [-1e4, -1e4 + 1, -1e4]])
    assert maxerr(softmax(x), torch.softmax(x, dim=-1)) <= 1e-6
    naive = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)
    assert torch.isnan(naive).any()  # the unstable formula fails here; ours must not
    y = softmax(torch.tensor([[0.0, float("-inf")], [float("-inf"), float("-inf")]]))
    assert torch.equal(y, torch.tensor([[1.0, 0.0], [0.0, 0.0]]))


# --- scaled dot-product attention: parity with F.scaled_dot_product_attention ---------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape", SHAPES)
def test_sdpa_matches_torch_no_mask(shape, dtype):
    q, k, v = qkv(shape, dtype)
    for scale in (None, 1.0, 0.3):
        ours = scaled_dot_product_attention(q, k, v, scale=scale)
        ref = F.scaled_dot_product_attention(q, k, v, scale=scale)
        assert ours.shape == ref.shape == (*shape[:3], shape[5])
        assert maxerr(ours, ref) <= TOL[dtype], (shape, scale)


def test_default_scale_is_one_over_sqrt_dk():
    q, k, v = qkv((1, 1, 3, 3, 16, 4), torch.float64)
    a = scaled_dot_product_attention(q, k, v)
    assert maxerr(a, scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(16))) == 0
    assert maxerr(a, scaled_dot_product_attention(q, k, v, scale=1.0)) > 1e-3


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape", SHAPES)
def test_sdpa_bool_and_additive_masks_match_torch(shape, dtype):
    q, k, v = qkv(shape, dtype)
    keep = random_keep_mask(shape)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert maxerr(scaled_dot_product_attention(q, k, v, mask=keep), ref) <= TOL[dtype]
    additive = mask_to_additive(keep, dtype)
    assert maxerr(scaled_dot_product_attention(q, k, v, mask=additive), ref) <= TOL[dtype]
    # a finite additive bias (not only 0/-inf) is added to the scores, as torch does
    bias = torch.randn(shape[2], shape[3], dtype=dtype)
    ref_b = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert maxerr(scaled_dot_product_attention(q, k, v, mask=bias), ref_b) <= TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_causal_mask_matches_torch_is_causal(dtype):
    q, k, v = qkv((2, 2, 5, 5, 4, 4), dtype)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ours = scaled_dot_product_attention(q, k, v, mask=causal_mask(5))
    assert maxerr(ours, ref) <= TOL[dtype]


def test_weights_rows_sum_to_one_and_match_softmax():
    q, k, v = qkv((2, 3, 4, 6, 5, 2), torch.float64)
    keep = random_keep_mask((2, 3, 4, 6))
    out, w = scaled_dot_product_attention(q, k, v, mask=keep, return_weights=True)
    assert w.shape == (2, 3, 4, 6)
    assert maxerr(w.sum(-1), torch.ones(2, 3, 4, dtype=torch.float64)) <= 1e-12
    assert torch.all(w[~keep] == 0)
    scores = q @ k.transpose(-2, -1) / math.sqrt(5)
    ref_w = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1)
    assert maxerr(w, ref_w) <= 1e-12
    assert maxerr(out, w @ v) <= 1e-12


@pytest.mark.parametrize("mask_kind", ["bool", "additive"])
def test_fully_masked_rows_give_zeros_not_nan(mask_kind):
    q, k, v = qkv((2, 2, 4, 5, 3, 3), torch.float64)
    keep = random_keep_mask((2, 2, 4, 5))
    keep[0, 1, 2, :] = False  # one query of one head sees nothing
    keep[1, :, 0, :] = False
    mask = keep if mask_kind == "bool" else mask_to_additive(keep, torch.float64)
    q.requires_grad_(True)
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert torch.all(out[0, 1, 2] == 0) and torch.all(out[1, :, 0] == 0)
    assert torch.all(w[0, 1, 2] == 0) and torch.all(w[1, :, 0] == 0)
    rows = keep.any(-1)  # the other rows equal torch's result
    ref = F.scaled_dot_product_attention(q.detach(), k, v, attn_mask=keep)
    assert maxerr(out.detach()[rows], ref[rows]) <= 1e-10
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_gradcheck_sdpa_float64():
    q, k, v = qkv((1, 2, 3, 4, 2, 3), torch.float64)
    keep = random_keep_mask((1, 2, 3, 4))
    keep[0, 0, 1] = False  # include a fully masked row
    for t in (q, k, v):
        t.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda a, b, c: scaled_dot_product_attention(a, b, c, mask=keep), (q, k, v)
    )
    assert torch.autograd.gradcheck(scaled_dot_product_attention, (q, k, v))


def test_any_leading_dims():
    q, k, v = qkv((2, 3, 4, 5, 6, 7), torch.float64)
    flat = scaled_dot_product_attention(q.reshape(6, 4, 6), k.reshape(6, 5, 6), v.reshape(6, 5, 7))
    assert maxerr(flat.reshape(2, 3, 4, 7), scaled_dot_product_attention(q, k, v)) <= 1e-12
    one = scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0])  # no batch dims at all
    assert maxerr(one, F.scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0])) <= 1e-10


def test_dropout_p():
    q, k, v = qkv((1, 1, 3, 3, 2, 2), torch.float64)
    assert torch.all(scaled_dot_product_attention(q, k, v, dropout_p=1.0) == 0)
    torch.manual_seed(0)
    dropped = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert maxerr(dropped, scaled_dot_product_attention(q, k, v)) > 1e-3


# --- cosine-similarity attention (the Transformer-block blog post)
# ---------------------------------------------------
def test_cosine_similarity_attention():
    q, k, v = qkv((2, 2, 3, 4, 5, 2), torch.float64)
    out, w = cosine_similarity_attention(q, k, v, temperature=0.5, return_weights=True)
    cos = F.cosine_similarity(q[..., :, None, :], k[..., None, :, :], dim=-1)  # (B,H,T_q,T_k)
    assert maxerr(w, torch.softmax(cos / 0.5, dim=-1)) <= 1e-12
    assert maxerr(out, torch.softmax(cos / 0.5, dim=-1) @ v) <= 1e-12
    # scores do not change when q or k are rescaled
    out2 = cosine_similarity_attention(3.0 * q, 0.1 * k, v, temperature=0.5)
    assert maxerr(out, out2) <= 1e-12


# --- column form (the column-vector lecture notes) is the row form transposed
# ----------------------------------------
@pytest.mark.parametrize("n,d,dp", [(5, 4, 3), (1, 2, 2), (6, 3, 1)])
def test_column_form_is_row_form_transposed(n, d, dp):
    g = torch.Generator().manual_seed(3)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)  # rows = tokens
    Q, K, V = (torch.randn(dp, d, generator=g, dtype=torch.float64) for _ in range(3))
    Y_cols, A = column_form_self_attention(X.T, Q, K, V, return_weights=True)
    assert Y_cols.shape == (dp, n) and A.shape == (n, n)
    assert maxerr(A.sum(dim=0), torch.ones(n, dtype=torch.float64)) <= 1e-12  # columns sum to 1
    out, W = scaled_dot_product_attention(X @ Q.T, X @ K.T, X @ V.T, scale=1.0, return_weights=True)
    assert maxerr(A, W.T) <= 1e-12
    assert maxerr(Y_cols, out.T) <= 1e-12
    # and literally y_j = sum_i A_ij V x_i for one j
    j = n - 1
    y_j = sum(A[i, j] * (V @ X[i]) for i in range(n))
    assert maxerr(Y_cols[:, j], y_j) <= 1e-12


# --- masks ------------------------------------------------------------------------------------
def test_causal_mask_matches_torch_square_subsequent_mask():
    for T in (1, 4, 7):
        additive = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
        assert torch.equal(mask_to_additive(causal_mask(T), torch.float64), additive)


def test_causal_mask_with_offset_is_bottom_right():
    full = causal_mask(5)
    assert torch.equal(causal_mask(2, 5), full[3:])  # the last 2 queries of a length-5 sequence
    assert torch.equal(causal_mask(1, 5), torch.ones(1, 5, dtype=torch.bool))


def test_padding_masks_and_combination():
    ids = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 0, 0, 0], [1, 2, 3, 4, 5]])
    from_ids = padding_mask_from_ids(ids, pad_id=0)
    from_len = padding_mask_from_lengths(torch.tensor([3, 2, 5]), 5)
    assert from_ids.shape == from_len.shape == (3, 1, 1, 5)
    assert torch.equal(from_ids, from_len)
    assert torch.equal(padding_mask_from_lengths([3, 2, 5]), from_len)  # T_k from max length
    m = combine_masks(causal_mask(5), None, from_ids)
    assert m.shape == (3, 1, 5, 5)
    assert torch.equal(m, causal_mask(5)[None, None] & from_ids)
    assert combine_masks(None, None) is None
    # padding masks broadcast to (B, H, T_q, T_k) and agree with torch's key padding
    q, k, v = qkv((3, 2, 5, 5, 4, 4), torch.float64)
    ours = scaled_dot_product_attention(q, k, v, mask=m)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m.expand(3, 2, 5, 5))
    assert maxerr(ours, ref) <= 1e-10


# --- numpy == torch ---------------------------------------------------------------------------
def test_numpy_softmax_attention_layernorm_match_torch():
    q, k, v = qkv((2, 2, 3, 5, 4, 3), torch.float64)
    keep = random_keep_mask((2, 2, 3, 5))
    keep[1, 1, 0] = False
    assert maxerr(torch.from_numpy(numpy_ref.softmax(q.numpy())), torch.softmax(q, -1)) <= 1e-12
    for mask in (None, keep, mask_to_additive(keep, torch.float64)):
        m_np = None if mask is None else mask.numpy()
        out_np, w_np = numpy_ref.scaled_dot_product_attention(
            q.numpy(), k.numpy(), v.numpy(), mask=m_np, return_weights=True
        )
        out_t, w_t = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
        assert not np.isnan(out_np).any()
        assert maxerr(torch.from_numpy(out_np), out_t) <= 1e-12
        assert maxerr(torch.from_numpy(w_np), w_t) <= 1e-12
    out_np = numpy_ref.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), scale=1.0)
    ref = F.scaled_dot_product_attention(q, k, v, scale=1.0)
    assert maxerr(torch.from_numpy(out_np), ref) <= 1e-10
    x = torch.randn(3, 4, 6, dtype=torch.float64)
    gamma, beta = torch.randn(6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    ln_np = numpy_ref.layer_norm(x.numpy(), gamma.numpy(), beta.numpy(), eps=1e-5)
    assert maxerr(torch.from_numpy(ln_np), F.layer_norm(x, (6,), gamma, beta, 1e-5)) <= 1e-10
