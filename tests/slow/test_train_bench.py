"""bench/train.py --run end to end on the CPU (issue 17, item 5): it prints what a GPU run
reports -- tokens/s, MFU (n/a without a known peak), time to the validation target -- so the
first lent GPU only has to run it."""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_train_run_reports_speed_and_time_to_target(tmp_path):
    cmd = [sys.executable, "bench/train.py", "--run", "--device", "cpu", "--threads", "1",
           "--max_iters", "8", "--eval_interval", "4", "--out_dir", str(tmp_path / "run"),
           "--data_dir", str(tmp_path / "data")]
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def bench(*extra):
        res = subprocess.run(cmd + list(extra), cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        return res.stdout

    out = bench()
    assert "gpu_char (shrunk for CPU)" in out and "precision float32" in out
    steps = re.findall(r"step +(\d+): val (\d+\.\d+), ([\d,]+) tokens/s", out)
    assert [int(s) for s, _, _ in steps] == [4, 8]
    assert all(float(v) < 4.5 for _, v, _ in steps)  # a real loss (chance is log 65 = 4.2)
    assert re.search(r"^tokens/s [\d,]+, MFU n/a", out, re.M)
    best = min(float(v) for _, v, _ in steps)
    assert "val <= 1.50 not reached in 8 steps" in out and f"best val {best:.4f}" in out
    # a target the tiny run does reach: the time and step are reported (reached at the first
    # evaluation, step 4: a 4-step run shows it)
    out = bench("--target", "9.0", "--max_iters", "4")
    assert re.search(r"^val <= 9\.00 at step 4 after \d+\.\d s$", out, re.M)


def test_bench_train_peer_hf_trains_both_on_the_same_batches(tmp_path):
    """``--peer hf`` (issue 34 item 1), a few steps on the CPU: both models have the same
    number of parameters, both are evaluated at the same steps, and the ratios are printed."""
    cmd = [sys.executable, "bench/train.py", "--peer", "hf", "--device", "cpu", "--threads", "1",
           "--max_iters", "6", "--eval_interval", "3", "--target", "9.0",
           "--data_dir", str(tmp_path / "data")]
    res = subprocess.run(cmd, cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS="1"),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    sizes = re.findall(r"^  (course|hf) \(eager\): ([\d.]+)M parameters$", out, re.M)
    assert [w for w, _ in sizes] == ["course", "hf"] and sizes[0][1] == sizes[1][1], out
    steps = re.findall(r"step +(\d+): val (\d+\.\d+)", out)
    assert [int(s) for s, _ in steps] == [3, 6, 3, 6], out
    assert all(float(v) < 4.5 for _, v in steps)  # real losses (chance is log 71 = 4.3)
    assert re.search(r"^  eager: tokens/s course [\d,]+, Hugging Face [\d,]+: ratio "
                     r"\d+\.\d\dx$", out, re.M), out
    assert re.search(r"^  eager: val <= 9\.00 after \d+\.\d s \(step 3\) vs \d+\.\d s "
                     r"\(step 3\): ratio \d+\.\d\dx$", out, re.M), out
