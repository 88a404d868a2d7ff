# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   language_info:
#     name: python
# ---

# %% [markdown]
# # Chapter 7 — BPE tokenization from scratch
#
# **By the end of this chapter you can** explain why language models read *subwords*, train
# byte-pair encoding (BPE) exactly as the survey [S4] states it, move it from characters to the 256
# bytes of UTF-8 with GPT-2's pre-tokenizer and special tokens, make training fast by updating
# only what a merge changes, and encode and decode text by merge rank — token for token the
# same as `tiktoken` built from *your* merges.
#
# **Builds on:** chapter 1 (the notation: a sequence of $n$ tokens is a matrix
# $X \in \mathbb{R}^{n\times d}$, one row per token). This chapter makes the tokens.
#
# **Time:** about 100 minutes (10 exercises, ~65 minutes of coding; Exercise 4.1 is a
# challenge).
#
# **Points: 16 in total** — Ex 2.1 (1), 2.2 (1), 2.3 (2), 2.4 (1), 2.5 (1), 3.1 (2),
# 4.1 (3, challenge), 5.1 (2), 5.2 (2), 5.3 (1).
#
# **How to work.** Run the cells from the top. Replace `raise NotImplementedError()` with your
# code, run the cell, then run the check below it. A failed check says what is wrong, often by
# name ("ties broken differently"). Grading runs more (hidden) cases. Everything here is plain
# Python: no PyTorch needed.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup (read-only). Run this cell first: it loads the libraries and this chapter's checks.
import functools
import re
import time
from collections import Counter, defaultdict  # defaultdict: earlier releases gave it too

import matplotlib.pyplot as plt
import regex  # like re, plus Unicode classes such as \p{L} (letters)
import tiktoken

from autograder.checks import requires
from autograder.checks.bpe import (
    EOW,
    check_count_pairs,
    check_decode,
    check_decode_symbols,
    check_encode,
    check_encode_piece,
    check_encode_word,
    check_merge_pair,
    check_train_bpe_fast,
    check_train_bpe_naive,
    check_train_classic_bpe,
)
from transformer_ref.bpe import GPT2_PATTERN
from transformer_ref.corpus import load_shakespeare

pretokenize = regex.compile(GPT2_PATTERN).findall  # GPT-2's pre-tokenizer: str -> list of str

shakespeare = load_shakespeare("train")  # 34 plays, ~4.3 million characters, offline
held_out = load_shakespeare("val")  # 4 other plays
print(f"train: {len(shakespeare):,} characters; held out: {len(held_out):,}")
print(shakespeare[:120])

# %% [markdown]
# ## 1. Why subwords
#
# A Transformer never sees letters. It sees integer **ids**: token $t$ selects row $t$ of an
# embedding matrix $E \in \mathbb{R}^{V \times d}$, and a text of $n$ tokens becomes
# $X \in \mathbb{R}^{n \times d}$, one row per token (chapter 1's row vectors). The tokenizer
# decides two numbers that the rest of the model pays for:
#
# * the **vocabulary size** $V$: the rows of $E$ (and of the output layer);
# * the **sequence length** $n$: attention costs $O(n^2)$ per layer.
#
# The survey [S4]: BPE "is designed to balance the trade-off between vocabulary size and the ability
# to represent rare and unseen words". The two extremes show why:
#
# | unit | $V$ | $n$ for this paragraph | unseen words |
# |---|---|---|---|
# | words | $10^5$–$10^6$ | short | become `<unk>`: lost |
# | characters | ~100 | ~5× longer | none |
# | **subwords** | $10^3$–$10^5$, chosen | in between | spelled from smaller pieces |
#
# Measure it on Shakespeare: how many distinct words, and how many words of the held-out plays
# were never seen in training?

# %% tags=["demo"]
train_words = Counter(re.findall(r"[A-Za-z]+", shakespeare))  # words: runs of letters
held_words = re.findall(r"[A-Za-z]+", held_out)
unseen = [w for w in held_words if w not in train_words]
print(f"distinct words in training: {len(train_words):,}")
print(f"distinct characters:        {len(set(shakespeare)):,}")
print(f"held-out words never seen in training: {len(unseen) / len(held_words):.1%}, e.g.",
      sorted(set(unseen))[:8])
print(f"characters per word: {len(held_out) / len(held_words):.1f}")


# %% [markdown]
# A word vocabulary of tens of thousands of entries still misses words of new text (names,
# rare inflections), and every miss loses information. Characters miss nothing but make
# sequences ~5 times longer, so attention is ~25 times costlier. Subwords get both:
# frequent words are one token, rare words are spelled from frequent pieces
# (section 6 shows a sentence split at several vocabulary sizes).
#
# ## 2. BPE as the survey [S4] states it
#
# [S4]'s algorithm (Sennrich, Haddow & Birch 2016):
#
# 1. **Initialization:** start with a vocabulary of individual characters and a special
#    end-of-word symbol (the survey [S4]: `_`).
# 2. **Tokenization:** represent the input text as a sequence of these initial tokens.
# 3. **Merge operations:** iteratively merge the most frequent adjacent token pair into a new
#    token. Each merge reduces the sequence length and adds the merged token to the vocabulary.
# 4. **Stopping criterion:** stop after a predefined number of merges or when no frequent pairs
#    remain.
#
# We write the end-of-word symbol `</w>` (the constant `EOW`) instead of [S4]'s `_`, so it
# cannot clash with a real underscore. Why have it at all? The `s` that ends `cats</w>` is
# a different thing from the `s` inside `cast`: with `</w>`, `s</w>` can become its own token.
#
# Words repeat, so we work on **distinct words with their counts** — each word is a tuple of
# symbols:
#
# ```
# "low low low low low lower lower"  ->  {('l','o','w','</w>'): 5,
#                                          ('l','o','w','e','r','</w>'): 2}
# ```
#
# "Most frequent pair" means: over all words, each adjacent pair of symbols counted once per
# *position*, weighted by the word's count. In `('l','o','w','</w>')` ×5 the pair `('l','o')`
# occurs 5 times; with `lower` ×2 it has 7. Note that `('a','a','a','</w>')` contains
# `('a','a')` **twice** (positions 0–1 and 1–2).
#
# ### Exercise 2.1 — count the pairs  *(1 point, ~5 min)*
#
# **Goal:** `count_pairs(word_counts)` returns a dict `{(a, b): count}` of every adjacent
# pair of symbols, weighted by the word counts.
#
# <details><summary>Hint</summary>
#
# Every word contributes each of its adjacent pairs, overlapping ones included, weighted by how
# often the word occurs.
#
# <details><summary>The key line</summary>
#
# `zip(word, word[1:])` gives the adjacent pairs of a tuple, overlapping ones included.
# `pairs[pair] = pairs.get(pair, 0) + count` saves the "is the key there yet" test.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def count_pairs(word_counts):
    """Adjacent symbol pairs over all words, weighted by word frequency.

    word_counts: {tuple of str: int}  ->  {(str, str): int}
    Example: count_pairs({("a", "a", "a", "</w>"): 2}) -> {("a", "a"): 4, ("a", "</w>"): 2}
    """
    ### BEGIN SOLUTION
    pairs = {}
    for word, count in word_counts.items():
        for pair in zip(word, word[1:]):  # every position, overlapping pairs included
            pairs[pair] = pairs.get(pair, 0) + count
    return pairs
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_1_count_pairs", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.1 (1 point)
check_count_pairs(count_pairs)

# %% [markdown]
# **Look.** [S4]'s classic example: the most frequent pairs. Three pairs tie at 9 —
# the next exercise needs a rule for that.

# %% tags=["demo"]
seed_text = ("low low low low low lower lower newest newest newest newest newest newest "
             "widest widest widest")
seed_words = Counter((*w, EOW) for w in seed_text.split())
with requires("Exercise 2.1"):
    pairs = count_pairs(seed_words)
    for pair, n in sorted(pairs.items(), key=lambda kv: -kv[1])[:6]:
        print(pair, n)


# %% [markdown]
# ### Exercise 2.2 — apply one merge  *(1 point, ~5 min)*
#
# **Goal:** `merge_pair(word, pair)` returns the word (a tuple of symbols) with every
# occurrence of `pair` replaced by the single symbol `a + b`, scanning **left to right**.
#
# Careful with overlaps: `('a','a','a')` merged with `('a','a')` is `('aa','a')`: once the
# first two `a` are used, the third has no partner. Counting saw two pairs; merging can use
# only one of them.
#
# A pair is two whole symbols side by side: `('n','e','w','es','t')` holds no pair
# `('s','t')`, although its letters spell `st`, and merging that pair leaves it unchanged.
#
# <details><summary>Hint</summary>
#
# Scan the symbols left to right; where the pair starts, join the two symbols and skip past
# both; elsewhere keep the symbol. Work on symbols, never on the joined string.
#
# <details><summary>The key line</summary>
#
# Walk with an index `i`. If `(word[i], word[i+1]) == pair`, append `word[i] + word[i+1]` and
# jump `i += 2`; otherwise append `word[i]` and step `i += 1`. Return `tuple(out)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def merge_pair(word, pair):
    """Replace each occurrence of `pair` in `word` by one merged symbol (left to right).

    word: tuple of str, pair: (str, str)  ->  tuple of str
    Example: merge_pair(("a", "a", "a", "</w>"), ("a", "a")) -> ("aa", "a", "</w>")
    """
    ### BEGIN SOLUTION
    out, i = [], 0
    while i < len(word):
        if i < len(word) - 1 and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2  # both symbols are used up
        else:
            out.append(word[i])
            i += 1
    return tuple(out)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_2_merge_pair", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.2 (1 point)
check_merge_pair(merge_pair)

# %% [markdown]
# ### Exercise 2.3 — the training loop  *(2 points, ~10 min)*
#
# **Goal:** `train_classic_bpe(text, num_merges)` splits `text` on whitespace, turns each word
# into its characters plus `EOW`, and repeats at most `num_merges` times: count the pairs,
# pick the best, **stop if it occurs fewer than 2 times** ([S4]'s "no frequent pairs
# remain"), record it, merge it in every word. Return the list of merges in order, e.g.
# `[('t', '</w>'), ('s', 't</w>'), ...]`.
#
# **Ties.** When several pairs share the top count, a different choice gives a different
# tokenizer, so the rule must be fixed. The course's rule (used by the reference and every
# check): merge the **greatest** `(count, pair)`, i.e. among equal counts the
# lexicographically greatest pair of strings:
# `best = max(pairs, key=lambda p: (pairs[p], p))`. `max(pairs, key=pairs.get)` is *not* this
# rule: it returns whichever tied pair the dict happened to meet first.
#
# <details><summary>Hint</summary>
#
# Split the text into words with the end-of-word marker, then repeat: count pairs, pick the most
# frequent, merge it everywhere. When should the loop stop early?
#
# <details><summary>The key line</summary>
#
# ```python
# words = Counter((*w, EOW) for w in text.split())
# for _ in range(num_merges):
#     pairs = count_pairs(words)
#     ...  # stop when pairs is empty or the best count < 2
#     words = Counter({merge_pair(w, best): c for w, c in words.items()})
# ```
# Two different words never merge into the same tuple (a merge keeps the letters), so the
# dict comprehension loses no counts.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_3_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def train_classic_bpe(text, num_merges):
    """[S4]'s BPE: learn up to `num_merges` merges from the words of `text`.

    text: str, num_merges: int  ->  list of (str, str), in the order learned
    Example: train_classic_bpe("aa aa", 5) -> [('a', 'a'), ('aa', '</w>')]
    """
    ### BEGIN SOLUTION
    words = Counter((*w, EOW) for w in text.split())
    merges = []
    for _ in range(num_merges):
        pairs = count_pairs(words)
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))  # ties: the greatest pair
        if pairs[best] < 2:
            break  # no frequent pair remains
        merges.append(best)
        words = Counter({merge_pair(w, best): c for w, c in words.items()})
    return merges
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_3_train_classic_bpe", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.3 (2 points)
check_train_classic_bpe(train_classic_bpe)

# %% [markdown]
# **Look.** The ten merges of [S4]'s example, and how the vocabulary grows: each merge
# adds one symbol, while the corpus gets shorter.

# %% tags=["demo"]
with requires("Exercise 2.3"):
    seed_merges = train_classic_bpe(seed_text, 10)
    words = Counter((*w, EOW) for w in seed_text.split())
    vocab = {s for w in words for s in w}
    print(f"start: {len(vocab)} symbols, corpus length {sum(len(w) * c for w, c in words.items())}")
    for k, pair in enumerate(seed_merges):
        words = Counter({merge_pair(w, pair): c for w, c in words.items()})
        vocab.add(pair[0] + pair[1])
        length = sum(len(w) * c for w, c in words.items())
        print(f"merge {k}: {pair[0]!r:>8} + {pair[1]!r:<8} -> vocab {len(vocab)}, corpus {length}")


# %% [markdown]
# ### Exercise 2.4 — encode a new word  *(1 point, ~5 min)*
#
# **Goal:** `encode_word(word, merges)` splits a word (possibly never seen in training) into
# its characters plus `EOW`, then **replays the merges in the order they were learned**,
# each one everywhere in the word. Return the list of symbols.
#
# Why in order? Training merged `('e','s')` before `('es','t')`; the token `est` can only
# appear once `es` exists. Replaying them in the learned order rebuilds exactly the pieces
# training would have made of this word.
#
# ![BPE merges replayed in order on the word lowest](figures/bpe_merges.svg)
#
# *The ten merges learned from the example text above, replayed on “lowest”: only the merges that occur in the word change it.*
#
# <details><summary>Hint</summary>
#
# Apply the learned merges to the new word in the order they were learned.
#
# <details><summary>The key line</summary>
#
# Start from `symbols = (*word, EOW)`; `for pair in merges: symbols = merge_pair(symbols, pair)`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_4_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def encode_word(word, merges):
    """Split `word` into learned symbols by replaying `merges` in order.

    word: str, merges: list of (str, str)  ->  list of str
    Example ([S4]'s merges): encode_word("lowest", merges) -> ['low', 'est</w>']
    """
    ### BEGIN SOLUTION
    symbols = (*word, EOW)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return list(symbols)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_4_encode_word", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.4 (1 point)
check_encode_word(encode_word)

# %% [markdown]
# ### Exercise 2.5 — decode  *(1 point, ~3 min)*
#
# **Goal:** `decode_symbols(symbols)` turns the symbols of several words back into text: join
# them, each `EOW` becomes a space, and the space after the last word is dropped.
#
# <details><summary>Hint</summary>
#
# Join the symbols and turn each end-of-word marker back into a space, without a trailing one.
#
# <details><summary>The key line</summary>
#
# `"".join(symbols).replace(EOW, " ").rstrip(" ")`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex2_5_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decode_symbols(symbols):
    """Symbols of whole words -> text.

    symbols: list of str  ->  str
    Example: decode_symbols(["low", "est</w>", "new", "er</w>"]) -> "lowest newer"
    """
    ### BEGIN SOLUTION
    return "".join(symbols).replace(EOW, " ").rstrip(" ")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex2_5_decode_symbols", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 2.5 (1 point)
check_decode_symbols(decode_symbols)

# %% [markdown]
# **Look.** Words the merges never saw still encode, from smaller pieces, and decode back.

# %% tags=["demo"]
with requires("Exercise 2.3, Exercise 2.4 and Exercise 2.5"):
    seed_merges = train_classic_bpe(seed_text, 10)
    for w in ["lowest", "newer", "slowest", "wider"]:
        print(f"{w:>8} -> {encode_word(w, seed_merges)}")
    symbols = [s for w in "lowest newer".split() for s in encode_word(w, seed_merges)]
    print("decoded:", repr(decode_symbols(symbols)))

# %% [markdown]
# ## 3. From characters to bytes
#
# Characters have a problem: there are ~150,000 of them in Unicode. A character vocabulary
# either grows huge or meets characters it has never seen. GPT-2 (Radford et al. 2019) runs
# BPE on **bytes** instead: every text is a sequence of UTF-8 bytes, and there are only 256
# byte values. The base alphabet is complete — no text is ever unknown — and the merges build
# characters, then words, from bytes.
#
# UTF-8 uses 1 byte for ASCII, 2 for `é`, 3 for `日`, 4 for `😀`:

# %% tags=["demo"]
for example in ["a", "é", "日", "😀", "café"]:
    print(f"{example!r:>7}: {len(example)} character(s) -> {list(example.encode('utf-8'))}")

# %% [markdown]
# **Pre-tokenization.** Run BPE on raw bytes and the most frequent pairs soon cross words:
# `e` + ` ` + `t` + `h` ... would give tokens like `e th` and `dog.` / `dog!` / `dog?` as
# separate tokens. GPT-2 first cuts the text into **pre-tokens** with a regular expression
# and BPE works inside each pre-token only — no merge ever crosses a pre-token boundary.
# The pattern (`GPT2_PATTERN`) keeps contractions (`'s`, `'ll`), a word with its leading
# space, numbers, runs of punctuation, and whitespace apart:

# %% tags=["demo"]
print(GPT2_PATTERN)
print(pretokenize("Hello, world!  It's 2024... naïve café"))


# %% [markdown]
# **Vocabulary layout** (GPT-2 style, used by every check):
#
# * ids `0..255`: the single bytes, `vocab[i] == bytes([i])`;
# * ids `256, 257, ...`: the **special tokens**, in the order given — e.g. `<|endoftext|>`,
#   which separates documents. A special token is *one* id. It is removed from the training
#   text before pre-tokenization (cut the text at it), so its characters are never counted,
#   and never merged with their neighbours;
# * then one id per merge, in merge order: merge $(a, b)$ adds `vocab[new] = a + b`.
#
# Token **bytes** now play the role of the symbols, and each pre-token is a tuple of **ids**.
# A merge is recorded as a pair of byte strings, `(b' t', b'he')`.
#
# **Ties**, as in section 2 but on bytes: merge the greatest `(count, vocab[a], vocab[b])`.
# Comparing the *ids* instead is a different rule: id 300 may be `b' t'` and id 290 `b'ou'`,
# and `b' t' < b'ou'`.
#
# ### Exercise 3.1 — the naive byte-level trainer  *(2 points, ~12 min)*
#
# **Goal:** `train_bpe_naive(text, vocab_size, special_tokens=())` returns `(vocab, merges)`:
# `vocab` a dict id → bytes with the layout above, `merges` the list of `(bytes, bytes)`.
# Merge until `len(vocab) == vocab_size` or no pair is left (every pair counts here, even a
# pair seen once). Recount all pairs after every merge — that is what makes it naive.
#
# <details><summary>Hint</summary>
#
# Like Exercise 2.3 but on bytes: pre-tokens as tuples of byte ids, a tie on the count broken by
# the bytes the two ids stand for, and each merge adds a new id to the vocabulary.
#
# <details><summary>The key line</summary>
#
# 1. The two helpers above the function are given: `pretoken_counts(text, special_tokens)`
#    cuts out the special tokens (`re.split` on their escaped alternation, longest first) and
#    counts the GPT-2 pre-tokens of the rest; `merge_ids` is `merge_pair` for tuples of ids.
# 2. Turn each pre-token into `tuple(s.encode("utf-8"))` (a tuple of byte values, i.e. ids
#    `0..255`) with its count.
# 3. Loop: `count_pairs(words)` works on tuples of ids too;
#    `a, b = max(pairs, key=lambda p: (pairs[p], vocab[p[0]], vocab[p[1]]))`; `new = len(vocab)`;
#    `vocab[new] = vocab[a] + vocab[b]`; `merge_ids(word, a, b, new)` in every word.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex3_1_given", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Given (read-only): two helpers for Exercise 3.1 and the exercises after it. Run this cell;
# your answer cell below uses them.
def pretoken_counts(text, special_tokens=()):
    """Counter of GPT-2 pre-tokens (str) of `text`, special tokens cut out first."""
    segments = [text]
    if special_tokens:
        longest_first = sorted(special_tokens, key=len, reverse=True)
        segments = re.split("|".join(re.escape(t) for t in longest_first), text)
    counts = Counter()
    for segment in segments:
        counts.update(pretokenize(segment))
    return counts


def merge_ids(word, a, b, new):
    """merge_pair for tuples of ids: each (a, b), left to right, becomes `new`."""
    out, i = [], 0
    while i < len(word):
        if i < len(word) - 1 and word[i] == a and word[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


# %% nbgrader={"grade": false, "grade_id": "ex3_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def train_bpe_naive(text, vocab_size, special_tokens=()):
    """Byte-level BPE, recounting every pair after each merge.

    text: str, vocab_size: int, special_tokens: list of str
    ->  (vocab: {int: bytes}, merges: list of (bytes, bytes))
    Example: train_bpe_naive("low low low lower lowest", 259)[1]
             -> [(b'o', b'w'), (b'l', b'ow'), (b' ', b'low')]
    """
    ### BEGIN SOLUTION
    vocab = {i: bytes([i]) for i in range(256)}
    for tok in special_tokens:
        vocab[len(vocab)] = tok.encode("utf-8")
    words = {tuple(s.encode("utf-8")): c for s, c in pretoken_counts(text, special_tokens).items()}
    merges = []
    while len(vocab) < vocab_size:
        pairs = count_pairs(words)
        if not pairs:
            break
        a, b = max(pairs, key=lambda p: (pairs[p], vocab[p[0]], vocab[p[1]]))
        new = len(vocab)
        vocab[new] = vocab[a] + vocab[b]
        merges.append((vocab[a], vocab[b]))
        words = {merge_ids(w, a, b, new): c for w, c in words.items()}
    return vocab, merges
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex3_1_train_bpe_naive", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 3.1 (2 points)
check_train_bpe_naive(train_bpe_naive)

# %% [markdown]
# **Look.** The first merges on a slice of Shakespeare: spaces join the letters that follow
# them, then whole frequent words (` the`, ` and`) appear.

# %% tags=["demo"]
with requires("Exercise 3.1"):
    vocab, merges = train_bpe_naive(shakespeare[:20_000], 256 + 30)
    print([a + b for a, b in merges])

# %% [markdown]
# ## 4. The speed problem
#
# Each merge of the naive trainer recounts every pair of every distinct pre-token. With $W$
# distinct pre-tokens of average length $L$ and $M$ merges that is $O(M \cdot W L)$ — and
# both $W$ and $M$ grow with the corpus. Measure it on growing slices of Shakespeare
# (200 merges each):

# %% tags=["demo"]
slice_sizes = [10_000, 20_000, 40_000]
naive_seconds = {}  # characters -> CPU seconds
with requires("Exercise 3.1"):
    for n in slice_sizes:
        t0 = time.process_time()
        train_bpe_naive(shakespeare[:n], 256 + 200)
        naive_seconds[n] = time.process_time() - t0
        print(f"{n:>7,} characters: {naive_seconds[n]:.2f} s")
    plt.figure(figsize=(4.5, 3))
    plt.plot(slice_sizes, [naive_seconds[n] for n in slice_sizes], "o-", label="naive")
    plt.xlabel("characters of training text")
    plt.ylabel("CPU seconds (200 merges)")
    plt.legend()
    plt.tight_layout()
    plt.show()


# %% [markdown]
# The full corpus is 100 times the largest slice, and real vocabularies need 50,000 merges,
# not 200. Yet a merge of `(a, b)` changes only the pre-tokens that **contain** `(a, b)` —
# usually a tiny fraction. The incremental trainer (as in Hugging Face `tokenizers`) keeps
#
# * `pair_counts[(a, b)]`: the current weighted count of every pair, and
# * `where[(a, b)]`: the set of (indices of) pre-tokens that contain the pair;
#
# and after merging `(a, b) -> new` it visits only the pre-tokens in `where[(a, b)]`: for
# each, subtract the counts of its **old** pairs, merge, add the counts of its **new** pairs,
# and register the new pairs in `where`. Everything else stays as it was.
#
# ### Exercise 4.1 (challenge) — the incremental trainer  *(3 points, ~25 min)*
#
# **Goal:** `train_bpe_fast(text, vocab_size, special_tokens=())` returns **exactly** the
# same `(vocab, merges)` as your naive trainer, and is clearly faster: the check times it
# against the naive loop on 200,000 characters of Shakespeare with 200 merges and asks for at
# least a 3× speed-up (CPU time). Ties: the same rule, so the merges are identical.
#
# <details><summary>Hint</summary>
#
# Do not recount every pair after each merge: keep the counts and, per pair, the pre-tokens that
# contain it; a merge only touches those pre-tokens, so update the counts from their old and new
# pairs. A pair whose count reaches zero must leave the counts.
#
# <details><summary>The key line</summary>
#
# * Keep the pre-tokens in a list `words` (tuples of ids) with a parallel list `freqs`, so a
#   pre-token has a fixed index to put in `where`.
# * Build `pair_counts` and `where` once, like `count_pairs` but also
#   `where.setdefault(pair, set()).add(index)`.
# * Per merge: the best pair is `max(pair_counts, key=...)` over the *current counts* (no
#   recount); then `for i in where.pop((a, b))` update as described above. Delete a pair from
#   `pair_counts` when its count reaches 0, so `max` never picks it.
# * An index in `where[p]` may be stale (that pre-token lost `p` in an earlier merge). That is
#   harmless: merging a pre-token that does not contain the pair changes nothing, and its
#   old and new pairs cancel.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex4_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def train_bpe_fast(text, vocab_size, special_tokens=()):
    """Byte-level BPE with incremental pair counts; same result as train_bpe_naive.

    text: str, vocab_size: int, special_tokens: list of str
    ->  (vocab: {int: bytes}, merges: list of (bytes, bytes))
    """
    ### BEGIN SOLUTION
    vocab = {i: bytes([i]) for i in range(256)}
    for tok in special_tokens:
        vocab[len(vocab)] = tok.encode("utf-8")
    words, freqs = [], []
    for s, c in pretoken_counts(text, special_tokens).items():
        words.append(tuple(s.encode("utf-8")))
        freqs.append(c)
    pair_counts = {}  # (a, b) -> weighted count
    where = {}  # (a, b) -> indices of the words that contain it
    for i, w in enumerate(words):
        for pair in zip(w, w[1:]):
            pair_counts[pair] = pair_counts.get(pair, 0) + freqs[i]
            where.setdefault(pair, set()).add(i)
    merges = []
    while len(vocab) < vocab_size and pair_counts:
        a, b = max(pair_counts, key=lambda p: (pair_counts[p], vocab[p[0]], vocab[p[1]]))
        new = len(vocab)
        vocab[new] = vocab[a] + vocab[b]
        merges.append((vocab[a], vocab[b]))
        for i in where.pop((a, b)):  # only the words that contain (a, b)
            old, c = words[i], freqs[i]
            words[i] = merged = merge_ids(old, a, b, new)
            for pair in zip(old, old[1:]):
                pair_counts[pair] -= c
                if pair_counts[pair] == 0:
                    del pair_counts[pair]
            for pair in zip(merged, merged[1:]):
                pair_counts[pair] = pair_counts.get(pair, 0) + c
                where.setdefault(pair, set()).add(i)
    return vocab, merges
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex4_1_train_bpe_fast", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 4.1 (3 points)
check_train_bpe_fast(train_bpe_fast)

# %% [markdown]
# **Look.** Both trainers on the same slices: identical merges, and the gap grows with the
# text (the naive trainer's cost per merge grows with the corpus, the incremental one's with
# the handful of pre-tokens a merge touches).

# %% tags=["demo"]
with requires("Exercise 4.1 and Exercise 3.1"):
    fast_seconds = {}
    for n in slice_sizes:
        t0 = time.process_time()
        fast = train_bpe_fast(shakespeare[:n], 256 + 200)
        fast_seconds[n] = time.process_time() - t0
        t0 = time.process_time()
        same = fast == train_bpe_naive(shakespeare[:n], 256 + 200)
        naive_seconds[n] = time.process_time() - t0
        print(f"{n:>7,} characters: naive {naive_seconds[n]:.2f} s, incremental "
              f"{fast_seconds[n]:.3f} s -> {naive_seconds[n] / fast_seconds[n]:.1f}x, "
              f"same merges: {same}")
    plt.figure(figsize=(4.5, 3))
    plt.plot(slice_sizes, [naive_seconds[n] for n in slice_sizes], "o-", label="naive")
    plt.plot(slice_sizes, [fast_seconds[n] for n in slice_sizes], "o-", label="incremental")
    plt.xlabel("characters of training text")
    plt.ylabel("CPU seconds (200 merges)")
    plt.legend()
    plt.tight_layout()
    plt.show()


# %% [markdown]
# ## 5. Encoding by merge rank
#
# A trained tokenizer is its **ranks**: a dict from each token's bytes to its id,
# `ranks[b' the'] == 301`. Because ids are given in merge order, a smaller id is an earlier
# merge. Encoding one pre-token (tiktoken's `byte_pair_merge`):
#
# 1. start from its single bytes;
# 2. among the adjacent pairs whose concatenation is in `ranks`, merge the one with the
#    **lowest rank** (the earliest merge; the leftmost if it occurs twice);
# 3. repeat until no adjacent pair is a token; return the ids.
#
# This is section 2's "replay the merges in order", done fast: instead of walking through all
# 50,000 merges it jumps to the next one that applies. How often a pair occurs *in this piece*
# plays no role: only the order in which training learned the merges does.
#
# ### Exercise 5.1 — encode one pre-token  *(2 points, ~8 min)*
#
# **Goal:** `encode_piece(piece, ranks)` returns the list of ids of the bytes `piece`.
#
# <details><summary>Hint</summary>
#
# Start from single bytes and repeatedly merge the adjacent pair whose joined bytes have the
# lowest rank (leftmost on a tie) until no adjacent pair is in the ranks.
#
# <details><summary>The key line</summary>
#
# `parts = [piece[i:i + 1] for i in range(len(piece))]` (a list of one-byte `bytes`). In a
# loop: the candidates are `(ranks[parts[i] + parts[i + 1]], i)` for the `i` where the
# concatenation is in `ranks`; `min` of them gives the lowest rank and, on a tie, the
# smallest `i`; replace `parts[i:i + 2]` by `[parts[i] + parts[i + 1]]`. At the end
# `[ranks[p] for p in parts]`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex5_1_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def encode_piece(piece, ranks):
    """Ids of one pre-token by lowest-rank-first merging.

    piece: bytes, ranks: {bytes: int}  ->  list of int
    Example: encode_piece(b"aaa", {**{bytes([i]): i for i in range(256)}, b"aa": 256})
             -> [256, 97]
    """
    ### BEGIN SOLUTION
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        candidates = [
            (ranks[parts[i] + parts[i + 1]], i)
            for i in range(len(parts) - 1)
            if parts[i] + parts[i + 1] in ranks
        ]
        if not candidates:
            break
        _, i = min(candidates)  # lowest rank, then leftmost
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return [ranks[p] for p in parts]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_1_encode_piece", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 5.1 (2 points)
check_encode_piece(encode_piece)

# %% [markdown]
# ### Exercise 5.2 — encode text  *(2 points, ~8 min)*
#
# **Goal:** `encode(text, ranks, special_tokens)` returns the ids of a whole text.
# `special_tokens` is a dict `{"<|endoftext|>": 256, ...}`. Cut the text at the special tokens
# (each one becomes its single id, never split), pre-tokenize the text between them exactly as
# training did, and encode each pre-token's UTF-8 bytes with `encode_piece`.
#
# <details><summary>Hint</summary>
#
# Cut the text at the special tokens, keeping them: each special token becomes its own id, and
# each piece between them is pre-tokenised and encoded as in Exercise 5.1. Longest special
# tokens first.
#
# <details><summary>The key line</summary>
#
# A capturing group keeps the separators: `re.split("(" + alternation + ")", text)` returns
# `[text, special, text, special, ..., text]`, so the odd positions are special tokens. Build the
# alternation longest first, as in Exercise 3.1, and skip the split when there are no special
# tokens.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex5_2_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def encode(text, ranks, special_tokens):
    """Token ids of `text`: special tokens as single ids, the rest by merge rank.

    text: str, ranks: {bytes: int}, special_tokens: {str: int}  ->  list of int
    """
    ### BEGIN SOLUTION
    if special_tokens:
        longest_first = sorted(special_tokens, key=len, reverse=True)
        parts = re.split("(" + "|".join(re.escape(t) for t in longest_first) + ")", text)
    else:
        parts = [text]
    ids = []
    for k, part in enumerate(parts):
        if k % 2 == 1:
            ids.append(special_tokens[part])  # a special token: one id
        else:
            for piece in pretokenize(part):
                ids.extend(encode_piece(piece.encode("utf-8"), ranks))
    return ids
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_2_encode", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 5.2 (2 points)
check_encode(encode)

# %% [markdown]
# ### Exercise 5.3 — decode  *(1 point, ~4 min)*
#
# **Goal:** `decode(ids, vocab)` returns the text: concatenate the tokens' bytes, then decode
# UTF-8 **once**. A model can produce any id sequence, including bytes that are not valid
# UTF-8 (half of `é`): show those as the replacement character `�` rather than failing.
#
# <details><summary>Hint</summary>
#
# Look up each id's bytes, join them all, and decode once at the end (a character may span two
# tokens).
#
# <details><summary>The key line</summary>
#
# `b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")`.
# </details>
# </details>

# %% nbgrader={"grade": false, "grade_id": "ex5_3_solution", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decode(ids, vocab):
    """Text of token ids; invalid UTF-8 becomes U+FFFD.

    ids: list of int, vocab: {int: bytes}  ->  str
    Example: decode([0xE2, 0x82], vocab) -> '�'  (a 3-byte character cut short)
    """
    ### BEGIN SOLUTION
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex5_3_decode", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Check Exercise 5.3 (1 point)
check_decode(decode)

# %% [markdown]
# **Look: your tokenizer against tiktoken.** Train on 200,000 characters of Shakespeare with
# your fast trainer (2,000 tokens, one special token), then build a `tiktoken.Encoding` — the
# Rust tokenizer of OpenAI's models — from **your** ranks (nothing is downloaded) and compare
# on held-out text. Identical ids mean your encoder implements exactly tiktoken's algorithm
# (GPT-2's and GPT-4's tokenizers differ only in their pattern and their ranks).

# %% tags=["demo"]
course_specials = {"<|endoftext|>": 256}


@functools.lru_cache(maxsize=1)
def shakespeare_tokenizer():
    "Your train_bpe_fast on 200,000 characters: (vocab, ranks), 2,000 tokens."
    vocab, merges = train_bpe_fast(shakespeare[:200_000], 2_000, list(course_specials))
    ranks = {b: i for i, b in vocab.items() if i not in course_specials.values()}
    return vocab, ranks


def ranks_up_to(size):
    "The ranks of the same training stopped at `size` tokens (see section 6)."
    return {b: i for b, i in shakespeare_tokenizer()[1].items() if i < size}


# %% tags=["demo"]
with requires("Exercise 4.1, Exercise 5.2 and Exercise 5.3"):
    vocab, ranks = shakespeare_tokenizer()
    ours = tiktoken.Encoding(name="ours", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens=course_specials)
    sample = held_out[:20_000] + "<|endoftext|>Größe, naïve café 😀"
    t0 = time.perf_counter()
    mine = encode(sample, ranks, course_specials)
    t_mine = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = ours.encode(sample, allowed_special="all")
    t_tik = time.perf_counter() - t0
    print(f"{len(mine):,} tokens; identical to tiktoken: {mine == theirs}")
    print(f"round trip: {decode(mine, vocab) == sample}")
    print(f"your encode {t_mine:.2f} s, tiktoken {t_tik * 1000:.1f} ms")

# %% [markdown]
# ## 6. What the merges learned
#
# Merges are learned greedily, so the first $k$ merges of a 2,000-token training are exactly
# what a training to $256 + 1 + k$ tokens would learn. One training therefore gives every
# smaller vocabulary: keep the ids below the size.
#
# **Compression.** Bytes per token on held-out text, against the vocabulary size. 1.0 means no
# merge is used; each doubling of the vocabulary buys less.

# %% tags=["demo"]
with requires("Exercise 4.1 and Exercise 5.2"):
    text = held_out[:20_000]
    n_bytes = len(text.encode("utf-8"))
    vocab_sizes = [257, 300, 400, 600, 1000, 1500, 2000]
    ratio = [n_bytes / len(encode(text, ranks_up_to(v), {})) for v in vocab_sizes]
    for v, r in zip(vocab_sizes, ratio):
        print(f"vocab {v:>5}: {r:.2f} bytes per token")
    plt.figure(figsize=(4.5, 3))
    plt.semilogx(vocab_sizes, ratio, "o-")
    plt.xlabel("vocabulary size")
    plt.ylabel("bytes per token (held out)")
    plt.tight_layout()
    plt.show()

# %% [markdown]
# **The longest tokens** are whole frequent words and names with their leading space (and
# speaker names followed by `:`, a feature of play scripts).

# %% tags=["demo"]
with requires("Exercise 4.1"):
    vocab, ranks = shakespeare_tokenizer()
    learned = {i: b for i, b in vocab.items() if i not in course_specials.values()}
    longest = sorted(learned.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:12]
    for i, b in longest:
        print(f"{i:>5}  {b!r}")
    plt.figure(figsize=(4.5, 3))
    plt.hist([len(b) for i, b in learned.items() if i > 256], bins=range(1, 14))
    plt.xlabel("token length (bytes)")
    plt.ylabel("number of learned tokens")
    plt.tight_layout()
    plt.show()

# %% [markdown]
# **One sentence at several vocabulary sizes** (`|` separates tokens). With few merges the
# sentence is nearly bytes; with more, frequent words become single tokens while a rare word
# stays in pieces.

# %% tags=["demo"]
with requires("Exercise 4.1, Exercise 5.2 and Exercise 5.3"):
    vocab, ranks = shakespeare_tokenizer()
    sentence = "To be, or not to be: that is the question, Horatio."
    for v in [257, 300, 500, 1000, 2000]:
        ids = encode(sentence, ranks_up_to(v), {})
        print(f"{v:>5} ({len(ids):>2} tokens): " + "|".join(decode([i], vocab) for i in ids))

# %% [markdown]
# ## Summary
#
# - Subwords trade vocabulary size against sequence length and never meet an unknown word.
# - [S4]'s BPE: characters plus an end-of-word symbol; count adjacent pairs (overlaps
#   count, weighted by word frequency); merge the most frequent pair left to right; stop after
#   $N$ merges or when no pair repeats. Ties need a fixed rule (here: the greatest pair).
# - Byte-level BPE starts from 256 bytes (nothing is unknown), pre-tokenizes with GPT-2's
#   regex so merges stay inside words, and keeps special tokens whole.
# - Training gets fast by updating only the pre-tokens a merge touches; the merges stay
#   identical.
# - Encoding replays the merges by rank (lowest first), not by frequency; decoding joins
#   bytes and decodes UTF-8 once, replacing invalid bytes.
#
# **Going further.** `transformer_ref.bpe`: the same trainer with a max-heap instead of
# `max(...)` per merge (faster at large vocabularies), `encode_iterable` for streaming a file
# with bounded memory, and save/load in GPT-2's printable-byte format;
# `bench/bench_bpe.py` compares it with Hugging Face `tokenizers`. Sennrich et al. (2016)
# introduced BPE for translation; GPT-2 (2019) moved it to bytes; SentencePiece's unigram
# model is the main alternative.
