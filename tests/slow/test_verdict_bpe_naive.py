"""07's naive BPE trainer: each catalogued mistake judged from its record, as ``course-grade``
judges it (``helpers.verdict.judged``: case inputs -> probe record -> judge).

Each wrong trainer runs every case, hidden ones included (0.7-3.3 s of CPU each, 13 s for
the 14), so they run here. The unit tier keeps one of them judged from the record
(``NAIVE_BPE_KEPT``, in tests/unit/test_verdict_chapters.py), every one named in process
(tests/unit/test_checks_chapters.py) and the naive trainer's solution and blank judged from
the record.
"""

from __future__ import annotations

import pytest

from autograder.checks import table

from helpers.answer_sets import wrong_answers
from helpers.verdict import NAIVE_BPE_KEPT, assert_named_from_the_record

NAIVE = table.keys("07_bpe")["train_bpe_naive"]
ROWS = [w for w in wrong_answers() if w[0] == NAIVE]
HERE = [w for w in ROWS if w[2] != NAIVE_BPE_KEPT]


def test_the_unit_tier_keeps_one_of_the_catalogue():
    assert len(HERE) == len(ROWS) - 1 and len(HERE) > 10


@pytest.mark.parametrize("key,wrong,name,_", HERE, ids=[f"{w[0]}: {w[2]}" for w in HERE])
def test_catalogued_mistake_is_named_from_the_record(key, wrong, name, _):
    assert_named_from_the_record(key, wrong, name)
