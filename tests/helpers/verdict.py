"""Run a check the way ``course-grade`` does for a converted chapter, without a kernel.

:func:`judged` writes the check's case inputs (``_judge.case_inputs``), lets the probe
(``_probe.run``, the graded kernel's side) record what ``fn`` returns, reads the record back
as the grader reads its sealed copy (``records.read_record``) and judges it
(``_judge.judge``): the verdict
only ever sees the JSON the probe wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.checks import _probe
from autograder.checks._judge import Verdict, case_inputs, judge
from autograder.grading.autograde import records


def record(folder: Path, check, fn, inputs: dict | None = None) -> dict | None:
    """The probe's record of ``fn``; the kernel is given ``inputs`` (default: the check's
    ``case_inputs``, as course-grade writes them once per class)."""
    (folder / "in").mkdir(exist_ok=True)
    (folder / "records").mkdir(exist_ok=True)
    (folder / "in" / f"{check.key}.json").write_text(
        json.dumps(case_inputs(check) if inputs is None else inputs))
    _probe.run(str(folder), check.key, fn,
               sink=(folder / "records" / f"{check.key}.json").write_text)
    return records.read_record(folder / "records", check.key)


def judged(check, fn) -> Verdict:
    with tempfile.TemporaryDirectory() as tmp:
        return judge(check, record(Path(tmp), check, fn))


# 07's naive BPE trainer: each catalogued mistake runs every case, hidden ones included,
# through the record (0.7-3.3 s of CPU each, 13 s for the 14). The unit tier judges this one
# from the record (its loop stops before the first merge: 0.06 s) and names every one in
# process (test_checks_chapters.py); tests/slow/test_verdict_bpe_naive.py judges the others
# from the record.
NAIVE_BPE_KEPT = "no merge made (the loop stops before its first merge)"


def assert_named_from_the_record(key: str, wrong, name: str) -> None:
    """The verdict of ``wrong`` judged from its record fails and names catalogue entry
    ``name``, in the words a student reads."""
    from autograder.checks import table

    v = judged(table.by_key(key).declaration(), wrong)
    assert not v.passed and v.diagnosis == name, v.message
    assert f"Likely mistake: {name}." in v.message


def kernel_package_prints(spec: dict, code: str, cwd: Path) -> str:
    """What ``code`` prints run by Python with the kernel's package
    (``kernel_package.prepare``'s ``spec``) on its path and its probe folder, as the graded
    kernel imports the checks."""
    env = dict(os.environ, PYTHONPATH=str(Path(spec["package"]).parent),
               COURSE_PROBE_DIR=spec["probe"])
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=cwd, check=True).stdout
