"""The diagnosis of a row, the class report (report.html) and the LMS exports, on hand-made
results (fast); the end-to-end versions run in test_dispatch.py and test_browser_report.py."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from autograder.grading.parent.diagnosis import diagnose
from autograder.grading.parent.exports import write_exports
from autograder.grading.parent.report import rank_mistakes, render, write_report
from autograder.grading.status import Kind


def _err(ename, evalue):
    return [{"output_type": "stream", "name": "stdout", "text": "hi"},
            {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}]


@pytest.mark.parametrize("kind, points, outputs, expected", [
    (Kind.GRADED, "2", [], ""),
    (Kind.GRADED, "0", _err("CheckFailed", "Exercise 2.1 `softmax` fails on case 3:\n  output "
                         "differs\n  Likely mistake: unstable softmax overflowing. np.exp(1000) "
                         "is inf."), "unstable softmax overflowing"),
    (Kind.GRADED, "0", _err("CheckFailed", "x fails:\n  your function raised ValueError: bad\n  "
                         "Likely mistake: scores transposed (K Qᵀ). Row i..."),
     "scores transposed (K Qᵀ)"),
    (Kind.GRADED, "0", _err("NotImplementedYet", "Exercise 1.1 `f` is not implemented yet."),
     "not implemented"),
    (Kind.GRADED, "0", _err("CheckFailed", "x fails on y:\n  your function raised ValueError: "
                         "shapes"), "raised ValueError"),
    (Kind.GRADED, "0", _err("CheckFailed", "x fails on y:\n  the result has shape (2, 3), "
                         "expected (3, 2)"), "wrong shape"),
    (Kind.GRADED, "0", _err("CheckFailed", "x fails on y:\n  the result differs at [0, 1]"),
     "output differs"),
    (Kind.GRADED, "0", _err("AssertionError", ""), "output differs"),
    (Kind.GRADED, "0", _err("NameError", "name 'f' is not defined"), "raised NameError"),
    (Kind.TEST_RESTORED, "0", _err("AssertionError", ""), "output differs"),
    (Kind.GRADED, "0", [], "lost points"),
    (Kind.TIMED_OUT, "", [], "timeout"),
    (Kind.COURSE_CELL, "", [], "kernel died"),
    (Kind.REFUSED, "", [], "invalid notebook"),
    (Kind.NOT_SUBMITTED, "", [], "notebook missing"),
    (Kind.GRADER_ERROR, "", [], "grader error"),
    (Kind.NO_GRADE, "", [], "not graded"),
    (Kind.NOT_IN_NOTEBOOK, "0", [], "earlier release"),
    (Kind.ANSWER_MISSING, "0", _err("NameError", "name 'f' is not defined"), "raised NameError"),
])
def test_diagnose(kind, points, outputs, expected):
    assert diagnose(kind, points, "2", outputs) == expected


@pytest.mark.parametrize("why, expected", [
    ("ended the kernel", "ended the kernel"), ("flooded its output", "output flood"),
    ("ran past the cell timeout and could not be interrupted", "could not be interrupted"),
    ("something else", "no result")])
def test_diagnose_a_stopped_notebook(why, expected):
    assert diagnose(Kind.STOPPED, "0", "2", [], why=why) == expected


def _row(student, ex, points, status="graded", diagnosis="", notebook="01_attention"):
    return {"student": student, "notebook": notebook, "exercise": ex, "points": points,
            "max_points": "2", "status": status, "diagnosis": diagnosis}


NASTY = "<script>alert('x')</script>"


def _results() -> dict[str, dict]:
    ng = "not graded: a cell of this exercise ran over 30 s"
    return {
        "ann": {"student": "ann", "seconds": 12.5, "name": "Ann Ó",
                "rows": [_row("ann", "ex1", "2"),
                         _row("ann", "ex2", "0", diagnosis="mask inverted")]},
        "bob": {"student": "bob", "seconds": 40.0, "name": NASTY,
                "rows": [_row("bob", "ex1", "0", diagnosis="mask inverted"),
                         _row("bob", "ex2", "0", diagnosis="mask inverted")]},
        "cy": {"student": "cy", "seconds": 3.0,  # no name: an older result file
               "rows": [_row("cy", "ex1", "0", diagnosis="wrong shape"),
                        _row("cy", "ex2", "", status=ng, diagnosis="timeout")]},
        "dee": {"student": "dee", "seconds": 5.0,
                "rows": [dict(_row("dee", "ex1", "0", diagnosis=NASTY),
                              flagged=f"flagged: imports {NASTY}"),
                         _row("dee", "ex2", "", status=f"not graded: {NASTY}")]},
    }


def test_rank_mistakes_counts_students_not_rows():
    rows = [r for res in _results().values() for r in res["rows"]]
    ranked = rank_mistakes(rows)
    assert ranked[0] == ("mask inverted", ["ex1", "ex2"], ["ann", "bob"])
    assert [d for d, _, _ in ranked] == ["mask inverted", NASTY, "wrong shape"]
    assert "timeout" not in [d for d, _, _ in ranked]  # not graded: its own table


def _section(page: str, cls: str) -> str:
    m = re.search(rf"<table class={cls}>(.*?)</table>", page, re.S)
    assert m, cls
    return m.group(1)


def test_report_content_and_escaping():
    page = render(_results())
    assert "<script" not in page  # names, statuses, diagnoses are all escaped
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    mistakes = _section(page, "mistakes")
    first = re.findall(r"<td class=mistake>(.*?)</td>", mistakes)
    assert first[0] == "mask inverted"
    assert mistakes.index("ann") < mistakes.index("wrong shape")
    kinds = dict(zip(first, re.findall(r"<td class=kind>(.*?)</td>", mistakes), strict=True))
    assert kinds["mask inverted"] == "catalogued mistake"  # the check library's name
    assert kinds["wrong shape"] == "failure kind"
    ng = _section(page, "not-graded")
    assert "ran over 30 s" in ng and "cy" in ng and "(ex2)" in ng
    slow = re.findall(r"<tr><td>(\w+)", _section(page, "slowest"))
    assert slow == ["bob", "ann", "dee", "cy"]
    assert "Ann Ó" in page
    flagged = _section(page, "flagged")
    assert "dee" in flagged and "ex1" in flagged and "imports &lt;script" in flagged
    assert "ann" not in flagged
    plots = re.findall(r"<svg class='plot' .*?</svg>", page)
    assert len(plots) == 1 and "<img" not in page


def test_partial_report_says_so_and_is_written_atomically(tmp_path):
    (tmp_path / "results").mkdir()
    res = _results()
    (tmp_path / "results" / "ann.json").write_text(json.dumps(res["ann"]))
    (tmp_path / "results" / ".bob.json.tmp-1").write_text("{half")  # a write in progress
    path = write_report(tmp_path, ["ann", "bob", "cy"])
    page = path.read_text()
    assert "1 of 3 students graded so far" in page
    assert "bob" not in page
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []


def _read(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_the_report_lists_the_reviews_pending():
    """A review pending in formgrader (grades.csv's ``review``) is in the report: counted at
    the top and listed under its notebook, its text escaped; none: neither."""
    res = _results()
    rows = [r for sid in sorted(res) for r in res[sid]["rows"]]
    page = render(res, rows=rows)
    assert "Reviews pending" not in page and "for your review" not in page
    review = f"autograded score changed 0 -> 2 under manual score 1 {NASTY}"
    rows[0] = {**rows[0], "review": review}
    page = render(res, rows=rows)
    assert "<p class=reviews>1 grade waits for your review in formgrader" in page
    listed = _section(page, "review")
    assert "ann" in listed and "ex1" in listed and "&lt;script&gt;" in listed
    assert NASTY not in page
    assert "<table class=flagged>" in render(_results())  # the other listing, as it was


def test_each_lms_file_has_its_own_students_and_keeps_not_graded_empty(tmp_path):
    """A class mixing downloads: the Canvas file (its header the roster's column) has the
    Canvas students, Moodle's grading worksheet the Moodle ones, keyed by participant and
    dated by the change log's last change of the total; a plain folder is in neither."""
    res = _results()
    for sid, lms, lms_id in (("ann", "canvas", "1001"), ("bob", "canvas", "1002"),
                             ("cy", "canvas", "1003")):
        res[sid].update(lms=lms, lms_id=lms_id)  # dee: a plain folder
    res["eve"] = {"student": "eve", "seconds": 1, "name": "Eve, Jr.", "lms_id": "17",
                  "lms": "moodle",
                  "rows": [_row("eve", "ex1", "1.5"), _row("eve", "ex2", "2"),
                           _row("eve", "x", "1", notebook="02_other")]}
    res["flo"] = {"student": "flo", "seconds": 1, "name": "Flo", "lms_id": "18",
                  "lms": "moodle", "rows": [_row("flo", "ex1", "2"), _row("flo", "ex2", "")]}
    (tmp_path / "changes.csv").write_text(
        "when,run,cause,student,assignment,notebook,exercise,old,new\n"
        "2026-12-01T10:00:00+00:00,r1,new submission,eve,01_attention,,total,,3\n"
        "2026-12-01T10:00:00+00:00,r1,new submission,eve,02_other,,total,,1\n"
        "2026-12-02T09:30:00+00:00,r2,checks changed,eve,01_attention,,total,3,3.5\n")
    written = write_exports(tmp_path, {"01_attention": ["01_attention"]}, res,
                            ["ann", "bob", "cy", "dee", "eve", "flo", "absent"],
                            columns={"01_attention": "01 Attention (4711)"})
    assert [p.name for p in written] == ["01_attention.canvas.csv", "01_attention.moodle.csv"]
    canvas = _read(tmp_path / "exports" / "01_attention.canvas.csv")
    assert canvas == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01 Attention (4711)"],
        ["Ann Ó", "1001", "", "", "", "2"],
        [NASTY, "1002", "", "", "", "0"],
        ["cy", "1003", "", "", "", ""],  # an exercise not graded: empty, not 0
    ]
    moodle = _read(tmp_path / "exports" / "01_attention.moodle.csv")
    assert moodle == [
        ["Identifier", "Full name", "Grade", "Maximum Grade", "Last modified (grade)"],
        ["Participant 17", "Eve, Jr.", "3.5", "4", "2026-12-02T09:30:00+00:00"],  # 01's only
        ["Participant 18", "Flo", "", "4", ""],  # not graded: empty; no change logged
    ]
    # a Canvas class: no Moodle file (one an older course-grade wrote is gone), and no
    # roster column: the assignment's own name
    canvas_only = {sid: res[sid] for sid in ("ann", "bob")}
    assert write_exports(tmp_path, {"01_attention": ["01_attention"]}, canvas_only) == \
        [tmp_path / "exports" / "01_attention.canvas.csv"]
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == \
        ["01_attention.canvas.csv"]
    assert _read(tmp_path / "exports" / "01_attention.canvas.csv")[0][-1] == "01_attention"


def test_report_writer_limits_its_share_of_the_run(tmp_path):
    from autograder.grading.parent.report import ReportWriter

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ann.json").write_text(json.dumps(_results()["ann"]))
    stingy = ReportWriter(tmp_path, share=1e-9)  # any write costs more than the run allows
    assert stingy.write(["ann"]) is not None  # the first is always written
    (tmp_path / "results" / "bob.json").write_text(json.dumps(_results()["bob"]))
    assert stingy.write(["ann", "bob"]) is None  # too soon: skipped
    assert "bob" not in (tmp_path / "report.html").read_text()
    assert stingy.write(["ann", "bob"], force=True) is not None  # the end of a run
    assert "bob" in (tmp_path / "report.html").read_text()
    assert ReportWriter(tmp_path, share=1e9).write(["ann"]) is not None


def test_general_symptoms_are_labelled_symptoms_not_catalogued_mistakes():
    """A general symptom (_symptoms.py: any exercise, from how the output relates to the
    answer) is told apart from a mistake the exercise's catalogue names."""
    from autograder.checks import _symptoms

    results = {"eve": {"student": "eve", "seconds": 1.0, "rows": [
        _row("eve", "ex1", "0", diagnosis=_symptoms.TRANSPOSED.name),
        _row("eve", "ex2", "0", diagnosis=_symptoms.INVERTED.name),
        _row("eve", "ex3", "0", diagnosis="missing transpose of K"),
        _row("eve", "ex4", "0", diagnosis="wrong shape")]}}  # fmt: skip
    mistakes = _section(render(results), "mistakes")
    names = re.findall(r"<td class=mistake>(.*?)</td>", mistakes)
    kinds = dict(zip(names, re.findall(r"<td class=kind>(.*?)</td>", mistakes), strict=True))
    assert kinds == {"transposed output": "symptom", "True and False swapped": "symptom",
                     "missing transpose of K": "catalogued mistake",
                     "wrong shape": "failure kind"}  # fmt: skip


def test_no_symptom_shares_a_name_with_a_catalogued_mistake():
    """A diagnosis is only a name: a symptom called like a catalogue entry would be
    labelled as one of the two at random."""
    from autograder.checks.table import TABLES
    from autograder.grading.parent.diagnosis import symptom_names

    catalogued = {m.name for c in TABLES.values() for e in c.exercises for m in e.mistakes}
    assert catalogued and not (catalogued & symptom_names())


def test_the_charts_show_each_score_count_and_the_not_graded():
    """One chart per panel: a bar per score that occurs (0 and the maximum always), its
    height in proportion to the students who got it, their number above it, and a red n/g
    bar; the labels are escaped."""
    from xml.etree import ElementTree

    from autograder.grading.parent.report import _histograms

    svg = _histograms("01 <x>", [("total", [0.0, 3.0, 3.0, 1.5], 3.0, 0),
                                 ("ex1", [2.0, 2.0, 2.0], 2.0, 2)])
    root = ElementTree.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    bars = [(r.find(f"{ns}title").text, float(r.get("height")), r.get("fill"))
            for r in root.iter(f"{ns}rect")]
    assert [b[0] for b in bars] == ["0: 1", "1.5: 1", "3: 2", "0: 0", "2: 3", "n/g: 2"]
    heights = {b[0]: b[1] for b in bars}
    assert heights["3: 2"] == 2 * heights["0: 1"] and heights["0: 0"] == 0
    assert heights["2: 3"] == 1.5 * heights["n/g: 2"]
    assert bars[-1][2] != bars[0][2]  # not graded in another colour
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert texts[0] == "01 <x>" and "01 &lt;x&gt;" in svg
