"""Standalone checkpoints (issue 17, item 4): ``save_checkpoint`` / ``load_checkpoint`` work on
any model and optimizer without a Trainer, and the Trainer's checkpoints are made by them."""

import pytest
import torch
import torch.nn.functional as F

from transformer_ref.models import GPT, GPTConfig
from transformer_ref.train import TrainConfig, Trainer, load_checkpoint, save_checkpoint
from transformer_ref.train import trainer as trainer_mod
from transformer_ref.train.data import prepare_data
from transformer_ref.train.trainer import configure_optimizer

from helpers.train import one_thread  # noqa: F401 - a fixture

CFG = GPTConfig(vocab_size=17, block_size=8, n_layer=1, n_head=2, d_model=16, dropout=0.0)




def step(model, opt, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(17, (4, 9), generator=g)
    loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, 17), x[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def test_round_trip_continues_exactly(tmp_path):
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = configure_optimizer(model, 0.1, 1e-2, (0.9, 0.99))
    step(model, opt, 1)
    path = save_checkpoint(tmp_path / "sub" / "m.pt", model, opt, step=1, note="hello")
    assert path.exists() and not list(path.parent.glob("*.tmp"))  # written, then renamed

    torch.manual_seed(99)  # different initial weights: the load must overwrite them all
    model2 = GPT(GPTConfig(**load_checkpoint(path)["model_config"]))
    opt2 = configure_optimizer(model2, 0.1, 1e-2, (0.9, 0.99))
    state = load_checkpoint(path, model2, opt2)
    assert state["step"] == 1 and state["note"] == "hello"
    for (k, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        assert torch.equal(a, b), k
    # the optimizer moments came back too: the next steps are identical
    assert [step(model, opt, s) for s in (2, 3)] == [step(model2, opt2, s) for s in (2, 3)]


def test_compiled_wrapper_is_looked_through(tmp_path):
    model = GPT(CFG)
    compiled = torch.compile(model)  # only wraps: nothing is compiled until it is called
    assert any(k.startswith("_orig_mod.") for k in compiled.state_dict())
    save_checkpoint(tmp_path / "c.pt", compiled)
    keys = set(load_checkpoint(tmp_path / "c.pt")["model"])
    assert keys == set(model.state_dict())
    fresh = torch.compile(GPT(CFG))
    load_checkpoint(tmp_path / "c.pt", fresh)  # loading into a wrapper works as well
    assert torch.equal(fresh._orig_mod.wte.weight, model.wte.weight)


def test_weights_only_and_missing_optimizer(tmp_path):
    model = GPT(CFG)
    save_checkpoint(tmp_path / "w.pt", model, step=5)
    assert load_checkpoint(tmp_path / "w.pt", GPT(CFG), weights_only=True)["step"] == 5
    with pytest.raises(ValueError, match="no optimizer state"):
        load_checkpoint(tmp_path / "w.pt", GPT(CFG), torch.optim.AdamW(model.parameters()))


def test_trainer_checkpoints_are_made_by_the_functions(tmp_path, monkeypatch):
    from transformer_ref.corpus import load_shakespeare

    data = prepare_data("char", tmp_path / "data", train_text=load_shakespeare("train")[:20_000],
                        val_text=load_shakespeare("val")[:4_000])
    calls = []
    real = trainer_mod.save_checkpoint
    monkeypatch.setattr(trainer_mod, "save_checkpoint",
                        lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    cfg = TrainConfig(block_size=16, n_layer=1, n_head=2, d_model=16, batch_size=4, max_iters=4,
                      warmup_iters=1, eval_interval=4, eval_iters=1, out_dir=str(tmp_path / "run"),
                      progress=False, plot=False, sample_tokens=0, device="cpu", compile="false")
    t = Trainer(cfg, data=data)
    t.train()
    assert calls == [tmp_path / "run" / "ckpt.pt"]
    # the file is a standalone checkpoint: rebuild the GPT from it, same logits
    state = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert state["step"] == 4 and state["config"]["max_iters"] == 4
    model = GPT(GPTConfig(**state["model_config"]))
    load_checkpoint(tmp_path / "run" / "ckpt.pt", model)
    x = torch.randint(data.vocab_size, (2, 16))
    t.raw_model.eval()
    model.eval()
    torch.testing.assert_close(model(x), t.raw_model(x), rtol=0, atol=0)
