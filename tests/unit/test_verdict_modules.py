"""Trusted verdicts for the chapters whose exercises take modules (03 mha, 05 blocks,
06 transformer): the probe runs the student's function in-process on inputs decoded from the
grader's JSON (objects rebuilt by ``_builders``), the judge sees only the record it wrote.

What is their own is here (builders, built-ins and the reference seen, the kernel's package);
every right answer and catalogued mistake goes through that path in
``test_verdict_chapters.py``.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import torch

from autograder.checks import _builders, _codec, table
from autograder.checks._judge import judge
from autograder.grading.autograde import kernel_package

import helpers.answers.multihead_attention as T03
import helpers.answers.transformer as T06
from helpers.verdict import kernel_package_prints, record

REPO = Path(__file__).resolve().parents[2]


def _record(tmp_path, check, fn) -> dict:
    return record(tmp_path, check, fn)


def _judged(tmp_path, check, fn):
    return judge(check, _record(tmp_path, check, fn))


# ---------------------------------------------------------------- builders
def test_builder_inputs_are_rebuilt_not_sent_back():
    m = _builders.MultiheadAttention(torch.randn(12, 4), torch.randn(4, 4), 2)
    enc = _codec.encode((m,))
    assert enc["v"][0]["$"] == "built" and _codec.carries_builders(enc)
    (back,) = _codec.decode(enc)
    assert isinstance(back, torch.nn.MultiheadAttention) and back.num_heads == 2
    assert torch.equal(back.out_proj.weight, m.out_proj.weight)
    # nonsense plain arguments are refused, not built
    bad = _codec.encode((torch.randn(12, 4), torch.randn(4, 4), 3))
    with pytest.raises(_codec.CodecError):
        _codec.decode({"$": "built", "name": "mha.torch_multihead_attention", "args": bad})


def test_a_recorded_output_that_describes_an_object_is_not_built(tmp_path):
    check = table.check("03_multihead_attention", "weights_from_torch")

    def returns_a_module(m):
        return m

    v = _judged(tmp_path, check, returns_a_module)
    assert not v.passed and "not plain data" in v.message


# ---------------------------------------------------------------- chapter 03 (mha)
def test_mha_builtin_attention_seen_at_the_operator_level(tmp_path):
    def builtin(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
        q, k, v = (T03.good_split(t, n_head) for t in (x_q @ W_Q, x_kv @ W_K, x_kv @ W_V))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return T03.good_merge(y) @ W_O

    v = _judged(tmp_path, table.check("03_multihead_attention", "multi_head_attention"), builtin)
    assert v.diagnosis == "used forbidden built-in scaled_dot_product_attention", v.message


# ---------------------------------------------------------------- chapters 05 and 06
def test_the_reference_implementation_in_the_kernel_scores_zero(tmp_path):
    import threading

    import transformer_ref

    sin = table.check("06_transformer", "sinusoidal_encoding")
    v = _judged(tmp_path, sin, lambda T, d: transformer_ref.sinusoidal_encoding(T, d).float())
    assert v.diagnosis == "used the reference implementation", v.message
    assert "positional.py:sinusoidal_encoding" in v.message

    def in_a_thread(x, attn, ffn, norm1, norm2):  # the reference block, in a worker thread
        box = {}

        def work():
            blk = transformer_ref.EncoderBlock(x.shape[-1], 2, norm_first=True).to(x.dtype)
            box["y"] = blk(x)

        t = threading.Thread(target=work)
        t.start()
        t.join()
        return box["y"]

    v = _judged(tmp_path, table.check("05_feed_forward_blocks", "pre_ln_block"), in_a_thread)
    assert v.diagnosis == "used the reference implementation", v.message


def test_model_inputs_are_rebuilt_with_their_weights_and_cache():
    (case,) = [c for c in table.check("06_transformer", "gpt_logits").cases if "cached prefix of 5"
               in c.label]
    args = case.call()
    back = _codec.decode(_codec.encode(tuple(args)))
    assert type(back[1]) is _builders.GPT and back[3].length == 5
    assert back[1].lm_head.weight is back[1].wte.weight  # tied, as in transformer_ref.GPT
    torch.testing.assert_close(T06.good_gpt(*back), case.expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(TypeError, match="compute it from its parts"):
        back[1](args[0])  # no forward pass of its own: that is the exercise
    (gn,) = [c for c in table.check("05_feed_forward_blocks", "grad_norm_per_layer").cases][:1]
    blocks = _codec.decode(_codec.encode(tuple(gn.call())))[0]
    assert all(p.requires_grad for b in blocks for p in b.parameters())


# ---------------------------------------------------------------- the kernel's package
# 05 and 06 import transformer_ref for their demos: the kernel gets the copy without the
# chapter's reference implementations (tests/grading/test_reference_stub.py), never the real one
@pytest.mark.parametrize("chapter,copied", [("03_multihead_attention", False),
                                            ("05_feed_forward_blocks", True),
                                            ("06_transformer", True)])
def test_kernel_package_has_stubs_and_builders(tmp_path, chapter, copied):
    src = nbformat.read(REPO / f"solutions/{chapter}/{chapter}.ipynb", as_version=4)
    spec = kernel_package.prepare(tmp_path, [src])
    assert spec is not None
    assert ("ref_package" in spec) is copied
    module = chapter.split("_", 1)[1]
    code = (
        "import autograder.checks._core as core, autograder.checks._builders as b\n"
        f"import autograder.checks.{module} as m\n"
        "print(sorted(n for n in vars(m) if not n.startswith('__')), core.registered(),"
        " sorted(b.BUILDERS))\n"
    )
    out = kernel_package_prints(spec, code, tmp_path)
    assert "_MHA" not in out and "_WEIGHTS" not in out and "_GPT" not in out and "()" in out
    assert "mha.torch_multihead_attention" in out and "layers.gpt" in out
    stub = (Path(spec["package"]) / "checks" / f"{module}.py").read_text()
    assert "transformer_ref" not in stub and "Case(" not in stub
    builders = (Path(spec["package"]) / "checks" / "_builders.py").read_text()
    assert "import transformer_ref" not in builders and "from transformer_ref" not in builders
