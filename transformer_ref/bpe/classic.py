"""Classic BPE on words (Sennrich, Haddow & Birch 2016; the survey [S4]).

1. Initialization: every word is split into characters plus an end-of-word symbol
   (``"</w>"`` here; the survey [S4] writes ``_``: pass ``end_of_word="_"``).
2. Merge: count adjacent symbol pairs over all words (weighted by word frequency) and merge
   the most frequent pair everywhere; ties go to the lexicographically greatest pair of
   strings (the same rule as the byte-level trainer).
3. Stop after ``num_merges`` merges, or earlier when no pair occurs at least twice.

Encoding an unseen word applies the learned merges in merge order; decoding joins the
symbols and turns each end-of-word symbol back into a space.

>>> bpe = ClassicBPE().train("low low low low low lower lower newest newest newest "
...                          "newest newest newest widest widest widest", num_merges=10)
>>> bpe.merges[:4]  # (e,s), (s,t), (t,</w>) all occur 9 times: the greatest pair wins
[('t', '</w>'), ('s', 't</w>'), ('e', 'st</w>'), ('o', 'w')]
>>> bpe.encode("lowest")
['low', 'est</w>']
>>> bpe.decode(bpe.encode("lowest") + bpe.encode("newer"))
'lowest newer'
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from transformer_ref.bpe.common import merge

__all__ = ["ClassicBPE"]


class ClassicBPE:
    """Sennrich-style BPE over whitespace-separated words."""

    def __init__(self, end_of_word: str = "</w>"):
        self.end_of_word = end_of_word
        self.merges: list[tuple[str, str]] = []
        self.vocab: set[str] = set()
        self._ranks: dict[tuple[str, str], int] = {}

    def _split(self, word: str) -> tuple[str, ...]:
        return (*word, self.end_of_word)

    def train(self, corpus: str | Iterable[str], num_merges: int) -> ClassicBPE:
        """Learn up to ``num_merges`` merges from a text (split on whitespace) or a word list."""
        words = corpus.split() if isinstance(corpus, str) else list(corpus)
        counts = Counter(self._split(w) for w in words)
        self.vocab = {s for w in counts for s in w}
        self.merges = []
        for _ in range(num_merges):
            pairs: dict[tuple[str, str], int] = defaultdict(int)
            for word, c in counts.items():
                for pair in zip(word, word[1:]):
                    pairs[pair] += c
            if not pairs:
                break
            best = max(pairs, key=lambda p: (pairs[p], p))
            if pairs[best] < 2:
                break
            self.merges.append(best)
            self.vocab.add(best[0] + best[1])
            counts = Counter({self._merge(w, best): c for w, c in counts.items()})
        self._ranks = {pair: r for r, pair in enumerate(self.merges)}
        return self

    @staticmethod
    def _merge(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
        return merge(word, pair, pair[0] + pair[1])

    def encode(self, word: str) -> list[str]:
        """Symbols of one word: apply the merges in the order they were learned.

        Merging the lowest-ranked pair present first is the same as walking the merge list:
        a pair that involves the token of merge k can only have a rank above k.
        """
        symbols = self._split(word)
        while len(symbols) > 1:
            ranked = [(self._ranks[p], p) for p in zip(symbols, symbols[1:]) if p in self._ranks]
            if not ranked:
                break
            symbols = self._merge(symbols, min(ranked)[1])
        return list(symbols)

    def tokenize(self, text: str) -> list[str]:
        """Symbols of every whitespace-separated word of ``text``."""
        return [s for word in text.split() for s in self.encode(word)]

    def decode(self, symbols: Iterable[str]) -> str:
        """Join symbols; an end-of-word symbol becomes a space (the last one is dropped)."""
        return "".join(symbols).replace(self.end_of_word, " ").rstrip(" ")
