"""Issue 30's notebook-01 attacks, graded once in the sandbox.

See ``tests/helpers/adversarial/dodge_class.py`` for the students and what each must get. Every
CSV row is checked for its exact points and status (a status prefix or pattern where the
builder says so), the start of its diagnosis and its ``flagged`` column; the filler's share of
the output folder and the time the hidden-cells notebook took are measured after grading.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from autograder.grading.sandbox import bwrap_path

from helpers.adversarial.dodge_class import (
    FILLER_SLACK,
    HIDDEN_SECONDS,
    DodgeAttackBuilder,
    Row,
    mismatch,
)
from helpers.adversarial.graded import graded_once
from helpers.synthetic_class.shared import graded_dir

ASSIGNMENT = "01_attention"
NAME = "dodge-class"
STUDENTS = ["correct", "rewrite_records", "rewrite_mutated", "filler", "fake_log_block",
            "raise_memory", "exit_kernel", "display_flood", "malformed_records",
            "forged_record", "hidden_cells", "jitter_stat"]


def _share(out: Path, students: list[str]) -> dict[str, int]:
    """{student: bytes of the regular files under ``out`` with the student's id as a folder
    of their path} (``.work/students/<id>``, ``autograded/<id>``, ``feedback/<id>`` ...): where
    a student's grading can leave files. Links are not followed."""
    sizes = dict.fromkeys(students, 0)
    for folder, _dirs, files in os.walk(out):
        owners = [s for s in students if s in Path(folder).relative_to(out).parts]
        if not owners:
            continue
        total = 0
        for f in files:
            st = os.lstat(os.path.join(folder, f))
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
        for s in owners:
            sizes[s] += total
    return sizes


def _measure(out: Path):
    """``around`` for graded_once: after grading, each student's share of OUT and its grading
    seconds; then the filler's files are removed (gigabytes, when the attack works)."""

    def around(run):
        run()
        shares = _share(out, STUDENTS) if out.exists() else {}
        seconds = {}
        for s in STUDENTS:
            try:
                seconds[s] = json.loads((out / "results" / f"{s}.json").read_text())["seconds"]
            except (OSError, ValueError, KeyError):
                seconds[s] = None
        fill, fill_bytes = [], 0
        for p in out.rglob("fill-*.bin") if out.exists() else ():
            if p.is_file() and not p.is_symlink():
                fill.append(p)
                fill_bytes += p.stat().st_size
        folders = sorted({str(p.parent.relative_to(out)) for p in fill})
        for p in fill:
            p.unlink()
        return {"shares": shares, "student_seconds": seconds,
                "fill": {"files": len(fill), "bytes": fill_bytes, "folders": folders}}

    return around


@pytest.fixture(scope="session")
def dodge_class(tmp_path_factory):
    if bwrap_path() is None:
        pytest.fail("bubblewrap (bwrap) is missing: .ci/run installs it")
    args = ("--workers", "2", "--cell-timeout", "60", "--timeout", "600",
            "--memory", "3072", "--assignment", ASSIGNMENT)
    out = graded_dir(tmp_path_factory) / NAME / "out"
    return graded_once(
        tmp_path_factory, NAME, [ASSIGNMENT],
        lambda info, root: DodgeAttackBuilder(info[ASSIGNMENT][0]).build_attacks(
            root / "class"),
        args, row=Row, around=_measure(out))


def test_class_graded_in_the_sandbox(dodge_class):
    assert dodge_class["returncode"] == 0, dodge_class["stderr"]
    assert "runner: bubblewrap sandbox" in dodge_class["stderr"]
    assert sorted(dodge_class["expected"]) == sorted(STUDENTS)
    assert {r["student"] for r in dodge_class["rows"]} == set(STUDENTS)


@pytest.mark.parametrize("student", STUDENTS)
def test_every_row_exact(dodge_class, student):
    rows = {r["exercise"]: r for r in dodge_class["rows"] if r["student"] == student}
    expected = dodge_class["expected"][student]
    assert sorted(rows) == sorted(expected)
    wrong = {ex: m for ex in expected if (m := mismatch(rows[ex], expected[ex]))}
    assert not wrong, wrong


def test_filler_leaves_no_gigabytes(dodge_class):
    """The filler's files (4,000 x 1 MB in the record folder) stay out of OUT: its share of
    OUT (measured after grading) is at most 20 MB over the correct student's."""
    shares = dodge_class["shares"]
    extra = shares["filler"] - shares["correct"]
    assert extra <= FILLER_SLACK, (
        f"the filler's share of OUT is {extra / 2**20:.0f} MB over the correct student's "
        f"({dodge_class['fill']})")


def test_hidden_cells_graded_in_time(dodge_class):
    seconds = dodge_class["student_seconds"]["hidden_cells"]
    assert seconds is not None, "no result for hidden_cells"
    assert seconds < HIDDEN_SECONDS, f"hidden_cells took {seconds:.0f} s"
