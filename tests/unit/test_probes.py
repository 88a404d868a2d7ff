"""Metamorphic probes (``autograder/checks/_metamorphic.py``, issue 49 item 1): each probe names
a wrong answer that no catalogued mistake reproduces, in the kernel's check and in the trusted
verdict (from the variants the probe recorded); a correct answer never triggers one, and a probe
never speaks after a dtype message.
"""

import dataclasses
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


def count_pairs_from_one(word_counts):  # a new pair starts at 1: every count + 1
    pairs = {}
    for word, count in word_counts.items():
        for pair in zip(word, word[1:]):
            pairs[pair] = pairs.get(pair, 1) + count
    return pairs


def count_pairs_two_apart(word_counts):  # zip(word, word[2:])
    pairs = {}
    for word, count in word_counts.items():
        for pair in zip(word, word[2:]):
            pairs[pair] = pairs.get(pair, 0) + count
    return pairs


def _merger(name, start=0, merges=lambda two, pair: two == pair):
    """A left-to-right merge_pair that starts at ``start`` and merges where ``merges``."""

    def merge(word, pair):
        out, i = [], start
        while i < len(word):
            if i < len(word) - 1 and merges((word[i], word[i + 1]), pair):
                out.append(word[i] + word[i + 1])
                i += 2
            else:
                out.append(word[i])
                i += 1
        return tuple(out)

    merge.__name__ = name
    return merge


merge_from_one = _merger("merge_from_one", start=1)  # the first symbol is lost
# != for ==: every other neighbour pair is joined
merge_other_pairs = _merger("merge_other_pairs", merges=lambda two, pair: two != pair)


def _bpe_answers():
    from helpers.answers.bpe import byte_trainer  # (tests/helpers, on the path)

    return byte_trainer


def trainer_counts_w_plus_3(text, vocab_size, special_tokens=()):  # pairs from b"w" count +3
    return _bpe_answers()(key=lambda pairs, vocab, p: (pairs[p] + 3 * (vocab[p[0]] == b"w"),
                                                       vocab[p[0]], vocab[p[1]]))(
        text, vocab_size, special_tokens)


WRONG = [  # (chapter, function, wrong answer, what the probe says)
    ("07_bpe", "count_pairs", count_pairs_from_one,
     "every count is the right one +1 (8 for 7 for ('l', 'o'))"),
    ("07_bpe", "count_pairs", count_pairs_two_apart, "your pairs are symbols 2 apart"),
    ("07_bpe", "merge_pair", merge_from_one,
     "your symbols, joined, do not spell the word's text ('ow</w>' for 'low</w>')"),
    ("07_bpe", "merge_pair", merge_other_pairs,
     "your output joins 2 symbols that are not the pair ('o', 'w')"),
    ("07_bpe", "train_bpe_naive", trainer_counts_w_plus_3, "your first merge, b'w' + b'e', is "
     "not the most frequent pair at that step: it occurs 8 times, (b's', b't') 9 times"),
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
    if key not in module.GOOD:  # 07's challenge: the incremental trainer (not in GOOD)
        assert key == table.keys("autograder.checks.bpe")["train_bpe_fast"], key
        return module.incremental_trainer
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
        "transformer", "bpe", "training"}


def _adamw(decay=lambda lr, wd: 1 - lr * wd):
    """The chapter's AdamW, with the decay factor ``decay(lr, wd)``."""

    class AdamW(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                          weight_decay=weight_decay))

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                lr, (b1, b2) = group["lr"], group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    st = self.state[p]
                    if not st:
                        st.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                    st["t"] += 1
                    t, g = st["t"], p.grad
                    p.mul_(decay(lr, group["weight_decay"]))
                    st["m"].mul_(b1).add_(g, alpha=1 - b1)
                    st["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
                    m_hat, v_hat = st["m"] / (1 - b1**t), st["v"] / (1 - b2**t)
                    p.sub_(lr * m_hat / (v_hat.sqrt() + group["eps"]))

    return AdamW


def test_adamw_probes_name_the_decay_in_the_kernel_and_the_first_step_in_the_verdict():
    """08 Ex 3.3 (issue 49 item 1): with every gradient 0 only the decay acts, so a wrong
    decay factor (2 - lr * wd) is named as such where the function can be called again (the
    kernel's check); the verdict, which has no variant of a driven check, names the first
    step that differs from torch's."""
    from autograder.checks import training

    key = _key("training", "AdamW")
    assert _core.get_check(key).probes
    training.graded(key, _adamw())  # right as written
    with pytest.raises(CheckFailed) as info:
        training.graded(key, _adamw(lambda lr, wd: 2 - lr * wd))
    assert f"{M.MARK} with every gradient 0, where the Adam step is 0 and only the decay " \
           "acts, your weights differ" in str(info.value), str(info.value)
    from autograder.checks import _training_drivers

    # what a graded kernel runs: the stub's driver (tests/unit/test_verdict_training.py)
    verdict = judged(_core.get_check(key),
                     _training_drivers.probe(key, _adamw(lambda lr, wd: 2 - lr * wd)))
    assert not verdict.passed
    assert f"{M.MARK} your weights differ from torch.optim.AdamW's after the first step " \
           "already" in verdict.message, verdict.message


@pytest.mark.parametrize("key", WITH_PROBES)
def test_a_correct_answer_never_triggers_a_probe(key):
    """Each probe, given a right output and a right function, says nothing on any case."""
    check, right = _core.get_check(key), _right(key)
    module = importlib.import_module(f"autograder.checks.{key.split('.')[0]}")
    right = module.probe(key, right) if hasattr(module, "probe") else right  # 08: its driver
    # the answer is right (its cases: an extra stage, 07's timed challenge, is another test's)
    _core._run(dataclasses.replace(check, post=None), right, hidden=True)
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
