"""One grading process per student, in lanes over idle workers, and the class's kernel cache
(issue 16, item 5): what they change is only how long grading takes, never a row.

- every assignment of a student is graded by one nbgrader process (``nbgrader_main
  autograde+feedback STUDENT A B ...``); with fewer students than workers the assignments are
  split into lanes (``A --lane B``) that this one process grades at the same time, each lane in
  a thread of its own with its own kernels, in the student's one course folder;
- the graded kernels' stubbed packages and the probes' case inputs are built once per class
  (``kernel_package.build_cache``) and linked into every student's probe folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.grading import exercises
from autograder.grading.assignment_result import AssignmentResult
from autograder.grading.autograde import kernel_package

from helpers.synthetic_class import ClassBuilder
from helpers.synthetic_class.shared import grade_cmd, notebook_info, read_csv

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "solutions"
ASSIGNMENTS = ["01_attention", "02_masking"]
STUDENT = "s1"


@pytest.fixture(scope="module")
def one_student_two_ways(tmp_path_factory):
    """One student with two notebooks, graded with one worker (one process, one after the
    other) and with two (one process, two lanes at the same time)."""
    root = tmp_path_factory.mktemp("parts")
    info = notebook_info(tmp_path_factory, SOURCE, ASSIGNMENTS)
    dest = root / "class" / STUDENT
    dest.mkdir(parents=True)
    for a in ASSIGNMENTS:
        nbformat.write(ClassBuilder(info[a][0]).answered(), dest / f"{a}.ipynb")
    got = {}
    for workers in ("1", "2"):
        out = root / f"out{workers}"
        proc = subprocess.run(
            grade_cmd(root / "class", out, SOURCE, "--workers", workers, "--cell-timeout", "60",
                      "--assignment", *ASSIGNMENTS),
            cwd=REPO, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-3000:]
        got[workers] = {"out": out, "rows": read_csv(out / "grades.csv"), "info": info}
    return got


def _core(rows):
    return [{k: r[k] for k in ("student", "notebook", "exercise", "points", "status",
                               "diagnosis")} for r in rows]


def test_one_process_and_two_processes_give_the_same_rows(one_student_two_ways):
    one, two = one_student_two_ways["1"], one_student_two_ways["2"]
    assert _core(one["rows"]) == _core(two["rows"])
    info = one["info"]
    want = [(nb.name, g.grade_id, f"{g.max_points:g}", "graded")
            for a in ASSIGNMENTS for nb in info[a] for g in nb.grade_cells]
    assert [(r["notebook"], r["exercise"], r["points"], r["status"]) for r in one["rows"]] == want


def test_one_worker_grades_every_assignment_in_one_process(one_student_two_ways):
    work = one_student_two_ways["1"]["out"] / ".work" / "students" / STUDENT
    logs = sorted(p.name for p in (work / "logs").iterdir())
    assert logs == ["grading.log"]
    log = (work / "logs" / "grading.log").read_text()
    for a in ASSIGNMENTS:
        assert f"==== {a} begin" in log and f"==== {a} autograde: ok" in log
    # a core left idle by the one worker: each kernel was started ahead (sandbox/prestart.py),
    # with a sandbox spec of its own
    ahead = sorted(p.name for p in (work / ".grader").glob("sandbox-[0-9]*.json"))
    cores = os.cpu_count() or 1
    assert ahead == (["sandbox-1.json", "sandbox-2.json"] if cores > 1 else []), ahead


def test_two_workers_grade_the_student_in_two_lanes_of_one_process(one_student_two_ways):
    out = one_student_two_ways["2"]["out"]
    students = out / ".work" / "students"
    assert sorted(p.name for p in students.iterdir()) == [STUDENT]  # one course folder
    work = students / STUDENT
    assert sorted(p.name for p in (work / "logs").iterdir()) == ["grading.log"]
    log = (work / "logs" / "grading.log").read_text()
    first, second = ASSIGNMENTS
    # at the same time: the second lane began before the first lane's notebook was graded
    assert log.index(f"==== {second} begin") < log.index(f"==== {first} result"), log[:3000]
    for a in ASSIGNMENTS:  # each lane's result in a file of its own, and one log block
        assert AssignmentResult.read(work, a).autograde == "ok"
        block = re.search(rf"^==== {a} result$.*?^==== {a} autograde: ok$", log, re.M | re.S)
        assert block, log[-2000:]
        assert f"==== {[b for b in ASSIGNMENTS if b != a][0]} " not in block.group(0)
    # each lane's kernels came from its own queue, each with a spec file of its own
    specs = sorted((work / ".grader").glob("sandbox-[0-9]*.json"))
    assert len(specs) == len(ASSIGNMENTS), specs
    for a in ASSIGNMENTS:
        assert (students / STUDENT / "autograded" / STUDENT / a / f"{a}.ipynb").exists()
        assert (out / "feedback" / STUDENT / a / f"{a}.html").exists()
        assert (out / "autograded" / STUDENT / a / f"{a}.ipynb").exists()  # formgrader's copy


def test_kernel_packages_and_case_inputs_are_built_once_per_class(one_student_two_ways):
    out = one_student_two_ways["2"]["out"]
    (template,) = out.glob(".work/template-*")
    # one build per assignment, named by its sources (the folder may be the session's store,
    # COURSE_KERNEL_STORE, holding other classes' builds too), and the students' kernels
    # read their inputs from it: no build of their own
    caches = [template / "kernels" / kernel_package.cache_key(
        [nbformat.read(q, as_version=4) for q in sorted((template / "source" / a).glob("*.ipynb"))])
        / "spec.json" for a in ASSIGNMENTS]
    assert all(c.exists() for c in caches), caches
    links = {os.path.realpath(q) for q in out.glob(".work/students/*/.grader/probe/*/in")}
    assert links and links <= {os.path.realpath(c.parent / "in") for c in caches}, links
    for spec in caches:
        inputs = sorted(p.name for p in (spec.parent / "in").iterdir())
        assert inputs and all(n.endswith(".json") for n in inputs)
        # the kernel's package is the stub: no expected values in its check modules
        stub = (spec.parent / "kernel" / "autograder" / "checks" / "attention.py").read_text()
        real = (exercises.PACKAGE / "checks" / "attention.py").read_text()
        assert "Case(" in real and "Case(" not in stub and "check_softmax = " in stub


def test_the_kernels_font_list_is_built_with_the_class_template(one_student_two_ways):
    # built beside the kernel packages while the template is made (sandbox.bwrap.font_cache),
    # not by the first student's grading
    for workers in ("1", "2"):
        out = one_student_two_ways[workers]["out"]
        assert list(out.glob(".work/template-*/kernels/mpl/fontlist-v*.json")), workers


def _fresh(code: str) -> str:
    """What ``code`` prints in a fresh interpreter (its imports start from nothing)."""
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout


def test_the_parent_reads_the_exercise_table_without_importing_the_checks():
    # the parent's first use of the table (flags of a submitted notebook) before its first
    # student: importing the check package would import torch there (2 s)
    code = ("import sys\nfrom autograder.grading import exercises\n"
            "mods = sorted(exercises.converted())\n"
            "print(mods, 'torch' in sys.modules, 'autograder.checks' in sys.modules)\n"
            "from autograder.checks.table import TABLES\n"
            "print(mods == sorted(ch.module for ch in TABLES.values()))")
    out = _fresh(code).splitlines()
    assert out[0].endswith("False False") and "'attention'" in out[0], out
    assert out[1] == "True", out
    # the parent's students start in threads, each reading the table first
    code = ("import threading\nfrom autograder.grading import exercises\n"
            "gate, got = threading.Barrier(8), []\n"
            "def read():\n    gate.wait()\n    got.append(exercises.converted())\n"
            "ts = [threading.Thread(target=read) for _ in range(8)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "print(len(got), len(set(got)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True)
    assert out.stdout.split() == ["8", "1"] and "Error" not in out.stderr, out


def test_course_grade_starts_without_importing_nbgrader():
    # nbgrader's package imports its server extensions (2 s): the parent needs its gradebook
    # code only after the first student (imported meanwhile in a thread: nbgrader_patches.warm)
    code = ("import sys\nimport autograder.grade\n"
            "from autograder.grading import exercises, nbgrader_patches\n"
            "from autograder.grading.autograde import nbgrader_main, verdict\n"
            "from autograder.grading.parent import course, dispatch, report, results, student\n"
            "nbgrader_patches.ensure_cached_head(); exercises.converted()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nbgrader', 'torch')))\n"
            "nbgrader_patches.warm().join(120)\n"
            "import nbgrader.api\n"
            "print(nbgrader.api.get_alembic_version() == nbgrader_patches.schema_head())\n"
            "from autograder.grading.parent.results import NotGradedCsvExport  # its old place\n"
            "from autograder.grading.parent.export_csv import NotGradedCsvExport as new\n"
            "print(NotGradedCsvExport is new)")
    out = _fresh(code).splitlines()
    assert out == ["[]", "True", "True"], out


SETENV_CODE = (  # for test_nbgrader_s_environment_block_is_shared_by_two_lanes
    "import os, threading\nimport nbgrader.utils as u\n"
    "from autograder.grading.nbgrader_patches import share_setenv\n"
    "def overlap():\n"
    "    a, b = u.setenv(NBGRADER_EXECUTION='autograde'), "
    "u.setenv(NBGRADER_EXECUTION='autograde')\n"
    "    a.__enter__(); b.__enter__(); a.__exit__(None, None, None)\n"
    "    inside = os.environ.get('NBGRADER_EXECUTION')\n"
    "    try:\n        b.__exit__(None, None, None)\n"
    "    except KeyError:\n        return inside, 'KeyError'\n"
    "    return inside, os.environ.get('NBGRADER_EXECUTION')\n"
    "print(overlap())\nshare_setenv(); share_setenv()\nprint(overlap())\n"
    "os.environ['NBGRADER_EXECUTION'] = 'before'\nprint(overlap())")


@pytest.fixture(scope="module")
def stock_nbgrader():
    """One fresh interpreter for the two tests that ask stock nbgrader (saving one start and
    one import of nbgrader, ~3 s of CPU): first nbgrader's own schema head (``alembic
    heads``, before anything of ours is imported), then :data:`SETENV_CODE` (nbgrader's
    ``setenv`` untouched until it patches it: the head's lookup does not use it).
    (the head, the lines SETENV_CODE printed)"""
    from autograder.grading.parent.course import tool_env

    code = ("import nbgrader.api as a\n"  # nbgrader's own question: `alembic heads`
            "print(a.get_alembic_version())\n" + SETENV_CODE)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True, env=tool_env()).stdout.strip().splitlines()
    return out[0], out[1:]


def test_the_schema_head_read_from_the_scripts_is_alembic_s(stock_nbgrader):
    from autograder.grading.nbgrader_patches import alembic_head, schema_head

    out = stock_nbgrader[0]
    assert schema_head() == alembic_head() == out and len(out) == 12, out


def test_the_trusted_side_imports_its_checks_while_autograde_runs():
    code = ("import sys, nbformat\nfrom autograder.grading.autograde import verdict\n"
            "src = nbformat.read('solutions/02_masking/02_masking.ipynb', as_version=4)\n"
            "t = verdict.warm([src])\nt.join(120)\n"
            "print(t.daemon, 'autograder.checks.masking' in sys.modules,"
            " 'autograder.checks.bpe' in sys.modules)")
    out = _fresh(code).split()
    assert out == ["True", "True", "False"], out


def test_a_student_probe_links_the_class_inputs_and_a_changed_source_gets_its_own(tmp_path):
    src = nbformat.read(SOURCE / "01_attention" / "01_attention.ipynb", as_version=4)
    cache = tmp_path / "kernels"
    specs = [kernel_package.prepare(tmp_path / s, [src], cache) for s in ("a", "b")]
    ins = {os.path.realpath(Path(s["probe"]) / "in") for s in specs}
    assert len(ins) == 1 and len(list(cache.iterdir())) == 1  # built once, shared
    built = Path(ins.pop())
    keys = [k for ks in exercises.converted_keys(src).values() for k in ks]
    assert sorted(p.stem for p in built.iterdir()) == sorted(keys)
    assert all(Path(s["package"]).is_relative_to(cache) for s in specs)
    # compiled once with the cache: a kernel may not write bytecode, so it would compile each
    # module it imports at every start
    import importlib.util

    sources = list(Path(specs[0]["package"]).rglob("*.py"))
    assert sources and all(Path(importlib.util.cache_from_source(str(q))).exists()
                           for q in sources)
    for s in specs:  # no records folder: the records reach the grader as messages
        assert not (Path(s["probe"]) / "out").exists()
    kernel_package.write_inputs(tmp_path / "a", "01_attention")  # nothing left to write: no error
    changed = nbformat.read(SOURCE / "01_attention" / "01_attention.ipynb", as_version=4)
    changed.cells[0].source += "\n(changed)"
    kernel_package.prepare(tmp_path / "c", [changed], cache)
    assert len(list(cache.iterdir())) == 2


def test_the_cache_key_follows_the_code(tmp_path):
    """A changed check module (or reference, or torch) never reuses an older class's cache."""
    import shutil

    code = ("import sys; from pathlib import Path\n"
            "from autograder.grading.autograde import kernel_package\n"
            "kernel_package.PACKAGE = Path(sys.argv[1])\n"
            "print(kernel_package._code_digest())\n")

    def digest(package):
        return subprocess.run([sys.executable, "-c", code, str(package)], cwd=REPO,
                              capture_output=True, text=True, check=True).stdout.strip()

    copy = tmp_path / "autograder"
    shutil.copytree(exercises.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert digest(copy) == digest(exercises.PACKAGE)  # the code, not where it lies
    module = copy / "checks" / "attention.py"
    module.write_text(module.read_text() + "\n# changed\n")
    assert digest(copy) != digest(exercises.PACKAGE)


def test_nbgrader_s_environment_block_is_shared_by_two_lanes(stock_nbgrader):
    """autograde sets NBGRADER_EXECUTION for the time it runs a notebook; two lanes' blocks
    overlap, and the first to end must neither remove it under the second nor make the
    second's end fail (nbgrader's own setenv deletes it: KeyError). (SETENV_CODE, run in a
    fresh interpreter: :func:`stock_nbgrader`.)"""
    out = stock_nbgrader[1]
    assert out == ["(None, 'KeyError')", "('autograde', None)", "('autograde', 'before')"], out
