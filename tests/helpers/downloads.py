"""An LMS download as a folder of tiny notebooks, for the intake tests."""

from __future__ import annotations

from pathlib import Path

import nbformat


def tiny_notebook(text: str) -> str:
    """A notebook's text: one code cell, the comment ``# text`` (cell id ``c1``)."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(f"# {text}", id="c1"))
    return nbformat.writes(nb)


def download(dest: Path, files: dict[str, str]) -> Path:
    """``dest``, made, holding ``tiny_notebook(text)`` as each {file name: text} of ``files``
    (every file's mtime: now)."""
    dest.mkdir(parents=True)
    for name, text in files.items():
        (dest / name).write_text(tiny_notebook(text))
    return dest
