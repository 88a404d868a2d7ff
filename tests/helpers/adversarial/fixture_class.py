"""Attacks that need no transformer code, on the small fixture assignment (``99_fixture``).

Graded in one run (``test_sandbox_class.fixture_class``); each student comes with every CSV
row's expected points and status. ``first``/``last`` are the assignment's first and last
answer cells (one exercise each).

==============  ===============================================================  ==============
student         what the submission does                                         expected
==============  ===============================================================  ==============
correct         solution code (the control: the others cannot touch it)          full, graded
import_loop     right; the last answer writes a module that loops forever to     last: not
                ``/tmp`` and imports it                                          graded (cell
                                                                                 timeout)
huge_stdout     right; the first answer prints 400 MB to stdout                  by load: full;
                                                                                 or not graded:
                                                                                 output flood;
                                                                                 or ex 1 not
                                                                                 graded: cell
                                                                                 timeout
wide_stdout     right; the first answer prints 30 MB in 30 lines (under the      full, graded
                line limit of nbgrader's ``LimitOutput``)                        (feedback cut)
huge_file       right; the first answer writes a 1 GB file to ``/tmp`` and to    full, graded
                its working folder (errors caught)
network         right only if no connection could be made: to a port the test    full, graded
                listens on at 127.0.0.1 and to an external address
corrupter       right; first deletes and overwrites every file it can find in    full, graded
                its working folder (the notebook being graded), its parent and
                ``/tmp``
nbformat3       right, written as an nbformat v3 notebook                        full, graded
nbformat40      right, nbformat 4.0 (no cell ids)                                full, graded
renamed         right, as ``99_fixture (1).ipynb`` (as an LMS renames it)        full, graded
other_name      right, as ``homework.ipynb``                                     not graded:
                                                                                 no notebook
extra           right ``99_fixture.ipynb`` next to a wrong ``99_fixture_draft    full, graded
                .ipynb`` and an unrelated ``scratch.ipynb``
missing         no notebook, only a text file                                    not graded:
                                                                                 no notebook
past_time       right; then 19 added cells each sleeping 4.6 s (under the 5 s        every row 0,
                cell limit) run past the student's time limit (``TIME_LIMIT_S``) "ran past the
                in one of them: the student's doing (issue 47). The fixture's    time limit",
                checks run in the kernel, so no exercise has a sealed record:    flagged
                each scores 0 (a chapter's exercises score from their records)
==============  ===============================================================  ==============
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.grading.status import STOPPED_NO_RESULT

from helpers.synthetic_class import WRAP_WRONG, ClassBuilder, Expected, _fmt, _wrap

# spins (``pass``): the suite's CPU-bound loop that the cell timeout interrupts (the synthetic
# class's loops sleep, helpers/synthetic_class LOOP); this class's cell limit is 5 s
IMPORT_LOOP = """import os
os.chdir("/tmp")  # the working folder is read-only; '' on sys.path is the cwd
with open("course_helpers.py", "w") as _f:
    _f.write("while True:\\n    pass\\n")
import course_helpers
"""
# The class's --timeout for each student (was 120 s): every second of it is a second of wall
# time past_time costs the suite. Measured at load 13-17 on 2 cores (with 60 s): past_time's
# first sleep began under 5 s in (the limit fell in its 13th sleep, far from the course's
# cells); the other students took 8-17 s, the first on each worker 35 s (the kernels'
# warm-up): 75 s leaves twice that.
TIME_LIMIT_S = 75
PAST_TIME = "import time\ntime.sleep(4.6)\n"  # under the cell limit of 5 s
PAST_TIME_CELLS = TIME_LIMIT_S // 4 + 1  # 4.6 s each: past the limit however fast the rest runs
HUGE_STDOUT = "for _i in range(400):\n    print('x' * 2**20)\n"  # 400 MB
WIDE_STDOUT = "for _i in range(30):\n    print('x' * 2**20)\n"  # 30 MB
HUGE_FILE = """import os
_chunk = b"x" * 2**24
for _path in ("/tmp/huge.bin", "huge.bin"):
    try:
        with open(_path, "wb") as _f:
            for _i in range(64):  # 1 GB
                _f.write(_chunk)
    except OSError as _e:
        print(_path, type(_e).__name__, _e)
"""
NETWORK = """import socket
_connected = []
for _addr in (("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)):
    _s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    _s.settimeout(3)
    try:
        _s.connect(_addr)
        _connected.append(_addr)
    except OSError as _e:
        print(_addr, type(_e).__name__, _e)
    finally:
        _s.close()
"""
CORRUPT = """import glob, os
for _pat in ("*", ".*", "../*", "../*/*", "/tmp/*"):
    for _p in glob.glob(_pat):
        for _act in (lambda p: open(p, "w").write("{}"), os.remove):
            try:
                _act(_p)
            except OSError:
                pass
"""


class FixtureAttackBuilder(ClassBuilder):
    def build_attacks(self, dest: Path, port: int) -> dict[str, dict[str, Expected]]:
        """Write the class to ``dest``; {student: {exercise: Expected}}, huge_stdout not in it."""
        dest.mkdir(parents=True, exist_ok=True)
        name = self.nb.name
        full = self.full_marks()
        last_tests = self._tests_of(self.last)
        exp: dict[str, dict[str, Expected]] = {}

        write = self.writer(dest)

        def put(student, nb, filename=None, version=4):
            write(student, nb, filename, version=version)

        def first_with(code):
            return self.answered(lambda g, s: code + s if g == self.first else s)

        put("correct", self.answered())
        exp["correct"] = dict(full)

        put("import_loop", self.answered(lambda g, s: IMPORT_LOOP + s if g == self.last else s))
        exp["import_loop"] = self.expect(
            lambda g: Expected(_fmt(g.max_points), "graded"),
            # the loop is the student's own cell: interrupted, the exercise scores as its test
            # cell ran after it (0: the function was never defined), flagged (issue 47)
            {t: Expected("0", "graded") for t in last_tests})

        put("huge_stdout", first_with(HUGE_STDOUT))
        exp["huge_stdout"] = dict(full)
        put("wide_stdout", first_with(WIDE_STDOUT))
        exp["wide_stdout"] = dict(full)
        put("huge_file", first_with(HUGE_FILE))
        exp["huge_file"] = dict(full)

        spoil = "".join(f"\nif _connected:\n    {n} = _course_make_wrong({n})\n"
                        for n in ("mean_square",))
        put("network", self.answered(
            lambda g, s: WRAP_WRONG + NETWORK.format(port=port) + s + spoil
            if g == self.first else s))
        exp["network"] = dict(full)

        put("corrupter", first_with(CORRUPT))
        exp["corrupter"] = dict(full)

        put("nbformat3", nbformat.convert(self.answered(), 3), version=3)
        exp["nbformat3"] = dict(full)

        old = self.answered()
        old.nbformat_minor = 0
        for cell in old.cells:
            cell.pop("id", None)
        put("nbformat40", old)
        exp["nbformat40"] = dict(full)

        put("renamed", self.answered(), filename=f"{name} (1).ipynb")
        exp["renamed"] = dict(full)

        not_found = self.expect(lambda g: Expected("", f"not graded: no {name}.ipynb"))
        put("other_name", self.answered(), filename="homework.ipynb")
        exp["other_name"] = dict(not_found)

        put("extra", self.answered())
        put("extra", self.answered(lambda g, s: _wrap(s, WRAP_WRONG, "_course_make_wrong")),
            filename=f"{name}_draft.ipynb")
        put("extra", self.release(), filename="scratch.ipynb")
        exp["extra"] = dict(full)

        slow = self.answered()
        slow.cells += [nbformat.v4.new_code_cell(PAST_TIME) for _ in range(PAST_TIME_CELLS)]
        put("past_time", slow)
        exp["past_time"] = self.expect(lambda g: Expected(
            "0", f"{STOPPED_NO_RESULT}ran past the time limit of {TIME_LIMIT_S} s in cell "))

        (dest / "missing").mkdir()
        (dest / "missing" / "notes.txt").write_text("I forgot to attach it")
        exp["missing"] = dict(not_found)
        return exp
