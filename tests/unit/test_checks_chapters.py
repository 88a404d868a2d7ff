"""Every chapter's checks in the kernel: right answers pass, every catalogued mistake is named.

Written once over the chapters 01-07 (``helpers/answer_sets.py``); each chapter's answers
(``helpers/answers/<module>.py``) are written as a student would, independently of the
catalogue in ``autograder/checks/<module>.py``. ``test_checks_catalogue.py`` makes sure no
catalogue entry is left without a wrong answer; ``test_verdict_chapters.py`` judges the same
answers through the grader's record. A chapter's own behaviour (switched-off built-ins, its
cases) is tested in its ``test_checks_<module>.py``.
"""

import pytest

from autograder.checks import hidden_check, table
from autograder.checks._core import registered

from helpers.answer_sets import (
    CHAPTERS,
    answers,
    named_alone,
    public,
    right_answers,
    wrong_answers,
)
from helpers.catalogue import assert_mistake_named, assert_not_named_for_the_others

# the wrong answers overflow and divide by zero on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::UserWarning")

RIGHT = right_answers()
WRONG = wrong_answers()
ALONE = named_alone()


@pytest.mark.parametrize("chapter,key", RIGHT, ids=[k for _, k in RIGHT])
def test_right_answers_pass_visible_and_hidden(chapter, key, capsys):
    good, check = answers(chapter).GOOD[key], table.by_key(key).declaration()
    public(key)(good)
    hidden_check(key, good)
    assert capsys.readouterr().out.count(f"✔ {check.exercise}") == 2


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_has_a_public_check_and_a_registered_hidden_one(chapter):
    checks = answers(chapter).CHECKS
    assert set(registered()) >= set(checks) and set(answers(chapter).GOOD) <= set(checks)
    for key in checks:
        assert callable(public(key)), key


@pytest.mark.parametrize("key,wrong,name,graded_only", WRONG,
                         ids=[f"{w[0]}: {w[2]}" for w in WRONG])
def test_catalogued_mistake_is_named(key, wrong, name, graded_only):
    check = table.by_key(key).declaration()
    assert_mistake_named(check, key, wrong, name, public=None if graded_only else public(key))


@pytest.mark.parametrize("key,name", ALONE, ids=[f"{k}: {n}" for k, n in ALONE])
def test_an_issue_32_entry_names_no_other_mistake_of_its_exercise(key, name):
    rows = [w for w in WRONG if w[0] == key]
    assert_not_named_for_the_others(key, name, rows)
