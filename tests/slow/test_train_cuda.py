"""The trainer's CUDA path (bf16 autocast, fused AdamW, the CUDA RNG in the checkpoint).

CI has no GPU, so these skip there; they run where a GPU is (the course's runs on a lent H100:
``python -m pytest tests/slow/test_train_cuda.py``). The CPU twins are in ``test_train.py``.
"""

from __future__ import annotations

import pytest
import torch

from transformer_ref.train import Trainer, prepare_data

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from transformer_ref.corpus import load_shakespeare

    folder = tmp_path_factory.mktemp("data")
    return prepare_data("char", folder, train_text=load_shakespeare("train")[:60_000],
                        val_text=load_shakespeare("val")[:8_000])


def _cfg(tmp_path, **kw):
    from helpers.train import tiny_cfg

    return tiny_cfg(tmp_path, device="cuda", dtype="bfloat16", dropout=0.1, grad_accum_steps=2,
                    max_iters=12, log_interval=5, **kw)


def _losses(t: Trainer) -> list[float]:
    return [v for _, v in t.history["train"]]


def test_cuda_run_uses_bf16_autocast_and_fused_adamw(tmp_path, data):
    t = Trainer(_cfg(tmp_path), data=data)
    assert t.device.type == "cuda"
    assert next(t.raw_model.parameters()).device.type == "cuda"
    assert t.optimizer.defaults.get("fused") is True
    with t.autocast:
        x = torch.ones(2, 2, device="cuda")
        assert (x @ x).dtype == torch.bfloat16
    t.train()
    first, last = _losses(t)[0], _losses(t)[-1]
    assert last < first, _losses(t)


def test_cuda_resume_repeats_the_straight_run(tmp_path, data):
    """12 steps straight vs 6, checkpoint, resume 6: the CUDA RNG (dropout) is restored too.

    Compared to 1e-5 (not bitwise: CUDA kernels may sum in another order); a resume whose
    CUDA RNG is scrambled after loading draws other dropout masks and must differ far more."""
    straight = Trainer(_cfg(tmp_path / "a"), data=data)
    straight.train()
    want = _losses(straight)

    first = Trainer(_cfg(tmp_path / "b"), data=data)
    first.train(num_steps=6)
    ckpt = tmp_path / "b" / "run" / "ckpt.pt"
    assert ckpt.exists()
    ckpt6 = tmp_path / "ckpt6.pt"  # the resumed run overwrites ckpt.pt at its last step
    ckpt6.write_bytes(ckpt.read_bytes())
    del first
    torch.cuda.manual_seed_all(12345)  # the checkpoint must restore the CUDA RNG
    resumed = Trainer(_cfg(tmp_path / "b", init_from="resume"), data=data)
    assert resumed.step == 6
    resumed.train()
    got = _losses(resumed)
    assert len(got) == len(want) == 12
    assert max(abs(a - b) for a, b in zip(got, want)) <= 1e-5, (got, want)

    broken = Trainer(_cfg(tmp_path / "c"), data=data)
    broken.load_checkpoint(ckpt6)
    assert broken.step == 6
    torch.cuda.manual_seed_all(999)
    broken.train()
    assert max(abs(a - b) for a, b in zip(_losses(broken)[6:], want[6:])) > 1e-3
