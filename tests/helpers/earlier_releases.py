"""tests/fixtures/earlier_releases/: each chapter as a student fetched it from an earlier
release, its answers right, outputs cleared.

    python tests/helpers/earlier_releases.py   # writes them; needs the repository's history

- 06 and 08: the solutions at 3d4418c, the release before RoPE (06 Ex 2.2) and AdamW (08 Ex
  3.3) were added;
- the other chapters, whose exercises never changed: their first release (the release
  notebook of the commit that added the chapter, each answer cell filled with that commit's
  solution), the earliest notebook a student can hand in.

A student who fetched the chapter then hands in such a notebook; the grader must grade it on
the exercises it has, with full marks (``tests/grading/test_notebook0N.py``, and the synthetic
class's ``earlier_release`` student for 01). ``read_only_names.json`` lists, per chapter, every
name a read-only cell of any release in the history binds (an import, a definition): the
answers of an earlier release may use them, so the current release's read-only cells must
bind them all (``tests/unit/test_release.py``).
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "tests" / "fixtures" / "earlier_releases"
SOLUTIONS_AT = {"06_transformer": "3d4418c", "08_training": "3d4418c"}
FIRST_RELEASE = {"01_attention": "85e350b", "02_masking": "c5e9607",
                 "03_multihead_attention": "bbc214c", "04_layer_norm": "15174a3",
                 "05_feed_forward_blocks": "93d4f44", "07_bpe": "f452fd4"}
CHAPTERS = tuple(sorted(SOLUTIONS_AT) + sorted(FIRST_RELEASE))
NAMES = HERE / "read_only_names.json"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


def _nbg(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _notebook(commit: str, path: str) -> nbformat.NotebookNode:
    return nbformat.reads(_git("show", f"{commit}:{path}"), as_version=4)


def answered(chapter: str) -> nbformat.NotebookNode:
    """The chapter's earlier-release notebook, answered (see the module docstring)."""
    if chapter in SOLUTIONS_AT:
        nb = _notebook(SOLUTIONS_AT[chapter], f"solutions/{chapter}/{chapter}.ipynb")
    else:
        commit = FIRST_RELEASE[chapter]
        solved = _notebook(commit, f"solutions/{chapter}/{chapter}.ipynb")
        answers = {_nbg(c)["grade_id"]: c.source for c in solved.cells if _nbg(c).get("solution")}
        nb = _notebook(commit, f"notebooks/{chapter}/{chapter}.ipynb")
        for cell in nb.cells:
            if _nbg(cell).get("solution"):
                cell.source = answers[_nbg(cell)["grade_id"]]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def bound_names(source: str) -> set[str]:
    """The names the top level of ``source`` binds: imports, definitions, assignments.

    >>> sorted(bound_names("import numpy as np\\nfrom a import b, c as d\\nx, y = 1, 2"))
    ['b', 'd', 'np', 'x', 'y']
    """
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def read_only_names(nb) -> set[str]:
    """The names the read-only cells of ``nb`` bind (locked code cells, not tests)."""
    return {n for c in nb.cells if c.cell_type == "code" and _nbg(c).get("locked")
            and not _nbg(c).get("grade") and not _nbg(c).get("solution")
            for n in bound_names(c.source)}


def history_names() -> dict[str, list[str]]:
    """{chapter: the names the read-only cells of any release in the history bind}."""
    out: dict[str, set[str]] = {}
    for commit in _git("log", "--format=%h", "--", "notebooks").split():
        for path in _git("ls-tree", "-r", "--name-only", commit, "notebooks").split("\n"):
            if path.endswith(".ipynb"):
                chapter = Path(path).stem
                out.setdefault(chapter, set()).update(
                    read_only_names(_notebook(commit, path)))
    return {c: sorted(n) for c, n in sorted(out.items())}


def main(dest: Path = HERE) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for chapter in CHAPTERS:
        nbformat.write(answered(chapter), dest / f"{chapter}.ipynb")
    (dest / NAMES.name).write_text(json.dumps(history_names(), indent=1) + "\n")


if __name__ == "__main__":
    main()
