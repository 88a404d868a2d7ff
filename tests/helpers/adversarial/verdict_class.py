"""Issue 14's notebook-01 attacks, against trusted verdicts (scores decided outside the kernel).

Each student is the release of notebook 01 with answers and one attack. Before trusted
verdicts every cheater below scored 14-16/16 or was "not graded"; now each row has an exact
expectation: points, status, diagnosis (the start of it) and a text the ``flagged`` column
must contain ("" = must be empty).

=================  ==========================================================  ================
student            what the submission does                                    expected
=================  ==========================================================  ================
correct            solution code (the control)                                 16/16, no flag
time_transformer   wrong answers; a ``%%time`` cell whose body installs an     0, output
                   IPython input transformer that turns every later cell       missing, flagged
                   (test cells too) into ``pass`` (a cell of its own)          notebook-wide
getattr_alias      wrong answers; ``g = getattr`` then writes into a check's   0, flagged on
                   ``__globals__`` through the alias (in answer cell 1.1)      ex 1.1 only
hex_exec           wrong answers; hex-encoded code run by ``exec`` got by      0, flagged on
                   name from ``pydoc.locate`` (in answer cell 1.1)             ex 1.1 only
torch_library      wrong answers; re-registers ``aten::isclose`` through       0, flagged on
                   ``torch.library`` (a comparison bound at import would lie)  ex 1.1 only
above_setup        wrong answers; a cell above the locked setup cell patches   0, flagged
                   ``torch.isclose`` (it runs after the setup cell)            notebook-wide
frames             wrong answers; reads expected values from the checker's     0, flagged on
                   frames (traceback), ``__globals__`` and closures            ex 1.1 only
thread_builtin     right, except softmax computed by ``torch.softmax`` in a    ex 2.1, 3.1: 0,
                   worker thread (3.1 calls it)                                forbidden; rest
                                                                               full
near_miss          right, except ``score_variance`` returns ``d_k * 1.001``   ex 4.1: 0; rest
                                                                               full
flags_changed      wrong; test cell 1.1 marked ``solution: true``, test 2.1    0 everywhere,
                   ``grade: false`` (nbgrader used to fail the notebook)       1.1/2.1 restored
                                                                               and flagged
=================  ==========================================================  ================
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from nbformat.v4 import new_code_cell

from autograder.checks import table

from helpers.synthetic_class import ClassBuilder, _nbg

EX = table.rows("01_attention")  # {function: exercise row} of the chapter


@dataclass(frozen=True)
class Row:
    points: str
    status: str
    diagnosis: str | None = ""  # the diagnosis starts with this ("" = empty, None = any)
    flagged: str = ""  # the row's flagged column contains this ("" = must be empty)


PATCHED_ISCLOSE = (
    "import torch\ntorch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)\n"
)

ATTACKS = {
    "time_transformer": (
        "%%time\n"
        "ip = get_ipython()\n"
        "ip.input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n"
    ),
    "getattr_alias": (
        "g = getattr\n"
        "glb = g(check_softmax, '__glo' + 'bals__')\n"
        "glb['_isclose'] = lambda *a, **k: True\n"
    ),
    "hex_exec": (
        "import pydoc\n"
        "run = pydoc.locate('builtins.' + 'ex' + 'ec')\n"
        f"run(bytes.fromhex({PATCHED_ISCLOSE.encode().hex()!r}).decode())\n"
    ),
    "torch_library": (
        "import torch\n"
        "lib = torch.library.Library('aten', 'IMPL')\n"
        "lib.impl('isclose', lambda a, b, *r, **k: torch.ones(a.shape, dtype=torch.bool), 'CPU')\n"
    ),
    "frames": (
        "def _steal():\n"
        "    import sys\n"
        "    f = sys._getframe(1)\n"
        "    found = []\n"
        "    while f is not None:\n"
        "        found += [v for v in f.f_locals.values() if hasattr(v, 'expected')]\n"
        "        f = f.f_back\n"
        "    return found\n"
        "_closure = check_softmax.__closure__\n"
        "_glb = check_softmax.__globals__\n"
    ),
}

THREAD_SOFTMAX = '''
def softmax(x, axis=-1):
    import threading
    import torch
    box = {}

    def work():
        box["y"] = torch.softmax(torch.from_numpy(x), dim=axis).numpy()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return box["y"]
'''

NEAR_MISS = '''
def score_variance(d_k, n_samples, rng):
    return d_k * 1.001
'''


class VerdictAttackBuilder(ClassBuilder):
    def _tests(self, solution_id):
        return self._tests_of(solution_id)

    def build_attacks(self, dest: Path) -> dict[str, dict[str, Row]]:
        """Write the class to ``dest``; return {student: {exercise: Row}}."""
        dest.mkdir(parents=True, exist_ok=True)
        full = self.full_marks(Row, "", "")
        expected: dict[str, dict[str, Row]] = {}

        put = self.writer(dest)

        def zeros(flag, diagnosis=None, status="graded", on=None):
            """All 0; the flag on the rows of ``on`` (default: every row, notebook-wide)."""
            return {g: Row("0", status, diagnosis, flag if on is None or g in on else "")
                    for g in self.grade_ids}

        put("correct", self.answered())
        expected["correct"] = dict(full)

        for student, attack in ATTACKS.items():
            nb = self.wrong()
            for cell in nb.cells:
                if _nbg(cell).get("grade_id") == self.first:
                    if attack.startswith("%%"):
                        idx = nb.cells.index(cell)
                        nb.cells.insert(idx, new_code_cell(attack))
                    else:
                        cell.source = attack + cell.source
                    break
            put(student, nb)
        expected["time_transformer"] = zeros("rewrites cells (input transformer)",
                                             "output missing")
        # flagged on the exercise whose answer cell holds the attack (the first one)
        first = self._tests_of(self.first)
        expected["getattr_alias"] = zeros("alias of getattr", on=first)
        expected["hex_exec"] = zeros("decodes encoded code", on=first)
        expected["torch_library"] = zeros("operator re-registration (torch.library)", on=first)
        expected["frames"] = zeros("introspection of frames", on=first)

        nb = self.wrong()
        setup = next(i for i, c in enumerate(nb.cells) if _nbg(c).get("grade_id") == "setup")
        nb.cells.insert(setup, new_code_cell(PATCHED_ISCLOSE))
        put("above_setup", nb)
        expected["above_setup"] = zeros("a code cell above the setup cell")

        softmax, variance = EX["softmax"], EX["score_variance"]
        by_name = {softmax.solution_id: THREAD_SOFTMAX, variance.solution_id: NEAR_MISS}
        nb = self.answered(lambda gid, src: THREAD_SOFTMAX if gid == softmax.solution_id else src)
        put("thread_builtin", nb)
        expected["thread_builtin"] = dict(full)
        expected["thread_builtin"][softmax.grade_id] = Row("0", "graded",
                                                           "used forbidden built-in softmax")
        # 3.1 calls the student's softmax, which fails 2.1 but returns the given softmax's
        # values: 3.1's own results are right, and one mistake costs one exercise (full row)

        nb = self.answered(lambda gid, src: by_name[gid] if gid == variance.solution_id else src)
        put("near_miss", nb)
        expected["near_miss"] = dict(full)
        expected["near_miss"][variance.grade_id] = Row(
            "0", "graded", "returned d_k instead of measuring it")

        nb = self.wrong()
        locked = (EX["dot_product_scores"].grade_id, EX["softmax"].grade_id)
        for cell in nb.cells:
            gid = _nbg(cell).get("grade_id")
            if gid == locked[0]:
                cell.metadata["nbgrader"] = dict(copy.deepcopy(_nbg(cell)), solution=True)
            if gid == locked[1]:
                cell.metadata["nbgrader"] = dict(copy.deepcopy(_nbg(cell)), grade=False)
        put("flags_changed", nb)
        expected["flags_changed"] = zeros("nbgrader flags of locked cell",
                                          on=set(locked))
        for gid in locked:
            expected["flags_changed"][gid] = Row(
                "0", "graded (test cell restored: flags changed)", None,
                "nbgrader flags of locked cell")
        return expected
