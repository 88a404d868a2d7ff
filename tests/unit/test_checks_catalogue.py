"""What every chapter's checks must satisfy, over the exercise table (one test per chapter).

The wrong answers live in each chapter's ``test_checks_<module>.py`` (``WRONG``: rows whose
first item is the check key and third the mistake's name); here each chapter's catalogue is
held against them, and each check against the shape every check has.
"""

import importlib

import pytest

from autograder.checks import table

from helpers.catalogue import (
    assert_cases_visible_and_hidden,
    assert_every_entry_tested,
    assert_stubs_not_implemented,
)

CHAPTERS = sorted(table.TABLES)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_check_has_visible_and_hidden_cases(chapter):
    assert_cases_visible_and_hidden(table.declarations(chapter))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_catalogued_mistake_is_tested(chapter):
    tests = importlib.import_module(f"helpers.answers.{table.chapter(chapter).module}")
    assert_every_entry_tested(table.declarations(chapter), {(w[0], w[2]) for w in tests.WRONG})


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_stub_is_not_implemented_yet(chapter):
    assert_stubs_not_implemented(table.declarations(chapter))
