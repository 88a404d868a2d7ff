"""The nbgrader course folders the grader works in, and what it knows about each assignment.

nbgrader is used as designed: a course directory with ``source/<assignment>/<nb>.ipynb`` (copied
from ``solutions/``), ``nbgrader generate_assignment`` to fill a gradebook and make the release,
then ``nbgrader autograde`` / ``generate_feedback`` on ``submitted/<student>/<assignment>/``.

The *template* course is built once per release (``template_key``: what it is made from) in the
per-user cache and copied into each output folder (``template_cache.py``). Each student
then gets a course folder of their own with a copy of the template gradebook, so no two processes
ever write the same SQLite file; the parent merges the results (``results.py``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..cells import nbg
from ..config import GradeConfig
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
    """Write the nbgrader_config.py of a course folder at ``root`` (:func:`config_text`)."""
    (root / "nbgrader_config.py").write_text(config_text(root, config))


def config_text(root: Path, config: GradeConfig) -> str:
    """The nbgrader_config.py of a course folder at ``root``.

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
    return "\n".join(line for line in lines if line) + "\n"


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


def _files(folder: Path, ignore) -> list[Path]:
    """Every file ``shutil.copytree(folder, ..., ignore=ignore)`` copies, sorted."""
    found = []
    for here, dirs, names in os.walk(folder):
        skip = ignore(here, dirs + names)
        dirs[:] = sorted(d for d in dirs if d not in skip)
        found += [Path(here) / n for n in sorted(names) if n not in skip]
    return found


# the fonts matplotlib's font list is made from (besides its own, named by its version)
FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts", "~/.fonts", "~/.local/share/fonts")
# the packages whose versions the template's files depend on (its code: code_digest)
VERSIONED = ("nbgrader", "nbconvert", "nbformat", "nbclient", "jupyter_client", "ipykernel",
             "matplotlib", "sqlalchemy", "alembic", "jupyter_server_mathjax")


def template_key(source_dir: Path, assignments: list[str], config: GradeConfig) -> str:
    """The name of the template of ``assignments`` (``template-<key>``, in the output folder and
    in the per-user cache): a hash of everything its files are made from. The chapter folders'
    files it copies, the nbgrader configuration it is written with (``config``), the files of
    the course's two packages (``autograder``, ``transformer_ref``: the checks, the grader, the
    kernel packages, ``autograder/nbgrader_config.py``, their data), the versions of torch,
    Python, the packages in :data:`VERSIONED`, and the system's font folders (the font
    list)."""
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    from ..autograde.kernel_package import code_digest

    h = hashlib.sha256(code_digest().encode())  # their .py files, torch
    for package in ("autograder", "transformer_ref"):  # and their data
        base = Path(importlib.util.find_spec(package).origin).parent
        for path in sorted(base.rglob("*")):
            if path.is_file() and path.suffix not in (".py", ".pyc"):
                h.update(f"{package}/{path.relative_to(base)}\0".encode() + path.read_bytes())
    h.update(f"{sys.version}\0{sys.executable}\0".encode())
    for name in VERSIONED:
        try:
            h.update(f"{name} {version(name)}\0".encode())
        except PackageNotFoundError:
            h.update(f"{name} -\0".encode())
    h.update(config_text(Path("/template"), config).encode())
    if REPO_CONFIG.exists():
        h.update(REPO_CONFIG.read_bytes())
    for a in assignments:
        folder = source_dir / a
        for path in _files(folder, source_ignore(a)):
            h.update(f"{a}/{path.relative_to(folder)}\0".encode() + path.read_bytes() + b"\0")
    for top in FONT_DIRS:
        for here, dirs, _ in os.walk(Path(top).expanduser()):
            dirs.sort()
            h.update(f"{here} {os.stat(here).st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def build_template(
    source_dir: Path, assignments: list[str], work: Path, config: GradeConfig
) -> tuple[Path, dict[str, list[Notebook]]]:
    """The template course of ``assignments`` under ``work`` (``template-<key>``: a rerun
    reuses it), copied from the per-user cache (``template_cache``; built there first when it
    is not), and the notebooks' info."""
    from . import template_cache

    ensure_cached_head()
    all_found = find_assignments(source_dir)
    missing = [a for a in assignments if a not in all_found]
    if missing:
        raise SystemExit(f"no such assignment in {source_dir}: {', '.join(missing)}")
    name = f"template-{template_key(source_dir, assignments, config)}"
    root = work / name
    if not template_cache.complete(root):
        template_cache.place(
            name, root, lambda folder: _build(folder, source_dir, assignments, config))
    info = {}
    for a in assignments:
        info[a] = []
        for p in all_found[a]:
            src = nbformat.read(root / "source" / a / p.name, as_version=4)
            rel = nbformat.read(root / "release" / a / p.name, as_version=4)
            info[a].append(describe(a, p.stem, src, rel))
    return root, info


def _build(root: Path, source_dir: Path, assignments: list[str], config: GradeConfig) -> None:
    """Build the template course in ``root`` (a new folder)."""
    import threading

    from ..sandbox.bwrap import font_cache

    root.mkdir(parents=True)
    write_config(root, config)
    for a in assignments:
        shutil.copytree(source_dir / a, root / "source" / a, ignore=source_ignore(a))
    # the kernels' font list (sandbox.bwrap.font_cache, another process) meanwhile
    kernels = kernels_dir(root)
    fonts = threading.Thread(target=font_cache, args=(kernels / "mpl",), daemon=True)
    fonts.start()
    # one nbgrader process for every assignment (nbgrader generate_assignment A --force each)
    proc = subprocess.run([*NBGRADER, "generate_assignments", *assignments], cwd=root,
                          capture_output=True, text=True, env=tool_env())
    if proc.returncode != 0:
        raise SystemExit(f"nbgrader generate_assignment failed:\n{proc.stdout}\n{proc.stderr}")
    # the feedback pages load no MathJax: their maths is MathML (grading/mathjax.py)
    jupyter_path(FEEDBACK_URL, root / "jupyter")
    # what every student's grading needs and no student changes (it imports the checks)
    proc = subprocess.run([*NBGRADER, "kernel_caches", str(kernels), *assignments],
                          cwd=root, capture_output=True, text=True, env=tool_env())
    if proc.returncode != 0:
        raise SystemExit(f"preparing the graded kernels failed:\n{proc.stdout}\n{proc.stderr}")
    fonts.join()


def kernels_dir(template: Path) -> Path:
    """The template's kernel packages, probe inputs (``kernel_package``, each assignment's in a
    folder named by its content) and font list: ``<template>/kernels``, resolved (the kernels'
    specs and mounts name the real folder)."""
    return (Path(template) / "kernels").resolve()


def make_student_course(template: Path, root: Path, config: GradeConfig) -> None:
    """A fresh course folder for one student: the template's sources and gradebook, copied."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    write_config(root, config)
    shutil.copytree(template / "source", root / "source")
    shutil.copy2(template / "gradebook.db", root / "gradebook.db")
