"""Chapter answers for ``tests/unit/test_checks_layer_norm.py`` (and the verdict tests that
judge the same answers through a record): the right and the catalogued wrong
implementations, written as a student would."""

import numpy as np
import torch

from autograder.checks import table

# {function: check key} of the chapter (the exercise table)
KEY = table.keys("04_layer_norm")


# every exercise of the chapter: {check key: its Check declaration} (the exercise table)
CHECKS = table.declarations("04_layer_norm")


# ---------------------------------------------------------------- right answers
def good_ln_np(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) + beta


def good_ln(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * gamma + beta


def good_backward(dy, x, gamma, eps=1e-5):
    d = x.shape[-1]
    mu = x.mean(-1, keepdim=True)
    inv = 1 / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    xhat = (x - mu) * inv
    g = dy * gamma
    dx = inv / d * (d * g - g.sum(-1, keepdim=True) - xhat * (g * xhat).sum(-1, keepdim=True))
    flat = dy.reshape(-1, d)
    return dx, (flat * xhat.reshape(-1, d)).sum(0), flat.sum(0)


def good_rms(x, gamma, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma


GOOD = {
    KEY["layer_norm_np"]: good_ln_np,
    KEY["layer_norm"]: good_ln,
    KEY["layer_norm_backward"]: good_backward,
    KEY["rms_norm"]: good_rms,
}


# ---------------------------------------------------------------- students' wrong answers
def ln_np(center="mean", ddof=0, eps_out=False, no_eps=False, axis=-1, gain_col=False,
          beta_on=True, gamma_on=True, uncentred=False, no_sqrt=False):
    def f(x, gamma, beta, eps=1e-5):
        c = x.sum(axis=axis, keepdims=True) if center == "sum" else x.mean(axis=axis, keepdims=True)
        sd = x.std(axis=axis, ddof=ddof, keepdims=True)
        if uncentred:  # issue 18 mutants: var = mean(x**2)
            return gamma * (x - c) / np.sqrt((x**2).mean(axis=axis, keepdims=True) + eps) + beta
        if no_sqrt:
            return gamma * (x - c) / (x.var(axis=axis, keepdims=True) + eps) + beta
        if not gamma_on:
            gamma = np.ones_like(gamma)
        if no_eps:
            den = sd
        elif eps_out:
            den = sd + eps
        else:
            den = np.sqrt(x.var(axis=axis, ddof=ddof, keepdims=True) + eps)
        g = gamma.reshape(-1, 1) if gain_col else gamma
        y = g * (x - c) / den
        return y + beta if beta_on else y

    return f


def ln_t(moments=False, unbiased=False, eps_out=False, no_eps=False, dim=-1, gain_col=False,
         beta_on=True, center="mean", gamma_on=True, uncentred=False, no_sqrt=False):
    def f(x, gamma, beta, eps=1e-5):
        mu = x.mean(dim, keepdim=True)
        if uncentred:  # issue 18 mutants: var = mean(x**2)
            return (x - mu) / torch.sqrt(x.pow(2).mean(dim, keepdim=True) + eps) * gamma + beta
        if no_sqrt:
            var = ((x - mu) ** 2).mean(dim, keepdim=True)
            return gamma * (x - mu) / (var + eps) + beta
        if not gamma_on:
            return (x - mu) / torch.sqrt(x.var(dim, unbiased=False, keepdim=True) + eps) + beta
        var = (x**2).mean(dim, keepdim=True) - mu**2 if moments else x.var(
            dim, unbiased=unbiased, keepdim=True)
        c = x.sum(dim, keepdim=True) if center == "sum" else mu
        if no_eps:
            den = var.sqrt()
        elif eps_out:
            den = var.sqrt() + eps
        else:
            den = (var + eps).sqrt()
        g = gamma.view(-1, 1) if gain_col else gamma
        y = (x - c) / den * g
        return y + beta if beta_on else y

    return f


def bw(mean=True, var=True, gamma_on=True, summed=True, order="gb", from_x=False,
       beta_axis0=False, sigma="std", divide=True, plain_dgamma=False):
    def f(dy, x, gamma, eps=1e-5):
        mu = x.mean(-1, keepdim=True)
        v = x.var(-1, unbiased=False, keepdim=True)
        s = {"std": (v + eps).sqrt(), "var": v + eps, "no_eps": v.sqrt()}[sigma]
        xh = (x - mu) / s
        g = dy * gamma if gamma_on else dy
        dx = g.clone()
        if mean:
            dx = dx - g.mean(-1, keepdim=True)
        if var:
            dx = dx - xh * (g * xh).mean(-1, keepdim=True)
        dx = dx / s if divide else dx
        dg, db = dy * (x if from_x else xh), dy
        if plain_dgamma:  # x_hat forgotten: dgamma = dy summed like dbeta
            dg = dy
        if summed == "axis0":  # issue 18 trial: dgamma summed over the first axis only
            dg, db = dg.sum(0), db.sum(0 if beta_axis0 else list(range(x.dim() - 1)))
        elif summed:
            dims = list(range(x.dim() - 1))
            dg, db = dg.sum(dims), db.sum(dims)
        return (dx, dg, db) if order == "gb" else (dx, db, dg)

    return f


def bw_recomputed(mu_axis=-1, var_axis=-1, mu_by_sum=False, var_by_sum=False,
                  var_uncentred=False, xhat="ok", path_by_sum=None, path_axis=None,
                  var_term_sign=-1):
    """The backward pass as a student writes it step by step, with one slip: in the forward
    statistics it recomputes, or in the two means of dx (their axis, their 1/d, a sign)."""
    def f(dy, x, gamma, eps=1e-5):
        d = x.shape[-1]
        mu = x.sum(mu_axis, keepdim=True) if mu_by_sum else x.mean(mu_axis, keepdim=True)
        dev2 = x * x if var_uncentred else (x - mu) * (x - mu)
        var = dev2.sum(var_axis, keepdim=True) if var_by_sum else dev2.mean(var_axis,
                                                                             keepdim=True)
        std = torch.sqrt(var + eps)
        xh = {"ok": (x - mu) / std, "uncentred": x / std, "undivided": x - mu,
              "times": (x - mu) * std}[xhat]
        g = gamma * dy
        m1 = g.sum(-1, keepdim=True) if path_by_sum == "mean" else g.sum(-1, keepdim=True) / d
        m2 = ((g * xh).sum(-1, keepdim=True) if path_by_sum == "var"
              else (g * xh).sum(-1, keepdim=True) / d)
        if path_axis is not None:
            which, axis = path_axis
            if which == "mean":
                m1 = g.mean(axis, keepdim=True)
            else:
                m2 = (g * xh).mean(axis, keepdim=True)
        dx = (g - m1 + var_term_sign * xh * m2) / std
        lead = list(range(x.dim() - 1))
        return dx, (dy * xh).sum(lead), dy.sum(lead)

    return f


def rms(center=False, eps_out=False, l2=False, gain=True, dim=-1, no_root=False,
        unsquared=False, rms_op="div"):
    def f(x, gamma, eps=1e-6):
        if rms_op == "none":  # the division forgotten
            return gamma * x
        if rms_op == "mul":
            return gamma * x * (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()
        if center:
            x = x - x.mean(dim, keepdim=True)
        if unsquared:  # forgot the square: the mean of x
            den = torch.sqrt(x.mean(dim, keepdim=True) + eps)
        elif l2:
            den = (x.pow(2).sum(dim, keepdim=True) + eps).sqrt()
        elif eps_out:
            den = x.pow(2).mean(dim, keepdim=True).sqrt() + eps
        elif no_root:
            den = x.pow(2).mean(dim, keepdim=True) + eps
        else:
            den = (x.pow(2).mean(dim, keepdim=True) + eps).sqrt()
        return x / den * gamma if gain else x / den

    return f


def bw_slip(kind):
    """Issue 32 (mutation report): the backward pass written out, with one sign or factor
    slip."""
    def f(dy, x, gamma, eps=1e-5):
        mu = x.mean(-1, keepdim=True)
        dev = x + mu if kind == "var_plus" else x - mu
        var = (dev.mean(-1, keepdim=True) if kind == "unsquared"
               else (dev * dev).mean(-1, keepdim=True))
        std = torch.sqrt(var - eps) if kind == "eps_minus" else torch.sqrt(var + eps)
        xh = (x + mu) / std if kind == "xhat_plus" else (x - mu) / std
        g = dy / gamma if kind == "dy_over_gamma" else dy * gamma
        gm = g.mean(-1, keepdim=True)
        gxm = (g * xh).mean(-1, keepdim=True)
        mean_term = -gm if kind == "mean_plus" else gm
        var_term = {"var_mean_g": xh * gm, "var_no_mean": xh, "var_no_xhat": gxm}.get(
            kind, xh * gxm)
        inner = g - mean_term - var_term
        dx = inner * std if kind == "times_std" else inner / std
        lead = list(range(x.dim() - 1))
        dgamma = xh.sum(lead) if kind == "dgamma_no_dy" else (dy * xh).sum(lead)
        return dx, dgamma, dy.sum(lead)

    return f


BW_SLIPS = [
    ("var_plus", "x + mu instead of x - mu in the recomputed variance"),
    ("unsquared", "variance without squaring the deviations in the recomputed forward pass"),
    ("eps_minus", "eps subtracted in sigma (sqrt(var - eps))"),
    ("xhat_plus", "x_hat from x + mu instead of x - mu"),
    ("dy_over_gamma", "dy divided by gamma instead of multiplied"),
    ("mean_plus", "the mean term's sign flipped (+ mean(g))"),
    ("var_mean_g", "mean(g) instead of mean(g * x_hat) in the variance term"),
    ("var_no_mean", "the variance term without mean(g * x_hat) (x_hat alone)"),
    ("var_no_xhat", "the variance term without its x_hat factor"),
    ("times_std", "dx multiplied by sigma instead of divided"),
    ("dgamma_no_dy", "dgamma without dy (the sum of x_hat)"),
]


def ln_np_no_keepdims(x, gamma, beta, eps=1e-5):
    return gamma * (x - x.mean(axis=-1)) / np.sqrt(x.var(axis=-1) + eps) + beta


def ln_t_no_keepdim(x, gamma, beta, eps=1e-5):
    return gamma * (x - x.mean(-1)) / torch.sqrt(x.var(-1, unbiased=False) + eps) + beta


def ln_np_moments(x, gamma, beta, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean(x * x, axis=-1, keepdims=True) - mu * mu
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def ln_student(lib, mean_axis=-1, var_axis=-1, mean_by_sum=False, var_by_sum=False,
               centre_out=True, mean_minus_x=False, sd="div", plus_beta=True,
               var_plus=False, out_plus=False, eps_minus=False):
    """A student's LayerNorm in three lines (numpy or torch), with one mutant-class bug."""
    sqrt = np.sqrt if lib == "np" else torch.sqrt

    def red(t, axis, by_sum):
        if lib == "np":
            return t.sum(axis=axis, keepdims=True) if by_sum else t.mean(axis=axis, keepdims=True)
        return t.sum(axis, keepdim=True) if by_sum else t.mean(axis, keepdim=True)

    def f(x, gamma, beta, eps=1e-5):
        mean = red(x, mean_axis, mean_by_sum)
        d = x - mean
        dv = x + mean if var_plus else d
        var = red(dv * dv, var_axis, var_by_sum)
        num = (mean - x) if mean_minus_x else x + mean if out_plus else d if centre_out else x
        std = sqrt(var - eps) if eps_minus else sqrt(var + eps)
        y = gamma * (num / std if sd == "div" else num * std if sd == "mul" else num)
        return y + beta if plus_beta else y - beta

    return f


LN_STEP_NAMES = [  # the mutation report's unnamed classes, now catalogued
    ("mean over the sequence axis, variance over the features", dict(mean_axis=-2)),
    ("mean over the batch axis, variance over the features", dict(mean_axis=0)),
    ("variance over the sequence axis, mean over the features", dict(var_axis=-2)),
    ("variance over the batch axis, mean over the features", dict(var_axis=0)),
    ("the mean computed with sum()", dict(mean_by_sum=True)),
    ("the variance computed with sum()", dict(var_by_sum=True)),
    ("the output not centred (x / std instead of (x - mean) / std)", dict(centre_out=False)),
    ("mean - x instead of x - mean", dict(mean_minus_x=True)),
    ("multiplied by the standard deviation instead of dividing", dict(sd="mul")),
    ("not divided by the standard deviation", dict(sd="none")),
    ("subtracted beta", dict(plus_beta=False)),
    # issue 32 (mutation report): sign slips
    ("x + mean instead of x - mean in the variance", dict(var_plus=True)),
    ("x + mean instead of x - mean in the output", dict(out_plus=True)),
    ("eps subtracted (sqrt(var - eps))", dict(eps_minus=True)),
]


BROADCAST = "a shape that does not broadcast (keepdim missing, or gamma reshaped)"


# (check key, wrong implementation, catalogue name expected in the message, graded path only)
LN_NAMES = [
    ("std + eps instead of sqrt(var + eps)", dict(eps_out=True)),
    ("eps left out", dict(no_eps=True)),
    ("normalised over the batch axis (axis 0) instead of the features", "axis0"),
    ("normalised over the sequence axis instead of the features", "axis-2"),
    ("forgot beta", dict(beta_on=False)),
    ("forgot gamma", dict(gamma_on=False)),
    ("variance without subtracting the mean (mean of x²)", dict(uncentred=True)),
    ("divided by the variance instead of the standard deviation", dict(no_sqrt=True)),
    ("subtracted the sum instead of the mean (the lecture notes [S1] as written)",
     dict(center="sum")),
]


WRONG = []


for _name, _kw in LN_NAMES:
    graded_only = _name == "eps left out"  # only a hidden case has a token with var = 0
    np_kw = {"axis": 0} if _kw == "axis0" else {"axis": -2} if _kw == "axis-2" else _kw
    t_kw = {"dim": 0} if _kw == "axis0" else {"dim": -2} if _kw == "axis-2" else _kw
    WRONG.append((KEY["layer_norm_np"], ln_np(**np_kw), _name, graded_only))
    WRONG.append((KEY["layer_norm"], ln_t(**t_kw), _name, graded_only))


for _name, _kw in LN_STEP_NAMES:
    WRONG.append((KEY["layer_norm_np"], ln_student("np", **_kw), _name, False))
    WRONG.append((KEY["layer_norm"], ln_student("torch", **_kw), _name, False))


WRONG += [
    (KEY["layer_norm"], lambda x, gamma, beta, eps=1e-5: (x - x.mean(-1, keepdim=True))
     / torch.sqrt((x - x.mean(-1, keepdim=True)).mean(-1, keepdim=True) + eps) * gamma + beta,
     "variance without squaring the deviations", False),
    (KEY["layer_norm_np"], ln_np(ddof=1), "unbiased variance (divided by d - 1)", False),
    (KEY["layer_norm"], ln_t(unbiased=True), "unbiased variance (divided by d - 1)", False),
    (
        KEY["layer_norm"],
        ln_t(moments=True),
        "variance as mean(x²) - mean² (cancels in float32)",
        False,
    ),
    (
        KEY["layer_norm_np"],
        ln_np_moments,
        "variance as mean(x²) - mean² (cancels in float32)",
        True,
    ),
    (KEY["layer_norm_np"], ln_np(gain_col=True), BROADCAST, False),
    (KEY["layer_norm"], ln_t(gain_col=True), BROADCAST, False),
    (KEY["layer_norm_np"], ln_np_no_keepdims, BROADCAST, False),
    (KEY["layer_norm"], ln_t_no_keepdim, BROADCAST, False),
    (KEY["layer_norm_np"],
     lambda x, gamma, beta, eps=1e-5: ln_np()(x, float(gamma), beta, eps),
     "treated gamma as a scalar (the lecture notes [S1])", False),
    (KEY["layer_norm"], lambda x, gamma, beta, eps=1e-5: ln_t()(x, gamma.item(), beta, eps),
     "treated gamma as a scalar (the lecture notes [S1])", False),
    # Exercise 3.1
    (KEY["layer_norm_backward"], bw(mean=False, var=False),
     "treated the mean and the variance as constants", False),
    (KEY["layer_norm_backward"], bw(var=False), "dropped the gradient through the variance",
     False),
    (KEY["layer_norm_backward"],
     bw(mean=False), "dropped the gradient through the mean", False),
    (KEY["layer_norm_backward"], bw(gamma_on=False), "forgot gamma in dx", False),
    (KEY["layer_norm_backward"], bw(summed=False),
     "dgamma and dbeta not summed over the tokens", False),
    (KEY["layer_norm_backward"], bw(order="bg"), "returned (dx, dbeta, dgamma)", False),
    (KEY["layer_norm_backward"], bw(from_x=True), "dgamma from x instead of x_hat", False),
    (KEY["layer_norm_backward"], bw(summed="axis0"), "dgamma summed over axis 0 only", False),
    (KEY["layer_norm_backward"], bw(summed="axis0", beta_axis0=True),
     "dgamma summed over axis 0 only", False),
    # mutation testing (issue 18): the 1 / sigma factor and sigma itself
    (KEY["layer_norm_backward"], bw(divide=False), "dx not divided by sigma", False),
    (KEY["layer_norm_backward"], bw(plain_dgamma=True),
     "dgamma without x_hat (the sum of dy)", False),
    (KEY["layer_norm_backward"], bw(sigma="var"),
     "sigma without the square root (the variance)", False),
    (KEY["layer_norm_backward"], bw(sigma="no_eps"), "eps left out of sigma", False),
    # mutation testing (issue 18): the forward statistics recomputed with a forward-pass slip,
    # the two means of dx over another axis or as sums (the 1/d), the variance term's sign
    *[(KEY["layer_norm_backward"], bw_recomputed(**{kw: axis}),
       f"{stat} over the {name} axis in the recomputed forward pass", False)
      for stat, kw in (("mean", "mu_axis"), ("variance", "var_axis"))
      for name, axis in (("sequence", -2), ("batch", 0))],
    (KEY["layer_norm_backward"], bw_recomputed(mu_by_sum=True),
     "the mean computed with sum() in the recomputed forward pass", False),
    (KEY["layer_norm_backward"], bw_recomputed(var_by_sum=True),
     "the variance computed with sum() in the recomputed forward pass", False),
    (KEY["layer_norm_backward"], bw_recomputed(var_uncentred=True),
     "variance without subtracting the mean (mean of x²) in the recomputed forward pass",
     False),
    (KEY["layer_norm_backward"], bw_recomputed(xhat="uncentred"),
     "x_hat not centred (x / sigma instead of (x - mu) / sigma)", False),
    (KEY["layer_norm_backward"], bw_recomputed(xhat="undivided"), "x_hat not divided by sigma",
     False),
    (KEY["layer_norm_backward"], bw_recomputed(xhat="times"),
     "x_hat multiplied by sigma instead of divided", False),
    (KEY["layer_norm_backward"], bw_recomputed(path_by_sum="mean"),
     "sum(g) instead of mean(g) (the 1/d of the mean's gradient left out)", False),
    (KEY["layer_norm_backward"], bw_recomputed(path_by_sum="var"),
     "sum(g * x_hat) instead of mean(g * x_hat) (the 1/d of the variance's gradient left out)",
     False),
    *[(KEY["layer_norm_backward"], bw_recomputed(path_axis=(which, axis)),
       f"mean({arg}) in dx over the wrong axis", False)
      for which, arg in (("mean", "g"), ("var", "g * x_hat")) for axis in (-2, 0)],
    (KEY["layer_norm_backward"], bw_recomputed(var_term_sign=1),
     "the variance term's sign flipped (+ x_hat * mean(g * x_hat))", False),
    *[(KEY["layer_norm_backward"], bw_slip(kind), name, False) for kind, name in BW_SLIPS],
    # Exercise 4.1
    (KEY["rms_norm"],
     rms(center=True), "subtracted the mean (that is LayerNorm, not RMSNorm)",
     False),
    (KEY["rms_norm"], rms(eps_out=True), "eps outside the square root", False),
    (KEY["rms_norm"], rms(no_root=True), "divided by the mean square (no square root)",
     False),  # mutation testing (issue 18)
    (KEY["rms_norm"], rms(l2=True), "divided by the L2 norm instead of the RMS", False),
    (KEY["rms_norm"], rms(gain=False), "forgot the gain", False),
    (KEY["rms_norm"], rms(dim=-2), "mean over the wrong axis", False),
    (KEY["rms_norm"], rms(dim=0), "mean over the wrong axis", False),
    (KEY["rms_norm"], rms(unsquared=True), "forgot to square (the mean of x, not of x²)", False),
    # mutation testing (issue 18): the division by the RMS left out or turned round
    (KEY["rms_norm"], rms(rms_op="none"), "not divided by the RMS", False),
    (KEY["rms_norm"], rms(rms_op="mul"), "multiplied by the RMS instead of dividing", False),
    (KEY["rms_norm"], lambda x, g, eps=1e-6: rms()(x, g[:, None], eps), BROADCAST, False),
    (KEY["rms_norm"], lambda x, g, eps=1e-6: rms()(x, g.item(), eps),
     "treated gamma as a scalar (the lecture notes [S1])", False),
]

# catalogue entries added for issue 32 from the mutation report (python -m bench.mutation):
# each names no other mistake of its exercise
ISSUE_32 = [
    *[(KEY[ex], name) for ex in ("layer_norm_np", "layer_norm")
      for name in ("x + mean instead of x - mean in the variance",
                   "x + mean instead of x - mean in the output",
                   "eps subtracted (sqrt(var - eps))")],
    *[(KEY["layer_norm_backward"], name) for _, name in BW_SLIPS],
]

