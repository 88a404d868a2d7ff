"""bench/bench_bpe.py end to end on a 10% slice (issue 34, item 2): both trainers, Hugging Face
``tokenizers`` one-threaded and default, our encoding cold and warm against tiktoken (the bench
asserts the ids are identical), and the table README quotes. No time is asserted."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_bpe_quick_prints_the_ratios_against_its_peers():
    cmd = [sys.executable, "bench/bench_bpe.py", "--quick", "--vocab", "300", "--repeat", "1"]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| vocab |"))
    row = next(line for line in lines if line.startswith("| 300 |"))
    table = dict(zip(header.strip("| ").split(" | "), row.strip("| ").split(" | ")))
    assert len(table) == header.count("|") - 1 == row.count("|") - 1
    ratio = r"\d+\.\d+x \(\d+\.\d+x\)"  # wall (CPU)
    for column in ("naive/ours", "ours/HF-1", "ours/HF-default", "cold/tiktoken", "warm/tiktoken"):
        assert re.fullmatch(ratio, table[column]), (column, table)
    for column in ("encode MB/s cold", "encode MB/s warm", "tiktoken MB/s"):
        assert re.fullmatch(r"\d+\.\d \(\d+\.\d\)", table[column]), (column, table)
    for column in ("bytes/token ours", "bytes/token HF"):
        assert 1.0 < float(table[column]) < 4.0, (column, table)
