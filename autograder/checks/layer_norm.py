"""Checks for notebook 04 (layer normalization), each with its catalogue of known mistakes.

Expected outputs come from ``transformer_ref.layer_norm`` / ``rms_norm`` (tested against
``torch.nn.LayerNorm`` / ``torch.nn.RMSNorm``) and from autograd, computed here on first use
(in a notebook at import, before any student code runs: ``_core._Cases``).

>>> check_rms_norm(transformer_ref.rms_norm)  # doctest: +ELLIPSIS
✔ Exercise 4.1 `rms_norm`: all ... cases match the reference.
"""

from __future__ import annotations

import numpy as np
import torch

import transformer_ref  # noqa: F401 - the example above
from autograder.checks import _metamorphic as _mm
from autograder.checks import table
from autograder.checks._cases import grad_case
from autograder.checks._cases import is_broadcast_error as _is_broadcast_error
from autograder.checks._cases import t_rand as _t_rand
from autograder.checks._core import Case, Check, ErrorHint, Mistake, register

# trusted references: bound here, at import, before any student cell runs
from transformer_ref import layer_norm as _ref_ln
from transformer_ref import rms_norm as _ref_rms

__all__ = [
    "check_layer_norm_np",
    "check_layer_norm",
    "check_layer_norm_backward",
    "check_rms_norm",
]


# ---------------------------------------------------------------- wrong layer norms
def _ln_variant(
    x,
    gamma,
    beta,
    eps=1e-5,
    *,
    center="mean",  # "mean" | "sum" (the lecture notes [S1] as written)
    var="biased",  # "biased" | "unbiased" | "moments" (E[x²] - mean²)
    eps_at="inside",  # "inside" sqrt(var + eps) | "outside" std + eps | "none"
    dim=-1,
        use_beta=True,
    use_gamma=True,
    root=True,  # False: divided by var + eps itself
):
    """LayerNorm with one thing changed; torch in, torch out (numpy goes through _np)."""
    mu = x.mean(dim=dim, keepdim=True)
    if var == "uncentred":  # mean(x²): the mean never subtracted
        v = (x * x).mean(dim=dim, keepdim=True)
    elif var == "unsquared":  # mean(x - mean): the deviations never squared (about 0)
        v = (x - mu).mean(dim=dim, keepdim=True)
    elif var == "biased":
        v = ((x - mu) ** 2).mean(dim=dim, keepdim=True)
    elif var == "unbiased":
        v = x.var(dim=dim, keepdim=True, unbiased=True)
    else:
        v = (x * x).mean(dim=dim, keepdim=True) - mu * mu
    c = x.sum(dim=dim, keepdim=True) if center == "sum" else mu
    if not root:
        y = (x - c) / (v + eps)
    elif eps_at == "inside":
        y = (x - c) / torch.sqrt(v + eps)
    elif eps_at == "outside":
        y = (x - c) / (torch.sqrt(v) + eps)
    else:
        y = (x - c) / torch.sqrt(v)
    y = y * gamma if use_gamma else y
    return y + beta if use_beta else y


def _ln_steps(x, gamma, beta, eps=1e-5, *, mean_dim=-1, var_dim=-1, mean_sum=False,
              var_sum=False, centred_out=True, reversed_centre=False, sd="div",
              beta_sign=1, var_plus=False, out_plus=False, eps_sign=1):
    """The solution's three lines, each of which one keyword gets wrong (a mutant class).
    ``var_plus`` / ``out_plus``: x + mean in the variance / in the output; ``eps_sign`` -1:
    sqrt(var - eps)."""
    mu = x.sum(mean_dim, keepdim=True) if mean_sum else x.mean(mean_dim, keepdim=True)
    sq = (x + mu) ** 2 if var_plus else (x - mu) ** 2
    v = sq.sum(var_dim, keepdim=True) if var_sum else sq.mean(var_dim, keepdim=True)
    c = (mu - x) if reversed_centre else (x + mu) if out_plus else (x - mu) if centred_out else x
    s = torch.sqrt(v + eps) if eps_sign > 0 else torch.sqrt(v - eps)
    y = gamma * c / s if sd == "div" else gamma * c * s if sd == "mul" else gamma * c
    return y + beta if beta_sign > 0 else y - beta


def _s(**kw):
    return lambda x, gamma, beta, eps=1e-5: _ln_steps(x, gamma, beta, eps, **kw)


# classes of wrong answers the mutation report (python -m bench.mutation) found unnamed:
# (name, explanation, _ln_steps keywords)
_LN_STEP_MISTAKES = (
    ("mean over the sequence axis, variance over the features",
     "Both statistics are per token, over its d features (axis -1, keepdims=True): the mean "
     "was taken over the tokens (axis -2).", dict(mean_dim=-2)),
    ("mean over the batch axis, variance over the features",
     "Both statistics are per token, over its d features (axis -1, keepdims=True): the mean "
     "was taken over axis 0.", dict(mean_dim=0)),
    ("variance over the sequence axis, mean over the features",
     "Both statistics are per token, over its d features (axis -1, keepdims=True): the "
     "variance was taken over the tokens (axis -2).", dict(var_dim=-2)),
    ("variance over the batch axis, mean over the features",
     "Both statistics are per token, over its d features (axis -1, keepdims=True): the "
     "variance was taken over axis 0.", dict(var_dim=0)),
    ("the mean computed with sum()",
     "The mean is the sum divided by d: x.mean(-1, keepdims=True), not x.sum(...).",
     dict(mean_sum=True)),
    ("the variance computed with sum()",
     "The variance is the *mean* of the centred squares, divided by d: "
     "((x - mean) ** 2).mean(-1, keepdims=True), not .sum(...).", dict(var_sum=True)),
    ("the output not centred (x / std instead of (x - mean) / std)",
     "Subtract the mean in the output too: x_hat = (x - mean) / sqrt(var + eps).",
     dict(centred_out=False)),
    ("mean - x instead of x - mean",
     "x_hat = (x - mean) / sqrt(var + eps): mean - x flips the sign of every normalised "
     "feature.", dict(reversed_centre=True)),
    ("multiplied by the standard deviation instead of dividing",
     "Divide by sqrt(var + eps) so x_hat has variance 1.", dict(sd="mul")),
    ("not divided by the standard deviation",
     "After subtracting the mean, divide by sqrt(var + eps) so x_hat has variance 1.",
     dict(sd="none")),
    ("subtracted beta",
     "LN(x) = gamma * x_hat + beta: beta is added.", dict(beta_sign=-1)),
    # issue 32 (mutation report): sign slips in the centring and in eps
    ("x + mean instead of x - mean in the variance",
     "The variance is the mean of the squared *deviations*: ((x - mean) ** 2).mean(-1, "
     "keepdims=True); (x + mean)² adds 4·mean² to it (and more).", dict(var_plus=True)),
    ("x + mean instead of x - mean in the output",
     "Centre the output: x_hat = (x - mean) / sqrt(var + eps), so each normalised token has "
     "mean 0.", dict(out_plus=True)),
    ("eps subtracted (sqrt(var - eps))",
     "eps keeps the denominator away from 0: sqrt(var + eps). With var - eps a token whose "
     "variance is below eps even gives nan.", dict(eps_sign=-1)),
)


def _np(fn):
    """The numpy version of a torch function of arrays (dtype kept)."""

    def f(x, gamma, beta, eps=1e-5):
        out = fn(torch.from_numpy(x), torch.from_numpy(gamma), torch.from_numpy(beta), eps)
        return out.numpy()

    return f


def _v(**kw):
    return lambda x, gamma, beta, eps=1e-5: _ln_variant(x, gamma, beta, eps, **kw)


def _np_moments(x, gamma, beta, eps=1e-5):
    """The one-pass variance written in numpy (numpy's own summation order)."""
    mu = x.mean(axis=-1, keepdims=True)
    var = (x * x).mean(axis=-1, keepdims=True) - mu * mu
    with np.errstate(invalid="ignore"):
        return gamma * (x - mu) / np.sqrt(var + eps) + beta


def _ln_mistakes(numpy: bool) -> tuple:
    wrap = _np if numpy else (lambda f: f)
    return (
        Mistake(
            "std + eps instead of sqrt(var + eps)",
            "eps goes *inside* the square root: (x - mean) / sqrt(var + eps), as in "
            "torch.nn.LayerNorm. Adding it to the standard deviation only matters when a "
            "token's variance is small, which is exactly when eps is needed.",
            wrap(_v(eps_at="outside")),
        ),
        Mistake(
            "eps left out",
            "Without eps a token whose features are all equal has var = 0 and gives 0/0 = nan; "
            "divide by sqrt(var + eps).",
            wrap(_v(eps_at="none")),
        ),
        Mistake(
            "unbiased variance (divided by d - 1)",
            "LayerNorm uses the biased variance, mean((x - mean)²), dividing by d. "
            "`x.var(dim=-1)` and `np.var(..., ddof=1)` divide by d - 1: use "
            "`unbiased=False` / `ddof=0`, or write the mean of squares yourself.",
            wrap(_v(var="unbiased")),
        ),
        Mistake(
            "normalised over the batch axis (axis 0) instead of the features",
            "LayerNorm normalises each token over its own d features: mean and variance "
            "over the last axis (axis=-1, keepdims=True). Over axis 0 is BatchNorm's axis.",
            wrap(_v(dim=0)),
        ),
        Mistake(
            "normalised over the sequence axis instead of the features",
            "Each token is normalised on its own: statistics over the last axis (-1), not over "
            "the tokens (-2).",
            wrap(_v(dim=-2)),
        ),
        Mistake(
            "forgot beta",
            "LN(x) = gamma * x_hat + beta: add the shift after the scale.",
            wrap(_v(use_beta=False)),
        ),
        Mistake(
            "forgot gamma",
            "LN(x) = gamma * x_hat + beta: scale the normalised x by gamma before the shift.",
            wrap(_v(use_gamma=False)),
        ),
        Mistake(
            "variance without subtracting the mean (mean of x²)",
            "The variance is the mean of the *centred* squares, mean((x - mean)²); mean(x²) "
            "is only the variance when the mean is 0.",
            wrap(_v(var="uncentred")),
        ),
        Mistake(
            "divided by the variance instead of the standard deviation",
            "x_hat = (x - mean) / sqrt(var + eps): take the square root, so x_hat has "
            "variance 1.",
            wrap(_v(root=False)),
        ),
        Mistake(
            "subtracted the sum instead of the mean (the lecture notes [S1] as written)",
            "The lecture notes [S1] write x_ki - sum_j x_kj; the mean (1/d) sum_j x_kj "
            "is meant, so each "
            "normalised token has mean 0.",
            wrap(_v(center="sum")),
        ),
        Mistake(
            "variance as mean(x²) - mean² (cancels in float32)",
            "For features with a large common offset, mean(x²) and mean² are huge, nearly "
            "equal numbers and their difference loses every digit. Subtract the mean first: "
            "var = mean((x - mean)²).",
            _np_moments if numpy else _v(var="moments"),
        ),
        *(Mistake(name, why, wrap(_s(**kw))) for name, why, kw in _LN_STEP_MISTAKES),
        # torch only: what is left of mean(x - mean) is rounding noise, and numpy's summation
        # order gives other noise than torch's, so a numpy answer could not be matched
        *(() if numpy else (Mistake(
            "variance without squaring the deviations",
            "The variance is the mean of the *squared* deviations, mean((x - mean)²); the "
            "plain mean(x - mean) is 0 for every token, so you divide by sqrt(eps) alone.",
            _v(var="unsquared"),
        ),)),
    )


def _is_scalar_conversion(e: BaseException) -> bool:
    s = str(e)
    return any(t in s for t in ("only length-1 arrays", "only one element tensors",
                                "cannot be converted to Scalar", "only 0-dimensional arrays"))


_BROADCAST_HINT = ErrorHint(
    "a shape that does not broadcast (keepdim missing, or gamma reshaped)",
    "Per-token statistics must keep their axis: x.mean(axis=-1, keepdims=True) has shape "
    "(..., 1) and broadcasts against x (..., d). gamma and beta have shape (d,) and broadcast "
    "against the *last* axis with no reshape: `gamma * x_hat + beta`.",
    _is_broadcast_error,
)
_SCALAR_HINT = ErrorHint(
    "treated gamma as a scalar (the lecture notes [S1])",
    "The lecture notes [S1] write a scalar gamma; PyTorch's (and this exercise's) "
    "gamma is a vector of "
    "shape (d,), one gain per feature: multiply elementwise, `gamma * x_hat`.",
    _is_scalar_conversion,
)


def _ln_cases(numpy: bool) -> tuple:
    cases = []
    f32 = torch.float32

    def add(label, x, gamma, beta, eps=None, hidden=False, tol=None):
        kw = {} if eps is None else {"eps": eps}
        expected = _ref_ln(x, gamma, beta, **({"eps": eps} if eps is not None else {}))
        args = (x, gamma, beta)
        if numpy:
            args = tuple(a.numpy() for a in args)
            expected = expected.numpy()
        cases.append(Case(label, args, expected, kwargs=kw, hidden=hidden, rtol=tol, atol=tol))

    def params(seed, d, dtype=torch.float64):
        return _t_rand(seed, d, dtype=dtype, shift=1.0), _t_rand(seed + 1, d, dtype=dtype)

    base = 40 if numpy else 140
    add("x (2, 3, 6) (batch, tokens, features), float32",
        _t_rand(base + 3, 2, 3, 6, dtype=f32, shift=0.5), *params(base + 4, 6, f32))
    add("x (4, 4), float64 (as many tokens as features)",
        _t_rand(base, 4, 4, scale=2.0, shift=1.0), *params(base + 1, 4))
    add("x (5, 8) with tiny spread (std ~ 1e-3 < sqrt(eps)), float64",
        _t_rand(base + 6, 5, 8, scale=1e-3), *params(base + 7, 8))
    add("x (3, 5), eps=0.1, float64", _t_rand(base + 9, 3, 5), *params(base + 10, 5), eps=0.1)
    const = _t_rand(base + 12, 3, 4)
    const[1] = 2.5  # one token with every feature equal: var = 0
    add("a token with all features equal (var = 0)", const, *params(base + 13, 4), hidden=True)
    add("d = 1 (every token normalises to beta)", _t_rand(base + 15, 2, 3, 1),
        *params(base + 16, 1), hidden=True)
    add("x (2, 4, 5, 8) (more leading axes), float64", _t_rand(base + 18, 2, 4, 5, 8),
        *params(base + 19, 8), hidden=True)
    # float32 keeps ~7 digits: x - mean of features near 1e4 carries an error of about
    # 1e4 * 2**-24 = 6e-4 in any two-pass implementation, hence the wider tolerance; the
    # one-pass mean(x²) - mean² loses *every* digit here (errors of order 1, or nan).
    # hidden in 2.1; visible in 2.2, whose text warns against mean(x²) - mean² (a
    # requirement the exercise states has a visible case, issue 32)
    add("features offset by 1e4, float32 (tolerance 1e-2)",
        _t_rand(base + 21, 4, 16, dtype=f32, shift=1e4), *params(base + 22, 16, f32),
        hidden=numpy, tol=1e-2)
    if not numpy:
        x, g, b = _t_rand(base + 24, 2, 3, 6), *params(base + 25, 6)
        # visible: 2.2's goal says "differentiable (autograd must see every step)"
        cases.append(grad_case("gradients w.r.t. x, gamma, beta", _ref_ln, (x, g, b),
                               _t_rand(base + 27, 2, 3, 6), hidden=False))
    return tuple(cases)


_LN_FORBIDDEN = ("layer_norm", "native_layer_norm", "group_norm", "batch_norm", "instance_norm")

# ====================================================================== Exercise 2.1
def _ln_np_ref(x, gamma, beta, **kw):
    return _ref_ln(*(torch.from_numpy(np.asarray(a)) for a in (x, gamma, beta)), **kw).numpy()


def _ln_probes(ref) -> tuple:
    """LayerNorm's arguments that must each have an effect."""
    return (
        _mm.ignored(1, "`gamma`", lambda g: 2 * g + 0.5, ref,
                    "Multiply the normalised x by gamma (its learned scale).",
                    how="gamma doubled"),
        _mm.ignored(2, "`beta`", lambda b: b + 1, ref,
                    "Add beta (the learned shift) after the scale.", how="beta + 1"),
        _mm.ignored("eps", "`eps`", lambda e: 1.0, ref,
                    "Add eps to the variance inside the square root: sqrt(var + eps).",
                    how="eps = 1", default=1e-5),
        _mm.invariant(0, lambda x: 4 * x + 3, "x is scaled by 4 and shifted by 3", ref,
                      "LayerNorm subtracts each row's mean and divides by its standard "
                      "deviation, once, before gamma and beta: (x - mean) / sqrt(var + eps) "
                      "* gamma + beta."),
    )


def _ln_check(function: str, ref, numpy: bool, forbidden_hint: str) -> Check:
    """Exercise 2.1 (numpy) or 2.2 (torch): the same cases, probes and mistakes."""
    return Check(
        **table.identity(__name__, function),
        cases=lambda: _ln_cases(numpy=numpy),
        probes=_ln_probes(ref),
        mistakes=_ln_mistakes(numpy=numpy),
        error_hints=(_BROADCAST_HINT, _SCALAR_HINT),
        forbidden=_LN_FORBIDDEN,
        forbidden_hint=forbidden_hint,
    )


_LN_NP = _ln_check("layer_norm_np", _ln_np_ref, True,
                   "Write it with x.mean, np.sqrt and broadcasting.")
check_layer_norm_np = register(_LN_NP)

# ====================================================================== Exercise 2.2
_LN = _ln_check("layer_norm", _ref_ln, False,
                "Write it with .mean(dim=-1, keepdim=True), torch.sqrt and broadcasting.")
check_layer_norm = register(_LN)


# ====================================================================== Exercise 3.1
def _backward_ref(dy, x, gamma, eps=1e-5):
    """(dx, dgamma, dbeta) by autograd through the reference layer norm, in float64."""
    xs = x.detach().double().requires_grad_(True)
    gs = gamma.detach().double().requires_grad_(True)
    bs = torch.zeros_like(gs, requires_grad=True)
    with torch.enable_grad():
        (_ref_ln(xs, gs, bs, eps) * dy.double()).sum().backward()
    return tuple(t.to(x.dtype) for t in (xs.grad, gs.grad, bs.grad))


def _bw_variant(dy, x, gamma, eps=1e-5, *, mean_path=True, var_path=True, use_gamma=True,
                sum_params=True, swap=False, dgamma_from_x=False, beta_axis0=False,
                sigma="std", divide=True, dgamma_plain=False, mu_dim=-1, var_dim=-1,
                mu_sum=False, var_sum=False, var_centred=True, xhat_centred=True,
                xhat_sd="div", path_dim=None, path_sum=None, var_path_sign=-1,
                var_plus=False, var_squared=True, eps_sign=1, xhat_plus=False,
                gamma_div=False, mean_path_sign=-1, var_term="full"):
    """``path_dim`` / ``path_sum``: ("mean" or "var", dim) / "mean" or "var": one of dx's two
    means over another axis, or a sum (the 1/d left out); ``var_path_sign`` /
    ``mean_path_sign`` +1: that term added; ``var_term``: "full" x_hat * mean(g * x_hat),
    "mean_g" x_hat * mean(g), "no_mean" x_hat alone, "no_xhat" mean(g * x_hat) alone;
    ``var_plus`` / ``xhat_plus``: x + mu in the variance / in x_hat; ``var_squared`` False:
    mean(x - mu); ``eps_sign`` -1: sqrt(var - eps); ``gamma_div``: g = dy / gamma;
    ``divide`` "mul": dx multiplied by sigma; ``dgamma_plain`` "xhat": dgamma = sum(x_hat)."""
    mu = x.sum(dim=mu_dim, keepdim=True) if mu_sum else x.mean(dim=mu_dim, keepdim=True)
    dev = x + mu if var_plus else x - mu
    sq = (dev**2 if var_squared else dev) if var_centred else x**2
    var = sq.sum(dim=var_dim, keepdim=True) if var_sum else sq.mean(dim=var_dim, keepdim=True)
    e = eps if eps_sign > 0 else -eps
    sigma = {"std": torch.sqrt(var + e), "no_eps": torch.sqrt(var), "var": var + e}[sigma]
    c = x + mu if xhat_plus else x - mu if xhat_centred else x
    xhat = c / sigma if xhat_sd == "div" else c * sigma if xhat_sd == "mul" else c
    g = dy / gamma if gamma_div else dy * gamma if use_gamma else dy

    def avg(t, which):
        if path_sum == which:
            return t.sum(dim=-1, keepdim=True)
        dim = path_dim[1] if path_dim is not None and path_dim[0] == which else -1
        return t.mean(dim=dim, keepdim=True)

    dx = g
    if mean_path:
        dx = dx + mean_path_sign * avg(g, "mean")
    if var_path:
        term = {"full": lambda: xhat * avg(g * xhat, "var"), "mean_g": lambda: xhat * avg(g, "var"),
                "no_mean": lambda: xhat, "no_xhat": lambda: avg(g * xhat, "var")}[var_term]()
        dx = dx + var_path_sign * term
    dx = dx * sigma if divide == "mul" else dx / sigma if divide else dx
    dgamma = (xhat if dgamma_plain == "xhat" else dy if dgamma_plain
              else dy * (x if dgamma_from_x else xhat))
    dbeta = dy
    lead = tuple(range(x.dim() - 1))
    if sum_params == "axis0":
        dgamma, dbeta = dgamma.sum(dim=0), dbeta.sum(dim=0 if beta_axis0 else lead)
    elif sum_params:
        dgamma, dbeta = dgamma.sum(dim=lead), dbeta.sum(dim=lead)
    return (dx, dbeta, dgamma) if swap else (dx, dgamma, dbeta)


def _bw(**kw):
    return lambda dy, x, gamma, eps=1e-5: _bw_variant(dy, x, gamma, eps, **kw)


def _bw_cases():
    cases = []
    f32 = torch.float32

    def add(label, shape, seed, dtype=torch.float64, scale=1.0, eps=None, hidden=False):
        d = shape[-1]
        x = _t_rand(seed, *shape, dtype=dtype, scale=scale, shift=0.3)
        dy = _t_rand(seed + 1, *shape, dtype=dtype)
        gamma = _t_rand(seed + 2, d, dtype=dtype, shift=1.0)
        kw = {} if eps is None else {"eps": eps}
        cases.append(Case(label, (dy, x, gamma), _backward_ref(dy, x, gamma, **kw), kwargs=kw,
                          hidden=hidden))

    add("x (3, 5), float64", (3, 5), 300)
    add("x (2, 4, 6), float64", (2, 4, 6), 310)
    add("x (2, 3, 8), eps=0.1, float32", (2, 3, 8), 320, dtype=f32, eps=0.1)
    add("one token, d = 16", (1, 1, 16), 330, hidden=True)
    add("d = 1 (x_hat is 0)", (4, 1), 340, hidden=True)
    add("large inputs (x ~ 1e3), float64", (3, 7), 350, scale=1e3, hidden=True)
    return tuple(cases)


_BACKWARD = Check(
    **table.identity(__name__, "layer_norm_backward"),
    cases=_bw_cases,
    mistakes=(
        Mistake(
            "treated the mean and the variance as constants",
            "mu and sigma depend on every feature of the token, so dx has two more terms: "
            "dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma with g = dy * gamma.",
            _bw(mean_path=False, var_path=False),
        ),
        Mistake(
            "dropped the gradient through the variance",
            "sigma depends on x too: subtract x_hat * mean(g * x_hat) as well.",
            _bw(var_path=False),
        ),
        Mistake(
            "dropped the gradient through the mean",
            "mu depends on x too: subtract mean(g) (over the features) as well.",
            _bw(mean_path=False),
        ),
        Mistake(
            "forgot gamma in dx",
            "y = gamma * x_hat + beta, so the gradient reaching x_hat is g = dy * gamma.",
            _bw(use_gamma=False),
        ),
        Mistake(
            "dgamma and dbeta not summed over the tokens",
            "gamma and beta are shared by every token: their gradients are sums over all "
            "leading axes, shape (d,): dgamma = (dy * x_hat).sum over tokens, dbeta = dy.sum.",
            _bw(sum_params=False),
        ),
        Mistake(
            "returned (dx, dbeta, dgamma)",
            "Return dx, then dgamma = sum(dy * x_hat), then dbeta = sum(dy).",
            _bw(swap=True),
        ),
        Mistake(
            "dgamma from x instead of x_hat",
            "gamma multiplies the *normalised* x_hat: dgamma = sum(dy * x_hat).",
            _bw(dgamma_from_x=True),
        ),
        Mistake(
            "dgamma without x_hat (the sum of dy)",
            "y = gamma * x_hat + beta, so dgamma = sum(dy * x_hat) over the tokens; sum(dy) is "
            "dbeta.",
            _bw(dgamma_plain=True),
        ),
        Mistake(
            "dx not divided by sigma",
            "x_hat = (x - mu) / sigma, so every path into x carries the factor 1 / sigma: "
            "dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma.",
            _bw(divide=False),
        ),
        Mistake(
            "sigma without the square root (the variance)",
            "sigma is the standard deviation: sqrt(mean((x - mu)^2) + eps), as in the forward "
            "pass.",
            _bw(sigma="var"),
        ),
        Mistake(
            "eps left out of sigma",
            "The forward pass divides by sqrt(var + eps); the backward pass must use the same "
            "sigma (the eps matters when the variance is small, or with eps=0.1).",
            _bw(sigma="no_eps"),
        ),
        # the mutation report (python -m bench.mutation) found these unnamed: the forward
        # statistics recomputed with the forward pass's own slips (Exercise 2.2's catalogue)
        # and the derivation's 1/d, axis and sign slips
        *(
            Mistake(
                f"{stat} over the {axis} axis in the recomputed forward pass",
                "The backward pass needs the forward pass's own statistics: mu = "
                "x.mean(dim=-1, keepdim=True) and sigma = sqrt(((x - mu) ** 2).mean(dim=-1, "
                f"keepdim=True) + eps), both per token over its d features, not over the {axis} "
                f"axis (dim={dim}).",
                _bw(**{"mu_dim" if stat == "mean" else "var_dim": dim}),
            )
            for stat in ("mean", "variance")
            for axis, dim in (("sequence", -2), ("batch", 0))
        ),
        Mistake(
            "the mean computed with sum() in the recomputed forward pass",
            "mu is the mean of the token's features: x.mean(dim=-1, keepdim=True), not "
            "x.sum(...).",
            _bw(mu_sum=True),
        ),
        Mistake(
            "the variance computed with sum() in the recomputed forward pass",
            "The variance is the *mean* of the centred squares: ((x - mu) ** 2).mean(dim=-1, "
            "keepdim=True), not .sum(...).",
            _bw(var_sum=True),
        ),
        Mistake(
            "variance without subtracting the mean (mean of x²) in the recomputed forward pass",
            "sigma = sqrt(mean((x - mu)²) + eps): the squares of the *centred* x, as in the "
            "forward pass.",
            _bw(var_centred=False),
        ),
        Mistake(
            "x_hat not centred (x / sigma instead of (x - mu) / sigma)",
            "x_hat = (x - mu) / sigma, as in the forward pass: subtract the mean.",
            _bw(xhat_centred=False),
        ),
        Mistake(
            "x_hat not divided by sigma",
            "x_hat = (x - mu) / sigma, as in the forward pass: divide by the standard deviation.",
            _bw(xhat_sd="none"),
        ),
        Mistake(
            "x_hat multiplied by sigma instead of divided",
            "x_hat = (x - mu) / sigma, as in the forward pass.",
            _bw(xhat_sd="mul"),
        ),
        Mistake(
            "sum(g) instead of mean(g) (the 1/d of the mean's gradient left out)",
            "mu = (1/d) sum_j x_j, so the gradient through the mean carries 1/d: subtract "
            "g.mean(dim=-1, keepdim=True), not g.sum(...).",
            _bw(path_sum="mean"),
        ),
        Mistake(
            "sum(g * x_hat) instead of mean(g * x_hat) (the 1/d of the variance's gradient "
            "left out)",
            "The variance is a mean over the d features, so its gradient carries 1/d: "
            "x_hat * (g * x_hat).mean(dim=-1, keepdim=True), not .sum(...).",
            _bw(path_sum="var"),
        ),
        *(
            Mistake(
                f"mean({arg}) in dx over the wrong axis",
                "Both means in dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma run over "
                "each token's d features, like mu and sigma: .mean(dim=-1, keepdim=True).",
                _bw(path_dim=(which, dim)),
            )
            for which, arg in (("mean", "g"), ("var", "g * x_hat"))
            for dim in (-2, 0)
        ),
        Mistake(
            "the variance term's sign flipped (+ x_hat * mean(g * x_hat))",
            "d(1/sigma)/dx is negative: dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma, "
            "both terms subtracted.",
            _bw(var_path_sign=1),
        ),
        *(
            Mistake(
                "dgamma summed over axis 0 only",
                "For x (B, T, d) gamma is shared by all B·T tokens: sum dy * x_hat over every "
                "axis but the last (dim=tuple(range(x.dim() - 1))), giving shape (d,). "
                "sum(0) only works for 2-D x.",
                _bw(sum_params="axis0", beta_axis0=beta_axis0),
            )
            for beta_axis0 in (False, True)  # dbeta summed right, or over axis 0 as well
        ),
        # issue 32 (mutation report): sign and factor slips in the recomputed forward pass
        # and in the derivation's terms
        Mistake(
            "x + mu instead of x - mu in the recomputed variance",
            "sigma = sqrt(mean((x - mu)²) + eps): the squares of the *deviations* from the "
            "mean, as in the forward pass.",
            _bw(var_plus=True),
        ),
        Mistake(
            "variance without squaring the deviations in the recomputed forward pass",
            "sigma = sqrt(mean((x - mu)²) + eps): square the deviations; mean(x - mu) is 0 for "
            "every token, so sigma becomes sqrt(eps).",
            _bw(var_squared=False),
        ),
        Mistake(
            "eps subtracted in sigma (sqrt(var - eps))",
            "The forward pass divides by sigma = sqrt(var + eps); the backward pass must use "
            "the same sigma.",
            _bw(eps_sign=-1),
        ),
        Mistake(
            "x_hat from x + mu instead of x - mu",
            "x_hat = (x - mu) / sigma, as in the forward pass: subtract the mean.",
            _bw(xhat_plus=True),
        ),
        Mistake(
            "dy divided by gamma instead of multiplied",
            "y = gamma * x_hat + beta, so by the chain rule the gradient reaching x_hat is "
            "g = dy * gamma.",
            _bw(gamma_div=True),
        ),
        Mistake(
            "the mean term's sign flipped (+ mean(g))",
            "d mu / dx_j = 1/d enters with a minus (x_hat has x - mu): dx = (g - mean(g) "
            "- x_hat * mean(g * x_hat)) / sigma, both terms subtracted.",
            _bw(mean_path_sign=1),
        ),
        Mistake(
            "mean(g) instead of mean(g * x_hat) in the variance term",
            "The gradient through sigma weights g by x_hat before averaging: "
            "x_hat * (g * x_hat).mean(dim=-1, keepdim=True).",
            _bw(var_term="mean_g"),
        ),
        Mistake(
            "the variance term without mean(g * x_hat) (x_hat alone)",
            "The gradient through sigma is x_hat * mean(g * x_hat): x_hat times the "
            "average of g * x_hat over the token's features, not x_hat by itself.",
            _bw(var_term="no_mean"),
        ),
        Mistake(
            "the variance term without its x_hat factor",
            "The gradient through sigma is x_hat * mean(g * x_hat): the average is multiplied "
            "by x_hat again (each feature's share of the variance).",
            _bw(var_term="no_xhat"),
        ),
        Mistake(
            "dx multiplied by sigma instead of divided",
            "x_hat = (x - mu) / sigma, so every path into x carries the factor 1 / sigma: "
            "dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma.",
            _bw(divide="mul"),
        ),
        Mistake(
            "dgamma without dy (the sum of x_hat)",
            "dgamma is the upstream gradient times what gamma multiplies: sum(dy * x_hat) "
            "over the tokens, not sum(x_hat).",
            _bw(dgamma_plain="xhat"),
        ),
    ),
    forbidden=_LN_FORBIDDEN + ("native_layer_norm_backward", "backward", "grad"),
    forbidden_hint="Derive the gradient by hand; autograd is switched off during this check.",
)
check_layer_norm_backward = register(_BACKWARD)


# ====================================================================== Exercise 4.1
def _rms_variant(x, gamma, eps=1e-6, *, center=False, eps_at="inside", l2=False, gain=True,
                 root=True, dim=-1, square=True, rms="div"):
    if center:
        x = x - x.mean(dim=dim, keepdim=True)
    sq = x * x if square else x  # square=False: the mean of x, not of x²
    ms = sq.sum(dim=dim, keepdim=True) if l2 else sq.mean(dim=dim, keepdim=True)
    y = x / (torch.sqrt(ms) + eps) if eps_at == "outside" else x / torch.sqrt(ms + eps)
    if not root:
        y = x / (ms + eps)
    if rms == "none":
        y = x
    elif rms == "mul":
        y = x * torch.sqrt(ms + eps)
    return y * gamma if gain else y


def _rv(**kw):
    return lambda x, gamma, eps=1e-6: _rms_variant(x, gamma, eps, **kw)


def _rms_cases():
    cases = []

    def add(label, x, gamma, eps=None, hidden=False):
        kw = {} if eps is None else {"eps": eps}
        cases.append(Case(label, (x, gamma), _ref_rms(x, gamma, **kw), kwargs=kw, hidden=hidden))

    add("x (2, 3, 8), float32", _t_rand(400, 2, 3, 8, dtype=torch.float32, shift=0.5),
        _t_rand(401, 8, dtype=torch.float32, shift=1.0))
    add("x (4, 4), float64", _t_rand(402, 4, 4, shift=1.0), _t_rand(403, 4, shift=1.0))
    add("x (3, 6) with tiny values (~1e-4), eps=1e-6", _t_rand(404, 3, 6, scale=1e-4),
        _t_rand(405, 6, shift=1.0))
    add("x (3, 5), eps=0.5", _t_rand(406, 3, 5), _t_rand(407, 5, shift=1.0), eps=0.5)
    zero = _t_rand(408, 3, 4)
    zero[0] = 0.0
    add("a zero token (stays zero)", zero, _t_rand(409, 4, shift=1.0), hidden=True)
    add("d = 1", _t_rand(410, 5, 1), _t_rand(411, 1, shift=1.0), hidden=True)
    x, g = _t_rand(412, 2, 3, 6), _t_rand(413, 6, shift=1.0)
    leaves = (x.clone().requires_grad_(True), g.clone().requires_grad_(True))
    out = _ref_rms(*leaves)
    probe = _t_rand(414, 2, 3, 6)
    (out * probe).sum().backward()
    cases.append(Case("gradients w.r.t. x and gamma", (x, g),
                      (out.detach(), tuple(a.grad for a in leaves)), kind="grad",
                      grad_args=(0, 1), probe=probe, hidden=True))
    return tuple(cases)


_RMS = Check(
    **table.identity(__name__, "rms_norm"),
    cases=_rms_cases,
    probes=(
        _mm.ignored(1, "`gamma`", lambda g: 2 * g + 0.5, _ref_rms,
                    "Multiply the normalised x by gamma.", how="gamma doubled"),
        _mm.ignored("eps", "`eps`", lambda e: 1.0, _ref_rms,
                    "Add eps to the mean of squares inside the square root.",
                    how="eps = 1", default=1e-6),
        _mm.invariant(0, lambda x: 4 * x, "x is scaled by 4", _ref_rms,
                      "RMSNorm divides x by the root of its mean square, once, then "
                      "multiplies by gamma: x / sqrt(mean(x**2) + eps) * gamma."),
    ),
    mistakes=(
        Mistake(
            "subtracted the mean (that is LayerNorm, not RMSNorm)",
            "RMSNorm drops the centring: x / sqrt(mean(x²) + eps) * gamma, with no x - mean.",
            _rv(center=True),
        ),
        Mistake(
            "eps outside the square root",
            "x / sqrt(mean(x²) + eps): eps inside the root, as in LayerNorm.",
            _rv(eps_at="outside"),
        ),
        Mistake(
            "divided by the mean square (no square root)",
            "RMS is the root of the mean square: x / sqrt(mean(x²) + eps).",
            _rv(root=False),
        ),
        Mistake(
            "divided by the L2 norm instead of the RMS",
            "The root *mean* square is sqrt(mean(x²)) = ||x|| / sqrt(d); dividing by ||x|| "
            "makes every token length 1 instead of RMS 1.",
            _rv(l2=True),
        ),
        Mistake(
            "forgot the gain",
            "Multiply by the learned per-feature gain gamma (shape (d,)) at the end.",
            _rv(gain=False),
        ),
        *(
            Mistake(
                "mean over the wrong axis",
                "The mean of squares runs over each token's features: dim=-1, keepdim=True.",
                _rv(dim=dim),
            )
            for dim in (-2, 0)  # over the tokens, or over the batch
        ),
        Mistake(
            "forgot to square (the mean of x, not of x²)",
            "RMS is the root of the mean of the *squares*: sqrt(mean(x * x) + eps). The plain "
            "mean of x can be negative (its root is nan) or near 0.",
            _rv(square=False),
        ),
        Mistake(
            "not divided by the RMS",
            "RMSNorm rescales each token to RMS 1: x / sqrt(mean(x²) + eps) * gamma.",
            _rv(rms="none"),
        ),
        Mistake(
            "multiplied by the RMS instead of dividing",
            "Divide by the RMS, so each token ends with RMS 1: x / sqrt(mean(x²) + eps) * gamma.",
            _rv(rms="mul"),
        ),
    ),
    error_hints=(_BROADCAST_HINT, _SCALAR_HINT),
    forbidden=("rms_norm", "_fused_rms_norm", "layer_norm", "native_layer_norm"),
    forbidden_hint="Write it with (x * x).mean(dim=-1, keepdim=True) and torch.sqrt.",
)
check_rms_norm = register(_RMS)
