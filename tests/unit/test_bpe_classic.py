"""Classic (Sennrich) BPE from the encoder-decoder survey: characters + end-of-word symbol, "
"merge by frequency."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_ref.bpe import ClassicBPE
from transformer_ref.corpus import small_sample

# Sennrich et al. (2016), Figure 1's dictionary: low x5, lower x2, newest x6, widest x3.
WORDS = ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3


def test_sennrich_example_merges_and_tie_rule():
    bpe = ClassicBPE().train(WORDS, num_merges=4)
    # (e,s), (s,t) and (t,</w>) each occur 9 times: ties go to the greatest pair of strings.
    assert bpe.merges == [("t", "</w>"), ("s", "t</w>"), ("e", "st</w>"), ("o", "w")]
    assert {"st</w>", "est</w>", "ow"} <= bpe.vocab and "l" in bpe.vocab


def test_first_merge_is_the_most_frequent_pair():
    words = ["ab"] * 3 + ["cd"] * 2
    bpe = ClassicBPE().train(words, num_merges=1)
    assert bpe.merges == [("b", "</w>")]  # (a,b) and (b,</w>) occur 3 times; "b" > "a"


def test_stops_when_no_pair_occurs_twice():
    bpe = ClassicBPE().train("abc abc xyz", num_merges=100)
    # abc occurs twice: a b c </w> merge fully; xyz occurs once so its pairs are never merged
    assert len(bpe.merges) == 3
    assert bpe.encode("abc") == ["abc</w>"] and bpe.encode("xyz") == ["x", "y", "z", "</w>"]


def test_encode_unseen_words_and_decode():
    bpe = ClassicBPE().train(WORDS, num_merges=10)
    assert bpe.encode("lowest") == ["low", "est</w>"]
    assert bpe.encode("") == ["</w>"]
    text = "lowest newer wider"
    assert bpe.decode(bpe.tokenize(text)) == text


def test_underscore_end_of_word_as_in_seed_003():
    bpe = ClassicBPE(end_of_word="_").train(WORDS, num_merges=3)
    assert bpe.merges == [("t", "_"), ("s", "t_"), ("e", "st_")]
    assert bpe.decode(bpe.tokenize("newest low")) == "newest low"


def test_round_trip_and_compression_on_shakespeare():
    text = small_sample()
    bpe = ClassicBPE().train(text, num_merges=300)
    assert bpe.decode(bpe.tokenize(text)) == " ".join(text.split())
    n_chars = sum(len(w) + 1 for w in text.split())
    assert len(bpe.tokenize(text)) < 0.5 * n_chars


def _apply_in_order(bpe, word):
    """The encoder-decoder survey's description, literally: walk the merge list, merge each "
    "pair everywhere."""
    symbols = [*word, bpe.end_of_word]
    for a, b in bpe.merges:
        out, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(alphabet="abcde", min_size=1, max_size=8), min_size=1, max_size=40),
       st.text(alphabet="abcdef", max_size=12))
def test_rank_encoding_equals_walking_the_merge_list(words, unseen):
    bpe = ClassicBPE().train(words, num_merges=20)
    for word in [unseen, *Counter(words)]:
        assert bpe.encode(word) == _apply_in_order(bpe, word)
