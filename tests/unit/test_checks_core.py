"""The check machinery: friendly failures, the built-in guard, and resistance to monkeypatching.

The anti-cheat tests feed a *wrong* softmax (the right one halved) together with a patch a
student could put in an earlier cell, and assert that the graded path
(``hidden_check``, what the hidden tests call) still fails.
"""

import doctest

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

import autograder.checks
import transformer_ref
import transformer_ref.attention
import transformer_ref.numpy_ref as npref
from autograder.checks import (
    BuildItFromScratch,
    CheckFailed,
    NotImplementedYet,
    _core,
    attention,
    hidden_check,
    requires,
    table,
)

from helpers.attention_answers import np_softmax

# {function: check key} of chapter 01 (the exercise table)
KEY = table.keys("01_attention")


def wrong_softmax(x, axis=-1):
    return np_softmax(x, axis=axis) * 0.5


def graded(fn):
    hidden_check(KEY["softmax"], fn)


def test_doctests_of_the_check_library():
    for mod in (_core, attention):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, mod.__name__


# ---------------------------------------------------------------- friendly failures
def test_not_implemented_gives_not_implemented_yet_without_a_traceback_chain():
    def softmax(x, axis=-1):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet) as info:
        attention.check_softmax(softmax)
    assert "Exercise 2.1 `softmax` is not implemented yet" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert isinstance(info.value, CheckFailed)  # it still fails the test cell


def test_not_implemented_in_a_function_it_calls_names_that_function():
    def softmax(x, axis=-1):
        raise NotImplementedError()

    def self_attention_unscaled(X, W_Q, W_K, W_V):
        return softmax(X @ W_Q @ (X @ W_K).T) @ (X @ W_V)

    with pytest.raises(NotImplementedYet, match="it calls `softmax`, .* finish Exercise 2.1 first"):
        attention.check_self_attention_unscaled(self_attention_unscaled)


def test_an_exception_in_student_code_is_explained_with_its_line():
    def softmax(x, axis=-1):
        return x.nonexistent_method()

    with pytest.raises(CheckFailed) as info:
        attention.check_softmax(softmax)
    msg = str(info.value)
    assert "your function raised AttributeError" in msg
    assert "return x.nonexistent_method()" in msg
    assert info.value.__suppress_context__


def test_passing_something_that_is_not_a_function_fails_clearly():
    with pytest.raises(CheckFailed, match="pass your function `softmax`"):
        attention.check_softmax(None)


def test_requires_turns_not_implemented_into_a_note(capsys):
    with requires("Exercise 2.1"):
        raise NotImplementedError()
    assert "Finish Exercise 2.1 first" in capsys.readouterr().out
    with pytest.raises(ValueError), requires("Exercise 2.1"):  # other errors are not hidden
        raise ValueError("real bug")


def test_notebook_display_publishes_an_error_output_with_the_message_only():
    published = []

    class Shell:
        def _showtraceback(self, etype, value, stb):
            published.append((etype, stb))

    err = CheckFailed("Exercise 2.1 `softmax` fails on x")
    stb = _core._show_check_failure(Shell(), CheckFailed, err, None)
    assert published == [(CheckFailed, stb)]  # an error output: nbgrader scores the cell 0
    assert stb == ["✘ CheckFailed: Exercise 2.1 `softmax` fails on x"]


def _name_error(tmp_path, cell: str, names: dict):
    """(type, value, traceback) of running ``cell`` as a notebook cell would (its lines
    readable, as IPython's cell files are) in ``names``: the NameError it raises."""
    path = tmp_path / "cell.py"
    path.write_text(cell)
    try:
        exec(compile(cell, str(path), "exec"), names)
    except NameError as e:
        return type(e), e, e.__traceback__
    raise AssertionError("the cell ran")


class _Shell:
    def __init__(self, names):
        self.user_ns, self.published, self.default = names, [], []

    def _showtraceback(self, etype, value, stb):
        self.published.append((etype, stb))

    def showtraceback(self, exc_tuple, tb_offset=None):
        self.default.append(exc_tuple[0])


def test_a_skipped_answer_cell_says_which_answer_cell_to_run(tmp_path):
    """Issue 49: a test cell whose function was never defined (its answer cell skipped) said
    only `NameError: name 'softmax' is not defined`. It says which cell to run, still as an
    error output (nbgrader scores the cell 0); the grader's verdict says it too."""
    from autograder.checks import _judge
    from autograder.checks.training import check_checkpoint

    for cell, names, name, exercise in (
        ("check_softmax(softmax)\n", {"check_softmax": attention.check_softmax},
         "softmax", "Exercise 2.1"),
        # a check of two functions (08 Ex 5.1): the call on the failing line says which
        ("x = 1\ncheck_checkpoint(save_checkpoint, load_checkpoint)\n",
         {"check_checkpoint": check_checkpoint}, "save_checkpoint", "Exercise 5.1"),
        # a demo cell that calls it
        ("out = softmax([1.0, 2.0])\n", {}, "softmax", "Exercise 2.1"),
    ):
        shell = _Shell(names)
        etype, value, tb = _name_error(tmp_path, cell, names)
        stb = _core._show_check_failure(shell, etype, value, tb)
        assert shell.published == [(NameError, stb)] and not shell.default
        assert stb == [f"✘ NameError: define `{name}` first: run the answer cell of "
                       f"{exercise} above (name '{name}' is not defined)"]
    shell = _Shell({})  # any other name: IPython's own traceback
    assert _core._show_check_failure(shell, *_name_error(tmp_path, "np.zeros(2)\n", {})) is None
    assert shell.default == [NameError] and not shell.published
    softmax = table.check("01_attention", "softmax")
    verdict = _judge.judge(softmax, None, "NameError: name 'softmax' is not defined")
    assert not verdict.passed and verdict.diagnosis == "output missing"
    assert "`softmax` is not defined when the test cell runs: define it in the answer cell " \
        "of Exercise 2.1" in verdict.message
    other = _judge.judge(softmax, None, "NameError: name 'np' is not defined")
    assert "did not run your function to the end" in other.message


# ---------------------------------------------------------------- the built-in guard
@pytest.mark.parametrize(
    "use",
    [
        lambda t: torch.nn.functional.softmax(t, dim=-1),
        lambda t: torch.softmax(t, dim=-1),
        lambda t: t.softmax(-1),
        lambda t: torch.nn.Softmax(dim=-1)(t),
        lambda t: torch.special.softmax(t, dim=-1),
    ],
    ids=["F.softmax", "torch.softmax", "Tensor.softmax", "nn.Softmax", "special.softmax"],
)
def test_every_route_to_the_builtin_softmax_is_switched_off_during_the_check(use):
    def softmax(x, axis=-1):
        return np.moveaxis(use(torch.from_numpy(np.moveaxis(x, axis, -1))).numpy(), -1, axis)

    with pytest.raises(CheckFailed, match="build `softmax` from scratch"):
        attention.check_softmax(softmax)
    assert torch.equal(use(torch.zeros(1, 2)), torch.full((1, 2), 0.5))  # back on afterwards


def test_an_alias_imported_before_the_check_is_switched_off_too():
    from torch.nn.functional import scaled_dot_product_attention as sdpa_alias

    def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
        return sdpa_alias(q, k, v, attn_mask=mask, scale=scale)

    with pytest.raises(CheckFailed) as info:
        attention.check_scaled_dot_product_attention(scaled_dot_product_attention)
    assert "`scaled_dot_product_attention` is switched off" in str(info.value)
    assert "Exercise 5.1" in str(info.value)
    assert issubclass(BuildItFromScratch, RuntimeError)


def test_without_diagnosis_the_verdict_is_the_same_and_no_mistake_is_named(capsys):
    """``diagnose=False`` (the mutation test needs only verdicts) skips the catalogue: a
    catalogued mistake still fails on the same case, its message names nothing; the right
    answer still passes."""

    def softmax_axis_0(x, axis=-1):  # "softmax over the wrong axis (axis 0)"
        return np_softmax(x, axis=0)

    with pytest.raises(CheckFailed) as named:
        hidden_check(KEY["softmax"], softmax_axis_0)
    with pytest.raises(CheckFailed) as plain:
        hidden_check(KEY["softmax"], softmax_axis_0, diagnose=False)
    assert "Likely mistake: softmax over the wrong axis (axis 0)" in str(named.value)
    assert "Likely mistake" not in str(plain.value)
    assert str(plain.value).splitlines()[:2] == str(named.value).splitlines()[:2]
    hidden_check(KEY["softmax"], np_softmax, diagnose=False)


# ---------------------------------------------------------------- monkeypatching students
def test_wrong_answer_fails(capsys):
    with pytest.raises(CheckFailed):
        graded(wrong_softmax)
    graded(np_softmax)  # and the right one passes


@pytest.mark.parametrize(
    "target,name",
    [
        (np, "allclose"),
        (np, "isclose"),
        (np, "array_equal"),
        (np.testing, "assert_allclose"),
        (torch, "allclose"),
        (torch, "isclose"),
        (torch, "equal"),
        (torch, "all"),
        (torch.Tensor, "allclose"),
        (torch.Tensor, "__sub__"),
        (torch.Tensor, "__bool__"),
        (torch.testing, "assert_close"),
    ],
)
def test_patched_comparison_functions_do_not_rescue_a_wrong_answer(monkeypatch, target, name):
    monkeypatch.setattr(target, name, lambda *a, **k: True)
    with pytest.raises(CheckFailed):
        graded(wrong_softmax)
    with pytest.raises(CheckFailed):
        attention.check_softmax(wrong_softmax)  # the visible check binds them too


def test_replacing_the_public_check_fools_only_the_visible_check(monkeypatch):
    monkeypatch.setattr(autograder.checks, "check_softmax", lambda f: None)
    monkeypatch.setattr(attention, "check_softmax", lambda f: None)
    attention.check_softmax(wrong_softmax)  # the student's own (visible) call is fooled ...
    with pytest.raises(CheckFailed):
        graded(wrong_softmax)  # ... the hidden test is not


def test_replacing_the_reference_does_not_move_the_target(monkeypatch):
    monkeypatch.setattr(npref, "softmax", wrong_softmax)
    monkeypatch.setattr(transformer_ref, "softmax", lambda x, dim=-1: x)
    monkeypatch.setattr(transformer_ref.attention, "softmax", lambda x, dim=-1: x)
    monkeypatch.setattr(np, "exp", lambda x: x)  # even the math the reference uses
    with pytest.raises(CheckFailed):
        graded(wrong_softmax)


def test_a_tensor_subclass_cannot_answer_for_itself():
    class AlwaysClose(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            out = super().__torch_function__(func, types, args, kwargs or {})
            if getattr(func, "__name__", "") in ("isclose", "all", "allclose", "equal"):
                return torch.ones_like(out, dtype=torch.bool).as_subclass(torch.Tensor)
            return out

    def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
        return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype).as_subclass(AlwaysClose)

    with pytest.raises(CheckFailed, match="a subclass is not accepted"):
        hidden_check(KEY["scaled_dot_product_attention"], scaled_dot_product_attention)


def test_a_global_torch_function_mode_cannot_answer_for_the_check():
    class Liar(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if getattr(func, "__name__", "") in ("isclose", "all", "allclose", "equal"):
                return torch.ones_like(out, dtype=torch.bool) if torch.is_tensor(out) else True
            return out

    with Liar():
        with pytest.raises(CheckFailed):
            graded(wrong_softmax)


def test_editing_our_inputs_in_place_cannot_change_later_cases():
    calls = []

    def softmax(x, axis=-1):
        calls.append(x)
        x *= 0  # vandalise the array we were given
        return np_softmax(x, axis=axis)

    with pytest.raises(CheckFailed, match="changed its input in place"):
        graded(softmax)
    graded(np_softmax)  # the stored cases are intact


def test_the_core_module_and_the_registry_cannot_be_rebound():
    with pytest.raises(AttributeError, match="read-only"):
        _core.hidden_check = lambda key, fn: None
    with pytest.raises(AttributeError, match="read-only"):
        _core._run = lambda *a, **k: None
    with pytest.raises(AttributeError, match="read-only"):
        del _core._compare
    fake = _core.Check(key=KEY["softmax"], exercise="x", name="softmax", cases=())
    with pytest.raises(KeyError, match="already registered"):
        _core.register(fake)
    with pytest.raises(CheckFailed):
        graded(wrong_softmax)


def test_calling_the_reference_implementation_fails_during_the_check():
    with pytest.raises(
        CheckFailed, match=r"reference implementation \(transformer_ref\) is switched"
    ):
        attention.check_softmax(lambda x, axis=-1: npref.softmax(x, axis=axis))

    def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
        return transformer_ref.scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)

    with pytest.raises(CheckFailed, match="Exercise 5.1 asks you to write"):
        hidden_check(KEY["scaled_dot_product_attention"], scaled_dot_product_attention)
    assert transformer_ref.softmax(torch.zeros(2)).tolist() == [0.5, 0.5]  # on again afterwards


def test_a_hidden_failure_after_the_visible_cases_says_so_plainly():
    """Issue 18 trial: the graded cell showed "✔ ... all N cases match" and then a bare
    failure; the in-process graded path now says the visible cases pass and a hidden one fails."""
    from autograder.checks._core import hidden_check

    def softmax_no_empty_axis(x, axis=-1):  # right, except on the hidden one-element case
        return x if x.shape[axis] == 1 else np_softmax(x, axis)

    autograder.checks.check_softmax(softmax_no_empty_axis)  # the visible cases pass
    with pytest.raises(CheckFailed) as info:
        hidden_check(KEY["softmax"], softmax_no_empty_axis)
    msg = str(info.value)
    assert msg.startswith("Exercise 2.1 `softmax`: the visible cases pass; a hidden case fails:")
