'''Chapter 02 (masking) graded with trusted verdicts: a few students, each row exact.

=================  ==========================================================  ================
student            what the submission does                                    expected
=================  ==========================================================  ================
different          every answer right but written unlike the solution (loops,  10/10
                   ``torch.where``, einsum with float64 inside, ``backward``)
mistakes           the solution, except three catalogued mistakes written the  2.1, 3.1, 4.2: 0
                   way a student would: ``<=`` for the lengths, the mask        naming each;
                   applied after the softmax, the feature axis indexed          rest full
thread_sdpa        the solution, except ``masked_attention`` calls              3.1: 0, forbidden
                   ``F.scaled_dot_product_attention`` in a worker thread        built-in; rest
                                                                                full
=================  ==========================================================  ================
'''

from __future__ import annotations

from pathlib import Path

from autograder.checks import table

from .verdict_class import Row
from helpers.synthetic_class import ClassBuilder

EX = table.rows("02_masking")  # {function: exercise row} of the chapter

DIFFERENT = {
    EX["causal_mask"].solution_id: """
def causal_mask(T):
    m = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        m[i, : i + 1] = True
    return m
""",
    EX["to_additive"].solution_id: """
def to_additive(mask, dtype=torch.float32):
    zero = torch.tensor(0.0, dtype=dtype)
    return torch.where(mask, zero, torch.tensor(float("-inf"), dtype=dtype))
""",
    EX["padding_mask_from_lengths"].solution_id: """
def padding_mask_from_lengths(lengths, T):
    rows = [torch.arange(T) < int(n) for n in lengths]
    return torch.stack(rows).reshape(len(rows), 1, 1, T)
""",
    EX["padding_mask_from_ids"].solution_id: """
def padding_mask_from_ids(ids, pad_id):
    B, T = ids.shape
    return ids.ne(pad_id).view(B, 1, 1, T)
""",
    EX["decoder_self_attention_mask"].solution_id: """
def decoder_self_attention_mask(ids, pad_id):
    keep = ids != pad_id  # (B, T)
    return (keep[:, None, :] & causal_mask(ids.shape[1])[None]).unsqueeze(1)
""",
    EX["masked_attention"].solution_id: """
def masked_attention(q, k, v, mask):
    dtype = q.dtype
    q, k, v = q.double(), k.double(), v.double()
    s = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    keep = mask if mask.dtype == torch.bool else mask == 0
    keep = keep.expand(s.shape)
    s = s.masked_fill(~keep, float("-inf"))
    any_key = keep.any(dim=-1, keepdim=True)
    s = torch.where(any_key, s, torch.zeros_like(s))
    w = torch.softmax(s, dim=-1) * any_key
    return torch.einsum("...qk,...kd->...qd", w, v).to(dtype)
""",
    EX["future_leak"].solution_id: """
def future_leak(f, x, t, delta):
    x2 = torch.cat([x[..., : t + 1, :], x[..., t + 1 :, :] + delta[..., t + 1 :, :]], dim=-2)
    return float((f(x2) - f(x))[..., : t + 1, :].abs().max())
""",
    EX["grad_of_position"].solution_id: """
def grad_of_position(f, x, t):
    x = x.detach().clone().requires_grad_(True)
    f(x)[..., t, :].sum().backward()
    return x.grad
""",
}

MISTAKES = {
    EX["padding_mask_from_lengths"].solution_id: """
def padding_mask_from_lengths(lengths, T):
    keep = torch.arange(T)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]
""",
    EX["masked_attention"].solution_id: """
def masked_attention(q, k, v, mask):
    keep = mask if mask.dtype == torch.bool else mask == 0
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w.masked_fill(~keep, 0.0) @ v
""",
    EX["grad_of_position"].solution_id: """
def grad_of_position(f, x, t):
    x = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x)[..., t].sum(), x)
    return g
""",
}
MISTAKE_NAMES = {
    EX["padding_mask_from_lengths"].grade_id: "off-by-one length (<= instead of <)",
    EX["masked_attention"].grade_id: "mask applied after the softmax",
    EX["grad_of_position"].grade_id: "indexed the feature axis instead of the time axis",
}

THREAD_SDPA = """
def masked_attention(q, k, v, mask):
    import threading

    box = {}
    keep = mask if mask.dtype == torch.bool else mask == 0

    def work():
        box["y"] = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return box["y"]
"""


class MaskingClassBuilder(ClassBuilder):
    def build_attacks(self, dest: Path) -> dict[str, dict[str, Row]]:
        """Write the class to ``dest``; return {student: {exercise: Row}}."""
        full = self.full_marks(Row, "", "")
        expected: dict[str, dict[str, Row]] = {}

        put = self.writer(dest)

        put("different", self.answered(lambda gid, src: DIFFERENT[gid]))
        expected["different"] = dict(full)

        put("mistakes", self.answered(lambda gid, src: MISTAKES.get(gid, src)))
        expected["mistakes"] = dict(full)
        for gid, mistake in MISTAKE_NAMES.items():
            expected["mistakes"][gid] = Row("0", "graded", mistake)

        put("thread_sdpa", self.answered(
            lambda gid, src: THREAD_SDPA if gid == EX["masked_attention"].solution_id else src))
        expected["thread_sdpa"] = dict(full)
        expected["thread_sdpa"][EX["masked_attention"].grade_id] = Row(
            "0", "graded", "used forbidden built-in scaled_dot_product_attention")
        return expected
