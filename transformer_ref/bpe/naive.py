"""The naive byte-level BPE trainer: recount every pair after every merge.

This is the loop the tokenizer notebook starts with. Per merge it costs O(total length of
all distinct pre-tokens), so it is only practical for small vocabularies; ``train_bpe`` (the
incremental trainer in :mod:`transformer_ref.bpe.train`) returns exactly the same merges.

>>> vocab, merges = train_bpe_naive("low low low lower lowest", 259)
>>> merges  # (l,o) and (o,w) both occur 5 times: the tie goes to the greater (b"o", b"w")
[(b'o', b'w'), (b'l', b'ow'), (b' ', b'low')]
>>> vocab[258]
b' low'
"""

from __future__ import annotations

import os
from collections import defaultdict

from transformer_ref.bpe.common import (
    check_vocab_size,
    count_pretokens,
    initial_vocab,
    merge,
    pair_key,
    read_input,
)

__all__ = ["train_bpe_naive"]


def train_bpe_naive(
    input: str | os.PathLike, vocab_size: int, special_tokens=()
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train byte-level BPE by recounting all pairs each step; returns ``(vocab, merges)``.

    Repeat until ``len(vocab) == vocab_size`` or no pair is left:
    count every adjacent pair over the pre-tokens (weighted by their frequency), merge the
    pair with the greatest ``(count, bytes_a, bytes_b)`` everywhere, add ``a + b`` to the vocab.
    """
    special_tokens = list(special_tokens)
    check_vocab_size(vocab_size, special_tokens)
    counts = count_pretokens(read_input(input), special_tokens)
    vocab = initial_vocab(special_tokens)
    merges: list[tuple[bytes, bytes]] = []
    words = {tuple(w): c for w, c in counts.items() if len(w) > 1}  # (ids...) -> count
    while len(vocab) < vocab_size:
        pair_counts: dict[tuple[int, int], int] = defaultdict(int)
        for word, c in words.items():
            for pair in zip(word, word[1:]):
                pair_counts[pair] += c
        if not pair_counts:
            break
        a, b = max(pair_counts, key=lambda p: pair_key(pair_counts[p], vocab[p[0]], vocab[p[1]]))
        new = len(vocab)
        vocab[new] = vocab[a] + vocab[b]
        merges.append((vocab[a], vocab[b]))
        merged = {}
        for word, c in words.items():
            if a in word:  # cheap filter before the scan
                word = merge(word, (a, b), new)
            if len(word) > 1:
                merged[word] = c
        words = merged
    return vocab, merges
