"""Shared assertions for the check libraries' mistake catalogues (tests/unit/test_checks_*.py).

Every catalogued mistake is fed to the check as a wrong implementation written the way a
student would; the message must name it. And no catalogue entry may go untested.
"""

import pytest

from autograder.checks._core import CheckFailed, NotImplementedYet, hidden_check


def assert_mistake_named(check, key, wrong, name, public=None, graded=None):
    """``wrong`` fails the graded path (``graded(key, wrong)``, default ``hidden_check``) and,
    when ``public`` is given, the visible check too, each naming ``name``."""
    graded = graded or hidden_check
    runs = [lambda f: graded(key, f)] + ([public] if public is not None else [])
    for run in runs:
        with pytest.raises(CheckFailed) as info:
            run(wrong)
        msg = str(info.value)
        assert not isinstance(info.value, NotImplementedYet)
        assert f"Likely mistake: {name}." in msg, msg
        assert msg.startswith(check.exercise)


def assert_every_entry_tested(checks, tested):
    """``tested``: the (key, mistake name) pairs the test file feeds to the checks."""
    tested = set(tested)
    for key, check in checks.items():
        for entry in (*check.mistakes, *check.error_hints):
            assert (key, entry.name) in tested, f"untested catalogue entry: {key}: {entry.name}"


def assert_cases_visible_and_hidden(checks):
    """Every check is registered under its key and has visible and hidden cases."""
    for key, check in checks.items():
        assert check.key == key
        assert any(c.hidden for c in check.cases) and any(not c.hidden for c in check.cases)


def assert_stubs_not_implemented(checks):
    """A stub that raises NotImplementedError gets "not implemented yet" from every check."""

    def stub(*a, **k):
        raise NotImplementedError()

    for key in checks:
        with pytest.raises(NotImplementedYet, match="is not implemented yet"):
            hidden_check(key, stub)
