"""Helpers for nbgrader's gradebook that every process of the grading wing may import (a leaf:
it imports nothing of the course's), and the class's late policy (:class:`LatePolicy`, nbgrader's
late-submission plugin :class:`LatePolicyPlugin`)."""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass


@contextlib.contextmanager
def quiet_sqlalchemy():
    """Silence SQLAlchemy's autoflush warnings that nbgrader's own gradebook code triggers."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module="nbgrader")
        warnings.filterwarnings("ignore", message=".*not in session.*")
        yield


# ---- the late policy: nbgrader's late-submission plugin, with the policies instructors use ----

POLICY_FORMAT = ("'none' (lateness only shown), 'zero' (the notebook scores 0), or a share of "
                 "the notebook's score per day or hour late, every started day or hour counted "
                 "(e.g. '10%/day', '2%/hour')")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, option: str = "--grace") -> float:
    """Seconds in a duration such as ``15m``, ``2h``, ``1d12h``, ``90s`` or ``0``; raises
    ``ValueError`` naming ``option`` and the format.

    >>> parse_duration("15m"), parse_duration("1d12h"), parse_duration("0")
    (900.0, 129600.0, 0.0)
    """
    import re

    text = text.strip().lower()
    parts = re.fullmatch(r"(?:\d+(?:\.\d+)?[smhdw])+", text)
    if text == "0":
        return 0.0
    if not parts:
        raise ValueError(f"{option}: {text!r} is not a duration; expected a number and a "
                         "unit, s, m, h, d or w, e.g. 15m, 2h, 1d12h")
    return float(sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([smhdw])",
                                                                   text)))


def _percent(text: str, option: str) -> float:
    """``"50%"`` (or ``"50"``) -> 0.5; raises ``ValueError`` outside 0-100%."""
    try:
        value = float(text.strip().removesuffix("%")) / 100
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise ValueError(f"{option}: {text!r} is not a percentage from 0% to 100%")
    return value


@dataclass(frozen=True)
class LatePolicy:
    """What a late notebook loses, as nbgrader's ``late_submission_penalty``: a share of the
    notebook's score (what nbgrader's plugin is given), never more than ``1 - floor`` of it.

    ``method``: ``none``, ``zero`` (the whole score) or ``rate`` (``rate`` per ``unit``
    seconds, every started unit counted, counted from the due date). Lateness up to ``grace``
    seconds is on time. A submission late by an unknown amount (the LMS marked it late, no
    time known: ``inf``) loses the most the policy takes.

    >>> p = LatePolicy.parse("10%/day", floor="50%", grace="15m")
    >>> p.penalty(16, 600), p.penalty(16, 3600), p.penalty(16, 86400 + 1), p.penalty(16, 9e9)
    (None, 1.6, 3.2, 8.0)
    >>> print(p.describe())
    10%/day of the notebook's score, every started day counted, at most 50%; grace 15m
    """

    method: str = "zero"
    rate: float = 0.0
    unit: str = "day"
    floor: float = 0.0
    grace: float = 0.0
    text: tuple[str, str, str] = ("zero", "", "")  # the options as given

    @classmethod
    def parse(cls, penalty: str = "zero", floor: str | None = None,
              grace: str | None = None) -> LatePolicy:
        """From ``--late-penalty``, ``--late-floor`` and ``--grace``; raises ``ValueError``."""
        penalty = (penalty or "zero").strip().lower().replace(" ", "")
        floor_share = _percent(floor, "--late-floor") if floor else 0.0
        grace_s = parse_duration(grace) if grace else 0.0
        text = (penalty, floor or "", grace or "")
        if penalty in ("none", "zero"):
            return cls(penalty, 0.0, "day", floor_share, grace_s, text)
        share, sep, unit = penalty.partition("/")
        unit = {"d": "day", "day": "day", "h": "hour", "hour": "hour"}.get(unit, "")
        if not sep or not unit or not share.endswith("%"):
            raise ValueError(f"--late-penalty: {penalty!r} is not a late policy; expected "
                             f"{POLICY_FORMAT}")
        return cls("rate", _percent(share, "--late-penalty"), unit, floor_share, grace_s, text)

    def share(self, seconds_late: float) -> float:
        """The share of the score a notebook ``seconds_late`` loses (0 to ``1 - floor``).

        >>> LatePolicy.parse("zero", floor="40%").share(1), LatePolicy.parse("none").share(1)
        (0.6, 0.0)
        >>> LatePolicy.parse("2%/hour").share(3600 * 2.5)  # three started hours
        0.06
        """
        if seconds_late <= self.grace or self.method == "none":
            return 0.0
        if self.method == "zero":
            lost = 1.0
        else:
            units = math.ceil(seconds_late / (86400 if self.unit == "day" else 3600)) \
                if math.isfinite(seconds_late) else math.inf
            lost = min(1.0, self.rate * units) if self.rate else 0.0
        return round(min(lost, 1.0 - self.floor), 6)

    def penalty(self, score: float | None, seconds_late: float) -> float | None:
        """nbgrader's ``late_submission_penalty`` of a notebook scoring ``score``: None when
        on time (or within the grace period, or no policy), else the points lost."""
        if seconds_late <= 0 or seconds_late <= self.grace or self.method == "none":
            return None
        return round((score or 0.0) * self.share(seconds_late), 4)

    def describe(self) -> str:
        """The policy in words (``--dry-run``, the report)."""
        if self.method == "none":
            what = "no late penalty (lateness only shown)"
        elif self.method == "zero":
            what = "a late notebook loses its whole score"
        else:
            what = (f"{self.rate * 100:g}%/{self.unit} of the notebook's score, every started "
                    f"{self.unit} counted")
        if self.floor and self.method != "none":
            what += f", at most {(1 - self.floor) * 100:g}%"
        if self.grace:
            what += f"; grace {self.text[2]}"
        return what


def plugin_class():
    """:class:`LatePolicyPlugin`, made on first use (nbgrader's import takes about 2 s)."""
    global _PLUGIN
    if _PLUGIN is None:
        from nbgrader.plugins import LateSubmissionPlugin
        from traitlets import Unicode

        class LatePolicyPlugin(LateSubmissionPlugin):
            """nbgrader's late-submission plugin with course-grade's :class:`LatePolicy`
            (OUT_DIR's nbgrader_config.py names it), so formgrader's autograde agrees."""

            penalty = Unicode("zero", help=POLICY_FORMAT).tag(config=True)
            floor = Unicode("", help="the share of its score a late notebook keeps").tag(
                config=True)
            grace = Unicode("", help="lateness that counts as on time (15m, 2h)").tag(
                config=True)

            def policy(self) -> LatePolicy:
                return LatePolicy.parse(self.penalty, self.floor, self.grace)

            def late_submission_penalty(self, student_id, score, total_seconds_late):
                return self.policy().penalty(score, total_seconds_late)

        LatePolicyPlugin.__module__ = __name__
        _PLUGIN = LatePolicyPlugin
    return _PLUGIN


_PLUGIN = None


def show_penalised_scores() -> None:
    """Make the ``score`` of formgrader's lists the penalised one, as the exports give it
    (less ``late_submission_penalty``, at least 0). Called from OUT_DIR's nbgrader_config.py,
    so only the processes started there show it; the gradebook and nbgrader's own sums stay
    raw."""
    from nbgrader import api
    from sqlalchemy import func

    if getattr(api, "_penalised_scores", False):
        return
    api._penalised_scores = True
    notebook, assignment = api.SubmittedNotebook, api.SubmittedAssignment

    def less(rows: list[dict], penalty: dict, key: str = "id") -> list[dict]:
        for row in rows:
            if penalty.get(row[key]):
                row["score"] = max(0.0, (row["score"] or 0.0) - penalty[row[key]])
        return rows

    def to_dict(original):
        def penalised(self):
            return less([original(self)], {self.id: self.late_submission_penalty})[0]
        return penalised

    def dicts(original, query):
        def penalised(self, *args):
            return less(original(self, *args), dict(query(self.db).all()))
        return penalised

    for model in (notebook, assignment):
        model.to_dict = to_dict(model.to_dict)
    gb = api.Gradebook
    gb.submission_dicts = dicts(gb.submission_dicts, lambda db: db.query(
        notebook.assignment_id, func.sum(notebook.late_submission_penalty)).group_by(
        notebook.assignment_id))
    gb.notebook_submission_dicts = dicts(gb.notebook_submission_dicts, lambda db: db.query(
        notebook.id, notebook.late_submission_penalty))
    gb.student_dicts = dicts(gb.student_dicts, lambda db: db.query(
        assignment.student_id, func.sum(notebook.late_submission_penalty)).join(
        notebook, notebook.assignment_id == assignment.id).group_by(assignment.student_id))


def __getattr__(name: str):
    # nbgrader (traitlets' import_item) finds the plugin by name, without this module
    # importing nbgrader on course-grade's start
    if name == "LatePolicyPlugin":
        return plugin_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
