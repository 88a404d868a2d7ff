"""The trainer: schedule, optimizer groups, accumulation, overfitting, exact resume, CLI smoke.

Every test runs torch with one thread: under ``pytest -n auto`` on 2 cores, two-thread torch
in each worker oversubscribes the CPU and runs many times slower.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_ref.train import trainer as trainer_mod
from transformer_ref.train.config import TrainConfig, preset
from transformer_ref.train.data import prepare_data
from transformer_ref.train.trainer import Trainer, configure_optimizer, get_lr

from helpers.train import one_thread, tiny_cfg  # noqa: F401 - one_thread: a fixture

REPO = Path(__file__).resolve().parents[2]




@pytest.fixture(scope="module")
def small_text():
    """About 60k characters of real Shakespeare: training and validation from different plays."""
    from transformer_ref.corpus import load_shakespeare

    return load_shakespeare("train")[:60_000], load_shakespeare("val")[:8_000]


# ----------------------------------------------------------------------------- schedule
def test_schedule_warmup_cosine_and_floor():
    cfg = TrainConfig(learning_rate=6e-4, min_lr=6e-5, warmup_iters=10, max_iters=110)
    lrs = [get_lr(t, cfg) for t in range(130)]
    assert lrs[:10] == pytest.approx([6e-4 * (t + 1) / 10 for t in range(10)])  # linear
    assert lrs[10] == pytest.approx(6e-4)  # the peak, start of the cosine
    assert lrs[60] == pytest.approx((6e-4 + 6e-5) / 2)  # half-way: the mean of peak and floor
    assert lrs[35] == pytest.approx(6e-5 + (6e-4 - 6e-5) * (1 + math.cos(math.pi / 4)) / 2)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))  # non-increasing after warm-up
    assert lrs[110:] == pytest.approx([6e-5] * 20)  # the floor after lr_decay_iters
    early = TrainConfig(learning_rate=1.0, min_lr=0.1, warmup_iters=0, max_iters=100,
                        lr_decay_iters=50)
    assert get_lr(0, early) == pytest.approx(1.0) and get_lr(50, early) == pytest.approx(0.1)
    assert get_lr(99, early) == pytest.approx(0.1)


def test_optimizer_decays_matrices_only():
    from transformer_ref.models import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=30, block_size=8, n_layer=2, n_head=2, d_model=16))
    opt = configure_optimizer(model, 0.1, 1e-3, (0.9, 0.95))
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"])
    assert all(p.dim() == 1 for p in no_decay["params"]) and no_decay["params"]
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids))  # the tied embedding / LM head matrix appears once
    assert sum(p.numel() for g in opt.param_groups for p in g["params"]) == sum(
        p.numel() for p in model.parameters())
    assert model.wte.weight in decay["params"] or any(p is model.wte.weight
                                                      for p in decay["params"])


# ----------------------------------------------------------------------------- accumulation
def _fixed_batches(monkeypatch, batches):
    """Make the trainer's get_batch hand out the rows of ``batches`` in order."""
    rows = torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches])
    state = {"i": 0}

    def fake(data, batch_size, block_size, device, generator, rank=0, world_size=1):
        i = state["i"]
        state["i"] = i + batch_size
        return rows[0][i : i + batch_size], rows[1][i : i + batch_size]

    monkeypatch.setattr(trainer_mod, "get_batch", fake)
    return state


def test_grad_accumulation_equals_the_big_batch(tmp_path, small_text, monkeypatch):
    """2 steps of (4 micro-batches of 2) == 2 steps of one batch of 8, same windows."""
    data = prepare_data("char", tmp_path / "data", train_text=small_text[0],
                        val_text=small_text[1])
    g = torch.Generator().manual_seed(0)
    windows = [torch.randint(data.vocab_size, (8, 17), generator=g) for _ in range(2)]
    batches = [(w[:, :-1], w[:, 1:]) for w in windows]
    params = {}
    for name, bs, accum in (("big", 8, 1), ("accum", 2, 4), ("small", 2, 1)):
        _fixed_batches(monkeypatch, batches)
        cfg = tiny_cfg(tmp_path, batch_size=bs, grad_accum_steps=accum, grad_clip=0.5,
                       max_iters=2 * (8 // (bs * accum)))
        t = Trainer(cfg, data=data)
        t.train()
        params[name] = torch.nn.utils.parameters_to_vector(t.raw_model.parameters())
    delta = (params["big"] - params["accum"]).abs().max().item()
    assert delta < 1e-6
    # control: 4 separate optimizer steps on the micro-batches end somewhere else entirely
    assert (params["big"] - params["small"]).abs().max().item() > 1e3 * max(delta, 1e-9)


# ----------------------------------------------------------------------------- overfit
def test_overfits_one_batch(tmp_path, small_text, monkeypatch):
    data = prepare_data("char", tmp_path / "data", train_text=small_text[0],
                        val_text=small_text[1])
    x = torch.randint(data.vocab_size, (4, 17), generator=torch.Generator().manual_seed(1))
    _fixed_batches(monkeypatch, [(x[:, :-1], x[:, 1:])] * 150)
    cfg = tiny_cfg(tmp_path, d_model=32, batch_size=4, max_iters=150, learning_rate=1e-2,
                   min_lr=1e-2, warmup_iters=5, weight_decay=0.0, eval_interval=1000,
                   checkpoint=False)
    t = Trainer(cfg, data=data)
    t.train()
    losses = [v for _, v in t.history["train"]]
    assert losses[0] > 0.9 * math.log(data.vocab_size)  # starts near uniform
    assert losses[-1] < 0.05  # random ids, memorised


# ----------------------------------------------------------------------------- resume
def _snapshot(t: Trainer):
    return ({k: v.clone() for k, v in t.raw_model.state_dict().items()},
            [list(r) for r in t.history["train"]],
            t.optimizer.state_dict()["state"])


def test_resume_is_exact(tmp_path, small_text):
    """12 steps straight == 6 steps, checkpoint, a fresh Trainer resumes 6: bitwise on CPU.

    Dropout, gradient accumulation and a log interval that does not divide the checkpoint
    step are on, so the torch RNG, the batch generator and the pending losses must all be
    saved and restored.
    """
    data = prepare_data("char", tmp_path / "data", train_text=small_text[0],
                        val_text=small_text[1])
    kw = dict(dropout=0.1, grad_accum_steps=2, max_iters=12, log_interval=5)
    straight = Trainer(tiny_cfg(tmp_path / "a", **kw), data=data)
    straight.train()
    want = _snapshot(straight)

    first = Trainer(tiny_cfg(tmp_path / "b", **kw), data=data)
    first.train(num_steps=6)
    ckpt = tmp_path / "b" / "run" / "ckpt.pt"
    assert first.step == 6 and ckpt.exists()
    ckpt6 = tmp_path / "ckpt6.pt"
    ckpt6.write_bytes(ckpt.read_bytes())
    del first
    torch.manual_seed(12345)  # scramble the global RNG: the checkpoint must restore it
    resumed = Trainer(tiny_cfg(tmp_path / "b", init_from="resume", **kw), data=data)
    assert resumed.step == 6
    resumed.train()
    got = _snapshot(resumed)

    assert got[1] == want[1]  # every per-step loss, bit for bit
    assert [s for s, _ in got[1]] == list(range(1, 13))
    for k in want[0]:
        assert torch.equal(got[0][k], want[0][k]), k
    for pid in want[2]:
        for k in want[2][pid]:
            assert torch.equal(got[2][pid][k], want[2][pid][k])
    assert [e["val"] for e in resumed.history["eval"]][-1] == straight.history["eval"][-1]["val"]

    # control: the same resume with the batch generator NOT restored diverges
    broken = Trainer(tiny_cfg(tmp_path / "c", **kw), data=data)
    broken.load_checkpoint(ckpt6)
    broken.gen.manual_seed(999)
    broken.train()
    assert [v for _, v in broken.history["train"]][6:] != [v for _, v in want[1]][6:]


# ----------------------------------------------------------------------------- CLI smoke
def test_cli_smoke_training_loss_falls(tmp_path):
    """The CI smoke run: the CLI trains a tiny char model on Shakespeare; the loss clearly falls."""
    out = tmp_path / "smoke"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "transformer_ref.train", "--preset", "cpu_smoke",
           "--out_dir", str(out), "--data_dir", str(tmp_path / "data"), "--threads", "1",
           "--no-progress", "--max_iters", "50", "--eval_interval", "25"]
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    logged = [r["loss"] for r in log if "loss" in r]  # every log_interval steps
    evals = [r["eval"] for r in log if "eval" in r]
    vocab = json.loads(next((tmp_path / "data").glob("char-*/meta.json")).read_text())["vocab_size"]
    history = torch.load(out / "ckpt.pt", weights_only=False)["history"]["train"]
    assert [s for s, _ in history] == list(range(1, 51))
    first = history[0][1]
    assert first > 0.9 * math.log(vocab)  # an untrained model is near uniform
    assert logged == [v for s, v in history if s % 10 == 0]
    assert evals[-1]["val"] < first - 1.2  # validation loss well over a nat below the start
    assert evals[-1]["val_bpb"] == pytest.approx(
        evals[-1]["val"] / math.log(2) * _val_tokens_per_byte(tmp_path), rel=1e-9)
    assert (out / "loss.png").stat().st_size > 1000 and (out / "ckpt.pt").exists()
    assert "--- sample ---" in res.stdout and "bits/byte" in res.stdout
    sample = res.stdout.split("--- sample ---", 1)[1].strip("\n")
    assert len(sample) >= 50

    # a new process resumes from the checkpoint with its saved config and extends the run
    cmd = [sys.executable, "-m", "transformer_ref.train", "--init_from", "resume", "--out_dir",
           str(out), "--max_iters", "55", "--sample_tokens", "0", "--threads", "1"]
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "done: 5 steps" in res.stdout
    resumed = torch.load(out / "ckpt.pt", weights_only=False)
    assert resumed["step"] == 55 and resumed["config"]["d_model"] == preset("cpu_smoke").d_model
    assert resumed["history"]["train"][:50] == history


def _val_tokens_per_byte(tmp_path) -> float:
    meta = json.loads(next((tmp_path / "data").glob("char-*/meta.json")).read_text())
    return meta["val_tokens"] / meta["val_bytes"]


def test_cli_help_lists_every_config_field():
    from transformer_ref.train.__main__ import build_parser

    text = build_parser().format_help()
    for name in ("--batch_size", "--grad_accum_steps", "--attn_impl", "--init_from",
                 "--no-progress", "--preset", "--top_p"):
        assert name in text
    args = vars(build_parser().parse_args(["--top_k", "none", "--max_iters", "7", "--no-bias"]))
    assert args["top_k"] is None and args["max_iters"] == 7 and args["bias"] is False
    assert preset("cpu_smoke", max_iters=7).max_iters == 7


def test_device_auto_selection_and_peak_flops(monkeypatch):
    from transformer_ref.train.trainer import peak_flops_for, pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device("auto").type == "cpu"
    assert peak_flops_for(torch.device("cpu")) is None  # no MFU off CUDA
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device("auto").type == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device("auto").type == "cuda"  # CUDA wins over MPS
    assert pick_device("cpu").type == "cpu"  # an explicit choice is kept
    for name, peak in (("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H100 PCIe", 756e12),
                       ("NVIDIA A100-SXM4-40GB", 312e12), ("Some Future GPU", None)):
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None, n=name: n)
        assert peak_flops_for(torch.device("cuda")) == peak
