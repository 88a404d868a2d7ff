"""Byte-level BPE tokenizer (GPT-2 style): train, encode, decode, stream, save and load.

Encoding (identical to ``tiktoken`` built from our ranks, see ``tests/test_bpe_tokenizer.py``):

1. split the text on special tokens (longest match wins where they overlap; a special token
   is always one id and is never split or merged);
2. split each segment into pre-tokens with :data:`GPT2_PATTERN` (an ASCII segment with its
   faster standard-library twin ``GPT2_ASCII_PATTERN``, which splits ASCII identically);
3. encode each pre-token's UTF-8 bytes: if the whole piece is a token, that token; otherwise
   start from single bytes and repeatedly merge the adjacent pair whose concatenation has
   the lowest rank (= token id; leftmost on ties), until no adjacent pair is a token.
   Pre-token encodings are cached (a bounded dict), which makes real text fast.

Parity holds for every character assigned in Unicode 14 (Python 3.11's database). For about
17,500 code points assigned since (e.g. U+323B0, a CJK ideograph), the ``regex`` package's
newer Unicode tables see letters where tiktoken's Rust regex sees unassigned symbols, so the
two pre-tokenize them differently; both still round-trip.

Ranks: every non-special token's bytes map to its id. When two merges produced the same
bytes (possible: ``(a, bc)`` and ``(ab, c)``), the smaller id is used and the other is never
produced by ``encode`` (it still decodes).

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

import json
import os
from collections.abc import Iterable, Iterator
from itertools import chain

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


class _PieceCache(dict):
    """pre-token (str) -> tuple of ids; computes on a miss; cleared when it grows too big."""

    def __init__(self, encode_piece, max_size: int):
        super().__init__()
        self._encode_piece = encode_piece
        self._max_size = max_size

    def __missing__(self, piece: str) -> tuple[int, ...]:
        if len(self) >= self._max_size:
            self.clear()
        ids = self[piece] = self._encode_piece(piece)
        return ids


class BPETokenizer:
    """Byte-level BPE with GPT-2 pre-tokenization and special tokens.

    ``vocab`` (id -> bytes), ``merges`` (ordered pairs of bytes) and ``special_tokens``
    (list of str) are plain attributes. A special token gets the first id >= 256 whose bytes
    equal its UTF-8 encoding (training puts them at 256, 257, ...), or a new id at the end.
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: Iterable[str] = (),
        pattern: str = GPT2_PATTERN,
        cache_size: int = 1 << 17,
    ):
        self.vocab = dict(vocab)
        self.merges = list(merges)
        self.special_tokens = list(dict.fromkeys(special_tokens))
        self.pattern = pattern
        self._pat = regex.compile(pattern)
        # pure-ASCII text goes through the faster ``re`` twin of the GPT-2 pattern
        self._pat_for = gpt2_regex if pattern == GPT2_PATTERN else (lambda text: self._pat)
        if any(bytes([b]) != self.vocab.get(b) for b in range(256)):
            raise ValueError("vocab ids 0..255 must be the single bytes")

        by_bytes: dict[bytes, list[int]] = {}
        for i in sorted(self.vocab):
            by_bytes.setdefault(self.vocab[i], []).append(i)
        self.special_ids: dict[str, int] = {}
        for tok in self.special_tokens:
            b = tok.encode("utf-8")
            cands = [i for i in by_bytes.get(b, []) if i >= 256]
            if cands:
                sid = cands[0]
            else:
                sid = max(self.vocab) + 1
                self.vocab[sid] = b
            self.special_ids[tok] = sid
        special = set(self.special_ids.values())
        self.ranks: dict[bytes, int] = {}
        for i in sorted(self.vocab):
            if i not in special:
                self.ranks.setdefault(self.vocab[i], i)
        self._special_re = special_token_regex(self.special_tokens)
        self._max_special = max((len(t) for t in self.special_tokens), default=0)
        self._cache = _PieceCache(self._encode_piece, cache_size)

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
        """Encode one pre-token by lowest-rank-first merging (tiktoken's ``byte_pair_merge``).

        ``pair_ranks[i]`` is the rank of ``parts[i] + parts[i + 1]`` (or infinity); after a
        merge only the two neighbouring entries change.
        """
        data = piece.encode("utf-8")
        ranks = self.ranks
        whole = ranks.get(data)
        if whole is not None:
            return (whole,)
        parts = list(map(_SINGLE_BYTES.__getitem__, data))
        pair_ranks = [ranks.get(a + b, _INF) for a, b in zip(parts, parts[1:])]
        while pair_ranks:
            best = min(pair_ranks)
            if best == _INF:
                break
            i = pair_ranks.index(best)  # leftmost lowest rank
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
            del pair_ranks[i]
            if i > 0:
                pair_ranks[i - 1] = ranks.get(parts[i - 1] + parts[i], _INF)
            if i < len(pair_ranks):
                pair_ranks[i] = ranks.get(parts[i] + parts[i + 1], _INF)
        return tuple(map(ranks.__getitem__, parts))

    def _encode_ordinary(self, text: str) -> list[int]:
        """Encode text that contains no special tokens."""
        pieces = self._pat_for(text).findall(text)
        return list(chain.from_iterable(map(self._cache.__getitem__, pieces)))

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
        get = self._cache.__getitem__
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
                ids.extend(chain.from_iterable(map(get, pieces[:keep])))
                return ids, end
            ids.extend(chain.from_iterable(map(get, pieces)))
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
        specials = sorted(data["special_tokens"], key=data["special_tokens"].get)
        tok = cls(vocab, merges, specials, pattern=data["pattern"])
        if tok.special_ids != data["special_tokens"]:
            raise ValueError(f"{path}: special token ids do not match the vocab")
        return tok

    def __repr__(self) -> str:
        return (f"BPETokenizer(vocab_size={len(self.vocab)}, merges={len(self.merges)}, "
                f"special_tokens={self.special_tokens})")
