"""Byte-level BPE tokenizer (GPT-2 style): train, encode, decode, stream, save and load.

Encoding (identical to ``tiktoken`` built from our ranks, see ``tests/unit/test_bpe_tokenizer.py``):

1. split the text on special tokens (longest match wins where they overlap; a special token
   is always one id and is never split or merged);
2. split each segment into pre-tokens with :data:`GPT2_PATTERN` (an ASCII segment with its
   faster standard-library twin ``GPT2_ASCII_PATTERN``, which splits ASCII identically; the
   ASCII stretches of a long segment on numpy arrays, :func:`gpt2_starts`, again identically);
3. encode each pre-token's UTF-8 bytes: if the whole piece is a token, that token; otherwise
   start from single bytes and repeatedly merge the adjacent pair whose concatenation has
   the lowest rank (merge priority, see below; leftmost on ties), until no adjacent pair is
   a token.
   Pre-token encodings are cached (a bounded dict), which makes real text fast; a long
   segment looks up each distinct pre-token once (:meth:`BPETokenizer._array_ids`). The
   pre-tokens of a call that are not cached yet are encoded together
   (:meth:`BPETokenizer._merge_batch`: one merge per pre-token per round, on numpy arrays),
   with the same result as the loop over one pre-token (:meth:`BPETokenizer._encode_piece`).

Parity holds for every character assigned in Unicode 14 (Python 3.11's database). For about
17,500 code points assigned since (e.g. U+323B0, a CJK ideograph), the ``regex`` package's
newer Unicode tables see letters where tiktoken's Rust regex sees unassigned symbols, so the
two pre-tokenize them differently; both still round-trip.

Ranks: every non-special token's bytes map to its id. Merge priority is the merges list's
order, or the id when no list is given (tiktoken's ranks); ids can be in any layout (GPT-2's
files, :meth:`BPETokenizer.from_gpt2_files`; tiktoken's, :meth:`BPETokenizer.from_tiktoken`).
When two merges produced the same bytes (possible: ``(a, bc)`` and ``(ab, c)``), the smaller
id is used and the other is never produced by ``encode`` (it still decodes).

File format (``save``/``load``), UTF-8 JSON, one entry per line::

    {"format": "transformer_ref.bpe", "version": 1, "pattern": "<regex>",
     "special_tokens": {"<|endoftext|>": 256},
     "vocab": {"0": "Ā", ..., "32": "Ġ", ..., "300": "Ġthe"},
     "merges": ["Ġ t", "h e", ...]}

Token bytes are written with GPT-2's printable alphabet (:func:`bytes_to_unicode`): the 188
printable Latin-1 bytes stand for themselves and the others are shifted to ``chr(256 + k)``
(so a space is ``Ġ`` and a newline ``Ċ``). A merge is the two tokens separated by one space.

>>> tok = BPETokenizer.train("the cat and the hat and the bat", 270)
>>> ids = tok.encode("the cat<|endoftext|>")
>>> tok.decode(ids)
'the cat<|endoftext|>'
>>> tok_s = BPETokenizer.train("the cat and the hat", 270, special_tokens=["<|endoftext|>"])
>>> tok_s.encode("the<|endoftext|>")[-1]
256
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Iterator
from itertools import chain, filterfalse, repeat

import numpy as np
import regex

from transformer_ref.bpe.common import (
    GPT2_PATTERN,
    _byte_codes,
    _windows,
    distinct_pretokens,
    gpt2_regex,
    gpt2_starts,
    mostly_ascii,
    special_token_regex,
)
from transformer_ref.bpe.train import train_bpe

__all__ = ["BPETokenizer", "bytes_to_unicode"]

_SINGLE_BYTES = [bytes([b]) for b in range(256)]
_INF = float("inf")
_LONG = -2  # in _batch_tables' code table: look the string up in the dict
_FORMAT = "transformer_ref.bpe"
_VERSION = 1


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by the file format.

    >>> table = bytes_to_unicode()
    >>> table[ord("a")], table[ord(" ")], table[ord("\\n")]
    ('a', 'Ġ', 'Ċ')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shift)
            shift += 1
    return table


def _slots(codes: np.ndarray, bits: int) -> np.ndarray:
    """Multiplicative hashing (Fibonacci): the top ``bits`` bits of ``code * 2**64 / phi``."""
    return ((codes.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
            >> np.uint64(64 - bits)).view(np.int64)


class _CodeTable:
    """int64 codes (non-negative; one value per code) -> int64 values, looked up many at once.

    A hash table of 2 to 4 slots per code: a code sits in its slot (:func:`_slots`) unless
    another code took it; those few are kept sorted aside (their slots marked ``spill``) and
    binary-searched, only for the queries that miss in a marked slot.
    """

    def __init__(self, codes: np.ndarray, values: np.ndarray):
        self.bits = max(4, (2 * len(codes) - 1).bit_length())
        slot = _slots(codes, self.bits)
        self.codes = np.full(1 << self.bits, -1, np.int64)
        self.codes[slot[::-1]] = codes[::-1]  # one per slot, mostly the first (lowest rank)
        home = self.codes[slot] == codes
        self.values = np.zeros(1 << self.bits, np.int64)
        self.values[slot[home]] = values[home]
        self.spill = np.zeros(1 << self.bits, bool)
        self.spill[slot[~home]] = True
        order = np.argsort(codes[~home])
        self.rest_codes = np.append(codes[~home][order], 1 << 62)  # a sentinel above all
        self.rest_values = np.append(values[~home][order], 0)

    def get(self, query: np.ndarray, default: int) -> np.ndarray:
        """The value of each code in ``query``, or ``default``."""
        slot = _slots(query, self.bits)
        out = self.values[slot]
        miss = self.codes[slot] != query
        np.putmask(out, miss, default)
        other = np.flatnonzero(miss & self.spill[slot])
        if len(other):
            query = query[other]
            at = np.searchsorted(self.rest_codes, query)
            found = self.rest_codes[at] == query
            out[other] = np.where(found, self.rest_values[at], np.int64(default))
        return out


class BPETokenizer:
    """Byte-level BPE with GPT-2 pre-tokenization and special tokens, for any id layout.

    ``vocab`` (id -> bytes), ``merges`` (ordered pairs of bytes) and ``special_tokens`` are
    plain attributes. Ids can be laid out in any order (GPT-2's ``vocab.json`` puts the
    printable bytes first); every single byte must be a token. Merge priority comes from the
    ``merges`` list when one is given (the i-th merge's result has priority i), otherwise from
    the token ids (tiktoken's ranks). ``special_tokens`` is a list of strings -- each gets the
    first multi-byte id whose bytes equal its UTF-8 encoding, or a new id at the end (training
    puts them at 256, 257, ...) -- or a dict ``{token: id}`` with explicit ids, 0 allowed.
    GPT-2 files: :meth:`from_gpt2_files`; tiktoken rank files: :meth:`from_tiktoken`.

    >>> tok = BPETokenizer.train("the cat and the hat", 270)
    >>> moved = BPETokenizer({(i + 7) % 270: t for i, t in tok.vocab.items()}, tok.merges)
    >>> pieces = lambda t: [t.vocab[i] for i in t.encode("the hat")]
    >>> pieces(moved) == pieces(tok), moved.encode("the hat")[0] - tok.encode("the hat")[0]
    (True, 7)
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]] | None = None,
        special_tokens: Iterable[str] | dict[str, int] = (),
        pattern: str = GPT2_PATTERN,
        cache_size: int = 1 << 17,
    ):
        self.vocab = {int(i): bytes(b) for i, b in vocab.items()}
        self.merges = [(bytes(a), bytes(b)) for a, b in (merges or ())]
        self.pattern = pattern
        self._pat = regex.compile(pattern)
        # pure-ASCII text goes through the faster ``re`` twin of the GPT-2 pattern
        self._pat_for = gpt2_regex if pattern == GPT2_PATTERN else (lambda text: self._pat)

        self.special_ids: dict[str, int] = {}
        if isinstance(special_tokens, dict):
            for tok, sid in special_tokens.items():
                b = tok.encode("utf-8")
                if self.vocab.setdefault(int(sid), b) != b:
                    raise ValueError(f"special token {tok!r}: id {sid} is {self.vocab[sid]!r} "
                                     "in the vocab")
                self.special_ids[tok] = int(sid)
        else:
            by_bytes: dict[bytes, list[int]] = {}
            for i in sorted(self.vocab):
                by_bytes.setdefault(self.vocab[i], []).append(i)
            for tok in dict.fromkeys(special_tokens):
                b = tok.encode("utf-8")
                cands = by_bytes.get(b, []) if len(b) > 1 else []
                sid = cands[0] if cands else max(self.vocab, default=-1) + 1
                self.vocab[sid] = b
                self.special_ids[tok] = sid
        if len(set(self.special_ids.values())) != len(self.special_ids):
            raise ValueError(f"two special tokens share an id: {self.special_ids}")
        self.special_tokens = list(self.special_ids)
        special = set(self.special_ids.values())

        # ranks: bytes -> id of every ordinary token (the smaller id where two share bytes)
        self.ranks: dict[bytes, int] = {}
        for i in sorted(self.vocab):
            if i not in special:
                self.ranks.setdefault(self.vocab[i], i)
        missing = [b for b in range(256) if _SINGLE_BYTES[b] not in self.ranks]
        if missing:
            shown = ", ".join(f"0x{b:02x}" for b in missing[:8])
            raise ValueError(f"the vocab lacks {len(missing)} single byte(s) ({shown}"
                             f"{', ...' if len(missing) > 8 else ''}): byte-level BPE needs "
                             "every byte as a token")
        # merge priority: bytes of a merge's result -> its position in the merges list
        # and the id of each merge's result (for _merge_batch)
        if self.merges:
            self._priority: dict[bytes, int] = {}
            self._merge_ids: list[int] = []
            for n, (a, b) in enumerate(self.merges):
                ab = a + b
                i = self.ranks.get(ab)
                if i is None:
                    raise ValueError(f"merge {n} ({a!r}, {b!r}): {ab!r} is not in the vocab")
                self._merge_ids.append(i)
                self._priority.setdefault(ab, n)
        else:
            self._priority = self.ranks  # tiktoken: the rank is the id
        self._special_re = special_token_regex(self.special_tokens)
        self._max_special = max((len(t) for t in self.special_tokens), default=0)
        # pre-token (str) -> tuple of ids, filled by ``_ids``; cleared when it grows too big
        self._cache: dict[str, tuple[int, ...]] = {}
        self._cache_size = cache_size
        # what _merge_batch looks ranks up in, made on its first use (_batch_tables)
        self._tables: tuple | None = None

    # ------------------------------------------------------------------ other layouts
    @classmethod
    def from_gpt2_files(
        cls,
        vocab_path: str | os.PathLike,
        merges_path: str | os.PathLike,
        special_tokens: Iterable[str] | dict[str, int] = ("<|endoftext|>",),
        pattern: str = GPT2_PATTERN,
    ) -> BPETokenizer:
        """Load GPT-2's ``vocab.json`` (``{"token": id}``, bytes written with
        :func:`bytes_to_unicode`) and ``merges.txt`` (``#version`` line, then ``"a b"`` lines,
        highest priority first). Listed special tokens that are not in the vocab are skipped."""
        inverse = {c: b for b, c in bytes_to_unicode().items()}

        def unshow(s: str) -> bytes:
            try:
                return bytes(inverse[c] for c in s)
            except KeyError as e:
                raise ValueError(f"{vocab_path}: {s!r} is not in GPT-2's byte alphabet") from e

        with open(vocab_path, encoding="utf-8") as f:
            table = json.load(f)
        vocab = {int(i): unshow(s) for s, i in table.items()}
        merges = []
        with open(merges_path, encoding="utf-8") as f:
            for n, line in enumerate(f.read().split("\n")):
                if not line.strip() or (n == 0 and line.startswith("#version")):
                    continue
                parts = line.split(" ")
                if len(parts) != 2:
                    raise ValueError(f"{merges_path}, line {n + 1}: expected 'a b', got {line!r}")
                merges.append((unshow(parts[0]), unshow(parts[1])))
        if not isinstance(special_tokens, dict):
            special_tokens = {t: table[t] for t in special_tokens if t in table}
        return cls(vocab, merges, special_tokens, pattern=pattern)

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike,
        special_tokens: dict[str, int] | None = None,
        pattern: str = GPT2_PATTERN,
    ) -> BPETokenizer:
        """Load a tiktoken rank file (``base64(token) rank`` lines): the rank is the id and
        the merge priority; ``special_tokens`` maps each special token to its id."""
        vocab: dict[int, bytes] = {}
        with open(path, "rb") as f:
            for n, line in enumerate(f.read().splitlines()):
                if not line.strip():
                    continue
                try:
                    token, rank = line.split()
                    vocab[int(rank)] = base64.b64decode(token, validate=True)
                except ValueError as e:
                    raise ValueError(f"{path}, line {n + 1}: expected 'base64 rank'") from e
        return cls(vocab, None, special_tokens or {}, pattern=pattern)

    def save_gpt2_files(self, vocab_path: str | os.PathLike, merges_path: str | os.PathLike):
        """Write GPT-2's ``vocab.json`` and ``merges.txt`` (special tokens are in the vocab)."""
        table = bytes_to_unicode()
        show = lambda b: "".join(table[x] for x in b)
        vocab = {show(self.vocab[i]): i for i in sorted(self.vocab)}
        with open(vocab_path, "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(merges_path, "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            f.writelines(f"{show(a)} {show(b)}\n" for a, b in self._merge_list())

    def save_tiktoken(self, path: str | os.PathLike) -> None:
        """Write a tiktoken rank file of the ordinary tokens (ids are ranks)."""
        with open(path, "wb") as f:
            for b, i in sorted(self.ranks.items(), key=lambda kv: kv[1]):
                f.write(base64.b64encode(b) + b" " + str(i).encode() + b"\n")

    def _merge_list(self) -> list[tuple[bytes, bytes]]:
        if self.merges:
            return self.merges
        raise ValueError("this tokenizer has no merges list (loaded from ranks)")

    # ------------------------------------------------------------------ training
    @classmethod
    def train(
        cls, input: str | os.PathLike, vocab_size: int, special_tokens: Iterable[str] = ()
    ) -> BPETokenizer:
        """Train with :func:`train_bpe` (incremental) and wrap the result."""
        special_tokens = list(special_tokens)
        vocab, merges = train_bpe(input, vocab_size, special_tokens)
        return cls(vocab, merges, special_tokens)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    # ------------------------------------------------------------------ encoding
    def _encode_piece(self, piece: str) -> tuple[int, ...]:
        """Encode one pre-token by lowest-rank-first merging (tiktoken's ``byte_pair_merge``);
        the rank of a pair is its merge priority (the merges list's order, else the id).

        ``pair_ranks[i]`` is the rank of ``parts[i] + parts[i + 1]`` (or infinity); after a
        merge only the two neighbouring entries change.
        """
        data = piece.encode("utf-8")
        ranks, prio = self.ranks, self._priority
        whole = ranks.get(data)
        if whole is not None:
            return (whole,)
        parts = list(map(_SINGLE_BYTES.__getitem__, data))
        pair_ranks = [prio.get(a + b, _INF) for a, b in zip(parts, parts[1:])]
        while pair_ranks:
            best = min(pair_ranks)
            if best == _INF:
                break
            i = pair_ranks.index(best)  # leftmost lowest rank
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
            del pair_ranks[i]
            if i > 0:
                pair_ranks[i - 1] = prio.get(parts[i - 1] + parts[i], _INF)
            if i < len(pair_ranks):
                pair_ranks[i] = prio.get(parts[i] + parts[i + 1], _INF)
        return tuple(map(ranks.__getitem__, parts))

    #: fewer new pre-tokens than this in one call are merged one at a time (numpy's per-call
    #: overhead would dominate); tests set it to 1 to run the batch on every call
    _batch_min = 96

    def _batch_tables(self) -> tuple:
        """What :meth:`_merge_batch` looks ranks up in (made on its first use): ``no``, a rank
        above every merge's; the rank of each 2-byte string (a 65,536-entry array indexed by
        its big-endian value); a :class:`_CodeTable` from the codes (:func:`_byte_codes`) of
        the merge results of 3 to 7 bytes to their rank, and of those of 8 bytes or more to
        ``_LONG`` (look the string up in ``_priority``: such codes are shared); the id of the
        token each rank makes (``rank -> id``; None where the rank is the id); the id of each
        byte; whether every token of 2 bytes or more has a rank (else the pre-tokens that are
        a token are found in ``ranks``)."""
        prio, ranks = self._priority, self.ranks
        keys = list(prio)
        if prio is not ranks and len(prio) == len(self.merges):  # no two merges make the same
            rank = np.arange(len(keys))
        else:
            rank = np.fromiter(prio.values(), np.int64, len(keys))
        no = int(rank.max(initial=0)) + 1
        sizes = np.fromiter(map(len, keys), np.int64, len(keys))
        lo = np.cumsum(sizes) - sizes
        win = _windows(b"".join(keys))
        two = sizes == 2
        pair = np.full(1 << 16, no, np.int64)
        pair[win[lo[two]] >> 40] = rank[two]
        big = sizes > 2
        table = _CodeTable(_byte_codes(win, lo[big], sizes[big]),
                           np.where(sizes[big] > 7, _LONG, rank[big]))
        if prio is ranks:  # the rank is the id
            token = None
            complete = True
        else:  # the rank is the position in the merges list
            token = np.fromiter(self._merge_ids, np.int64, len(self._merge_ids))
            # the merge results (all in ranks) are all its tokens of 2 bytes or more
            complete = int((sizes > 1).sum()) == len(ranks) - 256 - (b"" in ranks)
        byte_ids = np.fromiter(map(ranks.__getitem__, _SINGLE_BYTES), np.int64, 256)
        return no, pair, table, token, byte_ids, complete

    def _merge_batch(self, pieces: list[str]) -> Iterable[tuple[str, tuple[int, ...]]]:
        """:meth:`_encode_piece` for many distinct pre-tokens at once: ``(piece, ids)`` pairs,
        in the order given (unless the batch had to be split, see below).

        The pre-tokens that are a token are found first, all at once (by their codes as
        below, or in ``ranks`` when some token is no merge's result). The others' UTF-8
        bytes are concatenated (``flat``, ``n`` bytes); a part (a token so far) is named by
        the offset of its first byte, and ``nxt``/``prv`` link each part to the next/previous
        one of its pre-token. ``key[p]`` is ``rank << shift | p`` for the part at ``p``, where
        ``rank`` is the rank of the pair that the part starts (``no`` for a pre-token's last
        part or a pair that is not a token; ``dead`` once the part was merged into the one
        before it), so the smallest key of a pre-token's span of ``key`` is its leftmost
        lowest-rank pair. Each round merges that pair in every pre-token that has one
        (``np.minimum.reduceat``), looks up the ranks of the (at most two) new pairs and drops
        the pre-tokens with nothing left to merge; the rounds are as many as the most merges
        in one pre-token. Strings of 2 bytes are looked up in an array, longer ones in a hash
        table of their codes (:func:`_byte_codes`; a string of 8 bytes or more whose code is
        a merge result's in ``_priority``, see :meth:`_batch_tables`). The ids come out as
        tuples made column by column, the pre-tokens grouped by their number of ids.
        """
        if not pieces:
            return ()
        if self._tables is None:
            self._tables = self._batch_tables()
        no, pair, table, token, byte_ids, complete = self._tables
        prio = self._priority
        id_of = (lambda rank: rank) if token is None else token.__getitem__

        def ranks_of(flat: bytes, win: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
            out = table.get(_byte_codes(win, lo, hi - lo), no)  # of flat[lo:hi], 3+ bytes
            long = np.flatnonzero(out == _LONG)
            if len(long):
                strings = map(flat.__getitem__, map(slice, lo[long].tolist(), hi[long].tolist()))
                out[long] = np.fromiter(map(prio.get, strings, repeat(no)), np.int64, len(long))
            return out

        text = "".join(pieces)
        flat = text.encode("utf-8")
        ends = np.cumsum(np.fromiter(map(len, pieces), np.int64, len(pieces)))  # in characters
        if len(flat) != len(text):  # not ASCII: in bytes
            starts = np.flatnonzero((np.frombuffer(flat, np.uint8) & 0xC0) != 0x80)
            ends = np.append(starts, len(flat))[ends]
        lens = np.diff(ends, prepend=0)
        firsts = ends - lens
        win = _windows(flat)
        # the pre-tokens that are a token (looked up whole first, as tiktoken does): their ids
        if complete:
            whole = ranks_of(flat, win, firsts, ends)
            two = lens == 2
            whole[two] = pair[win[firsts[two]] >> 40]
            whole = np.where(whole < no, id_of(np.minimum(whole, no - 1)), -1)
        else:
            strings = map(flat.__getitem__, map(slice, firsts.tolist(), ends.tolist()))
            whole = np.fromiter(map(self.ranks.get, strings, repeat(-1)), np.int64, len(lens))
        whole[lens == 1] = byte_ids[np.frombuffer(flat, np.uint8)[firsts[lens == 1]]]
        rest = np.flatnonzero(whole < 0)  # the others, merged below
        if not len(rest):
            return zip(pieces, zip(whole.tolist()))
        flat = np.frombuffer(flat, np.uint8)[np.repeat(whole < 0, lens)].tobytes()
        n = len(flat)
        ends = np.cumsum(lens[rest])
        firsts = ends - lens[rest]
        win = _windows(flat)
        shift = n.bit_length()
        if (no + 1) << shift >= 1 << 63:  # keys would overflow int64: smaller batches
            one = np.flatnonzero(whole >= 0)
            done = zip(map(pieces.__getitem__, one.tolist()), zip(whole[one].tolist()))
            others = list(map(pieces.__getitem__, rest.tolist()))
            if len(others) == 1:
                return chain(done, [(others[0], self._encode_piece(others[0]))])
            half = len(others) // 2
            return chain(done, self._merge_batch(others[:half]), self._merge_batch(others[half:]))
        key = pair[win >> 40]  # the byte pairs' ranks
        key[ends - 1] = no
        key <<= shift
        key |= np.arange(n)
        nxt = np.arange(1, n + 2)  # the links
        prv = np.arange(-1, n)
        made = np.zeros(n, np.int64)  # the rank of the last merge that made each part
        mask, finish, dead = (1 << shift) - 1, no << shift, np.iinfo(np.int64).max
        act, last = firsts, ends  # the pre-tokens still merging: their spans
        while True:
            best = np.minimum.reduceat(key, act)
            more = best < finish
            if not more.all():
                act, last, best = act[more], last[more], best[more]
                if not len(act):
                    break
            i = best & mask  # merge the parts at i and j = nxt[i]
            j = nxt[i]
            k = nxt[j]
            nxt[i] = k
            prv[k] = i
            key[j] = dead
            key[i] = finish
            made[i] = best >> shift
            right = k < last  # the new pairs: (i, k) unless k ends the pre-token,
            left = i > act  # and (prv[i], i) unless i starts it
            lo = np.concatenate((i[right], prv[i[left]]))
            hi = np.concatenate((nxt[k[right]], k[left]))
            key[lo] = (ranks_of(flat, win, lo, hi) << shift) | lo
        alive = key != dead
        at = np.flatnonzero(alive)  # the parts, pre-token after pre-token
        single = nxt[at] == at + 1  # never merged: a byte
        ids = id_of(np.where(single, 0, made[at]))
        ids[single] = byte_ids[np.frombuffer(flat, np.uint8)[at[single]]]
        stops = np.searchsorted(at, ends)  # one past each pre-token's last part in ids
        counts = np.diff(stops, prepend=0)
        starts = stops - counts
        order = np.argsort(counts, kind="stable")
        counts = counts[order]
        cuts = [0, *(np.flatnonzero(np.diff(counts)) + 1).tolist(), len(counts)]
        out: list[tuple[int, ...]] = []
        for a, b in zip(cuts, cuts[1:]):  # the pre-tokens of counts[a] ids, as columns
            out += zip(*ids[starts[order[a:b], None] + np.arange(counts[a])].T.tolist())
        one = np.flatnonzero(whole >= 0)
        out += zip(whole[one].tolist())
        where = np.empty(len(pieces), np.int64)  # each pre-token's tuple's index in out
        where[np.concatenate((rest[order], one))] = np.arange(len(pieces))
        return zip(pieces, map(out.__getitem__, where.tolist()))

    def _encode_new(self, new: list[str]) -> Iterable[tuple[str, tuple[int, ...]]]:
        """``(piece, ids)`` for pre-tokens not in the cache: together when they are many."""
        if len(new) < self._batch_min:
            return zip(new, map(self._encode_piece, new))
        return self._merge_batch(new)

    def _ids(self, pieces: list[str]) -> list[int]:
        """The ids of a list of pre-tokens, through the cache; the pre-tokens not in it yet
        are encoded first, all together (when they would overflow the cache, it is cleared
        and all the list's pre-tokens are encoded)."""
        cache = self._cache
        try:
            return list(chain.from_iterable(map(cache.__getitem__, pieces)))
        except KeyError:
            pass
        # in order of first appearance, which the cache keeps: the frequent pre-tokens come
        # early and close together, and are then found faster (a few % of a warm call)
        new = distinct = list(dict.fromkeys(pieces))
        if cache:
            new = list(filterfalse(cache.__contains__, distinct))
            if len(cache) + len(new) > self._cache_size:
                cache.clear()
                new = distinct
        cache.update(self._encode_new(new))
        return list(chain.from_iterable(map(cache.__getitem__, pieces)))

    #: text at least this long (and :func:`mostly_ascii`) is encoded on arrays
    #: (:meth:`_array_ids`): on the corpus at 10k, 16,384 characters take about as long both
    #: ways, warm (0.87 ms) and cold (2.3 ms); at 65,536 arrays 2.9 and 6.1 ms, the regex and
    #: the dict 3.5 and 7.3 ms; at 4,096 arrays are 1.4x slower warm
    _array_min = 1 << 15

    def _array_ids(self, text: str) -> list[int]:
        """:meth:`_ids` of the GPT-2 pre-tokens of ``text``, found on arrays.

        The pre-tokens are spans of its UTF-8 bytes (:func:`gpt2_starts`), told apart by
        :func:`distinct_pretokens`. Each distinct pre-token's ids come from the cache or
        :meth:`_encode_new`, and are then laid out pre-token by pre-token.
        """
        which, pieces = distinct_pretokens(*gpt2_starts(text))  # (P,), D byte strings
        distinct = list(map(bytes.decode, pieces))
        cache = self._cache
        tuples = list(map(cache.get, distinct))
        new = [piece for piece, ids in zip(distinct, tuples) if ids is None]
        if new:
            got = dict(self._encode_new(new))
            if len(cache) + len(got) > self._cache_size:
                cache.clear()
            cache.update(got)
            tuples = list(map(got.get, distinct, tuples))
        counts = np.fromiter(map(len, tuples), np.int64, len(tuples))  # (D,)
        ids = np.fromiter(chain.from_iterable(tuples), np.int64, int(counts.sum()))
        first = np.cumsum(counts) - counts  # of each distinct pre-token's ids in ids
        counts = counts[which]  # (P,): now per pre-token
        stops = np.cumsum(counts)
        at = np.repeat(first[which] - (stops - counts), counts) + np.arange(int(stops[-1]))
        return ids[at].tolist()

    def _encode_ordinary(self, text: str) -> list[int]:
        """Encode text that contains no special tokens: on arrays when it is long and
        :func:`mostly_ascii`."""
        if (self._pat_for is gpt2_regex and len(text) >= self._array_min
                and mostly_ascii(text)):
            return self._array_ids(text)
        return self._ids(self._pat_for(text).findall(text))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens become their single id).

        >>> tok = BPETokenizer.train("aaa bbb aaa", 260)  # merges: aa, bb, aaa, bbb
        >>> [tok.vocab[i] for i in tok.encode("aaa bb")]
        [b'aaa', b' ', b'bb']
        """
        if self._special_re is None:
            return self._encode_ordinary(text)
        ids: list[int] = []
        pos = 0
        for m in self._special_re.finditer(text):
            ids += self._encode_ordinary(text[pos : m.start()])
            ids.append(self.special_ids[m.group()])
            pos = m.end()
        ids += self._encode_ordinary(text[pos:])
        return ids

    def _encode_prefix(self, buf: str, limit: int) -> tuple[list[int], int]:
        """Encode the longest prefix of ``buf`` whose tokens cannot change when text is appended.

        Returns ``(ids, consumed)``. A pre-token (or special token) is final when it ends at or
        before ``limit = len(buf) - (longest special token + 3)``: a GPT-2 pre-token's extent
        depends on at most 2 characters past its end (``\\s+(?!\\S)`` backtracking, ``'ll``),
        and a special token that is still incomplete starts after ``limit``. The pre-tokens
        of a segment tile it (every character matches some branch of the pattern), so their
        end offsets are cumulative lengths.
        """
        ids: list[int] = []
        pos = 0
        pat = self._pat_for(buf)
        specials = self._special_re.finditer(buf) if self._special_re is not None else ()
        for m in chain(specials, (None,)):
            seg_end = m.start() if m is not None else len(buf)
            pieces = pat.findall(buf, pos, seg_end)
            if seg_end > limit:  # drop the pre-tokens that end after the limit
                end, keep = seg_end, len(pieces)
                while keep and end > limit:
                    keep -= 1
                    end -= len(pieces[keep])
                ids += self._ids(pieces[:keep])
                return ids, end
            ids += self._ids(pieces)
            if m is None or m.end() > limit:
                return ids, seg_end
            ids.append(self.special_ids[m.group()])
            pos = m.end()
        return ids, pos  # pragma: no cover - the loop always returns

    def encode_iterable(self, iterable: Iterable[str], chunk_chars: int = 1 << 16) -> Iterator[int]:
        """Lazily encode a stream of strings (e.g. an open file) with bounded memory.

        Yields exactly ``encode("".join(iterable))``. Text is buffered until ``chunk_chars``
        characters are waiting; then every token that more text cannot change is emitted and
        only the short undecided tail is kept (see :meth:`_encode_prefix`; the 3-character
        look-ahead margin is derived for :data:`GPT2_PATTERN`). Memory is bounded by
        ``chunk_chars`` plus the longest pre-token and the pre-token cache.

        >>> tok = BPETokenizer.train("the cat and the hat", 270)
        >>> list(tok.encode_iterable(["the c", "at an", "d the hat"], chunk_chars=4)) == (
        ...     tok.encode("the cat and the hat"))
        True
        """
        margin = self._max_special + 3
        pending: list[str] = []
        size = 0
        for chunk in iterable:
            pending.append(chunk)
            size += len(chunk)
            if size < chunk_chars:
                continue
            buf = "".join(pending)
            ids, consumed = self._encode_prefix(buf, len(buf) - margin)
            yield from ids
            rest = buf[consumed:]
            pending, size = [rest], len(rest)
        yield from self.encode("".join(pending))

    # ------------------------------------------------------------------ decoding
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return b"".join(self.vocab[i] for i in ids)

    def decode(self, ids: Iterable[int]) -> str:
        """Concatenate the tokens' bytes and decode UTF-8 (invalid bytes become U+FFFD).

        >>> tok = BPETokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tok.decode([0xE2, 0x82])  # a truncated 3-byte character
        '�'
        """
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer as JSON (format in the module docstring)."""
        table = bytes_to_unicode()
        show = lambda b: "".join(table[x] for x in b)
        vocab = {str(i): show(self.vocab[i]) for i in sorted(self.vocab)}
        merges = [f"{show(a)} {show(b)}" for a, b in self.merges]
        head = {
            "format": _FORMAT,
            "version": _VERSION,
            "pattern": self.pattern,
            "special_tokens": self.special_ids,
        }
        lines = [json.dumps(head, ensure_ascii=False)[:-1] + ","]
        lines.append(' "vocab": {')
        lines.append(",\n".join(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                                for k, v in vocab.items()))
        lines.append(' },\n "merges": [')
        lines.append(",\n".join(f"  {json.dumps(m, ensure_ascii=False)}" for m in merges))
        lines.append(" ]\n}\n")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))

    @classmethod
    def load(cls, path: str | os.PathLike) -> BPETokenizer:
        """Read a file written by :meth:`save`."""
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") != _FORMAT or data.get("version") != _VERSION:
            raise ValueError(f"{path}: not a {_FORMAT} v{_VERSION} file")
        inverse = {c: b for b, c in bytes_to_unicode().items()}
        unshow = lambda s: bytes(inverse[c] for c in s)
        vocab = {int(i): unshow(s) for i, s in data["vocab"].items()}
        merges = []
        for line in data["merges"]:
            a, b = line.split(" ")
            merges.append((unshow(a), unshow(b)))
        return cls(vocab, merges, dict(data["special_tokens"]), pattern=data["pattern"])

    def __repr__(self) -> str:
        return (f"BPETokenizer(vocab_size={len(self.vocab)}, merges={len(self.merges)}, "
                f"special_tokens={self.special_tokens})")
