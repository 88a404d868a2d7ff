"""tests/fixtures/earlier_releases/: chapters 06 and 08 as the solutions stood at 3d4418c,
the release before RoPE (06 Ex 2.2) and AdamW (08 Ex 3.3) were added, outputs cleared.

    python tests/helpers/earlier_releases.py   # writes them; needs the repository's history

A student who fetched the chapter before those exercises hands in such a notebook; the grader
must grade it on the exercises it has (tests/grading/test_notebook06.py and ...08.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import nbformat

COMMIT = "3d4418c"
HERE = Path(__file__).resolve().parents[1] / "fixtures" / "earlier_releases"
CHAPTERS = ("06_transformer", "08_training")


def main(dest: Path = HERE) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for chapter in CHAPTERS:
        text = subprocess.run(["git", "show", f"{COMMIT}:solutions/{chapter}/{chapter}.ipynb"],
                              cwd=HERE, capture_output=True, text=True, check=True).stdout
        nb = nbformat.reads(text, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nbformat.write(nb, dest / f"{chapter}.ipynb")


if __name__ == "__main__":
    main()
