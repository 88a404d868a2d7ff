"""A tiny training configuration the training tests share (seconds on a CPU), and their
one-thread fixture."""

import pytest
import torch

from transformer_ref.train.config import TrainConfig


def tiny_cfg(tmp_path, **kw) -> TrainConfig:
    base = dict(
        block_size=16, n_layer=1, n_head=2, d_model=16, batch_size=4, max_iters=12,
        learning_rate=3e-3, min_lr=3e-4, warmup_iters=3, eval_interval=4, eval_iters=2,
        log_interval=3, out_dir=str(tmp_path / "run"), data_dir=str(tmp_path / "data"),
        progress=False, plot=False, sample_tokens=0, device="cpu", dtype="float32",
        compile="false",
    )
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread for the test (a module that imports this fixture uses it for all):
    two-thread torch in each of 2 xdist workers oversubscribes 2 cores."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
