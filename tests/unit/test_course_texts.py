"""What the student trial (issue 18) found in the course's texts, kept fixed.

The five source texts are named by what they are, not by an internal "seed 000" number a
student cannot look up; README and chapter 1 introduce all five. Chapter 7's given helpers sit
in their own locked cell, so rewriting the answer cell cannot lose them.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
NAMES = (
    "the column-vector lecture notes",
    "the row-form tutorial",
    "the personal wiki page",
    "the encoder-decoder survey",
    "the Transformer-block blog post",
)
SEED_NUMBER = re.compile(r"\bseeds?\s+00[0-4]\b", re.IGNORECASE)


def _texts():
    for folder in ("solutions", "notebooks"):
        for path in sorted((ROOT / folder).glob("*/*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            yield path, "\n".join(c.source for c in nb.cells)
    yield ROOT / "README.md", (ROOT / "README.md").read_text()
    for path in sorted((ROOT / "autograder" / "checks").glob("*.py")):
        yield path, path.read_text()


def test_no_seed_numbers_in_what_students_read():
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p, text in _texts()
        for m in SEED_NUMBER.finditer(text)
    ]
    assert not found, "\n".join(found)


def test_readme_and_chapter_1_introduce_the_five_texts():
    chapter1 = nbformat.read(ROOT / "notebooks/01_attention/01_attention.ipynb", as_version=4)
    intro = chapter1.cells[0].source.lower()
    readme = (ROOT / "README.md").read_text().lower()
    for name in NAMES:
        bare = name.removeprefix("the ").lower()
        assert bare in intro, name
        assert bare in readme, name


def test_chapter_7_helpers_are_given_in_a_locked_cell():
    nb = nbformat.read(ROOT / "notebooks/07_bpe/07_bpe.ipynb", as_version=4)
    for helper in ("def pretoken_counts(", "def merge_ids("):
        (cell,) = [c for c in nb.cells if helper in c.source]
        meta = cell.metadata.get("nbgrader", {})
        assert meta.get("locked") and not meta.get("solution"), helper


def test_trial_text_fixes():
    def text(name):
        nb = nbformat.read(ROOT / f"notebooks/{name}/{name}.ipynb", as_version=4)
        return "\n".join(c.source for c in nb.cells)

    assert "a bias for each" not in text("05_feed_forward_blocks")  # SwiGLU has none (Ex 1.4)
    assert "no better than chance" not in text("08_training")  # a loss above log V is worse
    ch6 = text("06_transformer")
    assert "returns an empty `KVCache`" in ch6 and "no `len()`" in ch6
