"""Token streams, batches and bits per byte (transformer_ref.train.data)."""

import math

import numpy as np
import pytest
import torch

from transformer_ref.train.data import (
    CharTokenizer,
    batch_offsets,
    bits_per_byte,
    get_batch,
    prepare_data,
    write_tokens,
)

from helpers.train import one_thread  # noqa: F401 - a fixture (autouse: one torch thread)


@pytest.fixture
def ramp(tmp_path):
    """A memmap holding 0, 1, ..., 299: a window's first id is its offset."""
    return write_tokens(tmp_path / "ramp.bin", np.arange(300), vocab_size=300)


def test_get_batch_windows_are_slices_and_targets_are_shifted(ramp):
    B, T = 64, 16
    x, y = get_batch(ramp, B, T, "cpu", torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (B, T) and x.dtype == y.dtype == torch.int64
    for b in range(B):
        i = int(x[b, 0])
        assert torch.equal(x[b], torch.as_tensor(np.asarray(ramp[i : i + T], dtype=np.int64)))
        assert torch.equal(y[b], torch.as_tensor(np.asarray(ramp[i + 1 : i + T + 1], np.int64)))
    assert int(x[:, 0].min()) >= 0 and int(y[:, -1].max()) <= 299


def test_every_valid_offset_is_reachable_and_no_other(tmp_path):
    T = 5
    data = write_tokens(tmp_path / "d.bin", np.arange(T + 4), vocab_size=64)  # starts 0..3
    x, _ = get_batch(data, 400, T, "cpu", torch.Generator().manual_seed(1))
    assert set(x[:, 0].tolist()) == {0, 1, 2, 3}
    x, y = get_batch(data[: T + 1], 3, T, "cpu")  # T + 1 tokens: exactly one window
    assert x[:, 0].tolist() == [0, 0, 0] and y[:, -1].tolist() == [T, T, T]
    with pytest.raises(ValueError):
        get_batch(data[:T], 1, T, "cpu")  # room for x but not for the shifted target


def test_same_generator_seed_same_batch_and_seed_matters(ramp):
    a = get_batch(ramp, 8, 10, "cpu", torch.Generator().manual_seed(3))[0]
    b = get_batch(ramp, 8, 10, "cpu", torch.Generator().manual_seed(3))[0]
    c = get_batch(ramp, 8, 10, "cpu", torch.Generator().manual_seed(4))[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_ranks_split_one_global_batch(ramp):
    """W ranks with batch B see exactly the rows of one process with batch W * B."""
    full = get_batch(ramp, 6, 10, "cpu", torch.Generator().manual_seed(5))[0]
    parts = [get_batch(ramp, 3, 10, "cpu", torch.Generator().manual_seed(5), rank=r,
                       world_size=2)[0] for r in range(2)]
    assert torch.equal(torch.cat(parts), full)
    offs = batch_offsets(300, 3, 10, torch.Generator().manual_seed(5), rank=1, world_size=2)
    assert torch.equal(offs, full[3:, 0])


def test_bits_per_byte():
    # a uniform model over 256 byte values, one token per byte: ln(256) nats = 8 bits per byte
    assert bits_per_byte(math.log(256), 1000, 1000) == pytest.approx(8.0)
    # the same loss per token when each token covers 4 bytes: 2 bits per byte
    assert bits_per_byte(math.log(256), 1000, 4000) == pytest.approx(2.0)
    # char-level on non-ASCII text: "é" is 2 UTF-8 bytes, so bits per byte < bits per char
    text = "café"
    assert bits_per_byte(1.0, len(text), len(text.encode())) == pytest.approx(
        1.0 / math.log(2) * 4 / 5
    )


def test_char_tokenizer_roundtrip_and_save(tmp_path):
    text = "To be, or not to be: that is the question.\n"
    tok = CharTokenizer.train(text)
    assert tok.vocab_size == len(set(text))
    assert tok.decode(tok.encode(text)) == text
    tok.save(tmp_path / "t.json")
    assert CharTokenizer.load(tmp_path / "t.json").encode(text) == tok.encode(text)


def test_prepare_data_writes_memmaps_and_reuses_them(tmp_path):
    train, val = "First Citizen:\nBefore we proceed.\n" * 20, "Second Citizen:\nSpeak, speak!\n" * 5
    d = prepare_data("char", tmp_path, train_text=train, val_text=val)
    assert isinstance(d.train, np.memmap) and d.train.dtype == np.uint16
    assert d.tokenizer.decode(d.train.tolist()) == train
    assert d.tokenizer.decode(d.val.tolist()) == val
    assert d.meta["train_tokens"] == len(train) and d.meta["val_bytes"] == len(val.encode())
    assert d.bytes_per_token("val") == 1.0
    stamp = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.bin")}
    d2 = prepare_data("char", tmp_path, train_text=train, val_text=val)  # cache hit
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.bin")} == stamp
    assert np.array_equal(d2.val, d.val)
    d3 = prepare_data("char", tmp_path, train_text=train + "x", val_text=val)  # new text, new dir
    assert d3.meta["train_tokens"] == len(train) + 1 and len(list(tmp_path.iterdir())) == 2


def test_prepare_data_bpe(tmp_path):
    pytest.importorskip("transformer_ref.bpe")
    train = "the cat sat on the mat. the cat ate the rat. " * 30
    val = "the rat sat on the cat. " * 5
    d = prepare_data("bpe", tmp_path, bpe_vocab_size=280, train_text=train, val_text=val)
    assert d.tokenizer.decode(d.val.tolist()) == val
    assert d.meta["train_tokens"] < len(train.encode())  # merges compress the text
    assert d.bytes_per_token("train") > 1.0
    assert int(d.train.max()) < d.vocab_size
