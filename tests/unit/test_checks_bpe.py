"""Notebook 07's checks (BPE), what is their own: expected values from tiktoken and the naive
reference, unfinished and switched-off calls, messages, the cases issue 32 and 49 asked for.
Right answers and catalogued mistakes, in every chapter: ``test_checks_chapters.py``.
"""

import pytest
import tiktoken

from autograder.checks import CheckFailed, NotImplementedYet, hidden_check
from autograder.checks import bpe as B
from autograder.checks._core import _compare_exact
from transformer_ref.bpe import GPT2_PATTERN, train_bpe_naive

from helpers.answers.bpe import CHECKS, ISSUE_32, KEY, good_count_pairs


def test_expected_encodings_equal_tiktoken_built_from_the_same_ranks():
    for case in CHECKS[KEY["encode"]].cases:
        text, ranks, specials = case.args
        enc = tiktoken.Encoding(name="t", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                                special_tokens=specials)
        assert enc.encode(text, allowed_special="all") == case.expected, case.label


def test_expected_trainings_equal_the_naive_reference():
    for case in CHECKS[KEY["train_bpe_naive"]].cases:
        assert case.expected == train_bpe_naive(*case.args), case.label


def test_unfinished_exercise_says_not_implemented_yet():
    def train_bpe_naive(text, vocab_size, special_tokens=()):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet, match="Exercise 3.1 `train_bpe_naive` is not"):
        B.check_train_bpe_naive(train_bpe_naive)

    def train_bpe_fast(text, vocab_size, special_tokens=()):
        return train_bpe_naive(text, vocab_size, special_tokens)  # calls an unfinished one

    with pytest.raises(NotImplementedYet, match="it calls `train_bpe_naive`"):
        B.check_train_bpe_fast(train_bpe_fast)


def test_unknown_mistake_says_where_the_result_first_differs():
    # one count off (every count + 1 is a probe's: test_probes.py)
    with pytest.raises(CheckFailed) as info:
        B.check_count_pairs(lambda wc: {p: c + (p == ("l", "o"))
                                        for p, c in good_count_pairs(wc).items()})
    msg = str(info.value)
    assert "Likely mistake" not in msg
    assert "the result[('l', 'o')] is 8, expected 7" in msg


def test_long_arguments_are_summarised_in_the_message():
    with pytest.raises(CheckFailed) as info:
        hidden_check(KEY["encode_piece"], lambda piece, ranks: [0])
    assert "… (dict of length" in str(info.value)  # the ranks, not 456 entries


def test_a_dict_subclass_cannot_answer_for_itself():
    class Liar(dict):
        def __eq__(self, other):
            return True

        def items(self):
            return {("l", "o"): 7}.items()

    assert _compare_exact({("l", "o"): 7}, Liar()) is not None
    assert _compare_exact([(b"a", b"b")], [[b"a", b"b"]]) is None  # lists for tuples: fine
    assert "should be a int" in _compare_exact([1], [True])


def test_calling_the_reference_package_is_switched_off_during_the_check():
    from transformer_ref.bpe import train_bpe

    def train_bpe_naive(text, vocab_size, special_tokens=()):
        return train_bpe(text, vocab_size, special_tokens)

    with pytest.raises(CheckFailed, match="reference implementation .transformer_ref. is "
                                          "switched off"):
        B.check_train_bpe_naive(train_bpe_naive)
    with pytest.raises(CheckFailed, match="switched off"):
        hidden_check(KEY["train_bpe_fast"], train_bpe)
    assert train_bpe("aa aa", 257)[1] == [(b"a", b"a")]  # and works again afterwards


@pytest.mark.parametrize("key,name", ISSUE_32, ids=[n for _, n in ISSUE_32])
def test_leftmost_pair_and_greedy_longest_match_differ_on_a_visible_case(key, name):
    """Their outputs agree on most inputs; a visible case where only the leftmost pair is
    wrong tells them apart, so each is named by its own entry in the notebook too."""
    check = CHECKS[key]
    (leftmost,) = [m for m in check.mistakes if m.name == name]
    (greedy,) = [m for m in check.mistakes if m.name.startswith("greedy longest match")]
    apart = [c for c in check.cases if not c.hidden
             and leftmost.fn(*c.args) != c.expected == greedy.fn(*c.args)]
    assert apart


def test_the_byte_level_trainers_have_cases_that_run_out_of_pairs_before_vocab_size():
    """Issue 49: "stop when the vocabulary reaches vocab_size *or* no pair is left". A trainer
    that keeps pairs whose count reached 0 goes on merging them: cases whose vocabulary
    stays below vocab_size (visible and hidden) show it."""
    for key in (KEY["train_bpe_naive"], KEY["train_bpe_fast"]):
        short = [c for c in CHECKS[key].cases if len(c.expected[0]) < c.args[1]]
        assert any(not c.hidden and c.expected[1] for c in short), key  # merges, then none
        assert any(c.hidden and len(c.expected[1]) > 5 for c in short), key


def test_merge_pair_has_cases_whose_pair_text_spans_a_longer_symbol():
    """Issue 49: merging by string replacement joins across multi-character symbols; a
    visible and a hidden case have the pair's letters across a symbol boundary."""
    spans = [c for c in CHECKS[KEY["merge_pair"]].cases
             if f"{c.args[1][0]} {c.args[1][1]}" in " ".join(c.args[0])
             and c.args[1] not in zip(c.args[0], c.args[0][1:])]
    assert any(not c.hidden for c in spans) and any(c.hidden for c in spans)
