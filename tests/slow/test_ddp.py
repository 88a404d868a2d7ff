"""DDP on CPU: 2 processes (gloo) under torchrun vs one process with the same global batch.

Each rank draws the same global batch and trains on its half; DDP averages the gradients. So
the two ranks must hold bit-identical parameters, and both must match a single process that
trains on the whole global batch (up to float summation order).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from transformer_ref.train.config import TrainConfig
from transformer_ref.train.data import prepare_data
from transformer_ref.train.trainer import Trainer

REPO = Path(__file__).resolve().parents[2]

DRIVER = textwrap.dedent(
    """
    import json, sys
    import torch
    torch.set_num_threads(1)
    from transformer_ref.train.config import TrainConfig
    from transformer_ref.train.data import prepare_data
    from transformer_ref.train.trainer import Trainer

    cfg = TrainConfig(**json.loads(sys.argv[1]))
    texts = json.loads(open(sys.argv[2]).read())
    data = prepare_data("char", cfg.data_dir, train_text=texts[0], val_text=texts[1])
    t = Trainer(cfg, data=data)
    assert t.ddp and t.world_size == 2, (t.ddp, t.world_size)
    t.train()
    torch.save({"params": t.raw_model.state_dict(), "history": t.history["train"],
                "rank": t.rank}, f"{cfg.out_dir}/rank{t.rank}.pt")
    t.close()
    """
)


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_ddp_two_processes_match_one_process(tmp_path, one_thread):
    from transformer_ref.corpus import load_shakespeare

    texts = [load_shakespeare("train")[:40_000], load_shakespeare("val")[:5_000]]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    data_dir = tmp_path / "data"
    data = prepare_data("char", data_dir, train_text=texts[0], val_text=texts[1])  # cache once
    common = dict(
        block_size=16, n_layer=2, n_head=2, d_model=32, max_iters=8, grad_accum_steps=2,
        learning_rate=3e-3, min_lr=3e-4, warmup_iters=2, eval_interval=100, eval_iters=2,
        log_interval=4, grad_clip=1.0, dropout=0.0, data_dir=str(data_dir), progress=False,
        plot=False, sample_tokens=0, device="cpu", dtype="float32", compile="false",
    )
    ddp_dir = tmp_path / "ddp"
    ddp_dir.mkdir()
    (tmp_path / "driver.py").write_text(DRIVER)
    cfg_json = json.dumps({**common, "batch_size": 3, "out_dir": str(ddp_dir)})
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(tmp_path / "driver.py"), cfg_json, str(tmp_path / "texts.json")]
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    r0 = torch.load(ddp_dir / "rank0.pt", weights_only=False)
    r1 = torch.load(ddp_dir / "rank1.pt", weights_only=False)

    # the ranks stay identical, bit for bit
    for k in r0["params"]:
        assert torch.equal(r0["params"][k], r1["params"][k]), k
    assert r0["history"] == r1["history"]  # the logged loss is the all-reduced mean

    # one process, batch 2 * 3 = the global batch
    single = Trainer(TrainConfig(**{**common, "batch_size": 6, "out_dir": str(tmp_path / "one")}),
                     data=data)
    single.train()
    want = single.raw_model.state_dict()
    worst = max((r0["params"][k] - want[k]).abs().max().item() for k in want)
    assert worst < 1e-5
    got_loss = [v for _, v in r0["history"]]
    want_loss = [v for _, v in single.history["train"]]
    assert len(got_loss) == 8
    assert got_loss == pytest.approx(want_loss, rel=1e-5, abs=1e-6)
    # and training did move the weights (so the agreement is not trivial)
    assert max((want[k] - single_init(common, data)[k]).abs().max().item() for k in want) > 1e-3
    # the DDP checkpoint (written by rank 0) holds both ranks' RNG states
    ckpt = torch.load(ddp_dir / "ckpt.pt", weights_only=False)
    assert ckpt["step"] == 8 and len(ckpt["rng"]) == 2


def single_init(common: dict, data) -> dict:
    t = Trainer(TrainConfig(**{**common, "batch_size": 6, "checkpoint": False}), data=data)
    return t.raw_model.state_dict()
