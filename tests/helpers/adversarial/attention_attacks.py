"""Notebook 01's three attack classes graded in one ``course-grade`` run: issue 14's students
(:mod:`.verdict_class`, read by tests/grading/test_verdict_class.py), issue 30's
(:mod:`.dodge_class`, read by tests/grading/test_dodge_class.py), issue 47's odd files
(:mod:`.odd_files`, read by tests/grading/test_odd_files.py) and issue 47's routes around the
record channel and "from scratch" (:mod:`.route_class`, read by test_dodge_class.py).

The two classes grade the same notebook with the same limits, so one run of both saves a
run's fixed cost (the parent, the warm grading process, the template: about 8 s of CPU) and
the second copy of the ``correct`` control (the same notebook in both classes: one student).
The other students' folders are distinct, and each student is graded in a sandbox of its own
as before; both modules are one xdist work unit (tests/conftest.py, ``SHARED_CLASSES``), so
whichever asks first grades the class and the other reads it back.

:func:`graded_attention_attacks` returns ``graded_once``'s record for the whole class plus
``classes`` ({"verdict": [students], "dodge": [students]}: whom each builder wrote) and what
``_measure`` adds after grading (the dodge tests' disk shares, per-student seconds, the
filler's files).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from .dodge_class import DodgeAttackBuilder, Row
from .graded import assert_graded_in_sandbox, graded_once, need_bwrap
from .odd_files import OddFileBuilder
from .route_class import RouteAttackBuilder
from .verdict_class import VerdictAttackBuilder
from helpers.synthetic_class.shared import graded_dir

ASSIGNMENT = "01_attention"
NAME = "attention-attacks"
ARGS = ("--workers", "2", "--cell-timeout", "60", "--timeout", "600",
        "--memory", "3072", "--assignment", ASSIGNMENT)


def share(out: Path, students) -> dict[str, int]:
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


def _measure(out: Path, classes: dict):
    """``around`` for graded_once: after grading, each student's share of OUT and its grading
    seconds; then the filler's files are removed (gigabytes, when the attack works)."""

    def around(run):
        run()
        students = sorted({s for names in classes.values() for s in names})
        shares = share(out, students) if out.exists() else {}
        seconds = {}
        for s in students:
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
        return {"shares": shares, "student_seconds": seconds, "classes": classes,
                "fill": {"files": len(fill), "bytes": fill_bytes, "folders": folders}}

    return around


def graded_attention_attacks(tmp_path_factory) -> dict:
    """Both classes in one folder, graded once (see the module's doc). ``expected`` holds
    :class:`.dodge_class.Row` for every student (issue 14's rows are the same four fields
    with ``match="exact"``, which test_verdict_class's ``mismatch`` does not read). Fails
    where bubblewrap is missing."""
    need_bwrap()
    out = graded_dir(tmp_path_factory) / NAME / "out"
    classes: dict[str, list[str]] = {}

    def build(info, root):
        nb = info[ASSIGNMENT][0]
        verdict = VerdictAttackBuilder(nb).build_attacks(root / "class")
        dodge = DodgeAttackBuilder(nb).build_attacks(root / "class")
        odd = OddFileBuilder(nb).build_attacks(root / "class")
        routes = RouteAttackBuilder(nb).build_attacks(root / "class")
        classes.update(verdict=sorted(verdict), dodge=sorted(dodge), odd=sorted(odd),
                       routes=sorted(routes))
        assert not set(odd) & (set(verdict) | set(dodge))
        assert not set(routes) & (set(verdict) | set(dodge) | set(odd))
        # the one student both write: the same notebook (the solution answers) and the same
        # rows, so one copy is graded for both
        both = set(verdict) & set(dodge)
        assert both == {"correct"}, both
        assert {g: r.__dict__ for g, r in verdict["correct"].items()} == \
            {g: {k: v for k, v in r.__dict__.items() if k != "match"}
             for g, r in dodge["correct"].items()}
        rows = {s: {g: Row(**r.__dict__) for g, r in e.items()} for s, e in verdict.items()}
        rows.update(dodge)
        rows.update(odd)
        rows.update(routes)
        return rows

    return graded_once(tmp_path_factory, NAME, [ASSIGNMENT], build, ARGS, row=Row,
                       around=_measure(out, classes))


def assert_class_in_the_run(result: dict, name: str, students) -> None:
    """The run finished in the sandbox, builder ``name`` ("verdict", "dodge", ...) wrote
    ``students``, and the CSV holds every student of the run (every class's), no other."""
    assert_graded_in_sandbox(result)
    assert result["classes"][name] == sorted(students)
    assert set(students) <= set(result["expected"])
    assert {r["student"] for r in result["rows"]} == set(result["expected"])
