"""Chapter 02 (masking) judged outside the kernel: the probe records, the grader decides.

The right answers and the wrong implementations are those of ``test_checks_masking.py``
(written the way a student would, independently of the catalogue); here each goes through
the trusted path (``verdict_helpers.judged``: case inputs -> probe record -> judge), which is
what ``course-grade`` does since chapter 02 is in ``exercises.CONVERTED``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.checks import _codec, table
from autograder.checks._builders import AttentionLayer
from autograder.grading import exercises

from helpers.answers.masking import CHECKS, GOOD, WRONG, masked_torch_softmax
from helpers.verdict import judged

REPO = Path(__file__).resolve().parents[2]
MASKED = table.check("02_masking", "masked_attention")


def _solutions() -> dict:
    nb = nbformat.read(REPO / "solutions/02_masking/02_masking.ipynb", as_version=4)
    ns: dict = {}
    exec("import math\nimport torch", ns)
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("solution"):
            exec(c.source, ns)
    return ns


def test_chapter_is_converted():
    assert "masking" in exercises.CONVERTED
    src = nbformat.read(REPO / "solutions/02_masking/02_masking.ipynb", as_version=4)
    assert sorted(k for ks in exercises.converted_keys(src).values() for k in ks) == sorted(CHECKS)


def test_inputs_travel_as_plain_data():
    # a dtype argument (Exercise 1.2) and the layer f (Exercises 4.1, 4.2) are rebuilt
    # on the kernel's side from plain data, not sent as objects
    g = torch.Generator().manual_seed(0)
    leaky = AttentionLayer("layer_seeing_one_step_ahead", "one step ahead",
                           *(torch.randn(6, 6, generator=g, dtype=torch.float64) for _ in "qkv"))
    args = _codec.loads(_codec.dumps(((leaky, torch.ones(2)), {"dtype": torch.bfloat16})))
    f = args[0][0]
    assert type(f) is AttentionLayer and f is not leaky and repr(f) == repr(leaky)
    x = torch.randn(5, 6, dtype=torch.float64)
    assert torch.equal(f(x), leaky(x)) and args[1] == {"dtype": torch.bfloat16}


@pytest.mark.parametrize("key", sorted(CHECKS))
def test_solution_and_a_different_right_answer_pass(key):
    check = CHECKS[key]
    for fn in (_solutions()[check.name], GOOD[key]):
        v = judged(check, fn)
        assert v.passed and v.diagnosis == "", v.message


@pytest.mark.parametrize("key,wrong,name,_", WRONG, ids=[f"{w[0][8:]}: {w[2]}" for w in WRONG])
def test_catalogued_mistake_is_named_from_the_record(key, wrong, name, _):
    v = judged(CHECKS[key], wrong)
    assert not v.passed and v.diagnosis == name, v.message
    assert f"Likely mistake: {name}." in v.message


def test_sdpa_in_a_worker_thread_is_seen():
    def threaded(q, k, v, mask):
        box = {}
        if mask.dtype != torch.bool:
            mask = mask == 0
        t = threading.Thread(target=lambda: box.setdefault(
            "y", torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)))
        t.start()
        t.join()
        return box["y"]

    v = judged(MASKED, threaded)
    assert v.diagnosis.startswith("used forbidden built-in scaled_dot_product_attention"), \
        v.message
    assert "seen in any thread" in v.message


def test_nan_gradient_of_a_fully_masked_row_is_judged():
    def nan_to_num_after(q, k, v, mask):
        return masked_torch_softmax(q, k, v, mask).nan_to_num(0.0)

    v = judged(MASKED, nan_to_num_after)
    # named since issue 32 (before: the bare "wrong gradient")
    name = "nan_to_num patch (the output is 0, its gradients are still nan)"
    assert v.diagnosis == name and "got nan" in v.message, v.message
    assert f"Likely mistake: {name}." in v.message
