"""The GPT-2 pre-tokenizer and its ASCII twin (used for speed) split text identically."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_ref.bpe import GPT2_PATTERN, common, pretokenize
from transformer_ref.bpe.common import (
    _GPT2_ASCII_RE,
    GPT2_ASCII_PATTERN,
    count_pretokens,
    gpt2_regex,
)

from helpers.pretokenize import (
    REFERENCE,
    array_split,
    counted_array_splits,
    regex_counts,
    spans_split,
)

# The same splits on the whole corpus (~7 s of CPU) are checked in the slow tier:
# tests/slow/test_bpe_pretokenize_corpus.py
ASCII = "".join(map(chr, range(128)))
# one character of each kind the pattern tells apart, plus the contraction letters
REPRESENTATIVE = "aZ0 \t\n\r\x0b'sl!_\x1c\x7f"


def test_ascii_twin_on_every_short_ascii_string():
    for n in (1, 2):
        for chars in itertools.product(ASCII, repeat=n):
            s = "".join(chars)
            assert _GPT2_ASCII_RE.findall(s) == REFERENCE.findall(s), repr(s)
    for n in (3, 4):
        for chars in itertools.product(REPRESENTATIVE, repeat=n):
            s = "".join(chars)
            assert _GPT2_ASCII_RE.findall(s) == REFERENCE.findall(s), repr(s)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_ascii_twin_on_random_ascii(text):
    assert _GPT2_ASCII_RE.findall(text) == REFERENCE.findall(text)


def test_twin_is_used_only_for_ascii():
    assert gpt2_regex("plain text").pattern == GPT2_ASCII_PATTERN
    assert gpt2_regex("naïve").pattern == GPT2_PATTERN
    assert pretokenize("naïve  café's 12") == ["naïve", " ", " café", "'s", " 12"]
    assert pretokenize("you'll   see\n\n") == ["you", "'ll", "  ", " see", "\n\n"]


# Mixed text: pretokenize cuts it into ASCII stretches (the `re` twin) and stretches around the
# other characters (`regex`), only before a newline that follows a printable ASCII character.
MIXED = "ab \n\n  \t'sll!\r\x0b\x1c\x7f0—é\u00a0\u2003²日😀x"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=MIXED, max_size=80))
def test_mixed_text_is_cut_only_where_the_pieces_do_not_change(text):
    assert pretokenize(text) == REFERENCE.findall(text)




# each class, each whitespace character, and every letter a contraction can follow with
CONTRACTING = "aZ0 \t\n\r\x0b\x0c'sdmtlvre!_\x1c\x7f"


def test_array_split_on_every_short_ascii_string():
    for n in (0, 1, 2):
        for chars in itertools.product(ASCII, repeat=n):
            s = "".join(chars)
            assert array_split(s) == REFERENCE.findall(s), repr(s)
    for chars in itertools.product(CONTRACTING, repeat=3):
        s = "".join(chars)
        assert array_split(s) == REFERENCE.findall(s), repr(s)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_array_split_on_random_ascii(text):
    assert array_split(text) == REFERENCE.findall(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([*CONTRACTING, "'s", "'ll", "'ve", "'re", "'d", " '", "  ",
                                 "\n ", "don't", " you'll", "'S", "'l", "''"]), max_size=30))
def test_array_split_on_contractions_and_whitespace_runs(parts):
    text = "".join(parts)
    assert array_split(text) == REFERENCE.findall(text)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=MIXED, max_size=80), st.sampled_from([1, 8, common.ARRAY_MIN]))
def test_spans_of_mixed_text_are_its_pieces(text, array_min):
    # the ASCII stretches of at least ARRAY_MIN characters are split on arrays, the others by
    # the regex: with the threshold at 1 or 8, short strings go through both
    default, common.ARRAY_MIN = common.ARRAY_MIN, array_min
    try:
        assert spans_split(text) == REFERENCE.findall(text)
    finally:
        common.ARRAY_MIN = default


def test_spans_of_empty_and_non_ascii_text_split_nothing_on_arrays(monkeypatch):
    # (the tail of the slow tier's test_spans_on_the_corpus)
    sizes = counted_array_splits(monkeypatch)
    assert spans_split("") == [] and spans_split("—") == ["—"] and sizes == [0]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=CONTRACTING + "<|>é", max_size=120), st.sampled_from([1, 8]))
def test_pretoken_counts_on_arrays_are_the_regex_counts(text, array_min):
    # count_pretokens (the trainers' first step) counts long, mostly-ASCII segments on arrays
    defaults = common.ARRAY_MIN, common.COUNT_ARRAY_MIN
    common.ARRAY_MIN = common.COUNT_ARRAY_MIN = array_min
    try:
        assert count_pretokens(text, ["<|e|>"]) == regex_counts(text, ["<|e|>"])
    finally:
        common.ARRAY_MIN, common.COUNT_ARRAY_MIN = defaults
