"""The late policies instructors use (issue 48, item 3), as pure functions: a grace period, a
penalty per day or per hour late with a floor, ``none`` and ``zero``, per-student extensions
from a CSV, the LMS's late mark, and the class's settings that keep them
(``grading/gradebook.py``'s :class:`LatePolicy`, ``grading/parent/times.py``,
``grading/parent/settings.py``). The gradebook, grades.csv, the exports and the report agree:
``test_submission_times.py``; a course-grade run: ``tests/grading/test_grade_term.py``."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from autograder.grading.gradebook import LatePolicy, parse_duration
from autograder.grading.parent import settings
from autograder.grading.parent.submissions import Submission
from autograder.grading.parent.times import (
    EXTENDED_MARK,
    EXTENSION,
    LATE_POLICY,
    MARKED,
    Timing,
    extension_of,
    late_cause,
    lateness,
    parse_extensions,
    resolve_extensions,
)

HOUR, DAY = 3600, 86400
DUE = datetime(2026, 12, 1, 22, 59, tzinfo=UTC)


def test_per_day_every_started_day_counts_down_to_the_floor():
    p = LatePolicy.parse("10%/day", floor="50%")
    assert [p.penalty(20, s) for s in (0, 1, DAY, DAY + 1, 3 * DAY - 1, 5 * DAY, 9 * DAY)] == \
        [None, 2.0, 2.0, 4.0, 6.0, 10.0, 10.0]  # at most half of 20: the floor
    assert p.penalty(20, math.inf) == 10.0  # marked late, time unknown: the most it takes
    assert p.penalty(0, DAY) == 0.0  # a notebook that scored 0 loses nothing


def test_per_hour_and_without_floor_up_to_the_whole_score():
    p = LatePolicy.parse("2%/hour")
    assert [p.penalty(50, s) for s in (1, HOUR, HOUR + 1, 49 * HOUR, 60 * HOUR)] == \
        [1.0, 1.0, 2.0, 49.0, 50.0]
    assert LatePolicy.parse("25%/h").penalty(8, 3 * HOUR) == 6.0  # short unit names


def test_grace_forgives_then_lateness_counts_from_the_due_date():
    p = LatePolicy.parse("10%/day", grace="15m")
    assert p.penalty(10, 8) is None and p.penalty(10, 15 * 60) is None  # 8 s, 15 min: on time
    assert p.penalty(10, 15 * 60 + 1) == 1.0  # just past the grace: one started day
    assert p.penalty(10, DAY + 15 * 60 + 1) == 2.0  # counted from the due date, not the grace
    assert LatePolicy.parse("zero", grace="1h").penalty(16, 59 * 60) is None


def test_none_and_zero_are_kept_and_zero_takes_a_floor():
    assert LatePolicy.parse("none").penalty(16, DAY) is None
    assert LatePolicy.parse("zero").penalty(16, 8) == 16  # the student, 8 s late
    assert LatePolicy.parse("zero", floor="25%").penalty(16, 8) == 12.0
    assert LatePolicy.parse("none", floor="50%").describe() == \
        "no late penalty (lateness only shown)"


@pytest.mark.parametrize("penalty, floor, grace, said", [
    ("10", None, None, "--late-penalty: '10' is not a late policy"),
    ("10%/week", None, None, "--late-penalty: '10%/week' is not a late policy"),
    ("150%/day", None, None, "--late-penalty: '150%' is not a percentage"),
    ("10%/day", "120%", None, "--late-floor: '120%' is not a percentage"),
    ("10%/day", None, "15 minutes", "--grace: '15 minutes' is not a duration"),
])
def test_a_malformed_policy_is_named_with_the_format(penalty, floor, grace, said):
    with pytest.raises(ValueError) as e:
        LatePolicy.parse(penalty, floor, grace)
    assert str(e.value).startswith(said)


def test_help_names_the_policies(capsys):
    from autograder.grade import main

    with pytest.raises(SystemExit) as e:
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0 and "(e.g. '10%/day', '2%/hour')" in text and "50%: the" in text


def test_durations():
    assert [parse_duration(t) for t in ("90s", "15m", "2h", "1d12h", "1w", "1.5h", "0")] == \
        [90, 900, 7200, 129600, 604800, 5400, 0]


def _sub(student: str, lms_id: str = "") -> Submission:
    return Submission(student=student, name=student.title(), lms_id=lms_id, origin=None,
                      path=None)


def test_extensions_csv_relative_absolute_and_for_every_assignment():
    exts = parse_extensions("student,assignment,due\n"
                            "ann,*,+2d\n"
                            "ann,01_attention,2026-12-04T00:59+01:00\n"
                            "1002,02_masking,+36h\n"
                            "bob,,+0\n")
    found, messages = resolve_extensions(exts, [_sub("ann"), _sub("maria_1002", "1002")],
                                         ["bob", "cy"])
    assert messages == []  # bob: graded before, absent from this folder, matched by id
    assert extension_of(found, "ann", "01_attention").delta(DUE) == timedelta(days=2, hours=1)
    assert extension_of(found, "ann", "02_masking").delta(DUE) == timedelta(days=2)
    assert extension_of(found, "maria_1002", "02_masking").delta(DUE) == timedelta(hours=36)
    assert extension_of(found, "maria_1002", "01_attention") is None
    assert extension_of(found, "bob", "01_attention").delta(DUE) == timedelta(0)  # taken back
    assert extension_of(found, "ann", "x").delta(None) is None  # no due date: nothing to extend
    assert (late_cause(found, "ann", "x"), late_cause(found, "cy", "x")) == \
        (EXTENSION, LATE_POLICY)


def test_extensions_csv_errors_and_unknown_students():
    for text, said in (("who,due\nann,+1d\n", "line 1: the header"),
                       ("student,assignment,due\nann,*,tomorrow\n", "line 2: 'tomorrow' is"),
                       ("student,assignment,due\nann,*,+1d\nann,*,+2d\n", "line 3: a second"),
                       ("student,assignment,due\nann,*,+2 days\n", "--extensions line 2: ")):
        with pytest.raises(ValueError, match=said):
            parse_extensions(text)
    _, messages = resolve_extensions(parse_extensions("student,assignment,due\nzed,*,+1d\n"),
                                     [_sub("ann")], [])
    assert messages == ["--extensions line 2: no student 'zed' (skipped)"]


def test_an_extension_moves_the_due_date_and_the_lms_mark_needs_a_time():
    late = Timing(DUE + timedelta(days=1, hours=1))
    assert lateness(late, DUE)[1] == DAY + HOUR
    assert lateness(late, DUE + timedelta(days=2), extended=True) == ("", 0.0)
    marked = Timing(marked_late=True)  # Canvas marks against the class's due date
    assert lateness(marked, DUE) == (MARKED, math.inf)
    assert lateness(marked, DUE + timedelta(days=2), extended=True) == (EXTENDED_MARK, 0.0)


def test_the_late_policy_is_kept_with_the_class(tmp_path):
    settings.write(tmp_path, {"late_penalty": "10%/day", "late_floor": "50%", "grace": "15m",
                              "extensions": "ext.csv"})
    kept = settings.read(tmp_path)
    assert kept["extensions"] == str((tmp_path.cwd() / "ext.csv").resolve())
    resolved, said = settings.resolve({"grace": "0"}, kept)
    assert (resolved["late_penalty"], resolved["late_floor"], resolved["grace"]) == \
        ("10%/day", "50%", "0")  # an option given again changes the kept one
    assert said == ["--late-penalty 10%/day", "--late-floor 50%",
                    f"--extensions {kept['extensions']}"]


def test_a_class_graded_before_settings_were_kept_keeps_its_config_penalty(tmp_path):
    """An OUT_DIR whose only record of ``--late-penalty none`` is the nbgrader_config.py an
    older course-grade wrote: a run without the option keeps it, instead of zeroing."""
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.LateSubmissionPlugin.penalty_method = 'none'\n")
    assert settings.read(tmp_path) == {"late_penalty": "none"}
    assert settings.read(tmp_path / "nowhere") == {}


def test_nbgraders_own_autograde_uses_the_same_policy(tmp_path):
    """OUT_DIR's nbgrader_config.py names the plugin: nbgrader's AssignLatePenalties (what
    formgrader's autograde runs) gives the penalty course-grade gives."""
    from nbgrader.preprocessors import AssignLatePenalties
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.grading.config import GradeConfig
    from autograder.grading.parent.results import write_course_config

    policy = LatePolicy.parse("10%/day", "50%", "15m")
    write_course_config(tmp_path, GradeConfig(cell_timeout=10), policy)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
    pre = AssignLatePenalties(config=config)
    pre.init_plugin()
    assert [pre.plugin_inst.late_submission_penalty("s", 20, s)
            for s in (60, 20 * 60, DAY + HOUR, 30 * DAY)] == \
        [policy.penalty(20, s) for s in (60, 20 * 60, DAY + HOUR, 30 * DAY)] == \
        [None, 2.0, 4.0, 10.0]
