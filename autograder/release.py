"""Generate the chapter notebooks from their sources: ``solutions/`` and the release ``notebooks/``.

    python -m autograder.release                 # every chapter in solutions/
    python -m autograder.release 01_attention    # one chapter
    python -m autograder.release --check         # exit 1 if a generated file is not up to date
    python -m autograder.release --kit OUT       # the student kit (autograder/kit.py)

A chapter is written as one jupytext percent script, ``solutions/<NN_name>/<NN_name>.py``:
markdown and code cells (``# %%``, ``# %% [markdown]``), the nbgrader regions (``### BEGIN
SOLUTION`` ...) and each cell's nbgrader metadata on its ``# %%`` line. From it this command
writes, byte for byte reproducibly:

1. ``solutions/<NN_name>/<NN_name>.ipynb``, the nbgrader source notebook (grading reads it).
   Cell ids are derived, not random: a cell with an nbgrader grade id gets that id, any other
   cell ``<last grade id above it>-<k>`` (``top-<k>`` before the first), so a change to one cell
   changes that cell only;
2. ``notebooks/<NN_name>/<NN_name>.ipynb``, the student release: nbgrader's own
   ``generate_assignment`` (run as a subprocess, configured by ``autograder/nbgrader_config.py``)
   removes the solutions and hidden tests, locks the read-only and test cells and clears
   outputs. It runs with ``--no-db``: the release needs no gradebook (grading records the source
   cells in its own), and the repository stays clean.
3. ``solutions/<NN_name>/figures/`` and ``notebooks/<NN_name>/figures/``: the chapter's diagrams,
   drawn by ``autograder/diagrams.py`` (SVG text, the same bytes on every run), which its
   markdown shows as ``![...](figures/<name>.svg)``.

Edit the ``.py`` (or the ``.ipynb`` in JupyterLab, paired with the ``.py`` by
``solutions/jupytext.toml``, see README), then run this command and commit the ``.py``, both
notebooks and both ``figures/`` folders. This command never writes the ``.py``: what the exercise
table states there (headings, points, grade ids, each test cell's visible check) it compares,
and ``--check`` names the lines to change; a test cell's hidden part (its hidden check and the
given earlier answers) is written into the notebooks only, and a ``.py`` test cell that holds
one (a paired save) must hold what the release writes.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from autograder import diagrams

ROOT = Path(__file__).resolve().parent.parent
CONFIG = Path(__file__).resolve().parent / "nbgrader_config.py"
SOURCE = ROOT / "solutions"
RELEASE = ROOT / "notebooks"
FIGURES = "figures"  # a chapter's diagrams (autograder/diagrams.py), next to both notebooks
# nbformat's cell-id rule (nbformat 4.5)
_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def chapters(source: Path = SOURCE) -> list[str]:
    """Assignment names: the folders of solutions/ that hold a chapter source of the same name.

    >>> "01_attention" in chapters()
    True
    """
    return sorted(p.parent.name for p in source.glob("*/*.py") if p.stem == p.parent.name)


def chapter_source(name: str, source: Path = SOURCE) -> Path:
    """The jupytext percent script a chapter is written in: ``solutions/<name>/<name>.py``."""
    return source / name / f"{name}.py"


def assign_cell_ids(nb: nbformat.NotebookNode) -> None:
    """Give every cell an id derived from the grade ids, so regenerating never changes one.

    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T"),
    ...     nbformat.v4.new_code_cell("x", metadata={"nbgrader": {"grade_id": "setup"}}),
    ...     nbformat.v4.new_markdown_cell("text"), nbformat.v4.new_code_cell("y")])
    >>> assign_cell_ids(nb); [c.id for c in nb.cells]
    ['top-1', 'setup', 'setup-1', 'setup-2']
    """
    anchor, k, seen = "top", 0, set()
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid:
            anchor, k, cid = gid, 0, gid
        else:
            k += 1
            cid = f"{anchor}-{k}"
        if not _CELL_ID.match(cid) or cid in seen:
            raise ValueError(
                f"cell id {cid!r} (from the grade ids) is not a unique nbformat id: grade ids "
                "must be unique and use only letters, digits, '_' and '-'"
            )
        seen.add(cid)
        cell["id"] = cid


# What solutions/jupytext.toml sets, so a source this command writes equals a paired save.
_PY_FORMAT = {"notebook_metadata_filter": "kernelspec,language_info,-jupytext"}


def _jupytext():
    try:
        import jupytext
    except ImportError as e:  # an environment set up before jupytext was pinned
        raise SystemExit(
            "jupytext is missing: run `python3 -m autograder.bootstrap setup` "
            "(or `.venv/bin/pip install -c constraints.txt jupytext`)"
        ) from e
    return jupytext


def _points(n: int) -> str:
    return f"{n} point{'s' if n != 1 else ''}"


def render_test_cell(chapter, ex, given: dict | None = None,
                     hidden: bool = True) -> tuple[dict, str]:
    """(nbgrader metadata, source) of the test cell of ``ex`` (a row of ``chapter``'s table).
    ``given`` ({function: source}): the answers of the earlier exercises ``ex``'s function
    calls (its check's ``uses``), written into the hidden part: the graded function is judged
    with them in place of the student's when those fail their own checks. ``hidden=False``:
    the visible check only (a chapter source's test cell).

    >>> from autograder.checks.table import TABLES, exercise
    >>> print(render_test_cell(TABLES["01_attention"], exercise("01_attention", "2.1"))[1])
    # Check Exercise 2.1 (2 points)
    check_softmax(softmax)
    ### BEGIN HIDDEN TESTS
    from autograder.checks._core import hidden_check as _hidden_check
    _hidden_check("attention.softmax", softmax)
    ### END HIDDEN TESTS
    """
    args = ", ".join(ex.arguments or (ex.function,))
    lines = [f"# Check {ex.label} ({_points(ex.points)})"]
    if ex.arguments:
        lines.append(f"{ex.function}_functions = ({args})")
        lines.append(f"check_{ex.function}({ex.function}_functions)")
    else:
        lines.append(f"check_{ex.function}({ex.function})")
    meta = {
        "grade": True,
        "grade_id": ex.grade_id,
        "locked": True,
        "points": ex.points,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    if not hidden:
        return meta, "\n".join(lines)
    lines += [
        "### BEGIN HIDDEN TESTS",
        "from autograder.checks._core import hidden_check as _hidden_check",
    ]
    extra = ""
    if given:
        lines.append("# the given earlier functions, in place of yours if they fail their checks")
        lines.append("_given = {")
        lines += [f"    {name!r}: {source!r}," for name, source in given.items()]
        lines.append("}")
        extra = ", given=_given"
    if chapter.probe:
        lines.append(f"from autograder.checks.{chapter.module} import probe as _probe")
        lines.append(f'_hidden_check("{ex.key}", _probe("{ex.key}", {args}){extra})')
    elif ex.arguments:
        lines.append(f'_hidden_check("{ex.key}", {ex.function}_functions{extra})')
    else:
        lines.append(f'_hidden_check("{ex.key}", {args}{extra})')
    if given:
        lines.append("del _given")
    lines.append("### END HIDDEN TESTS")
    return meta, "\n".join(lines)


def heading(ex) -> str:
    """The markdown heading line of ``ex``: number, title, points, minutes."""
    tag = f" {ex.tag}" if ex.tag else ""
    note = f", {ex.note}" if ex.note else ""
    return f"### {ex.label}{tag} — {ex.title}  *({_points(ex.points)}, ~{ex.minutes} min{note})*"


_SOLUTION_MARK = re.compile(r"\n?^[ \t]*### (?:BEGIN|END) SOLUTION[ \t]*$", re.M)
_HEADING = re.compile(r"^### Exercise (\d+\.\d+)\b.*$", re.M)
_SUMMARY = re.compile(r"\*\*Points: \d+ in total\*\*(?:(?!\n\n).)*", re.S)
_SUMMARY_ITEM = re.compile(r"(\d+\.\d+) \((\d+)")


HIDDEN_PART = "### BEGIN HIDDEN TESTS"


def fill_from_table(nb: nbformat.NotebookNode, name: str, hidden: bool = True) -> None:
    """Write what the exercise table states into chapter ``name``'s notebook, in place.

    Test cells (the cells with nbgrader ``"grade": true``, in order, one per row), the grade
    id of each exercise's answer cell (the one ``"solution": true`` cell before its test
    cell), the exercise headings (``### Exercise N.M ...``) and the first cell's points summary
    (``**Points: T in total** — Ex 1.1 (P), ...``). A chapter without a table is left as is.
    ``hidden=False`` (a chapter source's text): a test cell gets its hidden part only where it
    has one already.
    """
    from autograder.checks.table import TABLES

    if name not in TABLES:
        return
    chapter = TABLES[name]
    rows = {e.number: e for e in chapter.exercises}
    tests = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    if len(tests) != len(chapter.exercises):
        raise ValueError(
            f"{name}: {len(tests)} test cells (nbgrader grade: true) but "
            f"{len(chapter.exercises)} exercises in autograder/checks/table.py"
        )
    # each exercise's answer cell: the one nbgrader solution cell after the previous test cell
    answers, k = [[] for _ in tests], 0
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            k += 1
        elif meta.get("solution") and k < len(tests):
            answers[k].append(cell)
    for cells, ex in zip(answers, chapter.exercises):
        if len(cells) != 1:
            raise ValueError(
                f"{name}: Exercise {ex.number} has {len(cells)} answer cells (nbgrader "
                "solution: true) before its test cell; the table expects one"
            )
        meta = {**cells[0].metadata["nbgrader"], "grade_id": ex.solution_id}
        cells[0].metadata["nbgrader"] = dict(sorted(meta.items()))
    solved = {ex.function: _SOLUTION_MARK.sub("", cells[0].source)
              for cells, ex in zip(answers, chapter.exercises)}
    for cell, ex in zip(tests, chapter.exercises):
        given = {n: solved[n] for n, _ in _uses(ex) if n in solved}
        cell.metadata["nbgrader"], cell.source = render_test_cell(
            chapter, ex, given, hidden or HIDDEN_PART in cell.source)
    seen = []

    def head(m):
        if m[1] not in rows:
            raise ValueError(f"{name}: heading of Exercise {m[1]}, not in the exercise table")
        seen.append(m[1])
        return heading(rows[m[1]])

    def summary(m):
        listed = _SUMMARY_ITEM.findall(m[0])
        if sorted(n for n, _ in listed) != sorted(rows):
            raise ValueError(f"{name}: the points summary lists {[n for n, _ in listed]}")
        text = re.sub(r"\d+(?= in total)", str(chapter.points), m[0], count=1)
        return _SUMMARY_ITEM.sub(lambda i: f"{i[1]} ({rows[i[1]].points}", text)

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _SUMMARY.sub(summary, _HEADING.sub(head, cell.source))
    if seen != [e.number for e in chapter.exercises]:
        raise ValueError(
            f"{name}: exercise headings {seen}, the table's order is "
            f"{[e.number for e in chapter.exercises]}"
        )


def _uses(ex) -> tuple:
    """The earlier functions ``ex``'s check uses; none for a row with no check registered
    (yet: a renamed function)."""
    try:
        return ex.declaration().uses
    except KeyError:
        return ()


def source_text(path: Path, name: str, hidden: bool = False) -> str:
    """The chapter source with what the exercise table states filled in: what the ``.py``
    must read (``hidden=False``), or the text the notebooks are generated from (``True``:
    every test cell with its hidden part)."""
    jupytext = _jupytext()
    nb = jupytext.read(path, fmt="py:percent")
    fill_from_table(nb, name, hidden)
    nb.metadata["jupytext"] = dict(_PY_FORMAT)
    return jupytext.writes(nb, fmt="py:percent")


def source_problems(path: Path, name: str) -> list[str]:
    """What the chapter source ``path`` says otherwise than the exercise table: one line per
    changed line (``line N: write '...'``), none when it holds what the table states.

    >>> source_problems(chapter_source("02_masking"), "02_masking")
    []
    """
    import difflib

    text, want = path.read_text(), source_text(path, name)
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, text.splitlines(), want.splitlines(), autojunk=False).get_opcodes():
        if tag != "equal":
            where = f"line {i1 + 1}" + (f"-{i2}" if i2 > i1 + 1 else "")
            new = " / ".join(want.splitlines()[j1:j2])
            out.append(f"{where}: {f'write {new[:160]!r}' if new else 'delete'}")
    return out


def read_chapter(path: Path, text: str | None = None) -> nbformat.NotebookNode:
    """The solution notebook a chapter source (``text``, else the file) describes: ids
    assigned, no jupytext metadata."""
    jupytext = _jupytext()
    nb = jupytext.reads(path.read_text() if text is None else text, fmt="py:percent")
    nb.metadata.pop("jupytext", None)
    nb.nbformat, nb.nbformat_minor = 4, 5
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    assign_cell_ids(nb)
    nbformat.validate(nb)
    return nb


def generate(
    names: list[str],
    release_dir: Path = RELEASE,
    solutions_dir: Path = SOURCE,
    source: Path = SOURCE,
) -> None:
    """Write ``solutions_dir/<name>/<name>.ipynb`` and ``figures/``, and ``release_dir/<name>/``,
    for each chapter.

    The notebooks are built from the source ``source/<name>/<name>.py`` with the exercise table
    (``autograder/checks/table.py``) filled in, in memory (the ``.py`` is only read), in a
    temporary nbgrader course (the chapter's other files, if any, go with them; the ``.py``
    source never does), with the chapter's diagrams drawn afresh into its ``figures/``
    (``autograder/diagrams.py``; the committed copies are not read).
    """
    release_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        course = Path(tmp) / "course"
        for name in names:
            folder = course / "solutions" / name
            shutil.copytree(
                source / name,
                folder,
                ignore=shutil.ignore_patterns(
                    ".*", "__pycache__", f"{name}.py", f"{name}.ipynb", FIGURES
                ),
            )
            diagrams.write(name, folder / FIGURES)  # drawn now, never the committed copies
            py = chapter_source(name, source)
            nbformat.write(read_chapter(py, source_text(py, name, hidden=True)),
                           folder / f"{name}.ipynb")
        cmd = [
            sys.executable,
            "-m",
            # nbgrader's command, started through the course's entry: importing autograder first
            # keeps jsonschema's rfc3987 grammars out of the process (autograder/__init__.py)
            "autograder.grading.autograde.nbgrader_main",
            "generate_assignment",
            "*",  # one nbgrader process for every chapter: much faster
            "--force",
            # nbgrader takes the config path without ".py" (traitlets adds it)
            f"--GenerateAssignmentApp.config_file={CONFIG.with_suffix('')}",
            f"--CourseDirectory.root={course}",
            f"--CourseDirectory.release_directory={release_dir}",
            "--no-db",  # the release needs no gradebook; grading builds its own
            "--log-level=WARN",
        ]
        # cwd=tmp: nbgrader also reads ./nbgrader_config.py; make sure it is ours only.
        # nbgrader runs helper executables (alembic) from PATH: put this venv's bin first.
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}" + os.environ.get("PATH", ""),
        }
        res = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env)
        if res.returncode != 0:
            raise RuntimeError(
                f"nbgrader generate_assignment {names} failed:\n{res.stdout}\n{res.stderr}"
            )
        for name in names:
            dest = solutions_dir / name / f"{name}.ipynb"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(course / "solutions" / name / f"{name}.ipynb", dest)
            diagrams.write(name, dest.parent / FIGURES)


def _tree(folder: Path) -> set[Path]:
    if not folder.exists():
        return set()
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()}


def differences(names: list[str], source: Path = SOURCE) -> list[str]:
    """Generated files that differ from (or are missing in) a fresh generation from ``source``.

    Compares ``solutions/<name>/<name>.ipynb``, ``solutions/<name>/figures/`` and everything
    under ``notebooks/<name>/`` (its ``figures/`` included).
    """
    out = []
    with tempfile.TemporaryDirectory(prefix="course-release-check-") as tmp:
        fresh_rel, fresh_sol = Path(tmp) / "release", Path(tmp) / "solutions"
        generate(names, fresh_rel, fresh_sol, source)
        for name in names:
            py = chapter_source(name, source)
            out += [f"{py.relative_to(source.parent)} {p} (autograder/checks/table.py states it)"
                    for p in source_problems(py, name)]
            nb = Path(name) / f"{name}.ipynb"
            a, b = fresh_sol / nb, SOURCE / nb
            if not (b.exists() and filecmp.cmp(a, b, shallow=False)):
                out.append(str(Path("solutions") / nb))
            for rel in sorted(_tree(fresh_sol / name / FIGURES) | _tree(SOURCE / name / FIGURES)):
                a, b = fresh_sol / name / FIGURES / rel, SOURCE / name / FIGURES / rel
                if not (a.exists() and b.exists() and filecmp.cmp(a, b, shallow=False)):
                    out.append(str(Path("solutions") / name / FIGURES / rel))
            for rel in sorted(_tree(fresh_rel / name) | _tree(RELEASE / name)):
                a, b = fresh_rel / name / rel, RELEASE / name / rel
                if not (a.exists() and b.exists() and filecmp.cmp(a, b, shallow=False)):
                    out.append(str(Path("notebooks") / name / rel))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m autograder.release", description=__doc__.split("\n")[0]
    )
    ap.add_argument("chapters", nargs="*", help="chapter folders of solutions/ (default: all)")
    ap.add_argument(
        "--check",
        action="store_true",
        help="only compare the generated files with a fresh generation",
    )
    ap.add_argument(
        "--kit",
        "--student-kit",
        metavar="OUT_DIR",
        help="write the student kit (release notebooks and visible checks, no answers) to "
        "OUT_DIR and OUT_DIR.zip instead (autograder/kit.py)",
    )
    args = ap.parse_args(argv)
    if args.kit:
        from autograder import kit

        return kit.main(args.kit, args.chapters)
    names = args.chapters or chapters()
    unknown = sorted(set(names) - set(chapters()))
    if unknown:
        ap.error(f"no chapter source solutions/<name>/<name>.py for: {', '.join(unknown)}")
    if args.check:
        diff = differences(names)
        for d in diff:
            print(f"out of date: {d}")
        if diff:
            print("edit the chapter sources as said; run `python -m autograder.release` and "
                  "commit solutions/ and notebooks/")
            return 1
        print(f"solutions/*.ipynb and notebooks/ match a fresh generation ({', '.join(names)})")
        return 0
    generate(names)
    print(f"generated solutions/*.ipynb and notebooks/ for {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
