"""BPE training and encoding speed on the Shakespeare corpus, ours vs Hugging Face / tiktoken.

    .venv/bin/python bench/bench_bpe.py                 # vocab 1k, 5k, 10k (a few minutes)
    .venv/bin/python bench/bench_bpe.py --quick         # a 10% slice, for a smoke run

Trains on ``load_shakespeare("train")`` with

* ``train_bpe`` (ours, incremental; the time includes pre-tokenization),
* ``train_bpe_naive`` (ours, recount every step; only at the smallest vocab: it is slow),
* Hugging Face ``tokenizers`` (``BpeTrainer`` + ``ByteLevel`` pre-tokenizer, the same GPT-2
  regex, fed the corpus one speech at a time), each run in a subprocess, once with
  ``RAYON_NUM_THREADS=1`` (one thread) and once with the default thread pool,

then encodes ``load_shakespeare("val")`` with our ``BPETokenizer`` (a fresh one, so the
pre-token cache starts cold, and again warm) and with a ``tiktoken.Encoding`` built from our
ranks (checking the ids are identical), ``--repeat`` times each (default 5, the fastest wall
time shown; building the tokenizer is not timed), and prints one table: times, ratios, encode
MB/s and the compression on the validation text (UTF-8 bytes per token), with the ratios against the
peers measured in the same run (``ours/HF-1``: our training time over HF's, one thread;
``cold/tiktoken``: our cold-cache encoding speed over tiktoken's). The machine's load average
is printed before and after: on a shared machine compare the ratios, not the seconds.
Numbers only, no assertion.
Targets (issue 34, 2-core machine): training at 10k <= 1.0x HF one-thread; cold-cache encoding
>= 8 MB/s with exactly tiktoken's ids (tiktoken: about 14 MB/s, so cold/tiktoken >= 0.56).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HF_WORKER = r"""
import json, sys, time
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformer_ref.corpus import load_shakespeare
vocab_size, frac = int(sys.argv[1]), float(sys.argv[2])
train, val = load_shakespeare("train"), load_shakespeare("val")
train = train[: int(len(train) * frac)]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
speeches = train.split("\n\n")
t0, c0 = time.perf_counter(), time.process_time()
tok.train_from_iterator(speeches, trainer)
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
n_ids = len(tok.encode(val).ids)
print(json.dumps({"seconds": seconds, "cpu": cpu, "bytes_per_token": len(val.encode()) / n_ids,
                  "vocab": tok.get_vocab_size()}))
"""


def hf_train(vocab_size: int, frac: float, threads: int | None) -> dict:
    env = dict(os.environ)
    env.pop("RAYON_NUM_THREADS", None)
    if threads is not None:
        env["RAYON_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, "-c", HF_WORKER, str(vocab_size), str(frac)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def load() -> str:
    """The 1, 5 and 15-minute load averages (``uptime``'s), or "?" where there are none."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "?"


class Timed:
    """Wall and CPU seconds (``process_time``: all threads of this process) of one call."""

    def __init__(self, fn, *args):
        t0, c0 = time.perf_counter(), time.process_time()
        self.result = fn(*args)
        self.wall, self.cpu = time.perf_counter() - t0, time.process_time() - c0

    def __str__(self) -> str:
        return f"{self.wall:.2f} ({self.cpu:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--vocab", type=int, nargs="+", default=[1000, 5000, 10000])
    ap.add_argument("--quick", action="store_true", help="train on a 10%% slice of the corpus")
    ap.add_argument("--naive-all", action="store_true", help="run the naive trainer at every size")
    ap.add_argument("--repeat", type=int, default=5,
                    help="encoding runs (cold: a fresh tokenizer each); the fastest is shown")
    args = ap.parse_args()

    import tiktoken

    from transformer_ref.bpe import GPT2_PATTERN, BPETokenizer, train_bpe, train_bpe_naive
    from transformer_ref.corpus import load_shakespeare

    frac = 0.1 if args.quick else 1.0
    train = load_shakespeare("train")
    train = train[: int(len(train) * frac)]
    val = load_shakespeare("val")
    val_bytes = len(val.encode())
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load {load()}; "
          f"train {len(train.encode()) / 1e6:.2f} MB, val {val_bytes / 1e6:.2f} MB "
          "(bytes/token is measured on val)\n")

    rows = []
    for i, v in enumerate(sorted(args.vocab)):
        ours = Timed(train_bpe, train, v)
        vocab, merges = ours.result
        naive = None
        if i == 0 or args.naive_all:
            naive = Timed(train_bpe_naive, train, v)
            assert naive.result == (vocab, merges), "naive and incremental trainers disagree"
        hf1 = hf_train(v, frac, threads=1)
        hfn = hf_train(v, frac, threads=None)

        colds, warms, tiks = [], [], []
        for r in range(args.repeat):  # the fastest of each (a fresh tokenizer: a cold cache)
            tok = BPETokenizer(vocab, merges)
            colds.append(Timed(tok.encode, val))
            warms.append(Timed(tok.encode, val))
            enc = tiktoken.Encoding(name=f"ours{v}-{r}", pat_str=GPT2_PATTERN,
                                    mergeable_ranks=tok.ranks, special_tokens={})
            enc.encode_ordinary(val[:1000])
            tiks.append(Timed(enc.encode_ordinary, val))
        cold, warm, tik = (min(x, key=lambda t: t.wall) for x in (colds, warms, tiks))
        assert all(t.result == tik.result for t in colds + warms + tiks), (
            "our encoding differs from tiktoken's")
        rows.append((v, ours, naive, hf1, hfn, cold, warm, tik,
                     val_bytes / len(cold.result), hf1["bytes_per_token"]))
        print(f"  done vocab {v}", file=sys.stderr)

    print(f"load average at the end: {load()}\n")
    mb = lambda t: f"{val_bytes / t.wall / 1e6:.1f} ({val_bytes / t.cpu / 1e6:.1f})"
    ratio = lambda a, b: f"{a.wall / b['seconds']:.2f}x ({a.cpu / b['cpu']:.2f}x)"
    speed = lambda a, b: f"{b.wall / a.wall:.2f}x ({b.cpu / a.cpu:.2f}x)"  # a's speed over b's
    print("Cells are wall seconds (CPU seconds), or ratios / MB/s from wall (from CPU) time.\n")
    head = ["vocab", "ours train s", "naive s", "naive/ours", "HF 1-thread s", "ours/HF-1",
            "HF default s", "ours/HF-default", "encode MB/s cold", "encode MB/s warm",
            "tiktoken MB/s", "cold/tiktoken", "warm/tiktoken", "bytes/token ours",
            "bytes/token HF"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for v, ours, naive, hf1, hfn, cold, warm, tik, bpt, hf_bpt in rows:
        cells = [
            str(v), str(ours),
            str(naive) if naive else "-",
            f"{naive.wall / ours.wall:.1f}x ({naive.cpu / ours.cpu:.1f}x)" if naive else "-",
            f"{hf1['seconds']:.2f} ({hf1['cpu']:.2f})", ratio(ours, hf1),
            f"{hfn['seconds']:.2f} ({hfn['cpu']:.2f})", ratio(ours, hfn),
            mb(cold), mb(warm), mb(tik), speed(cold, tik), speed(warm, tik),
            f"{bpt:.3f}", f"{hf_bpt:.3f}",
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
