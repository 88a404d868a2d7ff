"""Later chapters run the learner's own earlier answers (issue 32 item 1): the loader
``autograder.checks.yours`` reads a saved notebook's setup and answer cells, uses a function
whose visible check passes, falls back to the given one visibly otherwise, and in a graded
kernel reads nothing. ``YourGPT`` is laid out like ``transformer_ref.GPT``."""

from __future__ import annotations

import re

import nbformat
import numpy as np
import pytest
import torch

from autograder.checks import requires, table, yours
from transformer_ref.models import GPT, GPTConfig
from transformer_ref.norms import layer_norm as ref_layer_norm

SETUP = "import torch\nMARK = []\n"
RIGHT = '''def layer_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta
'''
UNBIASED = RIGHT.replace("((x - mu) ** 2).mean(dim=-1, keepdim=True)",
                         "x.var(dim=-1, keepdim=True)")  # a learner's slip: unbiased variance


EX = table.rows("04_layer_norm")["layer_norm"]  # the exercise row: its grade ids


def _notebook(path, answer, extra=()):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP, metadata={"nbgrader": {"grade_id": "setup",
                                                                "solution": False}}),
        *extra,
        nbformat.v4.new_code_cell(answer, metadata={"nbgrader": {"grade_id": EX.solution_id,
                                                                 "solution": True}}),
        nbformat.v4.new_code_cell("check_layer_norm(layer_norm)\nMARK.append('check')",
                                  metadata={"nbgrader": {"grade_id": EX.grade_id,
                                                         "grade": True, "solution": False}}),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture
def here(tmp_path, monkeypatch):
    for var in ("NBGRADER_EXECUTION", "COURSE_GRADE_JOB", "COURSE_PROBE_DIR"):
        monkeypatch.delenv(var, raising=False)
    folder = tmp_path / "05_feed_forward_blocks"  # the running notebook's folder
    folder.mkdir()
    return folder


def _load(here, lines):
    return yours.load("04_layer_norm", "layer_norm", folder=here, say=lines.append)


def _x():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 8, generator=g), torch.rand(8, generator=g) + 0.5, torch.randn(8)


def test_a_passing_piece_is_the_learners_own(here):
    _notebook(here.parent / "04_layer_norm" / "04_layer_norm.ipynb", RIGHT)
    lines = []
    got = _load(here, lines)
    assert lines == ["✔ using your layer_norm (chapter 04, its checks pass)"]
    assert got.layer_norm.__code__.co_filename == "<your 04_layer_norm answer cell>"
    assert got.mine == ["layer_norm"]
    # neither the check cell nor anything but setup and answers ran
    assert got.layer_norm.__globals__["MARK"] == []


def test_a_failing_piece_falls_back_to_the_given_one_and_says_why(here):
    _notebook(here.parent / "04_layer_norm" / "04_layer_norm.ipynb", UNBIASED)
    lines = []
    got = _load(here, lines)
    assert len(lines) == 1
    assert lines[0].startswith("✘ your layer_norm (chapter 04) fails its check (")
    assert lines[0].endswith("): using the given one instead")
    assert got.mine == []
    x, g, b = _x()
    assert torch.equal(got.layer_norm(x, g, b), ref_layer_norm(x, g, b))


def test_a_missing_notebook_falls_back(here):
    lines = []
    got = _load(here, lines)
    assert lines == ["– chapter 04 not found or not saved: using the given layer_norm"]
    x, g, b = _x()
    assert torch.equal(got.layer_norm(x, g, b), ref_layer_norm(x, g, b))


def test_the_kit_layout_side_by_side_is_found(here):
    _notebook(here / "04_layer_norm.ipynb", RIGHT)  # the kit: OUT/NN_x.ipynb
    lines = []
    _load(here, lines)
    assert lines == ["✔ using your layer_norm (chapter 04, its checks pass)"]


@pytest.mark.parametrize("answer, why", [
    ("def layer_norm(x, gamma, beta, eps=1e-5):\n    raise NotImplementedError()\n",
     "(not implemented yet)"),
    (RIGHT + "1 / 0\n", "(its cell raised ZeroDivisionError: division by zero)"),
])
def test_an_unfinished_or_raising_answer_falls_back(here, answer, why):
    _notebook(here.parent / "04_layer_norm" / "04_layer_norm.ipynb", answer)
    lines = []
    _load(here, lines)
    assert lines == [
        f"✘ your layer_norm (chapter 04) fails its check {why}: using the given one instead"]


def test_demo_cells_are_not_run(here):
    demo = nbformat.v4.new_code_cell("MARK.append('demo')", metadata={"tags": ["demo"]})
    _notebook(here.parent / "04_layer_norm" / "04_layer_norm.ipynb", RIGHT, extra=[demo])
    got = _load(here, [])
    assert got.layer_norm.__globals__["MARK"] == []


@pytest.mark.parametrize("var", ["NBGRADER_EXECUTION", "COURSE_GRADE_JOB", "COURSE_PROBE_DIR"])
def test_a_graded_kernel_reads_nothing_and_uses_the_given_parts(here, monkeypatch, var):
    # a saved answer that would pass: in a graded kernel it is not even read
    _notebook(here.parent / "04_layer_norm" / "04_layer_norm.ipynb", RIGHT)
    monkeypatch.setattr(yours, "run_answers", lambda *a: pytest.fail("read a notebook"))
    monkeypatch.setattr(yours, "check_quietly", lambda *a: pytest.fail("ran a check"))
    monkeypatch.setenv(var, "1")
    lines = []
    got = _load(here, lines)
    assert lines == ["– graded run: using the given layer_norm (each chapter is graded on its "
                     "own)"]
    assert got.mine == []
    x, g, b = _x()
    assert torch.equal(got.layer_norm(x, g, b), ref_layer_norm(x, g, b))


def test_a_stubbed_reference_is_no_given_part(tmp_path, monkeypatch):
    # the student kit / a graded kernel: the reference's body only raises
    ns = {}
    exec("def _unavailable(name):\n    raise RuntimeError(name)\n"
         "def layer_norm(x, weight=None, bias=None, eps=1e-5):\n"
         "    _unavailable('transformer_ref.norms.layer_norm')\n", ns)
    assert yours._stubbed(ns["layer_norm"]) and not yours._stubbed(ref_layer_norm)


def _given_parts():
    return type("Parts", (), {n: staticmethod(yours.given(n))
                              for n in (*yours.MODEL_PIECES, "post_ln_block")})()


def test_your_gpt_is_laid_out_like_the_reference_gpt():
    cfg = GPTConfig(vocab_size=13, block_size=16, n_layer=2, n_head=2, d_model=8)
    torch.manual_seed(0)
    ref, mine = GPT(cfg), yours.YourGPT(cfg, _given_parts())
    assert {k: v.shape for k, v in ref.state_dict().items()} == \
        {k: v.shape for k, v in mine.state_dict().items()}
    mine.load_state_dict(ref.state_dict())
    idx = torch.randint(0, 13, (2, 9))
    with torch.no_grad():
        full = ref(idx)
        assert torch.allclose(mine(idx), full, atol=1e-5)
        cache = mine.init_cache(2)  # token by token through the cache: the same logits
        steps = torch.cat([mine(idx[:, t:t + 1], cache=cache) for t in range(9)], dim=1)
    assert torch.allclose(steps, full, atol=1e-5)
    w = yours.attention_weights(mine, idx[:1], layer=1)
    assert w.shape == (2, 9, 9) and torch.allclose(w.sum(-1), torch.ones(2, 9))
    assert float(w.triu(1).abs().max()) == 0.0  # causal


def test_your_run_trains_with_the_loop_pieces_and_fits_the_budget():
    from transformer_ref.train.config import TrainConfig

    loop = type("Loop", (), {n: staticmethod(yours.given(n)) for n in yours.LOOP_PIECES})()
    data = type("Data", (), {"train": np.arange(4000) % 7, "val": np.arange(500) % 7,
                             "meta": None})()
    cfg = TrainConfig(block_size=8, n_layer=1, n_head=1, d_model=16, batch_size=8,
                      max_iters=60, learning_rate=1e-2, min_lr=1e-3, warmup_iters=5,
                      eval_interval=30, eval_iters=2, progress_seconds=0)
    torch.manual_seed(0)
    model = yours.YourGPT(GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=1,
                                    d_model=16), _given_parts())
    run = yours.YourRun(model, loop, data, cfg)
    first = run.evaluate()["val"]
    plan = run.fit_to_time(600.0, probe_steps=3)
    assert plan["max_iters"] == 60 and not plan["cut"]  # fits: unchanged
    summary = run.train()
    assert run.step == 60 and [e["step"] for e in run.history["eval"]] == [30, 60]
    assert summary["eval"]["val"] < first / 2  # a periodic sequence is easy to learn


def test_where_the_given_part_is_left_out_the_line_says_so(here, monkeypatch, capsys):
    # the student kit: the reference of the kit's own exercises is stubbed (issue 49 item 3)
    others = _given_parts()
    monkeypatch.setattr(yours, "given", lambda name: None)
    lines = []
    got = _load(here, lines)
    label = f"04 {EX.label} (`layer_norm`)"
    assert lines == ["– chapter 04 not found or not saved, and the given layer_norm is not in "
                     f"this kit: finish {label} first (demos that need it are skipped)"]
    # a stand-in that names the exercise, not None (05's demos call it: a TypeError before)
    with pytest.raises(yours.Unfinished, match=re.escape(f"finish {label} first")):
        got.layer_norm(*_x())
    others.layer_norm = got.layer_norm  # every other part given: only 04 is named
    config = GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, d_model=4)
    model = yours.YourGPT(config, others)  # built; running it needs layer_norm
    with pytest.raises(yours.Unfinished, match=re.escape(f"finish {label} first")):
        model(torch.zeros(1, 3, dtype=torch.long))
    # a demo cell runs inside `requires`: one line, the exercise named, no traceback
    with requires("Exercise 4.1"):
        model(torch.zeros(1, 3, dtype=torch.long))
    assert capsys.readouterr().out == (f"(This cell is skipped: finish {label} first: neither "
                                       "your answer nor a given one is usable here. Then run "
                                       "this cell again.)\n")


def test_a_piece_whose_check_is_not_in_the_kit_is_said_unchecked(here, monkeypatch):
    """The kit's stand-in for a check it leaves out prints a note and raises nothing: the
    loader must not read that as "its checks pass" (08's train_step, issue 49 item 3)."""
    from autograder.checks import _kit
    from autograder.checks import layer_norm as checks

    _notebook(here.parent / "04_layer_norm" / "04_layer_norm.ipynb", "def layer_norm(x, g, b, "
              "eps=1e-5):\n    return x\n")  # wrong: a real check would fail it
    monkeypatch.setattr(checks, "check_layer_norm",
                        _kit._absent("layer_norm", EX.label, "left out for the test"))
    lines = []
    got = _load(here, lines)
    assert lines == ["– using your layer_norm (chapter 04) unchecked: its visible check is not "
                     "in this kit"]
    assert got.mine == ["layer_norm"]
    assert not any("checks pass" in line for line in lines)


def test_reference_code_the_kit_leaves_out_skips_a_demo_cell(capsys):
    """The kit's stubbed reference raises ``ReferenceUnavailable`` (a RuntimeError made by
    grading/autograde/reference.py): a demo cell inside ``requires`` says so in one line;
    any other error still raises."""
    class ReferenceUnavailable(RuntimeError):
        pass

    with requires("Exercise 1.1"):
        raise ReferenceUnavailable("transformer_ref.mha.MultiHeadAttention.__init__ is the "
                                   "course's reference implementation ...")
    assert capsys.readouterr().out == (
        "(This cell is skipped: it runs transformer_ref.mha.MultiHeadAttention.__init__, the "
        "course's reference answer to an exercise of this kit, which the kit leaves out.)\n")
    with pytest.raises(RuntimeError, match="a real bug"), requires("Exercise 1.1"):
        raise RuntimeError("a real bug")
    with requires("Exercise 1.1"):  # a cell whose earlier cell was skipped
        yours.built(None, "your GPT of section 7")
    assert "skipped: your GPT of section 7 was not built" in capsys.readouterr().out


def test_attention_maps_are_small_multiples_with_a_colour_bar():
    """08's attention maps (issue 49 item 5): one panel per head named as 06 names them
    ("layer 2, head 1"), one 0-1 scale with a colour bar, at most 20 labels per axis even for
    a 58-character line."""
    import matplotlib

    matplotlib.use("Agg")
    w = torch.rand(3, 58, 58).softmax(-1)
    fig = yours.plot_attention(w, [chr(97 + i % 26) for i in range(58)], layer=2)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == [f"layer 2, head {h}" for h in (1, 2, 3)]
    bars = [ax for ax in fig.axes if ax not in panels]
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention weight"  # the colour bar
    for ax in panels:
        assert 10 <= len(ax.get_xticklabels()) <= yours.MAX_TICKS
        assert 10 <= len(ax.get_yticklabels()) <= yours.MAX_TICKS
        assert all(t.get_fontsize() >= 8 for t in ax.get_xticklabels())
        assert ax.images[0].get_clim() == (0.0, 1.0)
