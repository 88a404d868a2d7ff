"""The student release: a fresh nbgrader generation, with no solution and no hidden test in it."""

import importlib
import json
import re
import shutil

import nbformat
import pytest

from autograder import release
from autograder.checks import table
from autograder.checks._core import registered
from autograder.grading.cells import nbg as _nbg

from helpers.generation import generate_once

CHAPTERS = release.chapters()



def _regions(source: str, begin: str, end: str) -> list[str]:
    return re.findall(rf"{re.escape(begin)}\n(.*?){re.escape(end)}", source, flags=re.S)


def test_there_is_a_chapter_and_the_config_matches_the_layout():
    from autograder.nbgrader_config import ROOT, c

    assert "01_attention" in CHAPTERS
    assert c.CourseDirectory.root == str(ROOT) == str(release.ROOT)
    assert c.CourseDirectory.source_directory == "solutions"
    assert c.CourseDirectory.release_directory == "notebooks"


def test_committed_release_equals_a_fresh_generation():
    """solutions/*.ipynb and notebooks/ are what the chapter sources (.py) generate."""
    assert release.differences(CHAPTERS) == [], "run `python -m autograder.release`"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_cell_ids_come_from_the_grade_ids(chapter):
    nb = nbformat.read(release.SOURCE / chapter / f"{chapter}.ipynb", as_version=4)
    anchor, k = "top", 0
    for cell in nb.cells:
        gid = _nbg(cell).get("grade_id")
        anchor, k = (gid, 0) if gid else (anchor, k + 1)
        assert cell.id == (gid or f"{anchor}-{k}")


def _cells(path):
    return {c.id: c for c in nbformat.read(path, as_version=4).cells}


def test_a_one_line_edit_of_a_chapter_source_changes_that_cell_only(tmp_path, monkeypatch):
    """Edit one solution line and one markdown line of 01's .py: the check sees both generated
    notebooks out of date, and in each exactly the edited cells differ (same ids)."""
    # the check's generation of the edited source is the one read below: nbgrader runs once
    runs = generate_once(monkeypatch, tmp_path / "generated")
    name = "01_attention"
    src = tmp_path / "solutions"
    shutil.copytree(release.SOURCE / name, src / name)
    py = release.chapter_source(name, src)
    lines = py.read_text().splitlines(keepends=True)
    # the last exercise's answer: no later test cell holds it as a given function (an earlier
    # exercise's answer is also written into the hidden part of the test cells that use it)
    sol = len(lines) - lines[::-1].index("    ### BEGIN SOLUTION\n")
    md = next(i for i, ln in enumerate(lines) if ln.startswith("# **Points:"))
    lines[sol] = lines[sol].rstrip("\n") + "  # edited\n"
    lines[md] = lines[md].replace("in total", "in all")
    py.write_text("".join(lines))
    nb = f"{name}/{name}.ipynb"
    assert release.differences([name], source=src) == [f"solutions/{nb}", f"notebooks/{nb}"]
    release.generate([name], tmp_path / "notebooks", src, src)
    assert runs == [[name]]
    assert py.read_text() == "".join(lines)  # the release never writes the source
    for kind, edited in (("solutions", 2), ("notebooks", 1)):  # the solution is not released
        old, new = _cells(release.ROOT / kind / nb), _cells(tmp_path / kind / nb)
        assert list(old) == list(new)
        changed = [cid for cid in old if old[cid] != new[cid]]
        assert len(changed) == edited and changed[0] == "top-1", (kind, changed)



def test_a_source_that_states_otherwise_than_the_table_is_named_line_by_line(tmp_path):
    """The release reads the chapter source only: a heading whose points differ from the table,
    or a test cell's hidden part that is not what the release writes, is named with the line
    to write, and the source is left as it is."""
    name = "04_layer_norm"
    text = release.chapter_source(name).read_text()
    heading = next(ln for ln in text.splitlines() if ln.startswith("# ### Exercise 2.1"))
    py = tmp_path / f"{name}.py"
    py.write_text(text.replace(heading, heading.replace("point", "pt", 1)))
    (problem,) = release.source_problems(py, name)
    assert problem == f"line {text.splitlines().index(heading) + 1}: write {heading!r}"
    assert py.read_text() != text  # named, not written
    one = release.chapter_source("01_attention").read_text()
    assert release.HIDDEN_PART in one  # a test cell with its hidden part (a paired save)
    py = tmp_path / "01_attention.py"
    call = f'_hidden_check("{table.keys("01_attention")["softmax"]}", softmax)'
    assert call in one
    py.write_text(one.replace(call, call.replace("softmax)", "print)"), 1))
    assert len(release.source_problems(py, "01_attention")) == 1


def test_the_given_answers_are_in_the_notebook_s_hidden_part_only():
    """02's sources state no earlier answer; the text the notebooks are generated from gives
    Exercise 2.3's hidden check the answers of 1.1 and 2.2, from their answer cells."""
    py = release.chapter_source("02_masking")
    assert "_given" not in py.read_text() and release.HIDDEN_PART not in py.read_text()
    filled = release.source_text(py, "02_masking", hidden=True)
    cell = filled[filled.index("# Check Exercise 2.3"):]
    cell = cell[:cell.index("### END HIDDEN TESTS")]
    assert "_given = {" in cell and "'causal_mask': 'def causal_mask(T):" in cell
    assert "'padding_mask_from_ids': 'def padding_mask_from_ids(ids, pad_id):" in cell


def leaks(src, released_text: str) -> list[str]:
    """Lines that exist only inside solution/hidden-test regions of ``src`` but are released."""
    released = json.loads(released_text)
    released_lines = {
        ln.strip()
        for c in released["cells"]
        if c["cell_type"] == "code"
        for ln in "".join(c["source"]).splitlines()
    }
    secret, public = [], set()
    for cell in src.cells:
        regions = _regions(cell.source, "### BEGIN SOLUTION", "### END SOLUTION") + _regions(
            cell.source, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
        )
        secret += [ln.strip() for r in regions for ln in r.splitlines() if ln.strip()]
        rest = cell.source
        for r in regions:
            rest = rest.replace(r, "")
        public |= {ln.strip() for ln in rest.splitlines()}
    secret = [ln for ln in secret if ln not in public]
    assert len(secret) >= 8, "too few solution lines to say anything"
    return [ln for ln in secret if ln in released_lines]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_solution_or_hidden_test_text_in_the_release(chapter):
    src = nbformat.read(release.SOURCE / chapter / f"{chapter}.ipynb", as_version=4)
    text = (release.RELEASE / chapter / f"{chapter}.ipynb").read_text()
    leaked = leaks(src, text)
    assert not leaked, f"solution/hidden-test lines in notebooks/{chapter}: {leaked}"
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "hidden_check"):
        assert marker not in text


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_source_notebook_follows_the_layout_contract(chapter):
    nb = nbformat.read(release.SOURCE / chapter / f"{chapter}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") for c in code), "no outputs in source notebooks"
    setup = code[0]
    assert _nbg(setup).get("locked") and not _nbg(setup).get("grade"), "first code cell: locked"
    assert "from autograder.checks" in setup.source
    tests = [c for c in nb.cells if _nbg(c).get("grade")]
    assert tests, "no autograded test cells"
    total = 0
    for cell in tests:
        meta = _nbg(cell)
        assert meta["locked"] and meta["points"] > 0 and meta["grade_id"]
        total += meta["points"]
        hidden = _regions(cell.source, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
        assert len(hidden) == 1, f"{meta['grade_id']}: one hidden-test block"
        keys = re.findall(r'_hidden_check\("([^"]+)"', hidden[0])
        for key in keys:  # "attention.softmax" is registered by autograder.checks.attention
            importlib.import_module(f"autograder.checks.{key.split('.')[0]}")
        assert keys, (
            f"{meta['grade_id']}: hidden tests must call autograder.checks._core.hidden_check "
            "(as `_hidden_check(key, fn)`): that module is sealed, while a function in a chapter's "
            "check module can be rebound by student code before the hidden tests run"
        )
        assert all(k in registered() for k in keys), meta["grade_id"]
        visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
        assert re.search(r"check_\w+\(\w+\)", visible), f"{meta['grade_id']}: no visible check"
    header = nb.cells[0].source
    shown = re.search(rf"\b{total}\b[^\n]*points|points[^\n]*\b{total}\b", header, re.I)
    assert shown, f"the first cell must show the total, {total} points"
    ids = [_nbg(c)["grade_id"] for c in nb.cells if _nbg(c)]
    assert len(ids) == len(set(ids)), "grade ids are unique"


def test_notebook01_grade_ids_and_points_are_stable():
    """The grader, the gradebook and past grades key on these ids: change them deliberately."""
    nb = nbformat.read(release.SOURCE / "01_attention" / "01_attention.ipynb", as_version=4)
    points = {_nbg(c)["grade_id"]: _nbg(c)["points"] for c in nb.cells if _nbg(c).get("grade")}
    assert points == {
        "ex1_1_dot_product_scores": 1,
        "ex2_1_softmax": 2,
        "ex3_1_self_attention_unscaled": 2,
        "ex4_1_score_variance": 1,
        "ex5_1_scaled_dot_product_attention": 4,
        "ex6_1_column_form_self_attention": 3,
        "ex7_1_cosine_similarity_attention": 2,
        "ex8_1_self_score_dominance": 1,
    }


def test_the_leak_detector_finds_an_injected_solution_line():
    src = nbformat.read(release.SOURCE / "01_attention" / "01_attention.ipynb", as_version=4)
    nb = json.loads((release.RELEASE / "01_attention" / "01_attention.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    stub = next(c for c in code if "raise NotImplementedError()" in "".join(c["source"]))
    stub["source"] = ["    return Q @ np.swapaxes(K, -1, -2)  # (..., T_q, d) @ (..., d, T_k)"]
    assert leaks(src, json.dumps(nb)) == [
        "return Q @ np.swapaxes(K, -1, -2)  # (..., T_q, d) @ (..., d, T_k)"
    ]


def test_the_grader_does_not_copy_a_chapter_source_into_its_course(tmp_path):
    """autograde copies a source folder's files next to each student's notebook: never the .py."""
    from autograder.grading.parent.course import source_ignore

    name = "01_attention"
    shutil.copytree(release.SOURCE / name, tmp_path / name, ignore=source_ignore(name))
    assert release.chapter_source(name).exists()
    assert sorted(p.name for p in (tmp_path / name).iterdir()) == [f"{name}.ipynb"]
