"""Metamorphic probes (``autograder/checks/_metamorphic.py``, issue 49 item 1): each probe names
a wrong answer that no catalogued mistake reproduces, in the kernel's check and in the trusted
verdict (from the variants the probe recorded); a correct answer never triggers one, and a probe
never speaks after a dtype message.
"""

import importlib
import math

import numpy as np
import pytest
import torch

from autograder.checks import CheckFailed, _core, hidden_check, table
from autograder.checks import _metamorphic as M
from autograder.checks import _symptoms as S

from helpers.verdict import judged


def _core_attention(q, k, v, keep, scale):  # masked attention, 0 for a fully masked row
    s = (q @ k.transpose(-1, -2) * scale).masked_fill(~keep, float("-inf"))
    m = s.amax(-1, keepdim=True)
    w = torch.exp(s - torch.where(torch.isinf(m), torch.zeros_like(m), m))
    total = w.sum(-1, keepdim=True)
    return w / torch.where(total == 0, torch.ones_like(total), total) @ v


def _keep(mask):
    return mask if mask.dtype == torch.bool else mask == 0


def leaky(q, k, v, mask):  # query i also sees key i + 1
    keep = _keep(mask)
    T = keep.shape[-1]
    if keep.shape[-2] == T:
        keep = keep | torch.ones(T, T, dtype=torch.bool).triu(1).tril(1)
    return _core_attention(q, k, v, keep, 1 / math.sqrt(q.shape[-1]))


def mask_ignored_and_scaled(q, k, v, mask):  # two bugs: no catalogued mistake is both
    return _core_attention(q, k, v, torch.ones(1, dtype=torch.bool), 1 / q.shape[-1])


def scores_scaled(Q, K):  # Exercise 1.1 scaled too early
    return Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])


def softmax_reversed(x, axis=-1):  # m - x for x - m
    e = np.exp(np.max(x, axis=axis, keepdims=True) - x)
    return e / e.sum(axis=axis, keepdims=True)


def _ln(x, gamma, beta, eps, scale=True):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + eps) * (gamma if scale else 1) + beta


def ln_fixed_eps(x, gamma, beta, eps=1e-5):
    return _ln(x, gamma, beta, 1e-5)


def ln_no_gamma(x, gamma, beta, eps=1e-5):  # and an eps slip, so no catalogued mistake fits
    return _ln(x, gamma, beta, eps + 1e-3, scale=False)


def ln_divided_by_gamma(x, gamma, beta, eps=1e-5):  # a mutant: gamma / (x - mu) / sigma
    m = x.mean(-1, keepdim=True)
    return gamma / (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) + beta


def ce_in_bits(logits, targets):  # log base 2
    return _right(_key("training", "cross_entropy"))(logits, targets) / math.log(2)


def lr_fixed_warmup(step, max_lr, min_lr, warmup_iters, max_iters):  # 10 steps, always
    lr = _right(_key("training", "get_lr"))(step, max_lr, min_lr, 10, max_iters)
    return lr * 0.999  # and a slip, so that no catalogued mistake fits


def count_minus_w2(d_model, d_ff, activation):  # - for + before the second layer's weights
    n_in = 2 if activation == "swiglu" else 1
    return n_in * (d_model * d_ff + d_ff) - d_ff * d_model + d_model


def rope_cos_alone(x, positions, base=10000.0):  # a sin + cos for a sin + b cos
    theta = base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
    angle = positions.to(torch.float64)[:, None] * theta
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + cos), dim=-1).flatten(-2)


def sinusoidal_two_angles(max_len, d_model):  # the cosines of another angle
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = pos / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(2 * angle)
    return pe.float()


def lr_warmup_late(step, max_lr, min_lr, warmup_iters, max_iters):  # (step + 2) in warm-up
    if step < warmup_iters:
        return max_lr * (step + 2) / warmup_iters
    return _right(_key("training", "get_lr"))(step, max_lr, min_lr, warmup_iters, max_iters)


WRONG = [  # (chapter, function, wrong answer, what the probe says)
    ("02_masking", "masked_attention", leaky,
     "changing only position 1 moves your output at position 0"),
    ("02_masking", "masked_attention", mask_ignored_and_scaled,
     "your output does not change when the mask changes"),
    ("01_attention", "softmax", softmax_reversed, "your output is the right answer for -x"),
    ("01_attention", "dot_product_scores", scores_scaled,
     "your output is the right one times 1/sqrt(d_k)"),
    ("04_layer_norm", "layer_norm", ln_fixed_eps,
     "your output does not change when `eps` changes"),
    ("04_layer_norm", "layer_norm", ln_no_gamma,
     "your output does not change when `gamma` changes"),
    ("04_layer_norm", "layer_norm", ln_divided_by_gamma,
     "your output changes when x is scaled by 4 and shifted by 3"),
    ("05_feed_forward_blocks", "ffn_param_count", count_minus_w2,
     "your count differs from the right one by exactly this part: it subtracts W1 or W2 (256)"),
    ("06_transformer", "apply_rope", rope_cos_alone,
     "your output does not keep the length of each feature pair (2i, 2i+1)"),
    ("06_transformer", "sinusoidal_encoding", sinusoidal_two_angles,
     "your output does not keep (sin, cos) pairs"),
    ("08_training", "cross_entropy", ce_in_bits, "your output is the right one times 1/ln 2"),
    ("08_training", "get_lr", lr_warmup_late, "your result is right in the cosine decay and "
     "end (step >= max_iters) but wrong in the warm-up (0.7 for 0.6 at step 5)"),
    ("08_training", "get_lr", lr_fixed_warmup,
     "your output does not change when `warmup_iters` changes"),
]


@pytest.mark.parametrize("chapter, function, fn, said", WRONG,
                         ids=[w[2].__name__ for w in WRONG])
def test_a_probe_names_a_wrong_answer_in_the_kernel_and_the_verdict(chapter, function, fn, said):
    check = table.check(chapter, function)
    with pytest.raises(CheckFailed) as info:
        hidden_check(check.key, fn)
    verdict = judged(check, fn)
    assert not verdict.passed
    for message in (str(info.value), verdict.message):
        assert "Likely mistake: " in message and f"{M.MARK} {said}" in message, message
    with M.disabled(), pytest.raises(CheckFailed) as off:  # the verdict is the probes' own?
        hidden_check(check.key, fn)
    assert M.MARK not in str(off.value)  # no: the same failure, only unnamed by a probe


def _right(key):
    """A correct answer of exercise ``key``, written as a student would (helpers.answers)."""
    module = importlib.import_module(f"helpers.answers.{key.split('.')[0]}")
    good = module.GOOD[key]
    return good[0] if type(good) is tuple else good


# every check that declares probes (the table names the keys: tests/unit/test_exercise_table.py)
WITH_PROBES = sorted(ex.key for name, ch in table.TABLES.items() for ex in ch.exercises
                     if table.check(name, ex.function).probes)


def _key(module: str, function: str) -> str:
    """The check key of ``function`` in ``autograder/checks/<module>.py`` (from the table)."""
    return table.keys(f"autograder.checks.{module}")[function]


def test_every_check_with_probes_is_covered():
    """Each has a right answer written as a student would (helpers.answers), and the chapters
    whose texts the probes were written for declare some."""
    assert all(_right(key) for key in WITH_PROBES)
    assert {k.split(".")[0] for k in WITH_PROBES} >= {
        "attention", "masking", "multihead_attention", "layer_norm", "feed_forward_blocks",
        "transformer", "training"}


@pytest.mark.parametrize("key", WITH_PROBES)
def test_a_correct_answer_never_triggers_a_probe(key):
    """Each probe, given a right output and a right function, says nothing on any case."""
    check, right = _core.get_check(key), _right(key)
    hidden_check(key, right)  # the answer is right
    for case in check.cases:
        if case.kind != "grad":
            assert _core._probe_finding(check, right, case, case.expected) is None, case.label


def test_no_probe_after_a_dtype_message():
    """The dtype the text states is named as such: no probe's guess follows it."""
    check = table.check("02_masking", "masked_attention")

    def float32_and_no_mask(q, k, v, mask):
        return mask_ignored_and_scaled(q, k, v, mask).float()

    with pytest.raises(CheckFailed) as info:
        hidden_check(check.key, float32_and_no_mask)
    assert "has dtype float32" in str(info.value) and "Likely mistake" not in str(info.value)


def test_factor_names_only_the_exercise_quantities():
    probe = M.factor(lambda case: {"H": 4}, "")
    case = _core.Case("c", (), torch.arange(1.0, 5.0))
    assert probe.read(case, case.expected * 4, []).name == "output off by a factor H"
    assert probe.read(case, case.expected / 4, []).name == "output off by a factor 1/H"
    assert probe.read(case, case.expected * 3, []) is None  # a constant no quantity explains


def _attention_q_sliced(q, k, v, mask):  # right output; the last query's gradient cut
    from helpers.answers.masking import GOOD

    q = torch.cat([q[..., :-1, :], q[..., -1:, :].detach()], dim=-2)
    return GOOD[_key("masking", "masked_attention")](q, k, v, mask)


def _attention_q_cut(q, k, v, mask):  # right output; no gradient reaches q at all
    from helpers.answers.masking import GOOD

    return GOOD[_key("masking", "masked_attention")](q.detach() + 0 * q, k, v, mask)


@pytest.mark.parametrize("fn, symptom", [(_attention_q_sliced, S.GRADIENT_CUT_PART),
                                         (_attention_q_cut, S.GRADIENT_CUT)])
def test_a_gradient_that_does_not_flow_is_named(fn, symptom):
    """The output is right, the gradient for q is 0 on a slice or everywhere: named in the
    kernel and in the verdict (from the recorded gradients)."""
    check = table.check("02_masking", "masked_attention")
    with pytest.raises(CheckFailed) as info:
        hidden_check(check.key, fn)
    verdict = judged(check, fn)
    for message in (str(info.value), verdict.message):
        assert "the gradient for input 1 differs" in message, message
        assert f"Likely mistake: {symptom.name}." in message, message
    assert verdict.diagnosis == symptom.name


def test_gradient_symptoms_stay_silent_on_other_differences():
    e = torch.tensor([1.0, 2.0, 3.0])
    assert S.diagnose_grads((e,), (e.clone(),)) is None
    assert S.diagnose_grads((e,), (2 * e,)) is None  # wrong, but not cut
    assert S.diagnose_grads((e,), (torch.tensor([1.0, 0.0, 4.0]),)) is None  # cut and wrong
    assert set(S.GRADIENTS) == {S.GRADIENT_CUT, S.GRADIENT_CUT_PART}
