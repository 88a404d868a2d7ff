"""Byte-level BPE training: naive and incremental agree, ties, specials, vocab layout."""

import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_ref.bpe import train_bpe, train_bpe_naive
from transformer_ref.bpe.train import _reverse_key
from transformer_ref.corpus import load_shakespeare, small_sample

UNICODE = (
    "Ça va? Très bien, merci. Größe, straße. Ελληνικά και русский текст. 日本語のテキスト、"
    "中文文本。 😀😀 👍🏽 🇫🇷🇫🇷 👨‍👩‍👧 العربية עברית\n\tnaïve café — “quotes” … 1234 ²³ ½\n"
) * 3
TIES = "ab cd ef gh " * 3 + "aaaa bbbb aaaa abab baba " * 2 + "xy yx xyx yxy"


@pytest.fixture(scope="module")
def shakespeare_slice():
    return load_shakespeare("train")[:40_000]


@pytest.mark.parametrize(
    "corpus, vocab_size, specials",
    [
        ("sample", 700, ()),
        ("unicode", 420, ()),
        ("ties", 275, ()),
        ("shakespeare", 600, ("<|endoftext|>",)),
        ("sample+specials", 600, ("<|endoftext|>", "<|pad|>")),
    ],
)
def test_incremental_matches_naive(corpus, vocab_size, specials, shakespeare_slice):
    text = {
        "sample": small_sample(),
        "unicode": UNICODE,
        "ties": TIES,
        "shakespeare": shakespeare_slice.replace("\n\n", "\n\n<|endoftext|>"),
        "sample+specials": small_sample().replace("\n\n", "<|pad|>\n<|endoftext|>"),
    }[corpus]
    fast = train_bpe(text, vocab_size, specials)
    slow = train_bpe_naive(text, vocab_size, specials)
    assert fast[1] == slow[1]
    assert fast[0] == slow[0]
    assert len(fast[0]) == vocab_size  # every corpus here has enough pairs


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.text(alphabet="ab c\n'é", min_size=1, max_size=12), min_size=1, max_size=30),
    extra=st.integers(min_value=1, max_value=40),
)
def test_incremental_matches_naive_on_random_tie_heavy_corpora(words, extra):
    text = " ".join(words)  # a 6-symbol alphabet: many pairs share a count
    assert train_bpe(text, 256 + extra) == train_bpe_naive(text, 256 + extra)


def test_ties_go_to_the_lexicographically_greatest_pair():
    # Pre-tokens "ab" and " cd": pairs (a,b), (' ',c), (c,d) all occur once.
    # Greatest first: (b"c", b"d"); then (b"a", b"b") beats (b" ", b"cd") since b"a" > b" ".
    for train in (train_bpe, train_bpe_naive):
        vocab, merges = train("ab cd", 259)
        assert merges == [(b"c", b"d"), (b"a", b"b"), (b" ", b"cd")]
    # A count beats the tie rule: (a,a) occurs 3 times in "aaaa", (z,z) once.
    assert train_bpe("aaaa zz", 257)[1] == [(b"a", b"a")]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=6), st.binary(max_size=6))
def test_reverse_key_reverses_bytes_order(s, t):
    assert (_reverse_key(s) < _reverse_key(t)) == (s > t)


def test_vocab_layout_and_merges_consistent():
    specials = ["<|endoftext|>", "<|pad|>"]
    vocab, merges = train_bpe(small_sample(), 400, specials)
    assert [vocab[i] for i in range(256)] == [bytes([i]) for i in range(256)]
    assert vocab[256] == b"<|endoftext|>" and vocab[257] == b"<|pad|>"
    assert sorted(vocab) == list(range(400))
    for k, (a, b) in enumerate(merges):
        assert vocab[258 + k] == a + b
        # each merge uses tokens that already existed
        assert a in list(vocab.values())[: 258 + k] and b in list(vocab.values())[: 258 + k]


def test_special_tokens_are_not_merged_across():
    text = ("x<|endoftext|>y<|endoftext|>" * 20) + "xy " * 3
    vocab, merges = train_bpe(text, 300, ["<|endoftext|>"])
    assert merges == train_bpe_naive(text, 300, ["<|endoftext|>"])[1]
    # without the special token, "<|...|>" pieces and "x<" / ">y" would be merged
    assert not any(b"<" in a + b or b">" in a + b for a, b in merges)
    assert (b"x", b"y") in merges
    plain = train_bpe(text, 300)[1]
    assert any(b"<|" in a + b for a, b in plain)


def test_stops_when_no_pair_is_left():
    vocab, merges = train_bpe("ab ab", 1000)
    assert merges == [(b"a", b"b"), (b" ", b"ab")] and len(vocab) == 258
    assert train_bpe_naive("ab ab", 1000) == (vocab, merges)
    assert train_bpe("", 300) == ({i: bytes([i]) for i in range(256)}, [])


def test_input_path_or_text(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(small_sample(), encoding="utf-8")
    expected = train_bpe(small_sample(), 300)
    assert train_bpe(path, 300) == expected
    assert train_bpe_naive(pathlib.Path(path), 300) == expected


@pytest.mark.parametrize("train", [train_bpe, train_bpe_naive])
def test_a_path_is_explicit_and_a_missing_file_is_an_error(train, tmp_path, monkeypatch):
    """A typo in a file name used to train silently on the name itself (issue 17, item 2)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.txt").write_text(small_sample(), encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="corpsu.txt"):
        train(pathlib.Path("corpsu.txt"), 300)
    with pytest.raises(FileNotFoundError, match="directory"):
        train(tmp_path, 300)
    # a one-word str that names a file, or looks like one, is refused, not trained on as text
    for name in ("corpus.txt", "corpsu.txt", "data/corpus.txt", "C:\\data\\corpus.text"):
        with pytest.raises(ValueError, match=r"looks like a file name.*pathlib\.Path"):
            train(name, 300)
    with pytest.raises(TypeError, match="pathlib.Path"):
        train(b"corpus", 300)
    # ordinary text, including one-word text with a dot, is still text
    for text in ("low lower", "e.g.", "3.14", "end.", "corpus.txt is a file"):
        assert train(text, 256) == train_bpe_naive(text, 256)


def test_vocab_size_too_small():
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe("abc", 256, ["<|endoftext|>"])
    with pytest.raises(ValueError, match="duplicate"):
        train_bpe_naive("abc", 300, ["<s>", "<s>"])
