"""The exercise table (autograder/checks/table.py) is the one place that states each exercise.

Cross-checks: every chapter has a table; each row's check declaration is registered under the
derived key with the row's function and number; the chapter sources hold exactly what the table
fills in (test cells, headings, points); the generated notebooks' grade ids and points are the
table's. And the fill really writes the table into a source (a changed row shows everywhere).
"""

import dataclasses
import re

import nbformat
import pytest

from autograder import release
from autograder.checks import table
from autograder.checks._core import registered
from autograder.grading.cells import nbg

CHAPTERS = release.chapters()


def test_every_chapter_has_a_table_and_every_table_a_chapter():
    assert sorted(table.TABLES) == CHAPTERS


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_declarations_agree_with_the_table(chapter):
    rows = table.chapter(chapter).exercises
    decls = table.declarations(chapter)
    module = table.chapter(chapter).module
    # every check of the chapter's module has a row, every row a check
    assert sorted(k for k in registered() if k.split(".")[0] == module) == sorted(decls)
    for ex in rows:
        check = decls[ex.key]
        assert (check.key, check.exercise) == (ex.key, ex.label)
        # the name its messages use: the function, or the first of the functions it is given
        assert check.name == (ex.arguments or (ex.function,))[0]
        assert ex.visible_cases and ex.hidden_cases, f"{ex.key}: visible and hidden cases"
    assert len({ex.grade_id for ex in rows}) == len(rows)
    assert len({ex.number for ex in rows}) == len(rows)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_source_holds_what_the_table_states(chapter):
    """Filling the table into the chapter source changes nothing (else: edit it as said; the
    release never writes it)."""
    py = release.chapter_source(chapter)
    assert release.source_problems(py, chapter) == [], f"{py} differs from the exercise table"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_generated_notebooks_have_the_tables_grade_ids_and_points(chapter):
    want = [(ex.grade_id, ex.points) for ex in table.chapter(chapter).exercises]
    for folder in (release.SOURCE, release.RELEASE):
        nb = nbformat.read(folder / chapter / f"{chapter}.ipynb", as_version=4)
        got = [(nbg(c)["grade_id"], nbg(c)["points"]) for c in nb.cells if nbg(c).get("grade")]
        assert got == want, folder


def _changed_row(chapter, number, **change):
    ch = table.TABLES[chapter]
    rows = tuple(
        dataclasses.replace(e, **change) if e.number == number else e for e in ch.exercises
    )
    return dataclasses.replace(ch, exercises=rows)


def test_a_changed_row_is_written_into_the_test_cell_heading_and_summary(monkeypatch):
    chapter = "01_attention"
    monkeypatch.setitem(
        table.TABLES,
        chapter,
        _changed_row(chapter, "2.1", points=5, title="softmax, stably", minutes=20),
    )
    text = release.source_text(release.chapter_source(chapter), chapter)
    assert "# ### Exercise 2.1 — softmax, stably  *(5 points, ~20 min)*" in text
    assert "# **Points: 19 in total** — Ex 1.1 (1), 2.1 (5), 3.1 (2)" in text
    assert (
        '# %% nbgrader={"grade": true, "grade_id": "ex2_1_softmax", "locked": true, '
        '"points": 5, "schema_version": 3, "solution": false, "task": false}\n'
        "# Check Exercise 2.1 (5 points)\ncheck_softmax(softmax)\n"
    ) in text
    old = release.chapter_source(chapter).read_text()
    changed = [
        (a, b) for a, b in zip(old.splitlines(), text.splitlines(), strict=True) if a != b
    ]
    assert len(changed) == 4, changed  # summary, heading, test cell's metadata and comment


def test_a_new_function_name_renames_grade_id_check_key_and_calls(monkeypatch):
    chapter = "04_layer_norm"
    monkeypatch.setitem(table.TABLES, chapter, _changed_row(chapter, "4.1", function="rmsnorm"))
    text = release.source_text(release.chapter_source(chapter), chapter, hidden=True)
    assert '"grade_id": "ex4_1_rmsnorm"' in text
    assert 'check_rmsnorm(rmsnorm)\n' in text
    assert '_hidden_check("layer_norm.rmsnorm", rmsnorm)' in text
    assert "ex4_1_rms_norm" not in text


def test_a_table_and_a_source_that_disagree_are_refused(monkeypatch):
    chapter = "04_layer_norm"
    ch = table.TABLES[chapter]
    monkeypatch.setitem(
        table.TABLES, chapter, dataclasses.replace(ch, exercises=ch.exercises[:-1])
    )
    with pytest.raises(ValueError, match="4 test cells .* but 3 exercises"):
        release.source_text(release.chapter_source(chapter), chapter)
    extra = dataclasses.replace(ch.exercises[-1], number="4.2", function="rms_norm_2")
    monkeypatch.setitem(
        table.TABLES, chapter, dataclasses.replace(ch, exercises=ch.exercises[:-1] + (extra,))
    )
    with pytest.raises(ValueError, match="4.1"):
        release.source_text(release.chapter_source(chapter), chapter)


def test_describe_lists_cases_and_mistakes():
    text = table.describe("01_attention")
    assert re.search(r"Exercise 2\.1 — a numerically stable softmax \(2 pt, ~15 min\)", text)
    ex = table.exercise("01_attention", "2.1")
    assert f"cases: {len(ex.visible_cases)} visible, {len(ex.hidden_cases)} hidden" in text
    assert all(f"mistake: {m.name}" in text for m in ex.mistakes)


# ---------------------------------------------------------------- stated once
ROOT = release.ROOT
STATED = {  # what the table states: check keys, test cells' and answer cells' grade ids
    s
    for ch in table.TABLES.values()
    for e in ch.exercises
    for s in (e.key, e.grade_id, e.solution_id)
}
_STATED = re.compile(
    r"(?<![\w.])(" + "|".join(re.escape(s) for s in sorted(STATED, key=len, reverse=True))
    + r")(?![\w])"
)


def _code_strings(path) -> list[tuple[int, str, str]]:
    """(line, enclosing function, text) of the string literals of a Python file that are not
    docstrings (the function is "" at module level)."""
    import ast

    nodes = list(ast.walk(ast.parse(path.read_text())))  # walked once: 200 files, every test
    docs = {
        id(n.body[0].value)
        for n in nodes
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    functions = [n for n in nodes if isinstance(n, ast.FunctionDef)]

    def enclosing(line):
        inside = [f for f in functions if f.lineno <= line <= f.end_lineno]
        return max(inside, key=lambda f: f.lineno).name if inside else ""

    return [
        (n.lineno, enclosing(n.lineno), n.value)
        for n in nodes
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


# Tests that write grade ids or keys on purpose, and why (everything else derives them):
STATED_ON_PURPOSE = {
    # they test the table and the release that writes ids from it: the literal is the expectation
    *(("tests/unit/test_exercise_table.py", f) for f in (
        "test_a_changed_row_is_written_into_the_test_cell_heading_and_summary",
        "test_a_new_function_name_renames_grade_id_check_key_and_calls",
        "test_the_release_gives_each_answer_cell_its_grade_id")),
    # instructors' gradebooks and past grades key on 01's ids: a change must be deliberate
    ("tests/unit/test_release.py", "test_notebook01_grade_ids_and_points_are_stable"),
}


def stated_outside_the_table(root=ROOT) -> list[str]:
    """Where code (not docs) in autograder/, tests/ or a chapter source's own text (not what
    the release fills in: test cells, answer cells' grade ids) names a check key or a grade
    id: each should come from autograder/checks/table.py (``table.rows``, ``table.keys``)."""
    files = sorted((root / "autograder").rglob("*.py")) + sorted((root / "tests").rglob("*.py"))
    out = []
    for path in files:
        if path == root / "autograder" / "checks" / "table.py":
            continue
        rel = path.relative_to(root).as_posix()
        for line, function, text in _code_strings(path):
            if (rel, function) in STATED_ON_PURPOSE:
                continue
            out += [f"{rel}:{line}: {m}" for m in _STATED.findall(text)]
    jupytext = release._jupytext()
    for name in CHAPTERS:
        nb = jupytext.read(release.chapter_source(name, root / "solutions"), fmt="py:percent")
        answers = {e.solution_id for e in table.chapter(name).exercises}
        for i, cell in enumerate(nb.cells):
            meta = nbg(cell)
            if meta.get("grade"):
                continue  # a test cell: written by the release from the table
            found = _STATED.findall(cell.source)
            if meta.get("grade_id") in STATED and meta["grade_id"] not in answers:
                found.append(meta["grade_id"])
            out += [f"solutions/{name}/{name}.py cell {i}: {m}" for m in found]
    return out


def test_every_test_stated_on_purpose_exists():
    """An allowed (file, function) that no longer exists would hide nothing but rot."""
    for rel, function in STATED_ON_PURPOSE:
        assert f"def {function}(" in (ROOT / rel).read_text(), (rel, function)


def test_grade_ids_and_check_keys_are_stated_only_in_the_table():
    assert stated_outside_the_table() == []


def test_the_release_gives_each_answer_cell_its_grade_id(tmp_path):
    chapter = "04_layer_norm"
    text = release.chapter_source(chapter).read_text()
    stripped = text.replace('"grade_id": "ex4_1_solution", ', "")
    assert stripped != text
    (tmp_path / f"{chapter}.py").write_text(stripped)
    assert release.source_text(tmp_path / f"{chapter}.py", chapter) == text


def test_course_check_summary_is_the_tables():
    """course-check's exercises, labels and points come from the table, whatever a test
    cell's metadata says, and an exercise whose test cell was deleted is still reported."""
    from autograder import selfcheck

    chapter = "04_layer_norm"
    nb = nbformat.read(release.RELEASE / chapter / f"{chapter}.ipynb", as_version=4)
    tests = [c for c in nb.cells if nbg(c).get("grade")]
    tests[0].metadata["nbgrader"]["points"] = 99
    nb.cells.remove(tests[-1])
    results, others = selfcheck.summarize(nb)  # not executed: no errors, every check passes
    rows = table.chapter(chapter).exercises
    assert [(r.grade_id, r.exercise, r.points) for r in results] == [
        (e.grade_id, f"{e.label} {e.function}", e.points) for e in rows
    ]
    assert [r.status for r in results[:-1]] == [selfcheck.PASSED] * (len(rows) - 1)
    assert results[-1].status == selfcheck.FAILED and "not in this notebook" in results[-1].detail


def test_course_check_says_which_answer_cell_to_run_when_a_function_was_never_defined():
    """Issue 49: a skipped answer cell made its check read a bare NameError."""
    from autograder import selfcheck

    chapter = "04_layer_norm"
    nb = nbformat.read(release.RELEASE / chapter / f"{chapter}.ipynb", as_version=4)
    ex = table.exercise(chapter, "2.2")
    cell = next(c for c in nb.cells if nbg(c).get("grade_id") == ex.grade_id)
    cell.outputs = [nbformat.v4.new_output(
        "error", ename="NameError", evalue="name 'layer_norm' is not defined", traceback=[])]
    other = next(c for c in nb.cells if nbg(c).get("grade_id") == table.exercise(
        chapter, "4.1").grade_id)
    other.outputs = [nbformat.v4.new_output(
        "error", ename="NameError", evalue="name 'np' is not defined", traceback=[])]
    results = {r.grade_id: r for r in selfcheck.summarize(nb)[0]}
    assert results[ex.grade_id].status == selfcheck.FAILED
    assert results[ex.grade_id].detail.startswith(
        "define `layer_norm` first: run the answer cell of Exercise 2.2 above (NameError: ")
    assert results[other.metadata["nbgrader"]["grade_id"]].detail == (
        "NameError: name 'np' is not defined")


def private_names_in_tests(root=ROOT) -> list[str]:
    """Where a test names a private attribute (``_name``) of a chapter's check module
    (``from autograder.checks.masking import _MASKED``, ``M._MASKED`` with ``M`` the module):
    tests reach declarations through the table (``table.check``) or the module's public API."""
    import ast

    modules = {ch.module for ch in table.TABLES.values()}
    out = []
    for path in sorted((root / "tests").rglob("*.py")):
        nodes = list(ast.walk(ast.parse(path.read_text())))  # walked once, read twice
        aliases = {}  # local name -> chapter module
        for n in nodes:
            if isinstance(n, ast.ImportFrom) and n.module:
                for a in n.names:
                    if n.module == "autograder.checks" and a.name in modules:
                        aliases[a.asname or a.name] = a.name
                    elif (n.module.rpartition(".")[2] in modules
                          and n.module.startswith("autograder.checks.")
                          and a.name.startswith("_")):
                        out.append(f"{path.relative_to(root)}:{n.lineno}: {n.module}.{a.name}")
            elif isinstance(n, ast.Import):
                for a in n.names:
                    if a.name.rpartition(".")[2] in modules and a.name.startswith("autograder."):
                        aliases[a.asname or a.name] = a.name
        for n in nodes:
            if (isinstance(n, ast.Attribute) and n.attr.startswith("_")
                    and not n.attr.startswith("__") and ast.unparse(n.value) in aliases):
                out.append(f"{path.relative_to(root)}:{n.lineno}: {ast.unparse(n)}")
    return out


def test_no_test_names_a_private_attribute_of_a_check_module():
    assert private_names_in_tests() == []
