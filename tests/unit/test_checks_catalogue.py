"""What every chapter's checks must satisfy, over the exercise table (one test per chapter).

The wrong answers live in each chapter's ``test_checks_<module>.py`` (``WRONG``: rows whose
first item is the check key and third the mistake's name); here each chapter's catalogue is
held against them, and each check against the shape every check has.

A ✔ never hides a requirement the exercise states (issue 32): every catalogued mistake that
passes an exercise's visible cases is listed in ``HIDDEN_ONLY`` with the reason it is left to
the hidden cases, and the exercise's own text (goal, hint, docstring) says nothing of what it
gets wrong.
"""

import dataclasses
import importlib
import re

import pytest

from autograder.checks import CheckFailed, table
from autograder.checks.attention import check_scaled_dot_product_attention

from helpers.answers.attention import sdpa_torch_softmax
from helpers.catalogue import (
    assert_cases_visible_and_hidden,
    assert_every_entry_tested,
    assert_mistake_named,
    assert_stubs_not_implemented,
    exercise_text,
    visible_cases_pass,
)

CHAPTERS = sorted(table.TABLES)

# the wrong answers overflow and divide by zero on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_check_has_visible_and_hidden_cases(chapter):
    assert_cases_visible_and_hidden(table.declarations(chapter))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_catalogued_mistake_is_tested(chapter):
    tests = importlib.import_module(f"helpers.answers.{table.chapter(chapter).module}")
    assert_every_entry_tested(table.declarations(chapter), {(w[0], w[2]) for w in tests.WRONG})


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_stub_is_not_implemented_yet(chapter):
    assert_stubs_not_implemented(table.declarations(chapter))


# ---------------------------------------------------------------- hidden-only mistakes
_K = {ch: table.keys(ch) for ch in table.TABLES}

# (check key, mistake name) -> (why only a hidden case shows it, words that would state the
# requirement it breaks: none of them may be in the exercise's text)
HIDDEN_ONLY = {
    (_K["01_attention"]["self_attention_unscaled"], "unstable softmax overflowing"): (
        "Exercise 3.1 states the formula and asks to reuse Exercise 2.1's softmax (stable, and "
        "checked there); it says nothing of large scores, so the hidden case with inputs "
        "scaled by 6 is an edge case for the student to think of",
        ("stable", "overflow", "large", "scaled by"),
    ),
    (_K["04_layer_norm"]["layer_norm_np"], "variance as mean(x²) - mean² (cancels in float32)"): (
        "Exercise 2.1 states biased variance and eps inside the root; the warning against "
        "mean(x²) - mean² comes with Exercise 2.2, where that case is visible",
        ("mean(x²)", "mean(x**2)", "mean²", "offset", "cancel", "one-pass", "digits"),
    ),
}


def _hidden_only_in(chapter):
    keys = set(_K[chapter].values())
    return {k for k in HIDDEN_ONLY if k[0] in keys}


def _passing_the_visible_cases(checks):
    return {(key, m.name) for key, check in checks.items() for m in check.mistakes
            if visible_cases_pass(check, m)}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_mistake_that_passes_the_visible_cases_is_listed_hidden_only(chapter):
    found = _passing_the_visible_cases(table.declarations(chapter))
    assert found == _hidden_only_in(chapter), (
        f"passing every visible case, unlisted: {sorted(found - _hidden_only_in(chapter))} "
        "(give the exercise a visible case that shows it, or, if its text states nothing it "
        "breaks, list it in HIDDEN_ONLY with the reason); "
        f"listed, but a visible case shows it: {sorted(_hidden_only_in(chapter) - found)}"
    )


@pytest.mark.parametrize("entry", sorted(HIDDEN_ONLY), ids=lambda e: f"{e[0]}: {e[1]}")
def test_no_hidden_only_mistake_breaks_what_its_exercise_says(entry):
    key, _ = entry
    ex = table.by_key(key)
    chapter = next(ch for ch, t in table.TABLES.items() if t.module == ex.module)
    text = exercise_text(chapter, ex.number)
    reason, words = HIDDEN_ONLY[entry]
    assert reason and words
    stated = [w for w in words if w.lower() in text]
    assert not stated, f"{ex.label} says {stated}: a visible case must show it"


@pytest.mark.parametrize("entry", sorted(HIDDEN_ONLY), ids=lambda e: f"{e[0]}: {e[1]}")
def test_a_hidden_only_mistake_written_as_a_student_would_passes_the_visible_check(entry, capsys):
    """The listing holds for the answers written as a student would, not only for the
    catalogue's own function: ✔ in the notebook, the mistake named by the graded path."""
    key, name = entry
    module = key.split(".")[0]
    answers = importlib.import_module(f"helpers.answers.{module}")
    check = table.check(module, table.by_key(key).function)
    public = getattr(importlib.import_module(f"autograder.checks.{module}"), f"check_{check.name}")
    rows = [w for w in answers.WRONG if (w[0], w[2]) == entry]
    assert rows
    for row in rows:
        public(row[1])
        assert f"✔ {check.exercise}" in capsys.readouterr().out
        assert_mistake_named(check, key, row[1], name)


def test_the_walk_finds_a_stated_requirement_left_to_a_hidden_case():
    """Issue 32's case: 01 Exercise 5.1's fully masked row, hidden again, makes `torch.softmax`
    (nan there) pass the visible cases: the walk reports it."""
    key = _K["01_attention"]["scaled_dot_product_attention"]
    check = table.declarations("01_attention")[key]
    full = [c for c in check.cases if "fully masked" in c.label]
    assert full and not any(c.hidden for c in full)
    as_before = dataclasses.replace(check, cases=tuple(
        dataclasses.replace(c, hidden=True) if "fully masked" in c.label else c
        for c in check.cases))
    found = _passing_the_visible_cases({key: as_before})
    assert (key, "a fully masked row gives nan") in found
    # ... and the exercise's text states it, so it could not be listed hidden-only
    assert "zero output for fully masked rows" in exercise_text("01_attention", "5.1")
    assert not {(key, m.name) for m in check.mistakes if visible_cases_pass(check, m)}
    with pytest.raises(CheckFailed, match="Likely mistake: a fully masked row gives nan"):
        check_scaled_dot_product_attention(sdpa_torch_softmax)  # the check agrees with the walk


# ---------------------------------------------------------------- requirements the texts state
# Issue 49: three requirements the texts state passed both checks. The words below, wherever an
# exercise's text (goal, hint, docstring) says them, state a requirement; each (chapter,
# exercise, words) has a wrong answer that breaks it, written as a student would, and what
# the notebook's (visible) check says of it.
STATED_WORDS = (r"from the given (?:random )?generator", r"generator=generator",
                r"replays your generator", r"in place", r"does not modify",
                r"exactly\W+the same", r"keeps? the input's dtype", r"two whole symbols")


def _wrong_for_stated():
    """{(chapter, exercise, words): (the wrong answer's arguments to the visible check, what
    its message says)}; built on use (the answers import the chapters' checks)."""
    import numpy as np

    from autograder.checks import attention, training

    from helpers.answers import attention as A1
    from helpers.answers import bpe as A7
    from helpers.answers import layer_norm as A4
    from helpers.answers import training as A8
    from helpers.answers import transformer as A6

    def ev_own_batches(model, data, batch_size, block_size, eval_iters, generator=None):
        return A8.good_eval(model, data, batch_size, block_size, eval_iters, None)

    def gb_global(data, batch_size, block_size, generator=None):
        return A8.good_get_batch(data, batch_size, block_size, None)  # torch's own generator

    def sm(x, axis=-1):
        return A1.ans.np_softmax(x.astype(np.float64), axis=axis)

    def ln(x, gamma, beta, eps=1e-5):
        return A4.good_ln_np(x.astype(np.float64), gamma, beta, eps)

    fast = A7.incremental_trainer
    named = "Likely mistake: {}."
    return {
        ("01_attention", "2.1", r"does not modify"): (
            (A1.softmax_in_place,), "changed its input in place"),
        ("01_attention", "2.1", r"keeps? the input's dtype"): (
            (sm,), "for float32 inputs (keep the input's dtype)"),
        ("01_attention", "4.1", r"from the given (?:random )?generator"): (
            (A1.variance_fresh_generator,), named.format(attention.FRESH)),
        ("04_layer_norm", "2.1", r"keeps? the input's dtype"): (
            (ln,), "for float32 inputs (keep the input's dtype)"),
        ("06_transformer", "5.1", r"in place"): (
            (A6.make_incremental(A6.good_gpt, use_cache=False),),
            named.format("no cache passed (each token sees only itself)")),
        ("07_bpe", "2.2", r"two whole symbols"): (
            (A7.merge_by_replace,),
            named.format("merged by string replacement (joined across symbols)")),
        ("07_bpe", "4.1", r"exactly\W+the same"): (
            (lambda text, vocab_size, special_tokens=(): fast(text, vocab_size, special_tokens,
                                                              drop_zero=False),),
            named.format("pairs whose count reached 0 kept (dead pairs merged after the real "
                         "ones)")),
        # the batches of torch's own generator: other windows than the given one draws
        ("08_training", "1.1", r"generator=generator"): ((gb_global,), "differs at index"),
        ("08_training", "1.1", r"replays your generator"): ((gb_global,), "differs at index"),
        ("08_training", "1.1", r"from the given (?:random )?generator"): (
            (gb_global,), "differs at index"),
        ("08_training", "4.1", r"generator=generator"): ((ev_own_batches,), "the result is"),
        ("08_training", "5.1", r"in place"): (
            A8.ckpt_fns(assign=True), named.format("parameters replaced, not loaded in place")),
        ("08_training", "6.1", r"generator=generator"): (
            (A8.sampler(given=False),), named.format(training.NOT_GIVEN)),
    }


def _stated():
    return {(ch, e.number, w) for ch in CHAPTERS for e in table.chapter(ch).exercises
            for w in STATED_WORDS if re.search(w, exercise_text(ch, e.number))}


def test_every_requirement_the_texts_state_has_a_wrong_answer_the_visible_check_fails():
    """The walk: each (exercise, words) the texts state is listed, and only those."""
    listed = set(_wrong_for_stated())
    assert _stated() == listed, (
        f"stated, with no wrong answer listed: {sorted(_stated() - listed)}; "
        f"listed, not stated: {sorted(listed - _stated())}")


@pytest.mark.parametrize("entry", sorted(_stated()), ids=lambda e: f"{e[0]} {e[1]}: {e[2]}")
def test_a_stated_requirement_broken_fails_the_visible_check(entry):
    chapter, number, _ = entry
    args, says = _wrong_for_stated()[entry]
    ex = table.exercise(chapter, number)
    public = getattr(importlib.import_module(f"autograder.checks.{ex.module}"),
                     f"check_{ex.function}")
    with pytest.raises(CheckFailed) as info:
        public(*args)
    assert says in str(info.value), str(info.value)
    assert str(info.value).startswith(ex.label)
