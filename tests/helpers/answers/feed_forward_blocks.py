"""Chapter answers for ``tests/unit/test_checks_feed_forward_blocks.py`` (and the verdict tests that
judge the same answers through a record): the right and the catalogued wrong
implementations, written as a student would."""

import warnings

import torch
import torch.nn.functional as F

from autograder.checks import table

# {function: check key} of the chapter (the exercise table)
KEY = table.keys("05_feed_forward_blocks")


# every exercise of the chapter: {check key: its Check declaration} (the exercise table)
CHECKS = table.declarations("05_feed_forward_blocks")


# ---------------------------------------------------------------- right answers
def good_ffn(x, W1, b1, W2, b2, activation="relu"):
    act = torch.relu if activation == "relu" else (lambda h: 0.5 * h * (1 + torch.erf(h / 2**0.5)))
    return torch.addmm(b2, act(torch.addmm(b1, x.reshape(-1, x.shape[-1]), W1)), W2).reshape(
        x.shape)


def good_conv(x, W1, b1, W2, b2):
    h = F.conv1d(x.permute(0, 2, 1), W1.t()[:, :, None], b1).clamp(min=0)
    return F.conv1d(h, W2.t()[:, :, None], b2).permute(0, 2, 1)


def good_count(d_model, d_ff, activation):
    mats = 3 if activation == "swiglu" else 2
    return mats * d_model * d_ff + (mats - 1) * d_ff + d_model


def good_swiglu(x, W1, W3, W2):
    a = x @ W1
    return (a * torch.sigmoid(a) * (x @ W3)) @ W2


def good_post(x, attn, ffn, norm1, norm2):
    h = norm1(attn(x) + x)
    return norm2(ffn(h) + h)


def good_pre(x, attn, ffn, norm1, norm2):
    h = x + attn(norm1(x))
    return h + ffn(norm2(h))


def good_gradnorm(blocks, x, target):
    out = x
    for b in blocks:
        out = b(out)
    F.mse_loss(out, target).backward()
    return torch.stack([torch.cat([p.grad.flatten() for p in b.parameters()]).norm()
                        for b in blocks])


GOOD = {
    KEY["feed_forward"]: good_ffn,
    KEY["ffn_as_conv1d"]: good_conv,
    KEY["ffn_param_count"]: good_count,
    KEY["swiglu_ffn"]: good_swiglu,
    KEY["post_ln_block"]: good_post,
    KEY["pre_ln_block"]: good_pre,
    KEY["grad_norm_per_layer"]: good_gradnorm,
}


# ---------------------------------------------------------------- students' wrong answers
def ffn(act_at="mid", act=None, biases=True, transpose=False, swapped=False):
    def f(x, W1, b1, W2, b2, activation="relu"):
        a = act or (F.relu if (activation == "relu") != swapped else F.gelu)
        if biases is False:
            b1, b2 = 0 * b1, 0 * b2
        elif biases == "b1":  # only b_1 kept
            b2 = 0 * b2
        elif biases == "b2":
            b1 = 0 * b1
        h = x @ (W1.T if transpose else W1)
        if act_at == "input":
            h = a(x) @ W1
        h = h + b1
        if act_at in ("mid", "both"):
            h = a(h)
        y = h @ W2 + b2
        return a(y) if act_at in ("out", "both") else y

    return f


def ffn_minus_bias(which):  # issue 32: one bias subtracted
    def f(x, W1, b1, W2, b2, activation="relu"):
        act = F.relu if activation == "relu" else F.gelu
        h = act(x @ W1 - b1) if which == "b1" else act(x @ W1 + b1)
        return h @ W2 - b2 if which == "b2" else h @ W2 + b2

    return f


def count_matrix_as_vector(which):  # issue 32: a weight matrix counted by one side
    def f(d_model, d_ff, activation):
        w1 = {"w1_d": d_model, "w1_f": d_ff}.get(which, d_model * d_ff)
        w2 = {"w2_d": d_model, "w2_f": d_ff}.get(which, d_ff * d_model)
        expanding = 2 if activation == "swiglu" else 1
        return expanding * (w1 + d_ff) + w2 + d_model

    return f


def ffn_tanh_gelu(x, W1, b1, W2, b2, activation="relu"):
    h = x @ W1 + b1
    h = F.gelu(h, approximate="tanh") if activation == "gelu" else F.relu(h)
    return h @ W2 + b2


def conv(after=False, bias=True, plain_weight=False, no_transpose=False, act=F.relu,
         back_with_T=False):
    def f(x, W1, b1, W2, b2):
        w1 = W1.unsqueeze(-1) if plain_weight else W1.T.unsqueeze(-1)
        inp = x if no_transpose else x.transpose(1, 2)
        h = F.conv1d(inp, w1, b1 if bias else None)
        h = h if after else act(h)  # the ReLU moved after the second convolution
        y = F.conv1d(h, W2.T.unsqueeze(-1), b2 if bias else None)
        if back_with_T:  # .T on (B, d_model, T)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch deprecates .T on 3-d tensors
                return y.T
        return (F.relu(y) if after else y).transpose(1, 2)

    return f


def count_gate_without_bias(d_model, d_ff, activation):  # issue 32: W_3 counted, its bias not
    n = d_model * d_ff + d_ff + d_ff * d_model + d_model  # W_1, b_1, W_2, b_2
    if activation == "swiglu":
        n += d_model * d_ff  # the gate W_3
    return n


def conv_reshaped(first=True, second=True):  # issue 32: kernels of the right shape by reshape
    def kernel(W, reshape):
        d_in, d_out = W.shape
        return W.reshape(d_out, d_in, 1) if reshape else W.T.unsqueeze(-1)

    def f(x, W1, b1, W2, b2):
        h = F.relu(F.conv1d(x.transpose(1, 2), kernel(W1, first), b1))
        return F.conv1d(h, kernel(W2, second), b2).transpose(1, 2)

    return f


def swiglu(kind):
    def f(x, W1, W3, W2):
        if kind == "swap":
            return (F.silu(x @ W3) * (x @ W1)) @ W2
        if kind == "sigmoid":
            return (torch.sigmoid(x @ W1) * (x @ W3)) @ W2
        if kind == "after":
            return F.silu((x @ W1) * (x @ W3)) @ W2
        if kind == "no_linear":  # forgot x @ W3
            return F.silu(x @ W1) @ W2
        if kind == "no_gate":  # forgot the SiLU(x @ W1) factor
            return (x @ W3) @ W2
        return (F.silu(x @ W1.T) * (x @ W3)) @ W2

    return f


def post(kind):
    def f(x, attn, ffn, norm1, norm2):
        if kind == "pre":
            x = x + attn(norm1(x))
            return x + ffn(norm2(x))
        if kind == "branch":
            x = x + norm1(attn(x))
            return x + norm2(ffn(x))
        if kind == "nores":
            return norm2(ffn(norm1(attn(x))))
        if kind == "no_attn":  # the attention call forgotten
            x = norm1(x)
            return norm2(x + ffn(x))
        if kind == "no_ffn":
            x = norm1(x + attn(x))
            return norm2(x)
        if kind == "ffn_input":
            h = norm1(x + attn(x))
            return norm2(h + ffn(x))
        if kind == "only_ffn_line":  # the first line never written
            return norm2(x + ffn(x))
        if kind == "minus_attn":  # issue 32: the residual written with a minus
            x = norm1(x - attn(x))
            return norm2(x + ffn(x))
        if kind == "minus_ffn":
            x = norm1(x + attn(x))
            return norm2(x - ffn(x))
        x = norm2(x + attn(x))  # swapped
        return norm1(x + ffn(x))

    return f


def pre(kind):
    def f(x, attn, ffn, norm1, norm2):
        if kind == "post":
            x = norm1(x + attn(x))
            return norm2(x + ffn(x))
        if kind == "from_normed":
            x = norm1(x)
            x = x + attn(x)
            x = norm2(x)
            return x + ffn(x)
        if kind == "branch":
            x = x + norm1(attn(x))
            return x + norm2(ffn(x))
        if kind == "nores":
            return ffn(norm2(attn(norm1(x))))
        if kind == "no_attn":  # the attention line forgotten
            return x + ffn(norm2(x))
        if kind == "no_ffn":
            return x + attn(norm1(x))
        if kind == "ffn_input":
            y = x + attn(norm1(x))
            return y + ffn(norm2(x))
        if kind == "minus_attn":  # issue 32: the residual written with a minus
            x = x - attn(norm1(x))
            return x + ffn(norm2(x))
        if kind == "minus_ffn":
            x = x + attn(norm1(x))
            return x - ffn(norm2(x))
        x = x + attn(norm2(x))  # swapped
        return x + ffn(norm1(x))

    return f


def gradnorm(kind):
    def f(blocks, x, target):
        h = x
        for b in blocks:
            h = b(h)
        if kind == "unsquared":
            (h - target).mean().backward()
        elif kind == "no_target":  # the target never subtracted
            (h**2).mean().backward()
        else:
            ((h - target) ** 2).mean().backward()
        out = []
        for b in blocks:
            grads = [p.grad for p in b.parameters()]
            if kind == "squared":
                out.append(sum((g**2).sum() for g in grads))
            elif kind == "sum":
                out.append(sum(g.norm() for g in grads))
            elif kind == "mean":  # averaged each tensor's squares
                out.append(torch.sqrt(sum(g.pow(2).mean() for g in grads)))
            elif kind in ("unsquared", "no_target"):
                out.append(torch.sqrt(sum((g**2).sum() for g in grads)))
            else:  # weights only
                out.append(torch.sqrt(sum((g**2).sum() for g in grads if g.dim() == 2)))
        return torch.stack(out)

    return f


def count_with_w_and_v(d_model, d_ff, activation):
    """SwiGLU's W and V (the paper's names) counted on top of W_1 and W_2."""
    expanding = d_model * d_ff + d_ff
    output = d_ff * d_model + d_model
    if activation == "swiglu":
        return 3 * expanding + output  # W_1, W, V, then W_2
    return expanding + output


# (check key, wrong implementation, catalogue name expected in the message, graded path only)
WRONG = [
    (KEY["feed_forward"],
     ffn(act_at="out"), "activation after the second linear layer", False),
    (KEY["feed_forward"],
     ffn(act_at="input"), "activation before the first linear layer",
     False),
    (KEY["feed_forward"], ffn(act=lambda h: h), "no activation", False),
    # issue 18 trial: the activation after both linear layers (the intro's own example)
    (KEY["feed_forward"],
     ffn(act_at="both"), "activation after both linear layers", False),
    (KEY["feed_forward"],
     ffn(act=F.relu), "ignored the `activation` argument (always ReLU)",
     False),
    (KEY["feed_forward"], ffn_tanh_gelu, "GELU's tanh approximation", False),
    # mutation testing (issue 18): the activation test inverted, GELU for both, one bias left out
    (KEY["feed_forward"], ffn(swapped=True),
     "activations swapped (GELU for relu, ReLU for gelu)", False),
    (KEY["feed_forward"], ffn(act=F.gelu),
     "GELU where ReLU is asked (always GELU)", False),
    (KEY["feed_forward"], ffn(biases="b2"), "forgot b_1 (the first layer's bias)",
     False),
    (KEY["feed_forward"], ffn(biases="b1"),
     "forgot b_2 (the second layer's bias)", False),
    (KEY["feed_forward"], ffn(biases=False), "forgot the biases", False),
    (KEY["feed_forward"],
     ffn(transpose=True), "d_ff and d_model swapped in weight shapes",
     False),
    (KEY["ffn_as_conv1d"],
     conv(after=True), "activation after the second convolution", False),
    (KEY["ffn_as_conv1d"], conv(bias=False), "forgot the biases", False),
    # issue 18 trial: GELU where the exercise asks for ReLU
    (KEY["ffn_as_conv1d"], conv(act=F.gelu), "GELU instead of ReLU", False),
    # mutation testing (issue 18): the result transposed back with .T (all three axes reversed)
    (KEY["ffn_as_conv1d"], conv(back_with_T=True),
     "transposed back with .T (every axis reversed)", False),
    (KEY["ffn_as_conv1d"],
     conv(plain_weight=True), "conv1d weight or input in the wrong layout",
     False),
    (KEY["ffn_as_conv1d"], conv(no_transpose=True),
     "conv1d weight or input in the wrong layout", False),
    *[(KEY["ffn_as_conv1d"], conv_reshaped(**kw),
       "conv1d kernel made with reshape instead of a transpose (its weights scrambled)", False)
      for kw in ({}, {"second": False}, {"first": False})],
    (KEY["ffn_param_count"], lambda d, f, a: (3 if a == "swiglu" else 2) * d * f,
     "forgot the biases", False),
    (KEY["ffn_param_count"], lambda d, f, a: 2 * d * f + f + d,
     "counted SwiGLU with two matrices", False),
    (KEY["ffn_param_count"],
     lambda d, f, a: d * f + f + d, "counted only one weight matrix",
     False),
    (KEY["ffn_param_count"], lambda d, f, a: good_count(d, f, a) - d + f,
     "both biases of size d_ff", False),
    # mutation testing (issue 18): one bias left out; the gate counted for every activation
    (KEY["ffn_param_count"],
     lambda d, f, a: (2 if a == "swiglu" else 1) * d * f + f * d + d,
     "forgot b_1 (the bias of each expanding map)", False),
    (KEY["ffn_param_count"],
     lambda d, f, a: (2 if a == "swiglu" else 1) * (d * f + f) + f * d,
     "forgot b_2 (the output bias)", False),
    (KEY["ffn_param_count"], lambda d, f, a: 2 * (d * f + f) + f * d + d,
     "counted a gate W_3 for ReLU and GELU too", False),
    # mutation testing (issue 18): SwiGLU's W and V counted on top of W_1 and W_2
    (KEY["ffn_param_count"], count_with_w_and_v,
     "counted SwiGLU with four matrices (W and V on top of W_1 and W_2)", False),
    (KEY["ffn_param_count"], count_gate_without_bias, "forgot W_3's bias (SwiGLU's gate)", False),
    (KEY["swiglu_ffn"], swiglu("swap"), "gate on the wrong branch", False),
    (KEY["swiglu_ffn"],
     swiglu("sigmoid"), "sigmoid instead of SiLU (that is GLU)", False),
    (KEY["swiglu_ffn"], swiglu("after"), "SiLU applied to the product", False),
    (KEY["swiglu_ffn"], swiglu("no_linear"),
     "left out the linear branch x W_3 (a plain SiLU FFN)", False),
    # mutation testing (issue 18): the gate SiLU(x W1) left out
    (KEY["swiglu_ffn"], swiglu("no_gate"), "left out the gate SiLU(x W_1) (a linear FFN)",
     False),
    (KEY["swiglu_ffn"],
     swiglu("transposed"), "d_ff and d_model swapped in weight shapes",
     False),
    (KEY["post_ln_block"],
     post("pre"), "norm inside the residual branch (that is pre-LN)",
     False),
    (KEY["post_ln_block"], post("branch"),
     "norm on the sublayer output only (norm placed inside the residual)", False),
    (KEY["post_ln_block"], post("nores"), "skipped the residual connection", False),
    (KEY["post_ln_block"], post("no_attn"), "attention sublayer left out", False),
    (KEY["post_ln_block"], post("no_ffn"), "feed-forward sublayer left out", False),
    (KEY["post_ln_block"], post("ffn_input"),
     "FFN applied to the block input instead of the attention sublayer's output", False),
    (KEY["post_ln_block"], post("swapped"), "norm1 and norm2 swapped", False),
    # mutation testing (issue 18): only the FFN's add & norm written
    (KEY["post_ln_block"], post("only_ffn_line"),
     "attention sublayer and norm1 left out (only the FFN line)", False),
    (KEY["pre_ln_block"],
     pre("post"), "residual added after the norm (that is post-LN)",
     False),
    (KEY["pre_ln_block"],
     pre("from_normed"), "residual taken from the normalised input",
     False),
    (KEY["pre_ln_block"], pre("branch"),
     "norm on the sublayer output only (norm placed inside the residual the wrong way)", False),
    (KEY["pre_ln_block"], pre("nores"), "skipped the residual connection", False),
    (KEY["pre_ln_block"], pre("no_attn"), "attention sublayer left out", False),
    (KEY["pre_ln_block"], pre("no_ffn"), "feed-forward sublayer left out", False),
    (KEY["pre_ln_block"], pre("ffn_input"),
     "FFN applied to the block input instead of the attention sublayer's output", False),
    (KEY["pre_ln_block"], pre("swapped"), "norm1 and norm2 swapped", False),
    # issue 32 (mutation report): a bias subtracted; a matrix counted by one side; a residual
    # written with a minus
    *[(KEY["feed_forward"], ffn_minus_bias(w), "subtracted a bias instead of adding it", False)
      for w in ("b1", "b2")],
    *[(KEY["ffn_param_count"], count_matrix_as_vector(w),
       "a weight matrix counted by one side only (d_model or d_ff, not d_model * d_ff)", False)
      for w in ("w1_d", "w1_f", "w2_d", "w2_f")],
    *[(KEY[block], kind(k), "sublayer output subtracted from the residual (x - sublayer)", False)
      for block, kind in (("post_ln_block", post), ("pre_ln_block", pre))
      for k in ("minus_attn", "minus_ffn")],
    (KEY["grad_norm_per_layer"],
     gradnorm("squared"), "returned the squared norm", False),
    (KEY["grad_norm_per_layer"], gradnorm("sum"),
     "added up the norms of the separate parameters", False),
    (KEY["grad_norm_per_layer"],
     gradnorm("weights"), "only the weight matrices", False),
    (KEY["grad_norm_per_layer"], gradnorm("mean"),
     "mean of the squared gradients instead of their sum", False),
    # mutation testing (issue 18): the loss's error not squared
    (KEY["grad_norm_per_layer"], gradnorm("unsquared"), "the error not squared in the loss",
     False),
    # mutation testing (issue 18): the loss of the output alone, the target never subtracted
    (KEY["grad_norm_per_layer"], gradnorm("no_target"), "the target left out of the loss",
     False),
]

# catalogue entries added for issue 32 (a class of 51 single-mistake students): each
# names no other mistake of its exercise
ISSUE_32 = [
    (KEY["ffn_as_conv1d"],
     "conv1d kernel made with reshape instead of a transpose (its weights scrambled)"),
    (KEY["ffn_param_count"], "forgot W_3's bias (SwiGLU's gate)"),
    # from the mutation report
    (KEY["feed_forward"], "subtracted a bias instead of adding it"),
    (KEY["ffn_param_count"],
     "a weight matrix counted by one side only (d_model or d_ff, not d_model * d_ff)"),
    (KEY["post_ln_block"], "sublayer output subtracted from the residual (x - sublayer)"),
    (KEY["pre_ln_block"], "sublayer output subtracted from the residual (x - sublayer)"),
]

