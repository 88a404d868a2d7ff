"""Incremental byte-level BPE training (same merges as the naive loop, much faster).

The naive loop recounts every pair after each merge. Here (as in Hugging Face
``tokenizers`` and the CS336 notes) we

1. count the pre-tokens once: distinct "words" (lists of token ids) with their frequency;
2. keep ``pair_counts[(a, b)]`` (weighted by word frequency) and an index
   ``where[(a, b)]`` = the words that contain the pair (it may still list a word that lost
   the pair since: such a word is skipped when visited, which is cheaper than keeping the
   index exact);
3. after merging ``(a, b) -> new`` re-scan only the words in ``where[(a, b)]``. Only the
   neighbours of each merged occurrence change: in ``x a b y`` the pairs ``(x, a)`` and
   ``(b, y)`` lose the word's frequency and the new pairs ``(x, new)`` and ``(new, y)`` gain
   it. A new pair's index is the list of words just rewritten, and its count the sum of
   their frequencies;
4. pick the best pair with a max-heap of ``(count, bytes_a, bytes_b)``. Entries are never
   updated in place: a new pair pushes an entry; a popped entry whose count is stale (the
   pair's count dropped) is pushed again with its current count ("lazy deletion").

For example, in ``"lower lowest"``, had the merges so far been ``(l, o)`` and ``(lo, w)``, merging
``(e, r)`` rewrites only the word ``low e r`` to ``low er``: the count of ``(low, e)`` drops
from 2 to 1 and ``(low, er)`` enters with count 1 (the word ``" low e s t"`` is not visited).

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
    read_input,
)

__all__ = ["train_bpe"]


_INVERT = bytes(range(255, -1, -1))  # byte x -> 255 - x


def _reverse_key(token: bytes) -> tuple[int, ...]:
    """Key such that ``_reverse_key(s) < _reverse_key(t)`` iff ``s > t`` (bytes order).

    >>> _reverse_key(b"ab") < _reverse_key(b"a") and _reverse_key(b"b") < _reverse_key(b"a")
    True
    """
    return (*token.translate(_INVERT), 256)


def _merge_positions(word: list[int], a: int, b: int) -> list[int]:
    """Start positions of the non-overlapping ``(a, b)`` pairs in ``word``, left to right.

    >>> _merge_positions([1, 2, 1, 2, 2], 1, 2), _merge_positions([7, 7, 7, 7, 7], 7, 7)
    ([0, 2], [0, 2])
    """
    hits, i, n = [], 0, len(word) - 1
    if a not in word:
        return hits
    while True:
        try:
            i = word.index(a, i, n)  # the next a that has a right neighbour
        except ValueError:
            return hits
        if word[i + 1] == b:
            hits.append(i)
            i += 2
        else:
            i += 1


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

    words: list[list[int]] = []
    freqs: list[int] = []
    for w, c in counts.items():
        if len(w) > 1:
            words.append(list(w))
            freqs.append(c)

    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], list[int]] = defaultdict(list)
    for wi, (word, c) in enumerate(zip(words, freqs)):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += c
            where[pair].append(wi)
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

        # Re-scan the words that contain (a, b). Around each merged occurrence the
        # neighbours' pairs (left, a) and (b, right) lose this word's count, and the word is
        # listed under the new pairs (left, new) and (new, right). Old pairs' counts only drop
        # (the heap finds out lazily); a new pair's count is the sum of the frequencies of
        # the words listed under it, and it is pushed once.
        fresh: dict[tuple[int, int], list[int]] = defaultdict(list)
        for wi in where.pop((a, b)):
            word, c = words[wi], freqs[wi]
            hits = _merge_positions(word, a, b)
            if not hits:  # the index may list a word that has lost the pair since
                continue
            merged, last, n = [], -2, len(word)
            for i in hits:
                if i > 0:
                    if i == last + 2:  # "a b a b" -> "new new": left is the previous new
                        fresh[new, new].append(wi)
                    else:
                        left = word[i - 1]
                        pair_counts[left, a] -= c
                        fresh[left, new].append(wi)
                if i + 2 < n:
                    right = word[i + 2]
                    pair_counts[b, right] -= c
                    if i + 2 not in hits:  # (else the next occurrence makes (new, new))
                        fresh[new, right].append(wi)
                merged += word[last + 2 : i]
                merged.append(new)
                last = i
            merged += word[last + 2 :]
            words[wi] = merged
        del pair_counts[a, b]
        for pair, wis in fresh.items():
            where[pair] = wis
            pair_counts[pair] = c = sum(map(freqs.__getitem__, wis))
            heapq.heappush(heap, (-c, rkey[pair[0]], rkey[pair[1]], *pair))
    return vocab, merges
