"""One grading process per student and the class's kernel cache (issue 16, item 5): what
they change is only how long grading takes, never a row.

- every assignment of a student is graded by one nbgrader process (``nbgrader_main
  autograde+feedback STUDENT A B ...``), one after another, in the student's one course folder;
- the graded kernels' stubbed packages and the probes' case inputs are built once per class
  (``kernel_package.build_cache``) and linked into every student's probe folder.
"""

from __future__ import annotations

import os
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
def one_student(tmp_path_factory):
    """One student with two notebooks, graded with two workers (the class's common setting)."""
    root = tmp_path_factory.mktemp("parts")
    info = notebook_info(tmp_path_factory, SOURCE, ASSIGNMENTS)
    dest = root / "class" / STUDENT
    dest.mkdir(parents=True)
    for a in ASSIGNMENTS:
        nbformat.write(ClassBuilder(info[a][0]).answered(), dest / f"{a}.ipynb")
    out = root / "out"
    proc = subprocess.run(
        grade_cmd(root / "class", out, SOURCE, "--workers", "2", "--cell-timeout", "60",
                  "--assignment", *ASSIGNMENTS),
        cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"out": out, "rows": read_csv(out / "grades.csv"), "info": info}


def test_every_exercise_of_a_right_answer_is_graded_in_full(one_student):
    info = one_student["info"]
    want = [(nb.name, g.grade_id, f"{g.max_points:g}", "graded")
            for a in ASSIGNMENTS for nb in info[a] for g in nb.grade_cells]
    got = [(r["notebook"], r["exercise"], r["points"], r["status"]) for r in one_student["rows"]]
    assert got == want


def test_one_process_grades_every_assignment_in_turn(one_student):
    out = one_student["out"]
    students = out / ".work" / "students"
    assert sorted(p.name for p in students.iterdir()) == [STUDENT]  # one course folder
    work = students / STUDENT
    assert sorted(p.name for p in (work / "logs").iterdir()) == ["grading.log"]
    log = (work / "logs" / "grading.log").read_text()
    first, second = ASSIGNMENTS
    # one after the other: the second begins after the first's result
    assert log.index(f"==== {first} autograde: ok") < log.index(f"==== {second} begin"), log
    for a in ASSIGNMENTS:  # each assignment's result in a file of its own
        assert AssignmentResult.read(work, a).autograde == "ok"
        assert (students / STUDENT / "autograded" / STUDENT / a / f"{a}.ipynb").exists()
        assert (out / "feedback" / STUDENT / a / f"{a}.html").exists()
        assert (out / "autograded" / STUDENT / a / f"{a}.ipynb").exists()  # formgrader's copy


def test_kernel_packages_and_case_inputs_are_built_once_per_class(one_student):
    out = one_student["out"]
    (template,) = out.glob(".work/template-*")
    # one build per assignment, named by its sources (in the template, a copy of the
    # per-user cache's), and the students' kernels read their inputs from it: no build of
    # their own
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


def test_the_kernels_font_list_is_built_with_the_class_template(one_student):
    # built beside the kernel packages while the template is made (sandbox.bwrap.font_cache),
    # not by the first student's grading
    assert list(one_student["out"].glob(".work/template-*/kernels/mpl/fontlist-v*.json"))


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
            "print(nbgrader.api.get_alembic_version() == nbgrader_patches.schema_head())")
    out = _fresh(code).splitlines()
    assert out == ["[]", "True"], out


@pytest.fixture(scope="module")
def stock_nbgrader():
    """nbgrader's own schema head (``alembic heads``), asked in a fresh interpreter before
    anything of ours is imported."""
    from autograder.grading.parent.course import tool_env

    code = ("import nbgrader.api as a\n"  # nbgrader's own question: `alembic heads`
            "print(a.get_alembic_version())\n")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True, env=tool_env()).stdout.strip()


def test_the_schema_head_read_from_the_scripts_is_alembic_s(stock_nbgrader):
    from autograder.grading.nbgrader_patches import alembic_head, schema_head

    out = stock_nbgrader
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
            "print(kernel_package.code_digest())\n")

    def digest(package):
        return subprocess.run([sys.executable, "-c", code, str(package)], cwd=REPO,
                              capture_output=True, text=True, check=True).stdout.strip()

    copy = tmp_path / "autograder"
    shutil.copytree(exercises.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert digest(copy) == digest(exercises.PACKAGE)  # the code, not where it lies
    module = copy / "checks" / "attention.py"
    module.write_text(module.read_text() + "\n# changed\n")
    assert digest(copy) != digest(exercises.PACKAGE)
