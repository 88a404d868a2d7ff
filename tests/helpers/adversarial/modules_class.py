"""Issue 14's attacks on the chapters whose exercises take modules (03, 05, 06), against
trusted verdicts: one student, ``attacker``, hands in all three notebooks, each with several
attacks; every CSV row has an exact expectation (points, status, the start of the diagnosis,
the flag). In each notebook:

==========================================================================  ==================
what the answers do                                                         that row
==========================================================================  ==================
first answer: wrong, after patching torch's comparisons (``torch.isclose``,  0, "graded (test
``torch.allclose``) and the chapter's check module (``check_*`` rebound,    cell restored:
``_core._run``); its test cell replaced by ``pass``                         edited)", flagged
                                                                            "reaches into the
                                                                            grader"
one answer returns what the reference computes: 03 ``multi_head_attention``  0, graded (03: the
imports ``transformer_ref`` (not in that kernel; the source policy blanks     cell is blanked,
the cell today); 05 ``ffn_param_count`` counts ``transformer_ref.ffn         flagged; 05, 06:
.FeedForward`` (``__import__``, in a thread); 06 ``sinusoidal_encoding``     "used the reference
calls the reference (``sys.modules``); both first switch profiling and      implementation")
tracing off (``sys.setprofile(None)``, ``sys.settrace(None)``): the
kernel's copy of ``transformer_ref`` has no code for the chapter's exercises
06 ``gpt_logits`` returns ``model(idx)`` (the model's own forward, not      0, "raised
there), ``incremental_logits`` calls it                                     TypeError"
one more answer wrong (03 ``fused_qkv``, 05 ``pre_ln_block``)               0, graded
the other answers right                                                     full, graded
==========================================================================  ==================
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.checks import table

from helpers.synthetic_class import WRAP_WRONG, ClassBuilder, _fmt, _nbg, _wrap

ASSIGNMENTS = ("03_multihead_attention", "05_feed_forward_blocks", "06_transformer")
MODULES = {"03_multihead_attention": "multihead_attention",
           "05_feed_forward_blocks": "feed_forward_blocks",
           "06_transformer": "transformer"}


@dataclass(frozen=True)
class Row:
    points: str
    status: str
    diagnosis: str | None = ""  # the diagnosis starts with this ("" = empty, None = any)
    flagged: str | None = ""  # contained in the flagged column ("" = empty, None = any)


PATCH = """import torch
torch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)
torch.allclose = lambda *a, **k: True
import autograder.checks.{module} as _checks
import autograder.checks._core as _core
for _name in list(vars(_checks)):
    if _name.startswith("check_"):
        setattr(_checks, _name, lambda f: None)
try:
    _core._run = lambda *a, **k: None
except AttributeError:
    pass
"""

R03, R05, R06 = (table.rows(ch) for ch in
                 ("03_multihead_attention", "05_feed_forward_blocks", "06_transformer"))

# answer cells of the `reference` student, by solution cell id (the rest: the solution)
REFERENCE = {
    "03_multihead_attention": {R03["multi_head_attention"].solution_id: '''
def multi_head_attention(x_q, x_kv, W_Q, W_K, W_V, W_O, n_head, mask=None):
    import transformer_ref
    m = transformer_ref.MultiHeadAttention(x_q.shape[-1], n_head, bias=False).to(x_q.dtype)
    with torch.no_grad():
        for lin, W in ((m.q_proj, W_Q), (m.k_proj, W_K), (m.v_proj, W_V), (m.out_proj, W_O)):
            lin.weight.copy_(W.T)
    return m(x_q, context=x_kv, mask=mask)
'''},
    "05_feed_forward_blocks": {R05["ffn_param_count"].solution_id: '''
def ffn_param_count(d_model, d_ff, activation):
    import sys
    import threading
    sys.setprofile(None)  # any watch on the reference's frames, off
    threading.setprofile(None)
    sys.settrace(None)
    threading.settrace(None)
    ffn_module = __import__("transformer_ref.ffn", fromlist=["FeedForward"])
    box = []

    def count():  # in a thread of its own
        try:
            with torch.device("meta"):
                ffn = ffn_module.FeedForward(d_model, d_ff, activation=activation)
            box.append(float(sum(p.numel() for p in ffn.parameters())))
        except Exception as e:
            box.append(e)

    t = threading.Thread(target=count)
    t.start()
    t.join()
    if isinstance(box[0], Exception):
        raise box[0]
    return box[0]
'''},
    "06_transformer": {
        R06["sinusoidal_encoding"].solution_id: '''
def sinusoidal_encoding(max_len, d_model):
    import importlib
    import sys
    sys.setprofile(None)  # any watch on the reference's frames, off
    sys.settrace(None)
    positional = sys.modules.get("transformer_ref.positional") or \\
        importlib.import_module("transformer_ref.positional")
    return positional.sinusoidal_encoding(max_len, d_model).to(torch.float32)
''',
        R06["gpt_logits"].solution_id: '''
def gpt_logits(idx, model, start=0, cache=None):
    return model(idx, cache=cache)
'''},
}
# what each replaced answer's test row gets: (diagnosis, flag); None: any
REFERENCE_ROWS = {
    # today the source policy blanks a cell that imports transformer_ref ("output missing");
    # without it the import fails in the kernel ("raised ModuleNotFoundError")
    R03["multi_head_attention"].grade_id: (None, "imports the reference implementation"),
    R05["ffn_param_count"].grade_id: ("used the reference implementation", None),
    R06["sinusoidal_encoding"].grade_id: ("used the reference implementation", None),
    R06["gpt_logits"].grade_id: ("raised TypeError", None),
}
# incremental_logits calls that gpt_logits, which fails its own check: judged with the given
# gpt_logits in its place, it passes (one mistake costs one exercise): a full row
WRONG = {"03_multihead_attention": {R03["fused_qkv"].solution_id},
         "05_feed_forward_blocks": {R05["pre_ln_block"].solution_id},
         "06_transformer": set()}


class ModulesAttackBuilder:
    def __init__(self, notebooks: dict):
        """``notebooks``: {assignment: course.Notebook}."""
        self.builders = {a: ClassBuilder(nb) for a, nb in notebooks.items()}

    def build(self, dest: Path) -> dict[str, dict[str, Row]]:
        """Write the class to ``dest``; {student: {grade_id: Row}} (grade ids are unique
        across the three notebooks)."""
        rows: dict[str, Row] = {}
        for assignment, b in self.builders.items():
            patch = PATCH.format(module=MODULES[assignment])
            answers = REFERENCE[assignment]

            wrong = WRONG[assignment]

            def answer(gid, src, b=b, patch=patch, answers=answers, wrong=wrong):
                if gid == b.first:
                    return patch + _wrap(src, WRAP_WRONG, "_course_make_wrong")
                if gid in wrong:
                    return _wrap(src, WRAP_WRONG, "_course_make_wrong")
                return answers.get(gid, src)

            nb = b.answered(answer)
            first_tests = b._tests_of(b.first)
            wrong_tests = set().union(*(b._tests_of(g) for g in wrong))
            for cell in nb.cells:
                if _nbg(cell).get("grade_id") in first_tests:
                    cell.source = "pass  # all good"
            folder = dest / "attacker"
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, folder / f"{assignment}.ipynb")
            for g in b.nb.grade_cells:
                if g.grade_id in first_tests:
                    row = Row("0", "graded (test cell restored: edited)", None,
                              "reaches into the grader")
                elif g.grade_id in REFERENCE_ROWS:
                    row = Row("0", "graded", *REFERENCE_ROWS[g.grade_id])
                elif g.grade_id in wrong_tests:
                    row = Row("0", "graded", None, None)
                else:
                    row = Row(_fmt(g.max_points), "graded", "", None)
                rows[g.grade_id] = row
        return {"attacker": rows}
