"""Incremental byte-level BPE training (same merges as the naive loop, much faster).

The naive loop recounts every pair after each merge. Here (as in Hugging Face
``tokenizers`` and the CS336 notes) we

1. count the pre-tokens once: distinct "words" (tuples of token ids) with their frequency;
2. keep ``pair_counts[(a, b)]`` (weighted by word frequency) and an index
   ``where[(a, b)]`` = the set of words containing the pair;
3. after merging ``(a, b) -> new`` re-scan only the words in ``where[(a, b)]``, and apply the
   change of each pair's count (old pairs of the word minus, new pairs plus);
4. pick the best pair with a max-heap of ``(count, bytes_a, bytes_b)``. Entries are never
   updated in place: an increased count pushes a new entry; a popped entry whose count is
   stale (the pair's count dropped) is pushed again with its current count ("lazy deletion").

The heap is a min-heap, so each entry stores ``-count`` and a key that orders byte strings in
*reverse*: ``rev(s) = (255 - s[0], ..., 255 - s[-1], 256)``. The final 256 puts a prefix
after its extensions, so ``rev(s) < rev(t)`` exactly when ``s > t``.

>>> vocab, merges = train_bpe("low low low lower lowest", 259)
>>> merges
[(b'o', b'w'), (b'l', b'ow'), (b' ', b'low')]
"""

from __future__ import annotations

import heapq
import os
from collections import defaultdict

from transformer_ref.bpe.common import (
    check_vocab_size,
    count_pretokens,
    initial_vocab,
    merge_word,
    read_input,
)

__all__ = ["train_bpe"]


def _reverse_key(token: bytes) -> tuple[int, ...]:
    """Key such that ``_reverse_key(s) < _reverse_key(t)`` iff ``s > t`` (bytes order).

    >>> _reverse_key(b"ab") < _reverse_key(b"a") and _reverse_key(b"b") < _reverse_key(b"a")
    True
    """
    return (*(255 - x for x in token), 256)


def train_bpe(
    input: str | os.PathLike, vocab_size: int, special_tokens=()
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train byte-level BPE incrementally; returns ``(vocab, merges)`` (layout: see ``common``).

    ``input`` is the training text (``str``) or a file (``pathlib.Path``); a path that does
    not exist, or a one-word ``str`` that looks like a file name, is an error (see
    :func:`~transformer_ref.bpe.common.read_input`). Special tokens are removed from the text
    before pre-tokenization, so no merge crosses them, and take ids ``256, 257, ...``.
    """
    special_tokens = list(special_tokens)
    check_vocab_size(vocab_size, special_tokens)
    counts = count_pretokens(read_input(input), special_tokens)
    vocab = initial_vocab(special_tokens)
    merges: list[tuple[bytes, bytes]] = []
    rkey = {i: _reverse_key(tok) for i, tok in vocab.items()}

    words: list[tuple[int, ...]] = []
    freqs: list[int] = []
    for w, c in counts.items():
        if len(w) > 1:
            words.append(tuple(w))
            freqs.append(c)

    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for wi, (word, c) in enumerate(zip(words, freqs)):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += c
            where[pair].add(wi)
    heap = [(-c, rkey[a], rkey[b], a, b) for (a, b), c in pair_counts.items()]
    heapq.heapify(heap)

    while len(vocab) < vocab_size and heap:
        neg, _, _, a, b = heapq.heappop(heap)
        current = pair_counts.get((a, b), 0)
        if current != -neg:  # stale entry
            if current > 0:
                heapq.heappush(heap, (-current, rkey[a], rkey[b], a, b))
            continue
        new = len(vocab)
        vocab[new] = vocab[a] + vocab[b]
        rkey[new] = _reverse_key(vocab[new])
        merges.append((vocab[a], vocab[b]))

        delta: dict[tuple[int, int], int] = defaultdict(int)
        for wi in where.pop((a, b)):
            word, c = words[wi], freqs[wi]
            merged = merge_word(word, a, b, new)
            words[wi] = merged
            old_pairs = list(zip(word, word[1:]))
            new_pairs = list(zip(merged, merged[1:]))
            for pair in old_pairs:
                delta[pair] -= c
            for pair in new_pairs:
                delta[pair] += c
            new_set = set(new_pairs)
            for pair in set(old_pairs) - new_set:
                if pair != (a, b):
                    where[pair].discard(wi)
            for pair in new_set:
                where[pair].add(wi)
        for pair, d in delta.items():
            if d == 0:
                continue
            c = pair_counts[pair] + d
            if c > 0:
                pair_counts[pair] = c
                if d > 0:
                    heapq.heappush(heap, (-c, rkey[pair[0]], rkey[pair[1]], *pair))
            else:
                del pair_counts[pair]
                where.pop(pair, None)
    return vocab, merges
