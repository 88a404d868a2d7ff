"""Notebook 04 (layer norm) through the real grading path, once per test session.

One ``course-grade`` run grades three submissions built from the committed notebooks: the
solution (full marks), the student release as handed out (0 points, every check "not
implemented yet"), and the solution with one catalogued mistake (less than full marks on that
exercise, and the feedback names the mistake). The committed release must equal a fresh
generation (tests/unit/test_release.py, every chapter). ``graded_chapter_04`` is shared with
the tests of notebooks 05, 06 and 08: that one run grades all four chapters (``CHAPTERS_04``);
their tests are ``helpers.chapters.GradedWithChapter04``'s.

Grading does not run demonstration cells (``autograder/grading/autograde/demo.py``): what
they show is proven on the notebook as ``course-check`` runs it (``executed_chapter``).
"""

from __future__ import annotations

from helpers.chapters import GradedWithChapter04


class TestChapter04(GradedWithChapter04):
    ASSIGNMENT = "04_layer_norm"
    CHECKS = "layer_norm"
