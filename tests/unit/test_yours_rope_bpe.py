"""Chapter 08's GPT takes the learner's RoPE (06) and tokenizer (07) (issue 49 item 4).

``YourGPT(config with pos="rope")`` rotates every head's queries and keys with the learner's
``apply_rope`` (06 Ex 2.2) where its check passes, the given one where it fails (a ✘ line
says so), and learns a position table where neither is usable (a line says so); it computes
what ``transformer_ref.GPT(pos="rope")`` computes, by either of its two ways into the
learner's ``multi_head_attention``. The BPE run's token stream is the learner's chapter 07
tokenizer's, with the bytes that bits per byte need; the notebook's BPE cell runs on a GPU
or a long CPU budget and otherwise says in one line why not and how to turn it on.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import nbformat
import numpy as np
import pytest
import torch

from autograder.checks import table, yours
from transformer_ref.models import GPT, GPTConfig

EX = table.rows("06_transformer")["apply_rope"]
SETUP = "import math\nimport torch\nROPE_CALLS = []\n"
# 06 Ex 2.2 as its text asks, plus a spy: every call is recorded
SPY = '''def apply_rope(x, positions, base=10000.0):
    ROPE_CALLS.append(tuple(x.shape))
    d_k = x.shape[-1]
    theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angle = positions.to(torch.float64)[:, None] * theta
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
'''
# a learner's slip: GPT-NeoX's half-split pairs where the text asks for interleaved ones
HALF = SPY.replace("a, b = x[..., 0::2], x[..., 1::2]", "a, b = x.chunk(2, dim=-1)").replace(
    "torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)",
    "torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)")


def _write(path, cells):
    """A notebook at ``path`` of code cells ``(source, nbgrader metadata)``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, metadata={"nbgrader": meta}) for src, meta in cells]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _notebook06(folder, answer):
    _write(folder.parent / "06_transformer" / "06_transformer.ipynb",
           [(SETUP, {"grade_id": "setup"}), (answer, {"grade_id": EX.solution_id,
                                                      "solution": True})])


@pytest.fixture
def here(tmp_path, monkeypatch):
    """The running notebook's folder, in a learner's kernel (whatever runs the tests)."""
    monkeypatch.setattr(yours, "graded", lambda: False)
    (tmp_path / "08_training").mkdir()
    return tmp_path / "08_training"


def _parts(**pieces):
    names = (*yours.MODEL_PIECES, "post_ln_block", "apply_rope")
    return type("Parts", (), {n: staticmethod(pieces.get(n) or yours.given(n)) for n in names})()


def _given_loop():
    return type("Loop", (), {n: staticmethod(yours.given(n)) for n in yours.LOOP_PIECES})()


CFG = GPTConfig(vocab_size=13, block_size=16, n_layer=2, n_head=2, d_model=8, pos="rope")


def _same_as_the_reference(parts):
    """YourGPT(pos="rope") of ``parts`` on the reference's weights: the reference's logits,
    in one pass and token by token through the cache."""
    torch.manual_seed(0)
    ref, mine = GPT(CFG), yours.YourGPT(CFG, parts)
    assert {k: v.shape for k, v in ref.state_dict().items()} == \
        {k: v.shape for k, v in mine.state_dict().items()}  # no position table in either
    mine.load_state_dict(ref.state_dict())
    idx = torch.randint(0, 13, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = ref(idx)
        assert torch.allclose(mine(idx), full, atol=1e-5)
        cache = mine.init_cache(2)
        steps = torch.cat([mine(idx[:, t:t + 1], cache=cache) for t in range(9)], dim=1)
    assert torch.allclose(steps, full, atol=1e-5)
    return mine, idx


MHA = '''def multi_head_attention(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    def split(t):
        return t.view(t.shape[0], t.shape[1], n_head, -1).transpose(1, 2)

    q, k, v = split(x_q @ W_Q), split(x_kv @ W_K), split(x_kv @ W_V)
    {body}
    return y.transpose(1, 2).reshape(x_q.shape[0], x_q.shape[1], -1) @ W_O
'''
CALLS_ATTENTION = "y = attention(q, k, v, mask)"
INLINE = ("s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
          "    s = s.masked_fill(~mask, float('-inf')) if mask is not None else s\n"
          "    y = s.softmax(-1) @ v")


def _learners_mha(body):
    """A multi_head_attention as the loader reads it from a saved 03 notebook: defined in a
    ``yours_...`` namespace whose ``attention`` is chapter 01's function."""
    ns = {"__name__": "yours_03_multihead_attention", "torch": torch, "math": math,
          "attention": yours.given("scaled_dot_product_attention")}
    exec(MHA.format(body=body), ns)
    return ns["multi_head_attention"], ns


@pytest.mark.parametrize("body, fast", [(CALLS_ATTENTION, True), (INLINE, False)])
def test_your_gpt_with_rope_computes_the_reference_rope_gpt(body, fast):
    """Through the learner's attention (their MHA calls it: RoPE is applied there), or, for
    an MHA that does not, on projections rotated before it: the same logits either way."""
    mha, ns = _learners_mha(body)
    mine, idx = _same_as_the_reference(_parts(multi_head_attention=mha))
    route = mine.blocks[0].attn.route
    assert (route is not None) == fast
    if fast:
        assert ns["attention"] is route and all(b.attn.route is route for b in mine.blocks)
        before = route.calls
        with torch.no_grad():
            mine(idx)
        assert route.calls == before + CFG.n_layer  # once per block
    else:  # the MHA's namespace is left as it was
        assert not isinstance(ns["attention"], yours._RopeAttention)
    # the given MHA (a module's function) always takes the general way
    assert yours.YourGPT(CFG, _parts()).blocks[0].attn.route is None
    _same_as_the_reference(_parts())
    # attention maps of a RoPE model: rows of weights, causal
    w = yours.attention_weights(mine, idx[:1], layer=1)
    assert torch.allclose(w.sum(-1), torch.ones(2, 9)) and float(w.triu(1).abs().max()) == 0


def test_your_apply_rope_is_used_while_training(here):
    """A learner's apply_rope that passes its check (a spy: it records every call) is the
    one the training run's forward passes call: 2 calls (q and k) per block per step, and
    changing it changes the logits."""
    _notebook06(here, SPY)
    lines = []
    got = yours.load("06_transformer", "apply_rope", folder=here, say=lines.append)
    assert lines == ["✔ using your apply_rope (chapter 06, its checks pass)"]
    parts = _parts(apply_rope=got.apply_rope)
    assert yours.position_scheme(parts, say=lines.append) == "rope" and len(lines) == 1
    calls = got.apply_rope.__globals__["ROPE_CALLS"]
    calls.clear()  # the check's own calls

    from transformer_ref.train.config import TrainConfig

    tokens = np.tile(np.arange(7), 600)
    cfg = TrainConfig(block_size=8, n_layer=2, n_head=2, d_model=16, batch_size=4,
                      max_iters=3, warmup_iters=1, eval_iters=1, progress_seconds=0)
    torch.manual_seed(0)
    model = yours.YourGPT(GPTConfig(vocab_size=7, block_size=8, n_layer=2, n_head=2,
                                    d_model=16, pos="rope"), parts)
    calls.clear()  # building probes the route once
    run = yours.YourRun(model, _given_loop(), SimpleNamespace(train=tokens, val=tokens[:70],
                                                              meta=None), cfg)
    for _ in range(3):
        run.one_step()
    assert len(calls) == 3 * 2 * 2  # steps x blocks x (q, k)
    assert set(calls) == {(4, 2, 8, 8)}  # (B, H, T, d_k): the heads, as 06 rotates them
    x = torch.tensor([[3, 1, 4, 1, 5, 2, 6, 5]])  # distinct tokens: positions matter
    with torch.no_grad():
        before = model(x)
        model.rope.fn = lambda x, positions, base: x  # no rotation: another model
        assert not torch.allclose(model(x), before)


def test_your_apply_rope_runs_where_the_model_runs(here):
    """06's text computes the angles with ``torch.arange`` on the default device: on a GPU the
    model's rope makes them on the heads' device (the meta device stands in for one here)."""
    _notebook06(here, SPY)
    fn = yours.load("06_transformer", "apply_rope", folder=here, say=lambda line: None).apply_rope
    x, positions = torch.randn(2, 2, 5, 8, device="meta"), torch.arange(5, device="meta")
    with pytest.raises(RuntimeError, match="device"):
        fn(x, positions)  # as written, its angles are on the CPU
    assert yours._Rope(fn)(x, positions).device.type == "meta"


def test_a_failing_apply_rope_falls_back_to_the_given_one_and_says_so(here):
    _notebook06(here, HALF)
    lines = []
    got = yours.load("06_transformer", "apply_rope", folder=here, say=lines.append)
    assert len(lines) == 1
    assert lines[0].startswith("✘ your apply_rope (chapter 06) fails its check (")
    assert lines[0].endswith("): using the given one instead")
    assert got.mine == []
    parts = _parts(apply_rope=got.apply_rope)
    assert yours.position_scheme(parts) == "rope"
    _same_as_the_reference(parts)  # the given RoPE is the reference's


def test_without_any_rope_the_gpt_learns_positions_and_says_so(here, monkeypatch):
    """The student kit: 06's reference is left out, the learner's apply_rope is unfinished."""
    _notebook06(here, "def apply_rope(x, positions, base=10000.0):\n"
                      "    raise NotImplementedError()\n")
    monkeypatch.setattr(yours, "given", lambda name: None)
    lines = []
    got = yours.load("06_transformer", "apply_rope", folder=here, say=lines.append)
    assert "finish 06 Exercise 2.2 (`apply_rope`) first" in lines[0]
    parts = type("Parts", (), {"apply_rope": staticmethod(got.apply_rope)})()
    assert yours.position_scheme(parts, say=lines.append) == "learned"
    assert lines[1] == ("– no RoPE here (finish 06 Exercise 2.2 (`apply_rope`) for it): your "
                        "GPT learns a table of positions instead (learned positions, as GPT-2)")


def test_the_bpe_stream_is_the_tokenizers_with_its_bytes(tmp_path):
    """``bpe_data`` trains chapter 07's tokenizer (here the given one), encodes both splits
    and keeps their bytes: bits per byte of a run on it are computed from them."""
    from transformer_ref.corpus import load_shakespeare
    from transformer_ref.train.config import TrainConfig

    tok = type("Tok", (), {n: staticmethod(yours.given(n)) for n in yours.TOKENIZER_PIECES})()
    train, val = load_shakespeare(split="train")[:20_000], load_shakespeare(split="val")[:3_000]
    lines = []
    data = yours.bpe_data(tok, train, val, vocab_size=300, folder=tmp_path, say=lines.append)
    assert data.vocab_size == 300 and len(data.tokenizer.merges) == 300 - 256
    assert data.tokenizer.decode(data.val) == val  # the ids encode the text, all of it
    assert data.meta["val_bytes"] == len(val.encode()) == len(val)
    assert data.meta["val_tokens"] == len(data.val) < len(val)  # merges shorten it
    assert lines[-1].startswith("your BPE: 300 tokens, ")
    # a run on it reports bits per byte from those bytes: fewer tokens than bytes, fewer bits
    cfg = TrainConfig(block_size=8, n_layer=1, n_head=1, d_model=8, batch_size=2,
                      eval_iters=1, progress_seconds=0)
    model = yours.YourGPT(GPTConfig(vocab_size=data.vocab_size, block_size=8, n_layer=1,
                                    n_head=1, d_model=8, pos="rope"), _parts())
    ev = yours.YourRun(model, _given_loop(), data, cfg).evaluate()
    per_byte = data.meta["val_tokens"] / data.meta["val_bytes"]
    assert ev["val_bpb"] == pytest.approx(ev["val"] / math.log(2) * per_byte)
    assert per_byte < 0.8


def test_a_given_helper_cell_runs_with_the_answers(tmp_path):
    """07's answers call ``pretoken_counts`` of a read-only ``*_given`` cell: the loader runs
    it with the setup and answer cells (not the check or demo cells)."""
    path = tmp_path / "07_bpe.ipynb"
    _write(path, [("MARK = []", {"grade_id": "setup"}),
                  ("def helper():\n    return 2\n", {"grade_id": "helpers_given", "locked": True}),
                  ("def answer():\n    return helper() + 1\n", {"grade_id": "an_answer",
                                                                 "solution": True}),
                  ("MARK.append('check')", {"grade_id": "a_check", "grade": True})])
    ns, broken = yours.run_answers(path, "07_bpe")
    assert broken == {} and ns["answer"]() == 3 and ns["MARK"] == []


def _bpe_cell() -> str:
    source = Path(__file__).resolve().parents[2] / "solutions" / "08_training"
    nb = nbformat.read(source / "08_training.ipynb", as_version=4)
    return next(c.source for c in nb.cells if c.source.startswith("BPE_RUN = None"))


class _Entered(Exception):
    pass


class _Requires:
    def __init__(self, what):
        pass

    def __enter__(self):
        raise _Entered

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("run, seconds, runs", [
    ("cpu", 480.0, False), ("cpu", 900.0, True), ("gpu", 240.0, True), ("smoke", 30.0, True)])
def test_the_bpe_cell_runs_where_the_budget_allows_and_else_says_how(run, seconds, runs, capsys):
    ns = {"RUN": run, "MAX_SECONDS": seconds, "requires": _Requires}
    if runs:
        with pytest.raises(_Entered):
            exec(compile(_bpe_cell(), "the BPE cell", "exec"), ns)
        return
    exec(compile(_bpe_cell(), "the BPE cell", "exec"), ns)
    out = capsys.readouterr().out
    assert out == ("Skipped: on this CPU the BPE run would take another 8 min; set BPE_RUN = "
                   "True in this cell (or MAX_SECONDS = 900 or more at the top) to run it.\n")
    assert ns["bpe_rows"] == []
