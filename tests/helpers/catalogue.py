"""Shared assertions for the check libraries' mistake catalogues (tests/unit/test_checks_*.py).

Every catalogued mistake is fed to the check as a wrong implementation written the way a
student would; the message must name it. And no catalogue entry may go untested.
"""

import functools

import pytest

from autograder.checks._core import CheckFailed, NotImplementedYet, hidden_check

# hidden_check(key, wrong)'s outcome by (key, wrong): the exception it raised, None if none
_OUTCOMES: dict = {}


def _hidden_outcome(key, wrong):
    """What ``hidden_check(key, wrong)`` raised (None: nothing), run once per process for each
    (key, wrong answer): a check is deterministic (its cases and probes are seeded), and the
    catalogue tests hold one wrong answer's message against several names (its own, and in
    :func:`assert_not_named_for_the_others` each other entry of its exercise)."""
    if (key, wrong) not in _OUTCOMES:
        outcome = None
        try:
            hidden_check(key, wrong)
        except Exception as e:  # kept, and raised again where it is read
            outcome = e
        _OUTCOMES[key, wrong] = outcome
    return _OUTCOMES[key, wrong]


def _hidden(key, wrong):
    """``hidden_check(key, wrong)``, its outcome computed once (:func:`_hidden_outcome`)."""
    try:
        hash(wrong)
    except TypeError:
        return hidden_check(key, wrong)
    outcome = _hidden_outcome(key, wrong)
    if outcome is not None:
        raise outcome


def assert_mistake_named(check, key, wrong, name, public=None, graded=None):
    """``wrong`` fails the graded path (``graded(key, wrong)``, default ``hidden_check``) and,
    when ``public`` is given, the visible check too, each naming ``name``."""
    graded = graded or _hidden
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


def visible_cases_pass(check, mistake) -> bool:
    """Whether catalogued ``mistake`` passes every visible case of ``check``: on each, its
    output equals the expected one as the check compares it (a gradient case: the forward
    output, and for a gradient mistake, ``Mistake.grad``, its gradients too; a mistake that
    cannot run on a case, as where it needs a mask the case lacks, is the right answer there,
    as the catalogue's own diagnosis treats it)."""
    import torch

    from autograder.checks._core import (
        _compare,
        _compare_arrays,
        _mistake_grads,
        _mistake_output,
    )

    for case in (c for c in check.cases if not c.hidden):
        try:
            wrong = _mistake_output(mistake, case)
        except Exception:
            continue
        if case.kind == "grad":
            if type(wrong) in (tuple, list):
                wrong = wrong[0]
            if type(wrong) is not torch.Tensor or _compare_arrays(case.expected[0], wrong, case):
                return False
            if mistake.grad and any(
                _compare_arrays(e, g, case) for e, g in
                zip(case.expected[1], _mistake_grads(mistake, case))):
                return False
        elif _compare(case.expected, wrong, case) is not None:
            return False
    return True


@functools.cache
def _released(chapter: str):
    """The released notebook of ``chapter``, read once per process (``exercise_text`` is asked
    ~460 times while test_checks_catalogue.py is collected: 2-4 s of CPU per xdist worker when
    each call read it again). Callers only read it."""
    import nbformat

    from autograder import release

    return nbformat.read(release.RELEASE / chapter / f"{chapter}.ipynb", as_version=4)


@functools.cache
def exercise_text(chapter: str, number: str) -> str:
    """What the student's notebook says about exercise ``number`` of ``chapter``: from its
    heading (goal, hint) through its answer cell (the docstring), lower-cased, one space."""
    import re

    from autograder.checks import table

    ex = table.exercise(chapter, number)
    nb = _released(chapter)
    heading = re.compile(rf"^### Exercise {re.escape(number)}\b.*$", re.M)
    start = next(i for i, c in enumerate(nb.cells)
                 if c.cell_type == "markdown" and heading.search(c.source))
    end = next(i for i, c in enumerate(nb.cells)
               if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == ex.solution_id)
    first = nb.cells[start].source
    parts = [first[heading.search(first).start():]]
    parts += [c.source for c in nb.cells[start + 1:end + 1]]
    return " ".join(" ".join(parts).lower().split())


def assert_not_named_for_the_others(key, name, wrong_rows, graded=None):
    """Catalogue entry ``name`` of check ``key`` names none of the other wrong answers of its
    exercise (``wrong_rows``: a chapter's ``WRONG``): its condition fires on its own mistake
    only."""
    graded = graded or _hidden
    others = [w for w in wrong_rows if w[0] == key and w[2] != name]
    assert others, f"{key}: no other wrong answer to hold {name!r} against"
    for w in others:
        with pytest.raises(CheckFailed) as info:
            graded(key, w[1])
        assert f"Likely mistake: {name}." not in str(info.value), (w[2], str(info.value))
