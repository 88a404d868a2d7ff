"""Notebook 05 (feed-forward and blocks) through the real grading path, once per session.

Solution, release and one catalogued mistake are graded in one ``course-grade`` run (see
``test_notebook04.graded_chapter``); the committed release must equal a fresh generation
(tests/test_release.py).
"""

from __future__ import annotations

import nbformat
import pytest
from test_notebook04 import SOURCE, check_chapter, graded_chapter

from autograder.checks import table

EX = table.rows("05_feed_forward_blocks")  # {function: exercise row} of the chapter

ASSIGNMENT = "05_feed_forward_blocks"
# the column-vector lecture notes' pre-LN block written as post-LN: the residual added after the
# norm
MISTAKE = (
    EX["pre_ln_block"].solution_id,
    "x = x + attn(norm1(x))  # R(MSA o LN1)\n    return x + ffn(norm2(x))",
    "x = norm1(x + attn(x))\n    return norm2(x + ffn(x))",
    EX["pre_ln_block"].grade_id,
    "residual added after the norm (that is post-LN)",
)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return graded_chapter(tmp_path_factory, ASSIGNMENT, MISTAKE)


def test_grading_path_proofs(graded):
    check_chapter(graded, MISTAKE)


def test_points_and_hidden_keys_in_the_source():
    from autograder.checks import feed_forward_blocks
    from autograder.checks._core import registered

    nb = nbformat.read(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    points = [c.metadata.nbgrader["points"] for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")]
    assert f"Points: {sum(points):g} in total" in nb.cells[0].source
    text = "\n".join(c.source for c in nb.cells)
    keys = [k for k in registered() if k.startswith("feed_forward_blocks.")]
    assert len(keys) == len(feed_forward_blocks.__all__)
    for k in keys:
        assert f'_hidden_check("{k}"' in text, k
