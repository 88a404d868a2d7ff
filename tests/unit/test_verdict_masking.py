"""Chapter 02 (masking) judged outside the kernel, what is its own: inputs travel as plain
data, a built-in in a worker thread, a fully masked row's nan gradient. Right answers and
catalogued mistakes from the record, in every chapter: ``test_verdict_chapters.py``.
"""

from __future__ import annotations

import threading

import torch

from autograder.checks import _codec, table
from autograder.checks._builders import AttentionLayer

from helpers.answers.masking import NAN_TO_NUM, masked_torch_softmax
from helpers.verdict import judged

MASKED = table.check("02_masking", "masked_attention")


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
    assert v.diagnosis == NAN_TO_NUM and "got nan" in v.message, v.message
    assert f"Likely mistake: {NAN_TO_NUM}." in v.message
