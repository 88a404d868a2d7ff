"""Chapter answers for ``tests/unit/test_checks_masking.py`` (and the verdict tests that
judge the same answers through a record): the right and the catalogued wrong
implementations, written as a student would."""

import math

import torch

from autograder.checks import table

# {function: check key} of the chapter (the exercise table)
KEY = table.keys("02_masking")


NEG_INF = float("-inf")


def good_causal(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))


def good_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, NEG_INF)


def good_lengths(lengths, T):
    return (torch.arange(T) < lengths.unsqueeze(1)).view(-1, 1, 1, T)


def good_ids(ids, pad_id):
    return (ids != pad_id).unsqueeze(1).unsqueeze(2)


def good_decoder(ids, pad_id):
    T = ids.shape[1]
    return good_ids(ids, pad_id) & good_causal(T)


def _stable_softmax(s):
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(m.isfinite(), m, torch.zeros_like(m)))
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


def good_masked(q, k, v, mask):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask.dtype == torch.bool:
        s = s.masked_fill(~mask, NEG_INF)
    else:
        s = s + mask
    return _stable_softmax(s) @ v


def masked_ignored(q, k, v, mask):  # the mask never reaches the scores
    return _stable_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])) @ v


def masked_bool_added(q, k, v, mask):  # to_additive skipped: True/False added as 1/0
    return _stable_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + mask) @ v


def good_leak(f, x, t, delta):
    x2 = x.clone()
    x2[..., t + 1 :, :] = x2[..., t + 1 :, :] + delta[..., t + 1 :, :]
    return float((f(x2) - f(x))[..., : t + 1, :].abs().max())


def good_grad(f, x, t):
    x = x.detach().clone().requires_grad_(True)
    f(x)[..., t, :].sum().backward()
    return x.grad


GOOD = {
    KEY["causal_mask"]: good_causal,
    KEY["to_additive"]: good_additive,
    KEY["padding_mask_from_lengths"]: good_lengths,
    KEY["padding_mask_from_ids"]: good_ids,
    KEY["decoder_self_attention_mask"]: good_decoder,
    KEY["masked_attention"]: good_masked,
    KEY["future_leak"]: good_leak,
    KEY["grad_of_position"]: good_grad,
}


# every exercise of the chapter: {check key: its Check declaration} (the exercise table)
CHECKS = table.declarations("02_masking")


def causal_strict(T):
    return torch.ones(T, T).tril(diagonal=-1).bool()


def causal_plus_one(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=1)


def causal_drop_mask(T):  # True where masked (nn.MultiheadAttention's convention)
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)


def causal_triu(T):
    return torch.triu(torch.ones(T, T)) == 1


def causal_float(T):
    return torch.tril(torch.ones(T, T))


def causal_additive(T):
    return torch.full((T, T), NEG_INF).triu(1)


def additive_inverted(mask, dtype=torch.float32):
    return torch.where(mask, torch.tensor(NEG_INF, dtype=dtype), torch.tensor(0.0, dtype=dtype))


def additive_big_negative(mask, dtype=torch.float32):
    return (~mask).to(dtype) * -1e9


def additive_float(mask, dtype=torch.float32):
    return mask.to(dtype)


def additive_no_dtype(mask, dtype=torch.float32):
    return torch.zeros(mask.shape).masked_fill(~mask, NEG_INF)


def lengths_le(lengths, T):
    return (torch.arange(T) <= lengths[:, None])[:, None, None, :]


def lengths_inverted(lengths, T):
    return (torch.arange(T) >= lengths[:, None])[:, None, None, :]


def lengths_query_axis(lengths, T):
    return (torch.arange(T) < lengths[:, None])[:, None, :, None]


def lengths_2d(lengths, T):
    return torch.arange(T).expand(len(lengths), T) < lengths.unsqueeze(-1)


def lengths_3d(lengths, T):
    return lengths_2d(lengths, T).unsqueeze(1)


def ids_inverted(ids, pad_id):
    return (ids == pad_id)[:, None, None]


def ids_zero(ids, pad_id):
    return (ids != 0)[:, None, None]


def ids_query_axis(ids, pad_id):
    return (ids != pad_id)[:, None, :, None]


def ids_2d(ids, pad_id):
    return ids != pad_id


def ids_3d(ids, pad_id):
    return (ids != pad_id)[:, None]


def ids_right_padded(ids, pad_id):  # issue 32: each row's real tokens counted, kept in front
    B, T = ids.shape
    mask = torch.zeros(B, 1, 1, T, dtype=torch.bool)
    for b in range(B):
        n = int((ids[b] != pad_id).sum())
        mask[b, 0, 0, :n] = True
    return mask


def _pad_and_causal(ids, pad_id, combine, pad=True, causal=True, axis="key"):
    B, T = ids.shape
    keep = ids != pad_id
    p = keep.view(B, 1, 1, T) if axis == "key" else keep.view(B, 1, T, 1)
    c = torch.tril(torch.ones(T, T, dtype=torch.bool))
    if not pad:
        return c.repeat(B, 1, 1, 1)
    if not causal:
        return p.repeat(1, 1, T, 1)
    return combine(p, c)


def decoder_or(ids, pad_id):
    return _pad_and_causal(ids, pad_id, lambda p, c: p | c)


def decoder_query_axis(ids, pad_id):
    return _pad_and_causal(ids, pad_id, lambda p, c: p & c, axis="query")


def decoder_no_pad(ids, pad_id):
    return _pad_and_causal(ids, pad_id, None, pad=False)


def decoder_no_causal(ids, pad_id):
    return _pad_and_causal(ids, pad_id, None, causal=False)


def decoder_3d(ids, pad_id):
    return good_decoder(ids, pad_id).squeeze(1)


def _scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _keep(mask):
    return mask if mask.dtype == torch.bool else mask == 0


def masked_after_softmax(q, k, v, mask):
    w = torch.softmax(_scores(q, k), dim=-1)
    return (w * _keep(mask)) @ v


def masked_inverted(q, k, v, mask):
    s = _scores(q, k).masked_fill(_keep(mask), NEG_INF)
    return _stable_softmax(s) @ v


def masked_torch_softmax(q, k, v, mask):
    s = _scores(q, k)
    s = s.masked_fill(~mask, NEG_INF) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, dim=-1) @ v


def masked_nan_to_num_output(q, k, v, mask):  # issue 32: the nan row's output set to 0
    return masked_torch_softmax(q, k, v, mask).nan_to_num(0.0)


def masked_nan_to_num_weights(q, k, v, mask):  # issue 32: the nan row's weights set to 0
    s = _scores(q, k)
    s = s.masked_fill(~mask, NEG_INF) if mask.dtype == torch.bool else s + mask
    return torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0) @ v


def masked_multiplied(q, k, v, mask):
    return _stable_softmax(_scores(q, k) * _keep(mask)) @ v


def masked_additive_as_bool(q, k, v, mask):
    s = _scores(q, k).masked_fill(~mask.bool(), NEG_INF)
    return _stable_softmax(s) @ v


def masked_unscaled(q, k, v, mask):
    s = q @ k.transpose(-2, -1)
    s = s.masked_fill(~mask, NEG_INF) if mask.dtype == torch.bool else s + mask
    return _stable_softmax(s) @ v


def masked_float_tilde(q, k, v, mask):  # ~ on an additive (float) mask raises
    return _stable_softmax(_scores(q, k).masked_fill(~mask, NEG_INF)) @ v


def masked_unsqueeze_heads(q, k, v, mask):  # a (B, 1, 1, T) mask pushed to 5 axes on 4-d scores
    if mask.dim() == 4:
        mask = mask.unsqueeze(1).squeeze(2).squeeze(2)  # (B, 1, T): B lined up with heads
    return good_masked(q, k, v, mask)


def leak_off_by_one(f, x, t, delta):
    x2 = x.clone()
    x2[..., t:, :] += delta[..., t:, :]
    return (f(x2)[..., : t + 1, :] - f(x)[..., : t + 1, :]).abs().max().item()


def leak_all_positions(f, x, t, delta):
    x2 = x.clone()
    x2[..., t + 1 :, :] += delta[..., t + 1 :, :]
    return (f(x2) - f(x)).abs().max().item()


def leak_later_outputs(f, x, t, delta):
    x2 = x.clone()
    x2[..., t + 1 :, :] += delta[..., t + 1 :, :]
    return (f(x2)[..., t + 1 :, :] - f(x)[..., t + 1 :, :]).abs().max().item()


def leak_past(f, x, t, delta):
    x2 = x.clone()
    x2[..., : t + 1, :] += delta[..., : t + 1, :]
    return (f(x2)[..., : t + 1, :] - f(x)[..., : t + 1, :]).abs().max().item()


def _grad(f, x, pick):
    x = x.clone().requires_grad_()
    pick(f(x)).sum().backward()
    return x.grad


def grad_all(f, x, t):
    return _grad(f, x, lambda y: y)


def grad_feature(f, x, t):
    return _grad(f, x, lambda y: y[..., t])


def grad_prefix(f, x, t):
    return _grad(f, x, lambda y: y[..., : t + 1, :])


# (key, wrong implementation, mistake name it must be reported as, only on the graded path)
def masked_slip(d_k=lambda q: math.sqrt(q.shape[-1]), times=False, max_dim=-1, max_keep=True,
                sum_dim=-1, sum_keep=True, divide=lambda z: torch.where(z == 0, 1.0, z)):
    """The exercise's steps written out, with one of them slipped (issue 32: classes of
    mutants the mutation report found unnamed)."""

    def f(q, k, v, mask):
        s = q @ k.transpose(-2, -1)
        s = s * d_k(q) if times else s / d_k(q)
        s = s.masked_fill(~mask, NEG_INF) if mask.dtype == torch.bool else s + mask
        m = s.max(dim=max_dim, keepdim=max_keep).values
        e = torch.exp(s - torch.where(m.isfinite(), m, torch.zeros_like(m)))
        z = e.sum(dim=sum_dim, keepdim=sum_keep)
        return e / divide(z) @ v

    return f


NAN_TO_NUM = "nan_to_num patch (the output is 0, its gradients are still nan)"
RIGHT_PADDING = "assumed right padding (kept the first n positions, n = the real tokens)"

WRONG = [
    (KEY["causal_mask"], causal_strict, "off-by-one diagonal (a token cannot see itself)",
     False),
    (KEY["causal_mask"], causal_plus_one, "off-by-one diagonal (a token sees the next one)",
     False),
    (KEY["causal_mask"], causal_drop_mask, "mask inverted (True meaning drop instead of keep)",
     False),
    (KEY["causal_mask"], causal_triu,
     "upper triangle (each token sees the future, not the past)", False),
    (KEY["causal_mask"], causal_float, "not a boolean mask", False),
    (KEY["causal_mask"], causal_additive, "additive mask instead of a boolean one", False),
    (KEY["to_additive"], additive_inverted, "mask inverted (-inf where the mask is True)",
     False),
    (KEY["to_additive"], additive_big_negative, "a large finite number instead of -inf", False),
    (KEY["to_additive"], additive_float, "returned the mask as 1.0 / 0.0", False),
    (KEY["to_additive"], additive_no_dtype, "ignored the dtype argument", False),
    (KEY["padding_mask_from_lengths"], lengths_le, "off-by-one length (<= instead of <)",
     False),
    (KEY["padding_mask_from_lengths"], lengths_inverted, "mask inverted (True at the padding)",
     False),
    (KEY["padding_mask_from_lengths"], lengths_query_axis,
     "padding applied on the query axis instead of the key axis", False),
    (KEY["padding_mask_from_lengths"], lengths_2d, "mask not broadcast over heads", False),
    (KEY["padding_mask_from_lengths"], lengths_3d,
     "mask not broadcast over heads (batch lined up with heads)", False),
    (KEY["padding_mask_from_ids"], ids_inverted, "mask inverted (True at the padding)", False),
    (KEY["padding_mask_from_ids"], ids_zero, "pad id hard-coded to 0", False),
    (KEY["padding_mask_from_ids"], ids_query_axis,
     "padding applied on the query axis instead of the key axis", False),
    (KEY["padding_mask_from_ids"], ids_2d, "mask not broadcast over heads", False),
    (KEY["padding_mask_from_ids"], ids_3d,
     "mask not broadcast over heads (batch lined up with heads)", False),
    (KEY["padding_mask_from_ids"], ids_right_padded, RIGHT_PADDING, False),
    (KEY["decoder_self_attention_mask"], decoder_or,
     "combined the masks with OR instead of AND", False),
    (KEY["decoder_self_attention_mask"], decoder_query_axis,
     "padding applied on the query axis instead of the key axis", False),
    (KEY["decoder_self_attention_mask"], decoder_no_pad, "forgot the padding mask", False),
    (KEY["decoder_self_attention_mask"], decoder_no_causal, "forgot the causal mask", False),
    (KEY["decoder_self_attention_mask"], decoder_3d, "mask not broadcast over heads", False),
    (KEY["masked_attention"], masked_after_softmax, "mask applied after the softmax", False),
    (KEY["masked_attention"], masked_inverted,
     "mask inverted (True meaning drop instead of keep)", False),
    (KEY["masked_attention"], masked_torch_softmax, "-inf producing NaN rows", False),
    (KEY["masked_attention"], masked_multiplied, "multiplied the scores by the mask", False),
    (KEY["masked_attention"], masked_additive_as_bool, "additive mask used as a boolean",
     False),
    (KEY["masked_attention"], masked_unscaled, "no scaling", False),
    # mutation testing (issue 18)
    (KEY["masked_attention"], masked_ignored, "mask ignored", False),
    (KEY["masked_attention"], masked_bool_added,
     "boolean mask added as 0 / 1 (not converted to 0 / -inf)", False),
    (KEY["masked_attention"], masked_float_tilde, "a float mask passed to masked_fill or ~",
     False),
    (KEY["masked_attention"], masked_unsqueeze_heads, "mask not broadcast over heads", False),
    # issue 32: right outputs, nan gradients
    (KEY["masked_attention"], masked_nan_to_num_output, NAN_TO_NUM, False),
    (KEY["masked_attention"], masked_nan_to_num_weights, NAN_TO_NUM, False),
    # issue 32: one step of the softmax slipped (classes of mutants the mutation report found)
    *[(KEY["masked_attention"], masked_slip(**slip), name, False) for slip, name in [
        ({"d_k": lambda q: math.sqrt(q.shape[-2])}, "d_k read from the wrong axis"),
        ({"d_k": lambda q: q.shape[-1]}, "divided by d_k instead of sqrt(d_k)"),
        ({"times": True}, "multiplied the scores by sqrt(d_k) instead of dividing"),
        ({"max_dim": -2}, "maximum subtracted over the wrong axis"),
        ({"max_keep": False}, "row maximum without keepdim=True"),
        ({"sum_dim": -2}, "normalised over the queries (sum over the wrong axis)"),
        ({"sum_keep": False}, "row sums without keepdim=True"),
        ({"divide": lambda z: 1.0}, "weights not normalised (no division by the row sum)"),
        ({"divide": lambda z: torch.where(z == 0, z, torch.ones_like(z))},  # branches swapped
         "weights not normalised (no division by the row sum)"),
    ]],
    (KEY["future_leak"], leak_off_by_one, "perturbed token t too (off by one)", False),
    (KEY["future_leak"], leak_all_positions, "compared every position", False),
    (KEY["future_leak"], leak_later_outputs, "compared every position", False),
    (KEY["future_leak"], leak_past, "perturbed the past instead of the future", False),
    (KEY["grad_of_position"], grad_all, "gradient of every output, not of position t", False),
    (KEY["grad_of_position"], grad_feature,
     "indexed the feature axis instead of the time axis", False),
    (KEY["grad_of_position"], grad_prefix, "gradient of the positions up to t", False),
]

# catalogue entries added for issue 32 (a class of 51 single-mistake students): each names no
# other mistake of its exercise
ISSUE_32 = [(KEY["padding_mask_from_ids"], RIGHT_PADDING), (KEY["masked_attention"], NAN_TO_NUM)]
