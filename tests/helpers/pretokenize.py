"""The GPT-2 pre-tokenizer's reference splits, for tests/unit/test_bpe_pretokenize.py and the
whole-corpus checks in tests/slow/test_bpe_pretokenize_corpus.py."""

from __future__ import annotations

from collections import Counter

import regex

from transformer_ref.bpe import GPT2_PATTERN, pretokenize
from transformer_ref.bpe.common import (
    gpt2_ascii_starts,
    gpt2_starts,
    special_token_regex,
    split_special,
)

REFERENCE = regex.compile(GPT2_PATTERN)


# Long ASCII text is split on arrays (gpt2_ascii_starts), not by the regex: the same pieces.
def array_split(text: str) -> list[str]:
    starts = gpt2_ascii_starts(text.encode("ascii")).tolist()
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def spans_split(text: str) -> list[str]:
    data, starts = gpt2_starts(text)
    cuts = starts.tolist() + [len(data)]
    return [data[a:b].decode() for a, b in zip(cuts, cuts[1:])]


def regex_counts(text: str, special_tokens: list[str]) -> Counter:
    segments = split_special(text, special_token_regex(special_tokens))
    return Counter(p.encode() for segment in segments for p in pretokenize(segment))


def counted_array_splits(monkeypatch) -> list[int]:
    """The lengths of the ASCII stretches split on arrays from now on (``common``'s
    ``gpt2_ascii_starts`` wrapped for the test)."""
    from transformer_ref.bpe import common

    sizes: list[int] = []

    def counted(data):
        sizes.append(len(data))
        return gpt2_ascii_starts(data)

    monkeypatch.setattr(common, "gpt2_ascii_starts", counted)
    return sizes
