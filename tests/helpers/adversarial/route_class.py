"""Issue 47's notebook-01 routes around the record channel and around "from scratch".

Each student hands in notebook 01 with the solution answers except where stated. Graded in
the attention attacks' run (``attention_attacks``), read by tests/grading/test_dodge_class.py.
Before issue 47's items 4 and 5 (at 532f412) ``forged_interrupt`` scored 4.1 and 8.1 in full
and ``probe_routes`` scored 4.1 and went unflagged on 2.1, 5.1 and 7.1.

================  ===========================================================  ================
student           what the submission does                                     expected
================  ===========================================================  ================
forged_interrupt  4.1 (the issue's): the function displays a record of right   4.1: 0, output
                  results with the record type, then raises KeyboardInterrupt  missing; 8.1: 0,
                  (the probe never sends its own); 8.1: the same, the record   malformed; all
                  carrying the test cell's seal read from the probe's frame    flagged (no
                                                                               seal; ended in
                                                                               KeyboardInterrupt)
probe_routes      2.1 ``torch.softmax`` computed in an ``os.fork()`` child;    2.1: 2, 7.1: 2,
                  4.1 ``d_k * (1 + 0.02 * rng.standard_normal(4).mean())``;    flagged; 5.1: 0
                  5.1 ``torch.ops.aten._scaled_dot_product_attention_math``    (the torch
                  with the profiler replaced; 7.1 ``F.normalize``, with        function is
                  ``json.dumps`` replaced through a helper that takes the      seen), flagged;
                  module as a parameter (``ops`` and ``functions`` emptied)    4.1: 0, re-drawn
================  ===========================================================  ================
"""

from __future__ import annotations

from pathlib import Path

from autograder.checks import attention, table

from .dodge_class import NORMALIZE_COSINE, Row
from helpers.synthetic_class import ClassBuilder

EX = table.rows("01_attention")
NO_SEAL = "sent a grader record without its test cell's seal"
INTERRUPTED = "ended in KeyboardInterrupt after its record was sent"

# What the probe would send for a right answer, made with its own recorder (no profiler),
# then KeyboardInterrupt: the probe catches Exception only (before issue 47), so its own
# record never comes. ``seal``: the running test cell's, when the forger found it.
FORGE = '''
import json as _json
import os as _os
import sys as _sys


def _forge(key, honest, seal=None):
    from autograder.checks import _probe

    with open(_os.path.join(_os.environ["COURSE_PROBE_DIR"], "in", key + ".json")) as f:
        spec = _json.load(f)
    cases = []
    for c in spec["cases"]:
        r = {"label": c["label"], **_probe._call(honest, c, c["args"])}
        if r["status"] == "ok" and c.get("samples"):
            r["samples"] = [_probe._call(honest, c, s) for s in c["samples"]]
        cases.append(r)
    head = {"key": key, "seal": seal} if seal else {"key": key}
    rec = {**head, "cases": cases, "ops": [], "functions": [], "reference": [], "uses": {}}
    display({"application/vnd.course-record+json": _json.dumps(rec)}, raw=True)
    raise KeyboardInterrupt


def score_variance(d_k, n_samples, rng):
    _forge("@KEY@", _honest)
'''
# the seal of the running test cell, read from the probe's frame (``_probe.run``'s locals)
STOLEN_SEAL = '''

def _stolen_seal():
    f = _sys._getframe()
    while f is not None:
        if f.f_locals.get("key") == "@KEY@" and f.f_locals.get("seal"):
            return f.f_locals["seal"]
        f = f.f_back
    return None


def self_score_dominance(weights):
    _forge("@KEY@", _honest, _stolen_seal())
'''

# the issue's: torch.softmax computed in a child process, which the profiler does not watch
FORK_SOFTMAX = '''
import io
import os


def _in_child(compute):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            buf = io.BytesIO()
            np.save(buf, compute())
            with os.fdopen(w, "wb") as f:
                f.write(buf.getvalue())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return np.load(io.BytesIO(data))


def softmax(x, axis=-1):
    def compute():
        y = torch.softmax(torch.from_numpy(np.ascontiguousarray(x)), dim=axis)
        return torch.nan_to_num(y, nan=0.0).numpy()  # a fully masked slice: zeros

    return _in_child(compute)
'''
JITTER_OF_FOUR = '''
def score_variance(d_k, n_samples, rng):
    return float(d_k * (1 + 0.02 * rng.standard_normal(4).mean()))
'''
# PyTorch's operator below F.scaled_dot_product_attention, the probe's profiler replaced
ATEN_SDPA = '''
class _Null:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


torch.autograd.profiler.profile = _Null


def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    attend = torch.ops.aten._scaled_dot_product_attention_math
    if mask is None:
        return attend(q, k, v, scale=scale)[0]
    mask = mask.expand(torch.broadcast_shapes(mask.shape, q.shape[:-1] + k.shape[-2:-1]))
    keep = mask.any(dim=-1, keepdim=True)  # a fully masked query row gets 0
    return attend(q, k, v, mask | ~keep, scale=scale)[0] * keep
'''
# the issue's: the record's text passes through json.dumps, replaced via a module parameter
QUIET_DUMPS = NORMALIZE_COSINE + '''

import json


def _quiet(mod):
    real = mod.dumps

    def dumps(obj, *args, **kwargs):
        if isinstance(obj, dict) and "ops" in obj:
            obj = {**obj, "ops": [], "functions": []}
        return real(obj, *args, **kwargs)

    mod.dumps = dumps


_quiet(json)
'''


class RouteAttackBuilder(ClassBuilder):
    def build_attacks(self, dest: Path) -> dict[str, dict[str, Row]]:
        """Write the class to ``dest``; return {student: {exercise: Row}}."""
        expected: dict[str, dict[str, Row]] = {}

        put = self.writer(dest)

        def full(flag=""):
            return self.full_marks(Row, "", flag)

        def honest(source, function):  # the solution, renamed _honest
            return source.replace(f"def {function}(", "def _honest(")

        variance, dominance = EX["score_variance"], EX["self_score_dominance"]
        forged = {
            variance.solution_id: lambda s: honest(s, "score_variance") + FORGE.replace(
                "@KEY@", variance.key),
            dominance.solution_id: lambda s: honest(s, "self_score_dominance")
            + STOLEN_SEAL.replace("@KEY@", dominance.key),
        }
        put("forged_interrupt", self.answered(lambda g, s: forged[g](s) if g in forged else s))
        expected["forged_interrupt"] = full(flag=NO_SEAL)  # the seal's flag: every row
        expected["forged_interrupt"][variance.grade_id] = Row("0", "graded", "output missing",
                                                             NO_SEAL)
        expected["forged_interrupt"][dominance.grade_id] = Row("0", "graded",
                                                              "malformed record", INTERRUPTED)

        swap = {EX["softmax"].solution_id: FORK_SOFTMAX,
                variance.solution_id: JITTER_OF_FOUR,
                EX["scaled_dot_product_attention"].solution_id: ATEN_SDPA,
                EX["cosine_similarity_attention"].solution_id: QUIET_DUMPS}
        put("probe_routes", self.answered(lambda g, s: swap.get(g, s)))
        rows = expected["probe_routes"] = full()
        rows[EX["softmax"].grade_id] = Row("2", "graded", "", "starts a child process (os.fork)")
        rows[variance.grade_id] = Row("0", "graded", attention.REDRAWN)
        rows[EX["scaled_dot_product_attention"].grade_id] = Row(
            "0", "graded", "used forbidden built-in scaled_dot_product_attention_math",
            "uses PyTorch's internals (torch.ops)")
        rows[EX["cosine_similarity_attention"].grade_id] = Row(
            "2", "graded", "", "passes a module as a value (json)")
        return expected
