"""The GPT-2 pre-tokenizer and its ASCII twin (used for speed) split text identically."""

import itertools
from collections import Counter

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_ref.bpe import GPT2_PATTERN, common, pretokenize
from transformer_ref.bpe.common import (
    _GPT2_ASCII_RE,
    GPT2_ASCII_PATTERN,
    count_pretokens,
    gpt2_ascii_starts,
    gpt2_regex,
    gpt2_starts,
    special_token_regex,
    split_special,
)

REFERENCE = regex.compile(GPT2_PATTERN)
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


def test_mixed_text_cuts_on_the_corpus():
    from transformer_ref.corpus import load_shakespeare

    train = load_shakespeare("train")
    assert not train.isascii()  # (a few em dashes): the mixed path is the one timed
    assert pretokenize(train) == REFERENCE.findall(train)


# Long ASCII text is split on arrays (gpt2_ascii_starts), not by the regex: the same pieces.
def array_split(text: str) -> list[str]:
    starts = gpt2_ascii_starts(text.encode("ascii")).tolist()
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


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


def test_array_split_on_the_corpus():
    from transformer_ref.corpus import load_shakespeare

    ascii_train = load_shakespeare("train").encode("ascii", "ignore").decode()
    for text in (load_shakespeare("val"), ascii_train):
        assert text.isascii() and len(text) > 400_000
        assert array_split(text) == _GPT2_ASCII_RE.findall(text)


def spans_split(text: str) -> list[str]:
    data, starts = gpt2_starts(text)
    cuts = starts.tolist() + [len(data)]
    return [data[a:b].decode() for a, b in zip(cuts, cuts[1:])]


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


def test_spans_on_the_corpus(monkeypatch):
    # the ASCII stretches of at least ARRAY_MIN characters, and only those, are split on arrays
    from transformer_ref.corpus import load_shakespeare

    sizes = []

    def counted(data):
        sizes.append(len(data))
        return gpt2_ascii_starts(data)

    monkeypatch.setattr(common, "gpt2_ascii_starts", counted)
    train = load_shakespeare("train")
    assert spans_split(train) == pretokenize(train)
    assert min(sizes) >= common.ARRAY_MIN and sum(sizes) > 0.99 * len(train)
    sizes.clear()
    assert spans_split("") == [] and spans_split("—") == ["—"] and sizes == [0]


def regex_counts(text: str, special_tokens: list[str]) -> Counter:
    segments = split_special(text, special_token_regex(special_tokens))
    return Counter(p.encode() for segment in segments for p in pretokenize(segment))


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


def test_pretoken_counts_on_the_corpus(monkeypatch):
    # on arrays for the (mostly ASCII) corpus, by the regex for mostly non-ASCII text
    from transformer_ref.corpus import load_shakespeare

    split = []
    monkeypatch.setattr(common, "gpt2_starts", lambda text: split.append(text) or gpt2_starts(text))
    train = load_shakespeare("train")
    assert count_pretokens(train) == regex_counts(train, []) and split == [train]
    assert len(count_pretokens(train)) > 30_000
    russian = "Привет, как дела? Всё хорошо.\n" * 200
    assert count_pretokens(russian) == regex_counts(russian, []) and len(split) == 2
