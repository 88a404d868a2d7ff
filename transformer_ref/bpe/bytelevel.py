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
   Pre-token encodings are cached (a bounded dict), which makes real text fast.

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
        self._cache = _PieceCache(self._encode_piece, cache_size)

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
        return cls(vocab, merges, dict(data["special_tokens"]), pattern=data["pattern"])

    def __repr__(self) -> str:
        return (f"BPETokenizer(vocab_size={len(self.vocab)}, merges={len(self.merges)}, "
                f"special_tokens={self.special_tokens})")
