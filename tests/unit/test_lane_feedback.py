"""A student's feedback never depends on their other notebooks' grading (issue 31, item 5).

One assignment that nbgrader could not grade used to end the student's grading with
``return status or feedback.wait()``: the pages of the assignments graded before it were
never waited for, and the grading process's ``os._exit`` dropped them (a student scored 16/16
on 01 and got no feedback at all, because 02 could not be graded).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

from autograder.grading.autograde import nbgrader_main


class _Feedback:
    """Stands in for nbgrader_main._Feedback: records what was asked and waited for."""

    made: list = []

    def __init__(self, config):
        self.submitted, self.waited = [], False
        _Feedback.made.append(self)

    def submit(self, student, assignment):
        self.submitted.append(assignment)

    def wait(self):
        self.waited = True
        return 0


def _grade(monkeypatch, codes: dict[str, int]) -> tuple[int, _Feedback]:
    api = types.ModuleType("nbgrader.apps")
    api.NbGraderAPI = lambda config, log: object()
    monkeypatch.setitem(sys.modules, "nbgrader.apps", api)
    monkeypatch.setattr(nbgrader_main, "_Feedback", _Feedback)
    monkeypatch.setattr(nbgrader_main, "_grade_one",
                        lambda api, root, student, a, sources, arm: codes[a])
    _Feedback.made = []
    status = nbgrader_main._grade_in_turn(None, "s1", list(codes), Path("."),
                                          dict.fromkeys(codes, []), lambda a: None, None)
    return status, _Feedback.made[0]


def test_pages_of_graded_assignments_are_waited_for_after_a_failed_one(monkeypatch):
    status, feedback = _grade(monkeypatch, {"01_attention": 0, "02_masking": 2, "03_mha": 0})
    assert status == 2  # the failure is still reported
    assert feedback.submitted == ["01_attention", "03_mha"]
    assert feedback.waited  # before the process ends: no page is dropped


def test_a_failed_first_assignment_still_lets_the_next_ones_have_pages(monkeypatch):
    status, feedback = _grade(monkeypatch, {"01_attention": 1, "02_masking": 0})
    assert status == 1 and feedback.submitted == ["02_masking"] and feedback.waited


def test_all_graded(monkeypatch):
    status, feedback = _grade(monkeypatch, {"01_attention": 0})
    assert status == 0 and feedback.submitted == ["01_attention"] and feedback.waited
