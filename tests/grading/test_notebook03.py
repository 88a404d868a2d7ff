"""Notebook 03 (multi-head attention) through the real grading path, once per test session.

Same proofs as notebook 02 (``helpers.chapters.GradedWithChapter02``): the filled-in
release scores full marks, the release runs end to end and scores 0 with every check saying
"not implemented yet", a submission with one catalogued mistake (W_O forgotten) loses that
exercise and its feedback names the mistake, and the notebook grades in under 2 minutes (that
the committed release equals a fresh generation: tests/unit/test_release.py, every chapter).
"""

from __future__ import annotations

from helpers.chapters import GradedWithChapter02


class TestChapter03(GradedWithChapter02):
    NAME = "03_multihead_attention"
