"""Pieces shared by the byte-level BPE trainers and the tokenizer.

Vocabulary layout produced by training (GPT-2 style, Sennrich et al. 2016 applied to bytes):

* ids ``0..255``: the single bytes (``vocab[i] == bytes([i])``);
* ids ``256..256+S-1``: the special tokens, in the order given (their UTF-8 bytes);
* then one id per merge, in merge order: ``vocab[id] == a + b`` for merge ``(a, b)``.

Tie-breaking rule (both trainers): among pairs with the same count, merge the pair whose byte
strings are lexicographically greatest, i.e. ``max`` over ``(count, bytes_a, bytes_b)``.
For example with ``count(b"a", b"b") == count(b"c", b"d")``, ``(b"c", b"d")`` is merged first.

>>> pretokenize("Hello, world!  It's 2024.")
['Hello', ',', ' world', '!', ' ', ' It', "'s", ' 2024', '.']
>>> merge((1, 2, 1, 2, 2), (1, 2), 9)
(9, 9, 2)
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import count

import numpy as np
import regex

__all__ = [
    "GPT2_PATTERN",
    "GPT2_ASCII_PATTERN",
    "gpt2_regex",
    "gpt2_ascii_starts",
    "gpt2_starts",
    "distinct_pretokens",
    "mostly_ascii",
    "ARRAY_MIN",
    "COUNT_ARRAY_MIN",
    "pretokenize",
    "special_token_regex",
    "split_special",
    "read_input",
    "count_pretokens",
    "initial_vocab",
    "merge",
    "pair_key",
]

# The GPT-2 pre-tokenizer (Radford et al. 2019): contractions, optional-space + letters,
# optional-space + digits, optional-space + other symbols, whitespace not followed by
# non-space (so "  x" gives " " and " x"), and any remaining whitespace.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

_GPT2_RE = regex.compile(GPT2_PATTERN)

# The same pattern for pure-ASCII text, spelled with explicit ASCII classes so that the
# standard library's ``re`` (about 2x faster than ``regex`` here) can run it. On ASCII,
# \p{L} = [A-Za-z], \p{N} = [0-9] and \s = [\t\n\v\f\r ] (checked exhaustively in the tests).
_WS = r"\t\n\x0b\x0c\r "
GPT2_ASCII_PATTERN = (
    rf"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^{_WS}A-Za-z0-9]+"""
    rf"""|[{_WS}]+(?![^{_WS}])|[{_WS}]+"""
)
_GPT2_ASCII_RE = re.compile(GPT2_ASCII_PATTERN)


def gpt2_regex(text: str):
    """The compiled GPT-2 pre-tokenizer for ``text``: the ASCII twin when ``text`` is ASCII."""
    return _GPT2_ASCII_RE if text.isascii() else _GPT2_RE


# The classes GPT-2's pattern sees in ASCII: 0 other (symbols, control characters), 1 letter,
# 2 digit, 3 whitespace (``_WS``); and the bytes that end a one-letter contraction ('s, 'd, ...)
_ASCII_CLASS = np.zeros(256, np.int8)
_ASCII_CLASS[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", np.uint8)] = 1
_ASCII_CLASS[np.frombuffer(b"0123456789", np.uint8)] = 2
_ASCII_CLASS[np.frombuffer(b"\t\n\x0b\x0c\r ", np.uint8)] = 3
_ONE_LETTER = np.zeros(256, bool)
_ONE_LETTER[np.frombuffer(b"sdmt", np.uint8)] = True


def gpt2_ascii_starts(data: bytes) -> np.ndarray:
    """Where each GPT-2 pre-token of ASCII ``data`` starts: ``findall``'s split, on arrays.

    A pre-token starts where the class (letter, digit, whitespace, other) changes, except:

    * a whitespace run followed by something else keeps its last character apart (``\\s+(?!\\S)``
      gives the run up to it); that character starts a pre-token, and when it is a space the
      run after it joins it (`` ?\\p{L}+``, `` ?\\p{N}+``, `` ?[^\\s\\p{L}\\p{N}]+``);
    * an apostrophe that starts a pre-token and is followed by ``s``, ``d``, ``m``, ``t``, ``ll``,
      ``ve`` or ``re`` is a contraction: it takes those letters, and the rest of the letters
      start a new pre-token (``'(?:[sdmt]|ll|ve|re)``, the pattern's first branch).

    Checked against :data:`GPT2_ASCII_PATTERN` on the corpus and on random strings in the tests.

    >>> data = b"I'll go  now's\\n"
    >>> starts = gpt2_ascii_starts(data).tolist()
    >>> [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]
    [b'I', b"'ll", b' go', b' ', b' now', b"'s", b'\\n']
    """
    n = len(data)
    b = np.frombuffer(data + b"\0\0", np.uint8)  # two bytes of padding for the look-ahead
    cls = _ASCII_CLASS[b[:n]]
    start = np.empty(n, bool)
    start[:1] = True
    np.not_equal(cls[1:], cls[:-1], out=start[1:])
    after = np.flatnonzero(start[1:] & (cls[:-1] == 3)) + 1  # a whitespace run ends before
    start[after - 1] = True
    start[after[b[after - 1] == 32]] = False  # a space joins the run after it
    j = np.flatnonzero((b[:n] == 39) & start)  # apostrophes that start a pre-token
    x, y = b[j + 1], b[j + 2]
    two = ((x == 108) & (y == 108)) | ((x == 118) & (y == 101)) | ((x == 114) & (y == 101))
    one, two = j[_ONE_LETTER[x]], j[two]  # 's 'd 'm 't, and 'll 've 're
    start[one + 1] = False
    start[two + 1] = False
    rest = np.concatenate((one + 2, two + 3))  # the letters after a contraction
    start[rest[rest < n]] = True
    return np.flatnonzero(start)


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _cut_before(text: str, lo: int, hi: int) -> int:
    """The last safe cut in ``[lo, hi]`` (``lo`` when there is none), see :func:`pretokenize`."""
    p = text.rfind("\n", lo + 1, hi)
    while p > lo and not "!" <= text[p - 1] <= "~":
        p = text.rfind("\n", lo + 1, p)
    return max(p, lo)


def _cut_after(text: str, lo: int) -> int:
    """The first safe cut at or after ``lo`` (``len(text)`` when there is none)."""
    p = text.find("\n", lo)
    while p != -1 and not "!" <= text[p - 1] <= "~":
        p = text.find("\n", p + 1)
    return len(text) if p == -1 else p


def _stretches(text: str) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, ascii)``: ``text`` cut into ASCII stretches and stretches around the other
    characters, only before a newline that follows a printable ASCII character (see
    :func:`pretokenize`)."""
    pos = 0
    for m in _NON_ASCII.finditer(text):
        if m.start() < pos:  # already inside the previous non-ASCII stretch
            continue
        start, end = _cut_before(text, pos, m.start()), _cut_after(text, m.end())
        yield pos, start, True
        yield start, end, False
        pos = end
    yield pos, len(text), True


def pretokenize(text: str) -> list[str]:
    """Split ``text`` into GPT-2 pre-tokens; BPE merges never cross their boundaries.

    Mostly-ASCII text with a few other characters (Shakespeare's 64 em dashes) is cut into
    ASCII stretches, split by the faster ``re`` twin, and short stretches around the other
    characters, split by ``regex``. A cut is made only before a newline that follows a
    printable ASCII character: no pre-token spans it (letters, digits and symbols stop at the
    newline, and a whitespace run starts there) and the pattern's look-ahead never crosses it,
    so the pieces are exactly those of the whole text.

    >>> pretokenize("Nay,\\n  — my lord!\\nGo.")
    ['Nay', ',', '\\n ', ' —', ' my', ' lord', '!', '\\n', 'Go', '.']
    """
    if text.isascii():
        return _GPT2_ASCII_RE.findall(text)
    pieces: list[str] = []
    for start, end, ascii in _stretches(text):
        pieces += (_GPT2_ASCII_RE if ascii else _GPT2_RE).findall(text, start, end)
    return pieces


#: an ASCII stretch at least this long is split on arrays by :func:`gpt2_starts` (on the
#: corpus, 1,024 characters take 25 us on arrays and 27 us by the regex; 4,096: 37 and 105)
ARRAY_MIN = 1 << 10
#: a segment at least this long (and :func:`mostly_ascii`) is counted on arrays by
#: :func:`count_pretokens` (on the corpus both ways take about 220 us at 4,096 characters;
#: at 32,768 arrays 1.1 ms, the regex and a Counter 1.6 ms)
COUNT_ARRAY_MIN = 1 << 12


def gpt2_starts(text: str) -> tuple[bytes, np.ndarray]:
    """``text``'s UTF-8 bytes and the byte offset where each GPT-2 pre-token starts: the
    pieces of :func:`pretokenize`, as spans. Its long ASCII stretches are split on arrays
    (:func:`gpt2_ascii_starts`), the others by the regex.

    >>> data, starts = gpt2_starts("Nay,\\n  — my lord!")
    >>> [data[a:b].decode() for a, b in zip(starts.tolist(), starts[1:].tolist() + [len(data)])]
    ['Nay', ',', '\\n ', ' —', ' my', ' lord', '!']
    """
    data = text.encode("utf-8")
    if len(data) == len(text):
        return data, gpt2_ascii_starts(data)
    parts: list[np.ndarray] = []
    sizes: list[int] = []  # in bytes, of the pieces split by the regex since the last array
    at = 0  # where they start in data
    for start, end, ascii in _stretches(text):
        if ascii and end - start >= ARRAY_MIN:
            lens = np.array(sizes, np.int64)
            parts.append(at + np.cumsum(lens) - lens)
            at += int(lens.sum())
            parts.append(gpt2_ascii_starts(data[at : at + end - start]) + at)
            at += end - start
            sizes = []
        elif ascii:  # a character is a byte
            sizes += map(len, _GPT2_ASCII_RE.findall(text, start, end))
        else:
            sizes += map(len, map(str.encode, _GPT2_RE.findall(text, start, end)))
    lens = np.array(sizes, np.int64)
    parts.append(at + np.cumsum(lens) - lens)
    return data, np.concatenate(parts)


def _windows(flat: bytes) -> np.ndarray:
    """``w[j]``: the 7 bytes ``flat[j : j + 7]`` (zero-padded) as one big-endian int64."""
    eight = np.ndarray((len(flat),), ">u8", flat + bytes(7), 0, (1,))  # flat[j : j + 8]
    return (eight >> np.uint64(8)).view(np.int64)


_SHIFT = np.array([56, 48, 40, 32, 24, 16, 8, 0])  # by length: a 7-byte window's extra bits
_TAG = np.arange(16) << 56  # by length (15: 15 or more)


def _byte_codes(win: np.ndarray, lo: np.ndarray, size: np.ndarray) -> np.ndarray:
    """An int64 code for each string ``flat[lo : lo + size]`` (``size >= 1``): its first 7
    bytes big-endian, and its length (15 for 15 bytes or more) in bits 56-59. Distinct for
    distinct strings of up to 7 bytes; a longer one shares its code with the strings of
    its length (or of 15 bytes or more) that begin with the same 7 bytes."""
    return (win[lo] >> _SHIFT.take(size, mode="clip")) | _TAG.take(size, mode="clip")


def distinct_pretokens(data: bytes, starts: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """The pre-tokens of ``data`` that start at ``starts`` (P), told apart: which distinct
    string each one is (P, in ``0..D-1``) and those D strings. A string of up to 7 bytes is
    named by its code (:func:`_byte_codes`), a longer one by a number above every code, one
    per string.

    >>> distinct_pretokens(b"to be or not to be", np.array([0, 2, 5, 8, 12, 15]))[1]
    [b'to', b' be', b' or', b' to', b' not']
    """
    ends = np.append(starts[1:], len(data))
    lens = ends - starts
    codes = _byte_codes(_windows(data), starts, lens)
    long = np.flatnonzero(lens > 7)
    if len(long):
        strings = map(data.__getitem__, map(slice, starts[long].tolist(), ends[long].tolist()))
        codes[long] = np.fromiter(map({}.setdefault, strings, count(1 << 62)), np.int64,
                                  len(long))
    uniq, which = np.unique(codes, return_inverse=True)
    one = np.empty(len(uniq), np.int64)
    one[which] = np.arange(len(which))  # any occurrence will do: they are the same string
    return which, list(map(data.__getitem__, map(slice, starts[one].tolist(), ends[one].tolist())))


def mostly_ascii(text: str) -> bool:
    """At most one non-ASCII byte in 1,024: text that is mostly long ASCII stretches, where
    arrays pay (:func:`gpt2_starts`). Text with more, split by arrays and the regex by turns,
    was slower (one accented word a line: 40% slower on 1 MB; Russian: 2.6x)."""
    return len(text.encode("utf-8")) - len(text) <= len(text) >> 10


def special_token_regex(special_tokens: Iterable[str]) -> regex.Pattern | None:
    """Alternation of the special tokens, longest first (so the longest match wins).

    >>> special_token_regex(["<a>", "<a><b>"]).findall("x<a><b>y<a>")
    ['<a><b>', '<a>']
    """
    toks = sorted(set(special_tokens), key=lambda s: (-len(s), s))
    if not toks:
        return None
    return regex.compile("|".join(regex.escape(t) for t in toks))


def split_special(text: str, special_re: regex.Pattern | None) -> list[str]:
    """Text segments between special tokens (the special tokens themselves are dropped).

    >>> split_special("a<|e|>b", special_token_regex(["<|e|>"]))
    ['a', 'b']
    """
    if special_re is None:
        return [text]
    return special_re.split(text)


_PATH_LIKE = re.compile(r"(?:.*[/\\])?[^/\\\s]*\.[A-Za-z][A-Za-z0-9]{0,7}")  # dir/name.ext


def read_input(input: str | os.PathLike) -> str:
    """The training text: ``input`` itself if it is a ``str``; the file's UTF-8 text if it is a
    path object (``pathlib.Path`` or any ``os.PathLike``).

    A path that does not exist is a :class:`FileNotFoundError`. A one-word ``str`` that names an
    existing file or looks like a file name (``some/path.txt``) is refused with a
    :class:`ValueError` rather than trained on as text: wrap it in ``pathlib.Path``.

    >>> read_input("low lower")
    'low lower'
    >>> read_input("some/path.txt")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: got the string 'some/path.txt', which looks like a file name ...
    """
    if isinstance(input, os.PathLike):
        path = os.fspath(input)
        if not os.path.isfile(path):
            what = "is a directory" if os.path.isdir(path) else "does not exist"
            raise FileNotFoundError(f"training text file {path!r} {what}")
        with open(path, encoding="utf-8") as f:
            return f.read()
    if not isinstance(input, str):
        raise TypeError(
            f"expected the text (str) or a path (pathlib.Path), got {type(input).__name__}")
    if input and len(input) < 4096 and not any(c.isspace() for c in input):
        exists = os.path.exists(input)
        if exists or _PATH_LIKE.fullmatch(input):
            state = "names an existing file" if exists else "and no such file exists"
            raise ValueError(
                f"got the string {input!r}, which looks like a file name ({state}); pass "
                f"pathlib.Path({input!r}) to train on a file's text")
    return input


def count_pretokens(text: str, special_tokens: Iterable[str] = ()) -> Counter[bytes]:
    """Counts of the UTF-8 bytes of every pre-token (special tokens removed first).

    >>> count_pretokens("to be or not to be")[b" be"]
    2
    """
    counts: Counter[bytes] = Counter()
    other: Counter[str] = Counter()  # of the segments split by the regex
    for segment in split_special(text, special_token_regex(special_tokens)):
        if len(segment) >= COUNT_ARRAY_MIN and mostly_ascii(segment):
            which, pieces = distinct_pretokens(*gpt2_starts(segment))
            counts.update(dict(zip(pieces, np.bincount(which).tolist())))
        else:
            other.update(pretokenize(segment))
    counts.update({s.encode("utf-8"): c for s, c in other.items()})
    return counts


def initial_vocab(special_tokens: Iterable[str] = ()) -> dict[int, bytes]:
    """The 256 single bytes, then the special tokens (see the module docstring)."""
    vocab = {i: bytes([i]) for i in range(256)}
    for tok in special_tokens:
        vocab[len(vocab)] = tok.encode("utf-8")
    return vocab


def check_vocab_size(vocab_size: int, special_tokens) -> None:
    if vocab_size < 256 + len(special_tokens):
        raise ValueError(
            f"vocab_size={vocab_size} is smaller than 256 bytes + {len(special_tokens)} specials"
        )
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"duplicate special tokens: {special_tokens}")


def merge(word: tuple, pair: tuple, new) -> tuple:
    """Replace each occurrence of ``pair`` in ``word`` by ``new``, scanning left to right (an
    occurrence never overlaps the one before). The one BPE merge of the package: the byte-level
    trainers' (ids, ``new`` the merged token's id) and :class:`ClassicBPE`'s (symbols, ``new``
    the joined string); the checks of chapter 07 take their expected values from it.

    >>> merge(("a", "a", "a", "</w>"), ("a", "a"), "aa")
    ('aa', 'a', '</w>')
    """
    (a, b), out = pair, []
    i, n = 0, len(word)
    while i < n:
        if i < n - 1 and word[i] == a and word[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def pair_key(count: int, a: bytes, b: bytes) -> tuple[int, bytes, bytes]:
    """Sort key of a candidate merge: the greatest key is merged next (tie rule above)."""
    return (count, a, b)
