"""Notebook 02 (masking) through the real grading path, once per test session.

One ``course-grade`` run grades three submissions of the chapter together: the student
release with every solution cell filled in from the source (must score full marks), the
release as handed out (must run end to end, score 0, every check "not implemented yet"), and
the filled-in release with one catalogued mistake (its exercise scores 0 and the feedback
names the mistake). The committed release must equal a fresh generation
(tests/unit/test_release.py checks every chapter's in one generation).

The run and the tests are shared with notebooks 03's and 07's tests
(``helpers.chapters.graded_chapter_02``: one ``course-grade`` run grades the three chapters;
``GradedWithChapter02``: the tests each of them runs on it).
"""

from __future__ import annotations

from helpers.chapters import GradedWithChapter02


class TestChapter02(GradedWithChapter02):
    NAME = "02_masking"
