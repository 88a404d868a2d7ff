"""Token streams for language-model training: character or BPE ids stored as numpy memmaps.

A corpus becomes two flat arrays of token ids, ``train.bin`` and ``val.bin`` (split *by play*
by :func:`transformer_ref.corpus.load_shakespeare`, so validation text is unseen plays, not
held-out lines of seen ones). They are written once and then opened as ``np.memmap``: only
the windows a batch touches are read, so a corpus need not fit in memory.

A training example is a random window of ``block_size + 1`` consecutive ids: the model reads
``x = data[i : i + T]`` and is scored on predicting ``y = data[i + 1 : i + T + 1]``.

Character and BPE runs have different tokens, so their losses per token are not comparable.
Bits per byte are: with mean cross-entropy ``L`` nats per token over ``N`` tokens that encode
``M`` bytes of UTF-8 text,

    bpb = L / ln 2 * N / M

(e.g. ``L = 1.10`` nats per character on ASCII text is ``1.10 / 0.693 = 1.59`` bits per byte).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "CharTokenizer",
    "TokenData",
    "write_tokens",
    "read_tokens",
    "prepare_data",
    "get_batch",
    "batch_offsets",
    "bits_per_byte",
]


class CharTokenizer:
    """One id per distinct character, ids in sorted character order.

    >>> tok = CharTokenizer.train("hello")
    >>> tok.vocab_size, tok.encode("hole"), tok.decode([1, 0, 2, 2, 3])
    (4, [1, 3, 2, 0], 'hello')
    """

    def __init__(self, chars: list[str]):
        self.chars = list(chars)
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        return [self.stoi[c] for c in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps({"kind": "char", "chars": self.chars}), encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike) -> CharTokenizer:
        return cls(json.loads(Path(path).read_text(encoding="utf-8"))["chars"])


def write_tokens(path: str | os.PathLike, ids, vocab_size: int) -> np.memmap:
    """Write ids as a flat memmap (uint16 when the vocabulary fits, else uint32)."""
    dtype = np.uint16 if vocab_size <= 2**16 else np.uint32
    arr = np.asarray(ids, dtype=np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        raise ValueError("token id outside [0, vocab_size)")
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=(max(arr.size, 1),))
    mm[: arr.size] = arr
    mm.flush()
    return read_tokens(path, dtype, arr.size)


def read_tokens(path: str | os.PathLike, dtype, length: int | None = None) -> np.memmap:
    """Open a token file read-only as a memmap of ``length`` ids."""
    mm = np.memmap(path, dtype=dtype, mode="r")
    return mm if length is None else mm[:length]


@dataclass
class TokenData:
    """Train/validation token memmaps plus what is needed to decode them and report bpb."""

    train: np.ndarray
    val: np.ndarray
    tokenizer: Any
    meta: dict

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    def bytes_per_token(self, split: str) -> float:
        return self.meta[f"{split}_bytes"] / self.meta[f"{split}_tokens"]


def _fingerprint(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def _load_tokenizer(kind: str, path: Path):
    if kind == "char":
        return CharTokenizer.load(path)
    from transformer_ref.bpe import BPETokenizer

    return BPETokenizer.load(str(path))


def prepare_data(
    kind: str = "char",
    data_dir: str | os.PathLike = "out/data",
    bpe_vocab_size: int = 512,
    train_text: str | None = None,
    val_text: str | None = None,
) -> TokenData:
    """Tokenize the corpus once into ``data_dir/<kind>-<hash>/{train,val}.bin`` and open them.

    Without texts, the Shakespeare corpus is used (train and validation are different plays).
    The char vocabulary is the alphabet of both splits (so no validation character is
    unknown); the BPE merges are learned on the training split only. A second call with the
    same inputs reuses the files.
    """
    if kind not in ("char", "bpe"):
        raise ValueError(f"kind must be 'char' or 'bpe', got {kind!r}")
    if train_text is None or val_text is None:
        from transformer_ref.corpus import load_shakespeare

        train_text = load_shakespeare(split="train") if train_text is None else train_text
        val_text = load_shakespeare(split="val") if val_text is None else val_text
    tag = _fingerprint(kind, str(bpe_vocab_size if kind == "bpe" else ""), train_text, val_text)
    root = Path(data_dir) / f"{kind}-{tag}"
    meta_path = root / "meta.json"
    tok_path = root / "tokenizer.json"
    if not meta_path.exists():
        root.mkdir(parents=True, exist_ok=True)
        if kind == "char":
            tok = CharTokenizer.train(train_text + val_text)
        else:
            from transformer_ref.bpe import BPETokenizer

            tok = BPETokenizer.train(train_text, bpe_vocab_size, special_tokens=[])
        tok.save(str(tok_path))
        meta: dict[str, Any] = {"kind": kind, "vocab_size": int(tok.vocab_size)}
        for split, text in (("train", train_text), ("val", val_text)):
            ids = tok.encode(text)
            write_tokens(root / f"{split}.bin", ids, tok.vocab_size)
            meta[f"{split}_tokens"] = len(ids)
            meta[f"{split}_bytes"] = len(text.encode("utf-8"))
        meta["dtype"] = "uint16" if tok.vocab_size <= 2**16 else "uint32"
        tmp = meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
        tmp.replace(meta_path)  # atomic: a present meta.json means the .bin files are complete
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    dtype = np.dtype(meta["dtype"])
    return TokenData(
        train=read_tokens(root / "train.bin", dtype, meta["train_tokens"]),
        val=read_tokens(root / "val.bin", dtype, meta["val_tokens"]),
        tokenizer=_load_tokenizer(kind, tok_path),
        meta=meta,
    )


def batch_offsets(
    n_tokens: int,
    batch_size: int,
    block_size: int,
    generator: torch.Generator | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> torch.Tensor:
    """Window starts for one rank: draw ``world_size * batch_size`` starts, keep this rank's slice.

    Every rank draws the same *global* batch from an identically seeded generator, so a run on
    W processes with batch B sees exactly the windows of one process with batch W*B.

    >>> batch_offsets(10, 3, 8, torch.Generator().manual_seed(0)).tolist()  # starts in [0, 2)
    [0, 1, 1]
    """
    high = n_tokens - block_size  # last valid start is n - T - 1 (y needs one more token)
    if high < 1:
        raise ValueError(f"need more than block_size + 1 = {block_size + 1} tokens, got {n_tokens}")
    ix = torch.randint(high, (world_size * batch_size,), generator=generator)
    return ix[rank * batch_size : (rank + 1) * batch_size]


def get_batch(
    data: np.ndarray,
    batch_size: int,
    block_size: int,
    device: str | torch.device = "cpu",
    generator: torch.Generator | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows ``x = data[i:i+T]``, ``y = data[i+1:i+T+1]``; both ``(B, T)`` int64.

    Offsets are drawn on the CPU from ``generator`` (so the batch sequence does not depend on
    the device), then the batch is copied to ``device`` (pinned + non-blocking on CUDA).

    >>> x, y = get_batch(np.arange(100), 2, 4, generator=torch.Generator().manual_seed(0))
    >>> x.shape, bool((y == x + 1).all())
    (torch.Size([2, 4]), True)
    """
    ix = batch_offsets(len(data), batch_size, block_size, generator, rank, world_size)
    rows = [np.asarray(data[i : i + block_size + 1], dtype=np.int64) for i in ix.tolist()]
    xy = torch.from_numpy(np.stack(rows))  # (B, T + 1)
    x, y = xy[:, :-1], xy[:, 1:]
    device = torch.device(device)
    if device.type == "cuda":
        return (x.pin_memory().to(device, non_blocking=True),
                y.pin_memory().to(device, non_blocking=True))
    return x.contiguous().to(device), y.contiguous().to(device)


def bits_per_byte(loss_nats: float, n_tokens: int, n_bytes: int) -> float:
    """Mean loss in nats per token -> bits per byte of UTF-8 text: ``L / ln 2 * N / M``.

    >>> round(bits_per_byte(1.10, 1000, 1000), 3)  # char-level, ASCII: 1 token = 1 byte
    1.587
    >>> bits_per_byte(math.log(2), 1, 2)           # 1 bit per token, 2 bytes per token
    0.5
    """
    return loss_nats / math.log(2) * n_tokens / n_bytes
