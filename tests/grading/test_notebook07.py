"""Notebook 07 (BPE tokenization) through the real grading path, once per test session.

One ``course-grade`` run grades three submissions together
(``helpers.chapters.graded_chapter_02``): the release filled in with the source's solutions
(full marks), the release as handed out (runs end to end, scores 0, every check "not
implemented yet"), and the filled-in release with
one catalogued mistake — a decoder that fails on bytes that are not valid UTF-8 — which loses
exactly that exercise with the mistake named in the feedback. The graded solution shows the
challenge's measured speed-up (the grader's verdict); the solution as ``course-check`` runs it
(demonstration cells included: grading skips them) shows parity with tiktoken.
"""

from __future__ import annotations

import re

import nbformat

from autograder.grading.cells import nbg as _nbg

from helpers.chapters import (
    SOURCE,
    GradedWithChapter02,
    autograded_notebook,
    executed_chapter,
)

NAME = "07_bpe"


def test_release_demonstration_cells_say_what_to_finish_first(tmp_path_factory):
    nb = executed_chapter(tmp_path_factory, NAME, "release")
    demos = [c for c in nb.cells if c.cell_type == "code" and "with requires(" in c.source]
    assert len(demos) >= 8
    for cell in demos:  # each picture says which exercise to finish first
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        assert re.search(r"Finish Exercise \d\.\d.* first", text), cell.source


def _stream_text(nb) -> str:
    return "\n".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
        if o.output_type == "stream"
    )


class TestChapter07(GradedWithChapter02):
    NAME = NAME

    def test_solution_shows_the_speed_up_and_tiktoken_parity(self, chapter, tmp_path_factory):
        assert chapter["returncode"] == 0, chapter["stderr"]
        text = _stream_text(autograded_notebook(chapter["out"], "solution", NAME))
        speed_ups = [float(x) for x in re.findall(r"speed-up over the naive loop on .*: ([\d.]+)x",
                                                  text)]
        # one: the grader's verdict, which replaces the test cell's output (chapter 07 is judged
        # outside the kernel; the graded kernel's visible check runs nothing)
        assert len(speed_ups) == 1 and min(speed_ups) >= 3, speed_ups
        assert "decided outside your notebook" in text
        text = _stream_text(executed_chapter(tmp_path_factory, NAME))  # the demonstration cells
        assert "identical to tiktoken: True" in text and "round trip: True" in text
        assert "same merges: False" not in text and text.count("same merges: True") == 3
        # (figures are not checked here: course-grade runs matplotlib with the Agg backend)


def test_points_in_the_title_match_the_graded_cells():
    nb = nbformat.read(SOURCE / NAME / f"{NAME}.ipynb", as_version=4)
    points = {_nbg(c)["grade_id"]: _nbg(c)["points"] for c in nb.cells if _nbg(c).get("grade")}
    assert len(points) == 10
    total = sum(points.values())
    assert f"**Points: {total:g} in total**" in nb.cells[0].source
    for gid, p in points.items():
        major, minor = re.match(r"ex(\d+)_(\d+)_", gid).groups()
        assert f"{major}.{minor} ({p:g}" in nb.cells[0].source, gid
