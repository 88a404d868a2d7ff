"""The nbgrader course folders the grader works in, and what it knows about each assignment.

nbgrader is used as designed: a course directory with ``source/<assignment>/<nb>.ipynb`` (copied
from ``solutions/``), ``nbgrader generate_assignment`` to fill a gradebook and make the release,
then ``nbgrader autograde`` / ``generate_feedback`` on ``submitted/<student>/<assignment>/``.

The *template* course is built once per grading run (and cached by content hash). Each student
then gets a course folder of their own with a copy of the template gradebook, so no two processes
ever write the same SQLite file; the parent merges the results (``results.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..cells import grade_id, is_test, nbg
from ..config import GradeConfig
from ..env import KERNEL_STORE
from ..mathjax import FEEDBACK_URL, jupyter_path
from ..nbgrader_patches import ensure_cached_head

# the nbgrader command
NBGRADER = [sys.executable, "-m", "autograder.grading.autograde.nbgrader_main"]
REPO_CONFIG = Path(__file__).resolve().parents[2] / "nbgrader_config.py"
COURSE_ID = "course"
# the first line of every nbgrader_config.py course-grade writes: a file without it (nor the
# grader's preprocessors, which every older run's file names) is the instructor's: kept as is
MARK = "# written by course-grade on every run (course.write_config): edits here are lost"


def written_by_us(path: Path) -> bool:
    """Whether the ``nbgrader_config.py`` at ``path`` is course-grade's own (or absent).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> written_by_us(d / "nbgrader_config.py")
    True
    >>> _ = (d / "nbgrader_config.py").write_text("c.CourseDirectory.course_id = 'ml1'")
    >>> written_by_us(d / "nbgrader_config.py")
    False
    """
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return True
    return MARK in text or any(old in text for old in (  # the grader's preprocessors
        "_pp.autograde_preprocessors()", "'autograder.grading.preprocessors."))


def tool_env(base: dict | None = None) -> dict[str, str]:
    """The environment for nbgrader commands: this Python's bin folder first on PATH.

    nbgrader runs ``alembic`` (and Jupyter finds kernels) through PATH; a course run from its
    virtual environment without activating it must still find them there.
    """
    env = dict(os.environ if base is None else base)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")])
    return env


def write_config(root: Path, config: GradeConfig) -> None:
    """Write the nbgrader_config.py of a course folder at ``root``.

    It loads the course's own configuration (``autograder/nbgrader_config.py``: solution stubs,
    anything the check library needs), points every path into ``root``, applies ``config``
    (the cell timeout) and puts the grader's preprocessors into nbgrader's own lists
    (``preprocessors.autograde_preprocessors`` / ``feedback_preprocessors``).
    """
    lines = [
        MARK,
        "c = get_config()  # noqa: F821",
        f"load_subconfig({str(REPO_CONFIG)!r})  # noqa: F821" if REPO_CONFIG.exists() else "",
        "from autograder.grading.autograde import preprocessors as _pp",
        f"c.CourseDirectory.root = {str(root)!r}",
        f"c.CourseDirectory.course_id = {COURSE_ID!r}",
        "c.CourseDirectory.source_directory = 'source'",
        "c.CourseDirectory.release_directory = 'release'",
        "c.CourseDirectory.submitted_directory = 'submitted'",
        "c.CourseDirectory.autograded_directory = 'autograded'",
        "c.CourseDirectory.feedback_directory = 'feedback'",
        f"c.CourseDirectory.db_url = {'sqlite:///' + str(root / 'gradebook.db')!r}",
        # a cell running longer than this is interrupted; the rest of the notebook still runs
        f"c.Execute.timeout = {int(config.cell_timeout)}",
        "c.Execute.interrupt_on_timeout = True",
        # the kernel is killed once its notebook has run, not asked to exit and waited for:
        # its records are written by the cells themselves, before each cell's reply
        "c.Execute.shutdown_kernel = 'immediate'",
        # nbgrader's own lists, with the grader's preprocessors inserted (see preprocessors.py)
        "c.Autograde.autograde_preprocessors = _pp.autograde_preprocessors()",
        # demonstration cells of the course's own notebooks are not run (see demo.py)
        f"c.SkipDemoCells.source_root = {str(root / 'source')!r}",
        # deleted test cells come back from the gradebook (edited ones always do: checksums)
        "c.OverwriteCells.add_missing_cells = True",
        # feedback shows the student's cells and results, never the hidden tests' source
        "c.GenerateFeedback.preprocessors = _pp.feedback_preprocessors()",
    ]
    (root / "nbgrader_config.py").write_text("\n".join(line for line in lines if line) + "\n")


@dataclass
class GradeCell:
    grade_id: str
    max_points: float
    hidden: bool  # holds a ### BEGIN HIDDEN TESTS region
    solution_ids: list[str] = field(default_factory=list)  # answer cells this test grades


@dataclass
class Notebook:
    assignment: str
    name: str  # notebook id (file stem)
    source: nbformat.NotebookNode
    release: nbformat.NotebookNode
    grade_cells: list[GradeCell]
    solution_ids: list[str]
    # cell ids (grade ids) from the last answer cell up to each test: what it depends on
    span: dict[str, list[str]]

    @property
    def release_tests(self) -> dict[str, str]:
        """{grade_id: source} of the test cells as the students received them."""
        return {
            grade_id(c): c.source
            for c in self.release.cells
            if is_test(c)
        }


def describe(assignment: str, name: str, source, release) -> Notebook:
    """Read the graded cells of a source notebook and which answer cells each test depends on."""
    grade_cells, solution_ids, span = [], [], {}
    current_solutions: list[str] = []
    since_solution: list[str] = []
    after_test = False
    for i, cell in enumerate(source.cells):
        meta = nbg(cell)
        gid = meta.get("grade_id", f"cell-{i}")
        if meta.get("solution") and not meta.get("grade"):
            if after_test:  # a new exercise starts
                current_solutions, since_solution = [], []
                after_test = False
            current_solutions.append(gid)
            solution_ids.append(gid)
        since_solution.append(gid)
        if meta.get("grade"):
            after_test = True
            hidden = "BEGIN HIDDEN TESTS" in cell.source
            grade_cells.append(
                GradeCell(gid, float(meta.get("points", 0)), hidden, list(current_solutions))
            )
            span[gid] = list(since_solution)
    return Notebook(assignment, name, source, release, grade_cells, solution_ids, span)


def find_assignments(source_dir: Path) -> dict[str, list[Path]]:
    """{assignment: [notebook paths]} for every ``<assignment>/*.ipynb`` under ``source_dir``."""
    found = {}
    for folder in sorted(p for p in source_dir.iterdir() if p.is_dir()):
        nbs = sorted(
            p for p in folder.glob("*.ipynb") if not p.name.startswith(".")
        )
        if nbs:
            found[folder.name] = nbs
    return found


def source_ignore(assignment: str):
    """What the grader never copies from a chapter folder into its course: dot files, the
    chapter's jupytext source ``<assignment>.py`` (the whole solution; nbgrader's autograde
    copies the source folder's other files into every student's folder) and ``figures/``
    (the diagrams the markdown shows, ``autograder/diagrams.py``: grading runs no markdown)."""
    return shutil.ignore_patterns(".*", f"{assignment}.py", "figures")


def _hash_inputs(paths: list[Path], config: GradeConfig) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    if REPO_CONFIG.exists():
        h.update(REPO_CONFIG.read_bytes())
    h.update(Path(__file__).read_bytes())
    h.update(str(config.cell_timeout).encode())
    return h.hexdigest()[:16]


def build_template(
    source_dir: Path, assignments: list[str], work: Path, config: GradeConfig
) -> tuple[Path, dict[str, list[Notebook]]]:
    """Make (or reuse) the template course under ``work``; return it and the notebooks' info."""
    ensure_cached_head()
    all_found = find_assignments(source_dir)
    missing = [a for a in assignments if a not in all_found]
    if missing:
        raise SystemExit(f"no such assignment in {source_dir}: {', '.join(missing)}")
    paths = [p for a in assignments for p in all_found[a]]
    root = work / f"template-{_hash_inputs(paths, config)}"
    done = root / ".done"
    if not done.exists():
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        write_config(root, config)
        for a in assignments:
            dest = root / "source" / a
            shutil.copytree(source_dir / a, dest, ignore=source_ignore(a))
        # one nbgrader process for every assignment (nbgrader generate_assignment A --force each)
        proc = subprocess.run(
            [*NBGRADER, "generate_assignments", *assignments],
            cwd=root,
            capture_output=True,
            text=True,
            env=tool_env(),
        )
        if proc.returncode != 0:
            raise SystemExit(
                f"nbgrader generate_assignment failed:\n{proc.stdout}\n{proc.stderr}"
            )
        # the feedback pages load MathJax from OUT_DIR/mathjax, not a CDN (grading/mathjax.py)
        jupyter_path(FEEDBACK_URL, root / "jupyter")
        done.write_text(json.dumps({"assignments": assignments}))
    # what every student's grading needs and no student changes: built once per class (a
    # process only when something is missing: it imports the checks); the kernels' font list
    # (sandbox.bwrap.font_cache, another process) at the same time
    import threading

    from ..autograde.kernel_package import cache_ready
    from ..sandbox.bwrap import font_cache

    kernels = kernels_dir(root)
    fonts = threading.Thread(target=font_cache, args=(kernels / "mpl",), daemon=True)
    fonts.start()

    missing = [a for a in assignments if not cache_ready(kernels, [
        nbformat.read(p, as_version=4) for p in sorted((root / "source" / a).glob("*.ipynb"))])]
    if missing:
        proc = subprocess.run([*NBGRADER, "kernel_caches", str(kernels), *missing],
                              cwd=root, capture_output=True, text=True, env=tool_env())
        if proc.returncode != 0:
            raise SystemExit(
                f"preparing the graded kernels failed:\n{proc.stdout}\n{proc.stderr}")
    fonts.join()
    info = {}
    for a in assignments:
        info[a] = []
        for p in all_found[a]:
            src = nbformat.read(root / "source" / a / p.name, as_version=4)
            rel = nbformat.read(root / "release" / a / p.name, as_version=4)
            info[a].append(describe(a, p.stem, src, rel))
    return root, info


def kernels_dir(template: Path) -> Path:
    """The template's kernel packages and probe inputs (``kernel_package``, each assignment's in
    a folder named by its content): ``<template>/kernels``. Where ``COURSE_KERNEL_STORE`` names
    a folder, ``<template>/kernels`` is a link to it, so the classes graded with the same
    setting share each build (the test suite grades some 40 classes of the same chapters: 47
    builds of about 2-16 s of CPU each otherwise). Returned resolved: the kernels' specs and
    mounts name the real folder."""
    kernels = Path(template) / "kernels"
    store = os.environ.get(KERNEL_STORE)
    if store and not kernels.exists() and not kernels.is_symlink():
        Path(store).mkdir(parents=True, exist_ok=True)
        kernels.symlink_to(Path(store).resolve(), target_is_directory=True)
    return kernels.resolve()


def make_student_course(template: Path, root: Path, config: GradeConfig) -> None:
    """A fresh course folder for one student: the template's sources and gradebook, copied."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    write_config(root, config)
    shutil.copytree(template / "source", root / "source")
    shutil.copy2(template / "gradebook.db", root / "gradebook.db")
