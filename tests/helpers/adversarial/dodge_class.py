"""Issue 30's notebook-01 attacks: a student who dodges the trusted verdicts or the grader.

Each student is the release of notebook 01 ("unsolved": the answer cells as handed out,
``raise NotImplementedError()``; "correct": the solution answers, as ``verdict_class``'s
``correct`` student) with one attack. Every CSV row has an expectation (:class:`Row`): points,
status, the start of the diagnosis (None: any) and a text the ``flagged`` column must contain
("" = must be empty). At the commit before the fix of issue 30 (8cfdd3e) every attack but
display_flood and forged_record got more than its expectation or made rows "not graded" to
hide behind (the filler left 4 GB in OUT, hidden_cells ran into the 600 s student limit);
those two already got theirs and stay as guards.

=================  ==========================================================  ================
student            what the submission does                                    expected
=================  ==========================================================  ================
correct            solution code (the control; the filler's disk baseline)     16/16, graded
rewrite_records    correct, except 2.1 ``torch.softmax``, 5.1                  2.1, 5.1, 7.1:
                   ``F.scaled_dot_product_attention``, 7.1 ``F.normalize``     0, forbidden
                   (each otherwise right, fully masked rows included; 3.1      built-in; rest
                   and 7.1 do not call them); a last cell rewrites every       full, graded
                   record under ``$COURSE_PROBE_DIR/out`` with ``"ops": []``
                   and ``"functions": []`` (the two lists a forbidden
                   built-in shows up in)
rewrite_mutated    correct, except softmax subtracts the max in place          2.1: 0, input
                   (``x -= m``); a last cell clears every ``"mutated"`` in     changed in
                   the records (the cascade's records of 3.1 included)         place; rest
                                                                               full (3.1's
                                                                               own results
                                                                               are right)
filler             correct; a last cell writes up to 4,000 files of 1 MB       full, graded;
                   into ``$COURSE_PROBE_DIR/out`` and as many into the         its share of
                   working folder, stopping at the first OSError               OUT at most
                                                                               20 MB over
                                                                               correct's
fake_log_block     unsolved; the first answer cell writes a fake               0, graded
                   ``==== 01_attention result ... autograde: failed`` block
                   to fd 1 and fd 2 (the grading log's markers)
raise_memory       unsolved; answer 2.1 ends with ``raise MemoryError('Unable  0, graded
                   to allocate 64.0 GiB ...')``, answer 5.1 with ``raise
                   OSError(28, 'No space left on device')``
exit_kernel        unsolved; the first answer cell calls ``os._exit(0)``       0, status
                                                                               "graded...",
                                                                               flagged: ended
                                                                               the kernel
display_flood      unsolved; the first answer cell displays six 64 MB          0, status
                   ``display_data`` messages (``raw=True``)                    "graded..."
malformed_records  unsolved, except: 1.1 raises an exception whose type's      0, graded
                   ``__name__`` holds a NUL (a metaclass property: ``type()``
                   refuses such a name), 2.1 returns ``10 ** 4000``, 4.1
                   returns a list nested 200,000 deep
forged_record      unsolved; softmax displays ``application/vnd.course-        0, graded,
                   record+json`` records claiming success (one with            flagged (no
                   ``"cases": NaN``), returns None                             seal)
hidden_cells       unsolved + 250,000 markdown cells whose key is written      not graded
                   ``"cell\\u005ftype"`` in the raw JSON (~18 MB)              ("... cells")
                                                                               or 0 graded; in
                                                                               under 120 s
jitter_stat        correct, except 4.1 returns ``d_k`` jittered by the         4.1: 0; rest
                   generator: ``d_k * (1 + 0.02 * rng.standard_normal())``     full
=================  ==========================================================  ================

The attacks use only what a student cell may use without a flag (``os``, ``glob``, ``json``,
the ``display`` builtin of IPython rather than ``import IPython``): a flag on these rows would
be unrelated to the attack, so ``flagged`` must be empty except where stated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

from autograder.checks import table

from .graded import row_mismatch
from helpers.synthetic_class import ClassBuilder, _nbg

EX = table.rows("01_attention")  # {function: exercise row} of the chapter

FILLER_FILES = 4000  # files of 1 MB the filler tries to write, in each of its two folders
FILLER_SLACK = 20 * 2**20  # bytes its share of OUT may hold over the correct student's
HIDDEN_CELLS = 250_000
HIDDEN_SECONDS = 120  # the hidden_cells student is graded (or refused) within this


@dataclass(frozen=True)
class Row:
    """One CSV row's expectation. ``match``: how points and status are compared: "exact";
    "prefix" (points exact, the status starts with ``status``); "regex" (points and status
    each a regular expression the value must match in full)."""

    points: str
    status: str
    diagnosis: str | None = ""  # the diagnosis starts with this ("" = empty, None = any)
    flagged: str = ""  # the row's flagged column contains this ("" = must be empty)
    match: str = "exact"


def mismatch(row: dict, exp: Row) -> tuple | None:
    """None when the CSV ``row`` is what ``exp`` says (points and status as ``exp.match``
    says, the diagnosis and flagged columns as ``graded.row_mismatch`` reads them), else (what
    the row has, ``exp``)."""
    if exp.match == "regex":
        ok = bool(re.fullmatch(exp.points, row["points"])) and \
            bool(re.fullmatch(exp.status, row["status"], re.S))
    elif exp.match == "prefix":
        ok = row["points"] == exp.points and row["status"].startswith(exp.status)
    else:
        ok = row["points"] == exp.points and row["status"] == exp.status
    return row_mismatch(row, exp, ok)


# ---------------------------------------------------------------- rewrite_records
# Each is right on every case (a fully masked slice gives 0, as the reference), so only the
# forbidden built-in can cost it the points.
TORCH_SOFTMAX = '''
def softmax(x, axis=-1):
    y = torch.softmax(torch.from_numpy(np.ascontiguousarray(x)), dim=axis)
    return torch.nan_to_num(y, nan=0.0).numpy()  # a fully masked slice: zeros
'''

TORCH_SDPA = '''
import torch.nn.functional as F


def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, scale=scale)
    mask = mask.expand(torch.broadcast_shapes(mask.shape, q.shape[:-1] + k.shape[-2:-1]))
    keep = mask.any(dim=-1, keepdim=True)  # a fully masked query row gets 0
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~keep, scale=scale)
    return out * keep
'''

# 7.1 with F.normalize and its own attention (not the student's 5.1: that would fail 7.1 by
# the cascade, whatever the records say)
NORMALIZE_COSINE = '''
import torch.nn.functional as F


def cosine_similarity_attention(q, k, v, mask=None, temperature=1.0, eps=1e-8):
    scores = F.normalize(q, dim=-1, eps=eps) @ F.normalize(k, dim=-1, eps=eps).transpose(-2, -1)
    scores = scores / temperature
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    total = e.sum(dim=-1, keepdim=True)
    return (e / torch.where(total == 0, torch.ones_like(total), total)) @ v
'''

# 3.1 with its own softmax: right, and it does not call the student's 2.1 (the cascade)
OWN_SOFTMAX_SELF_ATTENTION = '''
def self_attention_unscaled(X, W_Q, W_K, W_V):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    S = dot_product_scores(Q, K)
    e = np.exp(S - S.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ V
'''

REWRITE = '''import glob
import json
import os

try:
    for _path in glob.glob(os.path.join(os.environ["COURSE_PROBE_DIR"], "out", "*.json")):
        try:
            with open(_path) as _f:
                _rec = json.load(_f)
            {edit}
            with open(_path, "w") as _f:
                json.dump(_rec, _f)
        except Exception:
            pass
except Exception:
    pass
'''
CLEAR_OPS = REWRITE.replace("{edit}", '_rec["ops"] = []\n            _rec["functions"] = []')


# ---------------------------------------------------------------- rewrite_mutated
INPLACE_SOFTMAX = '''
def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0).astype(x.dtype)
    x -= m  # in place: the caller's array changes
    e = np.exp(x)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total).astype(x.dtype)
'''

CLEAR_MUTATED = '''def _unmutate(o):
    if isinstance(o, dict):
        if "mutated" in o:
            o["mutated"] = False
        for _v in o.values():
            _unmutate(_v)
    elif isinstance(o, list):
        for _v in o:
            _unmutate(_v)


''' + REWRITE.replace("{edit}", "_unmutate(_rec)")


# ---------------------------------------------------------------- filler
FILLER = f'''import os

_block = b"x" * 2**20
_folders = [os.getcwd()]
try:
    _folders.insert(0, os.path.join(os.environ["COURSE_PROBE_DIR"], "out"))
except Exception:
    pass
for _folder in _folders:
    try:
        for _i in range({FILLER_FILES}):
            with open(os.path.join(_folder, f"fill-{{_i:04d}}.bin"), "wb") as _f:
                _f.write(_block)
    except OSError:
        pass
'''


# ---------------------------------------------------------------- the unsolved attacks
FAKE_BLOCK = b"==== 01_attention result\n...\n==== 01_attention autograde: failed\n"
FAKE_LOG = (
    "import os\n"
    f"os.write(1, {FAKE_BLOCK!r})\n"
    f"os.write(2, {FAKE_BLOCK!r})\n"
)
RAISE_MEMORY = "\nraise MemoryError('Unable to allocate 64.0 GiB for an array')\n"
RAISE_DISK = "\nraise OSError(28, 'No space left on device')\n"
EXIT = "import os\nos._exit(0)\n"
FLOOD = "for _ in range(6):\n    display({'text/plain': 'x' * 64_000_000}, raw=True)\n"

NUL_EXCEPTION = '''
class _NulName(type):
    @property
    def __name__(cls):  # type() refuses a NUL in a class's name; this is what type(e) says
        return "Bad\\x00Name"


class _Bad(Exception, metaclass=_NulName):
    pass


def dot_product_scores(Q, K):
    raise _Bad("x")
'''
HUGE_INT = '''
def softmax(x, axis=-1):
    return 10 ** 4000  # 4,001 digits
'''
DEEP_LIST = '''
def score_variance(d_k, n_samples, rng):
    out = []
    for _ in range(200_000):  # nested 200,000 deep, built without recursion
        out = [out]
    return out
'''

FORGED = '''
def softmax(x, axis=-1):
    import json
    mime = "application/vnd.course-record+json"
    display({mime: json.dumps({"key": "@KEY@", "cases": float("nan")})}, raw=True)
    display({mime: json.dumps({"key": "@KEY@", "passed": True, "points": 2,
                               "diagnosis": "", "cases": []})}, raw=True)
    return None
'''

JITTER = '''
def score_variance(d_k, n_samples, rng):
    return float(d_k * (1 + 0.02 * rng.standard_normal()))  # d_k, made to look measured
'''


class DodgeAttackBuilder(ClassBuilder):
    def build_attacks(self, dest: Path) -> dict[str, dict[str, Row]]:
        """Write the class to ``dest``; return {student: {exercise: Row}}."""
        dest.mkdir(parents=True, exist_ok=True)
        full = self.full_marks(Row, "", "")
        expected: dict[str, dict[str, Row]] = {}

        put = self.writer(dest)

        def sol(function):
            return EX[function].solution_id

        def gid(function):
            return EX[function].grade_id

        def unsolved(edits=None):
            """The release with ``edits`` ({answer cell id: f(source) -> source})."""
            nb = self.release()
            for cell in nb.cells:
                g = _nbg(cell).get("grade_id")
                if edits and g in edits:
                    cell.source = edits[g](cell.source)
            return nb

        def zeros(attacked=(), status="graded", match="exact", flag=""):
            """0 on every row; the diagnosis of an exercise the attack is in is any (None),
            the others' is "not implemented" (their release answers raise it)."""
            return {g: Row("0", status, None if g in attacked else "not implemented", flag,
                           match) for g in self.grade_ids}

        def with_last(nb, source):
            nb.cells.append(new_code_cell(source))
            return nb

        put("correct", self.answered())
        expected["correct"] = dict(full)

        # -- rewrite_records: forbidden built-ins, their traces erased from the records
        swap = {sol("softmax"): TORCH_SOFTMAX,
                sol("scaled_dot_product_attention"): TORCH_SDPA,
                sol("cosine_similarity_attention"): NORMALIZE_COSINE,
                sol("self_attention_unscaled"): OWN_SOFTMAX_SELF_ATTENTION}
        put("rewrite_records",
            with_last(self.answered(lambda g, s: swap.get(g, s)), CLEAR_OPS))
        expected["rewrite_records"] = dict(full)
        for function, builtin in (("softmax", "softmax"),
                                  ("scaled_dot_product_attention",
                                   "scaled_dot_product_attention"),
                                  ("cosine_similarity_attention", "normalize")):
            expected["rewrite_records"][gid(function)] = Row(
                "0", "graded", f"used forbidden built-in {builtin}")

        # -- rewrite_mutated: an input changed in place, "mutated" erased from the records
        put("rewrite_mutated", with_last(
            self.answered(lambda g, s: INPLACE_SOFTMAX if g == sol("softmax") else s),
            CLEAR_MUTATED))
        expected["rewrite_mutated"] = dict(full)
        expected["rewrite_mutated"][gid("softmax")] = Row("0", "graded",
                                                          "input changed in place")
        # 3.1 calls the student's softmax, whose records of 2.1's cases show the change: 2.1
        # fails, and 3.1, whose own results are right, keeps its points (one mistake costs
        # one exercise)

        # -- filler: gigabytes into the record folder and the working folder
        put("filler", with_last(self.answered(), FILLER))
        expected["filler"] = dict(full)

        # -- fake_log_block: the grading log's markers, from the kernel
        put("fake_log_block", unsolved({self.first: lambda s: FAKE_LOG + s}))
        expected["fake_log_block"] = zeros()

        # -- raise_memory: a limit's error message, raised by hand
        memory, disk = sol("softmax"), sol("scaled_dot_product_attention")
        put("raise_memory", unsolved({memory: lambda s: s + RAISE_MEMORY,
                                      disk: lambda s: s + RAISE_DISK}))
        expected["raise_memory"] = zeros(
            attacked={gid("softmax"), gid("scaled_dot_product_attention")})

        # -- exit_kernel: the student's code ends the kernel first thing
        put("exit_kernel", unsolved({self.first: lambda s: EXIT + s}))
        expected["exit_kernel"] = zeros(attacked=set(self.grade_ids), match="prefix",
                                        flag="ended the kernel")

        # -- display_flood: 384 MB of display_data
        put("display_flood", unsolved({self.first: lambda s: FLOOD + s}))
        expected["display_flood"] = zeros(attacked=set(self.grade_ids), match="prefix")

        # -- malformed_records
        bad = {sol("dot_product_scores"): NUL_EXCEPTION, sol("softmax"): HUGE_INT,
               sol("score_variance"): DEEP_LIST}
        put("malformed_records", unsolved({g: (lambda s, g=g: bad[g]) for g in bad}))
        expected["malformed_records"] = zeros(
            attacked={gid("dot_product_scores"), gid("softmax"), gid("score_variance")})

        # -- forged_record: records published as display_data by the student's softmax
        key = table.check("01_attention", "softmax").key
        put("forged_record", unsolved({sol("softmax"): lambda s: FORGED.replace("@KEY@", key)}))
        # the seal takes a record only with its test cell's seal, which the forger cannot know:
        # both are refused, the probe's own record judged (None: 0), the attempt flagged on
        # every row (issue 47 item 4; before it, a second record made the key's malformed)
        expected["forged_record"] = zeros(attacked={gid("softmax")},
                                          flag="sent a grader record without its test cell's seal")

        # -- hidden_cells: 250,000 cells the raw bytes do not show as cells
        put("hidden_cells", hidden_cells_text(self.release()))
        expected["hidden_cells"] = {
            g: Row(r"0|", r"graded|not graded: .*\bcells\b.*", None, "", "regex")
            for g in self.grade_ids}

        # -- jitter_stat: a formula dressed up as a measurement
        put("jitter_stat", self.answered(
            lambda g, s: JITTER if g == sol("score_variance") else s))
        expected["jitter_stat"] = dict(full)
        expected["jitter_stat"][gid("score_variance")] = Row("0", "graded", None)
        return expected


def hidden_cells_text(nb, n: int = HIDDEN_CELLS) -> str:
    """``nb``'s JSON text with ``n`` markdown cells appended whose ``cell_type`` key is
    written with a JSON escape (``"cell\\u005ftype"``): the same notebook once parsed, but a
    count of ``"cell_type"`` in the bytes does not see them."""
    data = json.loads(nbformat.writes(nb))
    cells = [json.dumps(c, separators=(",", ":")) for c in data["cells"]]
    cells += [f'{{"cell\\u005ftype":"markdown","id":"hidden-{i:06d}","metadata":{{}},'
              '"source":""}' for i in range(n)]
    data["cells"] = "@CELLS@"
    return json.dumps(data, separators=(",", ":")).replace('"@CELLS@"',
                                                           "[" + ",".join(cells) + "]")
