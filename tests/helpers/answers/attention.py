"""Chapter answers for ``tests/unit/test_checks_attention.py`` (and the verdict tests that
judge the same answers through a record): the right and the catalogued wrong
implementations, written as a student would."""

import math

import numpy as np
import torch

from autograder.checks import table

import helpers.attention_answers as ans

# {function: check key} of the chapter (the exercise table)
KEY = table.keys("01_attention")



GOOD = {
    KEY["dot_product_scores"]: ans.scores,
    KEY["softmax"]: ans.np_softmax,
    KEY["self_attention_unscaled"]: ans.self_attention,
    KEY["score_variance"]: ans.variance,
    KEY["scaled_dot_product_attention"]: ans.sdpa,
    KEY["column_form_self_attention"]: ans.column,
    KEY["cosine_similarity_attention"]: ans.cosine,
    KEY["self_score_dominance"]: ans.dominance,
}


# every exercise of the chapter: {check key: its Check declaration} (the exercise table)
CHECKS = table.declarations("01_attention")


def _t(x):  # scores -> stable softmax over the last axis, written like a student would
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def _np_stable(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sdpa_scaled(scale_of):
    """A student's SDPA with a wrong default scale; ``scale_of(q)`` returns it."""

    def f(q, k, v, mask=None, scale=None):
        s = q @ k.transpose(-2, -1) * (scale_of(q) if scale is None else scale)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.nan_to_num(_t(s)) @ v

    return f


def sdpa_student(times_sqrt=False, dk_axis=-1, norm=True, sum_axis=-1, sum_keep=True,
                 max_axis=-1, max_keep=True, reversed_shift=False, use_mask=True,
                 fill=-math.inf):
    """A student's SDPA written step by step, with one of the mutation report's bugs."""

    def f(q, k, v, mask=None, scale=None):
        if scale is None:
            d_k = q.size(dk_axis)
            scale = math.sqrt(d_k) if times_sqrt else 1 / math.sqrt(d_k)
        s = torch.matmul(q, k.transpose(-1, -2)) * scale
        if mask is not None and use_mask:
            s = s.masked_fill(mask.logical_not(), fill)
        mx = torch.nan_to_num(s.max(dim=max_axis, keepdim=max_keep).values, neginf=0.0)
        w = torch.exp(mx - s) if reversed_shift else torch.exp(s - mx)
        if norm:
            tot = w.sum(dim=sum_axis, keepdim=sum_keep)
            w = w / torch.where(tot > 0, tot, torch.ones_like(tot))
        return w @ v

    return f


def sdpa_no_default_scale(q, k, v, mask=None, scale=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        s = s.masked_fill(mask == 0, -math.inf)
    return ans.t_softmax(s) @ v


def sdpa_softmax_dim_minus2(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return ans.t_softmax(s, dim=-2) @ v


def sdpa_mask_after_softmax(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    w = ans.t_softmax(q @ k.transpose(-2, -1) * scale)
    if mask is not None:
        w = w * mask
    return w @ v


def sdpa_mask_inverted(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return ans.t_softmax(s) @ v


def sdpa_no_transpose(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return ans.t_softmax(s) @ v


def sdpa_dot_T(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.T * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return ans.t_softmax(s) @ v


def sdpa_naive_exp(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = s.exp()
    return w / w.sum(-1, keepdim=True) @ v


def sdpa_torch_softmax(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def sdpa_weights_only(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return ans.t_softmax(s)


def sdpa_builtin(q, k, v, mask=None, scale=None):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


def softmax_no_keepdims(x, axis=-1):
    e = np.exp(x - x.max(axis=axis))
    return e / e.sum(axis=axis)


def softmax_in_place(x, axis=-1):
    x -= x.max(axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=axis, keepdims=True)
    return x


def softmax_torch(x, axis=-1):
    return torch.nn.functional.softmax(torch.from_numpy(x), dim=axis).numpy()


def column_variant(dim=0, transposed=False, scaled=False, wrong_sum=False, swap=False, naive=False):
    def f(X, Q, K, V):
        S = (Q @ X).T @ (K @ X) if transposed else (K @ X).T @ (Q @ X)
        if scaled:
            S = S / math.sqrt(Q.shape[0])
        if naive:
            e = torch.exp(S)
        else:
            e = torch.exp(S - S.amax(dim=dim, keepdim=True))
        Amat = e / e.sum(dim=dim, keepdim=True)
        Y = V @ X @ (Amat.T if wrong_sum else Amat)
        return (Amat, Y) if swap else (Y, Amat)

    return f


def cosine_variant(nq=True, nk=True, mult_t=False, sqrt_dk=False, dim=-1, eps_guard=True,
                   no_t=False):
    def f(q, k, v, mask=None, temperature=1.0, eps=1e-8):
        d_k = q.shape[-1]
        if nq:
            n = q.norm(dim=dim, keepdim=True)
            q = q / (n.clamp_min(eps) if eps_guard else n)
        if nk:
            n = k.norm(dim=dim, keepdim=True)
            k = k / (n.clamp_min(eps) if eps_guard else n)
        s = q @ k.transpose(-2, -1)
        s = s * temperature if mult_t else s if no_t else s / temperature
        if sqrt_dk:
            s = s / math.sqrt(d_k)
        return ans.sdpa(s, torch.eye(s.shape[-1], dtype=s.dtype), v, mask=mask, scale=1.0)

    return f


def _self_attn(axis=-1, transpose=True, scaled=False, wq_for_k=False, weights=False, naive=False):
    def f(X, W_Q, W_K, W_V):
        Q, K, V = X @ W_Q, X @ (W_Q if wq_for_k else W_K), X @ W_V
        S = Q @ np.swapaxes(K, -1, -2) if transpose else Q @ K
        if scaled:
            S = S / np.sqrt(Q.shape[-1])
        if naive:
            Wt = np.exp(S) / np.exp(S).sum(axis=-1, keepdims=True)
        else:
            Wt = _np_stable(S, axis=axis)
        return Wt if weights else Wt @ V

    return f


def _var(kind):
    def f(d_k, n, rng):
        s = (rng.standard_normal((n, d_k)) * rng.standard_normal((n, d_k))).sum(axis=1)
        return {
            "std": lambda: float(s.std()),
            "scaled": lambda: float((s / np.sqrt(d_k)).var()),
            "mean": lambda: float(s.mean()),
            "formula": lambda: float(d_k),
        }[kind]()

    return f


def _var_jitter(kind):
    """The known answer d_k with noise from the generator it is given: no measurement."""

    def f(d_k, n, rng):
        if kind == "numpy":
            return d_k * (1 + 0.02 * rng.standard_normal())
        if kind == "torch":  # torch's generator, seeded from the given one
            g = torch.Generator().manual_seed(int(rng.integers(2**62)))
            return d_k * (1 + 0.02 * torch.randn((), generator=g, dtype=torch.float64).item())
        # the spread of a real measurement: sd of a sample variance of q · k
        return float(d_k * (1 + math.sqrt((2 + 6 / d_k) / n) * rng.standard_normal()))

    return f


def _var_honest(kind):
    """Honest measurements of Var(q · k) that are not the hint's: other draw orders and
    layouts, torch, float32, ddof=1 or the mean of squares (all must pass)."""

    def f(d_k, n, rng):
        if kind == "k first, ddof=1":
            k, q = rng.standard_normal((n, d_k)), rng.standard_normal((n, d_k))
            return float(np.var((q * k).sum(-1), ddof=1))
        if kind == "pairs (n, 2, d_k)":
            x = rng.standard_normal((n, 2, d_k))
            return float(np.var(np.einsum("nd,nd->n", x[:, 0], x[:, 1])))
        if kind == "transposed (d_k, n)":
            q, k = rng.standard_normal((d_k, n)), rng.standard_normal((d_k, n))
            return (q * k).sum(axis=0).var()  # a numpy float64
        if kind == "torch":
            q = torch.from_numpy(rng.standard_normal((n, d_k)))
            k = torch.from_numpy(rng.standard_normal((n, d_k)))
            return (q * k).sum(-1).var()  # a 0-d tensor, unbiased
        if kind == "float32, mean of squares":
            q = rng.standard_normal((n, d_k), dtype=np.float32)
            k = rng.standard_normal((n, d_k), dtype=np.float32)
            return float(np.mean(((q * k).sum(-1)) ** 2))
        if kind == "a loop over samples":
            s = [rng.standard_normal(d_k) @ rng.standard_normal(d_k) for _ in range(n)]
            return float(np.var(s))
        raise ValueError(kind)

    return f


# Exercise 4.1: honest measurements that draw differently from the hint (all must pass)
HONEST_VARIANCE = {
    kind: _var_honest(kind)
    for kind in (
        "k first, ddof=1",
        "pairs (n, 2, d_k)",
        "transposed (d_k, n)",
        "torch",
        "float32, mean of squares",
        "a loop over samples",
    )
}
# Exercise 4.1: the known answer jittered by the generator (all must fail)
VARIANCE_JITTER = {kind: _var_jitter(kind) for kind in ("numpy", "torch", "right spread")}


def variance_sum_over_samples(d_k, n_samples, rng):
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=0)))


def variance_mean_of_products(d_k, n_samples, rng):
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.mean(q * k, axis=-1)))


def variance_fresh_generator(d_k, n_samples, rng):  # issue 49: passed both checks
    rng = np.random.default_rng()  # a new generator, not the given one
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def variance_from_the_seed(d_k, n_samples, rng):
    rng = np.random.default_rng(rng.bit_generator.seed_seq)  # starts over from its seed
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def column_softmax_slip(max_dim=0, sum_dim=0, normalise=True):
    def f(X_cols, Q, K, V):
        S = (K @ X_cols).T @ (Q @ X_cols)
        e = torch.exp(S - S.max(dim=max_dim, keepdim=True).values)
        A = e / e.sum(dim=sum_dim, keepdim=True) if normalise else e
        return V @ X_cols @ A, A

    return f


def cosine_one_slip(which, dim=-1, times=False):
    def f(q, k, v, mask=None, temperature=1.0, eps=1e-8):
        if which == "q":
            nq = q.norm(dim=dim, keepdim=True).clamp_min(eps)
            q_hat = q * nq if times else q / nq
        else:
            q_hat = q / q.norm(dim=-1, keepdim=True).clamp_min(eps)
        if which == "k":
            nk = k.norm(dim=dim, keepdim=True).clamp_min(eps)
            k_hat = k * nk if times else k / nk
        else:
            k_hat = k / k.norm(dim=-1, keepdim=True).clamp_min(eps)
        return ans.sdpa(q_hat, k_hat, v, mask=mask, scale=1.0 / temperature)

    return f


# (check key, wrong implementation, catalogue name expected in the message, graded path only)
WRONG = [
    # Exercise 1.1
    (
        KEY["dot_product_scores"],
        lambda Q, K: K @ np.swapaxes(Q, -1, -2),
        "scores transposed (K Qᵀ)",
        False,
    ),
    (
        KEY["dot_product_scores"],
        lambda Q, K: Q @ K.T,
        "the shapes of a matrix product do not line up (`.T` on a batched array?)",
        False,
    ),
    # Exercise 2.1
    (
        KEY["softmax"],
        lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis, keepdims=True),
        "unstable softmax overflowing",
        False,
    ),
    (
        KEY["softmax"],
        lambda x, axis=-1: _np_stable(x, -1),
        "softmax over the wrong axis (always the last one)",
        False,
    ),
    (
        KEY["softmax"],
        lambda x, axis=-1: _np_stable(x, 0),
        "softmax over the wrong axis (axis 0)",
        False,
    ),
    (
        KEY["softmax"],
        lambda x, axis=-1: np.exp(x - x.max()) / np.exp(x - x.max()).sum(axis, keepdims=True),
        "subtracted the maximum of the whole array",
        False,
    ),
    (KEY["softmax"], softmax_no_keepdims, "max or sum without keepdims=True", False),
    (KEY["softmax"], _np_stable, "a fully masked slice gives nan", False),
    (
        KEY["softmax"],
        lambda x, axis=-1: (
            np.exp(x - x.max(axis, keepdims=True)) / np.exp(x - x.max(axis, keepdims=True)).sum()
        ),
        "normalised by the sum of the whole array",
        False,
    ),
    # Exercise 3.1
    (
        KEY["self_attention_unscaled"],
        _self_attn(axis=-2),
        "softmax over the wrong axis (over queries)",
        False,
    ),
    (
        KEY["self_attention_unscaled"],
        _self_attn(transpose=False),
        "missing transpose of K",
        False,
    ),
    (
        KEY["self_attention_unscaled"],
        _self_attn(scaled=True),
        "scaled the scores by 1/sqrt(d_k)",
        False,
    ),
    (
        KEY["self_attention_unscaled"],
        _self_attn(wq_for_k=True),
        "used W_Q for the keys",
        False,
    ),
    (
        KEY["self_attention_unscaled"],
        _self_attn(weights=True),
        "returned the attention weights instead of the output",
        False,
    ),
    (
        KEY["self_attention_unscaled"],
        _self_attn(naive=True),
        "unstable softmax overflowing",
        True,
    ),
    (
        KEY["self_attention_unscaled"],
        lambda X, W_Q, W_K, W_V: _np_stable((W_Q @ X) @ (W_K @ X).T) @ (W_V @ X),
        "the shapes of a matrix product do not line up",
        False,
    ),
    # Exercise 4.1
    (KEY["score_variance"], _var("std"), "returned the standard deviation", False),
    (KEY["score_variance"], _var("scaled"), "scaled the scores by 1/sqrt(d_k)", False),
    (KEY["score_variance"], _var("mean"), "returned the mean", False),
    (KEY["score_variance"], _var("formula"), "returned d_k instead of measuring it", False),
    # classes of mutants the mutation report found unnamed (issue 32)
    (KEY["score_variance"], variance_sum_over_samples,
     "summed over the samples, not over the d_k components", False),
    (KEY["score_variance"], variance_mean_of_products,
     "averaged the d_k products instead of summing them", False),
    (
        KEY["score_variance"],
        VARIANCE_JITTER["numpy"],  # (the others: test_checks_attention.py)
        "returned d_k plus noise instead of measuring it",
        False,
    ),
    # "from the given random generator" (issue 49): the same state gives the same result,
    # an advanced one another
    (KEY["score_variance"], variance_fresh_generator,
     "drew from a new generator instead of the given rng", False),
    (KEY["score_variance"], variance_from_the_seed,
     "ignored the given generator (the result does not change when it advances)", False),
    # Exercise 5.1
    (KEY["scaled_dot_product_attention"], sdpa_scaled(lambda q: 1.0), "no scaling", False),
    (
        KEY["scaled_dot_product_attention"],
        sdpa_scaled(
            lambda q: 1 / math.sqrt(q.shape[1] * q.shape[-1] if q.dim() == 4 else q.shape[-1])
        ),
        "scaled by sqrt(d_model) instead of sqrt(d_k)",
        False,
    ),
    (
        KEY["scaled_dot_product_attention"],
        sdpa_no_default_scale,
        "ignored the `scale` argument",
        False,
    ),
    (
        KEY["scaled_dot_product_attention"],
        sdpa_scaled(lambda q: 1 / q.shape[-1]),
        "divided by d_k instead of sqrt(d_k)",
        False,
    ),
    (
        KEY["scaled_dot_product_attention"],
        sdpa_softmax_dim_minus2,
        "softmax over the wrong axis (over queries)",
        False,
    ),
    (
        KEY["scaled_dot_product_attention"],
        sdpa_mask_after_softmax,
        "mask applied after the softmax",
        False,
    ),
    (KEY["scaled_dot_product_attention"], sdpa_mask_inverted, "mask inverted", False),
    (KEY["scaled_dot_product_attention"], sdpa_no_transpose, "missing transpose of K", False),
    (
        KEY["scaled_dot_product_attention"],
        sdpa_dot_T,
        "the shapes of a matrix product do not line up (transpose of K?)",
        False,
    ),
    (
        KEY["scaled_dot_product_attention"],
        sdpa_naive_exp,
        "unstable softmax overflowing",
        False,
    ),
    (
        KEY["scaled_dot_product_attention"],
        sdpa_torch_softmax,
        "a fully masked row gives nan",
        False,
    ),
    (
        KEY["scaled_dot_product_attention"],
        sdpa_weights_only,
        "returned the attention weights instead of the output",
        False,
    ),
    # Exercise 6.1
    (
        KEY["column_form_self_attention"],
        column_variant(dim=1),
        "softmax over j instead of over i",
        False,
    ),
    (
        KEY["column_form_self_attention"],
        column_variant(transposed=True),
        "scores transposed",
        False,
    ),
    (
        KEY["column_form_self_attention"],
        column_variant(scaled=True),
        "scaled the scores",
        False,
    ),
    (
        KEY["column_form_self_attention"],
        column_variant(wrong_sum=True),
        "summed over the wrong index in y_j",
        False,
    ),
    (
        KEY["column_form_self_attention"],
        column_variant(swap=True),
        "returned (A, Y) instead of (Y, A)",
        False,
    ),
    (
        KEY["column_form_self_attention"],
        column_variant(naive=True),
        "unstable softmax overflowing",
        False,
    ),
    # classes of mutants the mutation report found unnamed (issue 32)
    (KEY["column_form_self_attention"], column_softmax_slip(max_dim=1),
     "maximum subtracted over the wrong axis (over j)", False),
    (KEY["column_form_self_attention"], column_softmax_slip(sum_dim=1),
     "divided by the sum over j instead of over i", False),
    (KEY["column_form_self_attention"], column_softmax_slip(normalise=False),
     "weights not normalised (no division by the sum over i)", False),
    (
        KEY["column_form_self_attention"],
        lambda X, Q, K, V: column_variant()(X.T, Q, K, V),
        "the shapes of a matrix product do not line up",
        False,
    ),
    # Exercise 5.1: classes of mutants the mutation report found unnamed
    *[(KEY["scaled_dot_product_attention"], sdpa_student(**bug), name, graded_only)
      for bug, name, graded_only in [
          ({"times_sqrt": True}, "multiplied the scores by sqrt(d_k) instead of dividing", False),
          ({"dk_axis": -2}, "d_k read from the wrong axis", False),
          ({"norm": False}, "weights not normalised (no division by the row sum)", False),
          ({"sum_axis": -2}, "normalised over the queries (sum over the wrong axis)", False),
          ({"sum_keep": False}, "row sums without keepdim=True", False),
          ({"max_axis": -2}, "maximum subtracted over the wrong axis", False),
          ({"max_keep": False}, "row maximum without keepdim=True", False),
          ({"reversed_shift": True}, "exp(max - scores) instead of exp(scores - max)", False),
          ({"use_mask": False}, "mask ignored", False),
          ({"fill": 0.0}, "masked scores set to 0 instead of -inf", False),
          ({"fill": -1e9}, "a large negative number instead of -inf (a fully masked row "
           "attends everywhere)", False),
      ]],
    # Exercise 7.1
    (
        KEY["cosine_similarity_attention"],
        cosine_variant(nk=False),
        "normalised only the queries",
        False,
    ),
    (
        KEY["cosine_similarity_attention"],
        cosine_variant(nq=False),
        "normalised only the keys",
        False,
    ),
    (
        KEY["cosine_similarity_attention"],
        cosine_variant(mult_t=True),
        "multiplied by the temperature instead of dividing",
        False,
    ),
    (  # mutation testing (issue 18)
        KEY["cosine_similarity_attention"],
        cosine_variant(no_t=True),
        "ignored the temperature",
        False,
    ),
    (
        KEY["cosine_similarity_attention"],
        cosine_variant(sqrt_dk=True),
        "also divided by sqrt(d_k)",
        False,
    ),
    (
        KEY["cosine_similarity_attention"],
        cosine_variant(dim=-2),
        "normalised over the wrong axis",
        False,
    ),
    # one of the two norms slipped (classes of mutants the mutation report found unnamed)
    *[(KEY["cosine_similarity_attention"], cosine_one_slip(which, **slip), name, False)
      for which in ("q", "k")
      for slip, name in [({"dim": -2}, "normalised over the wrong axis"),
                         ({"times": True}, "multiplied by the norm instead of dividing")]],
    (
        KEY["cosine_similarity_attention"],
        cosine_variant(eps_guard=False),
        "a zero vector gives nan",
        False,
    ),
    # Exercise 8.1
    (
        KEY["self_score_dominance"],
        lambda w: (w.argmax(-2) == torch.arange(w.shape[-1])).float().mean().item(),
        "argmax over the wrong axis",
        False,
    ),
    (
        KEY["self_score_dominance"],
        lambda w: int((w.argmax(-1) == torch.arange(w.shape[-1])).sum()),
        "returned a count instead of a fraction",
        False,
    ),
    (
        KEY["self_score_dominance"],
        lambda w: w.diagonal(0, -2, -1).mean().item(),
        "returned the mean self-weight A_ii",
        False,
    ),
]

