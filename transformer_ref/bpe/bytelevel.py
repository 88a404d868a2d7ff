"""Byte-level BPE tokenizer (GPT-2 style): train, encode, decode, stream, save and load.

Encoding (identical to ``tiktoken`` built from our ranks, see ``tests/unit/test_bpe_tokenizer.py``):

1. split the text on special tokens (longest match wins where they overlap; a special token
   is always one id and is never split or merged);
2. split each segment into pre-tokens with :data:`GPT2_PATTERN` (an ASCII segment with its
   faster standard-library twin ``GPT2_ASCII_PATTERN``, which splits ASCII identically);
3. encode each pre-token's UTF-8 bytes: if the whole piece is a token, that token; otherwise
   start from single bytes and repeatedly merge the adjacent pair whose concatenation has
   the lowest rank (merge priority, see below; leftmost on ties), until no adjacent pair is
   a token.
   Pre-token encodings are cached (a bounded dict), which makes real text fast. The
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
from itertools import chain, repeat

import numpy as np
import regex

from transformer_ref.bpe.common import GPT2_PATTERN, gpt2_regex, special_token_regex
from transformer_ref.bpe.train import train_bpe

__all__ = ["BPETokenizer", "bytes_to_unicode"]

_SINGLE_BYTES = [bytes([b]) for b in range(256)]
_INF = float("inf")
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


def _windows(flat: bytes) -> np.ndarray:
    """``w[j]``: the 7 bytes ``flat[j : j + 7]`` (zero-padded) as one big-endian int64."""
    b = np.frombuffer(flat + bytes(7), np.uint8).astype(np.int64)
    w = np.zeros(len(flat), np.int64)
    for k in range(7):
        w <<= 8
        w |= b[k : k + len(flat)]
    return w


def _byte_codes(win: np.ndarray, lo: np.ndarray, size: np.ndarray) -> np.ndarray:
    """A distinct int64 code for each string ``flat[lo : lo + size]`` of 1 to 7 bytes (its
    bytes big-endian, its length in bits 56-58); longer strings get the code of their first
    7 bytes (callers look those up otherwise)."""
    size = np.minimum(size, 7)
    return (win[lo] >> (8 * (7 - size))) | (size << 56)


def _code_table(table: dict[bytes, int]) -> tuple[np.ndarray, np.ndarray]:
    """The codes (sorted, then a sentinel above all) and values of ``table``'s keys of up to
    7 bytes."""
    keys = list(table)
    values = np.fromiter(table.values(), np.int64, len(keys))
    sizes = np.fromiter(map(len, keys), np.int64, len(keys))
    short = (sizes <= 7) & (sizes > 0)
    codes = _byte_codes(_windows(b"".join(keys)), (np.cumsum(sizes) - sizes)[short],
                        sizes[short])
    order = np.argsort(codes)
    return np.append(codes[order], 1 << 62), np.append(values[short][order], -1)


def _lookup(codes: np.ndarray, values: np.ndarray, query: np.ndarray, default: int):
    """``values`` at each ``query`` code in the sorted ``codes``, else ``default``."""
    at = np.searchsorted(codes, query)
    return np.where(codes[at] == query, values[at], default)


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
        if self.merges:
            self._priority: dict[bytes, int] = {}
            for n, (a, b) in enumerate(self.merges):
                if a + b not in self.ranks:
                    raise ValueError(f"merge {n} ({a!r}, {b!r}): {a + b!r} is not in the vocab")
                self._priority.setdefault(a + b, n)
        else:
            self._priority = self.ranks  # tiktoken: the rank is the id
        self._special_re = special_token_regex(self.special_tokens)
        self._max_special = max((len(t) for t in self.special_tokens), default=0)
        # pre-token (str) -> tuple of ids, filled by ``_ids``; cleared when it grows too big
        self._cache: dict[str, tuple[int, ...]] = {}
        self._cache_size = cache_size
        # (codes, ranks) and (codes, ids) of the short tokens for _merge_batch, made on first use
        self._tables: tuple[tuple[np.ndarray, np.ndarray], ...] | None = None
        self._no_merge = 0  # a rank above every merge's (set with _tables)

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
    _batch_min = 64

    def _merge_batch(self, datas: list[bytes]) -> list[tuple[int, ...]]:
        """``_encode_piece`` for many pre-tokens at once (UTF-8 bytes, none of them a token).

        All pre-tokens' parts lie in one flat array, in order: row 0 is a part's first byte
        offset in the concatenated bytes (``flat``), row 1 one past its last byte, row 2 its
        key ``rank * len(flat) + offset``, where ``rank`` is the rank of the pair the part
        starts (``no`` at a pre-token's last part or where the pair is not a token). The
        smallest key of a pre-token is then its leftmost lowest-rank pair. Each round merges
        that pair in every pre-token at once, looks up the (at most two) new pairs' ranks,
        and drops the pre-tokens with nothing left to merge; the rounds are as many as the
        most merges in one pre-token. Ranks and ids of strings of up to 7 bytes are looked
        up in sorted int64 codes (:func:`_byte_codes`), longer ones in the dicts.
        """
        if not datas:
            return []
        if self._tables is None:
            self._no_merge = max(self._priority.values(), default=0) + 1
            self._tables = (_code_table(self._priority), _code_table(self.ranks))
        (pc, pv), (ic, iv) = self._tables
        no = self._no_merge
        flat = b"".join(datas)
        n = len(flat)
        if (no + 1) * n >= 1 << 63:  # keys would overflow int64: smaller batches
            if len(datas) == 1:
                return [self._encode_piece(datas[0].decode("utf-8"))]
            half = len(datas) // 2
            return self._merge_batch(datas[:half]) + self._merge_batch(datas[half:])
        cut = flat.__getitem__
        win = _windows(flat)

        def look(codes, values, table, lo, hi, default):
            size = hi - lo
            out = _lookup(codes, values, _byte_codes(win, lo, size), default)
            long = np.flatnonzero(size > 7)
            if len(long):
                strings = map(cut, map(slice, lo[long].tolist(), hi[long].tolist()))
                out[long] = np.fromiter(map(table.get, strings, repeat(default)), np.int64,
                                        len(long))
            return out

        def keys_of(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
            return look(pc, pv, self._priority, lo, hi, no) * n + lo

        lens = np.fromiter(map(len, datas), np.int64, len(datas))  # parts per pre-token
        ends = np.cumsum(lens)  # one past each pre-token's last part
        part = np.empty((3, n), np.int64)
        start, stop, key = part
        start[:] = np.arange(n)
        stop[:] = start + 1
        key[:-1] = keys_of(start[:-1], start[:-1] + 2)
        key[ends - 1] = no * n + start[ends - 1]
        alive = np.arange(len(datas))  # which pre-token each segment is
        done = []
        finish_at = no * n
        while True:
            firsts = ends - lens
            best = np.minimum.reduceat(part[2], firsts)
            finished = best >= finish_at
            if finished.any():
                gone = np.repeat(finished, lens)
                done.append((alive[finished], lens[finished], part[0, gone], part[1, gone]))
                more = ~finished
                part = part[:, ~gone]
                alive, lens, best = alive[more], lens[more], best[more]
                if not len(alive):
                    break
                ends = np.cumsum(lens)
                firsts = ends - lens
            start, stop, key = part
            i = np.searchsorted(start, best % n)  # the part that starts the pair, one a segment
            stop[i] = stop[i + 1]
            right = i + 2 < ends
            key[i] = no * n + start[i]
            ir = i[right]
            key[ir] = keys_of(start[ir], stop[ir + 2])
            left = i[i > firsts] - 1
            key[left] = keys_of(start[left], stop[left + 1])
            keep = np.ones(len(start), bool)
            keep[i + 1] = False
            part = part[:, keep]
            lens = lens - 1
            ends = ends - np.arange(1, len(lens) + 1)
        who, n_parts, lo, hi = (np.concatenate(x) for x in zip(*done))
        ids = look(ic, iv, self.ranks, lo, hi, -1).tolist()
        out: list[tuple[int, ...]] = [()] * len(datas)
        pos = 0
        for w, k in zip(who.tolist(), n_parts.tolist()):
            out[w] = tuple(ids[pos : pos + k])
            pos += k
        return out

    def _ids(self, pieces: list[str]) -> list[int]:
        """The ids of a list of pre-tokens, through the cache; the pre-tokens not in it yet
        are encoded first, all together (the cache is cleared first when they would
        overflow it)."""
        cache = self._cache
        try:
            return list(chain.from_iterable(map(cache.__getitem__, pieces)))
        except KeyError:
            pass
        new = list(set(pieces).difference(cache))
        if len(cache) + len(new) > self._cache_size:
            cache.clear()
        if len(new) < self._batch_min:
            cache.update(zip(new, map(self._encode_piece, new)))
        else:
            datas = [p.encode("utf-8") for p in new]
            whole = list(map(self.ranks.get, datas))
            merged = iter(self._merge_batch([d for d, w in zip(datas, whole) if w is None]))
            cache.update(zip(new, [(w,) if w is not None else next(merged) for w in whole]))
        return list(chain.from_iterable(map(cache.__getitem__, pieces)))

    def _encode_ordinary(self, text: str) -> list[int]:
        """Encode text that contains no special tokens."""
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
