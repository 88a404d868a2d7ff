"""Notebook 08's checks: right answers pass, and every catalogued mistake is named.

The wrong implementations are written here the way a student would write them (gradient
clipping by hand, since ``clip_grad_norm_`` is switched off during the check), independently
of the catalogue in ``autograder/checks/training.py``; ``test_checks_catalogue.py``
makes sure no catalogue entry goes untested. Exercises checked through a probe (a few
training steps, a resumed run, 40 000 draws) are called through ``graded``, the hidden path.
"""

from __future__ import annotations

import math

import pytest
import torch

from autograder.checks import CheckFailed, NotImplementedYet
from autograder.checks import training as TR
from autograder.checks.training import graded

from helpers.answers.training import (
    CALLS,
    CHECKS,
    GOOD,
    KEY,
    PUBLIC,
    WRONG,
    eval_fn,
    gb,
    good_ce,
    lr,
    sampler,
    step_hand_norm,
)
from helpers.catalogue import (
    assert_mistake_named,
)


@pytest.mark.parametrize("key", sorted(GOOD))
def test_right_answers_pass_visible_and_hidden(key, capsys):
    graded(key, *GOOD[key])
    PUBLIC[key](*GOOD[key])
    assert capsys.readouterr().out.count("✔") == 2


@pytest.mark.parametrize("key", sorted(GOOD))
def test_not_implemented_yet(key):
    def stub(*a, **k):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet, match="is not implemented yet"):
        graded(key, *[stub] * len(GOOD[key]))


def test_a_missing_earlier_exercise_is_named():
    def get_batch(*a, **k):
        raise NotImplementedError()

    def estimate_loss(model, data, batch_size, block_size, eval_iters, generator=None):
        return get_batch(data, batch_size, block_size, generator)

    with pytest.raises(NotImplementedYet, match="it calls `get_batch`"):
        TR.check_estimate_loss(estimate_loss)


@pytest.mark.parametrize("key,wrong,name", WRONG, ids=[f"{w[0][9:]}: {w[2]}" for w in WRONG])
def test_catalogued_mistake_is_named(key, wrong, name):
    assert_mistake_named(CHECKS[key], key, wrong, name, graded=lambda k, w: graded(k, *w))


def test_a_mistake_is_named_by_the_visible_check_too():
    with pytest.raises(CheckFailed, match="Likely mistake: cosine decays to 0 instead of min_lr"):
        TR.check_get_lr(lr("tozero"))


# ---------------------------------------------------------------- other failures
def test_builtin_cross_entropy_is_switched_off_during_the_check():
    def builtin(logits, targets):
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 targets.reshape(-1))

    with pytest.raises(CheckFailed, match="`cross_entropy` is switched off"):
        TR.check_cross_entropy(builtin)
    z, t = torch.randn(3, 5), torch.tensor([0, 1, 4])
    assert torch.allclose(torch.nn.functional.cross_entropy(z, t), good_ce(z, t), atol=1e-6)


def test_builtin_clip_grad_norm_is_switched_off_during_the_check():
    def builtin(model, optimizer, x, y, grad_clip):
        optimizer.zero_grad()
        loss = good_ce(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        return loss.item()

    with pytest.raises(CheckFailed, match="build `train_step` from scratch"):
        TR.check_train_step(builtin)


@pytest.mark.parametrize("eps,passes", [(1e-3, False), (1e-6, True), (0.0, True), (1e-8, True)])
def test_the_clipping_scale_adds_1e_6_to_the_norm(eps, passes):
    """Mutation testing (issue 18): grad_clip / (norm + 1e-3) passed every case (with a norm
    of about 1 it clips 0.1 % harder, and AdamW all but cancels a constant scale); the scale
    with no eps, or a smaller one, is as right as the hint's 1e-6."""
    student = step_hand_norm("sum", eps=eps)
    if passes:
        graded(KEY["train_step"], student)
    else:
        with pytest.raises(CheckFailed, match="case fails: clip 1e-6, far below the gradient norm"):
            graded(KEY["train_step"], student)


@pytest.mark.parametrize("wrong,says,name", [
    (eval_fn(restore=False), "still in eval mode afterwards", "model left in eval mode"),
    (eval_fn(no_grad=False), "ran with gradients enabled", "forward passes with autograd on"),
    (lambda *a: (eval_fn(restore=False)(*a), a[0].train())[0], "is in training mode afterwards",
     "mode not restored (always training)"),
])
def test_evaluation_must_restore_the_mode_and_skip_autograd(wrong, says, name):
    with pytest.raises(CheckFailed, match=says) as info:
        TR.check_estimate_loss(wrong)
    assert f"Likely mistake: {name}." in str(info.value)


def test_an_unknown_mistake_says_where_and_how_much():
    with pytest.raises(CheckFailed) as info:
        TR.check_cross_entropy(lambda z, t: good_ce(z, t) * 1.01)
    msg = str(info.value)
    assert "Likely mistake" not in msg and "differs" in msg


def test_a_batch_of_another_dtype_names_the_int64_the_exercise_states():
    """Issue 49: the data are uint16, the exercise states int64 tensors; the message said
    "(keep the input's dtype)", which is the mistake itself, not its fix."""
    import numpy as np

    with pytest.raises(CheckFailed) as info:
        TR.check_get_batch(gb(dtype=np.int32))
    msg = str(info.value)
    assert "has dtype int32; the exercise asks for int64" in msg, msg
    assert "keep the input's dtype" not in msg and "Likely mistake" not in msg


def test_sampler_output_shape_is_checked():
    with pytest.raises(CheckFailed, match=r"should return a \(B, 1\) tensor"):
        TR.check_sample_next_token(lambda logits, **kw: sampler()(logits, **kw)[:, 0])


@pytest.mark.parametrize("key,wrong,start", CALLS, ids=[c[0] for c in CALLS])
def test_call_line_shows_the_students_signature_not_the_probes_arguments(key, wrong, start):
    """The trial's feedback read `call: train_step(840, 3, 0.1, 0.01)`: the probe's seed,
    step count, clip and learning rate, not a call the student could recognise."""
    with pytest.raises(CheckFailed) as info:
        graded(key, *wrong)
    call = [ln.strip() for ln in str(info.value).splitlines() if ln.strip().startswith("call:")]
    assert call and call[0].startswith(start), str(info.value)


def test_every_probe_check_has_a_call_text():
    """Each check that runs the student's function inside an experiment says how, starting
    with the student's own function and its parameter names."""
    starts = {KEY["train_step"]: "train_step(model, optimizer, x, y, grad_clip=",
              KEY["estimate_loss"]: "estimate_loss(model, data, batch_size=",
              KEY["checkpoint"]: "save_checkpoint(path, model, optimizer, step=",
              KEY["sample_next_token"]: "sample_next_token(logits, temperature="}
    for key, start in starts.items():
        for case in CHECKS[key].cases:
            assert CHECKS[key].call_text(case).startswith(start)


def test_a_wrong_cross_entropy_cascades_into_train_step():
    """08 Ex 3.2 calls the student's cross_entropy: a wrong one is named first."""
    ns = {"torch": torch, "math": math}
    exec("def cross_entropy(logits, targets):\n"  # the mean over the batch forgotten
         "    lp = torch.log_softmax(logits, -1)\n"
         "    return -lp.gather(-1, targets.unsqueeze(-1)).sum()\n"
         "def train_step(model, optimizer, x, y, grad_clip):\n"
         "    optimizer.zero_grad()\n"
         "    logits = model(x)\n"
         "    loss = cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))\n"
         "    loss.backward()\n"
         "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n"
         "    optimizer.step()\n"
         "    return loss.item()\n", ns)
    with pytest.raises(CheckFailed) as info:
        graded(KEY["train_step"], ns["train_step"])
    assert str(info.value).startswith(
        "Exercise 3.2 `train_step` uses your `cross_entropy` (Exercise 2.1), which fails its "
        "check"), str(info.value)



# ---------------------------------------------------------------- Exercise 3.3 (AdamW)
@pytest.mark.parametrize("make", [
    lambda: type("AdamW", (torch.optim.AdamW,), {}),  # PyTorch's AdamW renamed
    lambda: type("AdamW", (torch.optim.Adam,), {}),  # Adam with decoupled decay
], ids=["subclass of AdamW", "subclass of Adam"])
def test_adamw_may_not_hand_the_update_to_pytorch(make):
    with pytest.raises(CheckFailed, match="handed the update to PyTorch's own Adam code"):
        TR.check_AdamW(make())
    with pytest.raises(CheckFailed, match="handed the update to PyTorch's own Adam code"):
        graded(KEY["AdamW"], make())


def test_adamw_delegating_to_a_hidden_pytorch_optimizer_is_refused_too():
    class AdamW(torch.optim.Optimizer):  # its own class, PyTorch's update inside
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                          weight_decay=weight_decay))
            self.inner = torch.optim.AdamW(self.param_groups)

        def step(self, closure=None):
            return self.inner.step(closure)

    with pytest.raises(CheckFailed, match="handed the update to PyTorch's own Adam code"):
        graded(KEY["AdamW"], AdamW)


def test_adamw_check_compares_every_step_of_torchs_adamw():
    """The expected weights are torch.optim.AdamW's, step by step, on two groups."""
    from autograder.checks import _training_drivers as D

    case = CHECKS[KEY["AdamW"]].cases[0]
    assert case.args[6] == "groups" and case.expected.shape[0] == case.args[1] == 5
    raw = D.adamw(torch.optim.AdamW)(*case.args)
    assert torch.equal(raw["weights"], case.expected) and raw["torch_adam"]
    # the two groups differ: without decay on the matrices the weights move elsewhere
    no_decay = D.adamw(torch.optim.AdamW)(*case.args[:5], 0.0, *case.args[6:])["weights"]
    assert not torch.allclose(no_decay, case.expected, rtol=case.rtol, atol=case.atol)


def test_transformer_refs_adamw_passes_the_check_and_matches_torch_on_every_case(capsys):
    """The chapter's reference implementation (transformer_ref/train/optim.py) gives
    torch.optim.AdamW's weights on every case, visible and hidden."""
    from autograder.checks import _training_drivers as D
    from transformer_ref.train.optim import AdamW

    graded(KEY["AdamW"], AdamW)
    assert capsys.readouterr().out.count("✔") == 1
    for case in CHECKS[KEY["AdamW"]].cases:
        raw = D.adamw(AdamW)(*case.args)
        assert not raw["torch_adam"]
        assert torch.allclose(raw["weights"], case.expected, rtol=1e-6, atol=1e-7), case.label
