"""Notebook 05 (feed-forward and blocks) through the real grading path, once per session.

Solution, release and one catalogued mistake are graded in one ``course-grade`` run (see
``helpers.chapters.graded_chapter_04``; the tests: ``GradedWithChapter04``'s); the committed
release must equal a fresh generation (tests/unit/test_release.py).
"""

from __future__ import annotations

from helpers.chapters import GradedWithChapter04


class TestChapter05(GradedWithChapter04):
    ASSIGNMENT = "05_feed_forward_blocks"
    CHECKS = "feed_forward_blocks"
