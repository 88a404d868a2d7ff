"""The GPU code path, run on the CPU (issue 17, item 5): the ``gpu_char`` preset shrunk to
seconds with ``torch.compile`` on, bf16 autocast and fused AdamW trains a few steps, resumes
from its checkpoint exactly, and samples. TF32 is the one CUDA-only knob left out (it has no
CPU meaning). ``torch.compile`` on CPU needs a C compiler (inductor generates C++)."""

import shutil

import pytest
import torch

from transformer_ref.train import Trainer, preset
from transformer_ref.train.data import prepare_data

from helpers.train import one_thread  # noqa: F401 - a fixture

pytestmark = [
    pytest.mark.skipif(shutil.which("cc") is None and shutil.which("g++") is None,
                       reason="torch.compile on CPU needs a C/C++ compiler"),
]




def gpu_path_cfg(tmp_path, **kw):
    """gpu_char as it is (compile, bf16, SDPA, dropout 0.2), only smaller and on the CPU."""
    small = dict(n_layer=2, n_head=2, d_model=32, block_size=32, batch_size=8, max_iters=8,
                 warmup_iters=2, learning_rate=3e-3, eval_interval=4, eval_iters=1,
                 log_interval=3, device="cpu", compile="true", dtype="bfloat16",
                 fused_adamw="true", out_dir=str(tmp_path / "run"), data_dir=str(tmp_path / "d"),
                 progress=False, plot=False, sample_tokens=0)
    return preset("gpu_char", **{**small, **kw})


def test_gpu_path_trains_resumes_exactly_and_samples(tmp_path):
    from transformer_ref.corpus import load_shakespeare

    data = prepare_data("char", tmp_path / "d", train_text=load_shakespeare("train")[:30_000],
                        val_text=load_shakespeare("val")[:5_000])
    straight = Trainer(gpu_path_cfg(tmp_path / "a"), data=data)
    cfg = straight.cfg
    assert (cfg.dropout, cfg.attn_impl) == (0.2, "sdpa")  # the preset's own settings
    assert straight.dtype == "bfloat16"
    assert straight.model is not straight.raw_model  # compiled
    assert all(g["fused"] for g in straight.optimizer.param_groups)
    straight.train()
    want = [v for _, v in straight.history["train"]]
    assert len(want) == 8 and all(torch.isfinite(torch.tensor(want)))
    assert sum(want[-3:]) / 3 < want[0] - 0.2  # it learns (from ~log 60 = 4.1 nats)

    first = Trainer(gpu_path_cfg(tmp_path / "b"), data=data)
    first.train(num_steps=4)
    del first
    torch.manual_seed(12345)  # scramble the global RNG: dropout's state must come back
    resumed = Trainer(gpu_path_cfg(tmp_path / "b", init_from="resume"), data=data)
    assert resumed.step == 4
    resumed.train()
    assert [v for _, v in resumed.history["train"]] == want  # bit for bit, dropout included
    for k, v in straight.raw_model.state_dict().items():
        assert torch.equal(v, resumed.raw_model.state_dict()[k]), k

    with resumed.autocast, torch.no_grad():
        x = torch.zeros(1, 4, dtype=torch.long)
        assert resumed.raw_model.eval()(x).dtype == torch.bfloat16  # matmuls run in bf16
    text = resumed.sample(40)
    assert len(text) == 40 and set(text) <= set(data.tokenizer.chars)
