"""The grader's parts on their own: the runner's limits, finding submissions, the parent-side
checks of a submitted notebook, the statuses read from an executed notebook, and the two nbgrader
preprocessors. Fast: no nbgrader run here (see test_grade_class / test_grade_resume)."""

from __future__ import annotations

import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_output

from autograder.grading.autograde.preprocessors import HideHiddenTests, StderrIsNotFailure
from autograder.grading.config import GradeConfig
from autograder.grading.parent.course import describe
from autograder.grading.parent.runner import LocalRunner
from autograder.grading.parent.student import precheck
from autograder.grading.parent.submissions import discover, find_notebook

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "solutions" / "99_fixture" / "99_fixture.ipynb"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_runner_kills_the_whole_tree_on_timeout(tmp_path):
    # the child starts a grandchild in a session of its own (as Jupyter starts kernels)
    # and both loop forever (asleep: a busy loop took a core from the other tests meanwhile)
    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time\\nwhile True: time.sleep(1)'], "
        "start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "while True: time.sleep(1)\n"
    )
    t0 = time.monotonic()
    r = LocalRunner(GradeConfig(memory_mb=1024)).run([sys.executable, "-c", code], tmp_path,
                                                     timeout=3, log_path=tmp_path / "log")
    assert r.timed_out and r.returncode is None
    assert time.monotonic() - t0 < 15
    grandchild = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild)


def test_runner_memory_limit(tmp_path):
    code = "x = bytearray(800 * 2**20)\nprint('allocated')"
    r = LocalRunner(GradeConfig(memory_mb=400)).run([sys.executable, "-c", code], tmp_path,
                                                    timeout=60, log_path=tmp_path / "log")
    log = (tmp_path / "log").read_text()
    assert r.returncode != 0 and not r.timed_out
    assert "MemoryError" in log and "allocated" not in log
    # the same program fits under a larger limit: the limit is what stopped it
    r = LocalRunner(GradeConfig(memory_mb=2048)).run([sys.executable, "-c", code], tmp_path,
                                                     timeout=60, log_path=tmp_path / "log2")
    assert r.returncode == 0 and "allocated" in (tmp_path / "log2").read_text()


def test_discover_folders_zips_and_nesting(tmp_path):
    subs = tmp_path / "subs"
    (subs / "Ann Lee").mkdir(parents=True)
    (subs / "Ann Lee" / "deep" / "er").mkdir(parents=True)
    (subs / "Ann Lee" / "deep" / "er" / "01_attention (2).ipynb").write_text("{}")
    (subs / "Ann Lee" / ".ipynb_checkpoints").mkdir()
    (subs / "Ann Lee" / ".ipynb_checkpoints" / "01_attention.ipynb").write_text("{}")
    with zipfile.ZipFile(subs / "bob.zip", "w") as zf:
        zf.writestr("bob/hw/01_attention.ipynb", "{}")
        zf.writestr("__MACOSX/bob/hw/01_attention.ipynb", "junk")
        zf.writestr("../escape.ipynb", "{}")  # must not land outside the unpack folder
    (subs / "broken.zip").write_bytes(b"not a zip")
    (subs / "readme.txt").write_text("x")
    found, problems = discover(subs, tmp_path / "unpacked")
    # every entry is a submission; those that cannot be graded say why (rows 'not graded')
    assert [s.student for s in found] == ["Ann_Lee", "bob", "broken", "readme.txt"]
    assert [s.problem for s in found] == ["", "", "not a zip file, or a damaged one",
                                          "neither a folder nor a .zip"]
    assert problems == ["broken.zip: not a zip file, or a damaged one",
                        "readme.txt: neither a folder nor a .zip"]
    assert not (tmp_path / "escape.ipynb").exists()
    ann, bob, broken, _ = found
    path, _ = find_notebook(ann, "01_attention")
    assert path.name == "01_attention (2).ipynb"  # the checkpoint copy is not taken
    path, _ = find_notebook(bob, "01_attention")
    assert path.relative_to(bob.path).parts == ("bob", "hw", "01_attention.ipynb")
    assert find_notebook(broken, "01_attention")[0] is None
    assert find_notebook(bob, "02_other")[1] == "no 02_other.ipynb in the submission"


@pytest.fixture
def fixture_nb():
    src = nbformat.read(FIXTURE, as_version=4)
    # the release as nbgrader makes it: hidden tests out, answers replaced by stubs
    rel = nbformat.read(FIXTURE, as_version=4)
    for cell in rel.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = cell.source.split("### BEGIN SOLUTION")[0] + "raise NotImplementedError()"
        if "### BEGIN HIDDEN TESTS" in cell.source:
            cell.source = cell.source.split("### BEGIN HIDDEN TESTS")[0].rstrip()
    return describe("99_fixture", "99_fixture", src, rel), rel


def test_describe_maps_tests_to_answer_cells(fixture_nb):
    nb, _ = fixture_nb
    assert [(g.grade_id, g.max_points, g.hidden, g.solution_ids) for g in nb.grade_cells] == [
        ("ex1_visible", 1.0, False, ["ex1_solution"]),
        ("ex1_hidden", 2.0, True, ["ex1_solution"]),
        ("ex2_visible", 1.0, False, ["ex2_solution"]),
        ("ex2_hidden", 2.0, True, ["ex2_solution"]),
    ]


def _facts(reason, built):
    return reason, built.restored if built else {}, built.missing if built else []


def test_precheck(fixture_nb, tmp_path):
    nb, rel = fixture_nb
    p = tmp_path / "nb.ipynb"
    nbformat.write(rel, p)
    assert _facts(*precheck(p, nb)) == (None, {}, [])
    edited = nbformat.read(p, as_version=4)
    edited.cells[4].source = "pass"  # ex1_visible
    del edited.cells[9]  # ex2_hidden
    del edited.cells[7]  # ex2_solution
    nbformat.write(edited, p)
    assert _facts(*precheck(p, nb)) == (
        None, {"ex1_visible": "edited", "ex2_hidden": "deleted"}, ["ex2_solution"]
    )
    p.write_text(nbformat.writes(rel)[:300])
    reason, _ = precheck(p, nb)
    assert reason == "invalid notebook file (not valid JSON)"
    p.write_text('{"cells": "not a list", "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    reason, _ = precheck(p, nb)
    assert reason.startswith("invalid notebook file (") and "JSON" not in reason


def test_precheck_names_another_notebook_under_this_ones_name(fixture_nb, tmp_path):
    """A file under the right name holding another notebook (or none of this one's graded
    cells): a plain reason, not nbgrader's traceback (issue 31, item 6); the chapter it holds
    named when the exercise table knows it (issue 47)."""
    nb, rel = fixture_nb
    other = nbformat.read(REPO / "solutions" / "01_attention" / "01_attention.ipynb", 4)
    p = tmp_path / "nb.ipynb"
    nbformat.write(other, p)
    assert precheck(p, nb) == (f"this file holds 01_attention, not {nb.name}", None)
    nbformat.write(nbformat.v4.new_notebook(), p)  # empty
    assert precheck(p, nb) == (f"this file is not {nb.name} (none of its graded cells)", None)
    one = nbformat.read(p, as_version=4)  # one of its cells is enough to be graded
    one.cells = [c for c in rel.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                 == "ex1_visible"]
    nbformat.write(one, p)
    reason, built = precheck(p, nb)
    assert reason is None and built.restored["ex2_hidden"] == "deleted"


def _cell(gid, *, solution=False, grade=False, outputs=()):
    c = new_code_cell("x", outputs=list(outputs))
    c.metadata["nbgrader"] = {"grade_id": gid, "solution": solution, "grade": grade}
    return c


def test_stderr_is_not_failure_but_errors_are():
    from nbgrader.utils import determine_grade

    warn = new_output("stream", name="stderr", text="UserWarning: deprecated\n")
    cell = _cell("t", grade=True, outputs=[warn])
    cell.metadata.nbgrader.update(points=2, locked=True)
    assert determine_grade(cell)[0] == 0  # nbgrader 0.9.6 alone: a warning costs the points
    StderrIsNotFailure().preprocess_cell(cell, {}, 0)
    assert determine_grade(cell)[0] == 2 and cell.outputs[0].text.startswith("UserWarning")
    err = new_output("error", ename="AssertionError", evalue="", traceback=[])
    cell.outputs.append(err)
    assert determine_grade(cell)[0] == 0


def test_hide_hidden_tests_source_and_traceback():
    src = ("check(f)\n### BEGIN HIDDEN TESTS\nassert f(SECRET_INPUT) == 3\n"
           "### END HIDDEN TESTS")
    tb = ["Cell In[3], line 3", "----> 3 assert f(SECRET_INPUT) == 3", "AssertionError: "]
    cell = _cell("t", grade=True, outputs=[
        new_output("error", ename="AssertionError", evalue="", traceback=tb)])
    cell.source = src
    HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert "SECRET_INPUT" not in cell.source and "SECRET_INPUT" not in str(cell.outputs)
    assert cell.source.startswith("check(f)") and cell.outputs[0].traceback == ["AssertionError: "]
    # a student's own cell is left alone, even with a stray marker
    own = _cell("s", solution=True)
    own.source = "### BEGIN HIDDEN TESTS\nmine"
    HideHiddenTests().preprocess_cell(own, {}, 0)
    assert own.source == "### BEGIN HIDDEN TESTS\nmine"


def test_help():
    out = subprocess.run([sys.executable, "-m", "autograder.grade", "--help"], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0
    for opt in ("--out", "--workers", "--timeout", "--memory", "--assignment", "--cell-timeout"):
        assert opt in out.stdout


def test_gradebooks_of_one_url_share_an_engine_and_see_the_same_rows(tmp_path, monkeypatch):
    """``nbgrader_patches.share_engines``: every ``Gradebook`` of one URL gets the same engine
    (its compiled statements kept), another URL its own; what one wrote, the next one reads."""
    import nbgrader.api
    from nbgrader.api import Gradebook

    from autograder.grading.nbgrader_patches import schema_head, share_engines

    monkeypatch.setattr(nbgrader.api, "create_engine", nbgrader.api.create_engine)  # put back
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", schema_head)  # no alembic run
    share_engines()
    share_engines()  # idempotent: one layer
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    with Gradebook(a) as gb:
        gb.add_student("ada")
        engine = gb.engine
    with Gradebook(a) as gb:
        assert gb.engine is engine
        assert [s.id for s in gb.students] == ["ada"]
    with Gradebook(b) as gb:
        assert gb.engine is not engine and gb.students == []
