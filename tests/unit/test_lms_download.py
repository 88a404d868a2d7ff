"""An LMS download is one assignment's (issue 47, fact 10): which assignment
(``submissions.one_assignment``: ``--assignment``, else the one whose notebook the most of
its students handed in; a tie or none: nothing of it), and a notebook of another assignment
in it is not found for that assignment (``find_notebook``) but named as a stray."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from autograder.grading.parent.submissions import (
    discover,
    find_notebook,
    missing,
    one_assignment,
    strays,
)

NOTEBOOKS = {"01_attention": ["01_attention"], "02_masking": ["02_masking"]}
NB = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _download(folder: Path, files: list[str]) -> Path:
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "submissions.zip", "w") as z:
        for name in files:
            z.writestr(name, NB)
    return folder


def _decide(tmp_path: Path, files: list[str], given=None):
    subs, _ = discover(_download(tmp_path / "in", files), tmp_path / "unpacked")
    lines = one_assignment(subs, NOTEBOOKS, given)
    return {s.student: s for s in subs}, lines


WEEK2 = ["lovelaceada_1001_5001_01_attention.ipynb", "lovelaceada_1001_5001_02_masking.ipynb",
         "babbagecharles_1002_5002_02_masking.ipynb"]


def test_the_assignment_most_students_handed_in_and_the_stray_named(tmp_path):
    subs, lines = _decide(tmp_path, WEEK2)
    assert lines == []
    assert {s.download_of for s in subs.values()} == {"02_masking"}
    ada = subs["lovelaceada_1001"]
    assert find_notebook(ada, "01_attention", "01_attention") == (None, missing("01_attention"))
    assert find_notebook(ada, "02_masking", "02_masking")[0].name == "02_masking.ipynb"
    assert strays(ada, NOTEBOOKS) == [
        "canvas: lovelaceada_1001_5001_01_attention.ipynb is in 02_masking's download: not "
        "graded for 01_attention"]
    assert strays(subs["babbagecharles_1002"], NOTEBOOKS) == []


@pytest.mark.parametrize("given", [["01_attention"], ["01_attention", "99_none"]])
def test_assignment_given_decides(tmp_path, given):
    subs, lines = _decide(tmp_path, WEEK2, given)
    assert lines == [] and {s.download_of for s in subs.values()} == {"01_attention"}
    babbage = subs["babbagecharles_1002"]
    assert find_notebook(babbage, "02_masking", "02_masking")[0] is None
    assert strays(babbage, NOTEBOOKS) == [
        "canvas: babbagecharles_1002_5002_02_masking.ipynb is in 01_attention's download: "
        "not graded for 02_masking"]


def test_a_tie_grades_nothing_of_the_download(tmp_path):
    subs, lines = _decide(tmp_path, ["lovelaceada_1001_5001_01_attention.ipynb",
                                     "babbagecharles_1002_5002_02_masking.ipynb"])
    assert lines == [
        "submissions.zip: an LMS download is one assignment's, and as many of its students "
        "handed in 01_attention and 02_masking: nothing of it graded; name its assignment "
        "with --assignment"]
    assert {s.download_of for s in subs.values()} == {""}
    assert all(find_notebook(s, a, a)[0] is None for s in subs.values() for a in NOTEBOOKS)
    assert all(strays(s, NOTEBOOKS) == [] for s in subs.values())


def test_no_notebook_of_an_assignment_is_said(tmp_path):
    subs, lines = _decide(tmp_path, ["lovelaceada_1001_5001_notes.ipynb",
                                     "babbagecharles_1002_5002_essay.ipynb"])
    assert lines == ["submissions.zip: an LMS download is one assignment's, and it holds no "
                     "notebook of an assignment: nothing of it graded; name its assignment "
                     "with --assignment"]


def test_each_download_is_decided_on_its_own_and_a_folder_is_not_one(tmp_path):
    folder = _download(tmp_path / "in", WEEK2)
    (folder / "hopper").mkdir()  # a student's own folder: both notebooks graded
    for a in NOTEBOOKS:
        (folder / "hopper" / f"{a}.ipynb").write_text(NB)
    (folder / "turingalan_1003_7000_01_attention.ipynb").write_text(NB)  # the top: 01's
    subs, _ = discover(folder, tmp_path / "unpacked")
    assert one_assignment(subs, NOTEBOOKS) == []
    of = {s.student: s.download_of for s in subs}
    assert of == {"babbagecharles_1002": "02_masking", "hopper": None,
                  "lovelaceada_1001": "02_masking", "turingalan_1003": "01_attention"}
    hopper = next(s for s in subs if s.student == "hopper")
    assert all(find_notebook(hopper, a, a)[0] is not None for a in NOTEBOOKS)
