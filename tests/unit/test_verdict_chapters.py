"""Every chapter judged outside the kernel: the probe records, the grader decides.

Written once over the chapters (``helpers/answer_sets.py``): the answers of
``test_checks_chapters.py`` go through the trusted path (``helpers.verdict.judged``: case
inputs -> probe record -> judge), as ``course-grade`` does for a chapter in
``exercises.converted()``. A chapter's own verdicts (built-ins seen in a thread, inputs rebuilt
from plain data, the kernel's package) are tested in its ``test_verdict_<module>.py``.
"""

from __future__ import annotations

import nbformat
import pytest

from autograder.checks import table
from autograder.grading import exercises

from helpers.answer_sets import CHAPTERS, REPO, answers, solutions, wrong_answers
from helpers.verdict import NAIVE_BPE_KEPT, assert_named_from_the_record, judged

# 01's and 04's answers through records take about 70 s more (their mistakes ~50 s): they are
# sampled in test_verdict.py (its softmax, gradient and norms tests)
JUDGED = ("02_masking", "03_multihead_attention", "05_feed_forward_blocks", "06_transformer",
          "07_bpe")
# Exercise 4.1 (BPE) shares 3.1's catalogue and cases; the probe times a function whose cases
# all ran (its solution: ~55 s here; its wrong trainers are naive-speed): judged in
# tests/slow/test_bpe_speed.py
SLOW = {table.keys("07_bpe")["train_bpe_fast"]}
RIGHT = [(ch, key) for ch in JUDGED for key in sorted(answers(ch).CHECKS) if key not in SLOW]
# the naive trainer's mistakes but one: tests/slow/test_verdict_bpe_naive.py (NAIVE_BPE_KEPT)
NAIVE = table.keys("07_bpe")["train_bpe_naive"]
WRONG = [w for w in wrong_answers() if table.by_key(w[0]).module in
         {table.chapter(ch).module for ch in JUDGED} and w[0] not in SLOW
         and (w[0] != NAIVE or w[2] == NAIVE_BPE_KEPT)]


def _blank(*args, **kwargs):
    raise NotImplementedError()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_is_converted(chapter):
    assert table.chapter(chapter).module in exercises.converted()
    src = nbformat.read(REPO / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
    found = sorted(k for ks in exercises.converted_keys(src).values() for k in ks)
    assert found == sorted(answers(chapter).CHECKS)


@pytest.mark.parametrize("chapter,key", RIGHT, ids=[k for _, k in RIGHT])
def test_solution_and_a_different_right_answer_pass_and_a_blank_is_not_implemented(chapter,
                                                                                     key):
    check = table.by_key(key).declaration()
    rights = [solutions(chapter)[check.name]] + [answers(chapter).GOOD.get(key)]
    for fn in filter(None, rights):
        v = judged(check, fn)
        assert v.passed and v.diagnosis == "", v.message
    assert judged(check, _blank).diagnosis == "not implemented"


@pytest.mark.parametrize("key,wrong,name,_", WRONG, ids=[f"{w[0]}: {w[2]}" for w in WRONG])
def test_catalogued_mistake_is_named_from_the_record(key, wrong, name, _):
    assert_named_from_the_record(key, wrong, name)
