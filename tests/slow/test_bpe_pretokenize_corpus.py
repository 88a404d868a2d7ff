"""The GPT-2 pre-tokenizer's splits on the whole corpus (~7 s of CPU: the slow tier).

tests/unit/test_bpe_pretokenize.py checks the same splits on every short string and on
random text (hypothesis), with the array threshold lowered so that short strings take
both paths; these four check them on Shakespeare's train and val text as the trainers read it.
"""

from transformer_ref.bpe import common, pretokenize
from transformer_ref.bpe.common import (
    _GPT2_ASCII_RE,
    count_pretokens,
    gpt2_starts,
)

from helpers.pretokenize import (
    REFERENCE,
    array_split,
    counted_array_splits,
    regex_counts,
    spans_split,
)


def test_mixed_text_cuts_on_the_corpus():
    from transformer_ref.corpus import load_shakespeare

    train = load_shakespeare("train")
    assert not train.isascii()  # (a few em dashes): the mixed path is the one timed
    assert pretokenize(train) == REFERENCE.findall(train)


def test_array_split_on_the_corpus():
    from transformer_ref.corpus import load_shakespeare

    ascii_train = load_shakespeare("train").encode("ascii", "ignore").decode()
    for text in (load_shakespeare("val"), ascii_train):
        assert text.isascii() and len(text) > 400_000
        assert array_split(text) == _GPT2_ASCII_RE.findall(text)


def test_spans_on_the_corpus(monkeypatch):
    # the ASCII stretches of at least ARRAY_MIN characters, and only those, are split on arrays
    from transformer_ref.corpus import load_shakespeare

    sizes = counted_array_splits(monkeypatch)
    train = load_shakespeare("train")
    assert spans_split(train) == pretokenize(train)
    assert min(sizes) >= common.ARRAY_MIN and sum(sizes) > 0.99 * len(train)
    sizes.clear()
    assert spans_split("") == [] and spans_split("—") == ["—"] and sizes == [0]


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
