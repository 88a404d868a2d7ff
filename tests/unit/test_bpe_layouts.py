"""Tokenizer files in other layouts (issue 17, item 1): GPT-2's vocab.json + merges.txt with
GPT-2's byte order, tiktoken rank files, merge priority from the merges list, special tokens at
any id (0 included). Encoding is compared with tiktoken built on the same ranks.

The GPT-2 byte order is computed here from GPT-2's published rule, independently of the
package: the 188 printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ' come first (ids 0..187, shown as
themselves), then the other 68 bytes in increasing order (ids 188..255, shown as chr(256 + n)).
"""

import base64
import json
import random

import pytest
import tiktoken
import tiktoken.load

from transformer_ref.bpe import GPT2_PATTERN, BPETokenizer
from transformer_ref.corpus import load_shakespeare

EOT = "<|endoftext|>"
PRINTABLE = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
             *range(ord("®"), ord("ÿ") + 1)]
OTHERS = [b for b in range(256) if b not in PRINTABLE]
GPT2_BYTE_ORDER = PRINTABLE + OTHERS  # id k is byte GPT2_BYTE_ORDER[k]
SHOW = {**{b: chr(b) for b in PRINTABLE}, **{b: chr(256 + n) for n, b in enumerate(OTHERS)}}
TEXTS = [
    None,  # the validation split (filled in below)
    "Ça va? Größe, straße. Ελληνικά и русский. 日本語、中文。 😀👍🏽 naïve — “q” … ½\n",
    "a  b   c\t\td \n\n\n  e \r\n f\x0b\x0c g\u3000h   \n\t \n   \x00\x01\x7f",
    f"hi{EOT}there {EOT}{EOT} end{EOT}\n",
]


def show(b: bytes) -> str:
    return "".join(SHOW[x] for x in b)


def texts():
    return [t if t is not None else load_shakespeare("val")[:20_000] for t in TEXTS]


@pytest.fixture(scope="module")
def trained():
    """BPE trained on the course corpus: natural layout (byte b = id b, EOT = 256, merges after)."""
    text = load_shakespeare("train")[:120_000].replace("\n\n", f"\n{EOT}")
    return BPETokenizer.train(text, 1000, [EOT])


def gpt2_layout(tok: BPETokenizer, eot_id: str = "last") -> tuple[dict[int, int], dict]:
    """natural id -> GPT-2-layout id, and the GPT-2 vocab.json table {shown token: id}."""
    merged = [i for i in sorted(tok.vocab) if i >= 256 and i not in tok.special_ids.values()]
    order = [tok.special_ids[EOT]] if eot_id == "first" else []
    order += GPT2_BYTE_ORDER + merged
    if eot_id == "last":
        order.append(tok.special_ids[EOT])
    new_id = {old: new for new, old in enumerate(order)}
    table = {show(tok.vocab[old]): new for old, new in new_id.items()}
    return new_id, table


def write_gpt2(tmp_path, table, merges):
    vocab_path, merges_path = tmp_path / "vocab.json", tmp_path / "merges.txt"
    vocab_path.write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
    merges_path.write_text("#version: 0.2\n" + "".join(f"{show(a)} {show(b)}\n" for a, b in merges),
                           encoding="utf-8")
    return vocab_path, merges_path


def reference(ranks: dict[bytes, int], specials: dict[str, int]) -> tiktoken.Encoding:
    return tiktoken.Encoding(name="ref", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens=specials)


def test_gpt2_files_in_gpt2_byte_order(trained, tmp_path):
    new_id, table = gpt2_layout(trained)
    assert table["!"] == 0 and table["Ġ"] == 220 and table["Ċ"] == 198  # GPT-2's own ids
    tok = BPETokenizer.from_gpt2_files(*write_gpt2(tmp_path, table, trained.merges))
    assert tok.vocab[0] == b"!" and tok.vocab[220] == b" " and tok.vocab[255] == b"\xad"
    assert tok.special_ids == {EOT: len(trained.vocab) - 1}
    ranks = {trained.vocab[old]: new for old, new in new_id.items() if old != 256}
    enc = reference(ranks, {EOT: new_id[256]})
    for text in texts():
        ids = tok.encode(text)
        assert ids == enc.encode(text, allowed_special="all")  # tiktoken on the same ranks
        assert ids == [new_id[i] for i in trained.encode(text)]  # the same tokens, renumbered
        assert tok.decode(ids) == text
    # our own file format and GPT-2's writer keep the layout
    tok.save(tmp_path / "tok.json")
    again = BPETokenizer.load(tmp_path / "tok.json")
    assert again.vocab == tok.vocab and again.encode(texts()[0]) == tok.encode(texts()[0])
    tok.save_gpt2_files(tmp_path / "v2.json", tmp_path / "m2.txt")
    assert json.loads((tmp_path / "v2.json").read_text(encoding="utf-8")) == table
    assert (tmp_path / "m2.txt").read_text(encoding="utf-8") == (
        tmp_path / "merges.txt").read_text(encoding="utf-8")


def test_merge_priority_comes_from_the_merges_list(trained, tmp_path):
    """Ids of merged tokens shuffled: the merges list, not the ids, decides what merges first."""
    merged = [i for i in sorted(trained.vocab) if i > 256]
    shuffled = merged[:]
    random.Random(0).shuffle(shuffled)
    new_id = {**{i: i for i in range(257)}, **dict(zip(merged, shuffled))}
    vocab = {new_id[i]: b for i, b in trained.vocab.items()}
    tok = BPETokenizer(vocab, trained.merges, {EOT: 256})
    by_merge_order = reference(trained.ranks, trained.special_ids)  # ranks in merge order
    for text in texts():
        ids = tok.encode(text)
        assert ids == [new_id[i] for i in by_merge_order.encode(text, allowed_special="all")]
        assert tok.decode(ids) == text
    # without the merges list the ids are the ranks, as in tiktoken (a different segmentation)
    ranked = BPETokenizer(vocab, None, {EOT: 256})
    enc = reference(ranked.ranks, ranked.special_ids)
    text = texts()[0]
    assert ranked.encode(text) == enc.encode(text, allowed_special="all")
    assert ranked.encode(text) != tok.encode(text)
    with pytest.raises(ValueError, match="not in the vocab"):
        BPETokenizer(vocab, [*trained.merges, (b"zq", b"xj")])


def test_tiktoken_rank_file(trained, tmp_path):
    new_id, table = gpt2_layout(trained)
    ranks = {trained.vocab[old]: new for old, new in new_id.items() if old != 256}
    path = tmp_path / "gpt2_layout.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(b) + b" %d\n" % r for b, r in ranks.items()))
    specials = {EOT: new_id[256]}
    tok = BPETokenizer.from_tiktoken(path, specials)
    enc = reference(tiktoken.load.load_tiktoken_bpe(str(path)), specials)
    for text in texts():
        assert tok.encode(text) == enc.encode(text, allowed_special="all")
        assert tok.encode(text) == [new_id[i] for i in trained.encode(text)]
    tok.save_tiktoken(tmp_path / "again.tiktoken")
    assert (tmp_path / "again.tiktoken").read_bytes() == path.read_bytes()


def test_special_tokens_at_any_id_including_zero(trained, tmp_path):
    # GPT-2 bytes at 1..256, <|endoftext|> at 0, and a second special token among the merges
    new_id, table = gpt2_layout(trained, eot_id="first")
    assert table[EOT] == 0 and table["!"] == 1
    pad_id = 300
    table = {s: (i + 1 if i >= pad_id else i) for s, i in table.items()}
    table["<|pad|>"] = pad_id
    tok = BPETokenizer.from_gpt2_files(*write_gpt2(tmp_path, table, trained.merges),
                                       special_tokens=[EOT, "<|pad|>"])
    assert tok.special_ids == {EOT: 0, "<|pad|>": pad_id}
    enc = reference(tok.ranks, tok.special_ids)
    text = f"{EOT}The king<|pad|> is dead.<|pad|>{EOT}\n" + texts()[0][:3000]
    ids = tok.encode(text)
    assert ids == enc.encode(text, allowed_special="all")
    assert ids[0] == 0 and ids.count(pad_id) == 2 and tok.decode(ids) == text
    # an explicit id must not clash with an ordinary token
    with pytest.raises(ValueError, match="special token '<x>': id 1 is b'!'"):
        BPETokenizer(tok.vocab, tok.merges, {"<x>": 1})
