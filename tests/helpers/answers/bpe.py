"""Chapter answers for ``tests/unit/test_checks_bpe.py`` (and the verdict tests that
judge the same answers through a record): the right and the catalogued wrong
implementations, written as a student would."""

import re
from collections import Counter, defaultdict

import regex

from autograder.checks import bpe as B
from autograder.checks import table
from transformer_ref.bpe import GPT2_PATTERN

# {function: check key} of the chapter (the exercise table)
KEY = table.keys("07_bpe")


# as in the notebook: the checks switch transformer_ref off, so not its pretokenize()
pretokenize = regex.compile(GPT2_PATTERN).findall


EOW = B.EOW


def good_count_pairs(word_counts):
    pairs = defaultdict(int)
    for w, c in word_counts.items():
        for p in zip(w, w[1:]):
            pairs[p] += c
    return pairs  # a defaultdict is accepted


def merger(*, last=1, keep_rest=True, join=True, joined_compare=False):
    """A student's merge ``merge_pair(word, pair, new=None)`` (``new``: what replaces the pair,
    default the two symbols joined; the byte-level trainer passes the new token's id), with one
    thing changeable: ``last=2``, the scan stops one pair early; ``keep_rest=False``, the other
    symbols never appended; ``join=False``, the pair's first symbol appended alone;
    ``joined_compare``, the joined symbols compared with the pair (a str with a tuple)."""

    def merge_pair(word, pair, new=None):
        out, skip = [], False
        for i, symbol in enumerate(word):
            if skip:  # the second symbol of the pair just merged
                skip = False
                continue
            after = word[i + 1] if i + last < len(word) else None
            here = symbol + after if joined_compare and after else (symbol, after)
            if after is not None and here == pair:
                joined = symbol + after if new is None else new
                out.append(joined if join else symbol)
                skip = True
            elif keep_rest:
                out.append(symbol)
        return tuple(out)

    return merge_pair


good_merge_pair = merger()


def classic_trainer(*, pick=lambda p: max(p, key=lambda k: (p[k], k)), stop=True, eow=True,
                    one_sequence=False, min_count=2, record=True):
    def train_classic_bpe(text, num_merges):
        if one_sequence:  # the whole text as one list of symbols
            seq = tuple(s for w in text.split() for s in (*w, EOW))
            words = Counter({seq: 1}) if seq else Counter()
        else:
            words = Counter(((*w, EOW) if eow else tuple(w)) for w in text.split())
        merges = []
        for _ in range(num_merges):
            pairs = good_count_pairs(words)
            if not pairs:
                break
            best = pick(pairs)
            if stop and pairs[best] < min_count:  # (3: a pair seen twice not merged)
                break
            if record:  # (False: merges.append forgotten)
                merges.append(best)
            words = Counter({good_merge_pair(w, best): c for w, c in words.items()})
        return merges

    return train_classic_bpe


def good_encode_word(word, merges):
    s = (*word, EOW)
    for p in merges:
        s = good_merge_pair(s, p)
    return list(s)


def good_decode_symbols(symbols):
    return "".join(symbols).replace(EOW, " ").strip(" ")


def byte_trainer(*, key=lambda pairs, vocab, p: (pairs[p], vocab[p[0]], vocab[p[1]]),
                 pretok=True, split=True, pick=max, n_bytes=256, up_to=False,
                 add_specials=True, record=True, first_only=False, stop_if_pairs=False,
                 size_limit=True):
    """A student's naive byte-level trainer, with one thing changeable."""

    def train(text, vocab_size, special_tokens=()):
        vocab = {i: bytes([i]) for i in range(n_bytes)}
        if add_specials:
            for t in special_tokens:
                vocab[len(vocab)] = t.encode()
        segs = [text]
        if special_tokens and split:
            segs = re.split("|".join(map(re.escape, sorted(special_tokens, key=len)[::-1])), text)
        counts = Counter()
        for seg in segs:
            counts.update(pretokenize(seg) if pretok else [seg])
        words = {tuple(s.encode()): c for s, c in counts.items() if s}
        merges = []
        while (len(vocab) < vocab_size or (up_to and len(vocab) == vocab_size)
               or not size_limit):  # (False: `or` for `and`, vocab_size never stops it)
            pairs = good_count_pairs(words)
            if stop_if_pairs and pairs:  # (True: `if pairs: break`, the test inverted)
                break
            if not pairs:
                break
            a, b = pick(pairs, key=lambda p: key(pairs, vocab, p))
            new = len(vocab)
            vocab[new] = vocab[a] if first_only else vocab[a] + vocab[b]  # (True: + vocab[b] lost)
            if record:  # (False: merges.append forgotten)
                merges.append((vocab[a], vocab[b]))
            nw = {}
            for w, c in words.items():
                nw[good_merge_pair(w, (a, b), new) if a in w else w] = c
            words = nw
        return vocab, merges

    return train


def good_encode_piece(piece, ranks):
    parts = [bytes([b]) for b in piece]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return [ranks[p] for p in parts]
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


def text_encoder(*, piece=good_encode_piece, specials=True, pretok=True, longest_first=True,
                 capture=True, close_group=True, keep_ids=True):
    def encode(text, ranks, special_tokens):
        ids = []
        chunks = [text]
        if special_tokens and specials:
            alt = "|".join(re.escape(t) for t in sorted(special_tokens, key=len,
                                                         reverse=longest_first))
            group = f"({alt})" if close_group else f"({alt}"  # (False: the `)` forgotten)
            chunks = re.split(group if capture else alt, text)
        for k, chunk in enumerate(chunks):
            if k % 2 and capture:
                ids.append(special_tokens[chunk])
            elif pretok:
                for p in pretokenize(chunk):
                    if keep_ids:
                        ids += piece(p.encode(), ranks)
                    else:  # the result computed and dropped
                        ids + piece(p.encode(), ranks)
            elif chunk:
                ids += piece(chunk.encode(), ranks)
        return ids

    return encode


def good_decode(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode(errors="replace")


GOOD = {
    KEY["count_pairs"]: good_count_pairs,
    KEY["merge_pair"]: good_merge_pair,
    KEY["train_classic_bpe"]: classic_trainer(),
    KEY["encode_word"]: good_encode_word,
    KEY["decode_symbols"]: good_decode_symbols,
    KEY["train_bpe_naive"]: byte_trainer(),
    KEY["encode_piece"]: good_encode_piece,
    KEY["encode"]: text_encoder(),
    KEY["decode"]: good_decode,
}


# every exercise of the chapter: {check key: its Check declaration} (the exercise table)
CHECKS = table.declarations("07_bpe")


def count_non_overlapping(word_counts):
    pairs = defaultdict(int)
    for w, c in word_counts.items():
        for p in set(zip(w, w[1:])):
            i = n = 0
            while i < len(w) - 1:
                if (w[i], w[i + 1]) == p:
                    n, i = n + 1, i + 2
                else:
                    i += 1
            pairs[p] += n * c
    return pairs


def merge_overlapping(word, pair):
    out = []
    for i in range(len(word)):
        if i < len(word) - 1 and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
        else:
            out.append(word[i])
    return tuple(out)


def merge_from_right(word, pair):
    out, i = [], len(word) - 1
    while i >= 0:
        if i >= 1 and (word[i - 1], word[i]) == pair:
            out.insert(0, word[i - 1] + word[i])
            i -= 2
        else:
            out.insert(0, word[i])
            i -= 1
    return tuple(out)


def merge_first_only(word, pair):
    for i in range(len(word) - 1):
        if (word[i], word[i + 1]) == pair:
            return word[:i] + (pair[0] + pair[1],) + word[i + 2 :]
    return word


def merge_by_replace(word, pair):  # issue 49: passed both checks
    text = " ".join(word).replace(pair[0] + " " + pair[1], pair[0] + pair[1])
    return tuple(text.split())


def encode_first_only(word, merges):
    s = (*word, EOW)
    for p in merges:
        s = merge_first_only(s, p)
    return list(s)


def encode_longest(word, merges):
    known = set(word) | {EOW} | {a + b for a, b in merges}
    rest, out = word + EOW, []
    while rest:
        k = len(rest)
        while k > 1 and rest[:k] not in known:
            k -= 1
        out.append(rest[:k])
        rest = rest[k:]
    return out


def encode_leftmost_pair(word, merges):  # issue 32: any learned pair, leftmost first
    symbols = list(word) + [EOW]
    known = set(merges)
    merged = True
    while merged:
        merged = False
        for i in range(len(symbols) - 1):
            if (symbols[i], symbols[i + 1]) in known:
                symbols[i : i + 2] = [symbols[i] + symbols[i + 1]]
                merged = True
                break
    return symbols


def piece_leftmost_pair(piece, ranks):  # issue 32: the first mergeable pair, not the best
    parts = [bytes([b]) for b in piece]
    i = 0
    while i < len(parts) - 1:
        if parts[i] + parts[i + 1] in ranks:
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
            i = 0  # look again from the left
        else:
            i += 1
    return [ranks[p] for p in parts]


def piece_by_frequency(piece, ranks):
    parts = [bytes([b]) for b in piece]
    while True:
        c = Counter(a + b for a, b in zip(parts, parts[1:]) if a + b in ranks)
        if not c:
            return [ranks[p] for p in parts]
        top = max(c.values())
        tok = min((t for t in c if c[t] == top), key=ranks.get)
        out, i = [], 0
        while i < len(parts):
            if i + 1 < len(parts) and parts[i] + parts[i + 1] == tok:
                out.append(tok)
                i += 2
            else:
                out.append(parts[i])
                i += 1
        parts = out


def piece_highest_rank(piece, ranks):
    parts = [bytes([b]) for b in piece]
    while True:
        cands = [(ranks[a + b], i) for i, (a, b) in enumerate(zip(parts, parts[1:]))
                 if a + b in ranks]
        if not cands:
            return [ranks[p] for p in parts]
        r = max(cands)[0]
        i = min(i for rr, i in cands if rr == r)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


def piece_rightmost(piece, ranks):
    parts = [bytes([b]) for b in piece]
    while True:
        cands = [(ranks[a + b], -i) for i, (a, b) in enumerate(zip(parts, parts[1:]))
                 if a + b in ranks]
        if not cands:
            return [ranks[p] for p in parts]
        i = -min(cands)[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


def piece_longest(piece, ranks):
    out = []
    while piece:
        k = len(piece)
        while piece[:k] not in ranks:
            k -= 1
        out.append(ranks[piece[:k]])
        piece = piece[k:]
    return out


def count_without_last(word_counts):
    pairs = {}
    for w, c in word_counts.items():
        for i in range(len(w) - 2):
            pairs[(w[i], w[i + 1])] = pairs.get((w[i], w[i + 1]), 0) + c
    return pairs


def encode_result_dropped(word, merges):
    s = (*word, EOW)
    for p in merges:
        good_merge_pair(s, p)  # as if it changed s in place
    return list(s)


def count_zip_with_itself(word_counts):
    pairs = {}
    for w, c in word_counts.items():
        for p in zip(w, w):  # the [1:] forgotten
            pairs[p] = pairs.get(p, 0) + c
    return pairs


def count_not_stored(word_counts):
    pairs = {}
    for w, c in word_counts.items():
        for p in zip(w, w[1:]):
            pairs.get(p, 0) + c  # computed, never assigned
    return pairs


def piece_tuple_lookup(piece, ranks):
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        found = [(ranks[(parts[i], parts[i + 1])], i) for i in range(len(parts) - 1)
                 if (parts[i], parts[i + 1]) in ranks]  # ranks is keyed by bytes
        if not found:
            break
        _, i = min(found)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return [ranks[p] for p in parts]


def piece_without_last_byte(piece, ranks):
    parts = [piece[i : i + 1] for i in range(len(piece) - 1)]
    while len(parts) > 1:
        found = [(ranks[parts[i] + parts[i + 1]], i) for i in range(len(parts) - 1)
                 if parts[i] + parts[i + 1] in ranks]
        if not found:
            break
        _, i = min(found)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return [ranks[p] for p in parts]


def piece_first_part_kept(piece, ranks):  # issue 32: parts[i] never removed
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        found = [(ranks[parts[i] + parts[i + 1]], i) for i in range(len(parts) - 1)
                 if parts[i] + parts[i + 1] in ranks]
        if not found:
            break
        _, i = min(found)
        parts[i + 1] = parts[i] + parts[i + 1]
    return [ranks[p] for p in parts]


def _once_per_word(wc):
    pairs = Counter()
    for w, c in wc.items():
        for p in set(zip(w, w[1:])):
            pairs[p] += c
    return pairs


def _fold(symbols, merges):
    for p in merges:
        symbols = good_merge_pair(symbols, p)
    return symbols


def fast_trainer(**slip):
    """:func:`incremental_trainer` with one thing changed (its keyword arguments)."""

    def train_bpe_fast(text, vocab_size, special_tokens=()):
        return incremental_trainer(text, vocab_size, special_tokens, **slip)

    return train_bpe_fast


WRONG = [
    # (check key, wrong implementation, mistake named, graded only (hidden cases needed))
    (KEY["count_pairs"], lambda wc: Counter(p for w in wc for p in zip(w, w[1:])),
     "word frequencies ignored", False),
    (KEY["count_pairs"], _once_per_word, "each pair counted once per word", False),
    (KEY["count_pairs"], count_non_overlapping, "overlapping pairs not counted", False),
    (KEY["merge_pair"], merge_overlapping, "overlapping occurrences merged (a a a became aa aa)",
     False),
    (KEY["merge_pair"], merge_from_right, "merged from the right", False),
    (KEY["merge_pair"], merge_first_only, "only the first occurrence merged", False),
    (KEY["merge_pair"], merge_by_replace, "merged by string replacement (joined across symbols)",
     False),
    # mutation testing (issue 18): off-by-one bounds, a result not kept, EOW deleted, the
    # specials' order and ids, bytes joined with spaces
    (KEY["count_pairs"], count_without_last, "the last pair of each word not counted", False),
    (KEY["merge_pair"], merger(last=2), "the pair at the end of the word never merged",
     False),
    (KEY["encode_word"], encode_result_dropped,
     "merge_pair's result not kept (the merges never change the symbols)", False),
    (KEY["decode_symbols"], lambda s: "".join(s).replace(EOW, ""),
     "end-of-word symbol deleted instead of turned into a space", False),
    (KEY["encode"], text_encoder(longest_first=False), "special tokens matched shortest first",
     False),
    (KEY["encode"], text_encoder(capture=False), "special tokens dropped (no id for them)",
     False),
    (KEY["decode"], lambda ids, v: b" ".join(v[i] for i in ids).decode("utf-8", "replace"),
     "token bytes joined with spaces", False),
    (KEY["train_bpe_fast"],
     fast_trainer(add_new_pairs=False),
     "new pairs of a merged word not counted", False),
    # mutation testing (issue 18): zip(w, w), a count computed and never stored, the symbols
    # around a merge dropped, merges.append forgotten, the fast trainer's first count left
    # out, pairs looked up as tuples in the ranks, the piece's last byte left out, the
    # pair compared as a joined str
    (KEY["count_pairs"], count_zip_with_itself,
     "each symbol paired with itself (zip(word, word))", False),
    (KEY["count_pairs"], count_not_stored, "the counts never stored (the dict stays empty)",
     False),
    (KEY["merge_pair"], merger(keep_rest=False),
     "only the merged symbols kept (the others never appended)", False),
    (KEY["merge_pair"], merger(joined_compare=True),
     "the pair never found (the word returned unchanged)", False),
    (KEY["train_classic_bpe"], classic_trainer(record=False),
     "the merges never recorded (an empty list)", False),
    (KEY["train_bpe_fast"],
     fast_trainer(initial_counts=False),
     "no merge made (the loop stops before its first merge)", False),
    (KEY["encode_piece"], piece_tuple_lookup,
     "pairs looked up as (a, b) tuples (no merge ever found)", False),
    (KEY["encode_piece"], piece_without_last_byte,
     "the last byte left out (range(len(piece) - 1))", False),
    (KEY["train_classic_bpe"], classic_trainer(pick=lambda p: max(p, key=p.get)),
     "ties broken differently (first pair found)", False),
    (KEY["train_classic_bpe"], classic_trainer(pick=lambda p: min(p, key=lambda k: (-p[k], k))),
     "ties broken differently (smallest pair)", False),
    (KEY["train_classic_bpe"], classic_trainer(one_sequence=True),
     "merged across word boundaries", False),
    (KEY["train_classic_bpe"], classic_trainer(stop=False),
     "kept merging pairs that occur only once", False),
    # mutation testing (issue 18)
    (KEY["train_classic_bpe"], classic_trainer(pick=lambda p: min(p, key=lambda k: (p[k], k))),
     "merged the least frequent pair (min instead of max)", False),
    (KEY["train_classic_bpe"], classic_trainer(min_count=3),
     "stopped too early (a pair that occurs twice was not merged)", False),
    (KEY["train_classic_bpe"], classic_trainer(eow=False), "no end-of-word symbol", False),
    (KEY["encode_word"], lambda w, m: good_encode_word(w, m[::-1]),
     "merges applied in reverse order", False),
    (KEY["encode_word"], lambda w, m: list(_fold(tuple(w), m)), "no end-of-word symbol", False),
    (KEY["encode_word"], encode_first_only, "each merge applied to its first occurrence only",
     False),
    (KEY["encode_word"], encode_longest, "greedy longest match instead of the merges", False),
    (KEY["encode_word"], encode_leftmost_pair,
     "merged the leftmost known pair first instead of the merges in order", False),
    (KEY["decode_symbols"], lambda s: "".join(s), "end-of-word symbol left in the text", False),
    (KEY["decode_symbols"], lambda s: "".join(s).replace(EOW, " "), "trailing space kept", False),
    (KEY["decode_symbols"], lambda s: " ".join(s).replace(EOW, " ").rstrip(),
     "symbols joined with spaces", False),
    (KEY["encode_piece"], piece_by_frequency,
     "merges applied in frequency order instead of rank order", False),
    (KEY["encode_piece"], piece_highest_rank, "highest rank merged first", False),
    (KEY["encode_piece"], piece_rightmost, "rightmost of equal pairs merged first", False),
    (KEY["encode_piece"], piece_longest, "greedy longest match instead of merge ranks", False),
    (KEY["encode_piece"], piece_leftmost_pair,
     "merged the leftmost known pair first instead of the lowest rank", False),
    (KEY["encode"], text_encoder(specials=False), "special tokens split like ordinary text",
     False),
    (KEY["encode"], text_encoder(pretok=False), "merged across pre-token boundaries", False),
    (KEY["decode"], lambda ids, v: "".join(v[i].decode("utf-8", "replace") for i in ids),
     "decoded token by token", False),
    (KEY["decode"], lambda ids, v: b"".join(v[i] for i in ids).decode("utf-8", "ignore"),
     "invalid bytes dropped", False),
    (KEY["decode"], lambda ids, v: b"".join(v[i] for i in ids).decode("utf-8"),
     "decode fails on bytes that are not valid UTF-8", False),
    # issue 32 (mutation testing: the named share)
    (KEY["merge_pair"], merger(join=False),  # issue 32
     "the pair's second symbol dropped (the two never joined)", False),
    (KEY["encode_piece"], piece_first_part_kept, "the merged pair's first part left in place",
     False),
    (KEY["encode"], text_encoder(keep_ids=False),
     "the pieces' ids never added (only special tokens kept)", False),
    (KEY["encode"], text_encoder(close_group=False),
     "the special-token pattern is not a valid regular expression", False),
    (KEY["train_bpe_fast"],
     fast_trainer(new_sign=-1),
     "new pairs of a merged word subtracted instead of added", False),
    (KEY["train_bpe_fast"],  # issue 49: passed both checks
     fast_trainer(drop_zero=False),
     "pairs whose count reached 0 kept (dead pairs merged after the real ones)", False),
]


# the byte-level trainers: the same mistakes for the naive loop and the challenge
for _key in (KEY["train_bpe_naive"], KEY["train_bpe_fast"]):
    WRONG += [
        (_key, byte_trainer(pretok=False), "merged across pre-token boundaries", False),
        (_key, byte_trainer(split=False), "special tokens not removed before training", False),
        (_key, byte_trainer(key=lambda pairs, vocab, p: (pairs[p], *p)),
         "ties broken by token id instead of by bytes", False),
        (_key, byte_trainer(key=lambda pairs, vocab, p: pairs[p]),
         "ties broken differently (first pair found)", False),
        # mutation testing (issue 18)
        (_key, byte_trainer(pick=min), "merged the least frequent pair (min instead of max)",
         False),
        (_key, byte_trainer(n_bytes=255), "byte 255 left out of the vocabulary (range(255))",
         False),
        (_key, byte_trainer(up_to=True), "one merge too many (<= vocab_size)", False),
        (_key, byte_trainer(add_specials=False), "special tokens not added to the vocabulary",
         False),
        (_key, byte_trainer(record=False), "the merges never recorded (an empty list)", False),
        # issue 32
        (_key, byte_trainer(key=lambda pairs, vocab, p: (pairs[p], vocab[p[0]])),
         "ties broken by the first token's bytes only", False),
        (_key, byte_trainer(key=lambda pairs, vocab, p: (pairs[p], vocab[p[1]])),
         "ties broken by the second token's bytes only", False),
        (_key, byte_trainer(first_only=True),
         "the new token's bytes are its first part only (vocab[a])", False),
        (_key, byte_trainer(size_limit=False),
         "vocab_size ignored (merged until no pair was left)", False),
        (_key, byte_trainer(stop_if_pairs=True),
         "no merge made (the loop stops before its first merge)", False),
    ]


def incremental_trainer(text, vocab_size, special_tokens=(), add_new_pairs=True,
                        initial_counts=True, new_sign=1, drop_zero=True):
    """A student's incremental trainer: pair counts + pair -> words index, max per merge
    (``add_new_pairs=False``: the merged word's new pairs forgotten; ``initial_counts=False``:
    only the index filled before the loop, the counts left empty; ``drop_zero=False``: a
    pair whose count reaches 0 kept, and ``where.pop`` given a default so that merging it
    again does not raise)."""
    vocab = {i: bytes([i]) for i in range(256)}
    for t in special_tokens:
        vocab[len(vocab)] = t.encode()
    segs = [text]
    if special_tokens:
        segs = re.split("|".join(map(re.escape, sorted(special_tokens, key=len)[::-1])), text)
    counts = Counter(p for seg in segs for p in pretokenize(seg))
    words = [tuple(p.encode()) for p in counts]
    freq = list(counts.values())
    pc, where = defaultdict(int), defaultdict(set)
    for i, w in enumerate(words):
        for p in zip(w, w[1:]):
            if initial_counts:
                pc[p] += freq[i]
            where[p].add(i)
    merges = []
    while len(vocab) < vocab_size and pc:
        a, b = max(pc, key=lambda p: (pc[p], vocab[p[0]], vocab[p[1]]))
        new = len(vocab)
        vocab[new] = vocab[a] + vocab[b]
        merges.append((vocab[a], vocab[b]))
        for i in where.pop((a, b)) if drop_zero else where.pop((a, b), ()):
            old = words[i]
            out, j = [], 0
            while j < len(old):
                if j + 1 < len(old) and old[j] == a and old[j + 1] == b:
                    out.append(new)
                    j += 2
                else:
                    out.append(old[j])
                    j += 1
            words[i] = tuple(out)
            for p in zip(old, old[1:]):
                pc[p] -= freq[i]
                if not pc[p] and drop_zero:
                    del pc[p]
            if not add_new_pairs:
                continue
            for p in zip(words[i], words[i][1:]):
                pc[p] += new_sign * freq[i]  # (-1: a copy of the subtraction above)
                where[p].add(i)
    return vocab, merges

# catalogue entries added for issue 32 (a class of 51 single-mistake students): each named
# "greedy longest match" before, whose outputs it shares on most inputs
ISSUE_32 = [
    (KEY["encode_word"], "merged the leftmost known pair first instead of the merges in order"),
    (KEY["encode_piece"], "merged the leftmost known pair first instead of the lowest rank"),
]

