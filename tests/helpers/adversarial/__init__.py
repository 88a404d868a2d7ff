"""An adversarial class on notebook 01: students who try to cheat or to harm the grader.

Built from the notebook's source and release (``synthetic_class.ClassBuilder``), so it never
drifts from the notebook. Each student comes with every CSV row's expected points and status.

================  =========================================================  ===================
student           what the submission does                                   expected
================  =========================================================  ===================
correct           solution code (the control)                                full, graded
patcher           wrong answers; each answer cell also cheats, one way per   0 (ex 1 from its
                  exercise (patching ``builtins`` breaks its own kernel),    record, the others
                                                                             no result), each
                                                                             row flagged
                  exercise: patches numpy/torch comparisons, ``builtins``,
                  the check module's internals, rebinds a ``check_*``
                  function, installs an IPython input transformer that
                  blanks later cells, silences tracebacks via
                  ``get_ipython()``, ``__import__`` under a computed name,
                  ``getattr`` of a computed name + ``eval``
test_cells        ex 4: wrong, its test copied before it as ``pass``         0, restored: edited
                  ex 8: wrong, test's grade id renamed, source ``pass``      0, restored: deleted
                  ex 5: right, test claims 100 points                        4 (of 4), graded
                  ex 7: right, test moved to the top of the notebook         0, graded
                  the rest right                                             full, graded
exits             wrong; ``raise SystemExit``, ``sys.exit(0)``, ``raise      0, graded
                  KeyboardInterrupt`` at the top of answers 1-3, fake
                  "all checks passed" output in the others
os_exit           right, ``os._exit(0)`` first in the last answer            full from the
                                                                             records, the last
                                                                             0 (kernel ended)
readers           wrong, except an answer that is right only if the code     0, graded
                  could read: the solutions / the course folder's source
                  notebooks (ex 1), a gradebook (ex 2), another student's
                  submission (ex 3), ``/root`` (ex 4)
kill_parent       right; kills its parent process, pid 1 and every process   full, graded
                  named like the grader it can see
zz_fork_bomb      right; the last answer starts a fork bomb (``while True:     last: no points;
                  os.fork()``): the sandbox's process limit stops it        others vary (see
                                                                             below)
background        right; starts a detached process meant to outlive          full, graded (and
                  grading                                                    no process left)
================  =========================================================  ===================
"""

from __future__ import annotations

import copy
from pathlib import Path

from autograder.grading.status import STOPPED_NO_RESULT, STOPPED_RECORDED

from helpers.synthetic_class import WRAP_WRONG, ClassBuilder, Expected, _fmt, _nbg, _wrap

MARKER = "course-grade-adversarial-daemon"  # in the command line of the background process

PATCHES = [
    # 1: numpy and torch comparisons
    "import numpy as np\nimport torch\nnp.allclose = lambda *a, **k: True\n"
    "torch.allclose = lambda *a, **k: True\ntorch.isclose = lambda a, b, **k: a == a\n"
    "torch.Tensor.__eq__ = lambda self, other: True\n",
    # 2: builtins
    "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.AssertionError = Warning\n",
    # 3: the check module's internals
    "import autograder.checks._core as _c\n_c._run = lambda *a, **k: None\n",
    # 4: a visible check rebound to a no-op
    "check_self_attention_unscaled = check_score_variance = lambda f: None\n",
    # 5: an input transformer that blanks every later cell (the test cells included)
    "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n",
    # 6: no traceback, no error output
    "_ip = get_ipython()\n_ip.showtraceback = lambda *a, **k: None\n"
    "_ip.set_custom_exc((BaseException,), lambda *a, **k: None)\n",
    # 7: a module reached under a computed name, patched
    "_np = __import__('num' + 'py')\n_np.testing.assert_allclose = lambda *a, **k: None\n",
    # 8: a builtin reached by a computed getattr, then eval
    "_e = getattr(__builtins__, 'ev' + 'al')\n_e(\"__import__('torch').allclose\")\n",
]

EXITS = ["raise SystemExit(0)\n", "import sys\nsys.exit(0)\n", "raise KeyboardInterrupt\n"]
FAKE = 'print("All checks passed ✓  (16/16 points)")\n'

READ = """import glob, os
def _can_read(patterns, needle):
    for pat in patterns:
        for p in glob.glob(pat, recursive=True):
            try:
                with open(p, "rb") as f:
                    if needle in f.read():
                        print("read", p)
                        return True
            except OSError:
                pass
    return False
_leak = _can_read({patterns!r}, {needle!r})
"""
KILL = """import os, signal
for _pid in (os.getppid(), 1):
    try:
        os.kill(_pid, signal.SIGKILL)
    except OSError:
        pass
for _p in os.listdir("/proc"):
    try:
        _cmd = open(f"/proc/{_p}/cmdline", "rb").read()
        if b"nbgrader" in _cmd or b"autograder.grade" in _cmd or b"pytest" in _cmd:
            os.kill(int(_p), signal.SIGKILL)
    except (OSError, ValueError):
        pass
"""
BOMB = "import os\nwhile True:\n    os.fork()\n"  # the classic
DAEMON = f"""import subprocess
subprocess.Popen(["python3", "-c", "import time\\nwhile True: time.sleep(0.5)  # {MARKER}"],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


class AdversarialBuilder(ClassBuilder):
    def build_adversarial(self, dest: Path, out: Path, repo: Path) -> dict[str, dict]:
        """Write the class to ``dest`` (to be graded into ``out``); {student: {ex: Expected}}."""
        dest.mkdir(parents=True, exist_ok=True)
        sols = self.nb.solution_ids  # one answer cell per exercise, one test after each
        tests = self.grade_ids
        assert len(sols) == len(tests) >= len(PATCHES), (sols, tests)
        full = self.full_marks()
        zero = {t: Expected("0", "graded") for t in tests}
        exp: dict[str, dict] = {}

        put = self.writer(dest)

        def wrong(gid, src):
            return _wrap(src, WRAP_WRONG, "_course_make_wrong")

        put("correct", self.answered())
        exp["correct"] = dict(full)

        patch = dict(zip(sols, PATCHES, strict=False))
        put("patcher", self.answered(lambda g, s: patch.get(g, "") + wrong(g, s)))
        # Notebook 01 is judged outside the kernel, so no cell is refused: the patches run.
        # ``builtins.isinstance = lambda *a: True`` (answer 2) breaks the student's own kernel
        # (it stops answering), so nbgrader grades nothing. Exercise 1 is judged from the
        # record its test cell wrote before that (a wrong answer: 0); the others have no
        # record: 0, never a 'not graded' to hide behind (and each tampers with the grader:
        # flagged on its exercise, test_sandbox_class).
        exp["patcher"] = {t: Expected("0", STOPPED_NO_RESULT) for t in tests}
        exp["patcher"][tests[0]] = Expected("0", STOPPED_RECORDED)

        # test cells: ex 4 duplicated, ex 8 renamed (both answered wrong), ex 5 claims 100
        # points, ex 7 moved to the top of the notebook (both answered right)
        dup, renamed, points, moved = tests[3], tests[7], tests[4], tests[6]
        wrong_ids = {sols[3], sols[7]}
        nb = self.answered(lambda g, s: wrong(g, s) if g in wrong_ids else s)
        cells = []
        for c in nb.cells:
            gid = _nbg(c).get("grade_id")
            if gid == dup:
                copied = copy.deepcopy(c)
                copied.source = "pass  # all good"
                cells.append(copied)
            elif gid == renamed:
                c.metadata.nbgrader["grade_id"] = gid + "_mine"
                c.source = "pass"
            elif gid == points:
                c.metadata.nbgrader["points"] = 100
            cells.append(c)
        top = [c for c in cells if _nbg(c).get("grade_id") == moved]
        nb.cells = top + [c for c in cells if _nbg(c).get("grade_id") != moved]
        put("test_cells", nb)
        exp["test_cells"] = dict(full)
        exp["test_cells"][dup] = Expected("0", "graded (test cell restored: edited)")
        exp["test_cells"][renamed] = Expected("0", "graded (test cell restored: deleted)")
        exp["test_cells"][moved] = Expected("0", "graded")  # runs before anything is defined

        ex = dict(zip(sols, EXITS, strict=False))
        put("exits", self.answered(lambda g, s: ex[g] + wrong(g, s) if g in ex
                                   else FAKE + wrong(g, s) + "\n" + FAKE))
        exp["exits"] = dict(zero)

        # right answers; the last one kills the kernel first: the exercises before it keep
        # the verdicts their records got, the last has none (and no flag): not graded
        put("os_exit", self.answered(
            lambda g, s: "import os\nos._exit(0)\n" + s if g == sols[-1] else s))
        exp["os_exit"] = {g.grade_id: Expected(_fmt(g.max_points), STOPPED_RECORDED)
                          for g in self.nb.grade_cells}
        exp["os_exit"][tests[-1]] = Expected("0", f"{STOPPED_NO_RESULT}ended the kernel in cell")

        work = f"{out}/.work"
        reads = {
            sols[0]: ([f"{repo}/solutions/**/*.ipynb", f"{work}/**/source/**/*.ipynb",
                       f"{repo}/**/*.ipynb"], b"BEGIN HIDDEN TESTS"),
            sols[1]: ([f"{work}/**/gradebook.db", f"{out}/gradebook.db"], b"_hidden_check"),
            sols[2]: ([f"{dest}/correct/*.ipynb", f"{work}/students/correct/**/*.ipynb"],
                      b"def dot_product_scores(Q, K):"),  # (a JSON file: no raw newline)
            sols[3]: (["/root/.*", "/root/*"], b""),  # any readable file
        }

        def reader(g, s):
            if g not in reads:
                return wrong(g, s)
            patterns, needle = reads[g]
            # the right answer only if the read worked, else the wrapped (wrong) one
            spoil = "".join(f"\nif not _leak:\n    {n} = _course_make_wrong({n})\n"
                            for n in _defs_of(s))
            return (WRAP_WRONG + READ.format(patterns=patterns, needle=needle) + s + "\n"
                    + spoil)

        put("readers", self.answered(reader))
        exp["readers"] = dict(zero)

        put("kill_parent", self.answered(lambda g, s: KILL + s if g == sols[0] else s))
        exp["kill_parent"] = dict(full)

        # named to be graded last (students go in order): less overlap with the others
        put("zz_fork_bomb", self.answered(lambda g, s: BOMB + s if g == sols[-1] else s))
        # The process limit stops the bomb and no process outlives grading (asserted), but the
        # forked copies of the kernel share its sockets and may answer for it: the rows before
        # the bomb are graded (full) in some runs, 'not graded: a cell ran over' in others. No
        # row expectation here (see test_sandbox_class.test_fork_bomb_gains_nothing).

        put("background", self.answered(lambda g, s: DAEMON + s if g == sols[0] else s))
        exp["background"] = dict(full)
        return exp


def _defs_of(source: str) -> list[str]:
    import ast

    return [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]

