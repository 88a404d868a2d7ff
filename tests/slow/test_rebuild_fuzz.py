"""The rebuild from the release (``parent/rebuild.py``, issue 47), fuzzed.

Notebook 01 as handed out and as solved is mutated (the metadata of every kind of cell,
outputs, nbformat versions, ids, cell types, cell order) and, on 300 examples, the rebuild
must give what the grader relies on: it never raises anything but ``NotANotebook``, and that
only for a file with none of the chapter's graded cells; what it returns is a valid nbformat 4
notebook with every graded cell of the release exactly once, with the release's metadata and
type, no output and no metadata of the student's; each answer cell holds the student's source.
The end-to-end half (such files graded by course-grade) is tests/grading/test_odd_files.py.
"""


from __future__ import annotations

import copy
import json

import nbformat
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from autograder.grading.cells import grade_id, is_answer, nbg
from autograder.grading.parent.rebuild import NotANotebook, rebuild, student_cells

from helpers.rebuild01 import ANSWERS, GRADED, IDS, OTHERS, RELEASE, SOLVED

junk = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=5),
                 st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                      st.integers(), max_size=2))
nbgrader_meta = st.one_of(
    junk,
    st.fixed_dictionaries({}, optional={
        "grade": st.booleans(), "solution": st.booleans(), "locked": st.booleans(),
        "points": st.one_of(st.integers(-1, 9), st.text(max_size=2)),
        "grade_id": st.one_of(st.sampled_from(IDS + ["setup", "x"]), junk),
        "schema_version": st.integers(0, 9)}))
output = st.one_of(
    st.just({"output_type": "display_data", "data": {"text/plain": 5}, "metadata": {}}),
    st.just({"output_type": "stream", "name": "stdout", "text": "hi"}),
    st.just({"output_type": "error"}), junk)


@st.composite
def mutated(draw):
    base = draw(st.sampled_from([RELEASE, SOLVED]))
    doc = json.loads(nbformat.writes(base))
    cells = doc["cells"]
    for cell in cells:
        kind = draw(st.integers(0, 9))
        if kind == 0:
            cell["metadata"]["nbgrader"] = draw(nbgrader_meta)
        elif kind == 1:
            cell["metadata"] = draw(junk)
        elif kind == 2:
            cell["outputs"] = draw(st.lists(output, max_size=3))
        elif kind == 3:
            cell["id"] = draw(st.one_of(st.sampled_from(IDS + ["same", "bad id!"]), junk))
        elif kind == 4:
            cell.pop("id", None)
        elif kind == 5:
            cell["cell_type"] = draw(st.sampled_from(["code", "markdown", "raw", "heading", 7]))
        elif kind == 6:
            cell["source"] = draw(st.one_of(st.text(max_size=20), junk,
                                            st.lists(st.text(max_size=5), max_size=3)))
    order = draw(st.sampled_from(["keep", "shuffle", "drop", "duplicate"]))
    if order == "shuffle":
        cells[:] = draw(st.permutations(cells))
    elif order == "drop" and cells:
        del cells[draw(st.integers(0, len(cells) - 1))]
    elif order == "duplicate" and cells:
        cells.insert(0, copy.deepcopy(cells[draw(st.integers(0, len(cells) - 1))]))
    fmt = draw(st.sampled_from(["4.5", "4.4", "4.0", "3", "no version", "junk version"]))
    if fmt == "3":
        doc = {"nbformat": 3, "nbformat_minor": 0, "metadata": {},
               "worksheets": [{"cells": [_v3(c) for c in cells], "metadata": {}}]}
    elif fmt == "no version":
        doc.pop("nbformat")
    elif fmt == "junk version":
        doc["nbformat"], doc["nbformat_minor"] = "4", None
    else:
        doc["nbformat_minor"] = int(fmt.split(".")[1])
    return json.dumps(doc).encode()


def _v3(cell: dict) -> dict:
    if cell.get("cell_type") == "code":
        return {**cell, "input": cell.get("source"), "source": None}
    return cell


def _holds_chapter(data: bytes) -> bool:
    sent = {grade_id(c) for c in student_cells(data)}
    return any(g in sent for g, c in zip(IDS, GRADED) if nbg(c).get("grade") or is_answer(c))


# no shrinking: a failing example is printed as found (shrinking 50 kB notebooks takes minutes)
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate], database=None)
@given(mutated())
def test_fuzzed_notebooks_are_rebuilt(data):
    try:
        got = rebuild(data, RELEASE, ANSWERS, "01_attention", OTHERS)
    except NotANotebook as e:
        assert not _holds_chapter(data), e
        return
    nb = got.notebook
    nbformat.validate(nb)
    assert nb.nbformat == 4
    marked = [c for c in nb.cells if nbg(c)]
    assert sorted(grade_id(c) for c in marked) == sorted(IDS)
    release = {grade_id(c): c for c in GRADED}
    sent = {}
    for c in student_cells(data):
        sent.setdefault(grade_id(c), c)
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None
        if not nbg(c):
            assert set(c.metadata) == set(), c.metadata
            continue
        ref = release[grade_id(c)]
        assert (nbg(c), c.cell_type) == (nbg(ref), ref.cell_type)
        if is_answer(ref) and grade_id(c) in sent:
            assert c.source == sent[grade_id(c)]["source"]
        elif not is_answer(ref):
            assert c.source == ref.source


def test_fuzz_examples_do_reach_every_branch():
    """The strategy makes files of each kind the property speaks of (so the fuzz test is not
    vacuous): rebuilt ones, refused ones, nbformat 3 ones."""
    seen = set()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.generate], database=None)
    @given(mutated())
    def sample(data):
        try:
            rebuild(data, RELEASE, ANSWERS, "01_attention", OTHERS)
            seen.add("rebuilt")
        except NotANotebook:
            seen.add("refused")
        if b'"worksheets"' in data:
            seen.add("v3")

    sample()
    assert seen == {"rebuilt", "refused", "v3"}


