"""Chapter answers for ``tests/unit/test_checks_multihead_attention.py`` (and the verdict tests that
judge the same answers through a record): the right and the catalogued wrong
implementations, written as a student would."""

import math

import torch

from autograder.checks import table

# {function: check key} of the chapter (the exercise table)
KEY = table.keys("03_multihead_attention")


def attend(q, k, v, mask=None, scale=None):
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def good_msa(X, heads):
    return torch.cat([attend(X @ a, X @ b, X @ c, scale=1.0) for a, b, c in heads], dim=-1)


def good_split(x, n_head):
    B, T, D = x.shape
    return x.reshape(B, T, n_head, D // n_head).permute(0, 2, 1, 3)


def good_merge(x):
    B, H, T, d = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, H * d)


def good_mha(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    q, k, v = good_split(x_q @ W_Q, n_head), good_split(x_kv @ W_K, n_head), good_split(
        x_kv @ W_V, n_head
    )
    return good_merge(attend(q, k, v, mask)) @ W_O


def good_count(d_model, n_head, bias=True):
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def good_fused(x, W_QKV):
    d = W_QKV.shape[0]
    y = x @ W_QKV
    return y[..., :d], y[..., d : 2 * d], y[..., 2 * d :]


def good_weights(m):
    d = m.embed_dim
    W = m.in_proj_weight.detach()
    return W[:d].T, W[d : 2 * d].T, W[2 * d :].T, m.out_proj.weight.detach().T


GOOD = {
    KEY["msa_loop"]: good_msa,
    KEY["split_heads"]: good_split,
    KEY["merge_heads"]: good_merge,
    KEY["multi_head_attention"]: good_mha,
    KEY["mha_parameter_count"]: good_count,
    KEY["fused_qkv"]: good_fused,
    KEY["weights_from_torch"]: good_weights,
}


# every exercise of the chapter: {check key: its Check declaration} (the exercise table)
CHECKS = table.declarations("03_multihead_attention")


def msa_reversed(X, heads):
    return torch.cat([attend(X @ a, X @ b, X @ c, scale=1.0) for a, b, c in reversed(heads)], -1)


def msa_scaled(X, heads):
    return torch.cat([attend(X @ a, X @ b, X @ c) for a, b, c in heads], dim=-1)


def msa_summed(X, heads):
    out = 0
    for a, b, c in heads:
        out = out + attend(X @ a, X @ b, X @ c, scale=1.0)
    return out


def msa_stacked(X, heads):
    return torch.stack([attend(X @ a, X @ b, X @ c, scale=1.0) for a, b, c in heads], dim=0)


def msa_cat_default_dim(X, heads):
    outputs = [attend(X @ a, X @ b, X @ c, scale=1.0) for a, b, c in heads]
    return torch.cat(outputs)


def split_reshape(x, n_head):
    B, T, D = x.shape
    return x.reshape(B, n_head, T, D // n_head)


def split_no_transpose(x, n_head):
    B, T, D = x.shape
    return x.view(B, T, n_head, -1)


def split_interleaved(x, n_head):
    B, T, D = x.shape
    return x.view(B, T, -1, n_head).transpose(1, 3).transpose(2, 3)


def merge_reshape(x):
    B, H, T, d = x.shape
    return x.reshape(B, T, H * d)


def merge_reversed(x):
    return torch.cat([x[:, h] for h in range(x.shape[1] - 1, -1, -1)], dim=-1)


def merge_interleaved(x):
    B, H, T, d = x.shape
    return x.transpose(1, 2).transpose(2, 3).reshape(B, T, H * d)


def _mha(x_q, x_kv, Ws, n_head, mask, split=good_split, merge=good_merge, scale=None, wo=True):
    W_Q, W_K, W_V, W_O = Ws
    q, k, v = split(x_q @ W_Q, n_head), split(x_kv @ W_K, n_head), split(x_kv @ W_V, n_head)
    y = merge(attend(q, k, v, mask, scale))
    return y @ W_O if wo else y


def mha_reshape_both(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    return _mha(x_q, x_kv, (W_Q, W_K, W_V, W_O), n_head, mask, split_reshape, merge_reshape)


def mha_reshape_split(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    return _mha(x_q, x_kv, (W_Q, W_K, W_V, W_O), n_head, mask, split=split_reshape)


def mha_sqrt_d_model(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    d_model = x_q.shape[-1]
    return _mha(x_q, x_kv, (W_Q, W_K, W_V, W_O), n_head, mask, scale=d_model**-0.5)


def mha_no_wo(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    return _mha(x_q, x_kv, (W_Q, W_K, W_V, W_O), n_head, mask, wo=False)


def mha_wo_per_head(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    q, k, v = (good_split(t, n_head) for t in (x_q @ W_Q, x_kv @ W_K, x_kv @ W_V))
    heads = attend(q, k, v, mask)  # (B, H, T, d_k)
    d_k = heads.shape[-1]
    outs = [heads[:, h] @ W_O[h * d_k : (h + 1) * d_k] for h in range(n_head)]
    return torch.stack(outs).mean(0)


def mha_reversed(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    return _mha(x_q, x_kv, (W_Q, W_K, W_V, W_O), n_head, mask, merge=merge_reversed)


def mha_query_length(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    B, T, D = x_q.shape  # T used for keys and values too

    def split(t, H):
        return t.view(B, T, H, D // H).transpose(1, 2)

    return _mha(x_q, x_kv, (W_Q, W_K, W_V, W_O), n_head, mask, split=split)


def count_per_head(d_model, n_head, bias=True):
    per_head = 3 * d_model * d_model + (3 * d_model if bias else 0)
    return n_head * per_head + d_model * d_model + (d_model if bias else 0)


def count_no_wo(d_model, n_head, bias=True):
    return 3 * (d_model * d_model + (d_model if bias else 0))


def count_no_bias(d_model, n_head, bias=True):
    return 4 * d_model**2


def mha_kv_from_x_q(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    q = good_split(x_q @ W_Q, n_head)
    k = good_split(x_q @ W_K, n_head)  # x_q where x_kv belongs
    v = good_split(x_q @ W_V, n_head)
    return good_merge(attend(q, k, v, mask)) @ W_O


def fused_split3_first_three(x, W_QKV):  # split(3) read as "three pieces", the extra ones cut
    q, k, v = (x @ W_QKV).split(3, dim=-1)[:3]
    return q, k, v


def fused_split3_all(x, W_QKV):
    return (x @ W_QKV).split(3, dim=-1)


def fused_time_axis(x, W_QKV):
    q, k, v = torch.chunk(x @ W_QKV, 3, dim=1)
    return q, k, v


def fused_every_third(x, W_QKV):
    y = x @ W_QKV
    return y[:, :, 0::3], y[:, :, 1::3], y[:, :, 2::3]


def fused_split_count(x, W_QKV):  # split(3) read as "three pieces"
    q, k, v = (x @ W_QKV).split(3, dim=-1)
    return q, k, v


def fused_split_default_dim(x, W_QKV):
    d = W_QKV.shape[1] // 3
    q, k, v = torch.split(x @ W_QKV, d)
    return q, k, v


def fused_true_division(x, W_QKV):
    d = W_QKV.shape[1] / 3
    q, k, v = (x @ W_QKV).split(d, dim=-1)
    return q, k, v


def weights_untransposed(m):
    W_q, W_k, W_v = m.in_proj_weight.detach().chunk(3)
    return W_q, W_k, W_v, m.out_proj.weight.detach()


def weights_wo_untransposed(m):
    W_q, W_k, W_v = m.in_proj_weight.detach().chunk(3)
    return W_q.T, W_k.T, W_v.T, m.out_proj.weight.detach()


def weights_wrong_axis(m):
    W_q, W_k, W_v = torch.chunk(m.in_proj_weight.detach(), 3, dim=1)
    return W_q.T, W_k.T, W_v.T, m.out_proj.weight.detach().T


def msa_scale_zero(X, heads):  # "no scaling" read as scale=0
    return torch.cat([attend(X @ a, X @ b, X @ c, scale=0) for a, b, c in heads], dim=-1)


def split_transpose_1_3(x, n_head):
    B, T, D = x.shape
    return x.view(B, T, n_head, D // n_head).transpose(1, 3)


def merge_transpose_0_2(x):
    B, H, T, d = x.shape
    return x.transpose(0, 2).reshape(B, T, H * d)


def merge_transpose_1_3(x):
    B, H, T, d = x.shape
    return x.transpose(1, 3).reshape(B, T, H * d)


def count_one_matrix(d_model, n_head, bias=True):
    weights = d_model * d_model
    return weights + (4 * d_model if bias else 0)


def count_weight_as_vector(d_model, n_head, bias=True):
    weights = 4 * d_model
    return weights + (4 * d_model if bias else 0)


def fused_size_upside_down(x, W_QKV):
    d = 3 // W_QKV.shape[1]
    q, k, v = (x @ W_QKV).split(d, dim=-1)
    return q, k, v


def weights_unpacked(m):
    W_q, W_k, W_v = m.in_proj_weight.detach()  # iterates over the 3 d_model rows
    return W_q.T, W_k.T, W_v.T, m.out_proj.weight.detach().T


def weights_chunk_2(m):
    W_q, W_k, W_v = m.in_proj_weight.detach().chunk(2, dim=0)
    return W_q.T, W_k.T, W_v.T, m.out_proj.weight.detach().T


# (key, wrong implementation, mistake name it must be reported as)
WRONG = [
    (KEY["msa_loop"], msa_reversed, "heads concatenated in the wrong order"),
    (KEY["msa_loop"], msa_scaled, "scaled the scores by 1/sqrt(d')"),
    (KEY["msa_loop"], msa_summed, "summed the heads instead of concatenating"),
    (KEY["msa_loop"], msa_stacked, "stacked the heads on a new axis"),
    (KEY["msa_loop"], msa_cat_default_dim,
     "heads concatenated along the first axis (torch.cat without dim=-1)"),
    # issue 32 (bench.mutation's named share): scale=0, the wrong axes transposed, a weight
    # matrix miscounted, the split size upside down, in_proj_weight unpacked
    (KEY["msa_loop"], msa_scale_zero, "passed scale=0 for 'no scaling'"),
    (KEY["split_heads"], split_transpose_1_3, "transposed the wrong pair of axes"),
    (KEY["merge_heads"], merge_transpose_0_2, "transposed the wrong pair of axes"),
    (KEY["merge_heads"], merge_transpose_1_3, "transposed the wrong pair of axes"),
    (KEY["mha_parameter_count"], count_one_matrix, "counted one weight matrix, not four"),
    (KEY["mha_parameter_count"], count_weight_as_vector,
     "counted each weight matrix as d_model entries"),
    (KEY["fused_qkv"], fused_size_upside_down,
     "split size is 0 (3 // width instead of width // 3)"),
    (KEY["weights_from_torch"], weights_unpacked,
     "in_proj_weight split into the wrong number of pieces"),
    (KEY["weights_from_torch"], weights_chunk_2,
     "in_proj_weight split into the wrong number of pieces"),
    (KEY["split_heads"], split_reshape,
     "reshape to heads without transposing (heads mixed across positions)"),
    (KEY["split_heads"], split_no_transpose, "forgot the transpose"),
    (KEY["split_heads"],
     split_interleaved, "heads interleaved instead of contiguous"),
    (KEY["merge_heads"], merge_reshape,
     "reshape without transposing (heads mixed across positions)"),
    (KEY["merge_heads"], merge_reversed, "heads concatenated in the wrong order"),
    (KEY["merge_heads"],
     merge_interleaved, "heads interleaved instead of concatenated"),
    (KEY["multi_head_attention"], mha_reshape_both,
     "reshape to heads without transposing (heads mixed across positions)"),
    (KEY["multi_head_attention"], mha_reshape_split,
     "reshape to heads without transposing (heads mixed across positions)"),
    (KEY["multi_head_attention"],
     mha_sqrt_d_model, "scaled by sqrt(d_model) instead of sqrt(d_k)"),
    (KEY["multi_head_attention"], mha_no_wo, "forgot W_O"),
    (KEY["multi_head_attention"], mha_wo_per_head, "applied W_O per head"),
    (KEY["multi_head_attention"],
     mha_reversed, "heads concatenated in the wrong order"),
    (KEY["multi_head_attention"], mha_query_length,
     "used the query length for the key dimension in cross-attention"),
    # issue 32: named "shapes do not line up" by the padded case's mask error
    (KEY["multi_head_attention"], mha_kv_from_x_q,
     "keys and values projected from x_q instead of x_kv"),
    (KEY["mha_parameter_count"],
     count_per_head, "a full d_model x d_model projection per head"),
    (KEY["mha_parameter_count"], count_no_wo, "forgot W_O"),
    (KEY["mha_parameter_count"], count_no_bias, "forgot the biases"),
    # mutation testing (issue 18): the biases miscounted, W_O's weight forgotten
    (KEY["mha_parameter_count"],
     lambda d, h, bias=True: 4 * d * d + (d if bias else 0), "one bias for all four projections"),
    (KEY["mha_parameter_count"],
     lambda d, h, bias=True: 4 * d * d + (3 * d if bias else 0), "forgot W_O's bias"),
    (KEY["mha_parameter_count"],
     lambda d, h, bias=True: 4 * d * d + (4 if bias else 0), "counted each bias as one parameter"),
    (KEY["mha_parameter_count"],
     lambda d, h, bias=True: 3 * d * d + (4 * d if bias else 0),
     "forgot W_O's weight (but counted its bias)"),
    (KEY["fused_qkv"], fused_time_axis, "split along the wrong axis"),
    (KEY["fused_qkv"], fused_every_third, "took every third column"),
    (KEY["fused_qkv"], fused_split_count, "split into the wrong number of pieces"),
    (KEY["fused_qkv"], fused_split_default_dim, "split into the wrong number of pieces"),
    (KEY["fused_qkv"], fused_true_division, "split size is a float (/ instead of //)"),
    # issue 32: with d = 4, pieces of 3 were named "length off by one"
    (KEY["fused_qkv"], fused_split3_first_three,
     "split(3) cut pieces of 3 columns (its argument is the piece size, not the count)"),
    (KEY["fused_qkv"], fused_split3_all,
     "split(3) cut pieces of 3 columns (its argument is the piece size, not the count)"),
    (KEY["weights_from_torch"],
     weights_untransposed, "transposed weight convention (W vs Wᵀ)"),
    (KEY["weights_from_torch"], weights_wo_untransposed, "W_O not transposed"),
    (KEY["weights_from_torch"],
     weights_wrong_axis, "split in_proj_weight along the wrong axis"),
]

# catalogue entries added or corrected for issue 32 (a class of 51 single-mistake students):
# each names no other mistake of its exercise
ISSUE_32 = [
    (KEY["multi_head_attention"], "keys and values projected from x_q instead of x_kv"),
    (KEY["fused_qkv"],
     "split(3) cut pieces of 3 columns (its argument is the piece size, not the count)"),
]
