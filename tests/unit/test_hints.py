"""Every exercise's hint opens in two steps (issue 49 item 5): a nudge, what to think about with
no code, and inside it a second ``<details>`` with the key line.

The hints are read from the chapter sources (``solutions/NN_x/NN_x.py``) for every row of the
exercise table, and rendered with markdown-it (the CommonMark parser MyST builds the docs site
with) to check that the nested form keeps the nudge outside and the key line, as markdown,
inside the second fold.
"""

import re

import pytest
from markdown_it import MarkdownIt

from autograder import release
from autograder.checks import table

CHAPTERS = release.chapters()
OUTER = "<details><summary>Hint</summary>"
INNER = "<details><summary>The key line</summary>"
_TAG = re.compile(r"<details>|</details>")


def hint_steps(markdown: str) -> tuple[str, str]:
    """``(nudge, key line)`` of the one hint in an exercise's markdown; ValueError saying what
    is missing when it has no hint, more than one, or not the two steps."""
    if markdown.count(OUTER) != 1:
        raise ValueError(f"{markdown.count(OUTER)} hints, not one")
    start = markdown.index(OUTER) + len(OUTER)
    depth, inner, end = 1, None, None
    for m in _TAG.finditer(markdown, start):
        if m.group() == "<details>":
            depth += 1
            if depth > 2:
                raise ValueError("a fold inside the key line")
            if inner is not None:
                raise ValueError("more than one second step")
            inner = m.start()
        else:
            depth -= 1
            if depth == 1:
                inner_end = m.start()
            if depth == 0:
                end = m.start()
                break
    if end is None:
        raise ValueError("the hint's <details> is not closed")
    if inner is None:
        raise ValueError("one step only: no second <details> with the key line")
    if not markdown.startswith(INNER, inner):
        raise ValueError(f"the second step's summary is not {INNER!r}")
    nudge = markdown[start:inner].strip()
    key = markdown[inner + len(INNER):inner_end].strip()
    after = markdown[inner_end + len("</details>"):end].strip()
    if after:
        raise ValueError(f"text after the key line's fold: {after[:60]!r}")
    return nudge, key


def _exercise_markdown(chapter: str) -> dict[str, str]:
    """``{number: markdown}`` of each exercise heading's cell in the chapter's source."""
    nb = release.read_chapter(release.chapter_source(chapter))
    out = {}
    for cell in nb.cells:
        m = re.search(r"^### Exercise (\d+\.\d+)", cell.source, re.M)
        if cell.cell_type == "markdown" and m:
            out[m.group(1)] = cell.source
    return out


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_hint_has_a_nudge_and_then_the_key_line(chapter):
    cells = _exercise_markdown(chapter)
    md = MarkdownIt("commonmark")
    for ex in table.chapter(chapter).exercises:
        assert ex.number in cells, f"{chapter} Exercise {ex.number}: no heading cell"
        nudge, key = hint_steps(cells[ex.number])
        where = f"{chapter} Exercise {ex.number}"
        assert len(nudge.split()) >= 8, f"{where}: the nudge says too little: {nudge!r}"
        assert "`" not in nudge, f"{where}: the nudge shows code: {nudge!r}"
        assert key and key != nudge, f"{where}: no key line"
        # rendered: the nudge before the second fold, the key line's markdown inside it
        html = md.render(cells[ex.number].split(OUTER, 1)[1])
        inner = html.index(INNER)
        assert nudge.split()[0] in html[:inner], where
        folded = html[inner:]
        assert folded.count("</details>") == 2, where
        if "`" in key:
            assert "<code" in folded.split("</details>")[0], f"{where}: key line not rendered"


def test_a_one_step_hint_is_refused():
    one = f"### Exercise 1.1\n\n{OUTER}\n\nUse `x.T`.\n</details>\n"
    with pytest.raises(ValueError, match="one step only"):
        hint_steps(one)
    with pytest.raises(ValueError, match="0 hints"):
        hint_steps("### Exercise 1.1\n\nno hint")
    two = f"{OUTER}\n\nThink about axes.\n\n{INNER}\n\nUse `x.T`.\n</details>\n</details>\n"
    assert hint_steps(two) == ("Think about axes.", "Use `x.T`.")
