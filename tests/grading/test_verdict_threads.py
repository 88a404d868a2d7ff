"""The trusted side in threads: a grading process judges a student's assignments in lanes
(threads of one process), and what it computes must not depend on how they interleave.

CI once graded a right answer "output differs": two lanes imported chapters 05's and 06's
check modules at once, both seed torch's global generator while computing their expected
values, and their draws interleaved. ``verdict`` runs the check library in one thread at a
time (imports, case inputs, judging).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import nbformat

from autograder.grading.autograde import kernel_package, verdict

from helpers.synthetic_class.shared import REPO

CHAPTERS = ("05_feed_forward_blocks", "06_transformer")


def source(chapter: str):
    return nbformat.read(REPO / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)


# In a fresh interpreter: import the two chapters' checks through ``verdict.warm`` (both at
# once, or one after the other), then print a digest of every expected value of each check.
EXPECTED = """
import hashlib, json, sys
import nbformat
sys.setswitchinterval(1e-6)  # threads take turns between almost every two bytecodes
from autograder.checks import _codec
from autograder.checks._core import get_check
from autograder.grading import exercises
from autograder.grading.autograde import verdict
sources = [nbformat.read(p, as_version=4) for p in sys.argv[2:]]
if sys.argv[1] == "together":
    for t in [verdict.warm([s]) for s in sources]:
        t.join()
else:
    for s in sources:
        verdict.warm([s]).join()
out = {}
for s in sources:
    for keys in exercises.converted_keys(s).values():
        for k in keys:
            c = get_check(k)
            data = json.dumps([_codec.encode(case.expected) for case in c.cases])
            out[k] = hashlib.sha256(data.encode()).hexdigest()
print(json.dumps(out))
"""


def expected_digests(how: str) -> dict:
    paths = [str(REPO / "solutions" / ch / f"{ch}.ipynb") for ch in CHAPTERS]
    run = subprocess.run([sys.executable, "-c", EXPECTED, how, *paths], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


def test_chapters_imported_by_two_lanes_at_once_expect_what_they_expect_alone():
    alone, together = expected_digests("alone"), expected_digests("together")
    assert len(alone) > 10 and sorted(together) == sorted(alone)
    assert {k for k in alone if together[k] != alone[k]} == set()


def test_case_inputs_written_by_lanes_at_once_equal_those_written_alone(tmp_path):
    sources = [source(ch) for ch in CHAPTERS]
    for t in [verdict.warm([s]) for s in sources]:
        t.join()
    kernel_package._write_case_inputs(sources, tmp_path / "alone")
    alone = {p.name: p.read_bytes() for p in (tmp_path / "alone").iterdir()}
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=kernel_package._write_case_inputs,
                                    args=(sources, tmp_path / f"lane{i}")) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    for i in range(3):
        got = {p.name: p.read_bytes() for p in (tmp_path / f"lane{i}").iterdir()}
        assert sorted(got) == sorted(alone)
        assert [k for k in alone if got[k] != alone[k]] == [], f"lane {i}"

